"""The per-tuple cost-based router (paper 004 §4): ``SJ-Dynamic``, ``BJ-Dynamic``, ``WJ-Dynamic``.

Each Dynamic strategy keeps every member strategy's index up to date (the paper's
"pre-compiled alternatives") and, per incoming tuple, evaluates each member's cost model
(:mod:`matcher.cost_model`) from exact quantities (|S|, |Q|, τ, hotspot sizes, the key's partner
count m′, a window key's m_b) and estimated ones (n′ from an interval histogram of the
subscriptions' own ranges, :mod:`matcher.histogram`; n″ and m̄_b as §4.1/§4.2 describe), then
runs only the cheapest member. Every member yields the same deliveries, so routing never changes
results — only speed. Decisions are counted per member (``stats()["decisions"]``, exported by
the server as ``hotjoin_router_decisions_total``).

Online calibration (``_Routing._learn``, on by default, option ``router_feedback``): the profile
fits the calibration grid, and a workload can sit where that fit is poor (the shipped profile
under-predicted SJ-Hotspot on tens of thousands of tiny scattered groups by ~2×, and the router
kept choosing it). Every ``FEEDBACK_EVERY``-th routed tuple (up to ``FEEDBACK_QUIET`` times
fewer while the timed runs land near their predictions) the chosen member's run is timed and
its correction factor (per member and incoming side) takes one sign step toward measured /
modelled; every ``EXPLORE_EVERY``-th timed tuple the runner-up runs instead when its corrected
cost is within ``EXPLORE_WITHIN`` of the choice, so an over-predicted member is measured too.
The corrected cost is the model times the factor; the factors are exported as
``hotjoin_router_correction``. A member never timed, or whose last timed run was ``FAR_OFF`` its
model, is *suspect*: SJ- and WJ-Dynamic time every tuple routed to it (and reuse no choice of
it) until a run lands within ``FAR_OFF``. Found in session 12 on the server's load-test workload:
SJ-JoinFirst, modelled cheap there, took ~0.35 ms per tuple, and with one timed run per
``FEEDBACK_EVERY`` routed tuples (each moving its correction by at most 2×) the first batches
of a fresh engine spent 2–4 µs per event on it, against ~1 µs later.

Routing overhead (0.5–2.5 µs per tuple in CPython, ``docs/benchmarks-router.md``) is kept down:

* band joins' costs (Theorem 2) depend only on |Q|, |S|, τ and hotspot sizes, so the choice is
  re-evaluated every ``BAND_REFRESH`` tuples and after any subscription change, not per tuple;
* select and window joins read m′ from the key index lookup every member does first anyway
  (§4.2: "we can perform this lookup first without any penalty") — exact, so no histogram of
  stored keys is needed for m′; n′ is one histogram lookup;
* the slowly moving quantities are folded into per-member constants every ``PLAN_REFRESH``
  tuples, members are tried in the order of a lower bound of their cost and the loop stops at
  the first bound that reaches the best cost so far (often before any n′ estimate).

``force(name)`` pins one member (benchmarks time every member on the same tuples that way, which
is how ``*-Optimum`` is measured: the fastest member per tuple, :mod:`matcher.bench.router`).
Members share one id list; an index is never built twice for the same subscription.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.joins.band import BAND_STRATEGIES, BandStrategy, make_band_strategy
from hotjoin.matcher.joins.protocol import (
    BatchRows,
    DenseIds,
    KeyedEvents,
    MatchBuffer,
    each_event,
)
from hotjoin.matcher.joins.select import (
    SELECT_STRATEGIES,
    SelectStrategy,
    make_select_strategy,
    own_other,
    partner_group,
)
from hotjoin.matcher.joins.window import (
    WINDOW_STRATEGIES,
    Partners,
    WindowEvents,
    WindowStrategy,
    make_window_strategy,
    partners_of,
)
from hotjoin.matcher.joins.window_kernels import count_within
from hotjoin.matcher.model import Side
from hotjoin.matcher.partition.histogram import (
    IntervalHistogramChooser,
    bucket_function,
    count_stabbed,
    estimate_of_bucket,
)
from hotjoin.matcher.router.choice_kernels import (
    BUCKET,
    BUCKET_SETTLED,
    CORRECTION,
    COST,
    MARGIN,
    N1_HI,
    N1_LO,
    SETTLED,
    empty_plan,
    fill_row,
    member_cost,
    select_for,
    select_run,
    window_run,
)
from hotjoin.matcher.router.cost_model import (
    MODELS,
    BandQuantities,
    CostProfile,
    SelectQuantities,
    WindowQuantities,
    fresh_skyline,
    load_profile,
    skyline_sizes,
)
from hotjoin.matcher.subscriptions import SubscriptionColumns

BAND_REFRESH = 64
"""Band joins re-evaluate Theorem 2's costs every this many tuples (|S| moves by at most that)."""
BAND_SWITCH = 1.05
"""BJ-Dynamic leaves its current member only for one modelled at least this much cheaper.
Members whose costs tie (BJ-SSI and BJ-Hotspot on the load test's clustered bands, within a
few % of each other) would otherwise swap at the noise of the learned corrections, and each
swap runs on an index the caches have not seen: on ``bench router --batch``'s band point at
100,000 subscriptions, 600 of 1,500 tuples went to the other member and BJ-Dynamic ran at
0.886 of BJ-SSI (session 16)."""
PLAN_REFRESH = 64
"""Select and window joins refold the slowly moving quantities (|S|, |Q|, τ, hotspot sizes) into
per-member constants every this many tuples; per tuple only m′, n′, m_b, m̄_b are read."""
SAMPLE_EVERY = 1024
"""Every this many routed tuples (or n/16 with n subscriptions, whichever is more), the exact
n′ is counted once (O(n) numba, ~1–2 ns per subscription) to score the two histograms; so the
sampling costs ~0.02 µs per tuple on average (every 256 or n/64 tuples, as until session 8,
cost ~0.1 µs: 1 % of a 10 µs probe)."""

