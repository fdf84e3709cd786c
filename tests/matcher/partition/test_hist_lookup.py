"""The compiled histogram lookup (``lookup_array``, ``bucket_at``, ``estimate_at``,
``bucket_function``) answers exactly what the Python histograms do: ``bisect_right`` over
HIST-SSI's breakpoints, and ``estimate_at(h.lookup(), x) == h.estimate(x)`` for every
histogram and the chooser, after builds and updates."""

from __future__ import annotations

import bisect

import numpy as np
from histogram_oracle import INF, brute, grid, int_intervals
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.partition import hist_lookup
from hotjoin.matcher.partition.hist_chooser import IntervalHistogramChooser
from hotjoin.matcher.partition.hist_eqw import EquiWidthHistogram
from hotjoin.matcher.partition.hist_lookup import estimate_at
from hotjoin.matcher.partition.hist_ssi import SSIHistogram

FLOATS = st.floats(-50, 50, allow_nan=False)


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


@settings(deadline=None)  # numba kernels compile on first use
@given(int_intervals(), int_intervals(n_max=8), st.integers(1, 12),
       st.lists(st.floats(-50.0, 70.0, allow_nan=False), max_size=20))
def test_compiled_estimate_is_the_python_estimate(a: tuple[np.ndarray, np.ndarray],
                                                  b: tuple[np.ndarray, np.ndarray], k: int,
                                                  more: list[float]) -> None:
    """``estimate_at(lookup(), x) == estimate(x)`` exactly, for both histograms and the
    chooser, after a build and after updates, at every (half-)integer, at bucket edges, far
    outside and at random floats: the router estimates n′ in its decision kernel."""
    lo, hi = a
    hs: list[object] = [SSIHistogram.build(lo, hi, k), EquiWidthHistogram.fit(lo, hi, k),
                        SSIHistogram(k)]
    ch = IntervalHistogramChooser(k, min_observations=1)
    ch.add_many(lo, hi)
    for x in (1.0, 7.0, 12.5):  # scored on exact counts: either histogram may answer
        ch.observe(x, brute(lo, hi, x))
    hs.append(ch)
    xs = [*grid(20).tolist(), *more, -INF, INF]
    for h in hs:
        for step in range(2):
            if step:
                h.add_many(*b)  # type: ignore[attr-defined]
            arr = h.lookup()  # type: ignore[attr-defined]
            for x in xs:
                assert estimate_at(arr, x) == h.estimate(x), (h, x)  # type: ignore
