"""A bucket table over one join key's sorted partner values: "first partner ≥ x" in O(1).

SJ-SelectFirst (paper 004 §3.2.1, §4.1) asks, for each selected subscription, whether the join
key's substructure (the partners' values, sorted: the B-tree on ``S(B, C)``) holds a value in
the subscription's other range, and how many. A binary search answers that in O(log m′) but
with a mispredicted branch per step (~15–20 ns for m′ ≈ 40); this table answers it with two
loads and a conditional move (~3 ns), which is what makes a selected subscription cheaper than
a stabbing-group candidate of SJ-SSI (``docs/benchmarks/engine.md``).

The partners ``pv[base : base + m]`` (sorted, finite) are cut into B = 2^j ≥ 8m equal-width
buckets over ``[pv[base], pv[base + m − 1]]``; ``bucket(x)`` is monotone in x (one subtraction,
one multiplication, clamped), so every partner below x lies in an earlier or the same bucket and
every partner above x in the same or a later one. Per bucket k:

* ``low[k]``: the bucket's value when all its partners share one value, NaN when it is empty
  or holds several distinct values (a *mixed* bucket);
* ``nxt[k]``: the smallest partner value of the later buckets (+inf when none; NaN when mixed);
* ``first[k]``: the position of the bucket's first partner, or of the next bucket's when empty;
* ``mult[k]``: how many partners hold ``low[k]`` (0 when empty, −1 when mixed).

Then for x in a bucket that is not mixed: the first partner ≥ x is ``low[k]`` if ``low[k] ≥ x``
else ``nxt[k]`` (NaN compares false), its position is ``first[k] + mult[k]·(low[k] < x)``, and
the first position > x is ``first[k] + mult[k]·(low[k] ≤ x)``. A mixed bucket answers NaN to
:func:`next_partner`, so a scan's test ``next_partner(lo) <= hi`` is false there and the
candidate is set aside (``r != r``) for an exact test; :func:`lower` and :func:`upper` walk
the mixed bucket. With B ≥ 8m, about 1 % of the buckets a uniform key's candidates fall in are
mixed. Building the table costs O(B + m) per probe (~0.5 µs for m = 40).

>>> import numpy as np
>>> pv = np.array([2.0, 5.0, 5.0, 9.0])
>>> bk = new_buckets(64)
>>> B, scale, pmin = build(pv, 0, 4, bk)
>>> [float(next_partner(bk.low, bk.nxt, B, scale, pmin, x)) for x in (3.0, 9.5)]
[5.0, inf]
>>> [int(f(pv, 4, bk.low, bk.first, bk.mult, B, scale, pmin, 5.0)) for f in (lower, upper)]
[1, 3]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hotjoin.matcher.config import INLINE, kernel

MAX_BUCKETS = 1 << 14
"""Cap on B (a key with m′ > 2,048 partners gets coarser buckets: more mixed ones, still exact)."""


class PartnerBuckets(NamedTuple):
    """Per-probe scratch of the bucket table (capacity ``MAX_BUCKETS``; module docstring)."""

    low: np.ndarray    # float64[cap]
    nxt: np.ndarray    # float64[cap]
    first: np.ndarray  # int64[cap]
    mult: np.ndarray   # int64[cap]


class BucketTable(NamedTuple):
    """One probe's table as its exact lookups read it: the arrays of :class:`PartnerBuckets`
    that :func:`lower`/:func:`upper` need and what :func:`build` returned (``n_buckets`` ≤
    the arrays' capacity, ``scale``, ``pmin``). A bundle for the rare, non-inlined exact
    paths; the hot loops take the arrays one by one (below)."""

    low: np.ndarray    # float64[cap]
    first: np.ndarray  # int64[cap]
    mult: np.ndarray   # int64[cap]
    n_buckets: int
    scale: float
    pmin: float


def new_buckets(cap: int = MAX_BUCKETS) -> PartnerBuckets:
    """Scratch for tables of up to ``cap`` buckets (``cap`` a power of two)."""
    return PartnerBuckets(np.zeros(cap), np.zeros(cap), np.zeros(cap, dtype=np.int64),
                          np.zeros(cap, dtype=np.int64))


@kernel(**INLINE)
def bucket(x: float, pmin: float, scale: float, n_buckets: int) -> int:
    """The bucket of x: ``(x − pmin)·scale`` clamped to ``[0, B − 1]`` before the conversion
    (±inf and NaN included, so the conversion is always defined). Monotone in x."""
    t = (x - pmin) * scale
    t = t if t > 0.0 else 0.0
    t = t if t < n_buckets - 1.0 else n_buckets - 1.0
    return np.int64(t)


@kernel
def build(pv: np.ndarray, base: int, size: int, bk: PartnerBuckets) -> tuple[int, float, float]:
    """Fill ``bk`` for the sorted finite values ``pv[base : base + size]`` (size ≥ 1); returns
    ``(B, scale, pmin)`` for the lookups. O(B + size)."""
    low, nxt, first, mult = bk.low, bk.nxt, bk.first, bk.mult
    end = base + size
    pmin = pv[base]
    width = pv[end - 1] - pmin
    cap = low.shape[0]
    n_buckets = 1
    while n_buckets < 8 * size and n_buckets < cap:
        n_buckets *= 2
    scale = n_buckets / width if 0.0 < width < np.inf else 0.0
    if scale == 0.0:
        n_buckets = 1  # one value, or a span that overflows: one (mixed) bucket, walked
    for k in range(n_buckets):
        low[k] = np.nan
        mult[k] = 0
    for i in range(base, end):
        p = pv[i]
        k = bucket(p, pmin, scale, n_buckets)
        if mult[k] == 0:
            low[k] = p
            first[k] = i
            mult[k] = 1
        elif mult[k] > 0 and p == low[k]:
            mult[k] += 1
        else:
            mult[k] = -1
    nx = np.inf
    nf = end
    for k in range(n_buckets - 1, -1, -1):
        nxt[k] = nx
        if mult[k] == 0:
            first[k] = nf
        else:
            nf = first[k]
            nx = low[k]  # the bucket's smallest value (set by its first partner)
            if mult[k] < 0:
                low[k] = np.nan
                nxt[k] = np.nan
    return n_buckets, scale, pmin


# The lookups take the table's arrays, not the bundle: a kernel unpacks ``bk`` once, since
# reading an array out of a tuple inside a hot loop costs numba a reference count each time
# (measured: 6x slower scans).

@kernel(**INLINE)
def next_partner(low: np.ndarray, nxt: np.ndarray, n_buckets: int, scale: float, pmin: float,
                 x: float) -> float:
    """The smallest partner value ≥ x (+inf when none), or NaN when x falls in a mixed bucket
    (then ask :func:`lower`). Branch-free."""
    k = bucket(x, pmin, scale, n_buckets)
    lp = low[k]
    nx = nxt[k]  # both loads unconditional: a conditional move, not a branch (2-3x faster)
    return lp if lp >= x else nx


@kernel(**INLINE)
def lower(pv: np.ndarray, end: int, low: np.ndarray, first: np.ndarray, mult: np.ndarray,
          n_buckets: int, scale: float, pmin: float, x: float) -> int:
    """First position before ``end`` with ``pv[pos] >= x`` (or ``end``, the key's run end). Exact."""
    k = bucket(x, pmin, scale, n_buckets)
    c = mult[k]
    j = first[k]
    if c >= 0:
        return j + c * (low[k] < x)
    while j < end and pv[j] < x:
        j += 1
    return j


@kernel(**INLINE)
def upper(pv: np.ndarray, end: int, low: np.ndarray, first: np.ndarray, mult: np.ndarray,
          n_buckets: int, scale: float, pmin: float, x: float) -> int:
    """First position before ``end`` with ``pv[pos] > x`` (or ``end``). Exact."""
    k = bucket(x, pmin, scale, n_buckets)
    c = mult[k]
    j = first[k]
    if c >= 0:
        return j + c * (low[k] <= x)
    while j < end and pv[j] <= x:
        j += 1
    return j