FEEDBACK_EVERY = 32
"""Every this many routed tuples the chosen member's run is timed and its correction learned
(``_Routing._learn``; less often while quiet, ``FEEDBACK_QUIET``). A timed run costs ~1.5 µs
of Python (two clock reads, the learning step) timed alone, so every 8th tuple (as until
session 8) cost ~0.2 µs per tuple on average: 2 % of a 10 µs SelectFirst probe; between
probes, with cold caches, a timed tuple took ~6.5 µs more than another (session 14)."""
FEEDBACK_QUIET = 32
QUIET_BAND = 1.25
"""SJ- and WJ-Dynamic time less often while calibration has little to learn: each timed run
whose measured / predicted ratio (correction included) lies within ``QUIET_BAND`` either way
doubles the interval between timed tuples, up to ``FEEDBACK_QUIET × FEEDBACK_EVERY``; a run
outside the band but not ``FAR_OFF`` halves it; a far run, an exploration or a tuple routed to
a suspect member brings it back to ``FEEDBACK_EVERY`` at once (explorations keep their pace
in routed tuples: ``_timed_choice``). A timed tuple costs ~6.5 µs
more than another at Fig. 18's first point (session 14: medians 16.8 against 10.3 µs, one
tuple in ~22 timed), ~3 % of the probe, where 94 % of the timed runs land within 1.25× of
their prediction (82 % at Fig. 18's selection rate 0.05)."""
BATCH_SPREAD = 128
"""On the batch path a routed tuple counts as 1/``BATCH_SPREAD`` of one toward the next timed
tuple. A timed tuple runs alone through the one-at-a-time Python path (``_timed_event``: ~25 µs
warm, 90–140 µs after other work evicted the caches, against ~3–6 µs per tuple inside a
member's batch call, throwaway timings on Figs. 15 and 18 in sessions 16 and 17), so timing
every ``FEEDBACK_EVERY``-th batch tuple would spend on it several times the share of work it
costs one at a time. Learning then takes more tuples, about as much time. (32 until session
17: at Fig. 18's first point, with the bench's cache eviction, a timed tuple came about every
1,000 batch tuples and cost ~1.5 % of the pass; window 1k alike.)"""
FEEDBACK_STEP = 1.04
"""The largest factor by which one timed run moves the chosen member's correction up or down:
a sign step, so the factor tracks the median of measured / predicted and one outlier (a
preemption, a page fault) moves it by 4 % at most."""
STEP_FLOOR = 1.0025
"""The least sign step. Each member's step adapts as in Rprop (Riedmiller and Braun, 1993):
×``STEP_GROW`` (in log scale) after a step in the same direction as the one before, ×0.5 after
a reversal. A correction that found its median then oscillates by ~0.25 % instead of ±4 %, so
the ratios between members stay still and SJ-Dynamic's settled choices survive (measured in
session 12 with fixed 4 % steps: the drift reached 1.1–1.2 within a few hundred tuples and about
two of three tuples of Fig. 12's first point paid a kernel call, 0.86 µs per tuple in all against
0.18 µs with calibration off); a workload change is followed at up to ``FEEDBACK_STEP`` per run
again after a few steps the same way."""
STEP_GROW = 1.5
EXPLORE_EVERY = 16
"""Every this many timed runs, the cheapest *other* member runs instead if its corrected cost
is within ``EXPLORE_WITHIN`` of the choice, so a member the model over-predicts gets measured
too (regret at most (EXPLORE_WITHIN − 1) / (FEEDBACK_EVERY · EXPLORE_EVERY) ≈ 0.2 % while the
model is right; an explored member's correction moves half-way to its measured ratio at once,
so one the model under-predicts stops being explored after a run or two)."""
EXPLORE_WITHIN = 2.0
FAR_OFF = 2.0
"""A measured / modelled ratio beyond this factor (either way) moves the correction by its
square root (at most 2×; at most ``FAR_REPEAT_CAP`` on a repeat) instead of one
``FEEDBACK_STEP`` when the member was far off (either way) in a recent timed run
(``CALM_RUNS``), or ran below its model as an exploration or on its first timing: a member
whose model is 30× off is corrected within a few runs instead of ~90 (each costing 30× the
choice when explored), while one preempted run of the routed member moves it by one sign step
only (until session 12 it moved it by up to 2×, and its settled choices with it).

A single far run *above* the model waits for a repeat even on a first or explored run (one
more run of a member that is really that far off), and a far run the other way from the last
one undoes what that one moved (session 17). Until then a first run moved half-way at once and
a run the other way took a sign step: at Fig. 15's m′ = 10, SJ-JoinFirst's first timed run,
2.04× its model with its index cold after the other members' runs, left its correction at 1.43
where its later runs measured 0.26–0.68, and it got 6 of the ~90 tuples it wins."""
CALM_RUNS = 2
"""A far run of a member counts as a repeat of its last far run the same way (a geometric move,
up to ``FAR_REPEAT_CAP``) unless this many of its timed runs in a row landed near the model
in between. Per-tuple costs scatter: on the load-test window workload WJ-SSI ran 15–33× its
modelled cost on most tuples but near it on some; with one near run clearing the memory
(session 12), each far run was taken for a preemption (a sign step) and WJ-SSI kept being
chosen for ~60 tuples at ~0.7 ms each (session 13)."""
FAR_REPEAT_CAP = 8.0
"""The largest factor of a geometric move made on a repeated far run (the member was as far off
the same way in a recent run, ``CALM_RUNS``): two far runs in a row are the workload, not a
preemption, so the correction moves half-way in log scale by up to 8× (a member 20× off is
corrected in two or three of its runs, not five)."""
_LOG_STEP = math.log(FEEDBACK_STEP)
_LOG_FLOOR = math.log(STEP_FLOOR)
CORRECTION_RANGE = (1.0 / 64.0, 64.0)
REFOLD_DRIFT = 1.3
"""A correction that moved by more than this factor since the plan was folded refolds it."""

DEFAULT_MEMBERS = {
    "select": ("SJ-JoinFirst", "SJ-SelectFirst", "SJ-Vanilla", "SJ-Hotspot"),
    "band": ("BJ-QOuter", "BJ-DOuter", "BJ-MJ", "BJ-SSI", "BJ-Hotspot"),
    "window": ("WJ-JoinFirst", "WJ-SelectFirst", "WJ-SSI", "WJ-Hotspot"),
}
"""The alternatives each Dynamic strategy routes between (option ``router_members`` overrides).
SJ-Dynamic uses the paper's four (§5.4); SJ-SSI is left out as SJ-Hotspot contains it."""

RUN_MARGIN = 2.0
RUN_LENGTH = 8
"""WJ-Dynamic decides once per run of alike tuples (issue 14 item 3) when the choice is clear:
a member that the models put at least ``RUN_MARGIN`` times below every other for one tuple
serves the next ``RUN_LENGTH`` tuples whose partner count m′ is in the same octave, with no
per-tuple decision. The decision needs m_b (a search of the key's by-time run), n′ and two
skyline states, ~2 µs of Python against a ~25 µs WJ-SelectFirst probe (measured in session
12: 0.93 of the best static strategy at both window points, where the runner-up is modelled
4.7–20× dearer for every tuple). Timed tuples always decide in full, and the runs are dropped
whenever the plan is refolded (every ``PLAN_REFRESH`` tuples)."""

DYNAMIC_NAMES = {"select": "SJ-Dynamic", "band": "BJ-Dynamic", "window": "WJ-Dynamic"}


def _profile(options: dict[str, Any]) -> CostProfile:
    p = options.get("cost_profile")
    if isinstance(p, CostProfile):
        return p
    prof = load_profile(p)
    options["cost_profile"] = prof  # one load per engine, shared by the three kinds
    return prof


def _members(kind: str, options: dict[str, Any], allowed: tuple[str, ...]) -> tuple[str, ...]:
    names = tuple((options.get("router_members") or {}).get(kind) or DEFAULT_MEMBERS[kind])
    bad = [n for n in names if n not in allowed]
    if bad or not names:
        raise ValueError(f"router_members[{kind!r}] must name {kind}-join strategies "
                         f"({', '.join(allowed)}), got {names!r}")
    return names


