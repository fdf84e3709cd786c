"""IJ-Dynamic: the cheaper interval-join strategy by its cost model (``router/cost_model.py``).

Interval joins' costs, as band joins' (Theorem 2), depend on |Q|, |S| and τ, not on the tuple,
so IJ-Dynamic re-evaluates its choice every ``INTERVAL_REFRESH`` tuples and after any
subscription change, and one decision serves a whole run of tuples on the batch path. The
members, the decisions and the online calibration are ``router/learning.py``'s, the decision
loop BJ-Dynamic's (``router/band.py``), written once there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.joins.interface import EventRun, OneEvent, Tables
from hotjoin.matcher.joins.interval import INTERVAL_CLASSES, IntervalStrategy
from hotjoin.matcher.router.band import BandDynamic
from hotjoin.matcher.router.cost_model import IntervalQuantities
from hotjoin.matcher.router.learning import Routing
from hotjoin.matcher.subscriptions import SubscriptionColumns


class IntervalDynamic(Routing, IntervalStrategy):
    """IJ-Dynamic: the member of the lowest modelled cost from |Q|, |S| and τ."""

    name = "IJ-Dynamic"
    kind = "interval"
    member_classes = INTERVAL_CLASSES
    default_members = ("IJ-NestedLoop", "IJ-SSI")
    """Every interval strategy (option ``router_members`` overrides)."""

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        IntervalStrategy.__init__(self, cols, options, tables)
        self._init_routing(options)
        self._choice = {1: -1, -1: -1}
        self._raw: dict[int, list[float]] = {1: [], -1: []}

    _add = BandDynamic._add
    _add_many = BandDynamic._add_many
    _remove = BandDynamic._remove
    _routed = BandDynamic._routed

    def _costs(self, x: Any) -> list[float]:
        # ``_routed`` (BJ-Dynamic's loop) builds Theorem 2's quantities; an interval join's
        # models read the same two sizes
        return Routing._costs(self, IntervalQuantities(float(x[0]), float(x[1])))

    def quantities(self, dirn: int, b: float, v: float, t: int,
                   table: BaseTable) -> IntervalQuantities | None:
        """|Q| and |S|, the same for every tuple (None: empty table)."""
        return IntervalQuantities(float(len(self.ids)), float(len(table))) if len(table) \
            else None

    def match(self, ev: OneEvent) -> None:
        """The tuple ``ev`` on the member of the current choice."""
        if len(ev.table):
            self._routed(ev.dirn, 1, ev.table, lambda m: m.match(ev))

    def match_many(self, run: EventRun) -> None:
        """One decision for the whole run."""
        if len(run) and len(run.table):
            self._routed(run.dirn, len(run), run.table, lambda m: m.match_many(run))

    def snapshot(self, ev: OneEvent, qids: np.ndarray) -> None:
        """The nested loop over ``qids`` (``Engine.result``)."""
        IntervalStrategy.snapshot(self, ev, qids)

    def stats(self) -> dict[str, Any]:
        """The routing stats and IJ-SSI's ``tau``."""
        st: dict[str, Any] = {**IntervalStrategy.stats(self), **self.routing_stats()}
        for m in self.members:
            if m.name == "IJ-SSI":
                st["tau"] = m.stats()["tau"]
        return st

    def check_invariants(self) -> None:
        """Every member's invariants."""
        Routing.check_invariants(self)

    def memory_bytes(self) -> int:
        """The members' indexes (one id list)."""
        return Routing.memory_bytes(self)
