"""The kind registry (``matcher/kinds.py``): each kind's subscription type, strategies, router and
table needs in matching order; lookups by subscription and by code; a kind's index is built on its
first subscription only, with the table orders it needs."""

from __future__ import annotations

import pytest

from hotjoin.matcher.engine import STRATEGIES, Engine
from hotjoin.matcher.joins.interface import KindIndex
from hotjoin.matcher.kinds import KINDS, kind_of, kind_of_code
from hotjoin.matcher.model import BandJoin, Event, Range, WindowJoin
from hotjoin.matcher.router.learning import Routing


def test_registry_lists_each_kind_with_its_strategies_router_and_table_needs() -> None:
    assert list(KINDS) == ["band", "select", "window", "interval"]  # the order kinds match
    for name, spec in KINDS.items():
        sample = spec.subscription(Range()) if name == "interval" else spec.subscription()
        assert spec.name == name and sample.kind == name  # an interval join needs its B
        assert kind_of(sample) is spec and kind_of_code(spec.code) is spec
        assert spec.strategy_names() == STRATEGIES[name]
        assert spec.strategy_names()[-1] == spec.router.name
        assert issubclass(spec.router, Routing) and issubclass(spec.router, KindIndex)
        assert dict(spec.router.member_classes) == dict(spec.strategies)
        for cls in (*spec.strategies.values(), spec.router):
            assert issubclass(cls, KindIndex) and cls.kind == name
    assert KINDS["band"].key_order and not KINDS["band"].key_index
    assert KINDS["select"].key_index and not KINDS["select"].time_order
    assert KINDS["window"].key_index and KINDS["window"].time_order
    with pytest.raises(ValueError, match="not a subscription: int"):
        kind_of(3)
    with pytest.raises(ValueError, match="unknown subscription kind code 7"):
        kind_of_code(7)


def test_a_kind_is_built_on_its_first_subscription_only() -> None:
    e = Engine()
    assert dict(e.kinds) == {} and e.band is None and e.kind_index("window") is None
    e.publish(Event("S", "s", 1.0, 1.0, 0))
    assert e.tables["S"].key_index is None and not e.tables["S"].key_ordered
    e.subscribe(WindowJoin(w=2))
    assert list(e.kinds) == ["window"] and e.kind_index("window") is e.window
    assert e.tables["S"].key_index is not None and e.tables["S"].key_index.by_time is not None
    assert not e.tables["S"].key_ordered  # no band join: no key order
    e.subscribe(BandJoin(b=Range(0, 1)))
    assert list(e.kinds) == ["band", "window"] and e.tables["R"].key_ordered
    st_ = e.stats()
    assert st_["select"] == {} and st_["band"]["subscriptions"] == 1
    with pytest.raises(ValueError, match="unknown subscription kind 'spatial'"):
        e.kind_index("spatial")
    with pytest.raises(AttributeError):
        _ = e.spatial
