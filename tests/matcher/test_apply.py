"""``Engine.publish_batch`` / ``delete_batch`` (``matcher/apply.py``) against the same operations
applied one at a time (``publish``/``delete``, ``publish_affected``/``delete_affected``) and
against the brute-force oracle, for every strategy of every kind and ``"auto"``.

Random programs are lists of batches (publishes or deletes) over a small id pool, few join keys
and small times, so that pairs inside a batch, duplicates inside a batch and against stored
tuples, late events, retention moving mid-batch and rejected events between accepted ones are
common; INVALID entries (NaN, inf, bad side, empty id, a time beyond int64) are mixed in.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import pytest
from engine_harness import (
    BAND_STRATEGY_NAMES,
    SELECT_STRATEGY_NAMES,
    TIME_SETTINGS,
    WINDOW_STRATEGY_NAMES,
    harness_settings,
)
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.matcher import (
    BandJoin,
    DuplicateEventError,
    Engine,
    Event,
    EventStatus,
    LateEventError,
    Range,
    SelectJoin,
    UnknownEventError,
    WindowJoin,
)
from hotjoin.matcher.oracle import OracleEngine

OK, LATE, DUP, INVALID, NOT_FOUND = (int(s) for s in EventStatus)
IDS = ("a", "b", "c", "d", "e")
BAD_TIME = 2**63  # does not fit in int64


# ---- random programs ----------------------------------------------------------------------------
def _range(draw: Any, lo: float, hi: float) -> Range:
    a, b = sorted(draw(st.integers(int(lo), int(hi))) for _ in range(2))
    return Range(float(a), float(b)) if draw(st.booleans()) else Range(None, float(b))


@st.composite
def subscriptions(draw: Any, kind: str) -> list[Any]:
    out: list[Any] = []
    for _ in range(draw(st.integers(1, 5))):
        k = kind if kind != "mixed" else draw(st.sampled_from(["select", "band", "window"]))
        a, c = _range(draw, 0, 6), _range(draw, 0, 6)
        if k == "select":
            out.append(SelectJoin(a, c))
        elif k == "band":
            lo = draw(st.integers(-2, 1))
            out.append(BandJoin(Range(float(lo), float(lo + draw(st.integers(0, 2)))), a, c))
        else:
            out.append(WindowJoin(a, c, w=draw(st.integers(0, 4))))
    return out


@st.composite
def publish_row(draw: Any) -> tuple[Any, ...]:
    side = draw(st.sampled_from("RS"))
    ev = [side, side.lower() + draw(st.sampled_from(IDS)), float(draw(st.integers(0, 3))),
          float(draw(st.integers(0, 6))), draw(st.integers(0, 14))]
    bad = draw(st.integers(0, 14))
    if bad == 1:
        ev[2] = float("nan")
    elif bad == 2:
        ev[3] = float("inf")
    elif bad == 3:
        ev[0] = "X"
    elif bad == 4:
        ev[1] = ""
    elif bad == 5:
        ev[4] = BAD_TIME
    return tuple(ev)


@st.composite
def delete_row(draw: Any) -> tuple[Any, ...]:
    side = draw(st.sampled_from("RS"))
    ev = [side, side.lower() + draw(st.sampled_from(IDS))]
    bad = draw(st.integers(0, 12))
    if bad == 1:
        ev[0] = "Q"
    elif bad == 2:
        ev[1] = ""
    return tuple(ev)


batches = st.lists(
    st.one_of(st.tuples(st.just("publish"), st.lists(publish_row(), min_size=0, max_size=12)),
              st.tuples(st.just("delete"), st.lists(delete_row(), min_size=0, max_size=4))),
    min_size=1, max_size=6)


# ---- one at a time ------------------------------------------------------------------------------
def _status_of(exc: BaseException | None) -> int:
    if exc is None:
        return OK
    if isinstance(exc, LateEventError):
        return LATE
    if isinstance(exc, DuplicateEventError):
        return DUP
    if isinstance(exc, UnknownEventError):
        return NOT_FOUND
    assert isinstance(exc, ValueError), exc
    return INVALID


def _one(engine: Any, op: str, row: tuple[Any, ...], how: str) -> tuple[int, int, Counter]:
    """Apply one row; returns (status, seq or 0, output multiset)."""
    seq0 = engine.seq
    try:
        if op == "publish":
            ev = Event(*row)
            if how == "affected":
                a = engine.publish_affected(ev)
                out = Counter(dict(zip(a.subscription_ids.tolist(), a.counts.tolist(), strict=True)))
            else:
                out = Counter((d.subscription_id, d.sign, d.r_id, d.s_id)
                              for d in engine.publish(ev))
        else:
            if how == "affected":
                a = engine.delete_affected(*row)
                out = Counter(dict(zip(a.subscription_ids.tolist(), a.counts.tolist(), strict=True)))
            else:
                out = Counter((d.subscription_id, d.sign, d.r_id, d.s_id)
                              for d in engine.delete(*row))
    except Exception as exc:  # the rejection is what is compared
        assert engine.seq == seq0
        return _status_of(exc), 0, Counter()
    return OK, engine.seq, out


def _batch_rows(res: Any, n: int, how: str) -> list[Counter]:
    out = [Counter() for _ in range(n)]
    o = res.output
    assert np.all(np.diff(o.event) >= 0), "rows not in sequence order"
    if how == "pairs":
        assert np.array_equal(o.count, o.sign.astype(np.int64))
        for e, q, sg, r, s in zip(o.event.tolist(), o.subscription.tolist(), o.sign.tolist(),
                                  o.r_id.tolist(), o.s_id.tolist(), strict=True):
            out[e][(q, sg, r, s)] += 1
    else:
        assert o.r_id is None and o.s_id is None
        for e, q, c in zip(o.event.tolist(), o.subscription.tolist(), o.count.tolist(),
                           strict=True):
            assert (q not in out[e]), "one AFFECTED row per event and subscription"
            out[e][q] = c
    return out


def _columns(op: str, rows: list[tuple[Any, ...]]) -> list[list[Any]]:
    return [list(c) for c in zip(*rows, strict=True)] if rows else ([[]] * (5 if op == "publish" else 2))


def _stored(engine: Any, side: str) -> dict[str, tuple[float, float, int]]:
    if isinstance(engine, OracleEngine):
        return {i: (e.key, e.value, e.time) for i, e in engine.stored(side).items()}
    t = engine.tables[side]
    return {i: (float(t.keys[s]), float(t.values[s]), int(t.times[s])) for i, s in t.slot_of.items()}


def run_program(factory: Any, lateness: int, retention: int | None, subs: list[Any],
                program: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
    """Batch engines (pairs, affected) vs one-at-a-time engines (pairs, affected) vs oracle."""
    bp, ba, op_, oa = (factory(lateness, retention) for _ in range(4))
    oracle = OracleEngine(lateness, retention)
    for e in (bp, ba, op_, oa, oracle):
        e.subscribe_many(subs)
    for step, (op, rows) in enumerate(program):
        cols = _columns(op, rows)
        call = bp.publish_batch if op == "publish" else bp.delete_batch
        res_p = call(*cols, output="pairs")
        call = ba.publish_batch if op == "publish" else ba.delete_batch
        res_a = call(*cols, output="affected")
        n = len(rows)
        assert res_p.status.dtype == np.int8 and res_p.seq.dtype == np.int64
        assert res_p.status.shape == res_p.seq.shape == (n,)
        got_p, got_a = _batch_rows(res_p, n, "pairs"), _batch_rows(res_a, n, "affected")
        for i, row in enumerate(rows):
            ctx = f"step {step} {op} row {i} {row}"
            st_p, seq_p, want_p = _one(op_, op, row, "pairs")
            st_a, seq_a, want_a = _one(oa, op, row, "affected")
            st_o, seq_o, want_o = _one(oracle, op, row, "pairs")
            assert st_p == st_a == st_o, ctx
            assert int(res_p.status[i]) == st_o, ctx
            assert int(res_a.status[i]) == st_o, ctx
            assert int(res_p.seq[i]) == int(res_a.seq[i]) == seq_o == seq_p, ctx
            assert (i in res_p.reasons) == (st_o != OK), ctx
            assert got_p[i] == want_p == want_o, ctx
            assert got_a[i] == want_a, ctx
            if st_o == OK:  # AFFECTED counts are the PAIRS rows summed per subscription
                sums = Counter()
                for (q, sg, _r, _s), c in want_o.items():
                    sums[q] += sg * c
                assert got_a[i] == Counter({q: c for q, c in sums.items() if c}), ctx
        for e in (bp, ba, op_, oa):
            assert (e.seq, e.watermark) == (oracle.seq, oracle.watermark), f"after step {step}"
            for side in "RS":
                assert _stored(e, side) == _stored(oracle, side), f"after step {step} {side}"
    for e in (bp, ba):
        e.check_invariants()


def _strategies() -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = [("mixed", "auto")]
    for kind, names in (("select", SELECT_STRATEGY_NAMES + ("SJ-Dynamic",)),
                        ("band", BAND_STRATEGY_NAMES + ("BJ-Dynamic",)),
                        ("window", WINDOW_STRATEGY_NAMES + ("WJ-Dynamic",))):
        out += [(kind, {kind: name}) for name in names]
        out.append((kind, "auto"))
    return out


@pytest.mark.parametrize(("kind", "strategy"), _strategies(),
                         ids=lambda x: x if isinstance(x, str) else next(iter(x.values())))
def test_batch_equals_one_at_a_time_and_oracle(kind: str, strategy: Any) -> None:
    """Random batches: statuses, seqs, pairs, affected counts, stored tuples, clock all agree."""

    @harness_settings(25)
    @given(subs=subscriptions(kind), program=batches,
           clock=st.sampled_from(TIME_SETTINGS))
    def check(subs: list[Any], program: Any, clock: tuple[int, int | None]) -> None:
        run_program(lambda L, R: Engine(lateness=L, retention=R, strategy=strategy),
                    clock[0], clock[1], subs, program)

    check()


# ---- the batch path's own cases, on purpose -----------------------------------------------------
def _mixed_subs() -> list[Any]:
    return [SelectJoin(), BandJoin(Range(-1.0, 1.0)), WindowJoin(w=3),
            SelectJoin(Range(0.0, 2.0), Range(3.0, None))]


def _case(lateness: int, retention: int | None,
          program: list[tuple[str, list[tuple[Any, ...]]]]) -> None:
    for strategy in ("auto", {"select": "SJ-SSI", "band": "BJ-Hotspot", "window": "WJ-Hotspot"}):
        run_program(lambda L, R, s=strategy: Engine(lateness=L, retention=R, strategy=s),
                    lateness, retention, _mixed_subs(), program)


def test_pairs_inside_a_batch() -> None:
    _case(0, None, [("publish", [("R", "r1", 1.0, 1.0, 1), ("S", "s1", 1.0, 4.0, 2),
                                 ("S", "s2", 1.5, 0.0, 3), ("R", "r2", 1.0, 1.0, 4)])])
    e = Engine()
    e.subscribe(SelectJoin())
    res = e.publish_batch(["R", "S"], ["r", "s"], [1.0, 1.0], [0.0, 0.0], [1, 2], output="pairs")
    assert res.output.event.tolist() == [1] and res.output.r_id.tolist() == ["r"]


def test_lateness_and_retention_move_mid_batch() -> None:
    # time 10 moves W to 8: the event at 7 is late, at 8 is not; retention 1 drops r1 (time 1)
    # once W > 2, so s1 (key 1, time 9) forms no pair with it, and "r1" may be published again
    prog = [("publish", [("R", "r1", 1.0, 1.0, 1), ("S", "s0", 1.0, 1.0, 2),
                         ("S", "s1", 2.0, 1.0, 10), ("R", "r2", 1.0, 1.0, 7),
                         ("R", "r3", 1.0, 1.0, 8), ("S", "s2", 1.0, 1.0, 9),
                         ("R", "r1", 1.0, 5.0, 9)])]
    _case(2, 1, prog)
    e = Engine(lateness=2, retention=1)
    e.subscribe(SelectJoin())
    res = e.publish_batch(*_columns(*prog[0]))
    assert res.status.tolist() == [OK, OK, OK, LATE, OK, OK, OK]
    assert sorted(e.tables["R"].slot_of) == ["r1", "r3"]


@pytest.mark.parametrize("strategy", ["auto", {"band": "BJ-SSI"}, {"band": "BJ-Hotspot"},
                                      {"band": "BJ-QOuter"}, {"select": "SJ-SSI"},
                                      {"window": "WJ-SSI"}])
def test_a_long_run_matches_while_retention_expires_its_partners(strategy: Any) -> None:
    """One run of 16 R events whose rising times expire the stored S tuples one after another
    (retention 3, lateness 1): the run is matched in stretches between expiries,
    each event seeing exactly what it would one at a time; ids come back after expiring."""
    subs = [BandJoin(Range(-1.0, 1.0)), BandJoin(Range(0.0, 3.0), Range(1.0, 5.0)),
            BandJoin(Range(-2.0, 0.0)), SelectJoin(), SelectJoin(Range(0.0, 3.0)),
            WindowJoin(w=4), WindowJoin(Range(2.0, None), w=2)]
    stored = [("S", f"s{i}", float(i % 4), float(i % 6), i) for i in range(10)]
    run = [("R", f"r{i}", float(i % 5), float(i % 7), 6 + i) for i in range(16)]
    run[9] = ("R", "r3", 1.0, 2.0, 15)  # a duplicate inside the run
    again = [("S", "s0", 2.0, 2.0, 22), ("R", "r0", 2.0, 3.0, 22)]  # expired ids back
    run_program(lambda L, R: Engine(lateness=L, retention=R, strategy=strategy), 1, 3, subs,
                [("publish", stored), ("publish", run), ("publish", again)])


@harness_settings(40)
@given(los=st.lists(st.integers(-6, 6), min_size=2, max_size=8), program=batches,
       clock=st.sampled_from(TIME_SETTINGS), n_stored=st.integers(0, 40))
def test_hotspot_scattered_ranges_in_a_batch(los: list[int], program: Any,
                                             clock: tuple[int, int | None],
                                             n_stored: int) -> None:
    """BJ-Hotspot with α = 0.3: four bands around 0 form a hotspot, narrow spread bands are
    scattered. The batch path's hot rows (``ssi_many``), compiled QOuter over the scattered
    ranges (many stored tuples) and per-event BJ-MJ (few) agree with one at a time and the
    oracle, and each event's rows stay together in event order."""
    subs = [BandJoin(Range(-1.0 + k / 4, 1.0)) for k in range(4)]
    subs += [BandJoin(Range(lo / 2, lo / 2 + 0.5), Range(None, 4.0) if lo % 3 == 0 else Range())
             for lo in los]
    stored = [("S", f"x{i}", float(i % 4), float(i % 7), 0) for i in range(n_stored)]
    run_program(lambda L, R: Engine(lateness=L, retention=R, strategy={"band": "BJ-Hotspot"},
                                    options={"alpha": 0.3}),
                clock[0], clock[1], subs, [("publish", stored), *program])


