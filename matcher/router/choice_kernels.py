"""The router's per-tuple decision in compiled code (paper 004 §4.1).

SJ-Dynamic folds each member's cost model into one row of a small float64 array (its *plan*,
``cost_model.SelectPlan`` laid out flat, see ``PLAN_COLUMNS``) whenever the slowly moving
quantities change; per incoming tuple only the key's partner count m′ and the estimate n′ vary.
:func:`select_for` estimates n′ from the histogram's arrays and evaluates every member's cost
in one call; :func:`choice_at_bounds`, which it calls too, says whether the choice holds for
that m′ at every n′ the estimator can answer, and by what margin, so the caller can reuse it.
The learned correction of each member is a column of the plan: online calibration updates one
cell instead of refolding.
"""

from __future__ import annotations

import math

import numpy as np

from hotjoin.matcher.config import kernel
from hotjoin.matcher.core import count_between
from hotjoin.matcher.partition.hist_lookup import bucket_at, estimate_at, estimate_of_bucket

PLAN_COLUMNS = ("code", "a", "k", "extra", "tau_s", "f", "c3", "c4", "correction")
"""One row per member: the cost is ``correction · cost(code)`` with, by ``code`` (as
``cost_model.SelectPlan``) 0: ``a + k·m′``; 1: ``a + k·n′·lg m′``; 2: ``a + k·lg m′``;
3: ``a + min(τ_S, f·n′)·(c3 + c4·lg m′)``; 4: ``a + k·n′ + extra·m′``. A last, extra row is
the routing state (``STATE_COLUMNS``)."""
CODE, A, K, EXTRA, TAU_S, F, C3, C4, CORRECTION = range(len(PLAN_COLUMNS))
STATE_COLUMNS = ("cost", "n1_lo", "n1_hi", "margin", "bucket")
"""The plan's last row: the chosen member's corrected cost (written by the kernel when it
was given n′), the least and largest value the n′ estimator can answer, the margin of the
last settled choice (written with it) and the estimator's bucket it settled for (with
``BUCKET_SETTLED``)."""
COST, N1_LO, N1_HI, MARGIN, BUCKET = range(len(STATE_COLUMNS))
NEEDS_N1 = -1
""":func:`choice_at_bounds`'s answer when the choice depends on n′."""
SETTLED = 1 << 20
"""Added to the member :func:`choice_at_bounds` and :func:`select_for` answer when it wins for
the key's partner count
at every n′ by a factor above ``SETTLED_MARGIN``; that factor (the *margin*) is written to the
state row's ``MARGIN`` cell. The caller may reuse the choice for that count until the plan is
refolded or the corrections move some ratio of two members' costs by the margin."""
BUCKET_SETTLED = 1 << 21
"""Added to the member :func:`select_for` answers when it wins for the key's partner count at
the tuple's n′ estimate (not at every n′) by a factor above ``SETTLED_MARGIN``: every value in
the same bucket of the estimator (``hist_lookup.bucket_at``, written to the state row's
``BUCKET``) has that estimate, so the caller may reuse the choice for (m′, bucket) as for a
``SETTLED`` one. At Fig. 15's first point SJ-JoinFirst wins at the estimates the tuples have
but not at the estimator's least one: without this every tuple paid a kernel call (~0.8 µs of
a ~9 µs probe)."""
SETTLED_MARGIN = 1.0 + 1e-6
"""A member settles when it undercuts every other by more than this factor at both ends (a
win by rounding noise does not count). The router keeps each settled choice exactly as long
as its own margin allows (``SelectDynamic._moved``): a common 1.1× margin, with all choices
dropped together once any correction moved by √1.1, left two thirds of the tuples of Fig. 12's
first point paying a kernel call."""
MARGIN_CAP = 1e9
"""The largest margin reported (a cost near 0 next to a finite one would overflow)."""


def empty_plan(members: int) -> np.ndarray:
    """A plan for ``members`` members (all corrections 1), plus the state row."""
    plan = np.zeros((members + 1, len(PLAN_COLUMNS)), dtype=np.float64)
    plan[:-1, CORRECTION] = 1.0
    plan[-1, N1_HI] = np.inf
    return plan


