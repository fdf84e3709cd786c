"""Fitting HIST-SSI's step function (paper 004 App. B): isotonic sides, weighted 1-D k-means,
bucket allocation and the summed function.

:class:`~.hist_ssi.SSIHistogram` builds, per (possibly merged) stabbing group, the exact step
function of its members, splits it at its maximum into an increasing and a decreasing *side*
(:class:`Side`, made monotone by isotonic regression, :func:`pava`, when groups were merged by
:func:`merge_smallest`), gives the groups their buckets (:func:`allocate_cardinality`, then
:func:`greedy_split` within each, or :func:`greedy_split` across all), refines each side's
clusters by Lloyd's iterations (:func:`refine`, :func:`lloyd`) and sums the groups' functions
(:func:`steps_of`). The inner loops are compiled (:func:`pava`, :func:`seg_cost`,
:func:`best_split`, :func:`lloyd`); the rest is bookkeeping over a few hundred buckets.

>>> merge_smallest(np.array([5, 1, 1, 7]), 2).tolist()   # the two small groups join their neighbour
[0, 0, 0, 1]
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from hotjoin.matcher.config import kernel
from hotjoin.matcher.core import upper_bound

__all__ = ["Group", "Side", "SplitHeap", "allocate_cardinality", "best_split", "greedy_split",
           "lloyd", "merge_smallest", "pava", "push_split", "refine", "seg_cost", "side_of",
           "steps_of"]


# ---- the compiled inner loops -------------------------------------------------------------------


@kernel
def pava(y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


@kernel
def seg_cost(pw: np.ndarray, pwy: np.ndarray, pwyy: np.ndarray, a: int, b: int) -> float:
    """Weighted k-means cost of one cluster ``a:b`` from prefix sums (clamped at 0)."""
    w = pw[b] - pw[a]
    if w <= 0.0:
        return 0.0
    s = pwy[b] - pwy[a]
    c = pwyy[b] - pwyy[a] - s * s / w
    return c if c > 0.0 else 0.0


@kernel
def best_split(pw: np.ndarray, pwy: np.ndarray, pwyy: np.ndarray, a: int,
                b: int) -> tuple[int, float]:
    """The split ``s`` of cluster ``a:b`` (``b − a >= 2``) into ``a:s, s:b`` of least cost,
    and the cost it saves. O(b − a)."""
    best = np.inf
    arg = a + 1
    for s in range(a + 1, b):
        c = seg_cost(pw, pwy, pwyy, a, s) + seg_cost(pw, pwy, pwyy, s, b)
        if c < best:
            best = c
            arg = s
    return arg, seg_cost(pw, pwy, pwyy, a, b) - best


@kernel
def lloyd(v: np.ndarray, pw: np.ndarray, pwy: np.ndarray, pwyy: np.ndarray, z0: np.ndarray,
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
        best += seg_cost(pw, pwy, pwyy, z[j], z[j + 1])
    for _ in range(max_iter):
        for j in range(k):
            w = pw[z[j + 1]] - pw[z[j]]
            c[j] = (pwy[z[j + 1]] - pwy[z[j]]) / w if w > 0.0 else v[z[j]]
        nz = z.copy()
        for j in range(1, k):
            nz[j] = upper_bound(v, 0, m, 0.5 * (c[j - 1] + c[j]))  # first index with v > t
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
            cost += seg_cost(pw, pwy, pwyy, z[j], z[j + 1])
        if cost < best:
            best = cost
            best_z = z.copy()
    return best_z, best


# ---- sides, groups and buckets, in Python ------------------------------------------------------


@dataclass
class Side:
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
        """Isotonic blocks of the side: the most clusters it can use."""
        return int(self.v.shape[0])

    def cost(self, a: int, b: int) -> float:
        """Weighted k-means cost of one cluster of blocks ``a:b`` (:func:`seg_cost`)."""
        return float(seg_cost(self.pw, self.pwy, self.pwyy, a, b))

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


def side_of(y: np.ndarray, w: np.ndarray, left: bool, offset: int) -> Side | None:
    """The side of a group's pieces ``y`` (weights ``w``) starting at piece ``offset``: an
    increasing one (``left``) or a decreasing one (read backwards), made monotone by
    :func:`pava`, with the prefix sums its cluster costs read; None when there is no piece."""
    if y.shape[0] == 0:
        return None
    if not left:
        y, w = y[::-1], w[::-1]
    bv, bw, bs = pava(np.ascontiguousarray(y), np.ascontiguousarray(w))
    z = np.zeros(1)
    pw, pwy, pwyy = (np.concatenate([z, np.cumsum(a)]) for a in (bw, bw * bv, bw * bv * bv))
    return Side(bv, bw, pw, pwy, pwyy, bs, left, offset, int(y.shape[0]))


@dataclass
class Group:
    """One (possibly merged) stabbing group: its exact step function and its two sides."""

    edges: np.ndarray          # float64[U]; piece i is [edges[i], edges[i+1]); 0 after the last
    size: int                  # member intervals
    sides: list[Side]         # left then right; one when a side is empty
    spanning: bool = True      # one bucket over the whole group (budget 1)

    @property
    def capacity(self) -> int:
        """Buckets the group can use: its sides' isotonic blocks."""
        return sum(s.blocks for s in self.sides)

    def span_cost(self) -> float:
        """Cost of one bucket over the whole group (both sides as one cluster)."""
        w = sum(float(s.pw[-1]) for s in self.sides)
        wy = sum(float(s.pwy[-1]) for s in self.sides)
        wyy = sum(float(s.pwyy[-1]) for s in self.sides)
        return max(wyy - wy * wy / w, 0.0) if w > 0 else 0.0

    def span_mean(self) -> float:
        """Value of one bucket over the whole group: the weighted mean of its blocks."""
        v = np.concatenate([s.v for s in self.sides])
        w = np.concatenate([s.bw for s in self.sides])
        if v.shape[0] == 1:
            return float(v[0])
        return float(w @ v) / float(w.sum()) if w.sum() > 0 else float(v.mean())


