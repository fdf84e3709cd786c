"""``grown``: a larger column whose used prefix is the old column's, whatever the dtype."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.matcher.structures.growth import grown


@given(st.lists(st.integers(-(2 ** 62), 2 ** 62), max_size=40), st.integers(0, 80),
       st.integers(0, 40), st.sampled_from([np.int64, np.float64, np.int32]))
def test_the_used_prefix_is_copied_and_the_size_is_at_least_cap(
        values: list[int], cap: int, used: int, dtype: type) -> None:
    a = np.array(values, dtype=np.int64).astype(dtype)
    used = min(used, len(a))
    out = grown(a, cap, used)
    assert out.dtype == a.dtype
    assert out.shape == (max(cap, used),)
    assert out[:used].tolist() == a[:used].tolist()
    assert out is not a


def test_default_used_is_the_whole_column_even_above_cap() -> None:
    a = np.arange(5)
    assert grown(a, 3).tolist() == [0, 1, 2, 3, 4]  # never shrinks below what is in use
    assert grown(a, 8)[:5].tolist() == [0, 1, 2, 3, 4]
    assert grown(np.empty(0), 0).shape == (0,)


def test_the_old_column_is_left_alone() -> None:
    a = np.array([1.0, 2.0])
    out = grown(a, 4)
    out[0] = 9.0
    assert a.tolist() == [1.0, 2.0]
