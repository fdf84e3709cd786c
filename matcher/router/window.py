"""WJ-Dynamic (paper 004 §4.2): per incoming tuple, the cheapest window-join strategy.

Theorem 4's costs from the key's partner count m′, its partners within w_max of the tuple's time
m_b (a search of the key's by-time run), the skyline sizes m̄_b of the WJ-SSI-like members and
the estimate n′ (``router/estimators.py``); the slowly moving quantities are folded into a plan
every ``PLAN_REFRESH`` tuples, members are tried in the order of a lower bound of their cost and
the loop stops at the first bound that reaches the best cost so far (often before any n′
estimate). The members, the decisions and the online calibration are ``router/learning.py``'s.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.joins.interface import EventRun, OneEvent, Tables
from hotjoin.matcher.joins.protocol import KeyedEvents, each_event
from hotjoin.matcher.joins.window import WINDOW_CLASSES, Partners, WindowStrategy, partners_of
from hotjoin.matcher.joins.window_kernels import count_within
from hotjoin.matcher.router import learning
from hotjoin.matcher.router.choice_kernels import window_run
from hotjoin.matcher.router.cost_model import WindowQuantities, fresh_skyline, skyline_sizes
from hotjoin.matcher.router.estimators import OwnRanges
from hotjoin.matcher.router.learning import Routing
from hotjoin.matcher.subscriptions import SubscriptionColumns

RUN_MARGIN = 2.0
RUN_LENGTH = 8
"""WJ-Dynamic decides once per run of alike tuples when the choice is clear:
a member that the models put at least ``RUN_MARGIN`` times below every other for one tuple
serves the next ``RUN_LENGTH`` tuples whose partner count m′ is in the same octave, with no
per-tuple decision. The decision needs m_b (a search of the key's by-time run), n′ and two
skyline states, ~2 µs of Python against a ~25 µs WJ-SelectFirst probe (measured: 0.93 of the
best static strategy at both window points of ``bench router``, where the runner-up is
modelled 4.7–20× dearer for every tuple). Timed tuples always decide in full, and the runs are
dropped whenever the plan is refolded (every ``PLAN_REFRESH`` tuples)."""


class WindowDynamic(Routing, WindowStrategy):
    """WJ-Dynamic (§4.2): Theorem 4's costs from m′, m_b, m̄_b and n′ of the tuple's key."""

    name = "WJ-Dynamic"
    kind = "window"
    member_classes = WINDOW_CLASSES
    default_members = ("WJ-JoinFirst", "WJ-SelectFirst", "WJ-SSI", "WJ-Hotspot")
    """Every window strategy of §3.3 (option ``router_members`` overrides)."""

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        WindowStrategy.__init__(self, cols, options, tables)
        self._init_routing(options)
        self.own = OwnRanges(cols, self.ids)
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

    def _match(self, ev: OneEvent, p: Partners) -> None:
        """Route the tuple ``ev`` (its key has the partners ``p``) to one member's ``match``."""
        i = self.forced
        if i is not None:
            self.last = i
            self.members[i].match(ev)
            return
        dirn, b, v, t, table = ev.dirn, ev.key, ev.value, ev.time, ev.table
        d = 1 if dirn > 0 else -1
        cd = self._countdown[d] - 1
        if cd < 0:
            refresh = learning.PLAN_REFRESH
            self._refold(d, table, v, refresh - cd)
            cd = refresh
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
            self.members[i].match(ev)
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
                fresh = fresh_skyline(self.members[j].skies[d], b)
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
            self.members[i].match(ev)
            return
        chosen = i
        i, best = self._timed_choice(d, i, best * self.corr[d][i] / self._folded[d][i],
                                     lambda: self._costs(self._quantities(dirn, b, v, t, table,
                                                                          p)))
        t0 = self.clock()
        self.members[i].match(ev)
        self._learn(d, i, best, self.clock() - t0, i != chosen)

    def _refold(self, d: int, table: BaseTable, v: float, tuples: int) -> None:
        """A new plan (:meth:`_plan`), as the list the one-at-a-time loop reads and the array
        ``choice_kernels.window_run`` reads, with the n′ estimator's lookup array; the runs of
        clear choices are dropped."""
        plan = self._plans[d] = self._plan(d, table, v, tuples)
        self._plan_arrays[d] = np.array(plan, dtype=np.float64).reshape(len(plan), 7)
        self._lookup[d] = self.own.lookup(d)
        self._runs[d] = {}

    def _route_keyed(self, run: EventRun, ev: KeyedEvents) -> list[int]:
        """The decision inside the batch, as ``SelectDynamic._route_keyed``: one
        ``window_run`` call decides a stretch of tuples up to the next one to time; the
        skyline states the WJ-SSI-like members' costs read are looked up once per distinct
        key of the stretch. Each member then matches its tuples in one ``match_many``."""
        n = ev.pos.shape[0]
        dirn, table = run.dirn, run.table
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
            lambda k, i: self._timed_event(run, d, ev, k, i, float(cost[0])))
        return self._dispatch_keyed(run, ev, choice)

    def _skyline_sizes(self, d: int, gs: np.ndarray, keys: np.ndarray, plan: np.ndarray,
                       fresh: np.ndarray) -> None:
        """``fresh[k, j]``: the size of key ``keys[k]``'s stored skyline in member j if it is
        current, else −1 (``fresh_skyline``), for the WJ-SSI-like members of ``plan``: one
        compiled pass per member over its skyline store by key group (``gs``). (One dict
        lookup per distinct key took ~130 µs per 300-tuple call of ``bench router``'s window
        workload after its cache eviction, ``np.unique`` half of it.)"""
        for j in plan[plan[:, 0] >= 2.0, 6].astype(np.int64).tolist():
            self.members[j].skies[d].current_sizes(gs, keys, fresh, j)

    def _timed_event(self, run: EventRun, d: int, ev: KeyedEvents, k: int, chosen: int,
                     best: float) -> None:
        """Event ``k`` of ``ev`` as a timed tuple of :meth:`_match` (member ``chosen`` at
        modelled cost ``best``, with the correction the plan folded in): a one-tuple bundle
        whose key group is known, run through the member's ``match``."""
        b, v, t = float(ev.keys[k]), float(ev.values[k]), int(ev.times[k])
        dirn, table = run.dirn, run.table
        one = OneEvent(run.buf).set(dirn, b, v, t, int(ev.seqs[k]), int(ev.nows[k]), table,
                                    run.mode, int(ev.g[k]))
        p = one.partners()
        assert p is not None  # a keyed tuple has partners
        i, predicted = self._timed_choice(
            d, chosen, best * self.corr[d][chosen] / self._folded[d][chosen],
            lambda: self._costs(self._quantities(dirn, b, v, t, table, p)))

        def timed(_: int) -> None:
            t0 = self.clock()
            self.members[i].match(one)
            self._learn(d, i, predicted, self.clock() - t0, i != chosen)

        each_event(timed, 1, run.buf, run.rows, run.mode, self.cols.acc, ev.pos[k: k + 1])

    def _m_b(self, p: Any, t: int) -> float:
        """m_b: the key's partners within w_max of t (two searches of the by-time run)."""
        return float(count_within(p.tv, p.tbase, p.tsize, t - self.wmax, t + self.wmax))

    def stats(self) -> dict[str, Any]:
        """The routing stats, the histograms', and τ and the hotspots of the members that have
        them (``tau``: WJ-SSI's; ``hotspots``, ``scattered``: WJ-Hotspot's)."""
        st: dict[str, Any] = {**WindowStrategy.stats(self), **self.routing_stats(),
                              "histograms": self.own.stats()}
        for m in self.members:
            ms = m.stats()
            if m.name == "WJ-SSI":
                st["tau"] = ms["tau"]
            if m.name == "WJ-Hotspot":
                st.update(hotspots=ms["hotspots"], scattered=ms["scattered"])
        return st