@pytest.mark.parametrize("strategy", ["auto", {"band": "BJ-SSI", "select": "SJ-Hotspot",
                                               "window": "WJ-SSI"}])
@pytest.mark.parametrize("retention", [None, 6])
def test_delete_runs_are_matched_as_runs(strategy: Any, retention: int | None) -> None:
    """A delete batch of long same-side runs (matched one ``match_many`` per kind and run, then
    removed), with unknown ids and an id deleted twice in between."""
    stored = ([("R", f"r{i}", float(i % 3), float(i % 5), i) for i in range(12)]
              + [("S", f"s{i}", float(i % 4), float(i % 6), 12 + i) for i in range(12)])
    deletes = ([("R", f"r{i}") for i in range(0, 12, 2)] + [("R", "nope"), ("R", "r0")]
               + [("S", f"s{i}") for i in range(1, 12, 2)] + [("R", "r11"), ("S", "s0")])
    run_program(lambda L, R: Engine(lateness=L, retention=R, strategy=strategy), 2, retention,
                _mixed_subs(), [("publish", stored), ("delete", deletes)])


def test_duplicates_inside_a_batch_and_against_stored() -> None:
    prog = [("publish", [("R", "r1", 1.0, 1.0, 5)]),
            ("publish", [("R", "r1", 1.0, 1.0, 6), ("S", "s1", 1.0, 1.0, 6),
                         ("S", "s1", 1.0, 1.0, 7), ("R", "s1", 1.0, 1.0, 7)])]
    _case(0, None, prog)
    e = Engine()
    e.subscribe(SelectJoin())
    e.publish_batch(*_columns(*prog[0]))
    res = e.publish_batch(*_columns(*prog[1]))
    assert res.status.tolist() == [DUP, OK, DUP, OK]
    assert res.seq.tolist() == [0, 3, 0, 4]


