"""``ExactStabbingCounter`` and ``count_stabbed`` (the exact f_I(x) the histograms are scored
against) equal a brute-force count: closed ends, points, unbounded ends, subsets by id."""

from __future__ import annotations

import numpy as np
from histogram_oracle import brute, grid, int_intervals
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.partition import exact_counter
from hotjoin.matcher.partition.exact_counter import ExactStabbingCounter

FLOATS = st.floats(-50, 50, allow_nan=False)


@settings(deadline=None)  # numba kernels compile on first use
@given(int_intervals())
def test_exact_counter_matches_brute_force(iv: tuple[np.ndarray, np.ndarray]) -> None:
    lo, hi = iv
    c = ExactStabbingCounter(lo, hi)
    xs = grid(20)
    assert [c.count(x) for x in xs] == [brute(lo, hi, x) for x in xs]
    assert c.count_many(xs).tolist() == [brute(lo, hi, x) for x in xs]


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