class _Routing:
    """What the three Dynamic strategies share: members, constants, decisions, forcing."""

    kind = ""
    member_names: tuple[str, ...] = ()
    members: list[Any]

    def _init_routing(self, options: dict[str, Any], allowed: tuple[str, ...],
                      make: Callable[[str], Any]) -> None:
        """Build the members (``make(name)``, sharing this strategy's id list) and the
        routing state."""
        self.member_names = _members(self.kind, options, allowed)
        self.members = [make(n) for n in self.member_names]
        for m in self.members:
            m.ids = self.ids  # type: ignore[attr-defined]
        prof = _profile(options)
        self.models = [MODELS[n] for n in self.member_names]
        self.coef = [prof.constants(n) for n in self.member_names]
        self.counts = [0] * len(self.member_names)  # routed tuples per member
        self.forced: int | None = None
        self.last = -1
        nm = len(self.member_names)
        self.feedback = bool(options.get("router_feedback", True))
        self.corr = {1: [1.0] * nm, -1: [1.0] * nm}  # learned measured / modelled, per member
        self._folded = {1: [1.0] * nm, -1: [1.0] * nm}  # the corrections the plans hold
        # each member's last far-off timed run (FAR_OFF): 1 above, -1 below, 0 none since
        # ``CALM_RUNS`` near runs in a row (``_calm`` counts them)
        self._far = {1: [0] * nm, -1: [0] * nm}
        self._calm = {1: [0] * nm, -1: [0] * nm}
        # *suspect* members (module docstring): never timed yet, or far off their model when
        # last timed; SJ-/WJ-Dynamic time every tuple routed to one until a run lands near it
        # (a mask per direction: the batch path's decision kernels read it as it is)
        self._suspect = {1: np.ones(nm, dtype=np.bool_), -1: np.ones(nm, dtype=np.bool_)}
        self._no_suspects = np.zeros(nm, dtype=np.bool_)
        # each member's last sign step, in log scale (its sign: the direction it moved)
        self._steps = {1: [math.log(FEEDBACK_STEP)] * nm, -1: [math.log(FEEDBACK_STEP)] * nm}
        self._countdown = {1: 0, -1: 0}  # tuples until the plan is refolded (< 0: now)
        # SJ-/WJ-Dynamic: tuples until the next timed one (≤ 0: this one), and the interval
        self._to_time = {1: 1, -1: 1}
        self._quiet = {1: 1, -1: 1}  # the interval is ``FEEDBACK_EVERY`` times this
        self._explore = EXPLORE_EVERY
        self.explorations = 0
        self.clock = time.perf_counter_ns
        self._unmeasured = {1: set(range(nm)), -1: set(range(nm))}  # never timed yet

    def quantities(self, dirn: int, b: float, v: float, t: int, table: BaseTable) -> Any:
        """The inputs of the kind's cost models for an incoming tuple (direction ``dirn``, key
        ``b``, value ``v``, time ``t``) against ``table``; None when no member would work."""
        raise NotImplementedError

    def features(self, dirn: int, b: float, v: float, t: int,
                 table: BaseTable) -> list[list[float]] | None:
        """Each member's feature vector (its ``cost_model.MODELS`` entry) for one incoming
        tuple; None when no member would do any work (e.g. no partner of its key)."""
        x = self.quantities(dirn, b, v, t, table)
        if x is None:
            return None
        return [model.features(m, x) for model, m in zip(self.models, self.members, strict=True)]

    def costs(self, dirn: int, b: float, v: float, t: int,
              table: BaseTable) -> list[float] | None:
        """Each member's modelled cost (ns) for one incoming tuple, without the learned
        corrections (tests, calibration); None as :meth:`features`."""
        x = self.quantities(dirn, b, v, t, table)
        return None if x is None else self._costs(x)

    def _costs(self, x: Any) -> list[float]:
        return [model.cost(c, m, x) for model, c, m in zip(self.models, self.coef, self.members,
                                                            strict=True)]

    def _learn(self, d: int, i: int, predicted: float, elapsed: float,
               explored: bool = False) -> None:
        """Online calibration: one step of member ``i``'s correction toward the measured /
        modelled ratio of the run just timed (``predicted`` includes the current correction):
        a sign step near the ratio, a bounded geometric one far from it (``FAR_OFF``) when a
        recent far run confirms or contradicts it, or when ``i`` ran below its model as an
        exploration (rare, and each one costs what the runner-up costs more than the choice: it
        must count) or on its first timing.

        The fitted profile is the model's scale on the calibration grid; the workload at hand
        can sit where the fit is poor (e.g. tens of thousands of tiny scattered groups), and
        the router would keep choosing a member the model under-predicts. Times measure only
        the member's own call, so the engine's fixed per-tuple cost, the same for every member,
        drops out of the comparison once the contenders have been measured.
        """
        corr = self.corr[d]
        before = list(corr)
        c = corr[i]
        r = elapsed / predicted if predicted > 0.0 else 2.0
        steps = self._steps[d]
        far = 0 if FAR_OFF * r >= 1.0 and r <= FAR_OFF else 1 if r > 1.0 else -1
        last_far = self._far[d][i]
        if far:
            self._far[d][i], self._calm[d][i] = far, 0
        else:
            self._calm[d][i] += 1
            if self._calm[d][i] >= CALM_RUNS:
                self._far[d][i] = 0
        self._suspect[d][i] = far != 0
        if far and (last_far or (far < 0 and (explored or i in self._unmeasured[d]))):
            # far off as in a recent run (a new workload), or below the model on a member
            # explored or timed for the first time: go half-way in log scale, at most 2× per
            # run (FAR_REPEAT_CAP on a repeat), so one preempted run cannot shut a member out.
            # A single far run above the model is more likely a preemption, a page fault or a
            # cold cache (a member's first timed run after the others evicted its index lands
            # ~2× high) and takes a sign step; the member stays suspect, so a confirming run
            # comes soon when it is routed, and at its next exploration otherwise (until
            # session 17 a first or explored run moved half-way at once). Far the other way
            # from a recent far run undoes what that run moved, which sign steps would take
            # over a dozen of the member's rare timed runs to do (session 17)
            x = math.sqrt(r)
            cap = FAR_REPEAT_CAP if far == last_far else 2.0  # a repeat is no preemption
            c *= cap if x > cap else 1.0 / cap if x < 1.0 / cap else x
            steps[i] = math.log(FEEDBACK_STEP)
        else:
            # an adaptive sign step (``STEP_FLOOR``): signed log step, its sign the last move
            up = r > 1.0
            last = steps[i]
            size = abs(last)
            size = size * STEP_GROW if (last > 0.0) == up else size * 0.5
            size = min(max(size, _LOG_FLOOR), _LOG_STEP)
            steps[i] = size if up else -size
            c *= math.exp(steps[i])
        lo, hi = CORRECTION_RANGE
        c = lo if c < lo else hi if c > hi else c
        corr[i] = c
        if far or explored:  # the next timed tuple comes at the base interval again
            self._quiet[d] = 1
            self._to_time[d] = min(self._to_time[d], FEEDBACK_EVERY)
        elif 1.0 / QUIET_BAND <= r <= QUIET_BAND:
            self._quiet[d] = min(2 * self._quiet[d], FEEDBACK_QUIET)
        else:
            self._quiet[d] = max(self._quiet[d] // 2, 1)
        fresh = self._unmeasured[d]
        if fresh:
            # Times leave out the engine's own per-tuple work, so every measured ratio sits a
            # little below 1; members never timed follow a ratio below 1 (capped at 1) so that
            # the first member measured does not look cheaper than the rest for that alone.
            # A ratio above 1 is the chosen member's own error and is not passed on.
            fresh.discard(i)
            for j in fresh:
                corr[j] = c if c < 1.0 else 1.0
        self._moved(d, before)

    def _moved(self, d: int, before: list[float]) -> None:
        """The corrections of direction ``d`` were ``before`` and are now ``self.corr[d]``."""
        for j, (c, b) in enumerate(zip(self.corr[d], before, strict=True)):
            if c != b:
                self._corrected(d, j, c)

    def _corrected(self, d: int, i: int, c: float) -> None:
        """Member ``i``'s correction for direction ``d`` is now ``c``: refold the plan when it
        drifted from the folded one (SJ-Dynamic's plan holds it as a column instead), and time
        the first tuple decided on the new plan (WJ-Dynamic), so a correction on the move is
        followed run after run. (Until session 14 the first tuple after every refold was timed,
        by the countdown's alignment; without that, on the load-test window workload, whose
        ~2 % of tuples with partners leave few timed runs, a fresh engine settled on
        WJ-JoinFirst or WJ-Hotspot at ~4× WJ-SelectFirst's cost in most bench runs.)"""
        f = self._folded[d][i]
        if c > f * REFOLD_DRIFT or c * REFOLD_DRIFT < f:
            self._countdown[d] = 0
            self._to_time[d] = 1

    def _timed_choice(self, d: int, i: int, predicted: float,
                      costs: Callable[[], list[float]],
                      stood_for: float | None = None) -> tuple[int, float]:
        """The member to run on a timed tuple and its predicted (corrected) cost: ``i``, or now
        and then the runner-up (``_explore_pick`` over the raw ``costs()``); counts the
        decision. A timed run counts for as many base intervals (``FEEDBACK_EVERY`` tuples) as
        it stood for — after a quiet interval (``FEEDBACK_QUIET``) ``_quiet[d]`` — so
        explorations keep their pace in routed tuples; BJ-Dynamic gives its own ``stood_for``
        (:meth:`BandDynamic._routed`: one run timed per refresh, explored whole)."""
        self._explore -= self._quiet[d] if stood_for is None else stood_for
        if self._explore <= 0:
            i, predicted = self._explore_pick(d, i, costs())
        self.last = i
        self.counts[i] += 1
        return i, predicted

    def _explore_pick(self, d: int, i: int, costs: list[float]) -> tuple[int, float]:
        """Member ``i`` or, if its corrected cost is within ``EXPLORE_WITHIN`` of ``i``'s, the
        cheapest other member, with its corrected predicted cost (``costs``: raw models)."""
        self._explore = EXPLORE_EVERY
        corr = self.corr[d]
        cc = [c * k for c, k in zip(costs, corr, strict=True)]
        j = min((x for x in range(len(cc)) if x != i), key=cc.__getitem__, default=i)
        if j != i and cc[j] <= EXPLORE_WITHIN * cc[i]:
            self.explorations += 1
            return j, cc[j]
        return i, cc[i]

    def _tick(self, d: int) -> bool:
        """One routed tuple of direction ``d``: whether it is due to be timed (then the next
        one is ``FEEDBACK_EVERY`` times ``_quiet[d]`` tuples away). Never with calibration
        off."""
        left = self._to_time[d] - 1
        if left > 0:
            self._to_time[d] = left
            return False
        if not self.feedback:  # not timed; the common case stays on its inline path
            self._to_time[d] = FEEDBACK_QUIET * FEEDBACK_EVERY
            return False
        self._to_time[d] = FEEDBACK_EVERY * self._quiet[d]
        return True

    def _suspects(self, d: int) -> np.ndarray:
        """The suspect members of direction ``d`` as a mask (none without feedback), read-only."""
        return self._suspect[d] if self.feedback else self._no_suspects

    def _route_run(self, d: int, n: int, refresh: Callable[[int, int], None],
                   decide: Callable[[int, int, int, np.ndarray], int],
                   timed: Callable[[int, int], None]) -> np.ndarray:
        """The batch path's decisions for ``n`` tuples of direction ``d`` (SJ- and WJ-Dynamic),
        on the one-at-a-time counters: ``decide(k, n, due, out)`` (one compiled call) writes the
        members of tuples ``k … n − 1`` into ``out`` up to the first one to time — offset
        ``due`` (−1: none is due) or one routed to a suspect member — and returns its offset
        (``n − k``: none), which ``timed(k, member)`` then runs alone, learning before the rest
        is decided. Returns each tuple's member, −1 for the timed ones (already run).

        ``refresh(k, tuples)`` refolds the plan before tuple ``k`` when the countdown is due
        (``tuples``: routed since the last refresh, for the histograms' sampling). It runs at
        most once per stretch: inside a run the other side's table and the subscriptions are
        fixed, so only a timed tuple (which ends a stretch) can move what a refold reads; a
        refresh that falls due inside a stretch is made before the next one. (Until session 16
        a stretch also ended at every ``PLAN_REFRESH``-th tuple: one more decision call and
        refresh per 64 tuples, the refresh ~3 µs of it at Fig. 15's first point, a throwaway
        timing.)"""
        choice = np.empty(n, dtype=np.int64)
        k = 0
        while k < n:
            cd = self._countdown[d] - 1
            if cd < 0:
                refresh(k, PLAN_REFRESH - cd)
                cd = PLAN_REFRESH
            # the tuple due to be timed, counting each batch tuple as 1 / BATCH_SPREAD
            due = (max(math.ceil(self._to_time[d] * BATCH_SPREAD) - 1, 0) if self.feedback
                   else -1)
            t = decide(k, n, due, choice[k:])
            self._to_time[d] -= t / BATCH_SPREAD  # the tuples decided before it
            if t == n - k:
                self._countdown[d] = cd - t + 1  # below 0: a refresh is due (next stretch)
                break
            self._countdown[d] = cd - t
            if not self._tick(d):  # not due: timed because its member is suspect
                self._quiet[d] = 1
            timed(k + t, int(choice[k + t]))
            choice[k + t] = -1
            k += t + 1
        return choice

    def _dispatch(self, choice: np.ndarray, run: Callable[[Any, np.ndarray | None], None]) -> None:
        """``run(member, indexes)`` once per member for the tuples ``choice`` gave it; indexes
        None when one member has every tuple (the common case: no subset is built)."""
        n = choice.shape[0]
        per = np.bincount(choice + 1, minlength=len(self.members) + 1)  # [0]: timed (−1)
        for i, member in enumerate(self.members):
            k = int(per[i + 1])
            if k:
                self.counts[i] += k
                self.last = i
                run(member, None if k == n else np.flatnonzero(choice == i))

    def force(self, name: str | None) -> None:
        """Run only member ``name`` from now on (None: route by cost again). Benchmarks."""
        self.forced = None if name is None else self.member_names.index(name)

    def check_invariants(self) -> None:
        """Every member's own invariants (the engine's tests call this after each operation)."""
        assert not self._no_suspects.any()
        for m in self.members:  # type: ignore[attr-defined]
            check = getattr(m, "check_invariants", None)
            if check is not None:
                check()

    def memory_bytes(self) -> int:
        """The shared id list once plus each member's index."""
        ids = self.ids  # type: ignore[attr-defined]
        return ids.arr.nbytes + sum(m.memory_bytes() - m.ids.arr.nbytes
                                    for m in self.members)  # type: ignore[attr-defined]

    def routing_stats(self) -> dict[str, Any]:
        return {"decisions": dict(zip(self.member_names, self.counts, strict=True)),
                "members": list(self.member_names),
                "corrections": {"R" if d > 0 else "S": dict(zip(self.member_names, c,
                                                                   strict=True))
                                for d, c in self.corr.items()},
                "explorations": self.explorations}


class _OwnRanges:
    """n′(v) per direction: interval histograms of the own ranges (A for R, C for S), §4.1.

    Each direction keeps HIST-EQW and HIST-SSI (Appendix B) in an
    :class:`~matcher.histogram.IntervalHistogramChooser`, updated on every subscription change
    and rebuilt when churn passes its threshold — on the subscribe path, never while matching
    (a rebuild at 100k subscriptions takes ~0.25 s). Every ``SAMPLE_EVERY`` routed tuples the
    exact n′ is counted once (O(n) numpy) and scores both; the better one answers.
    """

    def __init__(self, cols: SubscriptionColumns, ids: DenseIds) -> None:
        self.cols = cols
        self.ids = ids
        self.hist = {d: IntervalHistogramChooser() for d in (1, -1)}
        self.count = 0

    def _refresh(self, d: int) -> None:
        h = self.hist[d]
        if h.needs_rebuild():
            lo, hi = own_other(self.cols, d)[:2]
            q = self.ids.view()
            h.rebuild(lo[q], hi[q])

    def add(self, q: int) -> None:
        for d, h in self.hist.items():
            lo, hi = own_other(self.cols, d)[:2]
            h.add(float(lo[q]), float(hi[q]))
            self._refresh(d)

    def add_many(self, qs: np.ndarray) -> None:
        for d, h in self.hist.items():
            lo, hi = own_other(self.cols, d)[:2]
            h.add_many(lo[qs], hi[qs])
            self._refresh(d)

    def remove(self, q: int) -> None:
        """Call after ``q`` left the id list (the rebuild reads the live ids)."""
        for d, h in self.hist.items():
            lo, hi = own_other(self.cols, d)[:2]
            h.remove(float(lo[q]), float(hi[q]))
            self._refresh(d)

    def estimate(self, d: int, v: float) -> float:
        """n′(v) for direction ``d``; now and then counts it exactly to score the histograms."""
        self.tick(d, v, 1)
        return self.hist[d].estimate(v)

    def tick(self, d: int, v: float, tuples: int) -> None:
        """``tuples`` more estimates were asked; every max(SAMPLE_EVERY, n/16) of them the exact
        n′(v) is counted (O(n), numba) and scores the two histograms."""
        self.count += tuples
        if self.count >= max(SAMPLE_EVERY, len(self.ids) // 16):
            self.count = 0
            lo, hi = own_other(self.cols, d)[:2]
            self.hist[d].observe(v, count_stabbed(lo, hi, self.ids.view(), float(v)))

    def estimator(self, d: int) -> Any:
        """The current best histogram's ``estimate(v)`` for direction ``d`` (bound method)."""
        return self.hist[d].estimate

    def lookup(self, d: int) -> np.ndarray:
        """The current best histogram's array for ``histogram.estimate_at`` (direction
        ``d``; valid until the next subscription change)."""
        return self.hist[d].lookup()

    def minimum(self, d: int) -> float:
        """A lower bound of n′(v) over every v (the smallest value of the step function)."""
        return self.hist[d].minimum()

    def maximum(self, d: int) -> float:
        """An upper bound of n′(v) over every v (the largest value of the step function)."""
        return self.hist[d].maximum()

    def stats(self) -> dict[str, Any]:
        return {"R" if d > 0 else "S": h.stats() for d, h in self.hist.items()}


# -- select joins ------------------------------------------------------------------------------


class SelectDynamic(_Routing, SelectStrategy):
    """SJ-Dynamic (§4.1, §5.4): the cheapest of the members per incoming tuple.

    The decision reads the plan, a row of folded constants per member
    (``choice_kernels``); the plan is refolded every ``PLAN_REFRESH`` tuples
    when |S| or |Q| moved, and after any subscription change (which may move τ, the hotspots
    and the histograms). The learned corrections are a column of the plan.

    A tuple's decision is one compiled call, ``choice_kernels.select_for``, which also
    estimates n′ from the histogram's arrays. A choice it reports *settled* for a partner
    count m′ (the member wins at every n′, by a margin) is kept in ``_settled`` and reused with
    no call until the plan is refolded or the corrections moved some ratio of two members'
    costs by that margin (``_moved``). A choice that wins only at the tuple's own estimate is
    kept the same way for (m′, the estimator's bucket of v): the next tuple with that m′ finds
    its bucket in Python (``histogram.bucket_function``) instead of calling the kernel.
    """

    name = "SJ-Dynamic"
    kind = "select"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any]) -> None:
        SelectStrategy.__init__(self, cols, options)
        self._init_routing(options, SELECT_STRATEGIES,
                           lambda n: make_select_strategy(n, cols, options))
        self.own = _OwnRanges(cols, self.ids)
        self.hot = next((m for m in self.members if m.name == "SJ-Hotspot"), None)
        nm = len(self.members)
        self._plans = {1: empty_plan(nm), -1: empty_plan(nm)}
        self._folded_at: dict[int, tuple[int, int] | None] = {1: None, -1: None}  # (|S|, |Q|)
        # n′ estimators and their arrays for the kernel, rebound at each fold (the better
        # histogram may change, and subscription changes move its values)
        self._est: dict[int, Any] = {d: self.own.estimator(d) for d in (1, -1)}
        self._lookup = {d: self.own.lookup(d) for d in (1, -1)}
        # m′ or (m′, bucket of the n′ estimator) → member; the m′ with bucket entries
        self._settled: dict[int, dict[Any, int]] = {1: {}, -1: {}}
        self._by_bucket: dict[int, set[int]] = {1: set(), -1: set()}
        self._bucket = {d: bucket_function(self._lookup[d]) for d in (1, -1)}
        # per member g: the damage to choices of g (``_moved``), the damage at which each
        # choice settled on g may no longer hold (by ``_settled`` key), and the least of those
        self._damage = {d: [1.0] * nm for d in (1, -1)}
        self._limits: dict[int, list[dict[Any, float]]] = {d: [{} for _ in range(nm)]
                                                            for d in (1, -1)}
        self._least_limit = {d: [math.inf] * nm for d in (1, -1)}

    def _add(self, q: int) -> None:
        for m in self.members:
            m.index(q)
        self.own.add(q)
        self._changed()

    def _add_many(self, qs: np.ndarray) -> None:
        for m in self.members:
            m.index_many(qs)
        self.own.add_many(qs)
        self._changed()

    def _remove(self, q: int) -> None:
        for m in self.members:
            m.unindex(q)
        self.own.remove(q)
        self._changed()

    def _changed(self) -> None:
        self._countdown = {1: 0, -1: 0}
        self._folded_at = {1: None, -1: None}
        for d in (1, -1):
            self._settle_anew(d)

    def _moved(self, d: int, before: list[float]) -> None:
        """The plan holds the corrections as a column. A cached decision stays while no other
        member's corrected cost can have come within its margin.

        When the corrections move by fⱼ = now / before, every rival j's cost ratio to member
        g moves by fⱼ / f_g; the worst of them falls by hurt_g = f_g / min_{j≠g} fⱼ when that
        exceeds 1. The *damage* of g multiplies its hurts (improvements are ignored, so it
        bounds from above how much any rival's ratio fell since). A choice settled on g with
        margin M when g's damage was D₀ still wins while the damage stays below M·D₀, its
        *limit*. (A member moving together with the others, as the never-timed ones follow the
        first timed one, hurts nobody.)
        """
        if not self.feedback:
            return
        now = self.corr[d]
        plan = self._plans[d]
        f = []
        for j, (c, b) in enumerate(zip(now, before, strict=True)):
            plan[j, CORRECTION] = c
            f.append(c / b)
        damage, least = self._damage[d], self._least_limit[d]
        for g, fg in enumerate(f):
            rival = min(f[:g] + f[g + 1:], default=fg)
            if fg <= rival:
                continue
            dg = damage[g] = damage[g] * (fg / rival)
            if dg >= least[g]:
                limits = self._limits[d][g]
                settled = self._settled[d]
                for size in [size for size, lim in limits.items() if lim <= dg]:
                    del settled[size], limits[size]
                least[g] = min(limits.values(), default=math.inf)
                if not limits:  # nothing left to bound: start again from 1
                    damage[g] = 1.0

    def _settle(self, d: int, key: int | tuple[int, int], i: int) -> None:
        """Keep member ``i`` for partner count ``key`` or for (partner count, bucket of the
        n′ estimator) ``key`` (just settled by the kernel, whose margin is in the plan's state
        row) while ``i``'s damage stays below its limit."""
        self._settled[d][key] = i
        if isinstance(key, tuple):
            self._by_bucket[d].add(key[0])
        lim = self._limits[d][i][key] = float(self._plans[d][-1, MARGIN]) * self._damage[d][i]
        least = self._least_limit[d]
        if lim < least[i]:
            least[i] = lim

    def _settle_anew(self, d: int) -> None:
        nm = len(self.members)
        self._settled[d] = {}
        self._by_bucket[d] = set()
        self._damage[d] = [1.0] * nm
        self._limits[d] = [{} for _ in range(nm)]
        self._least_limit[d] = [math.inf] * nm

    def check_invariants(self) -> None:
        """The members' invariants; the plan holds the current corrections; every settled
        choice is still the cheapest at both bounds of n′ (so at every n′ between them), with
        its limit above its member's damage."""
        _Routing.check_invariants(self)
        nm = len(self.members)
        for d, plan in self._plans.items():
            if self.feedback:
                assert plan[:-1, CORRECTION].tolist() == self.corr[d], (plan, self.corr[d])
            by_member = {size: g for g, lims in enumerate(self._limits[d]) for size in lims}
            assert by_member == self._settled[d], (by_member, self._settled[d])
            for g, lims in enumerate(self._limits[d]):
                assert all(lim > self._damage[d][g] for lim in lims.values()), (g, lims)
                assert self._least_limit[d][g] == min(lims.values(), default=math.inf)
            lo, hi = float(plan[-1, N1_LO]), float(plan[-1, N1_HI])
            for key, j in self._settled[d].items():
                if isinstance(key, tuple):  # settled at the estimate of one bucket
                    size, at = key[0], [estimate_of_bucket(self._lookup[d], key[1])]
                    assert size in self._by_bucket[d]
                else:
                    size, at = key, [lo, hi]
                for n1 in at:
                    costs = [member_cost(plan, x, size, n1) for x in range(nm)]
                    assert costs[j] <= min(costs) * (1 + 1e-9), (d, key, j, costs)

    def quantities(self, dirn: int, b: float, v: float, t: int,
                   table: BaseTable) -> SelectQuantities | None:
        """§4.1's inputs for an incoming tuple (None: its key has no partner, nobody works)."""
        size = partner_group(table, b)[2]
        return self._quantities(dirn, v, table, size) if size else None

    def _quantities(self, dirn: int, v: float, table: BaseTable, size: int) -> SelectQuantities:
        d = 1 if dirn > 0 else -1
        return SelectQuantities(d, float(len(table)), float(len(self.ids)), float(size),
                                self.own.estimate(d, v))

    def _refresh(self, d: int, table: BaseTable, v: float, tuples: int) -> None:
        """Every ``PLAN_REFRESH`` tuples (``tuples`` since the last time): score the histograms
        now and then (``tick``), bind the better one's estimator, and refold the plan if |S|
        or |Q| moved, a subscription changed or the estimator changed since the last fold."""
        own = self.own
        own.tick(d, v, tuples)
        est = own.estimator(d)
        at = (len(table), len(self.ids))
        if self._folded_at[d] != at or est != self._est[d]:
            self._est[d] = est
            self._lookup[d] = own.lookup(d)
            self._bucket[d] = bucket_function(self._lookup[d])
            self._fold(d, table)
            self._folded_at[d] = at

    def _fold(self, d: int, table: BaseTable) -> None:
        """Each member's row of the plan (``choice_kernels.PLAN_COLUMNS``): the slowly moving
        parts (|S|, |Q|, τ, hotspot sizes) folded into its constants by the member's cost
        model (``cost_model.SelectPlan``), with its current correction; the bounds of n′."""
        plan = self._plans[d]
        corr = self.corr[d] if self.feedback else [1.0] * len(self.coef)
        x = SelectQuantities(d, float(len(table)), float(len(self.ids)), 0.0, 0.0)
        plan[-1, N1_LO], plan[-1, N1_HI] = self.own.minimum(d), self.own.maximum(d)
        for j, (model, mem, c0) in enumerate(zip(self.models, self.members, self.coef,
                                                 strict=True)):
            fill_row(plan, j, *model.plan(c0, mem, x), corr[j])
        self._settle_anew(d)

    def _match(self, buf: MatchBuffer, dirn: int, v: float, xseq: int, table: BaseTable,
               mode: int, pool: Any, base: int, size: int) -> None:
        i = self.forced
        if i is not None:
            self.last = i
            self.members[i]._match(buf, dirn, v, xseq, table, mode, pool, base, size)
            return
        d = 1 if dirn > 0 else -1
        cd = self._countdown[d] - 1
        left = self._to_time[d] - 1
        quick = cd >= 0 and left > 0  # no refresh due and not timed: a kept choice may serve
        if quick:  # the common case, inline
            settled = self._settled[d]
            i = settled.get(size, -1)
            if i < 0 and size in self._by_bucket[d]:
                i = settled.get((size, self._bucket[d](v)), -1)
            if i >= 0:
                self._countdown[d], self._to_time[d] = cd, left
                self.last = i
                self.counts[i] += 1
                self.members[i]._match(buf, dirn, v, xseq, table, mode, pool, base, size)
                return
        if cd < 0:
            self._refresh(d, table, v, PLAN_REFRESH - cd)
            cd = PLAN_REFRESH
        self._countdown[d] = cd
        timed = self._tick(d)  # (never after ``quick``, whose lookup already missed)
        i = -1
        if not (timed or quick):  # after a refresh (which may have dropped every kept choice)
            i = self._settled[d].get(size, -1)
            if i < 0 and size in self._by_bucket[d]:
                i = self._settled[d].get((size, self._bucket[d](v)), -1)
        if i < 0:
            plan = self._plans[d]
            i = select_for(plan, size, v, self._lookup[d])
            key: int | tuple[int, int] = size
            if i >= BUCKET_SETTLED:
                i -= BUCKET_SETTLED
                key = (size, int(plan[-1, BUCKET]))
            elif i >= SETTLED:
                i -= SETTLED
            else:
                key = -1
            if self.feedback and self._suspect[d][i]:
                timed = True  # never timed, or far off its model when last timed: time it
                self._quiet[d] = 1
            elif key != -1 and not timed:
                self._settle(d, key, i)
        if not timed:
            self.last = i
            self.counts[i] += 1
            self.members[i]._match(buf, dirn, v, xseq, table, mode, pool, base, size)
            return
        # a timed run: learn the chosen member's correction (now and then another's)
        chosen = i
        i, best = self._timed_choice(d, i, float(self._plans[d][-1, COST]),
                                     lambda: self._costs(self._quantities(dirn, v, table,
                                                                          size)))
        t0 = self.clock()
        self.members[i]._match(buf, dirn, v, xseq, table, mode, pool, base, size)
        self._learn(d, i, best, self.clock() - t0, i != chosen)

    def match_events(self, buf: MatchBuffer, rows: BatchRows, dirn: int, ev: KeyedEvents,
                     table: BaseTable, mode: int, pool: Any) -> None:
        """The decision inside the batch (issue 14 item 3): one ``select_run`` call decides a
        stretch of tuples up to the next one to time, which runs alone as in :meth:`_match`
        and learns; the plan is refreshed on the one-at-a-time countdown. Then each member
        matches all the tuples it was given in one ``match_events`` call."""
        n = ev.pos.shape[0]
        if self.forced is not None:
            self.last = self.forced
            self.members[self.forced].match_events(buf, rows, dirn, ev, table, mode, pool)
            return
        d = 1 if dirn > 0 else -1

        def decide(k: int, stop: int, due: int, out: np.ndarray) -> int:
            return select_run(self._plans[d], ev.size[k:stop], ev.values[k:stop],
                              self._lookup[d], due, self._suspects(d), out)

        choice = self._route_run(
            d, n, lambda k, tuples: self._refresh(d, table, float(ev.values[k]), tuples), decide,
            lambda k, i: self._timed_event(buf, rows, dirn, d, ev, k, i, table, mode, pool))

        def run(m: Any, sel: np.ndarray | None) -> None:
            m.match_events(buf, rows, dirn, ev if sel is None else ev.subset(sel), table, mode, pool)

        self._dispatch(choice, run)

    def _timed_event(self, buf: MatchBuffer, rows: BatchRows, dirn: int, d: int,
                     ev: KeyedEvents, k: int, chosen: int, table: BaseTable, mode: int,
                     pool: Any) -> None:
        """Event ``k`` of ``ev`` as a timed tuple of :meth:`_match` (member ``chosen``)."""
        v, size = float(ev.values[k]), int(ev.size[k])
        i, best = self._timed_choice(d, chosen, float(self._plans[d][-1, COST]),
                                     lambda: self._costs(self._quantities(dirn, v, table, size)))

        def timed(_: int) -> None:
            t0 = self.clock()
            self.members[i]._match(buf, dirn, v, int(ev.seqs[k]), table, mode, pool,
                                   int(ev.base[k]), size)
            self._learn(d, i, best, self.clock() - t0, i != chosen)

        each_event(timed, 1, buf, rows, mode, self.cols.acc, ev.pos[k: k + 1])

    def stats(self) -> dict[str, Any]:
        st: dict[str, Any] = {**SelectStrategy.stats(self), **self.routing_stats(),
                              "histograms": self.own.stats()}
        if self.hot is not None:
            hs = self.hot.stats()
            st.update(hotspots=hs["hotspots"], scattered=hs["scattered"])
        for m in self.members:
            if m.name == "SJ-SSI":
                st["tau"] = m.stats()["tau"]
        return st


