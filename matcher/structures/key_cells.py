"""Occupancy bitmap of a sorted key run: which fixed-width cells of the key line hold a key.

BJ-SSI (paper 004 §3.1.2) asks, per stabbing group and incoming tuple, whether any stored key
lies in the group's hull ``[b + min lo, b + max hi]``; on sparse-key workloads the answer is
almost always no, yet finding the neighbours of ``b + p`` to say so costs a search (~20 ns,
most of BJ-SSI's probe at τ = 40). This bitmap answers "no key here" with one or two word
reads from a structure of ``CELLS_PER_KEY`` bits per key (100 KB at 100,000 keys): a set bit
only says a cell *may* hold a live key (deleted keys keep their bits until the run is rebuilt),
so a clear answer is exact and anything else falls back to the search.

The bitmap is built with the run (``SortedRuns.merge``/``bulk_load``), cells of equal width
over ``[min key, max key]``. A query widens its interval by far more than the rounding of
``b + lo`` against the kernels' exact ``key − b`` (:data:`ROUNDING`); :func:`may_hold`
declines to answer (returns True) for unbounded or wide intervals.

>>> words, params = build_key_cells(np.array([1.0, 2.0, 10.0]))
>>> may_hold(words, params, 1.9, 2.1, 2.1), may_hold(words, params, 5.0, 6.0, 6.0)
(True, False)
"""

from __future__ import annotations

import numpy as np

from hotjoin.matcher.config import INLINE, kernel

CELLS_PER_KEY = 8
"""Cells per key of the run: ~1/8 of the cells hold a key when keys are spread evenly."""

MAX_QUERY_CELLS = 256
"""A query spanning more cells than this is not answered (the search is as cheap)."""

ROUNDING = 1e-12
"""A query interval is widened by this times the magnitudes it was computed from: ~4,500
ulps, far above the few roundings of ``b + lo`` against the exact ``key − b``."""

NO_CELLS = (np.zeros(0, dtype=np.uint64), np.zeros(4, dtype=np.float64))
"""The bitmap of a run that has none (empty, or with a non-finite or single key value)."""


@kernel
def _fill(keys: np.ndarray, base: float, scale: float, n_cells: int,
          words: np.ndarray) -> None:
    for i in range(keys.shape[0]):
        c = int(np.floor((keys[i] - base) * scale))
        c = min(max(c, 0), n_cells - 1)
        words[c >> 6] |= np.uint64(1) << np.uint64(c & 63)


def build_key_cells(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bitmap of sorted ``keys`` as a kernel bundle ``(words, params)``; ``params`` is
    ``(base = min key, cells per unit of key, number of cells, max key)``; :data:`NO_CELLS`
    when not usable."""
    n = int(keys.shape[0])
    if n == 0:
        return NO_CELLS
    lo, hi = float(keys[0]), float(keys[n - 1])
    span = hi - lo
    if not (np.isfinite(lo) and np.isfinite(hi) and np.isfinite(span)) or span <= 0.0:
        return NO_CELLS
    n_cells = CELLS_PER_KEY * n
    scale = n_cells / span
    if not np.isfinite(scale):
        return NO_CELLS
    words = np.zeros((n_cells + 63) >> 6, dtype=np.uint64)
    _fill(keys, lo, scale, n_cells, words)
    return words, np.array([lo, scale, float(n_cells), hi])


@kernel(**INLINE)
def may_hold(words: np.ndarray, params: np.ndarray, lo: float, hi: float, mag: float) -> bool:
    """Whether some key of the run may lie in ``[lo, hi]``: False only when none does.

    ``lo``/``hi`` were computed by the caller with roundings of magnitude up to ``mag``
    (e.g. ``b + min lo`` for the exact test ``key − b >= min lo``): the interval is widened by
    ``ROUNDING × mag`` (thousands of ulps) before the cells are read, so a key that passes the
    exact test is never missed. Cells map through the same monotone ``floor((x − base) ·
    scale)`` as at the build, clipped alike."""
    if words.shape[0] == 0:
        return True
    if not (lo <= hi) or lo == -np.inf or hi == np.inf:
        return True  # NaN or unbounded: not answered
    base, scale, n_cells, top = params[0], params[1], int(params[2]), params[3]
    pad = ROUNDING * (mag + abs(lo) + abs(hi))
    lo -= pad
    hi += pad
    if hi < base or lo > top:
        return False  # wholly outside [min key, max key]
    fc0 = np.floor((lo - base) * scale)
    fc1 = np.floor((hi - base) * scale)
    if fc1 - fc0 > MAX_QUERY_CELLS:
        return True
    c0 = min(max(int(fc0), 0), n_cells - 1)
    c1 = min(max(int(fc1), 0), n_cells - 1)
    w0, w1 = c0 >> 6, c1 >> 6
    for w in range(w0, w1 + 1):
        bits = words[w]
        if w == w0:
            bits &= ~np.uint64(0) << np.uint64(c0 & 63)
        if w == w1 and (c1 & 63) != 63:
            bits &= (np.uint64(1) << np.uint64((c1 & 63) + 1)) - np.uint64(1)
        if bits != 0:
            return True
    return False
