"""What the interval histograms share: the estimate's protocol, closed ends, fractional
coverage and the rebuild rule (paper 004 §4.1, App. B).

For a set ``I`` of closed intervals ``[lo, hi]`` (bounds may be ``±inf``), ``f_I(x)`` is the
number of intervals of ``I`` that contain ``x``; HIST-EQW (:mod:`.hist_eqw`) and HIST-SSI
(:mod:`.hist_ssi`) keep it as a step function and follow these conventions
(:mod:`.histogram` gives the overview):

*Closed ends.*  ``[a, b]`` is stored as the half-open ``[a, b⁺)`` with ``b⁺ = nextafter(b, +inf)``
(or ``b + resolution`` when a ``resolution > 0`` is given: for integer keys use ``resolution=1``,
then ``[a, b]`` covers the ``b - a + 1`` integers ``a..b`` and a point range ``[a, a]`` weighs one
unit).  With the default ``resolution = 0`` a point range has measure 0, so the fractional-coverage
rule gives it (almost) no weight: a continuous query hits it with probability 0.

*Outside the pieces.*  Both histograms answer ``x`` below their first (above their last)
breakpoint from an extra "outside" bucket.  For the fractional rule such a bucket is treated as
a bucket of *virtual width* ``vw`` (EQW: the bucket width; SSI: the mean piece width) next to
the domain, so ``[-inf, b]`` with ``b`` beyond the domain counts 1 for every ``x`` below it,
and a finite interval partly outside counts its covered fraction of that virtual bucket.
A piece with an infinite end (``[-inf, x1)`` in HIST-SSI) is treated the same way.

*Non-negative.*  Values are kept exactly as updated (so ``add`` then ``remove`` restores them up
to rounding) and clamped at 0 when read.

*Rebuild policy* (:class:`Churn`).  ``needs_rebuild()`` is true once the updates since the last
build exceed ``max(min_churn, rebuild_fraction · size at that build)`` (defaults 16 and 0.25),
or when the histogram was built on nothing and has seen updates; ``rebuild(lo, hi)`` then
rebuilds from the current intervals (the caller owns them).  HIST-EQW's updates are exact for
its own definition, so a rebuild only refits the domain and drops rounding drift; HIST-SSI's
bucket boundaries are fitted to the intervals present at build time, so churn makes them stale.
Rebuilding costs O(n log n); at ``rebuild_fraction`` 0.25 that is O(log n) amortised per update.

>>> edges, vals, est = [0.0, 2.0, 4.0], [0.0, 0.0], [0.0, 0.0]
>>> cover_one(edges, vals, est, 1.0, 4.0, 1.0); est
[0.5, 1.0]
>>> cover_many(np.array(edges), np.array([1.0]), np.array([4.0])).tolist()
[0.5, 1.0]
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from typing import Protocol

import numpy as np

__all__ = ["MIN_CHURN", "Churn", "IntervalHistogram", "cover_many", "cover_one", "data_domain",
           "open_end", "open_ends", "relative_error"]

_INF = math.inf
MIN_CHURN = 16
"""Updates a histogram always absorbs before :meth:`Churn.needs_rebuild` can become true."""


def relative_error(estimate: np.ndarray | float, true: np.ndarray | float) -> np.ndarray | float:
    """``|estimate − true| / max(true, 1)``: the error the benchmarks and the chooser average.

    (Fig. 25 divides by the true count; the ``max(·, 1)`` keeps points stabbing nothing finite.)
    """
    return np.abs(np.asarray(estimate, np.float64) - true) / np.maximum(true, 1.0)


def open_end(hi: float, resolution: float) -> float:
    """End of the half-open form ``[lo, hi⁺)`` of the closed ``[lo, hi]`` (module docstring),
    never below the next double, as :func:`open_ends`.

    >>> open_end(3.0, 1.0), open_end(3.0, 0.0) > 3.0
    (4.0, True)
    """
    nxt = math.nextafter(hi, _INF)
    return max(hi + resolution, nxt) if resolution > 0 else nxt


def open_ends(hi: np.ndarray, resolution: float) -> np.ndarray:
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


# ---- fractional coverage of a row of regions (shared by both histograms) -----------------------


def cover_one(edges: list[float], vals: list[float], est: list[float], lo: float,
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


def cover_many(edges: np.ndarray, lo: np.ndarray, hi_open: np.ndarray) -> np.ndarray:
    """Vectorised :func:`cover_one`: the summed coverage of every region (float64[R])."""
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


class Churn:
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


def data_domain(lo: np.ndarray, hi: np.ndarray, resolution: float = 0.0,
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
    d0 = min(max(float(allv.min()), -DOMAIN_MAX), DOMAIN_MAX)
    d1 = min(max(float(allv.max()), -DOMAIN_MAX), DOMAIN_MAX)
    if not d1 > d0:
        half = max(0.5, abs(d0) * 2.0**-20)
        d0, d1 = d0 - half, d0 + half
    return d0, d1


DOMAIN_MAX = 4e307
