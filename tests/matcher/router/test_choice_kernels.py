"""SJ-Dynamic's compiled decision (``matcher.router.choice_kernels``) against a plain argmin.

``choice_at_bounds`` answers without n′ when the choice is the same at every n′ between the
estimator's bounds, and says when it is *settled* by a margin (the router then reuses it per
partner count); ``select_for`` estimates n′ in the kernel and decides. Both must give exactly
the argmin of the members' costs at the tuple's n′.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher import Engine, Range, SelectJoin
from hotjoin.matcher.partition.histogram import (
    SSI_LOOKUP,
    EquiWidthHistogram,
    SSIHistogram,
    bucket_at,
    bucket_function,
    estimate_of_bucket,
    lookup_array,
)
from hotjoin.matcher.router.choice_kernels import (
    BUCKET,
    BUCKET_SETTLED,
    COST,
    MARGIN,
    N1_HI,
    N1_LO,
    NEEDS_N1,
    SETTLED,
    SETTLED_MARGIN,
    choice_at_bounds,
    empty_plan,
    fill_row,
    member_cost,
    select_for,
    select_run,
    window_run,
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
def test_choice_at_bounds_is_the_argmin_at_every_estimate(rows: list[Any], m1: int, lo: float,
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
    got = choice_at_bounds(plan, m1)
    if got == NEEDS_N1:  # the decision at n′ is select_for's (the next test)
        return
    j = got - SETTLED if got >= SETTLED else got
    assert costs[j] <= best * (1 + 1e-12), (costs, j)
    if got >= SETTLED:  # every other member costs ≥ the reported margin times as much
        margin = float(plan[-1, MARGIN])
        assert margin > SETTLED_MARGIN
        for other, c in enumerate(costs):
            if other != j:
                assert c >= margin * costs[j] * (1 - 1e-12), (costs, j, margin)


@settings(max_examples=300, deadline=None)
@given(rows=plans(), m1=st.one_of(st.integers(1, 8), st.integers(1, 10**6)),
       ends=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 30)), min_size=1,
                     max_size=30),
       v=st.one_of(st.integers(-5, 100).map(float), st.floats(-5.0, 100.0)), eqw=st.booleans())
def test_one_call_decision_is_the_argmin_at_the_estimate(rows: list[Any], m1: int,
                                                          ends: list[tuple[int, int]],
                                                          v: float, eqw: bool) -> None:
    """``select_for`` (n′ estimated inside the kernel) chooses the first of the cheapest
    members at the histogram's own estimate, writes its cost, and flags ``SETTLED`` only for
    the member that wins at both bounds of the estimator by the reported margin, else
    ``BUCKET_SETTLED`` only when it wins at this estimate by the reported margin, with the
    bucket of v (whose every value has that estimate; the Python bucket function agrees)."""
    lo = np.array([float(a) for a, _ in ends])
    hi = lo + np.array([float(w) for _, w in ends])
    h = EquiWidthHistogram.fit(lo, hi, 7) if eqw else SSIHistogram.build(lo, hi, 7)
    plan = empty_plan(len(rows))
    for j, (code, a, k, extra, corr) in enumerate(rows):
        fill_row(plan, j, code, a, k, extra, corr)
    vals = h.values()
    plan[-1, N1_LO], plan[-1, N1_HI] = float(vals.min()), float(vals.max())
    got = select_for(plan, m1, v, h.lookup())
    at = [member_cost(plan, j, m1, h.estimate(v)) for j in range(len(rows))]
    want = at.index(min(at))  # the first of the cheapest
    assert bucket_function(h.lookup())(v) == bucket_at(h.lookup(), v)
    assert estimate_of_bucket(h.lookup(), bucket_at(h.lookup(), v)) == h.estimate(v)
    if got >= BUCKET_SETTLED:
        got -= BUCKET_SETTLED
        assert got == want and int(plan[-1, BUCKET]) == bucket_at(h.lookup(), v)
        margin = float(plan[-1, MARGIN])
        assert margin > SETTLED_MARGIN
        assert all(c >= margin * at[want] * (1 - 1e-12) for j, c in enumerate(at) if j != want)
        return
    if got < SETTLED:  # not settled at all: a tie (or near one) at this estimate, or costs 0
        others = [c for j, c in enumerate(at) if j != want]
        assert not others or min(others) <= SETTLED_MARGIN * at[want] or at[want] <= 0.0
    assert (got - SETTLED if got >= SETTLED else got) == want, (at, got)
    assert math.isclose(float(plan[-1, COST]), min(at), rel_tol=1e-12, abs_tol=1e-300)
    if got >= SETTLED:
        margin = float(plan[-1, MARGIN])
        for n1 in (plan[-1, N1_LO], plan[-1, N1_HI]):
            costs = [member_cost(plan, j, m1, float(n1)) for j in range(len(rows))]
            assert all(c >= margin * costs[want] * (1 - 1e-12)
                       for j, c in enumerate(costs) if j != want), (costs, want, margin)


@settings(max_examples=200, deadline=None)
@given(rows=plans(), tuples=st.lists(st.tuples(st.integers(1, 10**5), st.floats(-5.0, 100.0)),
                                     min_size=1, max_size=40),
       due=st.integers(-1, 45), suspect_at=st.integers(-1, 4))
def test_a_run_decision_is_the_one_tuple_decision_up_to_the_first_timed(
        rows: list[Any], tuples: list[tuple[int, float]], due: int, suspect_at: int) -> None:
    """``select_run`` chooses for each tuple what ``select_for`` chooses for it alone, and
    stops at the first tuple that is due to be timed (``due``) or whose member is suspect,
    with that tuple's cost in the state row."""
    h = SSIHistogram.build(np.array([0.0, 10.0, 30.0]), np.array([50.0, 20.0, 90.0]), 7)
    plan = empty_plan(len(rows))
    for j, (code, a, k, extra, corr) in enumerate(rows):
        fill_row(plan, j, code, a, k, extra, corr)
    vals = h.values()
    plan[-1, N1_LO], plan[-1, N1_HI] = float(vals.min()), float(vals.max())
    sizes = np.array([m for m, _ in tuples], dtype=np.int64)
    values = np.array([v for _, v in tuples])
    suspect = np.zeros(len(rows), dtype=np.bool_)
    if 0 <= suspect_at < len(rows):
        suspect[suspect_at] = True
    out = np.full(len(tuples), -1, dtype=np.int64)
    stop = select_run(plan, sizes, values, h.lookup(), due, suspect, out)
    cost = float(plan[-1, COST])
    for k, (m1, v) in enumerate(tuples):
        one = select_for(plan, m1, v, h.lookup()) & (SETTLED - 1)  # the member, flags off
        timed = k == due or bool(suspect[one])
        if k < stop:
            assert out[k] == one and not timed, (k, stop)
        elif k == stop:
            assert out[k] == one and timed
            assert math.isclose(cost, member_cost(plan, one, m1, h.estimate(v)), rel_tol=1e-12,
                                abs_tol=1e-300)
        else:
            assert out[k] == -1  # not decided: the caller times tuple ``stop`` first
    if stop == len(tuples):
        assert all(not (k == due or suspect[out[k]]) for k in range(len(tuples)))


