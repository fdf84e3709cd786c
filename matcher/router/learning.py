"""Online learning of the routers of paper 004 §4: members, decisions, corrections, forcing.

:class:`Routing` is what SJ-, BJ- and WJ-Dynamic (``router/select.py``, ``router/band.py``,
``router/window.py``) share: it builds the members (every alternative strategy of the kind,
sharing the router's id list, so an index is never built twice for a subscription), counts the
decisions per member (``stats()["decisions"]``, exported by the server as
``hotjoin_router_decisions_total``), pins one member on request (:meth:`Routing.force`:
benchmarks time every member on the same tuples that way, which is how ``*-Optimum`` is
measured, ``ops/bench/router.py``), and calibrates the cost models online.

Online calibration (:meth:`Routing._learn`, on by default, option ``router_feedback``): the
profile fits the calibration grid, and a workload can sit where that fit is poor (the shipped
profile under-predicted SJ-Hotspot on tens of thousands of tiny scattered groups by ~2×, and the
router kept choosing it). Every ``FEEDBACK_EVERY``-th routed tuple (up to ``FEEDBACK_QUIET``
times fewer while the timed runs land near their predictions) the chosen member's run is timed
and its correction factor (per member and incoming side) takes one sign step toward measured /
modelled; every ``EXPLORE_EVERY``-th timed tuple the runner-up runs instead when its corrected
cost is within ``EXPLORE_WITHIN`` of the choice, so an over-predicted member is measured too.
The corrected cost is the model times the factor; the factors are exported as
``hotjoin_router_correction`` (docs/reference/metrics.md). A member never timed, or whose last timed
run was ``FAR_OFF`` its model, is *suspect*: SJ- and WJ-Dynamic time every tuple routed to it
(and reuse no choice of it) until a run lands within ``FAR_OFF``. Measured on the server's
load-test workload: SJ-JoinFirst, modelled cheap there, took ~0.35 ms per tuple, and with one
timed run per ``FEEDBACK_EVERY`` routed tuples (each moving its correction by at most 2×) the
first batches of a fresh engine spent 2–4 µs per event on it, against ~1 µs later.

On the batch path (:meth:`Routing._route_run`) one compiled call decides a stretch of tuples up
to the next one to time, which runs alone through the one-tuple path and learns; each member
then matches the tuples it was given in one call (:meth:`Routing._dispatch`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np

from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.joins.interface import EventRun, KindIndex
from hotjoin.matcher.joins.protocol import KeyedEvents
from hotjoin.matcher.router.cost_model import MODELS, CostProfile, load_profile

PLAN_REFRESH = 64
"""Select and window joins refold the slowly moving quantities (|S|, |Q|, τ, hotspot sizes) into
per-member constants every this many tuples; per tuple only m′, n′, m_b, m̄_b are read."""
FEEDBACK_EVERY = 32
"""Every this many routed tuples the chosen member's run is timed and its correction learned
(``Routing._learn``; less often while quiet, ``FEEDBACK_QUIET``). A timed run costs ~1.5 µs
of Python (two clock reads, the learning step) timed alone, so timing every 8th tuple cost
~0.2 µs per tuple on average: 2 % of a 10 µs SelectFirst probe; between probes, with cold
caches, a timed tuple took ~6.5 µs more than another."""
FEEDBACK_QUIET = 32
QUIET_BAND = 1.25
"""SJ- and WJ-Dynamic time less often while calibration has little to learn: each timed run
whose measured / predicted ratio (correction included) lies within ``QUIET_BAND`` either way
doubles the interval between timed tuples, up to ``FEEDBACK_QUIET × FEEDBACK_EVERY``; a run
outside the band but not ``FAR_OFF`` halves it; a far run, an exploration or a tuple routed to
a suspect member brings it back to ``FEEDBACK_EVERY`` at once (explorations keep their pace
in routed tuples: ``_timed_choice``). A timed tuple costs ~6.5 µs more than another at
Fig. 18's first point (medians 16.8 against 10.3 µs, one tuple in ~22 timed), ~3 % of the
probe, where 94 % of the timed runs land within 1.25× of their prediction (82 % at Fig. 18's
selection rate 0.05)."""
BATCH_SPREAD = 128
"""On the batch path a routed tuple counts as 1/``BATCH_SPREAD`` of one toward the next timed
tuple. A timed tuple runs alone through the one-tuple path (``_timed_event``: ~25 µs warm,
90–140 µs after other work evicted the caches, against ~3–6 µs per tuple inside a member's
batch call, throwaway timings on Figs. 15 and 18), so timing every ``FEEDBACK_EVERY``-th
batch tuple would spend on it several times the share of work it costs one at a time.
Learning then takes more tuples, about as much time. (At 32, at Fig. 18's first point with
the bench's cache eviction, a timed tuple came about every 1,000 batch tuples and cost ~1.5 %
of the pass; window 1k alike.)"""
FEEDBACK_STEP = 1.04
"""The largest factor by which one timed run moves the chosen member's correction up or down:
a sign step, so the factor tracks the median of measured / predicted and one outlier (a
preemption, a page fault) moves it by 4 % at most."""
STEP_FLOOR = 1.0025
"""The least sign step. Each member's step adapts as in Rprop (Riedmiller and Braun, 1993):
×``STEP_GROW`` (in log scale) after a step in the same direction as the one before, ×0.5 after
a reversal. A correction that found its median then oscillates by ~0.25 % instead of ±4 %, so
the ratios between members stay still and SJ-Dynamic's settled choices survive (measured with
fixed 4 % steps: the drift reached 1.1–1.2 within a few hundred tuples and about two of three
tuples of Fig. 12's first point paid a kernel call, 0.86 µs per tuple in all against 0.18 µs
with calibration off); a workload change is followed at up to ``FEEDBACK_STEP`` per run again
after a few steps the same way."""
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
only (moving it by up to 2× moved its settled choices with it).

A single far run *above* the model waits for a repeat even on a first or explored run (one
more run of a member that is really that far off), and a far run the other way from the last
one undoes what that one moved. Where a first run moved half-way at once and a run the other
way took a sign step, at Fig. 15's m′ = 10 SJ-JoinFirst's first timed run, 2.04× its model
with its index cold after the other members' runs, left its correction at 1.43 where its later
runs measured 0.26–0.68, and it got 6 of the ~90 tuples it wins."""
CALM_RUNS = 2
"""A far run of a member counts as a repeat of its last far run the same way (a geometric move,
up to ``FAR_REPEAT_CAP``) unless this many of its timed runs in a row landed near the model
in between. Per-tuple costs scatter: on the load-test window workload WJ-SSI ran 15–33× its
modelled cost on most tuples but near it on some; with one near run clearing the memory, each
far run was taken for a preemption (a sign step) and WJ-SSI kept being chosen for ~60 tuples
at ~0.7 ms each."""
FAR_REPEAT_CAP = 8.0
"""The largest factor of a geometric move made on a repeated far run (the member was as far off
the same way in a recent run, ``CALM_RUNS``): two far runs in a row are the workload, not a
preemption, so the correction moves half-way in log scale by up to 8× (a member 20× off is
corrected in two or three of its runs, not five)."""
_LOG_STEP = math.log(FEEDBACK_STEP)
_LOG_FLOOR = math.log(STEP_FLOOR)
CORRECTION_RANGE = (1.0 / 64.0, 64.0)
REFOLD_DRIFT = 1.3


