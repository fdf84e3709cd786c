"""Histograms of an interval set: how many intervals a point stabs (paper 004, §4.1, App. B).

For a set ``I`` of closed intervals ``[lo, hi]`` (bounds may be ``±inf``), ``f_I(x)`` is the
number of intervals of ``I`` that contain ``x``.  The cost-based router (§4.1, ``n'`` and ``n''``)
needs an estimate of ``f_I`` for every incoming tuple, so an estimate must cost well under a
microsecond while subscriptions come and go.  This module keeps ``f_I`` as a *step function*
and offers:

* :class:`EquiWidthHistogram` -- HIST-EQW, the paper's §4.1 histogram: ``B`` equal buckets over a
  domain ``[lo, hi]``; adding ``[a, b]`` raises every bucket it covers completely by 1 and every
  partially covered bucket by the covered fraction (removal subtracts the same).  Two more
  buckets hold the estimate for ``x < lo`` and ``x > hi``.  ``estimate`` is O(1).
* :class:`SSIHistogram` -- HIST-SSI of Appendix B: the canonical stabbing partition (Lemma 1),
  per group a left (increasing) and right (decreasing) step function, each compressed by weighted
  1-D k-means (Lloyd's iterations; weights ``w = ∫φ / y²``, Lemma 5), buckets given to groups in
  proportion to their cardinality, and the per-group functions summed into one step function
  (``estimate`` is one ``bisect``, O(log k)).
* :class:`IntervalHistogramChooser` -- keeps both, scores each on exact counts fed to it
  (``observe``) and answers with the better one; this is what the router uses.
* :class:`ExactStabbingCounter` -- exact ``f_I`` from two sorted arrays (tests, sampling).

Conventions shared by all of them
---------------------------------

*Closed ends.*  ``[a, b]`` is stored as the half-open ``[a, b⁺)`` with ``b⁺ = nextafter(b, +inf)``
(or ``b + resolution`` when a ``resolution > 0`` is given: for integer keys use ``resolution=1``,
then ``[a, b]`` covers the ``b - a + 1`` integers ``a..b`` and a point range ``[a, a]`` weighs
one unit).  With the default ``resolution = 0`` a point range has measure 0, so the
fractional-coverage rule gives it (almost) no weight: a continuous query hits it with
probability 0.

*Outside the pieces.*  Both histograms answer ``x`` below their first (above their last)
breakpoint from an extra "outside" bucket.  For the fractional rule such a bucket is treated as
a bucket of *virtual width* ``vw`` (EQW: the bucket width; SSI: the mean piece width) next to
the domain, so ``[-inf, b]`` with ``b`` beyond the domain counts 1 for every ``x`` below it,
and a finite interval partly outside counts its covered fraction of that virtual bucket.
A piece with an infinite end (``[-inf, x1)`` in HIST-SSI) is treated the same way.

*Non-negative.*  Values are kept exactly as updated (so ``add`` then ``remove`` restores them up
to rounding) and clamped at 0 when read.

*Rebuild policy.*  ``needs_rebuild()`` is true once the updates since the last build exceed
``max(min_churn, rebuild_fraction · size at that build)`` (defaults 16 and 0.25), or when the
histogram was built on nothing and has seen updates; ``rebuild(lo, hi)`` then rebuilds from the
current intervals (the caller owns them).  HIST-EQW's updates are exact for its own definition,
so a rebuild only refits the domain (:meth:`EquiWidthHistogram.fit`) and drops rounding drift;
HIST-SSI's bucket boundaries are fitted to the intervals present at build time, so churn makes
them stale.  Rebuilding costs O(n log n); at ``rebuild_fraction`` 0.25 that is O(log n)
amortised per update.

>>> lo, hi = np.array([0.0, 2.0, 3.0]), np.array([4.0, 6.0, 3.5])
>>> ExactStabbingCounter(lo, hi).count(3.0)
3
>>> eqw = EquiWidthHistogram(0.0, 8.0, 4)
>>> eqw.add(1.0, 3.0)                       # buckets [0,2) [2,4) [4,6) [6,8]
>>> round(eqw.estimate(0.5), 6), round(eqw.estimate(2.5), 6), eqw.estimate(5.0)
(0.5, 0.5, 0.0)
>>> ssi = SSIHistogram.build(lo, hi, buckets=8)
>>> [ssi.estimate(x) for x in (1.0, 3.0, 5.0, 7.0)]
[1.0, 3.0, 1.0, 0.0]
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Literal, Protocol

import numpy as np
from numba import njit

from hotjoin.matcher.partition.stabbing import _check_arrays, _check_interval, canonical_partition

__all__ = [
    "EquiWidthHistogram",
    "ExactStabbingCounter",
    "IntervalHistogram",
    "IntervalHistogramChooser",
    "SSIHistogram",
    "relative_error",
]

_INF = math.inf
MIN_CHURN = 16
"""Updates a histogram always absorbs before :meth:`needs_rebuild` can become true."""


def relative_error(estimate: np.ndarray | float, true: np.ndarray | float) -> np.ndarray | float:
    """``|estimate − true| / max(true, 1)``: the error the benchmarks and the chooser average.

    (Fig. 25 divides by the true count; the ``max(·, 1)`` keeps points stabbing nothing finite.)
    """
    return np.abs(np.asarray(estimate, np.float64) - true) / np.maximum(true, 1.0)


def _open_end(hi: float, resolution: float) -> float:
    """End of the half-open form ``[lo, hi⁺)`` of the closed ``[lo, hi]`` (module docstring)."""
    return hi + resolution if resolution > 0 else math.nextafter(hi, _INF)


def _open_ends(hi: np.ndarray, resolution: float) -> np.ndarray:
    """The open right ends ``hi + resolution`` (integral data), never below the next double: at
    magnitudes near 1e308 adding the resolution changes nothing, and a point interval would
    vanish (an empty stabbing group)."""
    with np.errstate(over="ignore"):  # the largest double's open end is inf
        nxt = np.nextafter(hi, _INF)
        return np.maximum(hi + resolution, nxt) if resolution > 0 else nxt


class IntervalHistogram(Protocol):
    """What the router needs from an interval histogram."""

    def estimate(self, x: float) -> float: ...

    def lookup(self) -> np.ndarray: ...

    def estimate_many(self, xs: np.ndarray) -> np.ndarray: ...

    def add(self, lo: float, hi: float) -> None: ...

    def remove(self, lo: float, hi: float) -> None: ...

    def add_many(self, lo: np.ndarray, hi: np.ndarray) -> None: ...

    def remove_many(self, lo: np.ndarray, hi: np.ndarray) -> None: ...

    def needs_rebuild(self) -> bool: ...

    def rebuild(self, lo: np.ndarray, hi: np.ndarray) -> None: ...


# ---- estimates in compiled code ------------------------------------------------------------------

EQW_LOOKUP, SSI_LOOKUP = 1.0, 0.0
"""The first cell of a ``lookup()`` array: which of :func:`estimate_at`'s two forms reads it."""
LOOKUP_HEADER = 6
"""A ``lookup()`` array is ``[form, lo, hi, 1/w, B, nb]`` then ``nb`` breakpoints (HIST-SSI),
then the estimates."""


