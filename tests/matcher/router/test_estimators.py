"""``OwnRanges`` (``router/estimators.py``): n′(v) per direction from interval histograms of
the subscriptions' own ranges (A for an incoming R tuple, C for an S tuple). Checked against a
brute-force count: the exact n′ it samples to score the histograms, its bounds, rebuilds from
the live ids only, one-by-one equal to bulk, and the sampling period."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.joins.protocol import DenseIds
from hotjoin.matcher.partition.hist_lookup import estimate_at
from hotjoin.matcher.router.estimators import SAMPLE_EVERY, OwnRanges

INF = float("inf")
END = st.sampled_from([-INF, -3.0, 0.0, 1.0, 2.5, 4.0, 10.0, INF])
RANGE = st.tuples(END, END).map(sorted).filter(lambda r: r[0] < r[1] or abs(r[0]) < INF)


def _columns(ranges: list[tuple[list[float], list[float]]]) -> Any:
    """The four range columns ``OwnRanges`` reads (``SubscriptionColumns``' a_lo … c_hi)."""
    a = np.array([r[0] for r in ranges], dtype=np.float64).reshape(-1, 2)
    c = np.array([r[1] for r in ranges], dtype=np.float64).reshape(-1, 2)
    return SimpleNamespace(a_lo=a[:, 0].copy(), a_hi=a[:, 1].copy(), c_lo=c[:, 0].copy(),
                           c_hi=c[:, 1].copy())


def _brute(cols: Any, live: set[int], d: int, v: float) -> int:
    lo, hi = (cols.a_lo, cols.a_hi) if d > 0 else (cols.c_lo, cols.c_hi)
    return sum(1 for q in live if lo[q] <= v <= hi[q])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(RANGE, RANGE), min_size=1, max_size=40), st.data())
def test_sampled_counts_are_exact_and_estimates_stay_within_bounds(
        ranges: list[tuple[list[float], list[float]]], data: st.DataObject) -> None:
    cols = _columns(ranges)
    ids = DenseIds()
    own = OwnRanges(cols, ids)  # type: ignore[arg-type]
    seen: list[tuple[int, float, float]] = []
    for d, h in own.hist.items():
        observe = h.observe

        def spy(x: float, true: float, d: int = d, observe: Any = observe) -> None:
            seen.append((d, x, true))
            observe(x, true)

        h.observe = spy  # type: ignore[method-assign]
    live: set[int] = set()
    bulk = data.draw(st.integers(0, len(ranges)))
    ids.add_many(np.arange(bulk, dtype=np.int64))
    own.add_many(np.arange(bulk, dtype=np.int64))
    live |= set(range(bulk))
    for q in range(bulk, len(ranges)):
        ids.add(q)
        own.add(q)
        live.add(q)
    for q in data.draw(st.lists(st.sampled_from(sorted(live)), unique=True)):
        ids.remove(q)  # the id list first: a rebuild reads the live ids
        own.remove(q)
        live.discard(q)
    for v in (-5.0, 0.0, 1.0, 2.5, 3.0, 12.0):
        for d in (1, -1):
            own.count = SAMPLE_EVERY  # the next estimate samples the exact count
            est = own.estimate(d, v)
            assert seen[-1] == (d, v, _brute(cols, live, d, v))
            assert 0.0 <= own.minimum(d) <= est + 1e-9
            assert est <= own.maximum(d) + 1e-9
            assert own.estimator(d)(v) == est
            assert estimate_at(own.lookup(d), v) == est


def test_a_rebuild_counts_only_the_live_ranges() -> None:
    n = 400
    cols = _columns([([float(i), float(i) + 5], [0.0, 1.0]) for i in range(n)])
    ids = DenseIds()
    own = OwnRanges(cols, ids)  # type: ignore[arg-type]
    for q in range(n):
        ids.add(q)
        own.add(q)
    for q in range(0, n, 2):
        ids.remove(q)
        own.remove(q)
    for d in (1, -1):
        h = own.hist[d]
        assert h.ssi.size == n // 2  # rebuilt on the way from the live ids: 200 remain
        assert not h.needs_rebuild()
    assert own.estimate(-1, 0.5) == pytest.approx(n // 2, rel=0.05)  # C ranges all hold 0.5


def test_one_by_one_equals_bulk() -> None:
    rng = np.random.default_rng(2)
    lo = rng.integers(0, 50, 120).astype(np.float64)
    cols = _columns([([a, a + 7], [a / 2, a / 2 + 3]) for a in lo.tolist()])
    one, bulk = DenseIds(), DenseIds()
    by_one, by_bulk = OwnRanges(cols, one), OwnRanges(cols, bulk)  # type: ignore[arg-type]
    all_ids = np.arange(120, dtype=np.int64)
    bulk.add_many(all_ids)
    by_bulk.add_many(all_ids)
    one.add_many(all_ids[:1])
    by_one.add_many(all_ids[:1])  # built on one, then churned past the threshold: rebuilt
    for q in range(1, 120):
        one.add(q)
        by_one.add(q)
    for d in (1, -1):
        by_one.hist[d].rebuild(*(np.asarray(x)[all_ids] for x in (
            (cols.a_lo, cols.a_hi) if d > 0 else (cols.c_lo, cols.c_hi))))
        for v in np.linspace(-5, 60, 27):
            assert by_one.estimate(d, float(v)) == by_bulk.estimate(d, float(v))


@pytest.mark.parametrize(("n", "period"), [(0, SAMPLE_EVERY), (16 * SAMPLE_EVERY,
                                                                SAMPLE_EVERY),
                                           (16 * SAMPLE_EVERY + 16 * 7, SAMPLE_EVERY + 7)])
def test_the_exact_count_is_sampled_every_max_of_sample_every_and_n_over_16(
        n: int, period: int) -> None:
    cols = _columns([([0.0, 1.0], [0.0, 1.0])] * max(n, 1))
    ids = DenseIds()
    ids.add_many(np.arange(n, dtype=np.int64))
    own = OwnRanges(cols, ids)  # type: ignore[arg-type]
    calls = []
    own.hist[1].observe = lambda x, t: calls.append(t)  # type: ignore[method-assign]
    own.tick(1, 0.5, period - 1)
    assert calls == [] and own.count == period - 1
    own.tick(1, 0.5, 1)
    assert calls == [n] and own.count == 0  # every range holds 0.5
    own.tick(1, 0.5, 3 * period)  # one call per tick at most: the counter restarts
    assert len(calls) == 2


def test_stats_name_both_directions() -> None:
    own = OwnRanges(_columns([([0.0, 1.0], [2.0, 3.0])]), DenseIds())  # type: ignore[arg-type]
    stats = own.stats()
    assert set(stats) == {"R", "S"} and all("choice" in s for s in stats.values())
    assert own.estimate(1, 0.5) == 0.0  # nothing added yet
