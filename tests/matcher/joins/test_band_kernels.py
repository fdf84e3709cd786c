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


@settings(max_examples=400, deadline=None)
@given(st.lists(st.integers(-20, 20), max_size=90), st.integers(-25, 25),
       st.sampled_from([1, -1]), st.floats(-50, 50), st.integers(-1, 12),
       st.sampled_from([1, 2, 4, 16]))
def test_locate_equals_lower_bound_from_any_hint(keys: list[int], b: int, dirn: int, x: float,
                                                 hint: int, step: int) -> None:
    """The sampled search (BJ-SSI's per-group search) lands where the plain search does, from
    a hint below, at or above the answer, and past the sample's end."""
    k = np.sort(np.array(keys, dtype=np.float64))
    samp = np.ascontiguousarray(k[::step])
    want = K.lower_bound(k, np.empty(0), step, float(b), dirn, x)
    if samp.shape[0] > 1:
        pos, h = K.locate(k, samp, step, float(b), dirn, x, hint)
        assert pos == want
        # the returned hint is the exact sample rank: searching from it again costs no step
        assert K.locate(k, samp, step, float(b), dirn, x, h) == (want, h)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-20, 20), min_size=1, max_size=60), st.integers(-25, 25),
       st.sampled_from([1, -1]), st.floats(-30, 30), st.data())
def test_gallop_back_equals_lower_bound(keys: list[int], b: int, dirn: int, x: float,
                                        data: st.DataObject) -> None:
    """The backward search (BJ-SSI's fast COUNT of a band's lower end) from any position whose
    ``d`` reaches ``x``."""
    k = np.sort(np.array(keys, dtype=np.float64))
    want = K.lower_bound(k, np.empty(0), 16, float(b), dirn, x)
    if want < k.shape[0]:
        start = data.draw(st.integers(want, k.shape[0] - 1))
        assert K.gallop_back(k, float(b), dirn, x, start) == want