def lookup_array(form: float, lo: float, hi: float, inv_w: float, buckets: int,
                 breaks: np.ndarray, est: list[float]) -> np.ndarray:
    """One float64 array holding what :func:`estimate_at` reads (one array crosses into a
    kernel for less than three: ~25 ns per array argument, ``docs/benchmarks.md``)."""
    out = np.empty(LOOKUP_HEADER + breaks.shape[0] + len(est))
    out[:LOOKUP_HEADER] = (form, lo, hi, inv_w, buckets, breaks.shape[0])
    out[LOOKUP_HEADER:LOOKUP_HEADER + breaks.shape[0]] = breaks
    out[LOOKUP_HEADER + breaks.shape[0]:] = est
    return out


@njit(cache=True)
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


@njit(cache=True)
def estimate_at(h: np.ndarray, x: float) -> float:
    """A histogram's ``estimate(x)`` from its ``lookup()`` array, in compiled code (the
    router estimates n′ inside its decision kernel, §4.1). Bit for bit the Python estimate:
    HIST-SSI reads ``est[bisect_right(breaks, x)]``; HIST-EQW its bucket by the same float
    arithmetic."""
    return estimate_of_bucket(h, bucket_at(h, x))


@njit(cache=True, inline="always")
def estimate_of_bucket(h: np.ndarray, b: int) -> float:
    """The estimate of bucket ``b`` of a ``lookup()`` array (:func:`bucket_at`)."""
    return h[LOOKUP_HEADER + int(h[5]) + b]