def fill_row(plan: np.ndarray, j: int, code: int, a: float, k: float, extra: object,
             correction: float) -> None:
    """Member ``j``'s row from its ``cost_model.SelectPlan`` ``(code, a, k, extra)``."""
    row = plan[j]
    row[:] = 0.0
    row[CODE], row[A], row[K], row[CORRECTION] = code, a, k, correction
    if code == 4:
        row[EXTRA] = extra
    elif code == 3:
        row[TAU_S], row[F], row[C3], row[C4] = extra  # type: ignore[misc]


@kernel
def _member_cost(plan: np.ndarray, j: int, size: int, lgm: float, n1: float) -> float:
    """Member ``j``'s corrected modelled cost at (m′, n′)."""
    code = plan[j, CODE]
    a = plan[j, A]
    k = plan[j, K]
    if code == 0.0:
        cost = a + k * size
    elif code == 4.0:
        cost = a + k * n1 + plan[j, EXTRA] * size
    elif code == 2.0:
        cost = a + k * lgm
    elif code == 1.0:
        cost = a + k * n1 * lgm
    else:
        cost = a + min(plan[j, TAU_S], plan[j, F] * n1) * (plan[j, C3] + plan[j, C4] * lgm)
    return cost * plan[j, CORRECTION]


def member_cost(plan: np.ndarray, j: int, size: int, n1: float) -> float:
    """Member ``j``'s corrected modelled cost for partner count ``size`` and estimate ``n1``
    (invariant checks and tests; the kernels inline it)."""
    return float(_member_cost(plan, j, size, math.log2(size + 2.0), n1))


@kernel
def _cheapest(plan: np.ndarray, size: int, lgm: float, n1: float) -> tuple[int, float, float]:
    """The member of least corrected cost at (m′, n′) (ties: the first), that cost and the
    next least (inf with one member)."""
    best = second = np.inf
    chosen = 0
    for j in range(plan.shape[0] - 1):
        cost = _member_cost(plan, j, size, lgm, n1)
        if cost < best:
            best, second = cost, best
            chosen = j
        elif cost < second:
            second = cost
    return chosen, best, second


@kernel
def choice_at_bounds(plan: np.ndarray, size: int) -> int:
    """The member whose corrected modelled cost is least for a tuple whose key has ``size``
    partners at every n′ the estimator can answer, or ``NEEDS_N1``.

    It answers when one member wins at both the least and the largest estimate (the state
    row's ``N1_LO`` and ``N1_HI``) and its cost is linear in n′ (codes 0, 1, 2, 4): every other
    cost is linear or concave in n′ (code 3 is a min), so its difference to that member's is
    ≥ 0 between the two ends too, and that member wins at every n′ in between; plus
    ``SETTLED`` when every other member costs more than ``SETTLED_MARGIN`` times as much at
    both ends, which holds in between for the same reason, with the least such factor written
    to the state row's ``MARGIN``. ``lg m′`` is ``log2(m′ + 2)`` as in ``cost_model.lg``.

    >>> p = empty_plan(2)
    >>> p[0, CODE], p[0, A], p[0, K] = 0, 10.0, 5.0                  # 10 + 5 m′
    >>> p[1, CODE], p[1, A], p[1, K], p[1, EXTRA] = 4, 40.0, 0.5, 1.0  # 40 + n′/2 + m′
    >>> p[-1, N1_LO], p[-1, N1_HI] = 0.0, 30.0
    >>> choice_at_bounds(p, 2) == SETTLED   # 20 against 42..57: member 0 by ≥ 2.1×
    True
    >>> float(p[-1, MARGIN])
    2.1
    >>> choice_at_bounds(p, 7) == SETTLED   # 45 against 47..62: member 0 by ≥ 47/45
    True
    >>> round(float(p[-1, MARGIN]), 4)
    1.0444
    >>> choice_at_bounds(p, 8)              # 50 against 48..63: it depends on n′
    -1
    """
    state = plan.shape[0] - 1
    lgm = math.log2(size + 2.0)
    lo, c_lo, next_lo = _cheapest(plan, size, lgm, plan[state, N1_LO])
    if plan[lo, CODE] == 3.0:  # concave in n′: the ends settle nothing
        return NEEDS_N1
    hi, c_hi, next_hi = _cheapest(plan, size, lgm, plan[state, N1_HI])
    if hi != lo:
        return NEEDS_N1
    if c_lo > 0.0 and np.isfinite(c_hi) and c_hi > 0.0:
        margin = min(next_lo / c_lo, next_hi / c_hi, MARGIN_CAP)  # capped: no inf
        if margin > SETTLED_MARGIN:
            plan[state, MARGIN] = margin
            return lo + SETTLED
    return lo


