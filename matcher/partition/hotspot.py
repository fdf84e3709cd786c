"""Tracking alpha-hotspots of a changing interval set (paper 004, Section 2.2, Theorem 1).

A stabbing group is an *alpha-hotspot* when it holds at least ``alpha |I|`` intervals.  The
SSI's group processing pays off only on such large groups, so the matcher indexes the hot groups
``J_H`` with the SSI and the rest, the *scattered* intervals ``S``, with a plain index.
:class:`HotspotTracker` keeps the split with the three properties of Theorem 1:

* (I1) ``J_H`` holds every alpha-hotspot and only ``alpha/2``-hotspots, so ``|J_H| <= 2/alpha``;
* (I2) ``|J_H| + |J_S| <= (1 + eps) tau(I) + 2/alpha``;
* (I3) amortised, at most 5 intervals move into or out of ``S`` per update.

>>> tr = HotspotTracker(alpha=0.5)
>>> tr.insert_many([1, 2, 3], [0.0, 0.5, 9.0], [1.0, 2.0, 10.0])
>>> [(p, sorted(m.tolist())) for _, p, m in tr.hot_groups()], tr.scattered().tolist()
([(1.0, [1, 2])], [3])
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from typing import Literal, Protocol

import numpy as np

from hotjoin.matcher.partition.stabbing import (
    DynamicStabbingPartition,
    GroupMirror,
    PartitionListener,
    StabbingGroups,
    _check_arrays,
    _check_interval,
    _pick_point,
    stabbing_number,
)
from hotjoin.matcher.structures.member_lists import link, listed, push_front, unlink, walk_column

__all__ = ["HotspotListener", "HotspotMirror", "HotspotTracker"]


class HotspotListener(PartitionListener, Protocol):
    """Receives the changes of a :class:`HotspotTracker`.

    The :class:`PartitionListener` callbacks describe the *hot* groups ``J_H`` only; the
    scattered set ``S`` is reported interval by interval.  A promotion is reported as
    ``scattered_removed`` for each member, then ``group_added`` and ``member_added``; a
    demotion as ``member_removed`` for each member, ``group_removed``, then ``scattered_added``.
    """

    def scattered_added(self, iid: int) -> None:
        """Interval ``iid`` is now in ``S``."""
        ...

    def scattered_removed(self, iid: int) -> None:
        """Interval ``iid`` left ``S`` (deleted, or promoted into a hot group)."""
        ...


class HotspotMirror(GroupMirror):
    """Reference :class:`HotspotListener`: rebuilds ``J_H`` and ``S`` from the callbacks alone.

    >>> mirror = HotspotMirror()
    >>> tr = HotspotTracker(alpha=0.5, listener=mirror)
    >>> tr.insert(1, 0.0, 1.0)            # alone, hence a hotspot at once
    >>> tr.insert(2, 5.0, 6.0); tr.insert(3, 7.0, 8.0)   # 3 is below alpha |I| = 1.5
    >>> sorted(mirror.scattered), mirror.snapshot()[tr.group_of(1)]
    ([3], (1.0, frozenset({1})))
    """

    def __init__(self) -> None:
        super().__init__()
        self.scattered: set[int] = set()

    def scattered_added(self, iid: int) -> None:
        """Add ``iid`` to ``S``."""
        self.calls += 1
        assert iid not in self.scattered and iid not in self.of, f"{iid} added to S twice"
        self.scattered.add(iid)

    def scattered_removed(self, iid: int) -> None:
        """Remove ``iid`` from ``S``."""
        self.calls += 1
        self.scattered.remove(iid)


class _SizeBuckets:
    """Group sizes bucketed by value, keeping the largest (or smallest) size at hand.

    Invariant: ``best`` is the extreme size over all groups (0 when there are none).  Sizes
    move by +-1 (``inc``/``dec``) in ``O(1)``; ``add``/``remove`` at any size are ``O(1)``
    unless they empty the extreme bucket, then ``O(#distinct sizes)``.

    >>> b = _SizeBuckets(largest=True); b.add(7, 2); b.add(8, 0); b.inc(8); b.dec(7); b.best
    1
    """

    __slots__ = ("best", "by", "largest", "size")

    def __init__(self, largest: bool) -> None:
        self.largest = largest
        self.size: dict[int, int] = {}
        self.by: dict[int, set[int]] = {}
        self.best = 0

    def __len__(self) -> int:
        return len(self.size)

    def rebuild(self, sizes: Iterable[tuple[int, int]]) -> None:
        """Forget everything and load ``(gid, size)`` pairs."""
        self.size = dict(sizes)
        self.by = {}
        for g, s in self.size.items():
            b = self.by.get(s)
            if b is None:
                self.by[s] = {g}
            else:
                b.add(g)
        if not self.by:
            self.best = 0
        else:
            self.best = max(self.by) if self.largest else min(self.by)

    def pick(self) -> int:
        """A group of extreme size."""
        return next(iter(self.by[self.best]))

    def add(self, g: int, s: int) -> None:
        """Add group ``g`` of size ``s``."""
        first = not self.size
        self.size[g] = s
        b = self.by.get(s)
        if b is None:
            self.by[s] = {g}
        else:
            b.add(g)
        if first or (s > self.best if self.largest else s < self.best):
            self.best = s

    def remove(self, g: int) -> None:
        """Remove group ``g``."""
        s = self.size.pop(g)
        b = self.by[s]
        b.remove(g)
        if not b:
            del self.by[s]
            if s == self.best:
                if not self.by:
                    self.best = 0
                else:
                    self.best = max(self.by) if self.largest else min(self.by)

    def inc(self, g: int) -> None:
        """Group ``g`` grew by one."""
        size = self.size
        s = size[g]
        size[g] = s + 1
        by = self.by
        b = by[s]
        b.remove(g)
        if not b:
            del by[s]
        b = by.get(s + 1)
        if b is None:
            by[s + 1] = {g}
        else:
            b.add(g)
        if self.largest:
            if s + 1 > self.best:
                self.best = s + 1
        elif s == self.best and s not in by:
            self.best = s + 1

    def dec(self, g: int) -> None:
        """Group ``g`` shrank by one."""
        size = self.size
        s = size[g]
        size[g] = s - 1
        by = self.by
        b = by[s]
        b.remove(g)
        if not b:
            del by[s]
        b = by.get(s - 1)
        if b is None:
            by[s - 1] = {g}
        else:
            b.add(g)
        if self.largest:
            if s == self.best and s not in by:
                self.best = s - 1
        elif s - 1 < self.best:
            self.best = s - 1


class _ScatteredSizes:
    """Listener of the inner partition of ``S``: keeps its group sizes in :class:`_SizeBuckets`."""

    __slots__ = ("buckets",)

    def __init__(self, buckets: _SizeBuckets) -> None:
        self.buckets = buckets

    def reset(self, partition: StabbingGroups) -> None:
        assert isinstance(partition, DynamicStabbingPartition)
        self.buckets.rebuild(partition.group_sizes())

    def group_added(self, gid: int, point: float) -> None:
        self.buckets.add(gid, 0)

    def group_removed(self, gid: int) -> None:
        self.buckets.remove(gid)  # at any size: see pop_group(notify_members=False)

    def member_added(self, gid: int, iid: int) -> None:
        self.buckets.inc(gid)

    def member_removed(self, gid: int, iid: int) -> None:
        self.buckets.dec(gid)

    def point_moved(self, gid: int, point: float) -> None:
        pass


class HotspotTracker:
    """The hotspot-tracking algorithm of Section 2.2: ``J_H`` by hand, ``J_S`` by Lemma 2.

    * ``J_H``: at most ``2/alpha`` hot groups, each with its common intersection (the *core*,
      ``[max lo, min hi]`` of its members when promoted, shrunk by every join) and a point in it.
    * ``J_S``: a :class:`DynamicStabbingPartition` of ``S`` (Appendix A.1; ``trigger`` is
      passed to it).

    Insertion joins a hot group whose core the interval meets -- preferring one whose point it
    already contains, found by bisection over the sorted hot points, else a vectorised scan of
    the cores (the point then moves) -- otherwise it goes into ``S``.  Deletion removes it from
    its hot group or from ``S``.  After every update ``|I|`` has changed, so the thresholds
    have moved: every hot group below ``(alpha/2)|I|`` is demoted (members back into ``S``),
    then every ``J_S`` group of at least ``alpha|I|`` is promoted (leaving ``S`` as a whole).
    Group sizes are bucketed so the smallest hot and the largest scattered group are ``O(1)``
    to find.  Intervals that enter ``S`` and leave it within one update are never reported
    to the listener nor counted as moves.

    Invariant: (I1)-(I3) of Theorem 1 (see :meth:`check_invariants`).

    Complexity: an update costs ``O(log(1/alpha))`` for a hot join (``O(1/alpha)`` vectorised
    when no hot point stabs the interval) plus the Lemma 2 cost of updating ``S``, plus
    ``O(log tau)`` per interval moved into or out of ``S`` -- amortised ``O(1)`` of those.

    >>> tr = HotspotTracker(alpha=0.4)
    >>> for i in range(10): tr.insert(i, float(i), i + 0.5)   # disjoint: singleton groups
    >>> tr.hot_count, tr.n_scattered
    (0, 10)
    >>> for i in range(10, 15): tr.insert(i, 0.1, 0.2)        # 0's group: 6 >= 0.4 * 15
    >>> tr.hot_count, sorted(tr.members(tr.group_of(0)).tolist()), tr.point(tr.group_of(0))
    (1, [0, 10, 11, 12, 13, 14], 0.2)
    >>> tr.moved_out_of_scattered     # 14 entered S in the same update: not a move
    5
    """

    def __init__(
        self,
        alpha: float,
        epsilon: float = 1.0,
        listener: HotspotListener | None = None,
        *,
        trigger: Literal["witness", "deletions"] = "witness",
    ) -> None:
        if not (0.0 < alpha <= 1.0):
            raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
        self._alpha = float(alpha)
        self._half = self._alpha / 2.0
        self._listener = listener
        self._ssizes = _SizeBuckets(largest=True)
        self._s = DynamicStabbingPartition(
            epsilon, listener=_ScatteredSizes(self._ssizes), trigger=trigger
        )
        self._eps = self._s.epsilon
        # hot intervals, columns by iid (non-negative integers): hot group (-1: not hot), the
        # interval, and the group's member list linked through _hnx/_hpv
        self._hg = array("q")
        self._hlo = array("d")
        self._hhi = array("d")
        self._hnx = array("q")
        self._hpv = array("q")
        self._n_hot = 0
        # hot groups
        self._hhead: dict[int, int] = {}
        self._hcount: dict[int, int] = {}
        self._hcl: dict[int, float] = {}
        self._hcr: dict[int, float] = {}
        self._hpt: dict[int, float] = {}
        self._hsizes = _SizeBuckets(largest=False)
        self._pts: list[float] = []  # hot points, sorted
        self._pts_g: list[int] = []  # their groups
        self._row: dict[int, int] = {}  # gid -> row of the core columns
        self._row_g: list[int] = []
        self._CL = np.empty(8, np.float64)
        self._CR = np.empty(8, np.float64)
        self._next_gid = 0
        self._n = 0
        self._pending: dict[int, bool] = {}  # entered S this update; True if it came from J_H
        #: number of updates (insertions and deletions) so far
        self.updates = 0
        #: intervals moved from a hot group into S (demotions)
        self.moved_into_scattered = 0
        #: intervals moved from S into a hot group (promotions)
        self.moved_out_of_scattered = 0

    # -- view ---------------------------------------------------------------------------
    def __len__(self) -> int:
        """Number of live intervals, ``|I|`` (hot and scattered)."""
        return self._n

    def __contains__(self, iid: object) -> bool:
        """Whether ``iid`` is a live interval."""
        return self._is_hot(iid) or iid in self._s

    def _is_hot(self, iid: object) -> bool:
        return listed(self._hg, iid)

    def __repr__(self) -> str:
        return (
            f"HotspotTracker(n={self._n}, hot_groups={self.hot_count}, "
            f"scattered={len(self._s)}, alpha={self._alpha}, eps={self._eps})"
        )

    @property
    def alpha(self) -> float:
        """The hotspot threshold: a group is an alpha-hotspot if it holds ``alpha |I|``."""
        return self._alpha

    @property
    def epsilon(self) -> float:
        """The Lemma 2 parameter of the partition of ``S``."""
        return self._eps

    @property
    def hot_count(self) -> int:
        """``|J_H|``."""
        return len(self._hcount)

    def hotspot_sizes(self) -> list[int]:
        """|Q_i^H| of every current α-hotspot (§2.2), e.g. for the router's Σ√|Q_i^H| term. O(h)."""
        return list(self._hcount.values())

    @property
    def size(self) -> int:
        """``|J| = |J_H| + |J_S|``."""
        return len(self._hcount) + self._s.size

    @property
    def n_hot(self) -> int:
        """``|H|``: number of hot intervals."""
        return self._n_hot

    @property
    def n_scattered(self) -> int:
        """``|S|``: number of scattered intervals."""
        return len(self._s)

    @property
    def scattered_partition(self) -> DynamicStabbingPartition:
        """The partition ``J_S`` of ``S`` (read it, do not change it)."""
        return self._s

    def is_hot(self, iid: int) -> bool:
        """Whether live interval ``iid`` is in a hot group (``KeyError`` if unknown)."""
        if self._is_hot(iid):
            return True
        if iid in self._s:
            return False
        raise KeyError(iid)

    def interval(self, iid: int) -> tuple[float, float]:
        """``(lo, hi)`` of live interval ``iid`` (``KeyError`` if unknown)."""
        if self._is_hot(iid):
            return self._hlo[iid], self._hhi[iid]
        return self._s.interval(iid)

    def group_of(self, iid: int) -> int:
        """Hot group of ``iid`` (``KeyError`` if ``iid`` is not a hot interval)."""
        if not self._is_hot(iid):
            raise KeyError(iid)
        return self._hg[iid]

    def point(self, gid: int) -> float:
        """Stabbing point of hot group ``gid``."""
        return self._hpt[gid]

    def core(self, gid: int) -> tuple[float, float]:
        """Maintained common intersection of hot group ``gid``."""
        return self._hcl[gid], self._hcr[gid]

    def members(self, gid: int) -> np.ndarray:
        """Member iids of hot group ``gid``; O(size)."""
        return walk_column(self._hnx, self._hhead[gid], self._hcount[gid])

    def hot_groups(self) -> Iterator[tuple[int, float, np.ndarray]]:
        """``J_H``: yield ``(gid, point, member iids)`` by increasing point."""
        for g in list(self._pts_g):
            yield g, self._hpt[g], self.members(g)

    groups = hot_groups

    def scattered(self) -> np.ndarray:
        """The iids in ``S`` (int64)."""
        return self._s.intervals()[0]

    # -- hot group bookkeeping ------------------------------------------------------------
    def _grow_hot(self, iid_max: int) -> None:
        """Room in the per-iid hot columns for ``iid_max``."""
        n = len(self._hg)
        if iid_max >= n:
            extra = max(iid_max + 1, 2 * n) - n
            minus = array("q", [-1]) * extra
            self._hg.extend(minus)
            self._hnx.extend(minus)
            self._hpv.extend(minus)
            zeros = array("d", bytes(8 * extra))
            self._hlo.extend(zeros)
            self._hhi.extend(zeros)

    def _pt_index(self, g: int, p: float) -> int:
        """Position of group ``g`` (point ``p``) in the sorted point list."""
        i = bisect_left(self._pts, p)
        while self._pts_g[i] != g:
            i += 1
        return i

    def _add_hot_group(self, g: int, cl: float, cr: float, p: float, members: np.ndarray,
                       los: np.ndarray, his: np.ndarray) -> None:
        """Make hot group ``g`` of the (non-empty) ``members`` with their intervals."""
        k = members.shape[0]
        self._grow_hot(int(members.max()))
        np.frombuffer(self._hg, np.int64)[members] = g
        np.frombuffer(self._hlo, np.float64)[members] = los
        np.frombuffer(self._hhi, np.float64)[members] = his
        link(np.frombuffer(self._hnx, np.int64), np.frombuffer(self._hpv, np.int64), members,
             np.array([0, k], np.int64))
        self._hhead[g] = int(members[0])
        self._hcount[g] = k
        self._n_hot += k
        self._hcl[g] = cl
        self._hcr[g] = cr
        self._hpt[g] = p
        i = bisect_left(self._pts, p)
        self._pts.insert(i, p)
        self._pts_g.insert(i, g)
        row = len(self._row_g)
        if row == self._CL.shape[0]:
            self._CL = np.resize(self._CL, 2 * row)
            self._CR = np.resize(self._CR, 2 * row)
        self._CL[row] = cl
        self._CR[row] = cr
        self._row[g] = row
        self._row_g.append(g)
        self._hsizes.add(g, k)

    def _drop_hot_group(self, g: int) -> np.ndarray:
        """Remove hot group ``g``; returns its member iids (no longer hot)."""
        members = self.members(g)
        np.frombuffer(self._hg, np.int64)[members] = -1
        self._n_hot -= members.shape[0]
        del self._hhead[g]
        del self._hcount[g]
        del self._hcl[g]
        del self._hcr[g]
        p = self._hpt.pop(g)
        i = self._pt_index(g, p)
        del self._pts[i]
        del self._pts_g[i]
        row = self._row.pop(g)
        last = len(self._row_g) - 1
        if row != last:  # move the last row into the hole
            lg = self._row_g[last]
            self._row_g[row] = lg
            self._row[lg] = row
            self._CL[row] = self._CL[last]
            self._CR[row] = self._CR[last]
        self._row_g.pop()
        self._hsizes.remove(g)
        return members

    def _find_hot(self, lo: float, hi: float) -> int:
        """A hot group whose core meets ``[lo, hi]`` (one whose point stabs it if any), or -1."""
        pts = self._pts
        if not pts:
            return -1
        i = bisect_left(pts, lo)
        if i < len(pts) and pts[i] <= hi:
            return self._pts_g[i]
        k = len(self._row_g)
        meet = (self._CL[:k] <= hi) & (self._CR[:k] >= lo)
        j = int(meet.argmax())
        return self._row_g[j] if meet[j] else -1

    def _join_hot(self, g: int, iid: int, lo: float, hi: float) -> None:
        """Add ``iid`` to hot group ``g``, shrinking its core and moving its point if needed."""
        lst = self._listener
        cl = self._hcl[g]
        cr = self._hcr[g]
        if lo > cl or hi < cr:
            if lo > cl:
                self._hcl[g] = cl = lo
            if hi < cr:
                self._hcr[g] = cr = hi
            row = self._row[g]
            self._CL[row] = cl
            self._CR[row] = cr
            p = self._hpt[g]
            if p < cl or p > cr:
                i = self._pt_index(g, p)
                del self._pts[i]
                del self._pts_g[i]
                p = _pick_point(cl, cr)
                self._hpt[g] = p
                i = bisect_left(self._pts, p)
                self._pts.insert(i, p)
                self._pts_g.insert(i, g)
                if lst is not None:
                    lst.point_moved(g, p)
        if iid >= len(self._hg):
            self._grow_hot(iid)
        self._hhead[g] = push_front(self._hnx, self._hpv, self._hhead[g], iid)
        self._hcount[g] += 1
        self._n_hot += 1
        self._hg[iid] = g
        self._hlo[iid] = lo
        self._hhi[iid] = hi
        self._hsizes.inc(g)
        if lst is not None:
            lst.member_added(g, iid)

    # -- promotion / demotion ---------------------------------------------------------------
    def _promote(self, sg: int) -> None:
        """Move the ``J_S`` group ``sg`` into ``J_H`` as a whole (Section 2.2, insertion)."""
        iids, los, his = self._s.pop_group(sg, notify_members=False)
        cl = float(los.max())
        cr = float(his.min())
        p = _pick_point(cl, cr)
        g = self._next_gid
        self._next_gid = g + 1
        id_list = iids.tolist()
        lst = self._listener
        pending = self._pending
        moved = 0
        for iid in id_list:
            if iid in pending:
                del pending[iid]  # entered S this very update: never reported
            else:
                moved += 1
                if lst is not None:
                    lst.scattered_removed(iid)
        self.moved_out_of_scattered += moved
        self._add_hot_group(g, cl, cr, p, iids, los, his)
        if lst is not None:
            lst.group_added(g, p)
            bulk = getattr(lst, "members_added", None)  # optional: a listener's one-call form
            if bulk is not None:
                bulk(g, iids)
            else:
                for iid in id_list:
                    lst.member_added(g, iid)

    def _demote(self, g: int) -> None:
        """Move hot group ``g`` back into ``S``, member by member (Section 2.2)."""
        ids = self._drop_hot_group(g)
        lst = self._listener
        k = ids.shape[0]
        los = np.frombuffer(self._hlo, np.float64)[ids]
        his = np.frombuffer(self._hhi, np.float64)[ids]
        id_list = ids.tolist()
        self._pending.update(dict.fromkeys(id_list, True))
        if lst is not None:
            for iid in id_list:
                lst.member_removed(g, iid)
        if lst is not None:
            lst.group_removed(g)
        if k:
            self._s.insert_many(ids, los, his)

    def _rebalance(self) -> None:
        """Restore (I1) after ``|I|`` changed: demote, then promote, then report ``S``'s news."""
        n = self._n
        hs = self._hsizes
        if hs.size:
            thr = self._half * n
            while hs.size and hs.best < thr:
                self._demote(hs.pick())
        ss = self._ssizes
        if ss.size:
            thr = self._alpha * n
            while ss.size and ss.best >= thr:
                self._promote(ss.pick())
        if self._pending:
            lst = self._listener
            moved = 0
            for iid, from_hot in self._pending.items():
                moved += from_hot
                if lst is not None:
                    lst.scattered_added(iid)
            self.moved_into_scattered += moved
            self._pending.clear()

    # -- updates ------------------------------------------------------------------------
    def insert(self, iid: int, lo: float, hi: float) -> None:
        """Insert interval ``iid = [lo, hi]`` (``ValueError`` if present or invalid)."""
        iid = int(iid)
        if iid in self:
            raise ValueError(f"interval {iid} is already present")
        if iid < 0:
            raise ValueError(f"interval ids are non-negative integers, got {iid}")
        lo = float(lo)
        hi = float(hi)
        if not lo <= hi or lo == math.inf or hi == -math.inf:
            _check_interval(lo, hi)  # raises the error
        n = self._n = self._n + 1
        self.updates += 1
        g = self._find_hot(lo, hi)
        if g >= 0:
            self._join_hot(g, iid, lo, hi)
        else:
            self._s.insert(iid, lo, hi)
            self._pending[iid] = False
        hs, ss = self._hsizes, self._ssizes
        if (
            self._pending
            or (hs.size and hs.best < self._half * n)
            or (ss.size and ss.best >= self._alpha * n)
        ):
            self._rebalance()

    def delete(self, iid: int) -> None:
        """Delete live interval ``iid`` (``KeyError`` if unknown)."""
        if self._is_hot(iid):
            g = self._hg[iid]
            self._hg[iid] = -1
            head = unlink(self._hnx, self._hpv, iid)
            if head is not None:
                self._hhead[g] = head
            self._hcount[g] -= 1
            self._n_hot -= 1
            self._hsizes.dec(g)
            if self._listener is not None:
                self._listener.member_removed(g, iid)
            if not self._hcount[g]:  # an empty hot group goes, whatever the threshold
                self._drop_hot_group(g)
                if self._listener is not None:
                    self._listener.group_removed(g)
        else:
            self._s.delete(iid)  # KeyError if unknown
            if self._listener is not None:
                self._listener.scattered_removed(iid)
        n = self._n = self._n - 1
        self.updates += 1
        hs, ss = self._hsizes, self._ssizes
        if (hs.size and hs.best < self._half * n) or (ss.size and ss.best >= self._alpha * n):
            self._rebalance()

    def insert_many(self, iids: Iterable[int], los: Iterable[float], his: Iterable[float]) -> None:
        """Insert many intervals, validated first (nothing changes on error).

        A small batch is inserted one by one.  A large one joins hot groups interval by
        interval, bulk-loads the rest into ``S`` (one rebuild of ``J_S``) and rebalances once,
        so intervals promoted straight away are never reported as scattered.
        """
        ids = np.asarray(iids, dtype=np.int64).ravel()
        lo, hi = _check_arrays(los, his)
        if ids.shape != lo.shape:
            raise ValueError("iids, los and his must have the same length")
        k = ids.shape[0]
        if k and int(ids.min()) < 0:
            raise ValueError(f"interval ids are non-negative integers, got {int(ids.min())}")
        srt = np.sort(ids)
        if np.any(srt[1:] == srt[:-1]):
            raise ValueError("duplicate iid in the batch")
        hot = ids[ids < len(self._hg)]
        if hot.shape[0]:
            hot = hot[np.frombuffer(self._hg, np.int64)[hot] >= 0]
        if hot.shape[0]:
            raise ValueError(f"interval {int(hot[0])} is already present")
        id_list = ids.tolist()
        for i in id_list:
            if i in self._s:
                raise ValueError(f"interval {i} is already present")
        lo_list = lo.tolist()
        hi_list = hi.tolist()
        if k < 32 or 12 * k < self._n + k:
            for i, a, b in zip(id_list, lo_list, hi_list, strict=True):
                self.insert(i, a, b)
            return
        self._n += k
        self.updates += k
        rest: list[int] = []
        for j, (i, a, b) in enumerate(zip(id_list, lo_list, hi_list, strict=True)):
            g = self._find_hot(a, b)
            if g >= 0:
                self._join_hot(g, i, a, b)
            else:
                rest.append(j)
        if rest:
            at = np.array(rest, np.int64)
            self._s.insert_many(ids[at], lo[at], hi[at])
            self._pending.update(dict.fromkeys(ids[at].tolist(), False))
        self._rebalance()

    # -- checking -----------------------------------------------------------------------
    def check_invariants(self) -> None:
        """Assert (I1)-(I3) of Theorem 1 and the bookkeeping; ``O(n log n)``.

        (I1) hot groups hold ``>= (alpha/2)|I|``, scattered groups ``< alpha|I|``, so
        ``|J_H| <= 2/alpha``; (I2) ``|J| <= (1 + eps) tau(I) + 2/alpha``; (I3) over the whole
        history, ``moved in + moved out <= 5 * updates``.
        """
        s = self._s
        s.check_invariants()
        n = self._n
        hg = np.frombuffer(self._hg, np.int64)
        hot_ids = np.flatnonzero(hg >= 0)
        assert n == hot_ids.shape[0] + len(s) and self._n_hot == hot_ids.shape[0]
        assert not self._pending
        assert not any(int(i) in s for i in hot_ids), "an interval is both hot and scattered"
        # (I1)
        hot = self._hcount
        assert (set(hot) == set(self._hhead) == set(self._hcl) == set(self._hcr) == set(self._hpt)
                == set(self._row))
        assert len(hot) <= 2.0 / self._alpha + 1e-9, f"|J_H| = {len(hot)} > 2/alpha"
        total = 0
        for g, size in hot.items():
            assert size > 0, f"hot group {g} is empty"
            assert size >= self._half * n, f"hot group {g}: {size} < (alpha/2)|I|"
            cl, cr, p = self._hcl[g], self._hcr[g], self._hpt[g]
            assert math.isfinite(p) and cl <= p <= cr
            mem = self.members(g)
            assert len(set(mem.tolist())) == size
            for j, iid in enumerate(mem.tolist()):
                assert self._hg[iid] == g
                assert self._hpv[iid] == (mem[j - 1] if j else -1), f"list of {g} broken"
                assert self._hlo[iid] <= cl and cr <= self._hhi[iid], f"{iid} misses core of {g}"
            row = self._row[g]
            assert self._row_g[row] == g and self._CL[row] == cl and self._CR[row] == cr
            assert self._hsizes.size[g] == size
            total += size
        assert total == hot_ids.shape[0]
        assert self._pts == sorted(self._pts) and len(self._pts) == len(hot)
        assert {g: p for p, g in zip(self._pts, self._pts_g, strict=True)} == self._hpt
        if hot:
            assert self._hsizes.best == min(hot.values())
        sizes = dict(s.group_sizes())
        assert self._ssizes.size == sizes
        for g, k in sizes.items():
            assert k < self._alpha * n, f"scattered group {g}: {k} >= alpha|I|"
        if sizes:
            assert self._ssizes.best == max(sizes.values())
        # (I2)
        all_ids, all_lo, all_hi = s.intervals()
        los = np.concatenate([all_lo, np.frombuffer(self._hlo, np.float64)[hot_ids]])
        his = np.concatenate([all_hi, np.frombuffer(self._hhi, np.float64)[hot_ids]])
        del hg
        tau = stabbing_number(los, his)
        bound = (1.0 + self._eps) * tau + 2.0 / self._alpha
        assert self.size <= bound + 1e-9, f"|J| = {self.size} > (1 + eps) tau + 2/alpha = {bound}"
        # (I3)
        moves = self.moved_into_scattered + self.moved_out_of_scattered
        assert moves <= 5 * self.updates, f"{moves} moves in {self.updates} updates"
        assert len(all_ids) == len(s)
