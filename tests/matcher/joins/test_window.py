"""Every window-join strategy gives the oracle's deliveries (paper 004 §3.3).

Random programs (``tests/engine_harness.py``: disorder up to the lateness L, retention, deletes,
snapshots, subscription churn that moves stabbing points and w_max) run each strategy and
``OracleEngine`` in lockstep; deterministic cases pin ``w`` exactly equal to a time gap,
out-of-order arrivals (in-order result), deletes of skyline points and retention.
"""

from __future__ import annotations

from typing import Any

import pytest
from engine_harness import (
    WINDOW_STRATEGY_NAMES,
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

from hotjoin.matcher.model import Range, WindowJoin

OTHERS = {"band": "BJ-SSI", "select": "SJ-SSI"}


def _param(name: str, options: Any = None, id: str | None = None) -> Any:
    return pytest.param(({**OTHERS, "window": name}, options), id=id or name)


CONFIGS = [*[_param(n) for n in WINDOW_STRATEGY_NAMES],
           _param("WJ-Hotspot", {"alpha": 0.2, "epsilon": 1.0}, "WJ-Hotspot-alpha0.2")]


factory = strategy_factory_fixture(CONFIGS)


@harness_settings(40)
@given(program=programs(kinds=("window",), max_ops=40))
def test_random_programs_match_oracle(factory: EngineFactory, program: Any) -> None:
    run_program(factory, program)


@harness_settings(20)
@given(program=programs(kinds=("window",), max_ops=30, initial_subs=(4, 14)))
def test_many_subscriptions_match_oracle(factory: EngineFactory, program: Any) -> None:
    run_program(factory, program)


@harness_settings(30)
@given(program=programs(kinds=("window",), max_ops=40, initial_subs=(2, 10),
                        window_w=st.sampled_from((3,)) | st.sampled_from((1, 4))))
def test_uniform_or_two_valued_w_match_oracle(factory: EngineFactory, program: Any) -> None:
    """One w for every subscription (or two): WJ-SelectFirst's uniform-window pass (no
    partner between w_min and w_max of the tuple: a select join over the partners within
    w_min, ``window_kernels.wj_own_scan``) and its per-candidate fallback, both boundaries."""
    run_program(factory, program)


def test_partners_inside_and_outside_one_w(factory: EngineFactory) -> None:
    """One w: partners exactly w away count, w + 1 away do not, on both sides of t, in
    publish, delete (sign −1, the owed test for a subscription registered in between) and
    with a second w added (the per-candidate path)."""
    ls = lockstep(factory, lateness=20)
    q = ls.subscribe(WindowJoin(w=3))
    qc = ls.subscribe(WindowJoin(c=Range(0, 5), w=3))
    for i, (t, v) in enumerate([(0, 1.0), (6, 2.0), (7, 3.0), (10, 9.0), (13, 4.0), (14, 1.0)]):
        ls.publish(ev("S", f"s{i}", 1.0, value=v, time=t))
    got = multiset(ls.publish(ev("R", "r0", 1.0, time=10)))
    assert got == multiset([D(q, 1, "r0", s) for s in ("s2", "s3", "s4")]
                           + [D(qc, 1, "r0", s) for s in ("s2", "s4")])
    late = ls.subscribe(WindowJoin(w=3))
    ls.publish(ev("R", "r1", 1.0, time=11))
    assert multiset(ls.delete("S", "s4")) == multiset(
        [D(q, -1, "r0", "s4"), D(qc, -1, "r0", "s4"), D(q, -1, "r1", "s4"),
         D(qc, -1, "r1", "s4"), D(late, -1, "r1", "s4")])
    ls.subscribe(WindowJoin(w=5))
    ls.publish(ev("R", "r2", 1.0, time=9))
    ls.delete("S", "s2")


@pytest.mark.parametrize("name", WINDOW_STRATEGY_NAMES)
def test_affected_counts_follow_the_owed_rule(name: str) -> None:
    """AFFECTED (COUNT) against the oracle's pairs, for one w: a subscription registered
    between two R tuples is owed only the newer one's pairs when a partner is deleted (the
    registration bound ``reg_max`` of ``wj_own_scan``'s uniform pass)."""
    from collections import Counter

    from hotjoin.matcher import Engine, Event
    from hotjoin.matcher.oracle import OracleEngine

    eng, orc = Engine(lateness=20, strategy={"window": name}), OracleEngine(lateness=20)

    def both(op: str, *args: Any) -> None:
        got = getattr(eng, f"{op}_affected")(*args)
        want = Counter()
        for d in getattr(orc, op)(*args):
            want[d.subscription_id] += d.sign
        assert dict(zip(got.subscription_ids.tolist(), got.counts.tolist(), strict=True)) == {
            k: v for k, v in want.items() if v}, (op, args)

    for e in (eng, orc):
        e.subscribe(WindowJoin(w=3))
        e.subscribe(WindowJoin(c=Range(0, 5), w=3))
    for i, (t, v) in enumerate([(0, 1.0), (7, 3.0), (10, 9.0), (13, 4.0), (14, 1.0)]):
        both("publish", Event("S", f"s{i}", 1.0, v, t))
    both("publish", Event("R", "r0", 1.0, 1.0, 10))
    for e in (eng, orc):
        e.subscribe(WindowJoin(w=3))
    both("publish", Event("R", "r1", 1.0, 1.0, 11))
    both("delete", "S", "s3")
    both("delete", "R", "r0")


def test_w_equal_to_time_gap(factory: EngineFactory) -> None:
    ls = lockstep(factory)
    q0 = ls.subscribe(WindowJoin(w=0))
    q3 = ls.subscribe(WindowJoin(w=3))
    ls.publish(ev("S", "s0", 1.0, time=10))
    assert multiset(ls.publish(ev("R", "r0", 1.0, time=10))) == multiset(
        [D(q0, 1, "r0", "s0"), D(q3, 1, "r0", "s0")])
    assert ls.publish(ev("R", "r3", 1.0, time=13)) == [D(q3, 1, "r3", "s0")]
    assert ls.publish(ev("R", "r4", 1.0, time=14)) == []
    assert multiset(ls.publish(ev("S", "s1", 1.0, time=17))) == multiset(
        [D(q3, 1, "r4", "s1")])


def test_out_of_order_within_lateness_gives_in_order_result(factory: EngineFactory) -> None:
    ls = lockstep(factory, lateness=5)
    q = ls.subscribe(WindowJoin(c=Range(0, 10), w=2))
    q_wide = ls.subscribe(WindowJoin(w=6))
    for i, t in enumerate([20, 15, 18, 16, 21]):
        ls.publish(ev("S", f"s{i}", 2.0, value=float(i), time=t))
    got = multiset(ls.publish(ev("R", "late", 2.0, time=16)))  # W = 16: accepted, older than most
    want = [D(q, 1, "late", f"s{i}") for i, t in enumerate([20, 15, 18, 16, 21]) if abs(t - 16) <= 2]
    want += [D(q_wide, 1, "late", f"s{i}") for i, t in enumerate([20, 15, 18, 16, 21])
             if abs(t - 16) <= 6]
    assert got == multiset(want)
    ls.delete("S", "s2")   # a skyline point goes away
    ls.publish(ev("R", "r2", 2.0, time=19))
    ls.delete("R", "late")
    ls.publish(ev("S", "s9", 2.0, value=3.0, time=17))


def test_retention_and_skyline_trim(factory: EngineFactory) -> None:
    ls = lockstep(factory, lateness=1, retention=4)
    qs = [ls.subscribe(WindowJoin(c=Range(i, i + 3), w=i % 4)) for i in range(8)]
    for t in range(30):
        side = "RS"[t % 2]
        ls.publish(ev(side, f"{side}{t}", float(t % 3), value=float((t * 5) % 11), time=t))
        if t % 7 == 3:
            ls.unsubscribe(qs.pop(0))
        if t % 6 == 2:
            qs.append(ls.subscribe(WindowJoin(c=Range(t % 9, t % 9 + 1), w=t % 5)))


@harness_settings(15)
@given(program=programs(kinds=("window", "select"), max_ops=30, initial_subs=(3, 8)))
def test_mixed_with_select(program: Any) -> None:
    run_program(engine_factory({**OTHERS, "window": "WJ-JoinFirst"}), program)


def test_imports() -> None:
    assert st is not None