def bucket_function(h: np.ndarray) -> Callable[[float], int]:
    """:func:`bucket_at` for one ``lookup()`` array as a Python callable (no kernel call: a
    ``bisect_right`` over the breakpoints, or the equi-width arithmetic, ~0.1–0.2 µs).

    >>> h = lookup_array(SSI_LOOKUP, 0.0, 0.0, 0.0, 0, np.array([1.0, 5.0]), [0.0, 3.0, 1.0])
    >>> f = bucket_function(h)
    >>> [f(x) for x in (0.5, 1.0, 4.9, 5.0, 9.0)] == [bucket_at(h, x) for x in (0.5, 1.0, 4.9, 5.0, 9.0)]
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


# ---- exact reference ---------------------------------------------------------------------------


@njit(cache=True)
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


# ---- fractional coverage of a row of regions (shared by both histograms) -----------------------


def _cover_one(edges: list[float], vals: list[float], est: list[float], lo: float,
               hi_open: float, sign: float) -> None:
    """Add ``sign ×`` the covered fraction of ``[lo, hi_open)`` to every region it meets.

    Region ``r`` is ``[edges[r], edges[r+1])``; ``edges`` are finite (outside regions and
    infinite pieces already replaced by their virtual-width stand-ins). O(regions touched).
    """
    a = lo if lo > edges[0] else edges[0]
    b = hi_open if hi_open < edges[-1] else edges[-1]
    if not a < b:
        return
    r0 = bisect_right(edges, a) - 1
    r1 = bisect_left(edges, b) - 1
    for r in range(r0, r1 + 1):
        e0, e1 = edges[r], edges[r + 1]
        if e1 <= e0:
            continue
        if a <= e0 and b >= e1:
            v = vals[r] + sign
        else:
            v = vals[r] + sign * ((b if b < e1 else e1) - (a if a > e0 else e0)) / (e1 - e0)
        vals[r] = v
        est[r] = v if v > 0.0 else 0.0


def _cover_many(edges: np.ndarray, lo: np.ndarray, hi_open: np.ndarray) -> np.ndarray:
    """Vectorised :func:`_cover_one`: the summed coverage of every region (float64[R])."""
    r = edges.shape[0] - 1
    a = np.maximum(lo, edges[0])
    b = np.minimum(hi_open, edges[-1])
    ok = a < b
    a, b = a[ok], b[ok]
    r0 = np.searchsorted(edges, a, side="right") - 1
    r1 = np.searchsorted(edges, b, side="left") - 1
    width = np.diff(edges)
    safe = np.where(width > 0, width, 1.0)     # x / x == 1 exactly; x * (1 / x) need not be
    pos = width > 0
    same = r0 == r1
    q = r0[same]
    acc = np.zeros(r)                           # (bincount of nothing is int64)
    acc += np.bincount(q, weights=(b[same] - a[same]) / safe[q] * pos[q], minlength=r)
    d = ~same
    s0, s1 = r0[d], r1[d]
    acc += np.bincount(s0, weights=(edges[s0 + 1] - a[d]) / safe[s0] * pos[s0], minlength=r)
    acc += np.bincount(s1, weights=(b[d] - edges[s1]) / safe[s1] * pos[s1], minlength=r)
    full = np.bincount(s0 + 1, minlength=r + 1)[:r] - np.bincount(s1, minlength=r + 1)[:r]
    acc += np.cumsum(full) * (width > 0)
    return acc


class _Churn:
    """Update counting and the rebuild rule shared by both histograms (module docstring)."""

    rebuild_fraction: float
    _size: int
    _churn: int
    _size_at_build: int

    def _init_churn(self, rebuild_fraction: float) -> None:
        if not rebuild_fraction > 0:
            raise ValueError(f"rebuild_fraction must be > 0, got {rebuild_fraction}")
        self.rebuild_fraction = float(rebuild_fraction)
        self._size = 0
        self._churn = 0
        self._size_at_build = 0
        self._limit = float(MIN_CHURN)

    def _mark_built(self, n: int) -> None:
        self._size = self._size_at_build = n
        self._churn = 0
        self._limit = max(float(MIN_CHURN), self.rebuild_fraction * n) if n else 0.0

    def needs_rebuild(self) -> bool:
        """True once the updates since the last build exceed the rebuild threshold. O(1)."""
        return self._churn > self._limit

    @property
    def size(self) -> int:
        """Intervals currently represented (adds minus removes since the last build included)."""
        return self._size

    @property
    def churn(self) -> int:
        """Updates (adds plus removes) since the last build."""
        return self._churn


# ---- HIST-EQW ---------------------------------------------------------------------------------


class EquiWidthHistogram(_Churn):
    """HIST-EQW (§4.1): ``buckets`` equal-width buckets over ``[lo, hi]`` plus two outside ones.

    Bucket ``j`` is ``[lo + j·w, lo + (j+1)·w)``, the last one closed at ``hi``; ``x < lo`` and
    ``x > hi`` read the outside buckets (virtual width ``w``, module docstring).  Each bucket
    holds the covered fraction summed over the intervals, i.e. the mean of ``f_I`` over the
    bucket.  ``estimate`` O(1) (0.12–0.14 µs measured), ``add``/``remove`` O(buckets
    covered), about 2 µs at 100 buckets, ``add_many`` O(n log B) vectorised.

    >>> h = EquiWidthHistogram(0.0, 10.0, 5)    # w = 2
    >>> h.add(1.0, 5.0)
    >>> [round(h.estimate(x), 9) for x in (-1.0, 1.0, 3.0, 4.5, 7.0, 11.0)]
    [0.0, 0.5, 1.0, 0.5, 0.0, 0.0]
    >>> h.add(-np.inf, np.inf); h.estimate(-1e9), round(h.estimate(1.0), 9)
    (1.0, 1.5)
    """

    def __init__(self, lo: float, hi: float, buckets: int, *, resolution: float = 0.0,
                 rebuild_fraction: float = 0.25) -> None:
        lo, hi, buckets = float(lo), float(hi), int(buckets)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ValueError(f"need a finite domain lo < hi, got [{lo}, {hi}]")
        if buckets < 1:
            raise ValueError(f"buckets must be >= 1, got {buckets}")
        if not resolution >= 0:
            raise ValueError(f"resolution must be >= 0, got {resolution}")
        self._init_churn(rebuild_fraction)
        self.lo, self.hi, self.buckets, self.resolution = lo, hi, buckets, float(resolution)
        self.width = (hi - lo) / buckets
        self._lo, self._hi, self._b = lo, hi, buckets
        self._inv_w = buckets / (hi - lo)
        # edges exactly where estimate()'s arithmetic switches bucket
        inner = [lo, *(_switch_point(lo, self._inv_w, self.width, j) for j in range(1, buckets))]
        inner.append(math.nextafter(hi, _INF))
        self._edges: list[float] = [lo - self.width, *inner, inner[-1] + self.width]
        self._edges_arr = np.array(self._edges)
        self._vals: list[float] = [0.0] * (buckets + 2)
        self._est: list[float] = [0.0] * (buckets + 2)
        self._est_arr: np.ndarray | None = None

    @classmethod
    def fit(cls, lo: np.ndarray, hi: np.ndarray, buckets: int, *, resolution: float = 0.0,
            rebuild_fraction: float = 0.25) -> EquiWidthHistogram:
        """A histogram over the range of the finite endpoints of ``[lo, hi]``, holding them.

        The domain is ``[min, max]`` of the finite endpoints (widened by ``resolution`` on the
        right, or to width 1 when it is a single point; ``[0, 1]`` when there is none).
        """
        lo, hi = _check_arrays(lo, hi)
        d0, d1 = _data_domain(lo, hi, resolution)
        h = cls(d0, d1, buckets, resolution=resolution, rebuild_fraction=rebuild_fraction)
        h.rebuild(lo, hi)
        return h

    def estimate(self, x: float) -> float:
        """Estimated number of intervals containing ``x``. O(1)."""
        if x < self._lo:
            return self._est[0]
        if x > self._hi:
            return self._est[-1]
        j = int((x - self._lo) * self._inv_w)
        return self._est[j + 1 if j < self._b else self._b]

    def lookup(self) -> np.ndarray:
        """The array :func:`estimate_at` reads (a copy: valid until the next update)."""
        return lookup_array(EQW_LOOKUP, self._lo, self._hi, self._inv_w, self._b,
                            np.zeros(0), self._est)

    def estimate_many(self, xs: np.ndarray) -> np.ndarray:
        """:meth:`estimate` for every element of ``xs`` (float64 array). O(m)."""
        xs = np.asarray(xs, np.float64)
        if self._est_arr is None:
            self._est_arr = np.array(self._est)
        j = np.floor((np.clip(xs, self._lo, self._hi) - self._lo) * self._inv_w)
        j = np.minimum(j.astype(np.int64), self._b - 1) + 1
        j = np.where(xs < self._lo, 0, np.where(xs > self._hi, self._b + 1, j))
        return self._est_arr[j]

    def _update(self, lo: float, hi: float, sign: float) -> None:
        lo, hi = _check_interval(lo, hi)
        _cover_one(self._edges, self._vals, self._est, lo, _open_end(hi, self.resolution), sign)
        self._est_arr = None
        self._size += int(sign)
        self._churn += 1

    def add(self, lo: float, hi: float) -> None:
        """Add ``[lo, hi]``: +1 to buckets it covers, the covered fraction to partial ones."""
        self._update(lo, hi, 1.0)

    def remove(self, lo: float, hi: float) -> None:
        """Remove ``[lo, hi]`` (the exact inverse of :meth:`add`)."""
        self._update(lo, hi, -1.0)

    def _update_many(self, lo: np.ndarray, hi: np.ndarray, sign: float) -> None:
        lo, hi = _check_arrays(lo, hi)
        acc = _cover_many(self._edges_arr, lo, _open_ends(hi, self.resolution))
        vals = np.array(self._vals) + sign * acc
        self._vals = vals.tolist()
        self._est = np.maximum(vals, 0.0).tolist()
        self._est_arr = None
        self._size += int(sign) * lo.shape[0]
        self._churn += lo.shape[0]

    def add_many(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """:meth:`add` for every ``[lo[i], hi[i]]``, vectorised."""
        self._update_many(lo, hi, 1.0)

    def remove_many(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """:meth:`remove` for every ``[lo[i], hi[i]]``, vectorised."""
        self._update_many(lo, hi, -1.0)

    def rebuild(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """Reset to exactly the intervals ``[lo[i], hi[i]]`` (same domain). O(n log B)."""
        self._vals = [0.0] * (self._b + 2)
        self._update_many(lo, hi, 1.0)
        self._mark_built(int(np.asarray(lo).shape[0]))

    def values(self) -> np.ndarray:
        """Bucket estimates ``[below, bucket 0, …, bucket B−1, above]`` (clamped at 0)."""
        return np.array(self._est)


def _switch_point(lo: float, inv_w: float, w: float, j: int) -> float:
    """The least float ``x`` with ``int((x − lo) · inv_w) >= j`` (bisection on floats, at
    most ~1100 steps even across 0), so that bucket edges agree with :meth:`estimate`."""
    a, b = lo + (j - 1) * w, lo + (j + 1) * w
    while int((a - lo) * inv_w) >= j:
        a -= w
    while int((b - lo) * inv_w) < j:
        b += w
    while True:
        m = a + (b - a) / 2
        if m <= a or m >= b:
            return b
        if int((m - lo) * inv_w) >= j:
            b = m
        else:
            a = m


def _data_domain(lo: np.ndarray, hi: np.ndarray, resolution: float = 0.0,
                 extra: np.ndarray | None = None) -> tuple[float, float]:
    """``[min, max]`` of the finite endpoints (and of ``extra``), never empty."""
    parts = [lo[np.isfinite(lo)], hi[np.isfinite(hi)] + resolution]
    if extra is not None:
        parts.append(extra[np.isfinite(extra)])
    allv = np.concatenate(parts)
    allv = allv[np.isfinite(allv)]
    if allv.shape[0] == 0:
        return 0.0, 1.0
    # clamped so that the span and a bucket width stay finite (estimates beyond the clamp fall
    # in the outer buckets; the histogram only feeds cost estimates, never results)
    d0 = min(max(float(allv.min()), -_DOMAIN_MAX), _DOMAIN_MAX)
    d1 = min(max(float(allv.max()), -_DOMAIN_MAX), _DOMAIN_MAX)
    if not d1 > d0:
        half = max(0.5, abs(d0) * 2.0**-20)
        d0, d1 = d0 - half, d0 + half
    return d0, d1


_DOMAIN_MAX = 4e307


# ---- HIST-SSI: the numba pieces ----------------------------------------------------------------


@njit(cache=True)
def _pava(y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weighted increasing isotonic regression (pool adjacent violators), O(m).

    ``y, w``: float64[m], ``w > 0``.  Returns the blocks ``(value, weight, start)`` with
    strictly increasing values (equal neighbours pooled); ``start`` is int64[nb+1], block ``b``
    covering positions ``start[b]:start[b+1]``.  A monotone ``y`` gives one block per run.
    """
    m = y.shape[0]
    bv = np.empty(m, np.float64)
    bw = np.empty(m, np.float64)
    bs = np.empty(m + 1, np.int64)
    nb = 0
    for i in range(m):
        bv[nb] = y[i]
        bw[nb] = w[i]
        bs[nb] = i
        nb += 1
        while nb > 1 and bv[nb - 2] >= bv[nb - 1]:
            tw = bw[nb - 2] + bw[nb - 1]
            bv[nb - 2] = (bv[nb - 2] * bw[nb - 2] + bv[nb - 1] * bw[nb - 1]) / tw
            bw[nb - 2] = tw
            nb -= 1
    bs[nb] = m
    return bv[:nb].copy(), bw[:nb].copy(), bs[:nb + 1].copy()


