"""The engine state's columns (``matcher/state.py``): subscriptions rebuilt from the subscription
columns equal the validated ones, and an engine's state round-trips."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from engine_harness import harness_settings, subscriptions
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.matcher.contract import subscription_columns
from hotjoin.matcher.contract import subscriptions_from_columns as validated_from_columns
from hotjoin.matcher.engine import Engine
from hotjoin.matcher.errors import LateEventError
from hotjoin.matcher.model import Event
from hotjoin.matcher.state import subscriptions_from_columns


@harness_settings(60)
@given(subs=st.lists(st.one_of(subscriptions("band"), subscriptions("select"),
                               subscriptions("window", window_w=st.integers(0, 2**40))),
                     max_size=20))
def test_subscriptions_from_columns_are_the_validated_ones(subs: list[Any]) -> None:
    """The registry-driven builder (no validation, ``object.__new__``) gives exactly what the
    contract's validating builder gives, for every kind, in row order; an engine's
    ``subscription_columns`` round-trip through it."""
    cols = subscription_columns(list(range(len(subs))), subs, list(range(1, len(subs) + 1)),
                                [False] * len(subs))
    built = subscriptions_from_columns(cols)
    assert built == validated_from_columns(cols) == subs
    assert [type(s) for s in built] == [type(s) for s in subs]
    e = Engine()
    e.subscribe_many(subs)
    assert subscriptions_from_columns(e.subscription_columns()) == subs


@harness_settings(40)
@given(subs=st.lists(st.one_of(subscriptions("band"), subscriptions("select"),
                               subscriptions("window")), max_size=8),
       events=st.lists(st.tuples(st.sampled_from("RS"), st.integers(0, 3), st.integers(0, 3),
                                 st.integers(0, 20)), max_size=20),
       gone=st.sets(st.integers(0, 7)))
def test_a_loaded_state_gives_what_the_exporter_gives(
        subs: list[Any], events: list[tuple[str, int, int, int]], gone: set[int]) -> None:
    """An engine loaded from ``export_state`` holds the same subscriptions, tuples and clock,
    and matches the next tuple exactly as the exporter does."""
    e = Engine(lateness=5)
    sids = e.subscribe_many(subs)
    for sid in sorted(gone & set(sids)):
        e.unsubscribe(sid)
    for i, (side, key, value, time) in enumerate(events):
        with contextlib.suppress(LateEventError):
            e.publish(Event(side, f"e{i}", float(key), float(value), time))
    f = Engine(lateness=5)
    f.load_state(e.export_state())
    assert f.seq == e.seq and f.watermark == e.watermark
    assert subscriptions_from_columns(f.subscription_columns()) == subscriptions_from_columns(
        e.subscription_columns())
    for side in ("R", "S"):
        assert sorted(f.tables[side].live_columns()[0]) == sorted(e.tables[side].live_columns()[0])
    nxt = Event("R", "next", 1.0, 1.0, e.seq + 30)
    assert sorted(map(repr, f.publish(nxt))) == sorted(map(repr, e.publish(nxt)))
    with pytest.raises(ValueError, match="empty engine"):
        f.load_state(e.export_state())
