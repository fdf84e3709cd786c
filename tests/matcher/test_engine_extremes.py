"""Valid subscriptions and events at the edges of the double range (±1.8e308, ±2^61 times).

Regression tests: a band of width inf sent the interval tree's insert into an endless loop
(its centre overflowed to inf), and select / window ranges beyond every stored value failed the
router's histogram build ("need a finite domain", "zero-size array"), so valid subscriptions were
refused. Every strategy must accept them and deliver what the brute-force oracle delivers.
"""

from __future__ import annotations

import warnings
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin import BandJoin, Engine, Event, LateEventError, Range, SelectJoin, WindowJoin
from hotjoin.matcher.oracle import OracleEngine
from hotjoin.matcher.structures.interval_tree import _mid

EDGES = [-1.7976931348623157e308, -1.7e308, -1e308, -1.0, 0.0, 0.5, 1.0, 1e308, 1.7e308,
         1.7976931348623157e308]
TIMES = [-(2**61), 0, 3, 2**61]


def test_interval_tree_centre_stays_inside_huge_ranges() -> None:
    assert _mid(-1e308, 1e308) == 0.0
    assert -1.7e308 <= _mid(-1.7e308, 1.79e308) <= 1.79e308


@pytest.mark.parametrize("band", ["BJ-QOuter", "BJ-DOuter", "BJ-MJ", "BJ-SSI", "BJ-Hotspot", "auto"])
def test_band_of_infinite_width_is_accepted(band: str) -> None:
    e = Engine(strategy={"band": band})
    e.subscribe(BandJoin(b=Range(-1e308, 1e308)))
    e.subscribe(BandJoin(b=Range(-1.7e308, 1.7e308), a=Range(-1e308, 1e308)))
    e.publish(Event("S", "s1", 1e308, 0.0, 1))
    e.publish(Event("S", "s2", -1e308, 0.0, 2))
    # s1.key - r1.key overflows to inf: in neither band; s2 pairs with both
    assert sorted((d.subscription_id, d.s_id) for d in e.publish(Event("R", "r1", -1e308, 0.0, 3))) \
        == [(0, "s2"), (1, "s2")]


values = st.sampled_from(EDGES)
bounds = st.one_of(st.none(), values)


@st.composite
def ranges(draw: st.DrawFn) -> Range:
    lo, hi = draw(bounds), draw(bounds)
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    return Range(lo, hi)


subs = st.one_of(
    st.builds(SelectJoin, a=ranges(), c=ranges()),
    st.builds(BandJoin, b=ranges(), a=ranges(), c=ranges()),
    st.builds(WindowJoin, a=ranges(), c=ranges(), w=st.sampled_from([0, 5, 2**61])),
)
events = st.tuples(st.sampled_from("RS"), values, values, st.sampled_from(TIMES))


@settings(max_examples=60, deadline=None)
@given(st.lists(subs, min_size=1, max_size=5), st.lists(events, max_size=10),
       st.sampled_from([None, 10]))
def test_extreme_values_equal_the_oracle(subscriptions: list, evs: list, retention: int | None) -> None:
    engine, oracle = Engine(retention=retention), OracleEngine(retention=retention)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no overflow on the way either
        for sub in subscriptions:
            assert engine.subscribe(sub) == oracle.subscribe(sub)
        for i, (side, key, value, t) in enumerate(evs):
            ev = Event(side, f"e{i}", key, value, t)
            try:
                want = oracle.publish(ev)
            except LateEventError:
                with pytest.raises(LateEventError):
                    engine.publish(ev)
                continue
            assert Counter(engine.publish(ev)) == Counter(want)
