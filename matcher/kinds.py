"""The subscription kinds the engine knows (paper 004 §3): one registration line each.

A kind is its subscription type (``model.py``), its strategies by the paper's names and its
router (§4), all implementing the kind interface (``joins/interface.py``), and what it needs of
the two base tables: the key order (band joins walk keys in order), the key index (the
equi-joins reach the partners of one key) and its by-time order (window joins). The engine
(``matcher/engine.py``) builds a kind's index on its first subscription, from this table, and
drives every kind through the interface only; a new kind is a module with its strategies (and
their kernels), a cost model per strategy (``router/cost_model.py``), a router, and one line
here. Entries are in the order the kinds match an incoming tuple, which is the order of their
output within an event (band, select, window, interval).

>>> KINDS["select"].strategy_names()
('SJ-JoinFirst', 'SJ-SelectFirst', 'SJ-Vanilla', 'SJ-SSI', 'SJ-Hotspot', 'SJ-Dynamic')
>>> kind_of(BandJoin()).name, KINDS["window"].time_order
('band', True)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hotjoin.matcher.joins.band import BAND_CLASSES
from hotjoin.matcher.joins.interface import KindIndex, Tables
from hotjoin.matcher.joins.interval import INTERVAL_CLASSES
from hotjoin.matcher.joins.select import SELECT_CLASSES
from hotjoin.matcher.joins.window import WINDOW_CLASSES
from hotjoin.matcher.model import BandJoin, IntervalJoin, SelectJoin, WindowJoin
from hotjoin.matcher.router.band import BandDynamic
from hotjoin.matcher.router.interval import IntervalDynamic
from hotjoin.matcher.router.select import SelectDynamic
from hotjoin.matcher.router.window import WindowDynamic
from hotjoin.matcher.subscriptions import KIND_CODE, SubscriptionColumns


@dataclass(frozen=True)
class KindSpec:
    """One kind's registration: subscription type, strategies, router, table needs."""

    subscription: type
    """The ``model`` class of the kind's subscriptions (its fields are the state's columns:
    a ``Range`` field ``x`` is ``x_lo``/``x_hi``, an int field its own column)."""
    strategies: Mapping[str, type[KindIndex]]
    """The static strategies by paper name."""
    router: type[KindIndex]
    """The router over them (``strategy="auto"``)."""
    key_order: bool = False
    """Whether both tables keep their tuples in key order (``BaseTable.enable_key_order``)."""
    key_index: bool = False
    """Whether both tables keep the per-key index (``BaseTable.enable_key_index``): an
    equi-join on the key, whose tuples without a stored partner of their key match nothing."""
    time_order: bool = False
    """Whether the key index also orders each key's tuples by time."""

    @property
    def name(self) -> str:
        """The kind's name (``"band"``), as ``Subscription.kind`` spells it."""
        return str(self.router.kind)

    @property
    def code(self) -> int:
        """The kind's code in the subscription columns (``subscriptions.KIND_CODE``; part of
        the state format, docs/reference/persistence.md)."""
        return KIND_CODE[self.name]

    def strategy_names(self) -> tuple[str, ...]:
        """Every strategy a topic may choose for the kind: the static ones, then the router."""
        return (*self.strategies, str(self.router.name))

    def strategy(self, name: str) -> type[KindIndex]:
        """The class of strategy ``name`` (a static one or the router)."""
        return self.router if name == self.router.name else self.strategies[name]

    def make(self, name: str, cols: SubscriptionColumns, options: dict[str, Any],
             tables: Tables) -> KindIndex:
        """A new, empty index of strategy ``name`` (a static one or the router)."""
        return self.strategy(name)(cols, options, tables)


KINDS: dict[str, KindSpec] = {
    "band": KindSpec(BandJoin, BAND_CLASSES, BandDynamic, key_order=True),
    "select": KindSpec(SelectJoin, SELECT_CLASSES, SelectDynamic, key_index=True),
    "window": KindSpec(WindowJoin, WINDOW_CLASSES, WindowDynamic, key_index=True,
                       time_order=True),
    "interval": KindSpec(IntervalJoin, INTERVAL_CLASSES, IntervalDynamic, key_order=True),
}
"""The registry: kind name → :class:`KindSpec`, in matching order."""

_BY_TYPE = {spec.subscription: spec for spec in KINDS.values()}
_BY_CODE = {spec.code: spec for spec in KINDS.values()}


def kind_of(sub: object) -> KindSpec:
    """The registration of ``sub``'s kind; ValueError (one line) for anything else."""
    spec = _BY_TYPE.get(type(sub))
    if spec is None:
        raise ValueError(f"not a subscription: {type(sub).__name__}")
    return spec


def kind_of_code(code: int) -> KindSpec:
    """The registration of kind code ``code``; ValueError (one line) for an unknown code."""
    spec = _BY_CODE.get(int(code))
    if spec is None:
        raise ValueError(f"unknown subscription kind code {code!r}")
    return spec


__all__ = ["KINDS", "KindSpec", "kind_of", "kind_of_code"]