def test_duplicate_that_is_also_late_is_duplicate() -> None:
    e = Engine(lateness=0)
    res = e.publish_batch(["R", "R", "R"], ["x", "y", "x"], [1.0] * 3, [1.0] * 3, [5, 9, 1])
    assert res.status.tolist() == [OK, OK, DUP]
    assert "already exists" in res.reasons[2]
    res = e.publish_batch(["R"], ["z"], [1.0], [1.0], [1])
    assert res.status.tolist() == [LATE] and "late" in res.reasons[0]
    _case(0, None, [("publish", [("R", "x", 1.0, 1.0, 5), ("R", "y", 1.0, 1.0, 9),
                                 ("R", "x", 1.0, 1.0, 1)])])


def test_deletes_inside_a_batch() -> None:
    prog = [("publish", [("R", "r1", 1.0, 1.0, 1), ("S", "s1", 1.0, 4.0, 2),
                         ("S", "s2", 1.0, 0.0, 3)]),
            ("delete", [("S", "s1"), ("S", "s1"), ("R", "nope"), ("R", "r1"), ("S", "s2")]),
            ("publish", [("R", "r1", 1.0, 1.0, 4), ("S", "s1", 1.0, 4.0, 4)])]
    _case(0, None, prog)
    e = Engine()
    e.subscribe(SelectJoin())
    e.publish_batch(*_columns(*prog[0]))
    res = e.delete_batch(*_columns(*prog[1]), output="pairs")
    assert res.status.tolist() == [OK, NOT_FOUND, NOT_FOUND, OK, OK]
    # s1 retracts (r1, s1); r1 then retracts (r1, s2); s2 has no partner left
    assert res.output.sign.tolist() == [-1, -1] and res.output.event.tolist() == [0, 3]
    assert (res.output.r_id.tolist(), res.output.s_id.tolist()) == (["r1", "r1"], ["s1", "s2"])


