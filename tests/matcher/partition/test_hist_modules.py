"""The histogram modules one by one (``hist_common``, ``hist_lookup``, ``hist_fit``,
``exact_counter``; the histograms themselves in ``test_histogram.py``): each piece against a
brute-force oracle, and ``histogram`` re-exporting the very same objects."""

from __future__ import annotations

import bisect
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.partition import (
    exact_counter,
    hist_chooser,
    hist_common,
    hist_eqw,
    hist_fit,
    hist_lookup,
    hist_ssi,
    histogram,
)

FLOATS = st.floats(-50, 50, allow_nan=False)


def test_histogram_re_exports_each_module_s_objects() -> None:
    for mod in (exact_counter, hist_chooser, hist_common, hist_eqw, hist_lookup, hist_ssi):
        for name in mod.__all__:
            if name in histogram.__all__:
                assert getattr(histogram, name) is getattr(mod, name), name
    assert histogram._merge_smallest is hist_fit.merge_smallest
    missing = {"EquiWidthHistogram", "SSIHistogram", "IntervalHistogramChooser",
               "ExactStabbingCounter", "relative_error", "estimate_at", "bucket_at",
               "bucket_function", "estimate_of_bucket", "lookup_array", "count_stabbed",
               "SSI_LOOKUP"} - set(histogram.__all__)
    assert not missing


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(FLOATS, FLOATS).map(sorted), max_size=30),
       st.lists(FLOATS, min_size=1, max_size=10))
def test_exact_counts_equal_brute_force(ivs: list[list[float]], xs: list[float]) -> None:
    lo = np.array([a for a, _ in ivs], dtype=np.float64)
    hi = np.array([b for _, b in ivs], dtype=np.float64)
    want = [sum(a <= x <= b for a, b in ivs) for x in xs]
    c = exact_counter.ExactStabbingCounter(lo, hi)
    assert [c.count(x) for x in xs] == want
    assert c.count_many(np.array(xs)).tolist() == want
    ids = np.arange(len(ivs), dtype=np.int64)
    assert [int(exact_counter.count_stabbed(lo, hi, ids, x)) for x in xs] == want
    odd = ids[1::2]  # a subset by id
    assert [int(exact_counter.count_stabbed(lo, hi, odd, x)) for x in xs] == [
        sum(ivs[i][0] <= x <= ivs[i][1] for i in odd.tolist()) for x in xs]


@settings(max_examples=200, deadline=None)
@given(st.lists(FLOATS, max_size=12).map(sorted), st.lists(FLOATS, min_size=1, max_size=8))
def test_ssi_lookup_bucket_is_bisect_right(breaks: list[float], xs: list[float]) -> None:
    """HIST-SSI's compiled bucket is ``bisect_right`` over the breakpoints, as the Python
    estimate reads it (duplicate breakpoints included)."""
    est = [float(i) for i in range(len(breaks) + 1)]
    h = hist_lookup.lookup_array(hist_lookup.SSI_LOOKUP, 0.0, 0.0, 0.0, 0,
                                 np.array(breaks, dtype=np.float64), est)
    f = hist_lookup.bucket_function(h)
    for x in xs:
        b = bisect.bisect_right(breaks, x)
        assert hist_lookup.bucket_at(h, x) == b == f(x)
        assert hist_lookup.estimate_at(h, x) == est[b]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-5, 5), min_size=1, max_size=25),
       st.lists(st.floats(0.1, 3), min_size=25, max_size=25))
def test_pava_is_the_best_increasing_fit(y: list[float], w: list[float]) -> None:
    """Blocks strictly increasing, weights conserved, and no increasing step function over
    the blocks' partition does better than their weighted means (they are the means)."""
    ya, wa = np.array(y), np.array(w[: len(y)])
    bv, bw, bs = hist_fit.pava(ya, wa)
    assert np.all(np.diff(bv) > 0)
    assert bs[0] == 0 and bs[-1] == len(y) and np.all(np.diff(bs) > 0)
    assert np.isclose(bw.sum(), wa.sum())
    for b in range(bv.shape[0]):
        seg = slice(bs[b], bs[b + 1])
        assert np.isclose(bv[b], np.average(ya[seg], weights=wa[seg]))
    if y == sorted(y) and len(set(y)) == len(y):  # already increasing: one block per piece
        assert bv.tolist() == pytest.approx(y)


def _cost(v: np.ndarray, w: np.ndarray, z: list[int]) -> float:
    total = 0.0
    for a, b in itertools.pairwise(z):
        m = np.average(v[a:b], weights=w[a:b])
        total += float(np.sum(w[a:b] * (v[a:b] - m) ** 2))
    return total


@settings(max_examples=150, deadline=None)
@given(st.lists(st.floats(0, 20), min_size=4, max_size=30, unique=True).map(sorted),
       st.integers(2, 4), st.data())
def test_lloyd_never_worsens_and_keeps_clusters_contiguous(v: list[float], k: int,
                                                           data: st.DataObject) -> None:
    va = np.array(v)
    w = np.ones(len(v))
    z0 = sorted(data.draw(st.sets(st.integers(1, len(v) - 1), min_size=k - 1,
                                  max_size=k - 1)))
    if len(z0) != k - 1:
        return
    z0 = [0, *z0, len(v)]
    pw, pwy, pwyy = (np.concatenate([[0.0], np.cumsum(a)]) for a in (w, w * va, w * va * va))
    z, cost = hist_fit.lloyd(va, pw, pwy, pwyy, np.array(z0, dtype=np.int64), 50)
    zl = z.tolist()
    assert zl[0] == 0 and zl[-1] == len(v) and all(a < b for a, b in itertools.pairwise(zl))
    assert cost <= _cost(va, w, z0) + 1e-6
    assert np.isclose(cost, _cost(va, w, zl), atol=1e-6)


@pytest.mark.parametrize("sizes, target", [([5, 1, 1, 7], 2), ([3], 1), ([1, 2, 3, 4], 4),
                                           ([4, 4, 4, 4], 1)])
def test_merge_smallest_merges_neighbours_into_target_groups(sizes: list[int],
                                                             target: int) -> None:
    label = hist_fit.merge_smallest(np.array(sizes), target)
    assert label.tolist() == sorted(label.tolist())          # neighbours only
    assert len(set(label.tolist())) == min(target, len(sizes))
    assert label[0] == 0 and np.all(np.diff(label) <= 1)


def test_coverage_one_at_a_time_equals_vectorised() -> None:
    rng = np.random.default_rng(5)
    edges = np.sort(rng.uniform(0, 10, 9))
    lo = rng.uniform(-2, 12, 40)
    hi = lo + rng.exponential(2, 40)
    vals, est = [0.0] * 8, [0.0] * 8
    for a, b in zip(lo.tolist(), hi.tolist(), strict=True):
        hist_common.cover_one(edges.tolist(), vals, est, a, b, 1.0)
    assert np.allclose(vals, hist_common.cover_many(edges, lo, hi))
    assert hist_common.open_end(2.0, 1.0) == 3.0 and hist_common.open_end(2.0, 0.0) > 2.0
    assert hist_common.open_ends(np.array([1e308]), 1.0)[0] > 1e308  # never below nextafter
