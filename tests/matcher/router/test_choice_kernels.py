"""SJ-Dynamic's compiled decision (``matcher.router.choice_kernels``) against a plain argmin.

``select_choice`` answers without n′ when the choice is the same at every n′ between the
estimator's bounds, and says when it is *settled* by a margin (the router then reuses it per
partner count). Both shortcuts must give exactly the argmin of the members' costs at the
tuple's n′.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher import Engine, Range, SelectJoin
from hotjoin.matcher.router.choice_kernels import (
    N1_HI,
    N1_LO,
    NEEDS_N1,
    SETTLED,
    SETTLED_MARGIN,
    empty_plan,
    fill_row,
    member_cost,
    select_choice,
)
from hotjoin.matcher.router.cost_model import FEATURES, CostProfile

CONSTANTS = st.one_of(st.sampled_from([0.0, 0.5, 1.0, 3.0, 40.0, 1e3, 2e4]),
                     st.floats(0.0, 100.0, allow_subnormal=False))


@st.composite
def plans(draw: st.DrawFn) -> list[tuple[int, float, float, Any, float]]:
    rows = []
    for _ in range(draw(st.integers(1, 5))):
        code = draw(st.integers(0, 4))
        extra: Any = None
        if code == 3:
            extra = (draw(CONSTANTS), draw(CONSTANTS), draw(CONSTANTS), draw(CONSTANTS))
        elif code == 4:
            extra = draw(CONSTANTS)
        corr = draw(st.sampled_from([1 / 64, 0.5, 1.0, 1.04, 3.0, 64.0]))
        rows.append((code, draw(CONSTANTS), draw(CONSTANTS), extra, corr))
    return rows


@settings(max_examples=400, deadline=None)
@given(rows=plans(), m1=st.one_of(st.integers(1, 8), st.integers(1, 10**6)),
       lo=st.sampled_from([0.0, 1.0, 7.5, 300.0]), span=st.sampled_from([0.0, 2.0, 1e3, 1e6]),
       where=st.floats(0.0, 1.0))
def test_choice_is_the_argmin_at_the_tuples_estimate(rows: list[Any], m1: int, lo: float,
                                                     span: float, where: float) -> None:
    plan = empty_plan(len(rows))
    for j, (code, a, k, extra, corr) in enumerate(rows):
        fill_row(plan, j, code, a, k, extra, corr)
    plan[-1, N1_LO], plan[-1, N1_HI] = lo, lo + span
    n1 = lo + where * span  # the estimate lies between the bounds
    # each member's cost by the kernel's own formula, which test_cost_model checks against
    # the features (Σ c_j · f_j); here the shortcuts and the argmin are under test
    costs = [member_cost(plan, j, m1, n1) for j in range(len(rows))]
    best = min(costs)
    got = select_choice(plan, m1, -1.0)
    if got == NEEDS_N1:
        got = select_choice(plan, m1, n1)
        assert got == costs.index(best)  # the first of the cheapest
        assert plan[-1, 0] == best or math.isclose(plan[-1, 0], best, rel_tol=1e-12)
        return
    j = got - SETTLED if got >= SETTLED else got
    assert costs[j] <= best * (1 + 1e-12), (costs, j)
    if got >= SETTLED:  # every other member costs ≥ the margin times as much, at any n′
        for other, c in enumerate(costs):
            if other != j:
                assert c >= SETTLED_MARGIN * costs[j] * (1 - 1e-12), (costs, j)


def _plan(*rows: tuple[int, float, float, Any]) -> np.ndarray:
    plan = empty_plan(len(rows))
    for j, row in enumerate(rows):
        fill_row(plan, j, *row, 1.0)
    return plan


def test_a_concave_winner_at_both_ends_is_not_settled() -> None:
    """SJ-Hotspot's cost min(τ, f·n′)·c is concave in n′: cheapest at both ends of [0, 20]
    (0 < 0.5 and 10 < 12.5) but not at n′ = 10, where 0.5 + 0.6·n′ = 6.5 < 10."""
    plan = _plan((3, 0.0, 1.0, (10.0, 1.0, 1.0, 0.0)), (4, 0.5, 0.6, 0.0))
    plan[-1, N1_LO], plan[-1, N1_HI] = 0.0, 20.0
    assert select_choice(plan, 5, -1.0) == NEEDS_N1
    assert select_choice(plan, 5, 10.0) == 1


def test_settled_only_beyond_the_margin() -> None:
    """Member 0 wins at both ends; by 1.05× it is chosen but not settled, by 1.2× it is."""
    for other, settled in ((10.5, False), (12.0, True)):
        plan = _plan((0, 10.0, 0.0, None), (0, other, 0.0, None))
        plan[-1, N1_LO], plan[-1, N1_HI] = 0.0, 5.0
        assert select_choice(plan, 3, -1.0) == (SETTLED if settled else 0)


def test_settled_choices_follow_the_corrections() -> None:
    """Probes against a static table with online calibration (timed every tuple, a big step):
    the corrections move on every tuple, and each choice is still the argmin of the corrected
    models at that moment, whether it came from the per-m′ cache or the kernel."""
    import hotjoin.matcher.router.dynamic as router

    rng = np.random.default_rng(3)
    # modelled far dearer than they run, so the first timed run moves every member's
    # correction (the members never timed follow the first one down)
    coef = {n: [float(x) for x in rng.choice([1e4, 1e5, 1e6], len(f))]
            for n, f in FEATURES.items()}
    saved = (router.FEEDBACK_EVERY, router.EXPLORE_EVERY, router.SAMPLE_EVERY)
    router.FEEDBACK_EVERY, router.EXPLORE_EVERY, router.SAMPLE_EVERY = 4, 10**9, 10**9
    try:
        e = Engine(strategy="auto", options={"cost_profile": CostProfile(coef), "alpha": 0.2})
        e.subscribe_many([SelectJoin(a=Range(float(x), float(x + 20)),
                                     c=Range(float(y), float(y + 9)))
                          for x, y in zip(rng.integers(0, 80, 80), rng.integers(0, 95, 80),
                                          strict=True)])
        for i in range(300):
            e.publish_batch(["S"], [f"s{i}"], [float(rng.integers(0, 12))],
                            [float(rng.integers(0, 100))], [i], output="none")
        ix: Any = e.select
        table = e.tables["S"]
        checked = 0
        for _ in range(2000):
            key, val = float(rng.integers(0, 14)), float(rng.integers(0, 100))
            raw = ix.costs(1, key, val, 0, table)
            corr = list(ix.corr[1])
            e.probe("R", key, val)
            ix.check_invariants()  # the plan holds the corrections; settled choices hold
            if raw is None or ix.explorations:
                continue
            c = [x * k for x, k in zip(raw, corr, strict=True)]
            assert c[ix.last] <= min(c) * (1 + 1e-9) + 1e-9, (c, ix.last)
            checked += 1
        assert checked > 1000
        assert ix.routing_stats()["corrections"]["R"] != dict.fromkeys(ix.member_names, 1.0)
    finally:
        router.FEEDBACK_EVERY, router.EXPLORE_EVERY, router.SAMPLE_EVERY = saved
