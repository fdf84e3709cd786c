"""Dynamic centred interval tree over subscription ranges: the range index BJ-DOuter probes.

Paper 004 §3.1.1 gives BJ-DOuter "an index on ranges {rangeB_i}" (a priority search tree or an
interval tree). Node ``u`` has a finite ``center[u]`` and keeps exactly the ranges that contain it
and did not fit a node above, in two sorted lists (ascending lo, descending hi) held in
:class:`~matcher.structures.group_pool.GroupedSortedPool`\\ s (or gapped ones) indexed by
node id. Ranges entirely left/right of the centre live in the left/right subtree. A stabbing
probe visits one root-to-leaf path: O(depth + output).

Inserting descends to the first node whose centre the range contains, creating a leaf centred on
the range's midpoint when it falls off the tree; when a path grows deeper than
``2·log2(n) + 8`` the tree is rebuilt balanced (centre = median endpoint) in O(n log n), so the
depth stays logarithmic and updates cost O(log n + node list) amortised.

The compiled stabbing query is :func:`stab` (one point, contiguous node lists): the equi-join
kernels (SJ-SelectFirst, WJ-SelectFirst) call it and then work through the ids it wrote. The
descent rule is :func:`descend`, which BJ-DOuter's probe inlines: it stabs the gapped tree once
per partner of a tuple, at ~5–8 ns per partner on the batch load test, and writing the ids out
to read them back cost it 20–45 % (``joins/band_kernels.douter``).

>>> t = IntervalTree()
>>> t.build([1, 2], [0.0, 5.0], [3.0, 9.0])
>>> t.insert(3, 6.0, 7.0)
>>> sorted(t.stab(6.5))
[2, 3]
>>> out = np.empty(stab_bound(t.arrays(), 6.5), dtype=np.int64)
>>> sorted(out[:stab(t.arrays(), 6.5, out)].tolist())
[2, 3]
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from hotjoin.matcher.config import INLINE, NO_NRT, kernel
from hotjoin.matcher.core import OVERFLOW
from hotjoin.matcher.structures.gapped_pool import GappedGroupPool
from hotjoin.matcher.structures.group_pool import GroupedSortedPool, PoolArrays


def _mid(lo: float, hi: float) -> float:
    """A centre inside ``[lo, hi]``: the midpoint, computed without overflow for bounds near
    ±1.8e308 (``hi - lo`` is inf there, and a centre of inf would send every insert left
    forever); a finite bound when the other is infinite; 0 for ``(-inf, inf)``.

    >>> _mid(-1e308, 1e308), _mid(2.0, 4.0), _mid(-math.inf, 3.0)
    (0.0, 3.0, 3.0)
    """
    if math.isfinite(lo) and math.isfinite(hi):
        m = lo + (hi - lo) / 2
        return m if math.isfinite(m) else lo / 2 + hi / 2
    if math.isfinite(lo):
        return lo
    if math.isfinite(hi):
        return hi
    return 0.0


class TreeArrays(NamedTuple):
    """An :class:`IntervalTree` as kernels read it: node ``u`` has centre ``center[u]`` and
    children ``left[u]``, ``right[u]`` (−1: none; ``root`` < 0: empty tree); its ranges by
    ascending lo are group ``u`` of ``lpool`` (keys lo), by descending hi group ``u`` of
    ``rpool`` (keys −hi), each pool's ``arrays()`` (``PoolArrays`` or ``GappedPoolArrays``)."""

    center: np.ndarray
    left: np.ndarray
    right: np.ndarray
    root: int
    lpool: tuple
    rpool: tuple


@kernel(**INLINE)
def descend(c: float, lchild: int, rchild: int, x: float) -> tuple[bool, int]:
    """At a node of centre ``c`` and children ``lchild``/``rchild``, for the point ``x``:
    whether the ranges containing ``x`` are a prefix of the node's lo-ascending list (else of
    its −hi-ascending one), and the next node (−1: none; ``x`` at the centre: every range of
    the node contains it, and no child's does). Scalars only: an inlined helper with array
    arguments costs a reference count per array and call (``matcher/config.py``)."""
    nxt = lchild if x < c else (rchild if x > c else -1)
    return x <= c, nxt