@njit(cache=True)
def _seg_cost(pw: np.ndarray, pwy: np.ndarray, pwyy: np.ndarray, a: int, b: int) -> float:
    """Weighted k-means cost of one cluster ``a:b`` from prefix sums (clamped at 0)."""
    w = pw[b] - pw[a]
    if w <= 0.0:
        return 0.0
    s = pwy[b] - pwy[a]
    c = pwyy[b] - pwyy[a] - s * s / w
    return c if c > 0.0 else 0.0


@njit(cache=True)
def _best_split(pw: np.ndarray, pwy: np.ndarray, pwyy: np.ndarray, a: int,
                b: int) -> tuple[int, float]:
    """The split ``s`` of cluster ``a:b`` (``b − a >= 2``) into ``a:s, s:b`` of least cost,
    and the cost it saves. O(b − a)."""
    best = np.inf
    arg = a + 1
    for s in range(a + 1, b):
        c = _seg_cost(pw, pwy, pwyy, a, s) + _seg_cost(pw, pwy, pwyy, s, b)
        if c < best:
            best = c
            arg = s
    return arg, _seg_cost(pw, pwy, pwyy, a, b) - best


@njit(cache=True)
def _lloyd(v: np.ndarray, pw: np.ndarray, pwy: np.ndarray, pwyy: np.ndarray, z0: np.ndarray,
           max_iter: int) -> tuple[np.ndarray, float]:
    """Lloyd's iterations of weighted 1-D k-means on strictly increasing ``v`` (App. B).

    Clusters are contiguous, given by boundaries ``z`` (int64[k+1], ``z[0] = 0``,
    ``z[k] = len(v)``).  Each round sets the centres to the clusters' weighted means and moves
    every boundary to the midpoint between neighbouring centres (nearest-centre assignment),
    O(k log m).  Returns the best boundaries seen and their cost.
    """
    k = z0.shape[0] - 1
    m = v.shape[0]
    z = z0.copy()
    c = np.empty(k, np.float64)
    best_z = z0.copy()
    best = 0.0
    for j in range(k):
        best += _seg_cost(pw, pwy, pwyy, z[j], z[j + 1])
    for _ in range(max_iter):
        for j in range(k):
            w = pw[z[j + 1]] - pw[z[j]]
            c[j] = (pwy[z[j + 1]] - pwy[z[j]]) / w if w > 0.0 else v[z[j]]
        nz = z.copy()
        for j in range(1, k):
            t = 0.5 * (c[j - 1] + c[j])
            lo_i, hi_i = 0, m
            while lo_i < hi_i:  # first index with v > t
                mid = (lo_i + hi_i) // 2
                if v[mid] <= t:
                    lo_i = mid + 1
                else:
                    hi_i = mid
            nz[j] = lo_i
        for j in range(1, k):  # keep every cluster non-empty
            if nz[j] < nz[j - 1] + 1:
                nz[j] = nz[j - 1] + 1
        for j in range(k - 1, 0, -1):
            if nz[j] > nz[j + 1] - 1:
                nz[j] = nz[j + 1] - 1
        same = True
        for j in range(k + 1):
            if nz[j] != z[j]:
                same = False
        if same:
            break
        z = nz
        cost = 0.0
        for j in range(k):
            cost += _seg_cost(pw, pwy, pwyy, z[j], z[j + 1])
        if cost < best:
            best = cost
            best_z = z.copy()
    return best_z, best


# ---- HIST-SSI: building blocks in Python --------------------------------------------------------


@dataclass
class _Side:
    """One monotone side of a group, as isotonic blocks in increasing order of value.

    ``start`` maps blocks to pieces counted in that order; ``left`` sides run with ``x``, right
    sides against it.  ``cuts`` are the cluster boundaries (block indices) chosen so far.
    """

    v: np.ndarray
    bw: np.ndarray
    pw: np.ndarray
    pwy: np.ndarray
    pwyy: np.ndarray
    start: np.ndarray
    left: bool
    offset: int
    pieces: int
    cuts: list[int] = field(default_factory=list)

    @property
    def blocks(self) -> int:
        return int(self.v.shape[0])

    def cost(self, a: int, b: int) -> float:
        return float(_seg_cost(self.pw, self.pwy, self.pwyy, a, b))

    def mean(self, a: int, b: int) -> float:
        """Weighted mean of blocks ``a:b`` (a single block: its value, exactly)."""
        if b - a == 1:
            return float(self.v[a])
        w = self.pw[b] - self.pw[a]
        return float((self.pwy[b] - self.pwy[a]) / w) if w > 0 else float(self.v[a:b].mean())

    def x_range(self, a: int, b: int) -> tuple[int, int]:
        """Pieces (group order) covered by the blocks ``a:b``."""
        p0, p1 = int(self.start[a]), int(self.start[b])
        if self.left:
            return self.offset + p0, self.offset + p1
        return self.offset + self.pieces - p1, self.offset + self.pieces - p0


def _side(y: np.ndarray, w: np.ndarray, left: bool, offset: int) -> _Side | None:
    if y.shape[0] == 0:
        return None
    if not left:
        y, w = y[::-1], w[::-1]
    bv, bw, bs = _pava(np.ascontiguousarray(y), np.ascontiguousarray(w))
    z = np.zeros(1)
    pw, pwy, pwyy = (np.concatenate([z, np.cumsum(a)]) for a in (bw, bw * bv, bw * bv * bv))
    return _Side(bv, bw, pw, pwy, pwyy, bs, left, offset, int(y.shape[0]))


@dataclass
class _Group:
    """One (possibly merged) stabbing group: its exact step function and its two sides."""

    edges: np.ndarray          # float64[U]; piece i is [edges[i], edges[i+1]); 0 after the last
    size: int                  # member intervals
    sides: list[_Side]         # left then right; one when a side is empty
    spanning: bool = True      # one bucket over the whole group (budget 1)

    @property
    def capacity(self) -> int:
        return sum(s.blocks for s in self.sides)

    def span_cost(self) -> float:
        w = sum(float(s.pw[-1]) for s in self.sides)
        wy = sum(float(s.pwy[-1]) for s in self.sides)
        wyy = sum(float(s.pwyy[-1]) for s in self.sides)
        return max(wyy - wy * wy / w, 0.0) if w > 0 else 0.0

    def span_mean(self) -> float:
        v = np.concatenate([s.v for s in self.sides])
        w = np.concatenate([s.bw for s in self.sides])
        if v.shape[0] == 1:
            return float(v[0])
        return float(w @ v) / float(w.sum()) if w.sum() > 0 else float(v.mean())


