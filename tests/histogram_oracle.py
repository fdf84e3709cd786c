"""Brute-force oracle and interval strategies shared by the interval histogram tests
(``tests/matcher/partition/test_hist_*.py``, ``test_exact_counter.py``, ``test_histogram.py``)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

INF = math.inf


def brute(lo: np.ndarray, hi: np.ndarray, x: float) -> int:
    """How many closed intervals ``[lo[i], hi[i]]`` contain ``x``, by a full scan. O(n)."""
    return int(np.count_nonzero((lo <= x) & (hi >= x)))


@st.composite
def int_intervals(draw: st.DrawFn, n_max: int = 25, span: int = 20,
                  unbounded: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Closed intervals with integer ends in [0, span], some points, some ±inf ends."""
    n = draw(st.integers(1, n_max))
    lo, hi = [], []
    for _ in range(n):
        a = draw(st.integers(0, span))
        b = draw(st.integers(a, span))
        if unbounded:
            kind = draw(st.sampled_from(["finite"] * 6 + ["left", "right", "both"]))
            if kind in ("left", "both"):
                a = -INF
            if kind in ("right", "both"):
                b = INF
        lo.append(float(a))
        hi.append(float(b))
    return np.array(lo), np.array(hi)


def grid(span: int) -> np.ndarray:
    """Every integer, every half-integer and a few points outside [0, span]."""
    return np.concatenate([np.arange(-3, 2 * span + 7) / 2.0, [-1e9, 1e9]])