@settings(max_examples=200, deadline=None)
@given(members=st.lists(st.tuples(st.integers(0, 3), CONSTANTS, CONSTANTS, CONSTANTS, CONSTANTS,
                                  st.integers(0, 50)), min_size=1, max_size=4),
       events=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 60), st.floats(-5.0, 100.0),
                                 st.integers(-1, 12)), min_size=1, max_size=20),
       wmax=st.integers(0, 30))
def test_the_window_run_decision_is_the_least_modelled_cost(
        members: list[Any], events: list[Any], wmax: int) -> None:
    """``window_run`` picks, per tuple, a member of least cost by Theorem 4's folded plan
    (the formulas of ``WindowDynamic._match``), m_b counted in the key's by-time run and n′
    from the histogram, skylines fresh or not; no tuple is timed here. Without the skyline
    sizes it decides the tuples that do not need them and stops at the first that does."""
    h = EquiWidthHistogram.fit(np.array([0.0, 10.0, 30.0]), np.array([50.0, 20.0, 90.0]), 5)
    plan = np.array(sorted(((float(c), a, k, k2, k3 if c == 3 else 0.0, float(tau), float(j))
                            for j, (c, a, k, k2, k3, tau) in enumerate(members)),
                           key=lambda r: r[1]))
    tv = np.sort(np.arange(0.0, 60.0, 1.5))  # one key's partner times
    n = len(events)
    mp = np.array([float(m + 1) for m, _, _, _ in events])
    times = np.array([t for _, t, _, _ in events], dtype=np.int64)
    values = np.array([v for _, _, v, _ in events])
    fresh = np.array([[float(f)] * len(members) for _, _, _, f in events])
    out = np.full(n, -1, dtype=np.int64)
    cost = np.zeros(1)
    args = (mp, tv, np.zeros(n, np.int64), np.full(n, tv.shape[0]), times, wmax, values,
            h.lookup(), -1, np.zeros(len(members), np.bool_), out, cost)
    # skyline sizes not looked up (NaN): the run stops at the first tuple that needs them
    unknown = np.full_like(fresh, np.nan)
    got = window_run(plan, unknown, *args)
    asked = got < 0
    first = -1 - got if asked else n
    assert 0 <= first <= n
    if asked:  # only a WJ-SSI-like member's cost reads the skyline sizes
        assert (plan[:, 0] >= 2).any()
    else:
        assert got == n
    early = out[:first].copy()
    got = window_run(plan, fresh, *args)
    assert got == n
    assert out[:first].tolist() == early.tolist()  # decided without them: the same
    for k in range(n):
        t, v = int(times[k]), float(values[k])
        mb = float(np.count_nonzero((tv >= t - wmax) & (tv <= t + wmax)))
        n1, sq = h.estimate(v), math.sqrt(mp[k])
        costs = {}
        for code, a, kk, k2, k3, tau, j in plan.tolist():
            if code == 0:
                c = a + kk * mb
            elif code == 1:
                c = a + (kk * n1 * sq if kk else 0.0)
            else:
                fr = fresh[k, int(j)]
                mbar, mpb = (fr, 2 * fr) if fr >= 0 else (min(mb, 2 * tau), mp[k])
                c = a + kk * mpb + k2 * mbar + (k3 * n1 * sq if k3 else 0.0)
            costs[int(j)] = c
        assert costs[int(out[k])] <= min(costs.values()) * (1 + 1e-12), (k, costs, out[k])


