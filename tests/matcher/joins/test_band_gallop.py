"""``band_kernels.gallop`` (BJ-SSI's forward search from the previous group) equals
``lower_bound`` for every start, both directions, duplicates and bounds (paper 004 §3.1.2)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.joins import band_kernels as K


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-20, 20), max_size=60), st.integers(-25, 25),
       st.sampled_from([1, -1]), st.floats(-30, 30), st.integers(-2, 70))
def test_gallop_equals_lower_bound(keys: list[int], b: int, dirn: int, x: float,
                                   start: int) -> None:
    k = np.sort(np.array(keys, dtype=np.float64))
    samp = np.empty(0)
    want = K.lower_bound(k, samp, 16, float(b), dirn, x)
    assert K.gallop(k, samp, 16, float(b), dirn, x, start) == want
