"""What the interval histograms share (``hist_common``): fractional coverage one interval at a
time equals the vectorised form and a brute-force overlap sum, closed ends become half-open
ones, the relative error, the data domain and the rebuild rule (:class:`Churn`)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.partition import hist_common
from hotjoin.matcher.partition.hist_common import (
    DOMAIN_MAX,
    MIN_CHURN,
    Churn,
    cover_many,
    cover_one,
    data_domain,
    open_end,
    open_ends,
    relative_error,
)


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


def _overlap_fractions(edges: list[float], lo: list[float], hi: list[float]) -> list[float]:
    """Brute force: per bucket ``[edges[j], edges[j+1])``, the summed fraction of its width
    that each ``[lo, hi)`` covers."""
    out = [0.0] * (len(edges) - 1)
    for a, b in zip(lo, hi, strict=True):
        for j in range(len(out)):
            e0, e1 = edges[j], edges[j + 1]
            if e1 > e0:
                out[j] += max(0.0, min(b, e1) - max(a, e0)) / (e1 - e0)
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=2, max_size=8, unique=True).map(sorted),
       st.lists(st.tuples(st.integers(-3, 23), st.integers(0, 12)), max_size=12))
def test_coverage_equals_the_overlap_fractions(edges: list[int],
                                               ivs: list[tuple[int, int]]) -> None:
    e = [float(x) for x in edges]
    lo = [float(a) for a, _ in ivs]
    hi = [float(a + w) for a, w in ivs]
    want = _overlap_fractions(e, lo, hi)
    got = cover_many(np.array(e), np.array(lo, dtype=np.float64), np.array(hi, dtype=np.float64))
    assert got.tolist() == pytest.approx(want, abs=1e-9)
    vals, est = [0.0] * (len(e) - 1), [0.0] * (len(e) - 1)
    for a, b in zip(lo, hi, strict=True):
        cover_one(e, vals, est, a, b, 1.0)
    assert vals == pytest.approx(want, abs=1e-9)


@pytest.mark.parametrize(("estimate", "true", "want"), [
    (3.0, 3.0, 0.0), (0.0, 0.0, 0.0), (1.0, 0.0, 1.0),  # max(true, 1): no division by zero
    (0.5, 0.0, 0.5), (5.0, 10.0, 0.5), (15.0, 10.0, 0.5),
])
def test_relative_error(estimate: float, true: float, want: float) -> None:
    assert relative_error(estimate, true) == pytest.approx(want)
    got = relative_error(np.array([estimate, estimate]), np.array([true, true]))
    assert np.asarray(got).tolist() == pytest.approx([want, want])


@given(st.floats(-1e15, 1e15), st.sampled_from([0.0, 1.0, 0.25]))
def test_open_end_is_just_above_the_closed_end(hi: float, resolution: float) -> None:
    end = open_end(hi, resolution)
    assert end > hi
    assert end == (math.nextafter(hi, math.inf) if resolution == 0.0 else hi + resolution)
    assert open_ends(np.array([hi]), resolution)[0] == end


@given(st.floats(-1e300, 1e300), st.sampled_from([0.0, 1.0, 0.25]))
def test_open_ends_are_above_the_closed_ends_at_every_magnitude(hi: float,
                                                                resolution: float) -> None:
    assert open_ends(np.array([hi]), resolution)[0] > hi


@pytest.mark.parametrize("hi", [2.0 ** 53, -(2.0 ** 60), 1e300])
def test_open_end_agrees_with_open_ends_past_the_resolution(hi: float) -> None:
    assert open_end(hi, 1.0) == open_ends(np.array([hi]), 1.0)[0] > hi


def test_open_end_of_an_unbounded_end_stays_unbounded() -> None:
    assert open_end(math.inf, 0.0) == math.inf and open_end(math.inf, 1.0) == math.inf
    assert open_ends(np.array([math.inf, 2.0]), 1.0).tolist() == [math.inf, 3.0]


@settings(deadline=None)
@given(st.lists(st.tuples(st.floats(-1e6, 1e6), st.floats(0, 1e3)), max_size=10),
       st.sampled_from([0.0, 1.0]))
def test_data_domain_holds_every_finite_end(ivs: list[tuple[float, float]],
                                            resolution: float) -> None:
    lo = np.array([a for a, _ in ivs], dtype=np.float64)
    hi = np.array([a + w for a, w in ivs], dtype=np.float64)
    d0, d1 = data_domain(lo, hi, resolution)
    assert d0 < d1  # never empty
    if ivs:
        assert d0 <= lo.min() and hi.max() + resolution <= d1 + 1e-9 * abs(d1)


def test_data_domain_boundaries() -> None:
    none = np.empty(0)
    assert data_domain(none, none) == (0.0, 1.0)  # nothing finite: a unit domain
    inf = np.array([-math.inf]), np.array([math.inf])
    assert data_domain(*inf) == (0.0, 1.0)
    d0, d1 = data_domain(np.array([5.0]), np.array([5.0]))  # one point: widened around it
    assert d0 < 5.0 < d1
    d0, d1 = data_domain(np.array([-1e308]), np.array([1e308]))  # clamped: a finite span
    assert (d0, d1) == (-DOMAIN_MAX, DOMAIN_MAX) and math.isfinite(d1 - d0)
    assert data_domain(np.array([0.0]), np.array([1.0]), extra=np.array([7.0, math.nan])) == (
        0.0, 7.0)


class _Counted(Churn):
    """The rebuild rule alone: ``update`` counts, ``build`` marks a build of ``n``."""

    def __init__(self, rebuild_fraction: float) -> None:
        self._init_churn(rebuild_fraction)

    def build(self, n: int) -> None:
        self._mark_built(n)

    def update(self) -> None:
        self._churn += 1
        self._size += 1


@given(st.integers(0, 500), st.sampled_from([0.1, 0.25, 1.0]), st.integers(0, 300))
def test_rebuild_rule(n: int, fraction: float, updates: int) -> None:
    h = _Counted(fraction)
    h.build(n)
    for _ in range(updates):
        h.update()
    limit = max(MIN_CHURN, fraction * n) if n else 0.0  # built on nothing: any update
    assert h.needs_rebuild() == (updates > limit)
    assert h.churn == updates and h.size == n + updates


@pytest.mark.parametrize("fraction", [0.0, -1.0, math.nan])
def test_a_rebuild_fraction_must_be_positive(fraction: float) -> None:
    with pytest.raises(ValueError, match="rebuild_fraction"):
        _Counted(fraction)


def test_the_module_exports_what_it_lists() -> None:
    assert all(hasattr(hist_common, name) for name in hist_common.__all__)