def test_rejected_between_accepted_and_invalid_change_nothing() -> None:
    rows = [("R", "r1", 1.0, 1.0, 1), ("R", "bad", float("nan"), 1.0, 2),
            ("S", "s1", 1.0, 1.0, 3), ("S", "s2", 1.0, math.inf, 3), ("X", "q", 1.0, 1.0, 3),
            ("S", "", 1.0, 1.0, 3), ("S", "big", 1.0, 1.0, BAD_TIME), ("S", "s3", 1.0, 1.0, 4)]
    _case(1, None, [("publish", rows)])
    e = Engine(lateness=1)
    e.subscribe(SelectJoin())
    res = e.publish_batch(*_columns("publish", rows), output="pairs")
    assert res.status.tolist() == [OK, INVALID, OK, INVALID, INVALID, INVALID, INVALID, OK]
    assert res.seq.tolist() == [2, 0, 3, 0, 0, 0, 0, 4]
    assert set(res.reasons) == {1, 3, 4, 5, 6}
    assert e.watermark == 3 and e.seq == 4
    assert res.output.event.tolist() == [2, 7]


def test_empty_batch_and_batch_of_one() -> None:
    e = Engine()
    e.subscribe(SelectJoin())
    for output in ("pairs", "affected", "none"):
        res = e.publish_batch([], [], [], [], [], output=output)
        assert res.status.shape == (0,) and len(res.output) == 0 and e.seq == 1
        res = e.delete_batch([], [], output=output)
        assert res.status.shape == (0,) and e.seq == 1
    res = e.publish_batch(np.array([1], dtype=np.int8), ["s"], np.array([2.0]), np.array([0.0]),
                          np.array([7], dtype=np.int64))
    assert res.status.tolist() == [OK] and res.seq.tolist() == [2]
    assert "s" in e.tables["S"] and e.watermark == 7
    _case(0, None, [("publish", []), ("publish", [("S", "s", 2.0, 0.0, 7)]), ("delete", []),
                    ("delete", [("S", "s")])])


def test_output_none_changes_the_state_only() -> None:
    a, b = Engine(), Engine()
    for e in (a, b):
        e.subscribe(SelectJoin())
    cols = _columns("publish", [("R", "r", 1.0, 0.0, 1), ("S", "s", 1.0, 0.0, 2)])
    res = a.publish_batch(*cols, output="none")
    b.publish_batch(*cols, output="pairs")
    assert len(res.output) == 0 and res.status.tolist() == [OK, OK]
    assert a.delete_batch(["R"], ["r"], output="pairs").output.s_id.tolist() == ["s"]


