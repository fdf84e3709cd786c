"""Every band-join strategy gives the oracle's deliveries (every strategy yields the same
deliveries, as a multiset, for the same operations; paper 004 §3.1 BJ-QOuter/DOuter/MJ/SSI and
the hotspot variant of §3.1.3).

Random programs (``tests/engine_harness.py``) run the engine and ``OracleEngine`` in lockstep and
compare errors, delivery multisets, ``seq``/``watermark`` and snapshot results after every
operation; deterministic cases pin the boundaries. ``HOTJOIN_TEST_ENGINE=oracle`` runs
everything against a second oracle instead, and
``HOTJOIN_HYPOTHESIS_EXAMPLES`` scales the example counts.
"""

from __future__ import annotations

from typing import Any

import pytest
from engine_harness import (
    BAND_KEYS,
    BAND_STRATEGY_NAMES,
    IEEE_BOUNDS,
    IEEE_KEYS,
    D,
    EngineFactory,
    ev,
    harness_settings,
    lockstep,
    multiset,
    programs,
    run_program,
    strategy_factory_fixture,
    subscriptions,
)
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.matcher.errors import DuplicateEventError, LateEventError, UnknownEventError
from hotjoin.matcher.model import BandJoin, Range

HOTSPOT_OPTIONS = {"alpha": 0.2, "epsilon": 1.0}

CONFIGS = [
    *[pytest.param(({"band": name}, None), id=name) for name in BAND_STRATEGY_NAMES],
    pytest.param(("auto", None), id="auto"),
    pytest.param(({"band": "BJ-Hotspot"}, HOTSPOT_OPTIONS), id="BJ-Hotspot-alpha0.2"),
    pytest.param(("auto", HOTSPOT_OPTIONS), id="auto-alpha0.2"),
]


factory = strategy_factory_fixture(CONFIGS)


# ---- random programs ---------------------------------------------------------------------------


@harness_settings(100)
@given(program=programs(kinds=("band",), max_ops=40))
def test_random_programs_match_oracle(factory: EngineFactory, program: Any) -> None:
    run_program(factory, program)


@harness_settings(40)
@given(program=programs(kinds=("band",), max_ops=30, initial_subs=(4, 12)))
def test_many_subscriptions_match_oracle(factory: EngineFactory, program: Any) -> None:
    """More subscriptions per topic, so stabbing groups and hotspots actually form."""
    run_program(factory, program)


@harness_settings(40)
@given(program=programs(kinds=("band",), max_ops=30, keys=IEEE_KEYS, band_bounds=IEEE_BOUNDS))
def test_ieee_difference_programs(factory: EngineFactory, program: Any) -> None:
    """Keys and band ends where ``r.key + lo`` and ``s.key - r.key`` round differently (the band
    condition is the IEEE difference, ``BandJoin``)."""
    run_program(factory, program)