def _merge_smallest(sizes: np.ndarray, target: int) -> np.ndarray:
    """Merge neighbouring groups (in stabbing-point order), always the currently smallest into
    its smaller neighbour, until ``target`` remain. Returns each group's merged index (0..target-1,
    increasing). O(τ log τ)."""
    tau = sizes.shape[0]
    if target >= tau:
        return np.arange(tau, dtype=np.int64)
    size = sizes.astype(np.int64).tolist()
    prev = list(range(-1, tau - 1))
    nxt = list(range(1, tau + 1))
    nxt[-1] = -1
    alive = [True] * tau
    heap = [(s, i) for i, s in enumerate(size)]
    heapq.heapify(heap)
    left = tau
    while left > target:
        s, i = heapq.heappop(heap)
        if not alive[i] or s != size[i]:
            continue
        p, n = prev[i], nxt[i]
        j = p if n == -1 or (p != -1 and size[p] <= size[n]) else n
        a, b = (j, i) if j == p else (i, j)   # a absorbs its right neighbour b
        size[a] += size[b]
        alive[b] = False
        nxt[a] = nxt[b]
        if nxt[b] != -1:
            prev[nxt[b]] = a
        heapq.heappush(heap, (size[a], a))
        left -= 1
    head = np.flatnonzero(np.array(alive))          # first original group of each merged one
    return (np.searchsorted(head, np.arange(tau), side="right") - 1).astype(np.int64)


def _allocate_cardinality(groups: list[_Group], budget: int) -> list[int]:
    """Per-group bucket counts proportional to cardinality (App. B's heuristic): each group at
    least 1, none above what it can use (its isotonic blocks); largest remainders first."""
    n = len(groups)
    alloc = [1] * n
    cap = [g.capacity for g in groups]
    rest = budget - n
    while rest > 0:
        open_ = [i for i in range(n) if alloc[i] < cap[i]]
        if not open_:
            break
        tot = float(sum(groups[i].size for i in open_))
        share = {i: rest * groups[i].size / tot for i in open_}
        give = {i: min(int(share[i]), cap[i] - alloc[i]) for i in open_}
        if sum(give.values()) == 0:  # hand out single buckets by largest remainder
            for i in sorted(open_, key=lambda i: (share[i], groups[i].size), reverse=True):
                if rest == 0:
                    break
                alloc[i] += 1
                rest -= 1
            continue
        for i, g in give.items():
            alloc[i] += g
            rest -= g
    return alloc


def _greedy_split(groups: list[_Group], budget: int) -> None:
    """Spend ``budget`` buckets on ``groups`` (each starts with one) by repeatedly making the
    split that saves the most cost: first a group's split into its left and right side, then
    splits of side clusters.  Sets ``spanning`` and each side's ``cuts``."""
    heap: _Heap = []
    seq = 0
    for gi, g in enumerate(groups):
        for s in g.sides:
            s.cuts = [0, s.blocks]
        if len(g.sides) == 2:
            g.spanning = True
            gain = g.span_cost() - g.sides[0].cost(0, g.sides[0].blocks) \
                - g.sides[1].cost(0, g.sides[1].blocks)
            heap.append((-gain, seq, gi, -1, 0, 0, 0))
            seq += 1
        else:
            g.spanning = False
            _push_split(heap, g.sides[0], gi, 0, 0, g.sides[0].blocks, seq)
            seq += 1
    heapq.heapify(heap)
    used = len(groups)
    while used < budget and heap:
        _, _, gi, si, a, b, s = heapq.heappop(heap)
        g = groups[gi]
        if si == -1:
            g.spanning = False
            for k, side in enumerate(g.sides):
                seq += 1
                _push_split(heap, side, gi, k, 0, side.blocks, seq)
        else:
            side = g.sides[si]
            side.cuts.append(s)
            for lo_, hi_ in ((a, s), (s, b)):
                seq += 1
                _push_split(heap, side, gi, si, lo_, hi_, seq)
        used += 1
    for g in groups:
        for s in g.sides:
            s.cuts.sort()


_Heap = list[tuple[float, int, int, int, int, int, int]]
"""Split candidates: (−gain, tie-break, group, side (−1: split the group at its mode), a, b, s)."""


def _push_split(heap: _Heap, side: _Side, gi: int, si: int, a: int, b: int, seq: int) -> None:
    if b - a >= 2:
        s, gain = _best_split(side.pw, side.pwy, side.pwyy, a, b)
        heapq.heappush(heap, (-gain, seq, gi, si, a, b, int(s)))


def _refine(side: _Side, max_iter: int) -> None:
    """Lloyd's iterations from the greedy cuts; kept when they lower the cost."""
    k = len(side.cuts) - 1
    if k < 2 or side.blocks <= k:
        return
    z0 = np.array(side.cuts, np.int64)
    before = sum(side.cost(side.cuts[j], side.cuts[j + 1]) for j in range(k))
    z, cost = _lloyd(side.v, side.pw, side.pwy, side.pwyy, z0, max_iter)
    if cost < before:
        side.cuts = [int(t) for t in z]


def _steps_of(groups: list[_Group]) -> tuple[np.ndarray, np.ndarray]:
    """Sum the groups' bucket functions: ``(breakpoints, values)`` with ``values[i]`` the value
    on ``[bp[i], bp[i+1])`` (exact per-piece sums, no running-sum drift)."""
    starts, ends, vals = [], [], []
    for g in groups:
        e = g.edges
        if g.spanning:
            starts.append(e[0])
            ends.append(e[-1])
            vals.append(g.span_mean())
            continue
        for s in g.sides:
            for j in range(len(s.cuts) - 1):
                p0, p1 = s.x_range(s.cuts[j], s.cuts[j + 1])
                starts.append(e[p0])
                ends.append(e[p1])
                vals.append(s.mean(s.cuts[j], s.cuts[j + 1]))
    if not starts:
        return np.empty(0), np.empty(0)
    st, en, va = np.array(starts), np.array(ends), np.array(vals)
    bp = np.unique(np.concatenate([st, en]))
    left = bp[:-1]
    cover = (st[None, :] <= left[:, None]) & (en[None, :] > left[:, None])
    return bp, (cover * va[None, :]).sum(axis=1)


# ---- HIST-SSI ----------------------------------------------------------------------------------


