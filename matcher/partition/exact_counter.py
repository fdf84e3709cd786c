"""Exact stabbing counts of an interval set, the reference the histograms are scored against
(paper 004 §4.1: the router's occasional exact n′; App. B's error).

* :class:`ExactStabbingCounter` -- ``f_I(x)`` from two sorted endpoint arrays (tests, sampling);
* :func:`count_stabbed` -- ``f_I(x)`` over a subset of live intervals given by id, compiled.

>>> c = ExactStabbingCounter(np.array([0.0, 2.0, 3.0]), np.array([4.0, 6.0, 3.5]))
>>> c.count(3.0), int(count_stabbed(np.array([0.0, 2.0]), np.array([4.0, 6.0]),
...                                 np.array([1]), 3.0))
(3, 1)
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

import numpy as np

from hotjoin.matcher.config import kernel
from hotjoin.matcher.partition.stabbing import _check_arrays

__all__ = ["ExactStabbingCounter", "count_stabbed"]


@kernel
def count_stabbed(lo: np.ndarray, hi: np.ndarray, ids: np.ndarray, x: float) -> int:
    """#{q ∈ ids : lo[q] ≤ x ≤ hi[q]}: the exact n′(x) over live subscriptions, O(n) without
    gathering copies (the router samples it to score its histograms)."""
    n = 0
    for i in range(ids.shape[0]):
        q = ids[i]
        n += (lo[q] <= x) & (hi[q] >= x)  # branch-free: the comparisons are unpredictable
    return n


class ExactStabbingCounter:
    """Exact ``f_I(x) = #(lo <= x) − #(hi < x)`` from two sorted endpoint arrays.

    Build O(n log n); :meth:`count` O(log n) (two bisects on lists, about 0.4 µs);
    :meth:`count_many` O(m log n).  Static: build a new one after the set changes.

    >>> c = ExactStabbingCounter(np.array([0.0, 1.0, -np.inf]), np.array([1.0, 1.0, 0.0]))
    >>> [c.count(x) for x in (-5.0, 0.0, 0.5, 1.0, 2.0)]
    [1, 2, 1, 2, 0]
    """

    def __init__(self, lo: np.ndarray, hi: np.ndarray) -> None:
        lo, hi = _check_arrays(lo, hi)
        self._lo = np.sort(lo)
        self._hi = np.sort(hi)
        self._lo_list: list[float] = self._lo.tolist()
        self._hi_list: list[float] = self._hi.tolist()

    def __len__(self) -> int:
        return len(self._lo_list)

    def count(self, x: float) -> int:
        """Number of intervals containing ``x`` (closed ends)."""
        return bisect_right(self._lo_list, x) - bisect_left(self._hi_list, x)

    def count_many(self, xs: np.ndarray) -> np.ndarray:
        """:meth:`count` for every element of ``xs`` (int64 array)."""
        xs = np.asarray(xs, np.float64)
        return (np.searchsorted(self._lo, xs, side="right")
                - np.searchsorted(self._hi, xs, side="left")).astype(np.int64)
