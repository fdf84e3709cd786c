"""The interval histograms' estimates in compiled code: one ``lookup()`` array per histogram
(paper 004 §4.1: the router estimates n′ inside its decision kernel, ``router/choice_kernels``).

A histogram's ``lookup()`` (HIST-EQW, :mod:`.hist_eqw`; HIST-SSI, :mod:`.hist_ssi`) packs what
its ``estimate`` reads into one float64 array (:func:`lookup_array`); :func:`estimate_at` reads
it bit for bit as the Python ``estimate`` does, :func:`bucket_at` names the bucket (every x of
one bucket has the same estimate, so a choice made at one holds for all).

>>> h = lookup_array(SSI_LOOKUP, 0.0, 0.0, 0.0, 0, np.array([1.0, 5.0]), [0.0, 3.0, 1.0])
>>> [float(estimate_at(h, x)) for x in (0.5, 1.0, 4.9, 5.0)]
[0.0, 3.0, 3.0, 1.0]
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from functools import partial

import numpy as np

from hotjoin.matcher.config import INLINE, kernel

__all__ = ["EQW_LOOKUP", "LOOKUP_HEADER", "SSI_LOOKUP", "bucket_at", "bucket_function",
           "estimate_at", "estimate_of_bucket", "lookup_array"]


EQW_LOOKUP, SSI_LOOKUP = 1.0, 0.0
"""The first cell of a ``lookup()`` array: which of :func:`estimate_at`'s two forms reads it."""
LOOKUP_HEADER = 6
"""A ``lookup()`` array is ``[form, lo, hi, 1/w, B, nb]`` then ``nb`` breakpoints (HIST-SSI),
then the estimates."""


def lookup_array(form: float, lo: float, hi: float, inv_w: float, buckets: int,
                 breaks: np.ndarray, est: list[float]) -> np.ndarray:
    """One float64 array holding what :func:`estimate_at` reads (one array crosses into a
    kernel for less than three: ~25 ns per array argument, ``docs/benchmarks/engine.md``)."""
    out = np.empty(LOOKUP_HEADER + breaks.shape[0] + len(est))
    out[:LOOKUP_HEADER] = (form, lo, hi, inv_w, buckets, breaks.shape[0])
    out[LOOKUP_HEADER:LOOKUP_HEADER + breaks.shape[0]] = breaks
    out[LOOKUP_HEADER + breaks.shape[0]:] = est
    return out


@kernel
def bucket_at(h: np.ndarray, x: float) -> int:
    """The index of the estimate :func:`estimate_at` reads for ``x`` (its bucket): every x of
    one bucket has the same n′, so a choice made at one holds for all (the router keeps such
    choices, ``SelectDynamic``)."""
    nb = int(h[5])
    if h[0] == SSI_LOOKUP:
        return int(np.searchsorted(h[LOOKUP_HEADER:LOOKUP_HEADER + nb], x, side="right"))
    lo, hi = h[1], h[2]
    if x < lo:
        return 0
    if x > hi:
        return h.shape[0] - LOOKUP_HEADER - nb - 1
    j = int((x - lo) * h[3])
    b = int(h[4])
    return j + 1 if j < b else b


@kernel
def estimate_at(h: np.ndarray, x: float) -> float:
    """A histogram's ``estimate(x)`` from its ``lookup()`` array, in compiled code (the
    router estimates n′ inside its decision kernel, §4.1). Bit for bit the Python estimate:
    HIST-SSI reads ``est[bisect_right(breaks, x)]``; HIST-EQW its bucket by the same float
    arithmetic."""
    return estimate_of_bucket(h, bucket_at(h, x))


@kernel(**INLINE)
def estimate_of_bucket(h: np.ndarray, b: int) -> float:
    """The estimate of bucket ``b`` of a ``lookup()`` array (:func:`bucket_at`)."""
    return h[LOOKUP_HEADER + int(h[5]) + b]


def bucket_function(h: np.ndarray) -> Callable[[float], int]:
    """:func:`bucket_at` for one ``lookup()`` array as a Python callable (no kernel call: a
    ``bisect_right`` over the breakpoints, or the equi-width arithmetic, ~0.1–0.2 µs).

    >>> h = lookup_array(SSI_LOOKUP, 0.0, 0.0, 0.0, 0, np.array([1.0, 5.0]), [0.0, 3.0, 1.0])
    >>> f = bucket_function(h)
    >>> xs = (0.5, 1.0, 4.9, 5.0, 9.0)
    >>> [f(x) for x in xs] == [bucket_at(h, x) for x in xs]
    True
    >>> [f(x) for x in (0.5, 1.0, 5.0)]
    [0, 1, 2]
    """
    nb = int(h[5])
    if h[0] == SSI_LOOKUP:
        return partial(bisect_right, h[LOOKUP_HEADER:LOOKUP_HEADER + nb].tolist())  # no frame
    lo, hi, inv_w, b = float(h[1]), float(h[2]), float(h[3]), int(h[4])
    last = h.shape[0] - LOOKUP_HEADER - nb - 1

    def bucket(x: float) -> int:
        if x < lo:
            return 0
        if x > hi:
            return last
        j = int((x - lo) * inv_w)
        return j + 1 if j < b else b

    return bucket
