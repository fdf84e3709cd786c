"""HIST-EQW (``EquiWidthHistogram``): fractional updates computed by hand, exactness with a
bucket per value, and add-then-remove / many-equals-one-by-one against the same histogram."""

from __future__ import annotations

import numpy as np
import pytest
from histogram_oracle import INF, brute, grid, int_intervals
from hypothesis import given, settings

from hotjoin.matcher.partition.hist_eqw import EquiWidthHistogram


def test_eqw_fractional_update_hand_computed() -> None:
    h = EquiWidthHistogram(0.0, 10.0, 5)          # buckets [0,2) [2,4) [4,6) [6,8) [8,10]
    h.add(1.0, 5.0)                               # half of [0,2), all of [2,4), half of [4,6)
    assert h.values().tolist() == pytest.approx([0, 0.5, 1, 0.5, 0, 0, 0], abs=1e-12)
    h.add(3.0, 3.5)                               # a quarter of [2,4)
    assert h.estimate(2.0) == pytest.approx(1.25)
    h.add(9.0, 14.0)                              # half of [8,10]; the right outside bucket has
    assert h.estimate(9.0) == pytest.approx(0.5)  # virtual width 2: [10, 12) fully covered
    assert h.estimate(10.0) == pytest.approx(0.5)  # hi is in the last bucket (closed)
    assert h.estimate(11.0) == pytest.approx(1.0)
    h.add(-INF, -1.0)                             # half of the left virtual bucket [-2, 0)
    assert h.estimate(-100.0) == pytest.approx(0.5)
    h.add(-INF, INF)
    assert [h.estimate(x) for x in (-1e300, 1e300)] == pytest.approx([1.5, 2.0])


@settings(deadline=None)  # numba kernels compile on first use
@given(int_intervals(span=15))
def test_eqw_with_a_bucket_per_value_is_exact(iv: tuple[np.ndarray, np.ndarray]) -> None:
    lo, hi = iv
    # integer keys (resolution 1): one bucket per integer 0..15 is exact at every integer
    h = EquiWidthHistogram(0.0, 16.0, 16, resolution=1.0)
    h.add_many(lo, hi)
    ints = np.arange(0, 16, dtype=np.float64)
    assert h.estimate_many(ints) == pytest.approx([brute(lo, hi, x) for x in ints], abs=1e-9)
    # continuous keys: one bucket per unit is exact between the endpoints
    c = EquiWidthHistogram(0.0, 15.0, 15)
    for a, b in zip(lo.tolist(), hi.tolist(), strict=True):
        c.add(a, b)
    mids = np.arange(15) + 0.5
    assert [c.estimate(x) for x in mids] == pytest.approx([brute(lo, hi, x) for x in mids],
                                                          abs=1e-9)


@settings(deadline=None)  # numba kernels compile on first use
@given(int_intervals(), int_intervals())
def test_eqw_add_then_remove_restores_and_many_equals_one_by_one(
        a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> None:
    h = EquiWidthHistogram(-1.0, 21.0, 7)
    h.add_many(*a)
    before = h.estimate_many(grid(20))
    one = EquiWidthHistogram(-1.0, 21.0, 7)
    for x, y in zip(*a, strict=True):
        one.add(x, y)
    assert one.estimate_many(grid(20)) == pytest.approx(before, abs=1e-9)
    for x, y in zip(*b, strict=True):
        h.add(x, y)
    h.remove_many(*b)
    assert h.estimate_many(grid(20)) == pytest.approx(before, abs=1e-9)
    assert [h.estimate(x) for x in grid(20)] == pytest.approx(before.tolist(), abs=1e-9)