# -- band joins --------------------------------------------------------------------------------


class BandDynamic(_Routing, BandStrategy):
    """BJ-Dynamic (§4.2): Theorem 2's costs from |Q|, |S|, τ and the hotspot sizes."""

    name = "BJ-Dynamic"
    kind = "band"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any]) -> None:
        BandStrategy.__init__(self, cols, options)
        self._init_routing(options, BAND_STRATEGIES,
                           lambda n: make_band_strategy(n, cols, options))
        self._choice = {1: -1, -1: -1}  # the member of each direction (−1: none chosen yet)
        self._raw: dict[int, list[float]] = {1: [], -1: []}  # modelled costs at the last refresh

    def _add(self, q: int) -> None:
        for m in self.members:
            m.index(q)
        self._countdown = {1: 0, -1: 0}

    def _add_many(self, qs: np.ndarray) -> None:
        for m in self.members:
            m.index_many(qs)
        self._countdown = {1: 0, -1: 0}

    def _remove(self, q: int) -> None:
        for m in self.members:
            m.unindex(q)
        self._countdown = {1: 0, -1: 0}

    def quantities(self, dirn: int, b: float, v: float, t: int,
                   table: BaseTable) -> BandQuantities | None:
        """Theorem 2's inputs: |Q| and |S|, the same for every tuple (None: empty table)."""
        return BandQuantities(float(len(self.ids)), float(len(table))) if len(table) else None

    def match(self, buf: MatchBuffer, dirn: int, b: float, v: float, xseq: int,
              table: BaseTable, mode: int) -> None:
        self._routed(dirn, 1, table,
                     lambda m: m.match(buf, dirn, b, v, xseq, table, mode))

    def match_many(self, buf: MatchBuffer, rows: BatchRows, dirn: int, bs: np.ndarray,
                   vs: np.ndarray, xseqs: np.ndarray, table: BaseTable, mode: int) -> None:
        """The router inside the batch (issue 14 item 3): band costs do not depend on the
        tuple, so one decision serves a whole run of tuples."""
        self._routed(dirn, bs.shape[0], table,
                     lambda m: m.match_many(buf, rows, dirn, bs, vs, xseqs, table, mode))

    def _routed(self, dirn: int, n: int, table: BaseTable, run: Callable[[Any], None]) -> None:
        """``run(member)`` for ``n`` tuples of direction ``dirn`` on the chosen member. The
        choice is refreshed every ``BAND_REFRESH`` tuples (a run counts all its tuples); the
        tuple (or run) that refreshes it is timed, per tuple, for the online calibration —
        band plans are cheap (10–20 µs), so timing every FEEDBACK_EVERY-th tuple would cost
        ~2 % for little."""
        i = self.forced
        if i is not None:
            self.last = i
            run(self.members[i])
            return
        d = 1 if dirn > 0 else -1
        cd = self._countdown[d] - 1
        timed = False
        if cd < 0:
            raw = self._raw[d] = self._costs(BandQuantities(float(len(self.ids)),
                                                            float(len(table))))
            corr = self.corr[d] if self.feedback else [1.0] * len(raw)
            self._folded[d] = list(corr)
            cc = [c * x for c, x in zip(raw, corr, strict=True)]
            best = min(range(len(cc)), key=cc.__getitem__)
            cur = self._choice[d]
            if cur < 0 or cc[best] * BAND_SWITCH < cc[cur]:
                self._choice[d] = best
            cd = BAND_REFRESH
            timed = self.feedback
        self._countdown[d] = cd - (n - 1)
        i = self._choice[d]
        if not timed:
            self.last = i
            self.counts[i] += n
            run(self.members[i])
            return
        raw = self._raw[d]
        chosen = i
        # an exploration runs the whole timed run (n tuples) on the runner-up: it stands for
        # max(n, BAND_REFRESH) routed tuples, and explores n at once, so it counts
        # max(n, BAND_REFRESH) / (FEEDBACK_EVERY · n) base intervals (one tuple in
        # FEEDBACK_EVERY · EXPLORE_EVERY explored, as SJ-/WJ-Dynamic); until session 16 it
        # counted ``_quiet[d]`` (1 to FEEDBACK_QUIET), which a band run does not follow
        stood = max(n, BAND_REFRESH) / (FEEDBACK_EVERY * n)
        i, predicted = self._timed_choice(d, i, raw[i] * self.corr[d][i], lambda: raw, stood)
        self.counts[i] += n - 1
        t0 = self.clock()
        run(self.members[i])
        self._learn(d, i, predicted, (self.clock() - t0) / n, i != chosen)

    def stats(self) -> dict[str, Any]:
        st: dict[str, Any] = {**BandStrategy.stats(self), **self.routing_stats()}
        for m in self.members:
            ms = m.stats()
            if m.name == "BJ-SSI":
                st["tau"] = ms["tau"]
            if m.name == "BJ-Hotspot":
                st.update(hotspots=ms["hotspots"], scattered=ms["scattered"])
        return st