@kernel(**INLINE)
def stab_bound(tree: tuple, x: float) -> int:
    """The most ids :func:`stab` can write for ``x``: the sizes of the node lists on ``x``'s
    path. O(depth), no list read; size the output with it and the query never runs out of
    room.

    >>> t = IntervalTree(); t.build([1, 2, 3], [0.0, 5.0, 6.0], [3.0, 9.0, 7.0])
    >>> stab_bound(t.arrays(), 6.5) >= len(t.stab(6.5))
    True
    """
    center, left, right, root, lpool, rpool = tree
    lsize, rsize = lpool[1], rpool[1]
    total = 0
    u = root
    while u >= 0:
        use_left, nxt = descend(center[u], left[u], right[u], x)
        total += lsize[u] if use_left else rsize[u]
        u = nxt
    return total


@kernel(**NO_NRT)  # allocates nothing: no reference counting (matcher/config.py)
def stab(tree: tuple, x: float, out: np.ndarray) -> int:
    """The ranges of a tree with contiguous node lists (:class:`TreeArrays` over
    ``PoolArrays``) that contain ``x``, written to ``out``: their number, or ``OVERFLOW``
    when they do not fit (nothing else changed: grow ``out`` and ask again; or size it with
    :func:`stab_bound` first). Ids in path order, each node's in its list order.

    One root-to-leaf path; at each node a prefix of one sorted list (lo ≤ x ascending, or
    hi ≥ x from the largest hi): O(depth + output).
    """
    t = TreeArrays(*tree)
    center, left, right = t.center, t.left, t.right
    lp, rp = PoolArrays(*t.lpool), PoolArrays(*t.rpool)
    lstart, lsize, lkeys, lids = lp.start, lp.size, lp.keys, lp.ids
    rstart, rsize, rkeys, rids = rp.start, rp.size, rp.keys, rp.ids
    cap = out.shape[0]
    n = 0
    u = t.root
    while u >= 0:
        use_left, nxt = descend(center[u], left[u], right[u], x)
        if use_left:
            for k in range(lstart[u], lstart[u] + lsize[u]):
                if lkeys[k] > x:
                    break
                if n == cap:
                    return OVERFLOW
                out[n] = lids[k]
                n += 1
        else:
            for k in range(rstart[u], rstart[u] + rsize[u]):
                if -rkeys[k] < x:
                    break
                if n == cap:
                    return OVERFLOW
                out[n] = rids[k]
                n += 1
        u = nxt
    return n


