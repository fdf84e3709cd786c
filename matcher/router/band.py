"""BJ-Dynamic (paper 004 §4.2): the cheapest band-join strategy by Theorem 2's costs.

Band joins' costs (Theorem 2) depend only on |Q|, |S|, τ and the hotspot sizes, not on the
tuple, so BJ-Dynamic re-evaluates its choice every ``BAND_REFRESH`` tuples and after any
subscription change, and one decision serves a whole run of tuples on the batch path. The
members, the decisions and the online calibration are ``router/learning.py``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.joins.band import BAND_CLASSES, BandStrategy
from hotjoin.matcher.joins.interface import EventRun, OneEvent, Tables
from hotjoin.matcher.router import learning
from hotjoin.matcher.router.cost_model import BandQuantities
from hotjoin.matcher.router.learning import Routing
from hotjoin.matcher.subscriptions import SubscriptionColumns

BAND_REFRESH = 64
"""Band joins re-evaluate Theorem 2's costs every this many tuples (|S| moves by at most that)."""
BAND_SWITCH = 1.05
"""BJ-Dynamic leaves its current member only for one modelled at least this much cheaper.
Members whose costs tie (BJ-SSI and BJ-Hotspot on the load test's clustered bands, within a
few % of each other) would otherwise swap at the noise of the learned corrections, and each
swap runs on an index the caches have not seen: on ``bench router --batch``'s band point at
100,000 subscriptions, 600 of 1,500 tuples went to the other member and BJ-Dynamic ran at
0.886 of BJ-SSI."""


class BandDynamic(Routing, BandStrategy):
    """BJ-Dynamic (§4.2): Theorem 2's costs from |Q|, |S|, τ and the hotspot sizes."""

    name = "BJ-Dynamic"
    kind = "band"
    member_classes = BAND_CLASSES
    default_members = ("BJ-QOuter", "BJ-DOuter", "BJ-MJ", "BJ-SSI", "BJ-Hotspot")
    """Every band strategy of §3.1 (option ``router_members`` overrides)."""

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        BandStrategy.__init__(self, cols, options, tables)
        self._init_routing(options)
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

    def match(self, ev: OneEvent) -> None:
        """The tuple ``ev`` on the member of the current choice (:meth:`_routed`)."""
        self._routed(ev.dirn, 1, ev.table, lambda m: m.match(ev))

    def match_many(self, run: EventRun) -> None:
        """The router inside the batch: band costs do not depend on the tuple, so one
        decision serves a whole run of tuples."""
        self._routed(run.dirn, len(run), run.table, lambda m: m.match_many(run))

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
        # FEEDBACK_EVERY · EXPLORE_EVERY explored, as SJ-/WJ-Dynamic), not ``_quiet[d]``
        # (1 to FEEDBACK_QUIET), which a band run does not follow
        stood = max(n, BAND_REFRESH) / (learning.FEEDBACK_EVERY * n)
        i, predicted = self._timed_choice(d, i, raw[i] * self.corr[d][i], lambda: raw, stood)
        self.counts[i] += n - 1
        t0 = self.clock()
        run(self.members[i])
        self._learn(d, i, predicted, (self.clock() - t0) / n, i != chosen)

    def stats(self) -> dict[str, Any]:
        """The routing stats, and τ and the hotspots of the members that have them (``tau``:
        BJ-SSI's; ``hotspots``, ``scattered``: BJ-Hotspot's)."""
        st: dict[str, Any] = {**BandStrategy.stats(self), **self.routing_stats()}
        for m in self.members:
            ms = m.stats()
            if m.name == "BJ-SSI":
                st["tau"] = ms["tau"]
            if m.name == "BJ-Hotspot":
                st.update(hotspots=ms["hotspots"], scattered=ms["scattered"])
        return st