def _plan(*rows: tuple[int, float, float, Any]) -> np.ndarray:
    plan = empty_plan(len(rows))
    for j, row in enumerate(rows):
        fill_row(plan, j, *row, 1.0)
    return plan


def test_a_concave_winner_at_both_ends_is_not_settled() -> None:
    """SJ-Hotspot's cost min(τ, f·n′)·c is concave in n′: cheapest at both ends of [0, 20]
    (0 < 0.5 and 10 < 12.5) but not at n′ = 10, where 0.5 + 0.6·n′ = 6.5 < 10. So the other
    member is chosen there, settled for that bucket of the estimator only (margin 10 / 6.5)."""
    plan = _plan((3, 0.0, 1.0, (10.0, 1.0, 1.0, 0.0)), (4, 0.5, 0.6, 0.0))
    plan[-1, N1_LO], plan[-1, N1_HI] = 0.0, 20.0
    assert choice_at_bounds(plan, 5) == NEEDS_N1
    ten = lookup_array(SSI_LOOKUP, 0.0, 0.0, 0.0, 0, np.zeros(0), [10.0])  # n′ = 10 anywhere
    assert select_for(plan, 5, 0.0, ten) == 1 + BUCKET_SETTLED
    assert math.isclose(float(plan[-1, MARGIN]), 10.0 / 6.5) and plan[-1, BUCKET] == 0


def test_settled_with_its_margin_and_not_on_a_tie() -> None:
    """Member 0 wins at both ends: settled, with the least ratio of the two ends as its margin
    (1.05 here); a tie, or a win by rounding noise, does not settle."""
    plan = _plan((0, 10.0, 0.0, None), (4, 10.5, 0.1, 0.0))  # 10 against 10.5 .. 11
    plan[-1, N1_LO], plan[-1, N1_HI] = 0.0, 5.0
    assert choice_at_bounds(plan, 3) == SETTLED
    assert math.isclose(float(plan[-1, MARGIN]), 1.05)
    for other in (10.0, 10.0 * (1 + 1e-9)):
        plan = _plan((0, 10.0, 0.0, None), (0, other, 0.0, None))
        plan[-1, N1_LO], plan[-1, N1_HI] = 0.0, 5.0
        assert choice_at_bounds(plan, 3) == 0


def _routed_engine(rng: np.random.Generator, coef: dict[str, list[float]], subs: int,
                   width: int, stored: int, keys: int) -> Engine:
    """An ``"auto"`` engine with profile ``coef``: ``subs`` select joins (A ranges of
    ``width``) and ``stored`` S tuples over ``keys`` keys."""
    e = Engine(strategy="auto", options={"cost_profile": CostProfile(coef), "alpha": 0.2})
    e.subscribe_many([SelectJoin(a=Range(float(x), float(x + width)),
                                 c=Range(float(y), float(y + 9)))
                      for x, y in zip(rng.integers(0, 80, subs), rng.integers(0, 95, subs),
                                      strict=True)])
    for i in range(stored):
        e.publish_batch(["S"], [f"s{i}"], [float(rng.integers(0, keys))],
                        [float(rng.integers(0, 100))], [i], output="none")
    return e