class IntervalTree:
    """Centred interval tree with per-node sorted lists in flat pools (see module docstring)."""

    def __init__(self, gapped: bool = False) -> None:
        """``gapped``: node lists in :class:`GappedGroupPool` (main + delta runs, read by the
        band kernels) instead of contiguous :class:`GroupedSortedPool` runs (equi-join kernels)."""
        self._pool = GappedGroupPool if gapped else GroupedSortedPool
        self._reset()

    def _reset(self) -> None:
        self.center = np.zeros(16, dtype=np.float64)
        self.left = np.full(16, -1, dtype=np.int64)
        self.right = np.full(16, -1, dtype=np.int64)
        self.root = -1
        self.n_nodes = 0
        self.lpool = self._pool()
        self.rpool = self._pool()
        self.node_of: dict[int, int] = {}
        self.bounds: dict[int, tuple[float, float]] = {}
        self.rebuilds = 0

    def __len__(self) -> int:
        return len(self.node_of)

    def arrays(self) -> tuple:
        """The tree as a kernel bundle: :class:`TreeArrays`' fields as a plain tuple (the
        kernel names it back, ``TreeArrays(*t)``; see ``GappedGroupPool.arrays``)."""
        return (self.center, self.left, self.right, self.root, self.lpool.arrays(),
                self.rpool.arrays())

    def _new_node(self, c: float) -> int:
        u = self.n_nodes
        if u == self.center.shape[0]:
            n = 2 * u
            self.center = np.resize(self.center, n)
            self.left = np.concatenate([self.left, np.full(n - u, -1, dtype=np.int64)])
            self.right = np.concatenate([self.right, np.full(n - u, -1, dtype=np.int64)])
        self.center[u] = c
        self.left[u] = -1
        self.right[u] = -1
        self.lpool.add_group(u)
        self.rpool.add_group(u)
        self.n_nodes += 1
        return u

    def _place(self, u: int, q: int, lo: float, hi: float) -> None:
        self.lpool.insert(u, lo, q)
        self.rpool.insert(u, -hi, q)
        self.node_of[q] = u

    def insert(self, q: int, lo: float, hi: float) -> None:
        """Add range ``q = [lo, hi]``; O(depth + node list size) amortised."""
        self.bounds[q] = (lo, hi)
        if self.root < 0:
            self.root = self._new_node(_mid(lo, hi))
        u, depth = self.root, 1
        while True:
            c = self.center[u]
            if hi < c:
                nxt = int(self.left[u])
                if nxt < 0:
                    nxt = self._new_node(_mid(lo, hi))
                    self.left[u] = nxt
            elif lo > c:
                nxt = int(self.right[u])
                if nxt < 0:
                    nxt = self._new_node(_mid(lo, hi))
                    self.right[u] = nxt
            else:
                self._place(u, q, lo, hi)
                break
            u, depth = nxt, depth + 1
        if depth > 2 * math.log2(len(self.node_of) + 1) + 8:
            self.rebuild()

    def remove(self, q: int) -> None:
        """Remove range ``q``; KeyError if absent. Emptied nodes stay until the next rebuild."""
        u = self.node_of.pop(q)
        lo, hi = self.bounds.pop(q)
        self.lpool.remove(u, lo, q)
        self.rpool.remove(u, -hi, q)
        if self.n_nodes > 64 and self.n_nodes > 4 * (len(self.node_of) + 1):
            self.rebuild()

    def build(self, qs: list[int] | np.ndarray, los: list[float] | np.ndarray,
              his: list[float] | np.ndarray) -> None:
        """Replace the content by the given ranges, balanced (O(n log n))."""
        self._reset()
        q_arr = np.asarray(qs, dtype=np.int64)
        lo_arr = np.asarray(los, dtype=np.float64)
        hi_arr = np.asarray(his, dtype=np.float64)
        for q, lo, hi in zip(q_arr.tolist(), lo_arr.tolist(), hi_arr.tolist(), strict=True):
            self.bounds[q] = (lo, hi)
        if q_arr.shape[0]:
            self.root = self._build(q_arr, lo_arr, hi_arr)

    def rebuild(self) -> None:
        """Rebuild balanced from the current ranges (O(n log n))."""
        items = list(self.bounds.items())
        rebuilds = self.rebuilds + 1
        self.build([q for q, _ in items], [b[0] for _, b in items], [b[1] for _, b in items])
        self.rebuilds = rebuilds

    def _build(self, qs: np.ndarray, los: np.ndarray, his: np.ndarray) -> int:
        ends = np.concatenate([los, his])
        ends = ends[np.isfinite(ends)]
        c = float(np.median(ends)) if ends.shape[0] else 0.0
        go_left = his < c
        go_right = los > c
        here = ~(go_left | go_right)
        u = self._new_node(c)
        hq, hl, hh = qs[here], los[here], his[here]
        o = np.argsort(hl, kind="stable")
        self.lpool.load_group(u, hl[o], hq[o])
        o = np.argsort(-hh, kind="stable")
        self.rpool.load_group(u, -hh[o], hq[o])
        for q in hq.tolist():
            self.node_of[q] = u
        if go_left.any():
            self.left[u] = self._build(qs[go_left], los[go_left], his[go_left])
        if go_right.any():
            self.right[u] = self._build(qs[go_right], los[go_right], his[go_right])
        return u

    def stab(self, x: float) -> list[int]:
        """Ranges containing ``x`` (pure Python, the reference the compiled :func:`stab` is
        tested against)."""
        out: list[int] = []
        u = self.root
        while u >= 0:
            c = self.center[u]
            if x < c:
                out += [q for lo, q in self.lpool.members(u) if lo <= x]
                u = int(self.left[u])
            elif x > c:
                out += [q for nh, q in self.rpool.members(u) if -nh >= x]
                u = int(self.right[u])
            else:
                out += [q for _, q in self.lpool.members(u)]
                u = -1
        return out

    def depth(self) -> int:
        def d(u: int) -> int:
            return 0 if u < 0 else 1 + max(d(int(self.left[u])), d(int(self.right[u])))
        return d(self.root)

    def memory_bytes(self) -> int:
        return (self.lpool.memory_bytes() + self.rpool.memory_bytes()
                + self.center.nbytes + self.left.nbytes + self.right.nbytes)
