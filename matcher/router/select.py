"""SJ-Dynamic (paper 004 §4.1, §5.4): per incoming tuple, the cheapest select-join strategy.

SJ-Dynamic keeps every member's index up to date (the paper's "pre-compiled alternatives") and,
per incoming tuple, evaluates each member's cost model (``router/cost_model.py``) from exact
quantities (|S|, |Q|, τ, hotspot sizes, the key's partner count m′) and the estimate n′
(``router/estimators.py``), then runs only the cheapest member. Every member yields the same
deliveries, so routing never changes results — only speed. m′ comes from the key index lookup
every member does first anyway (§4.2: "we can perform this lookup first without any penalty"),
shared through the kind interface's bundles (``OneEvent.partner_run``, ``EventRun.keyed``);
n′ is one histogram lookup. Routing overhead (0.5–2.5 µs per tuple in CPython,
``docs/benchmarks/router.md``) is kept down by folding the slowly moving quantities into a plan
every ``PLAN_REFRESH`` tuples and by reusing settled choices (:class:`SelectDynamic`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.joins.interface import EventRun, OneEvent, Tables
from hotjoin.matcher.joins.protocol import KeyedEvents, each_event
from hotjoin.matcher.joins.select import SELECT_CLASSES, SelectStrategy, partner_group
from hotjoin.matcher.partition.histogram import bucket_function, estimate_of_bucket
from hotjoin.matcher.router import learning
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
)
from hotjoin.matcher.router.cost_model import SelectQuantities
from hotjoin.matcher.router.estimators import OwnRanges
from hotjoin.matcher.router.learning import Routing
from hotjoin.matcher.subscriptions import SubscriptionColumns


class SelectDynamic(Routing, SelectStrategy):
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
    member_classes = SELECT_CLASSES
    default_members = ("SJ-JoinFirst", "SJ-SelectFirst", "SJ-Vanilla", "SJ-Hotspot")
    """The paper's four (§5.4); SJ-SSI is left out as SJ-Hotspot contains it (option
    ``router_members`` overrides)."""

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        SelectStrategy.__init__(self, cols, options, tables)
        self._init_routing(options)
        self.own = OwnRanges(cols, self.ids)
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
        Routing.check_invariants(self)
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

    def _match(self, ev: OneEvent, pool: Any, base: int, size: int) -> None:
        """Route the tuple ``ev`` (its key has ``size`` partners) to one member's ``match``."""
        i = self.forced
        if i is not None:
            self.last = i
            self.members[i].match(ev)
            return
        dirn, v = ev.dirn, ev.value
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
                self.members[i].match(ev)
                return
        table = ev.table
        if cd < 0:
            refresh = learning.PLAN_REFRESH
            self._refresh(d, table, v, refresh - cd)
            cd = refresh
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
            self.members[i].match(ev)
            return
        # a timed run: learn the chosen member's correction (now and then another's)
        chosen = i
        i, best = self._timed_choice(d, i, float(self._plans[d][-1, COST]),
                                     lambda: self._costs(self._quantities(dirn, v, table,
                                                                          size)))
        t0 = self.clock()
        self.members[i].match(ev)
        self._learn(d, i, best, self.clock() - t0, i != chosen)

    def _route_keyed(self, run: EventRun, ev: KeyedEvents) -> list[int]:
        """The decision inside the batch: one ``select_run`` call decides a stretch of tuples
        up to the next one to time, which runs alone as in :meth:`_match` and learns; the plan
        is refreshed on the one-at-a-time countdown. Then each member matches all the tuples
        it was given in one ``match_many`` call."""
        n = ev.pos.shape[0]
        dirn, table = run.dirn, run.table
        d = 1 if dirn > 0 else -1

        def decide(k: int, stop: int, due: int, out: np.ndarray) -> int:
            return select_run(self._plans[d], ev.size[k:stop], ev.values[k:stop],
                              self._lookup[d], due, self._suspects(d), out)

        choice = self._route_run(
            d, n, lambda k, tuples: self._refresh(d, table, float(ev.values[k]), tuples), decide,
            lambda k, i: self._timed_event(run, d, ev, k, i))
        return self._dispatch_keyed(run, ev, choice)

    def _timed_event(self, run: EventRun, d: int, ev: KeyedEvents, k: int, chosen: int) -> None:
        """Event ``k`` of ``ev`` as a timed tuple of :meth:`_match` (member ``chosen``): a
        one-tuple bundle whose key group is known, run through the member's ``match``."""
        v, size = float(ev.values[k]), int(ev.size[k])
        dirn, table = run.dirn, run.table
        one = OneEvent(run.buf).set(dirn, float(ev.keys[k]), v, int(ev.times[k]),
                                    int(ev.seqs[k]), int(ev.nows[k]), table, run.mode,
                                    int(ev.g[k]))
        i, best = self._timed_choice(d, chosen, float(self._plans[d][-1, COST]),
                                     lambda: self._costs(self._quantities(dirn, v, table, size)))

        def timed(_: int) -> None:
            t0 = self.clock()
            self.members[i].match(one)
            self._learn(d, i, best, self.clock() - t0, i != chosen)

        each_event(timed, 1, run.buf, run.rows, run.mode, self.cols.acc, ev.pos[k: k + 1])

    def stats(self) -> dict[str, Any]:
        """The routing stats, the histograms', and τ and the hotspots of the members that have
        them (``tau``: SJ-SSI's; ``hotspots``, ``scattered``: SJ-Hotspot's)."""
        st: dict[str, Any] = {**SelectStrategy.stats(self), **self.routing_stats(),
                              "histograms": self.own.stats()}
        if self.hot is not None:
            hs = self.hot.stats()
            st.update(hotspots=hs["hotspots"], scattered=hs["scattered"])
        for m in self.members:
            if m.name == "SJ-SSI":
                st["tau"] = m.stats()["tau"]
        return st