def _probe_and_check(e: Engine, rng: np.random.Generator, n: int, keys: int) -> int:
    """Probe ``n`` random R tuples; after each, SJ-Dynamic's invariants hold (the plan holds
    the corrections, every settled choice wins at both ends of n′) and, unless the tuple was
    an exploration, its choice is the argmin of the corrected models as they stood before it.
    Returns the number of tuples so checked."""
    ix: Any = e.select
    table = e.tables["S"]
    checked = 0
    for _ in range(n):
        key, val = float(rng.integers(0, keys)), float(rng.integers(0, 100))
        raw = ix.costs(1, key, val, 0, table)
        corr = list(ix.corr[1])
        explored = ix.explorations
        e.probe("R", key, val)
        ix.check_invariants()
        if raw is None or ix.explorations != explored:
            continue
        c = [x * k for x, k in zip(raw, corr, strict=True)]
        assert c[ix.last] <= min(c) * (1 + 1e-9) + 1e-9, (c, ix.last)
        checked += 1
    return checked


def test_settled_choices_follow_the_corrections() -> None:
    """Probes against a static table with online calibration (timed every tuple, a big step):
    the corrections move on every tuple, and each choice is still the argmin of the corrected
    models at that moment, whether it came from the per-m′ cache or the kernel."""
    import hotjoin.matcher.router.estimators as estimators
    import hotjoin.matcher.router.learning as router

    rng = np.random.default_rng(3)
    # modelled far dearer than they run, so the first timed run moves every member's
    # correction (the members never timed follow the first one down)
    coef = {n: [float(x) for x in rng.choice([1e4, 1e5, 1e6], len(f))]
            for n, f in FEATURES.items()}
    saved = (router.FEEDBACK_EVERY, router.EXPLORE_EVERY, estimators.SAMPLE_EVERY)
    router.FEEDBACK_EVERY, router.EXPLORE_EVERY, estimators.SAMPLE_EVERY = 4, 10**9, 10**9
    try:
        e = _routed_engine(rng, coef, subs=80, width=20, stored=300, keys=12)
        ix: Any = e.select
        assert _probe_and_check(e, rng, 2000, keys=14) > 1000
        assert ix.routing_stats()["corrections"]["R"] != dict.fromkeys(ix.member_names, 1.0)
    finally:
        router.FEEDBACK_EVERY, router.EXPLORE_EVERY, estimators.SAMPLE_EVERY = saved


def test_settled_choices_are_dropped_once_their_margin_is_spent() -> None:
    """Members modelled within ~1.3× of each other and a clock that makes every timed run's
    measured / modelled ratio random: the corrections move both ways at every timed tuple,
    by sign steps and by far-off jumps. Every choice, settled or from the kernel, must still be
    the argmin of the corrected models, and the settled choices must still serve many tuples
    (each is kept by its own margin)."""
    import hotjoin.matcher.router.estimators as estimators
    import hotjoin.matcher.router.learning as router
    import hotjoin.matcher.router.select as select_router

    rng = np.random.default_rng(11)
    coef = {n: [float(x) for x in rng.uniform(1e4, 1.3e4, len(f))] for n, f in FEATURES.items()
            if not n.startswith("IJ-")}  # the select and window joins' random stream as it was
    saved = (router.FEEDBACK_EVERY, router.EXPLORE_EVERY, estimators.SAMPLE_EVERY,
             select_router.select_for)
    calls = [0]

    def counted(plan: np.ndarray, size: int, v: float, hist: np.ndarray) -> int:
        calls[0] += 1
        return int(saved[3](plan, size, v, hist))

    router.FEEDBACK_EVERY, router.EXPLORE_EVERY, estimators.SAMPLE_EVERY = 8, 3, 10**9
    select_router.select_for = counted
    try:
        e = _routed_engine(rng, coef, subs=60, width=30, stored=400, keys=40)
        ix: Any = e.select
        now = [0]

        def clock() -> int:  # each call moves on by a random amount: random elapsed times
            now[0] += int(rng.choice([1, 3, 10, 30, 100, 300, 1000]) * 1e3)
            return now[0]

        ix.clock = clock
        checked = _probe_and_check(e, rng, 3000, keys=40)
        assert checked > 2000
        assert ix.explorations > 20
        # the settled choices served many tuples: 71 % of the tuples paid a kernel call under
        # a plain sign-step learning rule, 78 % since a far run repeated within ``CALM_RUNS``
        # timed runs moves a correction by up to ``FAR_REPEAT_CAP`` (this clock repeats far
        # runs all the time); with no choice ever kept it would be ~100 %
        assert calls[0] < 0.85 * checked, calls
    finally:
        (router.FEEDBACK_EVERY, router.EXPLORE_EVERY, estimators.SAMPLE_EVERY,
         select_router.select_for) = saved