class SSIHistogram(_Churn):
    """HIST-SSI (App. B): a step function with at most ``buckets`` constant pieces.

    **Build** (:meth:`rebuild`, O(n log n)):

    1. the canonical stabbing partition of Lemma 1 (:func:`matcher.stabbing.canonical_partition`),
       ``τ`` groups in stabbing-point order;
    2. per group ``I_i`` with stabbing point ``p_i``, the exact ``f_{I_i}``: increasing left of
       ``p_i`` (``#lo <= x``), decreasing right of it; each side's pieces ``y_l`` get the weight
       ``w_l = ∫_piece φ / max(F_l, 1)²`` (φ uniform over ``domain``, or the empirical
       distribution of ``query_sample`` mixed with 25 % uniform).  ``weights="group"`` takes
       ``F_l = y_l``, the group's own count, as App. B writes it; the default ``"total"`` takes
       ``F_l = f_I`` on that piece, the count actually being estimated, so that each group's
       error is weighed relative to the total (the two agree for a single group; with more,
       ``"group"`` overweights each group's own tails: on the Fig. 25 workload, two merged
       groups at 20 buckets give 19.6 % mean relative error with ``"group"``, 13.5 % with
       ``"total"``);
    3. buckets go to groups in proportion to cardinality (each group at least one; a group with
       one bucket gets a single bucket spanning both sides at its weighted mean, with two or
       more at least one per side); within a group the buckets go to the side where a split
       saves the most weighted error (``allocation="greedy"`` instead spends every bucket,
       across all groups, on the split that saves the most);
    4. each side is compressed by weighted 1-D k-means (Lemma 5): greedy splitting for the
       initial clusters, then Lloyd's iterations (kept when they lower the cost);
    5. the groups' functions are summed into one step function (breakpoints + values).

    **Bucket count.**  ``buckets`` bounds the number of constant pieces of the final step
    function (between its first and last breakpoint; outside them the value is 0), the same
    currency as HIST-OPT's buckets.  A group with ``k_i`` buckets contributes at most ``k_i + 1``
    breakpoints, so ``G`` groups get ``Σ k_i = buckets − G + 1`` buckets between them.  Compared
    with HIST-EQW's ``B`` buckets this stores ``buckets + 1`` more floats (the breakpoints).

    **More groups than buckets.**  Each group needs one bucket, so at most ``(buckets + 1) // 2``
    groups fit.  When ``τ`` is larger the smallest groups are merged into their smaller
    neighbour until they fit (:func:`_merge_smallest`); a merged group is no longer stabbed by one
    point, so its function is split at its maximum and each side is made monotone by isotonic
    regression (pool adjacent violators, the best monotone fit under the same weights) before
    k-means — for an unmerged group both steps change nothing.  ``groups="auto"`` (default)
    tries the canonical partition when it fits and merged partitions with 1, 2, 4, 8, …
    groups, and keeps the one whose summed function has the least ``E²`` (App. B's error, over
    all pieces of the exact ``f_I``); ``"canonical"`` takes ``τ`` groups, merged only as far as
    needed; an int forces that many.

    **Updates** between builds: :meth:`add` / :meth:`remove` apply an interval to the pieces as in
    HIST-EQW (+1 on pieces it covers, the covered fraction on partial ones); see the module
    docstring for the rebuild rule.  ``estimate`` is one ``bisect`` on a list, O(log buckets),
    0.11–0.15 µs measured (``docs/benchmarks-histogram.md``).

    >>> h = SSIHistogram.build(np.array([0.0, 1.0, 2.0]), np.array([3.0, 3.0, 3.0]), buckets=4)
    >>> [h.estimate(x) for x in (-1.0, 0.0, 1.5, 2.0, 3.0, 3.5)], h.tau, h.pieces
    ([0.0, 1.0, 2.0, 3.0, 3.0, 0.0], 1, 3)
    """

    def __init__(self, buckets: int = 100, *, domain: tuple[float, float] | None = None,
                 query_sample: np.ndarray | None = None, resolution: float = 0.0,
                 groups: int | Literal["auto", "canonical"] = "auto",
                 allocation: Literal["cardinality", "greedy"] = "cardinality",
                 weights: Literal["total", "group"] = "total",
                 lloyd_iterations: int = 50, rebuild_fraction: float = 0.25) -> None:
        if int(buckets) < 1:
            raise ValueError(f"buckets must be >= 1, got {buckets}")
        if not resolution >= 0:
            raise ValueError(f"resolution must be >= 0, got {resolution}")
        if allocation not in ("cardinality", "greedy"):
            raise ValueError(f"allocation must be 'cardinality' or 'greedy', got {allocation!r}")
        if weights not in ("total", "group"):
            raise ValueError(f"weights must be 'total' or 'group', got {weights!r}")
        if not (groups in ("auto", "canonical") or (isinstance(groups, int) and groups >= 1)):
            raise ValueError(f"groups must be 'auto', 'canonical' or an int >= 1, got {groups!r}")
        if domain is not None and not (math.isfinite(domain[0]) and math.isfinite(domain[1])
                                       and domain[0] < domain[1]):
            raise ValueError(f"domain must be finite with lo < hi, got {domain}")
        self._init_churn(rebuild_fraction)
        self.buckets = int(buckets)
        self.domain = domain
        self.query_sample = None if query_sample is None else \
            np.sort(np.asarray(query_sample, np.float64))
        self.resolution = float(resolution)
        self.group_policy = groups
        self.allocation = allocation
        self.weights = weights
        self.lloyd_iterations = int(lloyd_iterations)
        self.tau = 0
        self.groups = 0
        self.build_error = 0.0
        self.candidates: list[tuple[int, float]] = []
        self._set_steps(np.empty(0), np.empty(0))

    @classmethod
    def build(cls, lo: np.ndarray, hi: np.ndarray, buckets: int = 100,
              **options: object) -> SSIHistogram:
        """A histogram of ``[lo[i], hi[i]]`` (``options``: the constructor's keywords)."""
        h = cls(buckets, **options)  # type: ignore[arg-type]
        h.rebuild(lo, hi)
        return h

    # -- reading --------------------------------------------------------------------------------

    def estimate(self, x: float) -> float:
        """Estimated number of intervals containing ``x``. O(log pieces)."""
        return self._est[bisect_right(self._bp, x)]

    def lookup(self) -> np.ndarray:
        """The array :func:`estimate_at` reads (a copy: valid until the next update)."""
        return lookup_array(SSI_LOOKUP, 0.0, 0.0, 0.0, 0, self._bp_arr, self._est)

    def estimate_many(self, xs: np.ndarray) -> np.ndarray:
        """:meth:`estimate` for every element of ``xs`` (float64 array)."""
        if self._est_arr is None:
            self._est_arr = np.array(self._est)
        return self._est_arr[np.searchsorted(self._bp_arr, np.asarray(xs, np.float64), "right")]

    @property
    def pieces(self) -> int:
        """Constant pieces of the step function (between its first and last breakpoint)."""
        return max(len(self._bp) - 1, 0)

    def breakpoints(self) -> np.ndarray:
        return self._bp_arr.copy()

    def values(self) -> np.ndarray:
        """``[below, piece 0, …, piece P−1, above]`` (clamped at 0)."""
        return np.array(self._est)

    # -- updates --------------------------------------------------------------------------------

    def _update(self, lo: float, hi: float, sign: float) -> None:
        lo, hi = _check_interval(lo, hi)
        if self._edges:
            _cover_one(self._edges, self._vals, self._est, lo, _open_end(hi, self.resolution),
                       sign)
            self._est_arr = None
        self._size += int(sign)
        self._churn += 1
        if not self._bp:
            self._limit = 0.0   # nothing to update yet: ask for a build

    def add(self, lo: float, hi: float) -> None:
        """Add ``[lo, hi]`` to the pieces (+1 where covered, fractions on partial pieces)."""
        self._update(lo, hi, 1.0)

    def remove(self, lo: float, hi: float) -> None:
        """Remove ``[lo, hi]`` (exact inverse of :meth:`add`)."""
        self._update(lo, hi, -1.0)

    def _update_many(self, lo: np.ndarray, hi: np.ndarray, sign: float) -> None:
        lo, hi = _check_arrays(lo, hi)
        if self._edges:
            acc = _cover_many(self._edges_arr, lo, _open_ends(hi, self.resolution))
            vals = np.array(self._vals) + sign * acc
            self._vals = vals.tolist()
            self._est = np.maximum(vals, 0.0).tolist()
            self._est_arr = None
        self._size += int(sign) * lo.shape[0]
        self._churn += lo.shape[0]
        if not self._bp and lo.shape[0]:
            self._limit = 0.0

    def add_many(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """:meth:`add` for every ``[lo[i], hi[i]]``, vectorised."""
        self._update_many(lo, hi, 1.0)

    def remove_many(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """:meth:`remove` for every ``[lo[i], hi[i]]``, vectorised."""
        self._update_many(lo, hi, -1.0)

    # -- building -------------------------------------------------------------------------------

    def rebuild(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """Build from exactly the intervals ``[lo[i], hi[i]]`` (class docstring). O(n log n)."""
        lo, hi = _check_arrays(lo, hi)
        n = lo.shape[0]
        self.candidates = []
        if n == 0:
            self.tau = self.groups = 0
            self.build_error = 0.0
            self._set_steps(np.empty(0), np.empty(0))
            self._mark_built(0)
            return
        hio = _open_ends(hi, self.resolution)
        if self.domain is not None:
            d0, d1 = self.domain
        else:
            d0, d1 = _data_domain(lo, hi, self.resolution, self.query_sample)
        phi = self._phi_fn(d0, d1)
        points, group_of = canonical_partition(lo, hi)
        self.tau = tau = int(points.shape[0])
        sizes = np.bincount(group_of, minlength=tau)
        ev = np.concatenate([lo, hio])
        delta = np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64)])
        order = np.argsort(ev, kind="stable")
        ev, delta, gid = ev[order], delta[order], np.concatenate([group_of, group_of])[order]
        all_edges, all_vals = _compress(ev, delta)
        all_w = phi(all_edges) / np.maximum(all_vals[:-1], 1.0) ** 2

        gmax = min(tau, (self.buckets + 1) // 2)
        if self.group_policy == "canonical":
            cands = [gmax]
        elif isinstance(self.group_policy, int):
            cands = [min(self.group_policy, gmax)]
        else:
            cands = sorted({1 << i for i in range(gmax.bit_length()) if 1 << i <= gmax}
                           | {gmax})
        best: tuple[float, int, np.ndarray, np.ndarray] | None = None
        for g in cands:
            label = _merge_smallest(sizes, g)
            bp, vals = self._fit(ev, delta, label[gid], g, sizes, label, phi,
                                 (all_edges, all_vals))
            h = np.zeros(all_vals.shape[0] - 1)
            if bp.shape[0]:
                idx = np.searchsorted(bp, all_edges[:-1], side="right") - 1
                inside = (idx >= 0) & (idx < vals.shape[0])
                h[inside] = vals[idx[inside]]
            err = float(np.sum(all_w * (h - all_vals[:-1]) ** 2))
            self.candidates.append((g, math.sqrt(err)))
            if best is None or err < best[0]:
                best = (err, g, bp, vals)
        assert best is not None
        err, self.groups, bp, vals = best
        self.build_error = math.sqrt(err)
        self._set_steps(bp, vals)
        self._mark_built(n)

    def _phi_fn(self, d0: float, d1: float) -> Callable[[np.ndarray], np.ndarray]:
        """``φ`` measure of the pieces between consecutive ``edges`` (class docstring)."""
        sample = self.query_sample
        span = d1 - d0

        def phi(edges: np.ndarray) -> np.ndarray:
            uni = np.diff(np.clip(edges, d0, d1)) / span
            if sample is None or sample.shape[0] == 0:
                return uni
            emp = np.diff(np.searchsorted(sample, edges, side="left")) / sample.shape[0]
            return 0.25 * uni + 0.75 * emp
        return phi

    def _fit(self, ev: np.ndarray, delta: np.ndarray, lab: np.ndarray, g: int,
             sizes: np.ndarray, label: np.ndarray,
             phi: Callable[[np.ndarray], np.ndarray],
             total: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """One candidate: the summed step function for the partition ``label`` (``g`` groups)."""
        small = lab.astype(np.int16) if g < 2**15 else lab   # 16-bit: numpy's O(n) radix sort
        order = np.argsort(small, kind="stable")     # events by group, by value within
        counts = np.bincount(lab, minlength=g)
        gsize = np.bincount(label, weights=sizes, minlength=g).astype(np.int64)
        groups: list[_Group] = []
        pos = 0
        for i in range(g):
            sl = order[pos:pos + counts[i]]
            pos += counts[i]
            edges, vals = _compress(ev[sl], delta[sl])
            y = vals[:-1].astype(np.float64)
            if self.weights == "total":   # relative to f_I, the count being estimated
                at = np.searchsorted(total[0], edges[:-1], side="right") - 1
                w = phi(edges) / np.maximum(total[1][at], 1.0) ** 2
            else:                           # App. B as written: relative to the group's own
                w = phi(edges) / np.maximum(y, 1.0) ** 2
            w = w + 1e-12 * (float(w.max()) if w.max() > 0 else 1.0)  # zero φ: never 0/0
            top = int(np.argmax(y))
            sides = [s for s in (_side(y[:top + 1], w[:top + 1], True, 0),
                                 _side(y[top + 1:], w[top + 1:], False, top + 1)) if s]
            groups.append(_Group(edges, int(gsize[i]), sides))
        budget = self.buckets - g + 1
        if self.allocation == "greedy":
            _greedy_split(groups, budget)
        else:
            for grp, k in zip(groups, _allocate_cardinality(groups, budget), strict=True):
                _greedy_split([grp], k)
        for grp in groups:
            if not grp.spanning:
                for s in grp.sides:
                    _refine(s, self.lloyd_iterations)
        return _steps_of(groups)

    def _set_steps(self, bp: np.ndarray, vals: np.ndarray) -> None:
        self._bp: list[float] = bp.tolist()
        self._bp_arr = np.asarray(bp, np.float64)
        raw = [0.0, *vals.tolist(), 0.0] if bp.shape[0] else [0.0]
        self._vals: list[float] = raw
        self._est: list[float] = [v if v > 0.0 else 0.0 for v in raw]
        self._est_arr: np.ndarray | None = None
        self._edges: list[float] = _region_edges(bp).tolist() if bp.shape[0] else []
        self._edges_arr = np.array(self._edges)


def _compress(ev: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact step function of sorted events (+1 at ``lo``, −1 at ``hi⁺``): ``(edges, values)``
    with ``values[i]`` on ``[edges[i], edges[i+1])`` and ``values[-1] == 0``."""
    last = np.ones(ev.shape[0], np.bool_)
    last[:-1] = ev[1:] != ev[:-1]
    return ev[last], np.cumsum(delta)[last]


def _region_edges(bp: np.ndarray) -> np.ndarray:
    """Finite edges of the ``P + 2`` regions (below, pieces, above) for the fractional rule: an
    infinite end becomes the finite one ∓ ``vw``, the outside regions get width ``vw``."""
    e = bp.astype(np.float64).copy()
    fin = e[np.isfinite(e)]
    # halves first: the span of edges near ±1.8e308 overflows; vw is capped so that the outer
    # edges stay finite (clipped below) for any finite data
    span = 2.0 * (float(fin[-1]) / 2 - float(fin[0]) / 2) if fin.shape[0] >= 2 else 0.0
    vw = min(span / max(fin.shape[0] - 1, 1), 1e306) if span > 0 else 1.0
    fmax = float(np.finfo(np.float64).max)
    with np.errstate(over="ignore"):  # edges next to ±1.8e308 may overflow: clipped at the end
        if fin.shape[0] == 0:
            e = np.array([-0.5, 0.5]) if e.shape[0] == 2 else np.array([0.0, 1.0])
        else:
            if e[0] == -_INF:
                e[0] = e[1] - vw
            if e[-1] == _INF:
                e[-1] = e[-2] + vw
        return np.clip(np.concatenate([[e[0] - vw], e, [e[-1] + vw]]), -fmax, fmax)


# ---- choosing between the two ------------------------------------------------------------------


class IntervalHistogramChooser:
    """Keeps a HIST-EQW and a HIST-SSI of the same intervals and answers with the better one.

    ``observe(x, true_count)`` (the router's occasional exact ``n'``) scores both on the same
    point; each keeps a running mean of its relative error (:func:`relative_error`): the plain
    mean of the first ``window`` observations, then an exponential mean with weight
    ``1 / window``.  :meth:`estimate` is *rebound* to the winner's own ``estimate`` (same cost as
    calling it directly); until both have ``min_observations`` the SSI answers.

    The chooser owns no intervals: the caller calls :meth:`rebuild` with the current ones when
    :meth:`needs_rebuild` (the SSI's churn rule, module docstring).  A rebuild refits HIST-EQW's
    domain (:meth:`EquiWidthHistogram.fit`) and rebuilds HIST-SSI with ``φ`` taken from the last
    observed query points when there are at least 64 (a reservoir of 1024).  ``resolution="auto"``
    uses 1 when every finite endpoint and every observed point is an integer, else 0.
    Starting empty, the first :meth:`add_many` builds both from its arrays.
    """

    def __init__(self, buckets: int = 100, ssi_buckets: int | None = None, *,
                 resolution: float | Literal["auto"] = "auto", window: int = 256,
                 min_observations: int = 16, rebuild_fraction: float = 0.25,
                 seed: int = 0) -> None:
        self.eqw_buckets = int(buckets)
        self.ssi_buckets = int(ssi_buckets if ssi_buckets is not None else buckets)
        self._resolution_opt = resolution
        self.window = int(window)
        self.min_observations = int(min_observations)
        self.rebuild_fraction = float(rebuild_fraction)
        self._rng = np.random.default_rng(seed)
        self._sample: list[float] = []
        self._seen = 0
        self._integral_queries = True
        self.eqw: EquiWidthHistogram | None = None
        self.ssi = SSIHistogram(self.ssi_buckets, rebuild_fraction=rebuild_fraction)
        self.errors: dict[str, float] = {"eqw": math.nan, "ssi": math.nan}
        self.observations: dict[str, int] = {"eqw": 0, "ssi": 0}
        self.choice = "ssi"
        self.rebuilds = 0
        self._rebind()

    # -- the hot path (rebound in _rebind) ------------------------------------------------------

    def estimate(self, x: float) -> float:  # pragma: no cover - replaced per instance
        """Estimated number of intervals containing ``x`` (the better histogram's)."""
        return self._current().estimate(x)

    def estimate_many(self, xs: np.ndarray) -> np.ndarray:
        return self._current().estimate_many(xs)

    def lookup(self) -> np.ndarray:
        """The better histogram's array for :func:`estimate_at`."""
        return self._current().lookup()

    def minimum(self) -> float:
        """The least estimate over every x: a lower bound of the current histogram's answers
        (the router bounds members' costs with it)."""
        vals = self._current().values()
        return float(vals.min()) if vals.size else 0.0

    def maximum(self) -> float:
        """The largest estimate over every x: an upper bound of the current histogram's
        answers (the router's choice is settled without n′ when it holds at both bounds)."""
        vals = self._current().values()
        return float(vals.max()) if vals.size else 0.0

    def _current(self) -> EquiWidthHistogram | SSIHistogram:
        if self.choice == "eqw" and self.eqw is not None:
            return self.eqw
        return self.ssi

    def _rebind(self) -> None:
        self.estimate = self._current().estimate  # type: ignore[method-assign]

    # -- updates --------------------------------------------------------------------------------

    def add(self, lo: float, hi: float) -> None:
        self.ssi.add(lo, hi)
        if self.eqw is not None:
            self.eqw.add(lo, hi)

    def remove(self, lo: float, hi: float) -> None:
        self.ssi.remove(lo, hi)
        if self.eqw is not None:
            self.eqw.remove(lo, hi)

    def add_many(self, lo: np.ndarray, hi: np.ndarray) -> None:
        if self.ssi.size == 0 and self.ssi.churn == 0 and np.asarray(lo).shape[0]:
            self.rebuild(lo, hi)
            return
        self.ssi.add_many(lo, hi)
        if self.eqw is not None:
            self.eqw.add_many(lo, hi)

    def remove_many(self, lo: np.ndarray, hi: np.ndarray) -> None:
        self.ssi.remove_many(lo, hi)
        if self.eqw is not None:
            self.eqw.remove_many(lo, hi)

    def needs_rebuild(self) -> bool:
        """O(1): the SSI's churn rule (module docstring)."""
        return self.ssi.needs_rebuild()

    def rebuild(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """Rebuild both from the current intervals ``[lo[i], hi[i]]``. O(n log n)."""
        lo, hi = _check_arrays(lo, hi)
        res = self._resolution(lo, hi)
        sample = np.array(self._sample) if len(self._sample) >= 64 else None
        self.ssi.resolution = res
        self.ssi.query_sample = None if sample is None else np.sort(sample)
        self.ssi.rebuild(lo, hi)
        self.eqw = EquiWidthHistogram.fit(lo, hi, self.eqw_buckets, resolution=res,
                                          rebuild_fraction=self.rebuild_fraction)
        self.rebuilds += 1
        self._rebind()

    def _resolution(self, lo: np.ndarray, hi: np.ndarray) -> float:
        if self._resolution_opt != "auto":
            return float(self._resolution_opt)
        ends = np.concatenate([lo[np.isfinite(lo)], hi[np.isfinite(hi)]])
        integral = bool(np.all(ends == np.rint(ends))) and self._integral_queries
        return 1.0 if integral and ends.shape[0] else 0.0

    # -- scoring --------------------------------------------------------------------------------

    def observe(self, x: float, true_count: float) -> None:
        """Score both histograms on the exact count at ``x`` and switch to the better one."""
        x = float(x)
        self._seen += 1
        if len(self._sample) < 1024:
            self._sample.append(x)
        else:
            j = int(self._rng.integers(self._seen))
            if j < 1024:
                self._sample[j] = x
        if x != math.floor(x):
            self._integral_queries = False
        for name, h in (("eqw", self.eqw), ("ssi", self.ssi)):
            if h is None or (name == "ssi" and not h.pieces and h.size):
                continue
            e = float(relative_error(h.estimate(x), true_count))
            k = self.observations[name] = self.observations[name] + 1
            prev = self.errors[name]
            a = 1.0 / min(k, self.window)
            self.errors[name] = e if k == 1 else prev + a * (e - prev)
        if min(self.observations.values()) >= self.min_observations:
            choice = "eqw" if self.errors["eqw"] < self.errors["ssi"] else "ssi"
            if choice != self.choice:
                self.choice = choice
                self._rebind()

    def stats(self) -> dict[str, object]:
        """Running errors, observation counts, the current choice and the SSI's shape."""
        return {"choice": self.choice, "errors": dict(self.errors),
                "observations": dict(self.observations), "rebuilds": self.rebuilds,
                "ssi_tau": self.ssi.tau, "ssi_groups": self.ssi.groups,
                "ssi_pieces": self.ssi.pieces, "size": self.ssi.size}