def merge_smallest(sizes: np.ndarray, target: int) -> np.ndarray:
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


def allocate_cardinality(groups: list[Group], budget: int) -> list[int]:
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


def greedy_split(groups: list[Group], budget: int) -> None:
    """Spend ``budget`` buckets on ``groups`` (each starts with one) by repeatedly making the
    split that saves the most cost: first a group's split into its left and right side, then
    splits of side clusters.  Sets ``spanning`` and each side's ``cuts``."""
    heap: SplitHeap = []
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
            push_split(heap, g.sides[0], gi, 0, 0, g.sides[0].blocks, seq)
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
                push_split(heap, side, gi, k, 0, side.blocks, seq)
        else:
            side = g.sides[si]
            side.cuts.append(s)
            for lo_, hi_ in ((a, s), (s, b)):
                seq += 1
                push_split(heap, side, gi, si, lo_, hi_, seq)
        used += 1
    for g in groups:
        for s in g.sides:
            s.cuts.sort()


SplitHeap = list[tuple[float, int, int, int, int, int, int]]
"""Split candidates: (−gain, tie-break, group, side (−1: split the group at its mode), a, b,
s)."""


def push_split(heap: SplitHeap, side: Side, gi: int, si: int, a: int, b: int, seq: int) -> None:
    """Offer the best split of cluster ``a:b`` of side ``si`` of group ``gi`` (if it has two
    blocks or more) to :func:`greedy_split`'s heap."""
    if b - a >= 2:
        s, gain = best_split(side.pw, side.pwy, side.pwyy, a, b)
        heapq.heappush(heap, (-gain, seq, gi, si, a, b, int(s)))


def refine(side: Side, max_iter: int) -> None:
    """Lloyd's iterations from the greedy cuts; kept when they lower the cost."""
    k = len(side.cuts) - 1
    if k < 2 or side.blocks <= k:
        return
    z0 = np.array(side.cuts, np.int64)
    before = sum(side.cost(side.cuts[j], side.cuts[j + 1]) for j in range(k))
    z, cost = lloyd(side.v, side.pw, side.pwy, side.pwyy, z0, max_iter)
    if cost < before:
        side.cuts = [int(t) for t in z]


def steps_of(groups: list[Group]) -> tuple[np.ndarray, np.ndarray]:
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
