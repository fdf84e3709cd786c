"""Tests of the reference oracle (``matcher/oracle.py``) against hand-computed outcomes of the
join predicates (paper 004 §2) and of insert, delete and registration.

The oracle is what every real strategy is checked against (``tests/engine_harness.py``), so its
own behaviour is pinned here case by case: predicate boundaries of each kind, the delete /
registration-time rule, snapshot, lateness, retention, duplicates, validation and batches.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.errors import (
    BatchError,
    DuplicateEventError,
    LateEventError,
    UnknownEventError,
    UnknownSubscriptionError,
)
from hotjoin.matcher.model import BandJoin, Delivery, Event, Range, SelectJoin, WindowJoin
from hotjoin.matcher.oracle import OracleEngine


def ev(side: str, id: str, key: float, value: float = 0.0, time: int = 0) -> Event:
    return Event(side=side, id=id, key=key, value=value, time=time)  # type: ignore[arg-type]


def D(sid: int, sign: int, r: str, s: str) -> Delivery:
    return Delivery(sid, sign, r, s)


def ms(ds: list[Delivery]) -> Counter[Delivery]:
    return Counter(ds)


def snapshot_state(e: OracleEngine) -> tuple[object, ...]:
    return (e.seq, e.watermark, e.stored("R"), e.stored("S"), e.subscriptions())


# ---- predicates at their boundaries (paper 004 §2) -------------------------------------------


def test_select_equal_keys_and_closed_selection_ends() -> None:
    e = OracleEngine()
    q = e.subscribe(SelectJoin(a=Range(1, 3), c=Range(10, 20)))
    assert e.publish(ev("S", "s1", 5, value=10)) == []
    assert e.publish(ev("S", "s2", 5, value=20)) == []
    assert e.publish(ev("S", "s3", 5, value=20.5)) == []  # C upper end exceeded
    assert e.publish(ev("S", "s4", 6, value=15)) == []  # other key
    # r.value exactly at the lower end of A: joins s1 and s2 (C ends hit exactly), not s3, s4.
    assert ms(e.publish(ev("R", "r1", 5, value=1))) == ms([D(q, 1, "r1", "s1"), D(q, 1, "r1", "s2")])
    assert ms(e.publish(ev("R", "r2", 5, value=3))) == ms([D(q, 1, "r2", "s1"), D(q, 1, "r2", "s2")])
    assert e.publish(ev("R", "r3", 5, value=3.0000001)) == []
    assert e.publish(ev("R", "r4", 5.000001, value=2)) == []


def test_select_unbounded_ranges() -> None:
    e = OracleEngine()
    q = e.subscribe(SelectJoin(a=Range(None, 0), c=Range(0, None)))
    e.publish(ev("S", "s", 1.5, value=1e300))
    assert e.publish(ev("R", "r", 1.5, value=-1e300)) == [D(q, 1, "r", "s")]
    assert e.publish(ev("R", "r2", 1.5, value=0.5)) == []


@pytest.mark.parametrize(
    ("r_key", "s_key", "expected"),
    [
        (10.0, 9.0, True),  # s - r == lo == -1
        (10.0, 12.0, True),  # s - r == hi == 2
        (10.0, 10.0, True),  # equal keys, 0 in [-1, 2]
        (10.0, 8.5, False),  # -1.5
        (10.0, 12.5, False),  # 2.5
        (10.0, 8.999999, False),
    ],
)
def test_band_difference_at_ends(r_key: float, s_key: float, expected: bool) -> None:
    e = OracleEngine()
    q = e.subscribe(BandJoin(b=Range(-1, 2)))
    e.publish(ev("R", "r", r_key))
    out = e.publish(ev("S", "s", s_key))
    assert out == ([D(q, 1, "r", "s")] if expected else [])


def test_band_zero_width_and_unbounded() -> None:
    e = OracleEngine()
    q0 = e.subscribe(BandJoin(b=Range(0, 0)))
    qu = e.subscribe(BandJoin())
    qlo = e.subscribe(BandJoin(b=Range(1, None)))
    e.publish(ev("R", "r", 3))
    assert ms(e.publish(ev("S", "s_eq", 3))) == ms([D(q0, 1, "r", "s_eq"), D(qu, 1, "r", "s_eq")])
    assert ms(e.publish(ev("S", "s_far", 1e15))) == ms(
        [D(qu, 1, "r", "s_far"), D(qlo, 1, "r", "s_far")]
    )
    assert e.publish(ev("S", "s_half", 3.5)) == [D(qu, 1, "r", "s_half")]


def test_band_uses_ieee_subtraction() -> None:
    # 0.3 - 0.1 == 0.19999999999999998 != 0.2: the band [0.2, 0.2] must NOT match, while a band
    # whose end is that exact double must.  An engine computing r.key + lo would disagree.
    diff = 0.3 - 0.1
    assert diff != 0.2
    e = OracleEngine()
    q_exact = e.subscribe(BandJoin(b=Range(0.2, 0.2)))
    q_ieee = e.subscribe(BandJoin(b=Range(diff, diff)))
    e.publish(ev("R", "r", 0.1))
    assert e.publish(ev("S", "s", 0.3)) == [D(q_ieee, 1, "r", "s")]
    assert q_exact != q_ieee


def test_band_local_selections() -> None:
    e = OracleEngine()
    q = e.subscribe(BandJoin(b=Range(-1, 1), a=Range(0, 1), c=Range(5, 5)))
    e.publish(ev("S", "s_in", 2, value=5))
    e.publish(ev("S", "s_out", 2, value=5.5))
    assert e.publish(ev("R", "r_in", 1, value=1)) == [D(q, 1, "r_in", "s_in")]
    assert e.publish(ev("R", "r_out", 1, value=1.5)) == []


@pytest.mark.parametrize(("gap", "expected"), [(0, True), (5, True), (6, False), (-5, True), (-6, False)])
def test_window_gap_exactly_w(gap: int, expected: bool) -> None:
    e = OracleEngine(lateness=100)
    q = e.subscribe(WindowJoin(w=5))
    e.publish(ev("R", "r", 7, time=50))
    out = e.publish(ev("S", "s", 7, time=50 + gap))
    assert out == ([D(q, 1, "r", "s")] if expected else [])


def test_window_zero_and_key_and_selection() -> None:
    e = OracleEngine(lateness=100)
    q = e.subscribe(WindowJoin(a=Range(0, 1), c=Range(0, 1), w=0))
    e.publish(ev("R", "r", 7, value=1, time=10))
    assert e.publish(ev("S", "s_t", 7, value=0, time=10)) == [D(q, 1, "r", "s_t")]
    assert e.publish(ev("S", "s_t1", 7, value=0, time=11)) == []
    assert e.publish(ev("S", "s_k", 8, value=0, time=10)) == []
    assert e.publish(ev("S", "s_c", 7, value=2, time=10)) == []


# ---- insert / delete / registration rule ------------------------------------------------------


def test_pair_delivered_once_by_later_tuple_either_side() -> None:
    e = OracleEngine()
    q = e.subscribe(SelectJoin())
    assert e.publish(ev("S", "s", 1)) == []
    assert e.publish(ev("R", "r", 1)) == [D(q, 1, "r", "s")]
    assert e.publish(ev("R", "r2", 1)) == [D(q, 1, "r2", "s")]
    assert ms(e.publish(ev("S", "s2", 1))) == ms([D(q, 1, "r", "s2"), D(q, 1, "r2", "s2")])


def test_delete_retracts_by_registration_time() -> None:
    e = OracleEngine()
    q_before = e.subscribe(SelectJoin())  # seq 1
    e.publish(ev("R", "r", 1))  # seq 2
    q_between = e.subscribe(SelectJoin())  # seq 3: registered before the pair forms
    assert ms(e.publish(ev("S", "s", 1))) == ms(  # seq 4: the pair forms
        [D(q_before, 1, "r", "s"), D(q_between, 1, "r", "s")]
    )
    q_after = e.subscribe(SelectJoin())  # seq 5: never received the pair
    q_snap = e.subscribe(SelectJoin(), snapshot=True)  # seq 6: receives it by snapshot
    assert e.result(q_snap) == [D(q_snap, 1, "r", "s")]
    assert e.result(q_after) == [D(q_after, 1, "r", "s")]  # result() ignores registration
    assert e.seq == 6
    out = e.delete("S", "s")
    assert ms(out) == ms(
        [D(q_before, -1, "r", "s"), D(q_between, -1, "r", "s"), D(q_snap, -1, "r", "s")]
    )
    assert e.seq == 7
    assert e.result(q_snap) == [] and e.result(q_after) == []


def test_delete_formed_at_later_tuple_of_the_pair() -> None:
    # q registers after r and s were both stored: the pair formed before q, so no -1 for q.
    e = OracleEngine()
    e.publish(ev("R", "r", 1))
    e.publish(ev("S", "s", 1))
    q = e.subscribe(SelectJoin())
    e.publish(ev("S", "s2", 1))  # forms (r, s2) after q
    assert e.delete("R", "r") == [D(q, -1, "r", "s2")]


def test_delete_only_pairs_satisfying_predicate_and_moves_no_watermark() -> None:
    e = OracleEngine(lateness=0)
    q = e.subscribe(BandJoin(b=Range(0, 1)))
    e.publish(ev("R", "r", 0, time=10))
    e.publish(ev("S", "s_in", 1, time=20))
    e.publish(ev("S", "s_out", 2, time=30))
    assert e.delete("R", "r") == [D(q, -1, "r", "s_in")]
    assert e.watermark == 30
    assert e.stored("R") == {}
    assert e.delete("S", "s_in") == []


def test_unsubscribed_gets_nothing_and_ids_not_reused() -> None:
    e = OracleEngine()
    q0 = e.subscribe(SelectJoin())
    q1 = e.subscribe(SelectJoin())
    e.publish(ev("R", "r", 1))
    e.unsubscribe(q0)
    assert e.publish(ev("S", "s", 1)) == [D(q1, 1, "r", "s")]
    assert e.subscribe(SelectJoin()) == 2
    with pytest.raises(UnknownSubscriptionError):
        e.unsubscribe(q0)
    with pytest.raises(UnknownSubscriptionError):
        e.result(q0)
    assert e.seq == 6


def test_seq_counts_every_operation_and_ids_in_order() -> None:
    e = OracleEngine()
    assert (e.seq, e.watermark) == (0, None)
    assert e.subscribe_many([SelectJoin(), BandJoin(), WindowJoin()]) == [0, 1, 2]
    assert e.seq == 3
    e.publish(ev("R", "r", 1, time=5))
    e.delete("R", "r")
    e.unsubscribe(1)
    assert e.seq == 6
    assert e.watermark == 5


# ---- lateness and retention -------------------------------------------------------------------


def test_lateness_boundary() -> None:
    e = OracleEngine(lateness=5)
    e.publish(ev("R", "r1", 1, time=100))
    assert e.watermark == 95
    e.publish(ev("R", "r2", 1, time=95))  # exactly at W: accepted
    assert e.watermark == 95  # an older event moves nothing
    before = snapshot_state(e)
    with pytest.raises(LateEventError) as info:
        e.publish(ev("S", "s", 1, time=94))
    assert info.value.watermark == 95
    assert snapshot_state(e) == before
    e.publish(ev("S", "s", 1, time=1000))
    assert e.watermark == 995


def test_first_event_any_time_and_int64_extremes() -> None:
    e = OracleEngine()
    e.publish(ev("R", "r", 1, time=-(2**63)))
    assert e.watermark == -(2**63)
    e.publish(ev("R", "r2", 1, time=2**63 - 1))
    assert e.watermark == 2**63 - 1
    with pytest.raises(LateEventError):
        e.publish(ev("R", "r3", 1, time=0))


def test_retention_boundary_and_silent_drop() -> None:
    e = OracleEngine(lateness=0, retention=10)
    q = e.subscribe(SelectJoin())
    e.publish(ev("R", "r", 1, time=0))
    # W = 10, horizon W - retention = 0: r (time 0) is NOT below it, kept and joined.
    assert e.publish(ev("S", "s", 1, time=10)) == [D(q, 1, "r", "s")]
    # W = 11, horizon 1: r dropped silently (no -1) before s2 is matched.
    assert e.publish(ev("S", "s2", 1, time=11)) == []
    assert set(e.stored("R")) == set()
    assert set(e.stored("S")) == {"s", "s2"}
    assert e.result(q) == []
    with pytest.raises(UnknownEventError):
        e.delete("R", "r")
    # the dropped id can be published again (it is not stored), if not late
    with pytest.raises(LateEventError):
        e.publish(ev("R", "r", 1, time=0))
    assert ms(e.publish(ev("R", "r", 1, time=11))) == ms([D(q, 1, "r", "s"), D(q, 1, "r", "s2")])


def test_retention_zero_with_lateness() -> None:
    e = OracleEngine(lateness=3, retention=0)
    q = e.subscribe(WindowJoin(w=3))
    e.publish(ev("R", "r", 1, time=10))  # W = 7
    e.publish(ev("S", "s_old", 1, time=7))  # at W: accepted, joins r (gap 3)
    assert e.stored("S").keys() == {"s_old"}
    # max 11 -> W 8, horizon 8: s_old (7) dropped, r (10) kept
    assert e.publish(ev("S", "s", 1, time=11)) == [D(q, 1, "r", "s")]
    assert set(e.stored("S")) == {"s"}


def test_retention_drops_are_silent_for_snapshot_too() -> None:
    e = OracleEngine(retention=0)
    e.publish(ev("R", "r", 1, time=0))
    e.publish(ev("S", "s", 1, time=0))
    q = e.subscribe(SelectJoin(), snapshot=True)
    assert e.result(q) == [D(q, 1, "r", "s")]
    assert e.publish(ev("S", "s9", 2, time=1)) == []
    assert e.result(q) == []


# ---- duplicates, unknown ids, validation ------------------------------------------------------


def test_duplicate_rejected_state_unchanged_then_reusable_after_delete() -> None:
    e = OracleEngine(lateness=10)
    q = e.subscribe(SelectJoin())
    e.publish(ev("R", "x", 1, time=5))
    e.publish(ev("S", "x", 1, time=5))  # same id on the other side is a different tuple
    before = snapshot_state(e)
    with pytest.raises(DuplicateEventError):
        e.publish(ev("R", "x", 2, time=50))  # would also move the watermark
    assert snapshot_state(e) == before
    assert e.watermark == -5
    assert e.delete("R", "x") == [D(q, -1, "x", "x")]
    assert e.publish(ev("R", "x", 1, time=6)) == [D(q, 1, "x", "x")]


def test_duplicate_takes_precedence_over_late() -> None:
    e = OracleEngine()
    e.publish(ev("R", "r", 1, time=0))
    e.publish(ev("R", "r2", 1, time=100))
    with pytest.raises(DuplicateEventError):
        e.publish(ev("R", "r", 1, time=0))  # late too, but ALREADY_EXISTS wins (safe retries)


def test_unknown_delete_changes_nothing() -> None:
    e = OracleEngine()
    e.publish(ev("R", "r", 1))
    before = snapshot_state(e)
    with pytest.raises(UnknownEventError):
        e.delete("S", "r")
    with pytest.raises(UnknownEventError):
        e.delete("R", "nope")
    assert snapshot_state(e) == before


def test_engine_validation_errors_change_nothing() -> None:
    e = OracleEngine()
    e.subscribe(SelectJoin())
    e.publish(ev("R", "r", 1))
    before = snapshot_state(e)
    for bad in (
        lambda: e.delete("X", "r"),
        lambda: e.delete("R", ""),
        lambda: e.publish(("R", "r2", 1, 1, 1)),  # type: ignore[arg-type]
        lambda: e.subscribe(Range(0, 1)),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValueError):
            bad()
    assert snapshot_state(e) == before
    for lat, ret in ((-1, None), (0, -1), (1.5, None), (True, None)):
        with pytest.raises(ValueError):
            OracleEngine(lateness=lat, retention=ret)  # type: ignore[arg-type]


# ---- batches ---------------------------------------------------------------------------------


def test_publish_many_batch_error_applies_prefix() -> None:
    e = OracleEngine()
    q = e.subscribe(SelectJoin())
    batch = [
        ev("R", "r1", 1, time=10),
        ev("S", "s1", 1, time=11),
        ev("R", "r1", 1, time=12),  # duplicate
        ev("S", "s2", 1, time=13),
    ]
    with pytest.raises(BatchError) as info:
        e.publish_many(batch)
    assert info.value.index == 2
    assert isinstance(info.value.cause, DuplicateEventError)
    assert info.value.deliveries == [D(q, 1, "r1", "s1")]  # type: ignore[attr-defined]
    assert set(e.stored("R")) == {"r1"} and set(e.stored("S")) == {"s1"}
    assert e.seq == 3 and e.watermark == 11


def test_publish_many_late_inside_batch_and_equal_to_one_at_a_time() -> None:
    batch = [ev("R", "r", 1, time=100), ev("S", "s", 1, time=50)]
    e = OracleEngine()
    with pytest.raises(BatchError) as info:
        e.publish_many(batch)
    assert info.value.index == 1 and isinstance(info.value.cause, LateEventError)

    ok = [ev("R", "r", 1, time=1), ev("S", "s", 1, time=2), ev("S", "s2", 1, time=2)]
    e1, e2 = OracleEngine(), OracleEngine()
    for x in (e1, e2):
        x.subscribe(SelectJoin())
    one = [d for x in ok for d in e1.publish(x)]
    assert e2.publish_many(ok) == one
    assert snapshot_state(e1) == snapshot_state(e2)


def test_subscribe_many_all_or_nothing() -> None:
    e = OracleEngine()
    e.subscribe(SelectJoin())
    with pytest.raises(ValueError):
        e.subscribe_many([SelectJoin(), "junk", BandJoin()])  # type: ignore[list-item]
    assert list(e.subscriptions()) == [0] and e.seq == 1
    assert e.subscribe_many([BandJoin(), BandJoin()], snapshot=True) == [1, 2]
    assert e.subscribe_many([]) == [] and e.seq == 3


# ---- the result invariant, as a property of the oracle ----------------------------------------

_keys = st.integers(0, 3).map(float)
_events = st.tuples(st.sampled_from(["R", "S"]), st.integers(0, 5), _keys)
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("sub"), st.integers(-2, 2), st.integers(0, 3), st.booleans()),
        st.tuples(st.just("pub"), _events),
        st.tuples(st.just("del"), _events),
        st.tuples(st.just("unsub"), st.integers(0, 10)),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(_ops)
def test_invariant_signed_sum_equals_result(ops: list[tuple]) -> None:
    """Without retention, Σ deliveries of q = result(q) restricted to pairs formed after q's
    registration (all pairs with ``snapshot``), and every pair's running sum stays in {0, 1}."""
    e = OracleEngine()
    sums: dict[int, Counter[tuple[str, str]]] = {}
    snap: dict[int, bool] = {}
    formed_at: dict[tuple[str, str], int] = {}
    reg_at: dict[int, int] = {}
    for op in ops:
        if op[0] == "sub":
            lo, width, snapshot = op[1], op[2], op[3]
            sid = e.subscribe(BandJoin(b=Range(lo, lo + width)), snapshot=snapshot)
            sums[sid] = Counter((d.r_id, d.s_id) for d in e.result(sid)) if snapshot else Counter()
            snap[sid], reg_at[sid] = snapshot, e.seq
        elif op[0] == "unsub":
            live = sorted(e.subscriptions())
            if live:
                sid = live[op[1] % len(live)]
                e.unsubscribe(sid)
                del sums[sid]
        else:
            side, n, key = op[1]
            id = f"{side}{n}"
            try:
                out = e.publish(ev(side, id, key)) if op[0] == "pub" else e.delete(side, id)
            except (DuplicateEventError, UnknownEventError):
                continue
            for d in out:
                sums[d.subscription_id][(d.r_id, d.s_id)] += d.sign
                assert sums[d.subscription_id][(d.r_id, d.s_id)] in (0, 1)
                if d.sign == 1:
                    formed_at[(d.r_id, d.s_id)] = e.seq
        for sid, c in sums.items():
            got = {p for p, v in c.items() if v}
            assert all(v in (0, 1) for v in c.values())
            want = {(d.r_id, d.s_id) for d in e.result(sid)}
            if not snap[sid]:
                want = {p for p in want if formed_at.get(p, -1) > reg_at[sid]}
            assert got == want
