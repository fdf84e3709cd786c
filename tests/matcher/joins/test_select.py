"""Every select-join strategy gives the oracle's deliveries (paper 004 §3.2, §4.1).

Random programs of ``tests/engine_harness.py`` (all operations, lateness, retention, snapshots,
deletes) run each strategy and ``OracleEngine`` in lockstep; deterministic cases pin the
boundaries (equal keys, closed range ends, stabbing points hit exactly, registration rule).
``HOTJOIN_HYPOTHESIS_EXAMPLES`` scales the example counts.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from engine_harness import (
    SELECT_STRATEGY_NAMES,
    D,
    EngineFactory,
    engine_factory,
    ev,
    harness_settings,
    lockstep,
    multiset,
    programs,
    run_program,
    strategy_factory_fixture,
)
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.matcher.model import BandJoin, Range, SelectJoin, WindowJoin

HOTSPOT_OPTIONS = {"alpha": 0.2, "epsilon": 1.0}


# the other kinds are pinned to one static strategy each: the select strategy is what varies
OTHERS = {"band": "BJ-SSI", "window": "WJ-SSI"}


def _param(strategy: Any, options: Any, id: str) -> Any:
    return pytest.param(({**OTHERS, **strategy}, options), id=id)


CONFIGS = [
    *[_param({"select": n}, None, n) for n in SELECT_STRATEGY_NAMES],
    _param({"select": "SJ-Hotspot"}, HOTSPOT_OPTIONS, "SJ-Hotspot-alpha0.2"),
    # the scattered part always by SJ-SSI / always by SJ-SelectFirst (per-tuple choice forced)
    _param({"select": "SJ-Hotspot"}, {**HOTSPOT_OPTIONS, "scattered_sf_cost": 1e18},
           "SJ-Hotspot-scattered-SSI"),
    _param({"select": "SJ-Hotspot"}, {**HOTSPOT_OPTIONS, "scattered_sf_cost": 0.0},
           "SJ-Hotspot-scattered-SF"),
    _param({"select": "SJ-SSI"}, {"epsilon": 0.25}, "SJ-SSI-eps0.25"),
]


factory = strategy_factory_fixture(CONFIGS)


@harness_settings(40)
@given(program=programs(kinds=("select",), max_ops=40))
def test_random_programs_match_oracle(factory: EngineFactory, program: Any) -> None:
    run_program(factory, program)


@harness_settings(20)
@given(program=programs(kinds=("select",), max_ops=30, initial_subs=(4, 14)))
def test_many_subscriptions_match_oracle(factory: EngineFactory, program: Any) -> None:
    """Enough subscriptions for several stabbing groups, hotspots and R-tree re-packs."""
    run_program(factory, program)


def test_equal_keys_and_range_ends(factory: EngineFactory) -> None:
    ls = lockstep(factory)
    q = ls.subscribe(SelectJoin(a=Range(1, 2), c=Range(3, 5)))
    q_all = ls.subscribe(SelectJoin())
    for i, (k, c) in enumerate([(1.0, 3), (1.0, 5), (1.0, 2.5), (2.0, 4), (-0.0, 4)]):
        ls.publish(ev("S", f"s{i}", k, value=c))
    got = multiset(ls.publish(ev("R", "r", 1.0, value=2)))
    assert got == multiset([D(q, 1, "r", "s0"), D(q, 1, "r", "s1"), D(q_all, 1, "r", "s0"),
                            D(q_all, 1, "r", "s1"), D(q_all, 1, "r", "s2")])
    got0 = multiset(ls.publish(ev("R", "r0", 0.0, value=1)))
    assert got0 == multiset([D(q, 1, "r0", "s4"), D(q_all, 1, "r0", "s4")])
    assert multiset(ls.publish(ev("R", "r_out", 1.0, value=2.5))) == multiset(
        [D(q_all, 1, "r_out", s) for s in ("s0", "s1", "s2")])
    ls.delete("S", "s0")
    ls.delete("R", "r")


def test_many_groups_deletes_and_snapshot(factory: EngineFactory) -> None:
    """Dozens of subscriptions in several clusters of C ranges, with churn and snapshots."""
    ls = lockstep(factory, lateness=2, retention=10)
    sids = []
    for i in range(40):
        c0 = (i % 5) * 10
        sids.append(ls.subscribe(SelectJoin(a=Range(i % 3, 3 + i % 4), c=Range(c0 - i % 4, c0 + i % 3)),
                                 snapshot=i % 7 == 0))
    t = 0
    for i in range(60):
        t += i % 3
        side = "RS"[i % 2]
        ls.publish(ev(side, f"{side}{i}", float(i % 4), value=float((i * 7) % 45) if side == "S"
                      else float(i % 6), time=t))
        if i % 9 == 4:
            ls.unsubscribe(sids.pop(i % len(sids)))
        if i % 11 == 3:
            ls.subscribe(SelectJoin(c=Range(20, 21)), snapshot=True)
        if i % 13 == 5:
            ls.delete(side, f"{side}{i}")


@harness_settings(15)
@given(program=programs(kinds=("select", "band", "window"), max_ops=30, initial_subs=(3, 8)))
def test_mixed_kinds_in_one_topic(program: Any) -> None:
    """Select, band and window subscriptions together, each kind with its own forced strategy."""
    f = engine_factory({"select": "SJ-SSI", "band": "BJ-SSI", "window": "WJ-SSI"})
    run_program(f, program)


@pytest.mark.parametrize("strategy", ["SJ-JoinFirst", "SJ-SelectFirst", "SJ-Vanilla", "SJ-SSI"])
def test_bulk_subscribe_and_probe(strategy: str) -> None:
    """``subscribe_many`` bulk-builds the indexes; each strategy then finds the same pairs."""
    from hotjoin.matcher.engine import Engine

    rng = __import__("random").Random(5)
    subs = []
    for _ in range(300):
        a0, c0 = rng.randint(0, 50), rng.randint(0, 50)
        subs.append(SelectJoin(a=Range(a0, a0 + rng.randint(0, 20)),
                               c=Range(c0, c0 + rng.randint(0, 20))))
    ref = Engine(strategy={**OTHERS, "select": "SJ-Vanilla"})
    eng = Engine(strategy={**OTHERS, "select": strategy})
    for e in (ref, eng):
        rng = __import__("random").Random(7)
        e.subscribe_many(subs)
        e.subscribe(BandJoin(b=Range(0, 0)))
        e.subscribe(WindowJoin(w=3))
        for i in range(200):
            e.publish(ev("S", f"s{i}", float(i % 7), value=float(rng.randint(0, 70)), time=i))
    rng = __import__("random").Random(6)
    for i in range(50):
        r = ev("R", f"r{i}", float(i % 7), value=float(rng.randint(0, 70)), time=300 + i)
        assert multiset(eng.publish(r)) == multiset(ref.publish(r))
    assert eng.stats()["subscriptions"]["select"] == 300
    assert eng.memory_bytes() > 0


def test_kind_without_subscriptions_builds_nothing() -> None:
    from hotjoin.matcher.engine import Engine

    e = Engine(strategy={"band": "BJ-SSI"})
    e.subscribe(BandJoin())
    e.publish(ev("S", "s", 1.0))
    assert e.select is None and e.window is None
    assert e.tables["S"].key_index is None


def test_hypothesis_import_sanity() -> None:
    assert st is not None and given is not None


def test_close_partner_values_and_removed_members(factory: EngineFactory) -> None:
    """Partner values a hair apart (SJ-SelectFirst's bucket table gets mixed buckets), range ends
    exactly on them and between them, unbounded ends, and members removed in between (their
    scan-run slots become tombstones) — every strategy against the oracle."""
    ls = lockstep(factory)
    for sid in _close_value_subscriptions(ls):
        ls.unsubscribe(sid)
    for j in range(12):
        ls.publish(ev("R", f"r{j}", 1.0, value=float(j % 8)))
    ls.delete("S", "s1")
    ls.delete("R", "r3")


TINY = [0.0, 1e-12, 2e-12, 5e-12, 1.0, 1.0 + 1e-9, 1e6, 1e6 + 1e-6]
GAPS = [(1.5e-12, 1.6e-12), (0.5, 0.6), (6e-12, 0.9), (1.0 + 2e-9, 2.0), (3e-12, 4e-12)]


def _close_value_subscriptions(eng: Any) -> list[int]:
    """Subscribe C ranges on, between and around partner values a hair apart (many of them
    holding no partner: conservative hits of mixed buckets that must be dropped), store those
    partners on key 1.0; returns every third subscription id (to remove)."""
    ends = [*TINY, 1.5e-12, 0.5, None]
    sids = []
    for i in range(120):
        lo, hi = ends[i % len(ends)], ends[(i * 7 + 3) % len(ends)]
        if lo is not None and hi is not None and lo > hi:
            lo, hi = hi, lo
        if i % 4 == 0:
            lo, hi = GAPS[(i // 4) % len(GAPS)]
        sids.append(eng.subscribe(SelectJoin(a=Range(i % 5, 5 + i % 3), c=Range(lo, hi))))
    for j, c in enumerate(TINY * 3):
        eng.publish(ev("S", f"s{j}", 1.0, value=c))
    return sids[::3]


@pytest.mark.parametrize("strategy", SELECT_STRATEGY_NAMES)
def test_identify_with_close_partner_values(strategy: str) -> None:
    """``probe(..., "identify")`` reports exactly the subscriptions the oracle delivers to."""
    from hotjoin.matcher.engine import Engine
    from hotjoin.matcher.oracle import OracleEngine

    eng = Engine(strategy={**OTHERS, "select": strategy}, options=HOTSPOT_OPTIONS)
    ref = OracleEngine()
    for e in (eng, ref):
        for sid in _close_value_subscriptions(e):
            e.unsubscribe(sid)
    for j in range(16):
        v = float(j % 8)
        want = Counter(d.subscription_id for d in ref.publish(ev("R", f"r{j}", 1.0, value=v)))
        ref.delete("R", f"r{j}")
        assert want, "the workload affects someone"
        assert eng.probe("R", 1.0, v, "identify") == len(want)
        aff = eng.publish_affected(ev("R", f"r{j}", 1.0, value=v))
        assert dict(zip(aff.subscription_ids.tolist(), aff.counts.tolist(), strict=True)) == want
        eng.delete("R", f"r{j}")