def test_length_mismatch_raises_before_anything_changes() -> None:
    e = Engine()
    e.subscribe(SelectJoin())
    with pytest.raises(ValueError, match="different lengths"):
        e.publish_batch(["R", "S"], ["r"], [1.0, 1.0], [0.0, 0.0], [1, 2])
    with pytest.raises(ValueError, match="different lengths"):
        e.publish_batch(["R"], ["r"], [1.0], [0.0], [1], payloads=[b"", b""])
    with pytest.raises(ValueError, match="different lengths"):
        e.delete_batch(["R", "S"], ["r"])
    with pytest.raises(ValueError, match="output must be"):
        e.publish_batch(["R"], ["r"], [1.0], [0.0], [1], output="everything")
    assert e.seq == 1 and len(e.tables["R"]) == 0 and e.watermark is None


def test_payloads_are_stored() -> None:
    e = Engine()
    e.publish_batch(["R", "S"], ["r", "s"], [1.0, 2.0], [0.0, 0.0], [1, 2], [b"x", None])
    assert e.get_event("R", "r").payload == b"x" and e.get_event("S", "s").payload == b""


def test_integer_sides_bad_payload_and_bad_time_types_are_invalid() -> None:
    e = Engine()
    res = e.publish_batch(np.array([0, 2, 1, 1, 0], dtype=np.int64), ["r", "x", "s", "p", "t"],
                          [1.0, 1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0],
                          [1, 1, 2, 3, 1.5], [b"", b"", b"", "text", b""])
    assert res.status.tolist() == [OK, INVALID, OK, INVALID, INVALID]
    assert "side" in res.reasons[1] and "payload" in res.reasons[3] and "time" in res.reasons[4]
    assert sorted(e.tables["R"].slot_of) == ["r"] and sorted(e.tables["S"].slot_of) == ["s"]
    res = e.publish_batch(["R", "S"], ["k", "v"], ["1.0", True], [0.0, None], [4, 4])
    assert res.status.tolist() == [INVALID, INVALID] and e.seq == 2


@pytest.mark.parametrize("clock", [(0, None), (2, 3)])
def test_batch_and_one_at_a_time_calls_interleave_on_one_engine(clock: tuple[int, Any]) -> None:
    """The batch path leaves the engine in a state the one-at-a-time calls continue from."""
    import random

    rnd = random.Random(7)
    e, oracle = Engine(lateness=clock[0], retention=clock[1]), OracleEngine(*clock)
    for x in (e, oracle):
        x.subscribe_many(_mixed_subs())
    for step in range(40):
        rows = [(rnd.choice("RS"), rnd.choice("RS").lower() + rnd.choice(IDS),
                 float(rnd.randint(0, 3)), float(rnd.randint(0, 6)), step + rnd.randint(-3, 3))
                for _ in range(rnd.randint(0, 5))]
        if step % 2:
            res = e.publish_batch(*_columns("publish", rows), output="pairs")
            got = _batch_rows(res, len(rows), "pairs")
            for i, row in enumerate(rows):
                st_o, seq_o, want = _one(oracle, "publish", row, "pairs")
                assert (int(res.status[i]), int(res.seq[i]), got[i]) == (st_o, seq_o, want)
        else:
            for row in rows:
                assert _one(e, "publish", row, "pairs") == _one(oracle, "publish", row, "pairs")
            side, x = rnd.choice("RS"), rnd.choice(IDS)
            assert _one(e, "delete", (side, side.lower() + x), "pairs") == \
                _one(oracle, "delete", (side, side.lower() + x), "pairs")
        assert (e.seq, e.watermark) == (oracle.seq, oracle.watermark)
    e.check_invariants()


def test_publish_admitted_applies_given_seqs_and_clocks_and_refuses_bad_input() -> None:
    """``publish_admitted`` (the key-partitioned workers' call): events take the given seqs and
    are matched under the given topic clock; bad columns, seqs or clocks change nothing."""
    e = Engine(lateness=0, retention=5)
    sid = e.subscribe(SelectJoin())
    out = e.publish_admitted(["R", "S"], ["r", "s"], [1.0, 1.0], [0.0, 0.0], [10, 10], None,
                             [5, 9], [10, 10], output="pairs")
    assert out.event.tolist() == [1] and out.subscription.tolist() == [sid]
    assert e.seq == 9 and e.watermark == 10
    # the topic's clock (30, from events on other workers) expires r and s before s2 matches
    out = e.publish_admitted(["S"], ["s2"], [1.0], [0.0], [26], None, [12], [30], output="pairs")
    assert len(out) == 0 and e.get_event("R", "r") is None and e.watermark == 30
    for bad in ([[11], [30]], [[13, 13], [30, 30]], [[13], [29]], [[13], [20]]):
        n = len(bad[0])
        with pytest.raises(ValueError):
            e.publish_admitted(["R"] * n, [f"x{i}" for i in range(n)], [1.0] * n, [0.0] * n,
                               [30 - i for i in range(n)][::-1] if n > 1 else [25], None, *bad)
    with pytest.raises(ValueError, match="invalid"):
        e.publish_admitted(["R"], ["y"], [math.nan], [0.0], [30], None, [13], [30])
    assert e.seq == 12 and e.get_event("R", "x0") is None and e.get_event("R", "y") is None