def profile_of(options: dict[str, Any]) -> CostProfile:
    """The engine's cost profile (option ``cost_profile``: a ``CostProfile``, a path, or None
    for the user's or the shipped one), loaded once and kept in ``options`` for every kind."""
    p = options.get("cost_profile")
    if isinstance(p, CostProfile):
        return p
    prof = load_profile(p)
    options["cost_profile"] = prof  # one load per engine, shared by the three kinds
    return prof


def members_of(kind: str, options: dict[str, Any], allowed: tuple[str, ...],
               default: tuple[str, ...]) -> tuple[str, ...]:
    """The members a router of ``kind`` routes between: option ``router_members[kind]``, else
    ``default``; ValueError (one line) when they are not strategies of the kind."""
    names = tuple((options.get("router_members") or {}).get(kind) or default)
    bad = [n for n in names if n not in allowed]
    if bad or not names:
        raise ValueError(f"router_members[{kind!r}] must name {kind}-join strategies "
                         f"({', '.join(allowed)}), got {names!r}")
    return names


class Routing(KindIndex):
    """What the three Dynamic strategies share: members, decisions, corrections, forcing.

    A router is a :class:`~matcher.joins.interface.KindIndex` of its kind whose members are the
    kind's strategies; it reaches them through that interface only (``index``/``unindex`` on
    the shared id list, ``match``, ``match_many``, ``stats``, ``check_invariants``,
    ``memory_bytes``) plus what their cost models read (``cost_model``). Put it first among
    the bases (``class SelectDynamic(Routing, SelectStrategy)``)."""

    member_classes: ClassVar[Mapping[str, type[KindIndex]]] = {}
    """The kind's strategies by paper name: the members to choose from."""
    default_members: ClassVar[tuple[str, ...]] = ()
    """The members routed between unless option ``router_members`` names others."""
    member_names: tuple[str, ...] = ()
    members: list[Any]

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """Option ``router_members`` names strategies of the kind, and the cost profile loads
        (``cost_profile``): ValueError otherwise, before any index exists."""
        members_of(cls.kind, options, tuple(cls.member_classes), cls.default_members)
        profile_of(options)

    def _init_routing(self, options: dict[str, Any]) -> None:
        """Build the members (``member_classes[name](cols, options, tables)``, sharing this
        router's id list) and the routing state."""
        classes = self.member_classes
        self.member_names = members_of(self.kind, options, tuple(classes), self.default_members)
        self.members = [classes[n](self.cols, options, self.tables) for n in self.member_names]
        for m in self.members:
            m.share_ids(self.ids)
        prof = profile_of(options)
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
            # comes soon when it is routed, and at its next exploration otherwise (``FAR_OFF``).
            # Far the other way from a recent far run undoes what that run moved, which sign
            # steps would take over a dozen of the member's rare timed runs to do
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
        followed run after run. (Without it, on the load-test window workload, whose ~2 % of
        tuples with partners leave few timed runs, a fresh engine settled on WJ-JoinFirst or
        WJ-Hotspot at ~4× WJ-SelectFirst's cost in most bench runs.)"""
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
        refresh that falls due inside a stretch is made before the next one. (Ending a stretch
        also at every ``PLAN_REFRESH``-th tuple cost one more decision call and refresh per 64
        tuples, the refresh ~3 µs of it at Fig. 15's first point, a throwaway timing.)"""
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

    def _dispatch(self, choice: np.ndarray, run: Callable[[Any, np.ndarray | None], None]) -> int:
        """``run(member, indexes)`` once per member for the tuples ``choice`` gave it; indexes
        None when one member has every tuple (the common case: no subset is built). Returns
        the number of members that ran."""
        n = choice.shape[0]
        per = np.bincount(choice + 1, minlength=len(self.members) + 1)  # [0]: timed (−1)
        ran = 0
        for i, member in enumerate(self.members):
            k = int(per[i + 1])
            if k:
                self.counts[i] += k
                self.last = i
                ran += 1
                run(member, None if k == n else np.flatnonzero(choice == i))
        return ran

    def _dispatch_keyed(self, run: EventRun, ev: KeyedEvents, choice: np.ndarray
                        ) -> list[int]:
        """Each member's share of the keyed tuples ``ev`` of ``run`` (``choice``, −1 for the
        timed ones, already run) through its ``match_many``: the whole run when one member has
        every tuple, else ``run.restricted`` to its tuples. Returns the row where each member's
        rows begin: the rows are runs in event order (the timed tuples', then each member's),
        which the caller merges."""
        rows = run.rows
        starts: list[int] = []

        def member_run(m: Any, sel: np.ndarray | None) -> None:
            starts.append(rows.n)
            m.match_many(run if sel is None else run.restricted(ev.subset(sel)))

        self._dispatch(choice, member_run)
        return starts

    def match_many(self, run: EventRun) -> None:
        """The tuples of ``run`` with partners (``run.keyed()``), routed inside the batch by
        ``_route_keyed`` (SJ- and WJ-Dynamic); the runs of rows the timed tuples and the
        members wrote, each in event order, merged into event order."""
        ev = run.keyed()
        if ev is None:
            return
        rows = run.rows
        n0 = rows.n
        if self.forced is not None:
            self.last = self.forced
            self.members[self.forced].match_many(run)
        else:
            rows.merge_runs(n0, self._route_keyed(run, ev))

    def _route_keyed(self, run: EventRun, ev: KeyedEvents) -> list[int]:
        """Route and match the keyed tuples ``ev`` of ``run``; where each member's rows begin
        (:meth:`_dispatch_keyed`). SJ- and WJ-Dynamic write it; BJ-Dynamic overrides
        :meth:`match_many` instead."""
        raise NotImplementedError

    def force(self, name: str | None) -> None:
        """Run only member ``name`` from now on (None: route by cost again). Benchmarks."""
        self.forced = None if name is None else self.member_names.index(name)

    def check_invariants(self) -> None:
        """Every member's own invariants (the engine's tests call this after each operation)."""
        assert not self._no_suspects.any()
        for m in self.members:
            m.check_invariants()

    def memory_bytes(self) -> int:
        """The shared id list once plus each member's index."""
        return self.ids.memory_bytes() + sum(m.memory_bytes() - m.ids.memory_bytes()
                                             for m in self.members)

    def routing_stats(self) -> dict[str, Any]:
        """Decisions and routed tuples per member, the members, the learned corrections per
        side and member, and the explorations (``stats()``; docs/reference/metrics.md)."""
        return {"decisions": dict(zip(self.member_names, self.counts, strict=True)),
                "members": list(self.member_names),
                "corrections": {"R" if d > 0 else "S": dict(zip(self.member_names, c,
                                                                   strict=True))
                                for d, c in self.corr.items()},
                "explorations": self.explorations}