@kernel
def select_for(plan: np.ndarray, size: int, v: float, hist: np.ndarray) -> int:
    """The member for a tuple whose key has ``size`` partners and whose own value is ``v``:
    one call for the whole decision. n′ is estimated here, from the histogram's ``lookup()``
    array (``hist_lookup.estimate_at``), and the chosen member's cost written to the state
    row (the timed runs read it); plus ``SETTLED`` (margin written) when that member wins at
    every n′ the estimator can answer, so the caller may keep it for ``size``, else plus
    ``BUCKET_SETTLED`` (margin and bucket written) when it wins at this n′ by a margin, so the
    caller may keep it for ``size`` and the estimator's bucket of ``v``.

    One compiled call per tuple matters more than its arithmetic: after a member's probe has
    run through megabytes, each further Python step of the decision runs with cold caches
    (Fig. 15's largest join rate: ~2 µs per tuple for the decision as a chain of
    Python steps and three kernel calls, ~0.9 µs of it with the members stubbed out).
    """
    state = plan.shape[0] - 1
    b = bucket_at(hist, v)
    n1 = estimate_of_bucket(hist, b)  # (``estimate_at`` would search for the bucket again)
    chosen, best, second = _cheapest(plan, size, math.log2(size + 2.0), n1)
    plan[state, COST] = best
    at_bounds = choice_at_bounds(plan, size)
    if at_bounds == chosen + SETTLED:
        return at_bounds
    if best > 0.0 and np.isfinite(second):
        margin = min(second / best, MARGIN_CAP)
        if margin > SETTLED_MARGIN:
            plan[state, MARGIN] = margin
            plan[state, BUCKET] = b
            return chosen + BUCKET_SETTLED
    return chosen


@kernel
def select_run(plan: np.ndarray, sizes: np.ndarray, values: np.ndarray, hist: np.ndarray,
               due: int, suspect: np.ndarray, out: np.ndarray) -> int:
    """:func:`select_for` over a run of tuples (the batch path): the member of least corrected
    cost for each tuple ``k`` (partner count ``sizes[k]``, value ``values[k]``) into ``out[k]``,
    up to the first tuple that must be timed, whose index is returned (``sizes.shape[0]``:
    none). A tuple is timed when it is tuple ``due`` (the router's timing interval; −1: none)
    or its member is ``suspect``; its cost is written to the state row's ``COST`` as
    :func:`select_for` does. No settled choices here: one decision costs a few ns in a loop,
    so there is nothing to save by reusing one.

    >>> p = empty_plan(2)
    >>> p[0, CODE], p[0, A], p[0, K] = 0, 10.0, 5.0                  # 10 + 5 m′
    >>> p[1, CODE], p[1, A], p[1, K], p[1, EXTRA] = 4, 40.0, 0.5, 1.0  # 40 + n′/2 + m′
    >>> p[:2, CORRECTION] = 1.0
    >>> hist = np.zeros(8)   # an empty histogram: n′ = 0
    >>> out = np.full(3, -1)
    >>> select_run(p, np.array([2, 9, 50]), np.zeros(3), hist, -1, np.zeros(2, np.bool_), out)
    3
    >>> out.tolist()   # 20 < 42; 55 > 49; 260 > 90
    [0, 1, 1]
    >>> select_run(p, np.array([2, 9, 50]), np.zeros(3), hist, 1, np.zeros(2, np.bool_), out)
    1
    >>> float(p[-1, COST])   # the timed tuple chose member 1 at 49
    49.0
    >>> select_run(p, np.array([2, 9, 50]), np.zeros(3), hist, -1, np.array([False, True]), out)
    1
    """
    state = plan.shape[0] - 1
    for k in range(sizes.shape[0]):
        size = sizes[k]
        chosen, best, _ = _cheapest(plan, size, math.log2(size + 2.0), estimate_at(hist, values[k]))
        out[k] = chosen
        if k == due or suspect[chosen]:
            plan[state, COST] = best
            return k
    return sizes.shape[0]