# ---- the select batch kernels (``*_many``) and the router inside the batch ---------------------
@pytest.mark.parametrize("sf_cost", [0.0, 1e9])
def test_select_hotspot_scattered_part_in_a_batch(sf_cost: float) -> None:
    """SJ-Hotspot with α = 0.3: selections around 0 form a hotspot, narrow spread ones are
    scattered; ``scattered_sf_cost`` 0 sends every event's scattered part to SJ-SelectFirst's
    tree (``sj_select_first_many``), 1e9 most to the scattered stabbing groups
    (``sj_scan_many``)."""
    subs = [SelectJoin(Range(0.0, 6.0), Range(-1.0 + k / 4, 1.0 + k)) for k in range(4)]
    subs += [SelectJoin(Range(float(k % 4), float(k % 4 + 2)), Range(k / 2, k / 2 + 0.5))
             for k in range(-6, 7)]
    stored = [("S", f"x{i}", float(i % 4), float(i % 7) / 2, 0) for i in range(30)]
    run = [("R", f"r{i}", float(i % 4), float(i % 7), 1) for i in range(40)]
    run_program(lambda L, R: Engine(lateness=L, retention=R, strategy={"select": "SJ-Hotspot"},
                                    options={"alpha": 0.3, "scattered_sf_cost": sf_cost}),
                0, None, subs, [("publish", stored), ("publish", run)])
    e = Engine(strategy={"select": "SJ-Hotspot"},
               options={"alpha": 0.3, "scattered_sf_cost": sf_cost})
    e.subscribe_many(subs)
    e.publish_batch(*_columns("publish", stored + run))
    choices = e.stats()["select"]["scattered_choices"]
    assert choices["SJ-SelectFirst" if sf_cost == 0.0 else "SJ-SSI"] > 0, choices
    if sf_cost == 0.0:  # (with 1e9, a tuple selecting no scattered range still takes the tree)
        assert choices["SJ-SSI"] == 0, choices


@pytest.mark.parametrize("options", [{}, {"router_feedback": False}])
def test_select_dynamic_long_runs_with_timed_tuples_and_refreshes(options: dict[str, Any]) -> None:
    """Runs of 150 tuples with partners: SJ-Dynamic decides them in stretches between timed
    tuples and plan refreshes (every 64), members matching theirs in one call each; the
    output is that of one at a time and of the oracle, and the members' counts add up."""
    import random

    rnd = random.Random(3)
    subs = [SelectJoin(Range(float(a), float(a + rnd.randint(0, 4))),
                       Range(float(c), float(c + rnd.randint(0, 4))))
            for a, c in ((rnd.randint(0, 6), rnd.randint(0, 6)) for _ in range(60))]
    stored = [("S", f"s{i}", float(i % 5), float(rnd.randint(0, 9)), 0) for i in range(80)]
    runs = [[("R", f"r{b}_{i}", float(rnd.randint(0, 5)), float(rnd.randint(0, 9)), 0)
             for i in range(150)] for b in range(3)]
    run_program(lambda L, R: Engine(lateness=L, retention=R, strategy={"select": "SJ-Dynamic"},
                                    options=options),
                0, None, subs, [("publish", stored)] + [("publish", r) for r in runs])
    e = Engine(strategy={"select": "SJ-Dynamic"}, options=options)
    e.subscribe_many(subs)
    e.publish_batch(*_columns("publish", stored))
    before = sum(e.select.counts)
    for r in runs:
        e.publish_batch(*_columns("publish", r))
    with_partners = sum(1 for r in runs for row in r if row[2] <= 4.0)  # keys 0..4 stored
    assert sum(e.select.counts) - before == with_partners
    e.check_invariants()


@pytest.mark.parametrize("options", [{}, {"router_feedback": False}])
def test_window_dynamic_long_runs_with_timed_tuples_and_refreshes(
        options: dict[str, Any]) -> None:
    """WJ-Dynamic over runs of 150 out-of-order tuples with partners: decided in stretches by
    ``window_run`` between timed tuples and plan refreshes, each member matching its tuples
    in one call (WJ-SelectFirst, WJ-JoinFirst) or per tuple (WJ-SSI, WJ-Hotspot); the output
    is that of one at a time and of the oracle."""
    import random

    rnd = random.Random(5)
    subs = [WindowJoin(Range(float(a), float(a + rnd.randint(0, 4))),
                       Range(float(c), float(c + rnd.randint(0, 4))), w=rnd.randint(0, 30))
            for a, c in ((rnd.randint(0, 6), rnd.randint(0, 6)) for _ in range(50))]
    stored = [("S", f"s{i}", float(i % 5), float(rnd.randint(0, 9)), rnd.randint(0, 60))
              for i in range(80)]
    runs = [[("R", f"r{b}_{i}", float(rnd.randint(0, 5)), float(rnd.randint(0, 9)),
              60 + rnd.randint(0, 20)) for i in range(150)] for b in range(3)]
    run_program(lambda L, R: Engine(lateness=L, retention=R, strategy={"window": "WJ-Dynamic"},
                                    options=options),
                25, None, subs, [("publish", stored)] + [("publish", r) for r in runs])
    e = Engine(lateness=25, strategy={"window": "WJ-Dynamic"}, options=options)
    e.subscribe_many(subs)
    e.publish_batch(*_columns("publish", stored))
    before = sum(e.window.counts)
    for r in runs:
        e.publish_batch(*_columns("publish", r))
    assert sum(e.window.counts) - before == sum(1 for r in runs for row in r if row[2] <= 4.0)
    e.check_invariants()