# -- window joins ------------------------------------------------------------------------------


class WindowDynamic(_Routing, WindowStrategy):
    """WJ-Dynamic (§4.2): Theorem 4's costs from m′, m_b, m̄_b and n′ of the tuple's key."""

    name = "WJ-Dynamic"
    kind = "window"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: dict[Side, BaseTable]) -> None:
        WindowStrategy.__init__(self, cols, options, tables)
        self._init_routing(options, WINDOW_STRATEGIES,
                           lambda n: make_window_strategy(n, cols, options, tables))
        self.own = _OwnRanges(cols, self.ids)
        self._plans: dict[int, list[tuple[int, float, float, float, float, float, int]]] = {
            1: [], -1: []}
        self._est: dict[int, Any] = {1: None, -1: None}
        self._plan_arrays: dict[int, np.ndarray] = {1: np.zeros((0, 7)), -1: np.zeros((0, 7))}
        self._lookup: dict[int, np.ndarray] = {1: np.zeros(0), -1: np.zeros(0)}
        # m′ octave (bit length) → [member, tuples left]: a choice made by RUN_MARGIN
        self._runs: dict[int, dict[int, list[int]]] = {1: {}, -1: {}}

    def _sync_w(self) -> None:
        self._countdown = {1: 0, -1: 0}  # w_max may have moved (each member tracks its own)

    def _add(self, q: int) -> None:
        self._sync_w()
        for m in self.members:
            m.index(q)
        self.own.add(q)

    def _add_many(self, qs: np.ndarray) -> None:
        self._sync_w()
        for m in self.members:
            m.index_many(qs)
        self.own.add_many(qs)

    def _remove(self, q: int) -> None:
        self._sync_w()
        for m in self.members:
            m.unindex(q)
        self.own.remove(q)

    def quantities(self, dirn: int, b: float, v: float, t: int,
                   table: BaseTable) -> WindowQuantities | None:
        """§4.2's inputs for an incoming tuple (None: its key has no partner, nobody works)."""
        p = partners_of(table, b)
        return None if p is None else self._quantities(dirn, b, v, t, table, p)

    def _quantities(self, dirn: int, b: float, v: float, t: int, table: BaseTable,
                    p: Partners) -> WindowQuantities:
        d = 1 if dirn > 0 else -1
        return WindowQuantities(d, b, float(len(table)), float(len(self.ids)), float(p.size),
                                self._m_b(p, t), self.own.estimate(d, v))

    def _plan(self, d: int, table: BaseTable, v: float,
              tuples: int) -> list[tuple[int, float, float, float, float, float, int]]:
        """Per member ``(code, A, K, K2, K3, τ, j)`` (``cost_model.WindowPlan``) with the slowly
        moving quantities and the learned correction folded in by the member's cost model (see
        ``SelectDynamic._plan``); per tuple only m′, m_b, m̄_b, n′ are read."""
        plan = []
        corr = self.corr[d] if self.feedback else [1.0] * len(self.coef)
        self._folded[d] = list(corr)
        self.own.tick(d, v, tuples)
        self._est[d] = self.own.estimator(d)
        x = WindowQuantities(d, 0.0, float(len(table)), float(len(self.ids)), 0.0, 0.0, 0.0)
        for model, mem, c0, k in zip(self.models, self.members, self.coef, corr, strict=True):
            plan.append(model.plan([ci * k for ci in c0], mem, x))
        return sorted(((*t, j) for j, t in enumerate(plan)), key=lambda t: t[1])

    def _match(self, buf: MatchBuffer, dirn: int, b: float, v: float, t: int, xseq: int,
               table: BaseTable, mode: int, now: int, p: Partners) -> None:
        i = self.forced
        if i is not None:
            self.last = i
            self.members[i]._match(buf, dirn, b, v, t, xseq, table, mode, now, p)
            return
        d = 1 if dirn > 0 else -1
        cd = self._countdown[d] - 1
        if cd < 0:
            self._refold(d, table, v, PLAN_REFRESH - cd)
            cd = PLAN_REFRESH
        self._countdown[d] = cd
        timed = self._tick(d)
        octave = p.size.bit_length()
        run = None if timed else self._runs[d].get(octave)
        if run is not None:  # a clear choice made for this m′ octave lately: reuse it
            i = run[0]
            run[1] -= 1
            if not run[1]:
                del self._runs[d][octave]
            self.last = i
            self.counts[i] += 1
            self.members[i]._match(buf, dirn, b, v, t, xseq, table, mode, now, p)
            return
        mp = float(p.size)
        mb = -1.0
        n1 = -1.0
        best = second = math.inf
        i = 0
        for code, a, k, k2, k3, tau, j in self._plans[d]:
            if a >= best:  # per-tuple terms are >= 0 and A ascends: no later member can win
                second = min(second, a)  # nor cost less than a
                break
            if code == 0:
                if mb < 0.0:
                    mb = self._m_b(p, t)
                cost = a + k * mb
            elif code == 1:
                if k != 0.0 and n1 < 0.0:
                    n1 = self._est[d](v)
                cost = a + (k * n1 * math.sqrt(mp) if k != 0.0 else 0.0)
            else:
                fresh = fresh_skyline(self.members[j].skies[d], b)  # type: ignore[attr-defined]
                if fresh < 0.0 and mb < 0.0:
                    mb = self._m_b(p, t)
                mbar, mpb = skyline_sizes(fresh, mb, mp, tau)
                cost = a + k * mpb + k2 * mbar
                if k3 != 0.0:
                    if n1 < 0.0:
                        n1 = self._est[d](v)
                    cost += k3 * n1 * math.sqrt(mp)
            if cost < best:
                best, second, i = cost, best, j
            elif cost < second:
                second = cost
        suspect = self._suspect[d][i] and self.feedback
        if suspect:
            self._quiet[d] = 1
        if second >= RUN_MARGIN * best and not suspect:
            self._runs[d][octave] = [i, RUN_LENGTH]
        if not (timed or suspect):
            self.last = i
            self.counts[i] += 1
            self.members[i]._match(buf, dirn, b, v, t, xseq, table, mode, now, p)
            return
        chosen = i
        i, best = self._timed_choice(d, i, best * self.corr[d][i] / self._folded[d][i],
                                     lambda: self._costs(self._quantities(dirn, b, v, t, table,
                                                                          p)))
        t0 = self.clock()
        self.members[i]._match(buf, dirn, b, v, t, xseq, table, mode, now, p)
        self._learn(d, i, best, self.clock() - t0, i != chosen)

    def _refold(self, d: int, table: BaseTable, v: float, tuples: int) -> None:
        """A new plan (:meth:`_plan`), as the list the one-at-a-time loop reads and the array
        ``choice_kernels.window_run`` reads, with the n′ estimator's lookup array; the runs of
        clear choices are dropped."""
        plan = self._plans[d] = self._plan(d, table, v, tuples)
        self._plan_arrays[d] = np.array(plan, dtype=np.float64).reshape(len(plan), 7)
        self._lookup[d] = self.own.lookup(d)
        self._runs[d] = {}

    def match_events(self, buf: MatchBuffer, rows: BatchRows, dirn: int, ev: WindowEvents,
                     table: BaseTable, mode: int) -> None:
        """The decision inside the batch (issue 14 item 3), as ``SelectDynamic.match_events``:
        one ``window_run`` call decides a stretch of tuples up to the next one to time; the
        skyline states the WJ-SSI-like members' costs read are looked up once per distinct
        key of the stretch. Each member then matches its tuples in one ``match_events``."""
        n = ev.pos.shape[0]
        if self.forced is not None:
            self.last = self.forced
            self.members[self.forced].match_events(buf, rows, dirn, ev, table, mode)
            return
        ix = table.key_index
        assert ix is not None and ix.by_time is not None
        tv = ix.by_time.keys
        d = 1 if dirn > 0 else -1
        mp = ev.size.astype(np.float64)
        cost = np.zeros(1)

        def decide(k: int, stop: int, due: int, out: np.ndarray) -> int:
            plan = self._plan_arrays[d]
            fresh = np.full((stop - k, len(self.members)), np.nan)
            while True:
                t = window_run(plan, fresh, mp[k:stop], tv, ev.tbase[k:stop], ev.tsize[k:stop],
                               ev.times[k:stop], self.wmax, ev.values[k:stop],
                               self._lookup[d], due, self._suspects(d), out, cost)
                if t >= 0:
                    return t
                fresh.fill(-1.0)
                self._skyline_sizes(d, ev.g[k:stop], ev.keys[k:stop], plan, fresh)

        choice = self._route_run(
            d, n, lambda k, tuples: self._refold(d, table, float(ev.values[k]), tuples), decide,
            lambda k, i: self._timed_event(buf, rows, dirn, d, ev, k, i, float(cost[0]), table,
                                           mode))

        def run(m: Any, sel: np.ndarray | None) -> None:
            m.match_events(buf, rows, dirn, ev if sel is None else ev.subset(sel), table, mode)

        self._dispatch(choice, run)

    def _skyline_sizes(self, d: int, gs: np.ndarray, keys: np.ndarray, plan: np.ndarray,
                       fresh: np.ndarray) -> None:
        """``fresh[k, j]``: the size of key ``keys[k]``'s stored skyline in member j if it is
        current, else −1 (``fresh_skyline``), for the WJ-SSI-like members of ``plan``: one
        compiled pass per member over its skyline store by key group (``gs``).
        (Until session 16, one dict lookup per distinct key: ~130 µs per 300-tuple call of
        ``bench router``'s window workload after its cache eviction, ``np.unique`` half of
        it.)"""
        for j in plan[plan[:, 0] >= 2.0, 6].astype(np.int64).tolist():
            self.members[j].skies[d].current_sizes(gs, keys, fresh, j)  # type: ignore[attr-defined]

    def _timed_event(self, buf: MatchBuffer, rows: BatchRows, dirn: int, d: int,
                     ev: WindowEvents, k: int, chosen: int, best: float, table: BaseTable,
                     mode: int) -> None:
        """Event ``k`` of ``ev`` as a timed tuple of :meth:`_match` (member ``chosen`` at
        modelled cost ``best``, with the correction the plan folded in)."""
        b, v, t = float(ev.keys[k]), float(ev.values[k]), int(ev.times[k])
        p = Partners(table, int(ev.g[k]))
        i, predicted = self._timed_choice(
            d, chosen, best * self.corr[d][chosen] / self._folded[d][chosen],
            lambda: self._costs(self._quantities(dirn, b, v, t, table, p)))

        def timed(_: int) -> None:
            t0 = self.clock()
            self.members[i]._match(buf, dirn, b, v, t, int(ev.seqs[k]), table, mode,
                                   int(ev.nows[k]), p)
            self._learn(d, i, predicted, self.clock() - t0, i != chosen)

        each_event(timed, 1, buf, rows, mode, self.cols.acc, ev.pos[k: k + 1])

    def _m_b(self, p: Any, t: int) -> float:
        """m_b: the key's partners within w_max of t (two searches of the by-time run)."""
        return float(count_within(p.tv, p.tbase, p.tsize, t - self.wmax, t + self.wmax))

    def stats(self) -> dict[str, Any]:
        st: dict[str, Any] = {**WindowStrategy.stats(self), **self.routing_stats(),
                              "histograms": self.own.stats()}
        for m in self.members:
            ms = m.stats()
            if m.name == "WJ-SSI":
                st["tau"] = ms["tau"]
            if m.name == "WJ-Hotspot":
                st.update(hotspots=ms["hotspots"], scattered=ms["scattered"])
        return st


__all__ = ["BandDynamic", "SelectDynamic", "WindowDynamic", "DEFAULT_MEMBERS", "DYNAMIC_NAMES",
           "partner_group"]