@kernel
def window_run(plan: np.ndarray, fresh: np.ndarray, mp: np.ndarray, tv: np.ndarray,
               tbase: np.ndarray, tsize: np.ndarray, times: np.ndarray, wmax: int,
               values: np.ndarray, hist: np.ndarray, due: int, suspect: np.ndarray,
               out: np.ndarray, cost: np.ndarray) -> int:
    """WJ-Dynamic's per-tuple decision (§4.2, ``WindowDynamic._match``'s loop) over a run of
    tuples (the batch path), as :func:`select_run`: members into ``out`` up to the first tuple
    to time, whose index is returned (its cost in ``cost[0]``).

    ``plan`` rows ``(code, A, K, K2, K3, τ, j)`` sorted by A (``cost_model.WindowPlan``,
    member j's correction folded in): code 0 costs ``A + K·m_b``, code 1 ``A + K·n′·√m′``,
    codes 2 and 3 ``A + K·m′_b + K2·m̄_b + K3·n′·√m′`` with (m̄_b, m′_b) from ``fresh[k, j]``, the
    size of tuple k's stored skyline in member j if current, else −1 (``skyline_sizes``).
    m_b counts the key's partners within w_max of the tuple's time (the by-time run
    ``tv[tbase[k] : tbase[k] + tsize[k]]``) and n′ is estimated from ``hist``, each only
    when some member's cost needs it; the loop stops at the first A no cost can beat. The
    skyline sizes live in each member's own store (``SkylineIndex``), not in the plan:
    ``fresh`` may start as NaN, and the first tuple whose decision needs them returns
    ``−1 − k``, so the caller looks them up only when a WJ-SSI-like member can still win (on
    the load-test workload WJ-SelectFirst's cost stays below their fixed parts)."""
    for k in range(mp.shape[0]):
        size = mp[k]
        sq = math.sqrt(size)
        t = times[k]
        mb = -1.0
        n1 = -1.0
        best = second = np.inf
        chosen = 0
        for r in range(plan.shape[0]):
            code, a, kk = plan[r, 0], plan[r, 1], plan[r, 2]
            j = int(plan[r, 6])
            if a >= best:  # per-tuple terms are >= 0 and A ascends: no later member can win
                second = min(second, a)
                break
            if code == 0.0:
                if mb < 0.0:
                    mb = float(count_between(tv, tbase[k], tbase[k] + tsize[k], t - wmax,
                                             t + wmax))
                c = a + kk * mb
            elif code == 1.0:
                if kk != 0.0 and n1 < 0.0:
                    n1 = estimate_at(hist, values[k])
                c = a + (kk * n1 * sq if kk != 0.0 else 0.0)
            else:
                fr = fresh[k, j]
                if fr != fr:  # not looked up: the caller fills ``fresh`` and calls again
                    return -1 - k
                if fr >= 0.0:
                    mbar, mpb = fr, 2.0 * fr
                else:
                    if mb < 0.0:
                        mb = float(count_between(tv, tbase[k], tbase[k] + tsize[k], t - wmax,
                                             t + wmax))
                    mbar, mpb = min(mb, 2.0 * plan[r, 5]), size
                c = a + kk * mpb + plan[r, 3] * mbar
                if plan[r, 4] != 0.0:
                    if n1 < 0.0:
                        n1 = estimate_at(hist, values[k])
                    c += plan[r, 4] * n1 * sq
            if c < best:
                best, second, chosen = c, best, j
            elif c < second:
                second = c
        out[k] = chosen
        if k == due or suspect[chosen]:
            cost[0] = best
            return k
    return mp.shape[0]


__all__ = ["BUCKET", "BUCKET_SETTLED", "COST", "CORRECTION", "MARGIN", "N1_HI", "N1_LO", "NEEDS_N1", "PLAN_COLUMNS", "SETTLED",
           "SETTLED_MARGIN", "STATE_COLUMNS", "choice_at_bounds", "empty_plan", "fill_row",
           "member_cost", "select_for", "select_run", "window_run"]