@pytest.mark.parametrize("strategy", ["WJ-SSI", "WJ-Hotspot"])
def test_window_ssi_batches_keep_skylines_in_one_compiled_call(
        strategy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """WJ-SSI and WJ-Hotspot on the batch path: runs of 120 tuples, in and out of order, over
    30 keys whose skylines outgrow the store's first pool (it grows and compacts inside the
    kernel), with S batches inserting into current skylines and deletes of skyline points
    between them. Output as one at a time and as the oracle; the batches never take the
    one-tuple matcher; both the stored skylines and one-pass skylines are probed."""
    import random

    from hotjoin.matcher.joins import window as window_mod

    rnd = random.Random(11)
    subs = [WindowJoin(Range(float(a), float(a + rnd.randint(0, 3))),
                       Range(float(c), float(c + rnd.randint(0, 2))), w=rnd.randint(2, 40))
            for a, c in ((rnd.randint(0, 30), rnd.choice((5, 12, 20, 26))) for _ in range(60))]
    stored = [("S", f"s{i}", float(i % 30), float(rnd.randint(0, 30)), i // 3)
              for i in range(600)]
    program: list[tuple[str, list[tuple[Any, ...]]]] = [("publish", stored)]
    t = 200
    for b in range(4):
        program.append(("publish", [("R", f"r{b}_{i}", float(rnd.randint(0, 31)),
                                     float(rnd.randint(0, 30)), t + i // 4 - rnd.randint(0, 9))
                                    for i in range(120)]))
        t += 30
        program.append(("publish", [("S", f"n{b}_{i}", float(rnd.randint(0, 29)),
                                     float(rnd.randint(0, 30)), t - rnd.randint(0, 3))
                                    for i in range(40)]))
        program.append(("delete", [("S", f"n{b}_{i}") for i in range(0, 40, 7)]
                        + [("S", f"s{i}") for i in range(560 + b, 600, 9)]))
    run_program(lambda L, R: Engine(lateness=L, retention=R, strategy={"window": strategy}),
                12, None, subs, program)

    def per_tuple(*a: Any, **k: Any) -> str:
        raise AssertionError("the batch path matched a tuple through the one-tuple matcher")

    one = Engine(lateness=12, strategy={"window": strategy})
    e = Engine(lateness=12, strategy={"window": strategy})
    for x in (one, e):
        x.subscribe_many(subs)
    affected = 0
    for op, rows in program:
        want = [_one(one, op, row, "affected")[2] for row in rows]
        with monkeypatch.context() as mp:
            mp.setattr(window_mod, "run_window_ssi", per_tuple)
            res = (e.publish_batch if op == "publish" else e.delete_batch)(
                *_columns(op, rows), output="affected")
        assert _batch_rows(res, len(rows), "affected") == want, op
        affected += sum(len(w) for w in want)
    assert affected > 200
    skies = e.window.skies
    probes = {k: skies[1].probes()[k] + skies[-1].probes()[k] for k in ("stored", "one-pass")}
    assert probes["stored"] > 300 and probes["one-pass"] > 20, probes
    assert skies[1].inserts > 50 and skies[1].trims > 50 and skies[1].recomputes > 20
    assert skies[1].pool[0].shape[0] > 256  # grown: compacted inside a kernel
    e.check_invariants()


@pytest.mark.parametrize(("kind", "strategy"),
                         [("select", n) for n in ("SJ-SelectFirst", "SJ-SSI", "SJ-Vanilla",
                                                  "SJ-Hotspot", "SJ-JoinFirst", "SJ-Dynamic")]
                         + [("window", n) for n in ("WJ-SelectFirst", "WJ-JoinFirst", "WJ-SSI",
                                                    "WJ-Hotspot", "WJ-Dynamic")])
def test_batch_outgrows_its_row_buffers(kind: str, strategy: str) -> None:
    """300 select (200 window) joins all affected by each of 30 events with partners (9,000
    AFFECTED rows and 27,000 pairs for select): the ``*_many`` kernels stop for room and
    resume (IDENTIFY/COUNT) or rerun the event that overflowed (PAIRS), or grow the row arrays
    with the event column following (window, SJ-JoinFirst), until every row is out in event order. Every
    fourth event has no partner, and a band join that never matches makes the engine hand
    those to the strategy too, which must skip them and tag rows by position."""
    subs: list[Any]
    if kind == "select":
        subs = [SelectJoin(Range(0.0, 10.0 + k), Range(None, 5.0 + k % 3)) for k in range(300)]
    else:
        subs = [WindowJoin(Range(0.0, 10.0 + k), Range(None, 5.0 + k % 3), w=50 + k)
                for k in range(200)]
    subs.append(BandJoin(Range(100.0, 101.0)))
    stored = [("S", f"s{i}", 1.0, float(i), i) for i in range(3)]
    run = [("R", f"r{i}", 1.0 if i % 4 else 2.0, float(i % 10), 5 + i % 3) for i in range(40)]
    for how in ("affected", "pairs"):
        e, one = (Engine(lateness=5, strategy={kind: strategy}) for _ in range(2))
        for x in (e, one):
            x.subscribe_many(subs)
            x.publish_batch(*_columns("publish", stored))
        res = e.publish_batch(*_columns("publish", run), output=how)
        got = _batch_rows(res, len(run), how)
        for i, row in enumerate(run):
            assert got[i] == _one(one, "publish", row, how)[2], (how, i)
        assert len(res.output) == 30 * (len(subs) - 1) * (3 if how == "pairs" else 1)


@pytest.mark.parametrize("strategy", ["BJ-QOuter", "BJ-MJ", "BJ-DOuter", "BJ-SSI", "BJ-Hotspot",
                                      "BJ-Dynamic"])
def test_band_batches_run_in_compiled_calls_and_outgrow_their_buffers(
        strategy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """200 band joins all affected by each of 30 events with partners in both runs of the
    table (a stored main run and a delta of newer tuples): every band strategy matches a
    batch in its multi-event kernel, never through a one-tuple matcher, and the kernels stop
    for room and resume (IDENTIFY/COUNT) or rerun the event that overflowed (PAIRS). Every
    fourth event has no partner (its key is 3 away from every stored key, beyond every band)."""
    from hotjoin.matcher.joins import band as band_mod

    def per_tuple(*a: Any, **k: Any) -> None:
        raise AssertionError("the batch path matched a band tuple through a one-tuple matcher")

    subs = [BandJoin(Range(-0.5 - 0.01 * (k % 5), 0.5 + 0.01 * k), Range(0.0, 10.0 + k),
                     Range(None, 5.0 + k % 3)) for k in range(200)]
    stored = ([("S", f"s{i}", 1.0, float(i), i) for i in range(3)]
              + [("S", f"f{i}", 100.0 + i, 0.0, 3) for i in range(400)])  # beyond every band
    newer = [("S", f"t{i}", 1.0, float(i), 3 + i) for i in range(2)]
    run = [("R", f"r{i}", 1.0 if i % 4 else 4.0, float(i % 10), 5 + i % 3) for i in range(40)]
    for how in ("affected", "pairs"):
        e, one = (Engine(lateness=5, strategy={"band": strategy}) for _ in range(2))
        for x in (e, one):
            x.subscribe_many(subs)
            x.publish_batch(*_columns("publish", stored))
            x.publish_batch(*_columns("publish", newer))
        main_keys, _, delta_keys, _ = e.tables["S"].order.runs()
        assert main_keys.shape[0] and delta_keys.shape[0]  # partners in both runs
        want = [_one(one, "publish", row, how)[2] for row in run]
        with monkeypatch.context() as mp:
            for name in ("run_qouter", "run_merge_join"):
                mp.setattr(band_mod, name, per_tuple)
            for cls in (band_mod.QOuter, band_mod.MergeJoin, band_mod.DOuter, band_mod.SSI,
                        band_mod.Hotspot):
                mp.setattr(cls, "match", per_tuple)
            res = e.publish_batch(*_columns("publish", run), output=how)
        assert _batch_rows(res, len(run), how) == want, how
        assert len(res.output) == 30 * 200 * (5 if how == "pairs" else 1)


# ---- probe_batch: the batch path's matching without storing (bench router --batch) -----------
@pytest.mark.parametrize(("kind", "strategy"), _strategies(),
                         ids=lambda x: x if isinstance(x, str) else next(iter(x.values())))
def test_probe_batch_equals_probe_per_tuple_and_changes_nothing(kind: str, strategy: Any) -> None:
    """Per tuple, ``probe_batch`` counts what ``probe`` counts (affected: subscriptions;
    pairs: pairs), for tuples of either side after a random program; no table changes."""

    @harness_settings(20)
    @given(subs=subscriptions(kind), program=batches, clock=st.sampled_from(TIME_SETTINGS),
           probes=st.lists(st.tuples(st.sampled_from("RS"), st.integers(-1, 4),
                                     st.integers(0, 6), st.none() | st.integers(0, 14)),
                           max_size=10))
    def check(subs: list[Any], program: Any, clock: tuple[int, int | None],
              probes: list[tuple[str, int, int, int | None]]) -> None:
        e = Engine(lateness=clock[0], retention=clock[1], strategy=strategy)
        e.subscribe_many(subs)
        for op, rows in program:
            (e.publish_batch if op == "publish" else e.delete_batch)(*_columns(op, rows))
        before = (e.seq, e.watermark, _stored(e, "R"), _stored(e, "S"))
        for side in "RS":
            mine = [p for p in probes if p[0] == side]
            keys = [float(p[1]) for p in mine]
            vals = [float(p[2]) for p in mine]
            t = None if any(p[3] is None for p in mine) else [p[3] for p in mine]
            for output, mode in (("affected", "identify"), ("pairs", "pairs")):
                got = e.probe_batch(side, keys, vals, t, output=output)
                want = [e.probe(side, k, v, mode, None if t is None else t[i])
                        for i, (k, v) in enumerate(zip(keys, vals, strict=True))]
                assert got.tolist() == want, (side, output, mine)
        assert (e.seq, e.watermark, _stored(e, "R"), _stored(e, "S")) == before

    check()


def test_probe_time_is_the_largest_published_time() -> None:
    """Probes without a time carry the largest event time published so far (0 before any),
    not the last one: a late but accepted event does not move it back."""
    e = Engine(lateness=5)
    assert e.probe_time == 0
    for t, want in ((10, 10), (7, 10), (12, 12)):
        e.publish(Event("S", f"s{t}", 1.0, 2.0, t))
        assert e.probe_time == want
    assert e.watermark == 7


def test_probe_batch_refuses_bad_input() -> None:
    e = Engine()
    with pytest.raises(ValueError, match="'affected' or 'pairs'"):
        e.probe_batch("R", [1.0], [1.0], output="none")
    with pytest.raises(ValueError, match="1 keys but 2 values"):
        e.probe_batch("R", [1.0], [1.0, 2.0])
    assert e.probe_batch("S", [], []).tolist() == []
