"""HIST-SSI (``SSIHistogram``, paper 004 §4.1, App. B): exact with enough buckets, never over
its bucket budget, add-then-remove restores, rebuilds equal a fresh build, the rebuild policy,
merged groups and query-aware buckets."""

from __future__ import annotations

import math

import numpy as np
import pytest
from histogram_oracle import INF, brute, grid, int_intervals
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.partition.exact_counter import ExactStabbingCounter
from hotjoin.matcher.partition.hist_common import relative_error
from hotjoin.matcher.partition.hist_eqw import EquiWidthHistogram
from hotjoin.matcher.partition.hist_fit import merge_smallest as _merge_smallest
from hotjoin.matcher.partition.hist_ssi import SSIHistogram
from hotjoin.ops.bench import histogram as hist_bench


@st.composite
def one_group(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Intervals that all contain 10 (one stabbing group), some unbounded."""
    n = draw(st.integers(1, 25))
    lo = [float(draw(st.integers(0, 10))) for _ in range(n)]
    hi = [float(draw(st.integers(10, 20))) for _ in range(n)]
    for i in range(n):
        if draw(st.integers(0, 7)) == 0:
            lo[i] = -INF
        if draw(st.integers(0, 7)) == 0:
            hi[i] = INF
    return np.array(lo), np.array(hi)


@settings(deadline=None)  # numba kernels compile on first use
@given(one_group())
def test_ssi_one_group_with_enough_buckets_is_exact(iv: tuple[np.ndarray, np.ndarray]) -> None:
    lo, hi = iv
    k = 2 * lo.shape[0] + 1                       # at least one bucket per breakpoint
    h = SSIHistogram.build(lo, hi, buckets=k, groups="canonical")
    assert h.tau == 1 and h.groups == 1 and h.pieces <= k
    xs = grid(20)
    assert [h.estimate(x) for x in xs] == [brute(lo, hi, x) for x in xs]
    assert h.build_error == 0.0


@settings(deadline=None)  # numba kernels compile on first use
@given(int_intervals(unbounded=True))
def test_ssi_canonical_with_enough_buckets_is_exact(iv: tuple[np.ndarray, np.ndarray]) -> None:
    lo, hi = iv
    h = SSIHistogram.build(lo, hi, buckets=4 * lo.shape[0] + 2, groups="canonical")
    assert h.groups == h.tau
    xs = grid(20)
    assert h.estimate_many(xs).tolist() == [brute(lo, hi, x) for x in xs]


@settings(max_examples=60, deadline=None)
@given(int_intervals(n_max=40), st.integers(1, 12),
       st.sampled_from(["auto", "canonical", 2]), st.sampled_from(["cardinality", "greedy"]),
       st.sampled_from(["total", "group"]))
def test_ssi_never_exceeds_its_bucket_budget(iv: tuple[np.ndarray, np.ndarray], k: int,
                                             groups: str | int, allocation: str,
                                             weights: str) -> None:
    lo, hi = iv
    h = SSIHistogram.build(lo, hi, buckets=k, groups=groups,  # type: ignore[arg-type]
                           allocation=allocation, weights=weights)
    assert 1 <= h.pieces <= k
    assert h.groups <= min(h.tau, (k + 1) // 2)
    est = h.estimate_many(grid(20))
    assert np.all(est >= 0) and np.all(np.isfinite(est))
    assert est.tolist() == [h.estimate(x) for x in grid(20)]


@settings(deadline=None)  # numba kernels compile on first use
@given(int_intervals(), int_intervals(), st.integers(1, 10))
def test_ssi_add_then_remove_restores(a: tuple[np.ndarray, np.ndarray],
                                      b: tuple[np.ndarray, np.ndarray], k: int) -> None:
    h = SSIHistogram.build(*a, buckets=k)
    before = h.estimate_many(grid(20))
    for x, y in zip(*b, strict=True):
        h.add(x, y)
    assert np.all(h.estimate_many(grid(20)) >= before - 1e-9)
    for x, y in zip(*b, strict=True):
        h.remove(x, y)
    assert h.estimate_many(grid(20)) == pytest.approx(before, abs=1e-9)
    h.add_many(*b)
    h.remove_many(*b)
    assert h.estimate_many(grid(20)) == pytest.approx(before, abs=1e-9)


def test_ssi_pieces_get_fractional_updates_like_eqw() -> None:
    h = SSIHistogram.build(np.array([0.0]), np.array([10.0]), buckets=4)   # one piece [0, 10]
    assert h.breakpoints().tolist() == [0.0, math.nextafter(10.0, INF)]
    h.add(0.0, 4.0)                               # covers ~40 % of the piece
    assert h.estimate(5.0) == pytest.approx(1.4)
    h.add(-INF, INF)
    assert h.estimate(5.0) == pytest.approx(2.4) and h.estimate(-1e9) == 1.0


@settings(deadline=None)  # numba kernels compile on first use
@given(int_intervals(n_max=30), int_intervals(n_max=10), st.integers(1, 9))
def test_rebuild_after_churn_equals_a_fresh_build(a: tuple[np.ndarray, np.ndarray],
                                                  b: tuple[np.ndarray, np.ndarray],
                                                  k: int) -> None:
    h = SSIHistogram.build(*a, buckets=k, rebuild_fraction=0.5)
    e = EquiWidthHistogram.fit(*a, buckets=k)
    for x, y in zip(*b, strict=True):
        h.add(x, y)
        e.add(x, y)
    keep = np.arange(a[0].shape[0]) % 2 == 0      # and drop every other original interval
    h.remove_many(a[0][~keep], a[1][~keep])
    e.remove_many(a[0][~keep], a[1][~keep])
    lo = np.concatenate([a[0][keep], b[0]])
    hi = np.concatenate([a[1][keep], b[1]])
    h.rebuild(lo, hi)
    fresh = SSIHistogram.build(lo, hi, buckets=k, rebuild_fraction=0.5)
    assert h.breakpoints().tolist() == fresh.breakpoints().tolist()
    assert h.values().tolist() == fresh.values().tolist()
    assert h.churn == 0 and h.size == lo.shape[0] and not h.needs_rebuild()
    # EQW's updates are exact for its own definition: churned == rebuilt, up to rounding
    churned = e.estimate_many(grid(20))
    e.rebuild(lo, hi)
    assert churned == pytest.approx(e.estimate_many(grid(20)), abs=1e-9)


def test_rebuild_policy() -> None:
    rng = np.random.default_rng(3)
    lo = rng.uniform(0, 100, 200)
    hi = lo + rng.uniform(0, 10, 200)
    h = SSIHistogram.build(lo, hi, buckets=10)          # threshold max(16, 0.25 * 200) = 50
    for i in range(50):
        h.add(lo[i], hi[i])
    assert not h.needs_rebuild()
    h.remove(lo[0], hi[0])
    assert h.needs_rebuild() and h.churn == 51
    small = SSIHistogram.build(lo[:10], hi[:10], buckets=10)   # small sets: at least 16 updates
    small.add_many(lo[10:26], hi[10:26])
    assert not small.needs_rebuild()
    small.add(lo[26], hi[26])
    assert small.needs_rebuild()
    empty = SSIHistogram(10)
    assert not empty.needs_rebuild() and empty.estimate(1.0) == 0.0
    empty.add(1.0, 2.0)                           # nothing to update yet: asks for a build
    assert empty.needs_rebuild()
    empty.rebuild(np.array([1.0]), np.array([2.0]))
    assert not empty.needs_rebuild() and empty.estimate(1.5) == 1.0


def test_more_groups_than_buckets_merges_the_smallest() -> None:
    assert _merge_smallest(np.array([5, 1, 1, 5]), 2).tolist() == [0, 0, 0, 1]
    assert _merge_smallest(np.array([1, 9, 1]), 2).tolist() == [0, 0, 1]
    assert _merge_smallest(np.array([3, 3]), 5).tolist() == [0, 1]
    lo = np.arange(10.0) * 10                     # ten disjoint groups, budget 5: three groups
    h = SSIHistogram.build(lo, lo + 1, buckets=5, groups="canonical")
    assert h.tau == 10 and h.groups == 3 and h.pieces <= 5


def test_total_count_weights_beat_the_groups_own_when_groups_are_merged() -> None:
    c = hist_bench.HistogramBenchConfig(intervals=10_000, queries=2000, seed=11)
    lo, hi, q = hist_bench.workload(c, 0)
    t = ExactStabbingCounter(lo, hi).count_many(q)
    err, rms = {}, {}
    for w in ("total", "group"):
        h = SSIHistogram.build(lo, hi, buckets=20, domain=(0.0, 10_000.0), groups=2, weights=w)
        err[w] = float(np.mean(relative_error(h.estimate_many(q), t)))
        rms[w] = h.build_error
    assert err["total"] < err["group"] and rms["total"] < rms["group"]
    one = [SSIHistogram.build(lo, hi, buckets=20, groups=1, weights=w).values().tolist()
           for w in ("total", "group")]
    assert one[0] == one[1]                       # a single group: the same weights
    with pytest.raises(ValueError):
        SSIHistogram(20, weights="own")  # type: ignore[arg-type]


def test_query_sample_moves_buckets_to_where_queries_are() -> None:
    rng = np.random.default_rng(5)
    mid = rng.normal(0, 10, 5000)
    lo, hi = mid - 5, mid + 5
    q = rng.uniform(0, 5, 2000)                   # queries only on one shoulder
    t = ExactStabbingCounter(lo, hi).count_many(q)
    plain = SSIHistogram.build(lo, hi, buckets=6)
    aware = SSIHistogram.build(lo, hi, buckets=6, query_sample=q[:500])
    err = [float(np.mean(relative_error(h.estimate_many(q), t))) for h in (plain, aware)]
    assert err[1] < err[0]