@harness_settings(25)
@given(
    subs=st.lists(subscriptions("band"), min_size=1, max_size=15),
    keys=st.lists(st.tuples(st.sampled_from("RS"), BAND_KEYS), min_size=1, max_size=25),
    chunk=st.integers(1, 8),
    snapshot=st.booleans(),
)
def test_batches_equal_one_at_a_time(
    factory: EngineFactory,
    subs: list[BandJoin],
    keys: list[tuple[str, float]],
    chunk: int,
    snapshot: bool,
) -> None:
    """``subscribe_many`` / ``publish_many`` on the engine equal the oracle one at a time."""
    ls = lockstep(factory)
    ls.subscribe_many(subs[: len(subs) // 2], snapshot=snapshot)
    events = [ev(side, f"{side}{i}", k, value=i % 3, time=i) for i, (side, k) in enumerate(keys)]
    for i in range(0, len(events), chunk):
        ls.publish_many(events[i : i + chunk])
        if i == 0:
            ls.subscribe_many(subs[len(subs) // 2 :], snapshot=snapshot)
    for e in events[::2]:
        ls.delete(e.side, e.id)


# ---- deterministic boundaries ------------------------------------------------------------------


def test_band_ends_hit_exactly(factory: EngineFactory) -> None:
    ls = lockstep(factory)
    q = ls.subscribe(BandJoin(b=Range(-1, 2)))
    ls.publish(ev("R", "r", 10))
    assert ls.publish(ev("S", "lo", 9)) == [D(q, 1, "r", "lo")]  # s - r == lo
    assert ls.publish(ev("S", "hi", 12)) == [D(q, 1, "r", "hi")]  # s - r == hi
    assert ls.publish(ev("S", "eq", 10)) == [D(q, 1, "r", "eq")]  # equal keys
    assert ls.publish(ev("S", "below", 8.5)) == []
    assert ls.publish(ev("S", "above", 12.5)) == []
    # the other direction: for a new R tuple at 10.5, 'above' (12.5) is exactly at hi and
    # 'lo' (9) at -1.5 falls out
    assert multiset(ls.publish(ev("R", "r2", 10.5))) == multiset(
        [D(q, 1, "r2", "eq"), D(q, 1, "r2", "hi"), D(q, 1, "r2", "above")]
    )
    assert multiset(ls.publish(ev("R", "r3", 9.5))) == multiset(
        [D(q, 1, "r3", "lo"), D(q, 1, "r3", "eq"), D(q, 1, "r3", "below")]
    )


def test_zero_width_band_equal_keys(factory: EngineFactory) -> None:
    ls = lockstep(factory)
    q = ls.subscribe(BandJoin(b=Range(0, 0)))
    for i, k in enumerate([1.0, 1.5, 2.0, 1.0]):
        ls.publish(ev("S", f"s{i}", k))
    assert multiset(ls.publish(ev("R", "r", 1.0))) == multiset([D(q, 1, "r", "s0"), D(q, 1, "r", "s3")])
    assert ls.publish(ev("R", "r2", 1.25)) == []


def test_ieee_difference(factory: EngineFactory) -> None:
    ls = lockstep(factory)
    q_02 = ls.subscribe(BandJoin(b=Range(0.2, 0.2)))
    q_ieee = ls.subscribe(BandJoin(b=Range(0.3 - 0.1, 0.3 - 0.1)))
    q_wide = ls.subscribe(BandJoin(b=Range(0.1, 0.2)))
    ls.publish(ev("R", "r", 0.1))
    out = multiset(ls.publish(ev("S", "s", 0.3)))
    assert out == multiset([D(q_ieee, 1, "r", "s"), D(q_wide, 1, "r", "s")])
    assert q_02 not in {k[0] for k in out}


def test_empty_tables_and_single_subscription(factory: EngineFactory) -> None:
    ls = lockstep(factory)
    assert ls.publish(ev("R", "r0", 1)) == []  # no subscription, empty S
    q = ls.subscribe(BandJoin(b=Range(-100, 100)), snapshot=True)
    assert ls.result(q) == []
    assert ls.publish(ev("R", "r1", 1)) == []  # S still empty
    assert ls.delete("R", "r0") == []
    assert ls.delete("R", "r1") == []
    assert ls.publish(ev("S", "s", 5)) == []  # R now empty
    got = ls.publish(ev("R", "r2", 2))
    assert got == [D(q, 1, "r2", "s")]
    assert ls.result(q) == [D(q, 1, "r2", "s")]


def test_unbounded_bands(factory: EngineFactory) -> None:
    ls = lockstep(factory)
    q_all = ls.subscribe(BandJoin())
    q_ge = ls.subscribe(BandJoin(b=Range(0, None)))
    q_le = ls.subscribe(BandJoin(b=Range(None, -1)))
    ls.publish(ev("S", "far", 1e12))
    ls.publish(ev("S", "near", -3))
    out = multiset(ls.publish(ev("R", "r", 0)))
    assert out == multiset(
        [D(q_all, 1, "r", "far"), D(q_all, 1, "r", "near"), D(q_ge, 1, "r", "far"), D(q_le, 1, "r", "near")]
    )


def test_selections_on_a_and_c(factory: EngineFactory) -> None:
    ls = lockstep(factory)
    q = ls.subscribe(BandJoin(b=Range(0, 1), a=Range(1, 2), c=Range(None, 3)))
    ls.publish(ev("S", "s_ok", 1, value=3))
    ls.publish(ev("S", "s_no", 1, value=3.5))
    assert ls.publish(ev("R", "r_ok", 0.5, value=2)) == [D(q, 1, "r_ok", "s_ok")]
    assert ls.publish(ev("R", "r_no", 0.5, value=2.5)) == []


def test_delete_then_republish_same_id(factory: EngineFactory) -> None:
    ls = lockstep(factory)
    q = ls.subscribe(BandJoin(b=Range(-1, 1)))
    ls.publish(ev("S", "s", 3))
    assert ls.publish(ev("R", "x", 3)) == [D(q, 1, "x", "s")]
    with pytest.raises(DuplicateEventError):
        ls.publish(ev("R", "x", 3.5))
    assert ls.delete("R", "x") == [D(q, -1, "x", "s")]
    with pytest.raises(UnknownEventError):
        ls.delete("R", "x")
    assert ls.publish(ev("R", "x", 9)) == []  # re-published elsewhere: no pair
    assert ls.publish(ev("S", "s2", 8.5)) == [D(q, 1, "x", "s2")]
    assert multiset(ls.delete("R", "x")) == multiset([D(q, -1, "x", "s2")])
    assert ls.publish(ev("R", "x", 3)) == [D(q, 1, "x", "s")]


def test_delete_registration_rule_and_snapshot(factory: EngineFactory) -> None:
    ls = lockstep(factory)
    q_before = ls.subscribe(BandJoin(b=Range(0, 1)))
    ls.publish(ev("R", "r", 0))
    ls.publish(ev("S", "s", 1))
    q_after = ls.subscribe(BandJoin(b=Range(0, 1)))
    q_snap = ls.subscribe(BandJoin(b=Range(1, 1)), snapshot=True)
    assert ls.result(q_snap) == [D(q_snap, 1, "r", "s")]
    assert multiset(ls.publish(ev("S", "s2", 0.5))) == multiset(
        [D(q_before, 1, "r", "s2"), D(q_after, 1, "r", "s2")]
    )
    out = multiset(ls.delete("R", "r"))
    assert out == multiset(
        [D(q_before, -1, "r", "s"), D(q_snap, -1, "r", "s"), D(q_before, -1, "r", "s2"), D(q_after, -1, "r", "s2")]
    )


def test_unsubscribe_stops_deliveries(factory: EngineFactory) -> None:
    ls = lockstep(factory)
    q0 = ls.subscribe(BandJoin(b=Range(0, 0)))
    q1 = ls.subscribe(BandJoin(b=Range(0, 0)))
    ls.publish(ev("R", "r", 1))
    ls.unsubscribe(q0)
    assert ls.publish(ev("S", "s", 1)) == [D(q1, 1, "r", "s")]
    assert ls.delete("S", "s") == [D(q1, -1, "r", "s")]
    assert ls.subscribe(BandJoin()) == 2


def test_lateness_and_retention_boundaries(factory: EngineFactory) -> None:
    ls = lockstep(factory, lateness=2, retention=3)
    q = ls.subscribe(BandJoin())
    ls.publish(ev("R", "r_old", 0, time=5))  # W = 3
    assert ls.publish(ev("S", "s_at_w", 0, time=3)) == [D(q, 1, "r_old", "s_at_w")]
    with pytest.raises(LateEventError):
        ls.publish(ev("S", "s_late", 0, time=2))
    # max 8 -> W 6, horizon 3: s_at_w (3) kept, r_old (5) kept
    assert multiset(ls.publish(ev("R", "r", 0, time=8))) == multiset([D(q, 1, "r", "s_at_w")])
    # max 9 -> W 7, horizon 4: s_at_w dropped silently
    assert multiset(ls.publish(ev("S", "s", 0, time=9))) == multiset(
        [D(q, 1, "r_old", "s"), D(q, 1, "r", "s")]
    )
    with pytest.raises(UnknownEventError):
        ls.delete("S", "s_at_w")


def test_many_identical_and_nested_bands(factory: EngineFactory) -> None:
    """Many subscriptions sharing ends: one stabbing group, ties in every sorted order."""
    ls = lockstep(factory)
    bands = [(-(k % 3), 2 + k % 2) for k in range(12)]
    sids = [ls.subscribe(BandJoin(b=Range(lo, hi))) for lo, hi in bands]
    s_keys = [0, 1, 2, 3, 4, 2, 2]
    for i, key in enumerate(s_keys):
        ls.publish(ev("S", f"s{i}", key))
    want = [
        D(sid, 1, "r", f"s{i}")
        for sid, (lo, hi) in zip(sids, bands, strict=True)
        for i, key in enumerate(s_keys)
        if lo <= key - 1 <= hi
    ]
    assert multiset(ls.publish(ev("R", "r", 1))) == multiset(want)
    assert multiset(ls.delete("R", "r")) == multiset(
        [D(d.subscription_id, -1, d.r_id, d.s_id) for d in want]
    )
