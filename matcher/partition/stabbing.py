"""Stabbing partitions of closed intervals (paper 004, Section 2.1, Lemmas 1-2, Appendix A.1).

A *stabbing partition* splits a set of closed intervals ``[lo, hi]`` into groups whose members
share a common point, the group's *stabbing point*.  The stabbing set index (SSI) keeps one small
structure per group, so the fewer the groups, the more work the members share (Section 2.1).

* :func:`canonical_partition` -- the greedy partition of Lemma 1, whose size is the minimum,
  ``tau(I)``.  ``O(n log n)``: one sort plus a compiled linear scan.
* :class:`DynamicStabbingPartition` -- Lemma 2 by the lazy strategy of Appendix A.1 with both of
  its improvements: a new interval joins the group whose common intersection it meets, and the
  partition is rebuilt only when it could otherwise exceed ``(1 + eps) tau(I)`` groups.
  Changes are pushed to a :class:`PartitionListener` (the SSI's per-group indexes).

Intervals may be unbounded (``lo = -inf`` or ``hi = +inf``) but must contain a finite point,
because every stabbing point is finite: for a group with common intersection ``[L, R]`` it is
``R`` if finite, else ``L`` if finite, else ``0.0``.

>>> points, group_of = canonical_partition(np.array([0.0, 1.0, 5.0]), np.array([1.0, 2.0, 6.0]))
>>> points.tolist(), group_of.tolist()
([1.0, 6.0], [0, 0, 1])
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Iterator
from typing import Literal, Protocol

import numpy as np
from numba import njit
from sortedcontainers import SortedList

__all__ = [
    "DynamicStabbingPartition",
    "GroupMirror",
    "PartitionListener",
    "StabbingGroups",
    "canonical_partition",
    "snapshot_of",
    "stabbing_number",
]

_INF = math.inf


# ---- Lemma 1: the canonical (greedy) partition -------------------------------------------------


@njit(cache=True)
def _greedy_scan(
    los: np.ndarray, his: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Greedy scan of Lemma 1 over intervals already sorted by ``lo`` (``n >= 1``).

    Returns, per interval, its group (0, 1, ... in scan order) and, per group, the common
    intersection ``[core_lo, core_hi]`` and the position of a member with the smallest ``hi``.
    Those members (the *witnesses*) are pairwise disjoint, which certifies ``tau >= #groups``.
    """
    n = los.shape[0]
    group = np.empty(n, np.int64)
    core_lo = np.empty(n, np.float64)
    core_hi = np.empty(n, np.float64)
    witness = np.empty(n, np.int64)
    t = 0
    core_lo[0] = los[0]
    core_hi[0] = his[0]
    witness[0] = 0
    group[0] = 0
    for i in range(1, n):
        lo = los[i]
        hi = his[i]
        if lo <= core_hi[t]:
            core_lo[t] = lo  # sorted by lo: the newest lo is the largest
            if hi < core_hi[t]:
                core_hi[t] = hi
                witness[t] = i
        else:
            t += 1
            core_lo[t] = lo
            core_hi[t] = hi
            witness[t] = i
        group[i] = t
    t += 1
    return group, core_lo[:t].copy(), core_hi[:t].copy(), witness[:t].copy()


def _pick_point(lo: float, hi: float) -> float:
    """The stabbing point of a group with common intersection ``[lo, hi]`` (module docstring)."""
    if hi != _INF:
        return hi
    if lo != -_INF:
        return lo
    return 0.0


def _pick_points(core_lo: np.ndarray, core_hi: np.ndarray) -> np.ndarray:
    """Vectorised :func:`_pick_point`."""
    return np.where(
        np.isfinite(core_hi), core_hi, np.where(np.isfinite(core_lo), core_lo, 0.0)
    ).astype(np.float64)


def _check_arrays(los: object, his: object) -> tuple[np.ndarray, np.ndarray]:
    """Validate interval endpoint arrays: 1-D, same length, ``lo <= hi``, a finite point inside."""
    lo = np.ascontiguousarray(los, dtype=np.float64)
    hi = np.ascontiguousarray(his, dtype=np.float64)
    if lo.ndim != 1 or hi.shape != lo.shape:
        raise ValueError(f"los and his must be 1-D of equal length, got {lo.shape} and {hi.shape}")
    bad = ~(lo <= hi) | (lo == _INF) | (hi == -_INF)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"invalid interval [{lo[i]}, {hi[i]}] at position {i}")
    return lo, hi


def _check_interval(lo: float, hi: float) -> tuple[float, float]:
    """Validate one interval; same rules as :func:`_check_arrays`."""
    lo = float(lo)
    hi = float(hi)
    if not lo <= hi or lo == _INF or hi == -_INF:
        raise ValueError(f"invalid interval [{lo}, {hi}]: need lo <= hi and a finite point inside")
    return lo, hi


def _canonical(
    los: np.ndarray, his: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Greedy partition of validated arrays: ``(order, group_sorted, core_lo, core_hi, witness)``.

    ``order`` sorts the input by ``lo``; ``group_sorted`` and ``witness`` index that order.
    """
    order = np.argsort(los)  # ties in lo always share a group, so any order will do
    if los.shape[0] == 0:
        e = np.empty(0, np.int64)
        f = np.empty(0, np.float64)
        return order, e, f, f.copy(), e.copy()
    group, core_lo, core_hi, witness = _greedy_scan(los[order], his[order])
    return order, group, core_lo, core_hi, witness


def canonical_partition(los: np.ndarray, his: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lemma 1: the canonical (minimum) stabbing partition of ``[los[i], his[i]]``, ``O(n log n)``.

    Scans by increasing ``lo`` and closes a group as soon as an interval misses the common
    intersection of the open one (Section 2.1).  Returns ``(points, group_of)``: ``points`` is
    ``float64[tau]`` in increasing order, ``group_of[i]`` the index of interval ``i``'s group.

    >>> canonical_partition(np.array([0.0, 1.0]), np.array([1.0, 2.0]))[0].tolist()
    [1.0]
    """
    lo, hi = _check_arrays(los, his)
    order, group, core_lo, core_hi, _ = _canonical(lo, hi)
    group_of = np.empty(lo.shape[0], np.int64)
    group_of[order] = group
    return _pick_points(core_lo, core_hi), group_of


def stabbing_number(los: np.ndarray, his: np.ndarray) -> int:
    """``tau(I)``: the size of the smallest stabbing partition (Lemma 1), ``O(n log n)``.

    >>> stabbing_number(np.array([0.0, 2.0, -np.inf]), np.array([1.0, 3.0, 0.5]))
    2
    """
    return int(canonical_partition(los, his)[0].shape[0])


# ---- listener protocol and read-only view ---------------------------------------------------


class StabbingGroups(Protocol):
    """Read-only view of a stabbing partition; what a listener may read in ``reset``."""

    def groups(self) -> Iterator[tuple[int, float, np.ndarray]]:
        """Yield ``(gid, point, member iids as int64)`` for every group."""
        ...

    def group_of(self, iid: int) -> int:
        """Group id of live interval ``iid``."""
        ...

    def point(self, gid: int) -> float:
        """Stabbing point of group ``gid``."""
        ...

    def __len__(self) -> int:
        """Number of live intervals."""
        ...


class PartitionListener(Protocol):
    """Receives every change of a stabbing partition, in an order that keeps it consistent.

    Group ids are never reused.  ``point_moved`` comes *before* the ``member_added`` that
    forced it, so at every callback the point of a group lies inside all its listed members.
    """

    def reset(self, partition: StabbingGroups) -> None:
        """Every group was replaced: rebuild from ``partition.groups()``."""
        ...

    def group_added(self, gid: int, point: float) -> None:
        """A new, still empty group."""
        ...

    def group_removed(self, gid: int) -> None:
        """Group ``gid`` is gone; called only after its last ``member_removed``."""
        ...

    def member_added(self, gid: int, iid: int) -> None:
        """Interval ``iid`` joined group ``gid``."""
        ...

    def member_removed(self, gid: int, iid: int) -> None:
        """Interval ``iid`` left group ``gid``."""
        ...

    def point_moved(self, gid: int, point: float) -> None:
        """The stabbing point of ``gid`` changed (it is still inside every member)."""
        ...


class GroupMirror:
    """Reference :class:`PartitionListener`: rebuilds the partition from the callbacks alone.

    Used by the tests to check that the callbacks describe the partition exactly; it also
    asserts the protocol's preconditions (no unknown group, no duplicate member, ...).

    >>> mirror = GroupMirror()
    >>> part = DynamicStabbingPartition(listener=mirror)
    >>> part.insert(7, 0.0, 1.0)
    >>> mirror.snapshot()[part.group_of(7)]
    (1.0, frozenset({7}))
    """

    def __init__(self) -> None:
        self.points: dict[int, float] = {}
        self.members: dict[int, set[int]] = {}
        self.of: dict[int, int] = {}
        self.resets = 0
        self.calls = 0

    def reset(self, partition: StabbingGroups) -> None:
        """Forget everything and copy ``partition.groups()``."""
        self.resets += 1
        self.calls += 1
        self.points.clear()
        self.members.clear()
        self.of.clear()
        for gid, point, members in partition.groups():
            assert gid not in self.points, f"group {gid} listed twice"
            self.points[gid] = point
            self.members[gid] = set(members.tolist())
            for iid in self.members[gid]:
                assert iid not in self.of, f"interval {iid} in two groups"
                self.of[iid] = gid

    def group_added(self, gid: int, point: float) -> None:
        """Record an empty group."""
        self.calls += 1
        assert gid not in self.points, f"group {gid} added twice"
        assert math.isfinite(point)
        self.points[gid] = point
        self.members[gid] = set()

    def group_removed(self, gid: int) -> None:
        """Drop an empty group."""
        self.calls += 1
        assert not self.members[gid], f"group {gid} removed while it has members"
        del self.points[gid]
        del self.members[gid]

    def member_added(self, gid: int, iid: int) -> None:
        """Add ``iid`` to ``gid``."""
        self.calls += 1
        assert iid not in self.of, f"interval {iid} added twice"
        self.members[gid].add(iid)
        self.of[iid] = gid

    def member_removed(self, gid: int, iid: int) -> None:
        """Remove ``iid`` from ``gid``."""
        self.calls += 1
        assert self.of.pop(iid) == gid, f"interval {iid} removed from the wrong group"
        self.members[gid].remove(iid)

    def point_moved(self, gid: int, point: float) -> None:
        """Move the point of ``gid``."""
        self.calls += 1
        assert gid in self.points and math.isfinite(point)
        self.points[gid] = point

    def snapshot(self) -> dict[int, tuple[float, frozenset[int]]]:
        """``{gid: (point, members)}`` as the callbacks describe it."""
        return {g: (self.points[g], frozenset(m)) for g, m in self.members.items()}


def snapshot_of(view: StabbingGroups) -> dict[int, tuple[float, frozenset[int]]]:
    """``{gid: (point, members)}`` of a view, comparable with :meth:`GroupMirror.snapshot`."""
    return {g: (p, frozenset(m.tolist())) for g, p, m in view.groups()}


# ---- Lemma 2 / Appendix A.1: the dynamic partition -------------------------------------------


class DynamicStabbingPartition:
    """A stabbing partition of a changing interval set with at most ``(1 + eps) tau(I)`` groups.

    Appendix A.1 (lazy strategy), with both improvements the paper describes:

    1. *Join by intersection.*  Each group keeps a *core* ``[L, R]``: the intersection of all
       intervals that joined it since it was made -- a subset of its members' common
       intersection (a deletion may widen that, never the core).  Cores are pairwise disjoint
       and ordered: true after a greedy rebuild; a joining interval only shrinks a core; an
       interval that meets no core becomes a new core, disjoint from the rest.  So the first
       core with ``R >= lo`` (one bisection) is the only candidate: if it misses ``[lo, hi]``,
       so do all.  A meeting interval joins that group, the core shrinks to the overlap and
       the point moves (``point_moved``) only if it left the core; else a singleton group is
       made.
    2. *Relaxed trigger.*  The partition is rebuilt (Lemma 1, then ``listener.reset``) only when
       ``|P| >= (1 + eps)(tau0 - m)``.  With ``trigger="deletions"`` ``m`` is, as in the paper,
       the number of intervals of the last rebuild's set deleted since.  With the default
       ``trigger="witness"`` ``m`` counts only deleted *witnesses*: one smallest-``hi`` member
       per greedy group, ``tau0`` pairwise disjoint intervals.  Disjoint intervals need
       distinct stabbing points, so the live witnesses still prove ``tau(I) >= tau0 - m`` and
       the size bound holds; as witnesses are old intervals, this trigger fires only when the
       paper's would.  On clustered data (few groups, many members) it avoids nearly every
       rebuild, which the paper's trigger would run every ``~eps tau0 / (1 + eps)`` updates.

    Invariant: every member contains its group's core, which contains the group's point;
    groups are non-empty; ``|P| <= (1 + eps) tau(I)``.

    Complexity: ``insert`` and ``delete`` ``O(log tau)`` plus, amortised, the rebuilds
    (``O(n log n)`` each, at most one per ``eps tau0 / (1 + eps)`` updates; far rarer with
    the witness trigger); ``insert_many`` of ``k`` intervals ``O((n + k) log(n + k))`` when it
    rebuilds; ``groups`` ``O(n)``; ``group_of``, ``point``, ``interval`` ``O(1)``.
    Per-interval state lives in flat ``array`` columns indexed by a slot, so a rebuild is a
    few vectorised passes and no per-interval Python objects are made.

    >>> part = DynamicStabbingPartition(epsilon=1.0)
    >>> part.insert_many([1, 2, 3], [0.0, 0.5, 4.0], [1.0, 2.0, 5.0])
    >>> part.size, part.point(part.group_of(1)), part.group_of(1) == part.group_of(2)
    (2, 1.0, True)
    >>> part.insert(4, 0.8, 0.9)   # meets the core [0.5, 1.0]: joins, the point moves to 0.9
    >>> part.point(part.group_of(4)), part.size
    (0.9, 2)
    """

    def __init__(
        self,
        epsilon: float = 1.0,
        listener: PartitionListener | None = None,
        *,
        trigger: Literal["witness", "deletions"] = "witness",
    ) -> None:
        if not (epsilon > 0 and math.isfinite(epsilon)):
            raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
        if trigger not in ("witness", "deletions"):
            raise ValueError(f"trigger must be 'witness' or 'deletions', got {trigger!r}")
        self._eps = float(epsilon)
        self._scale = 1.0 + self._eps
        self._listener = listener
        self._witness_mode = trigger == "witness"
        # per interval: iid -> slot; columns by slot (a free slot has lo = NaN)
        self._slot: dict[int, int] = {}
        self._lo = array("d")
        self._hi = array("d")
        self._gof = array("q")
        self._ids = array("q")
        self._free: list[int] = []
        # per group
        self._members: dict[int, set[int]] = {}
        self._core_lo: dict[int, float] = {}
        self._core_hi: dict[int, float] = {}
        self._point: dict[int, float] = {}
        self._keys: SortedList = SortedList()  # core_hi of every group (pairwise distinct)
        self._by_hi: dict[float, int] = {}  # core_hi -> gid
        self._next_gid = 0
        # reconstruction trigger state
        self._tau0 = 0
        self._witnesses: set[int] = set()
        self._fresh: set[int] = set()  # live intervals inserted since the last rebuild
        self._m_deleted = 0  # paper's m: deletions from the last rebuild's set
        self._m_witness = 0  # deleted witnesses
        self._limit = 0.0  # rebuild when |P| >= _limit
        #: number of reconstruction stages run so far
        self.reconstructions = 0

    # -- view ---------------------------------------------------------------------------
    def __len__(self) -> int:
        """Number of live intervals."""
        return len(self._slot)

    def __contains__(self, iid: object) -> bool:
        """Whether ``iid`` is a live interval."""
        return iid in self._slot

    def __repr__(self) -> str:
        return (
            f"DynamicStabbingPartition(n={len(self)}, groups={self.size}, eps={self._eps}, "
            f"reconstructions={self.reconstructions})"
        )

    @property
    def size(self) -> int:
        """``|P|``: the current number of groups."""
        return len(self._members)

    stabbing_number = size

    @property
    def epsilon(self) -> float:
        """The approximation parameter: ``|P| <= (1 + epsilon) tau(I)``."""
        return self._eps

    @property
    def tau0(self) -> int:
        """``tau`` of the set at the last reconstruction."""
        return self._tau0

    @property
    def deleted_since_rebuild(self) -> int:
        """The paper's ``m``: intervals of the last rebuild's set deleted since."""
        return self._m_deleted

    def interval(self, iid: int) -> tuple[float, float]:
        """``(lo, hi)`` of live interval ``iid`` (``KeyError`` if unknown)."""
        s = self._slot[iid]
        return self._lo[s], self._hi[s]

    def group_of(self, iid: int) -> int:
        """Group id of live interval ``iid`` (``KeyError`` if unknown)."""
        return self._gof[self._slot[iid]]

    def point(self, gid: int) -> float:
        """Stabbing point of group ``gid``."""
        return self._point[gid]

    def core(self, gid: int) -> tuple[float, float]:
        """The maintained core of ``gid``: inside every member, contains the point."""
        return self._core_lo[gid], self._core_hi[gid]

    def members(self, gid: int) -> np.ndarray:
        """Member iids of group ``gid`` (int64, unordered)."""
        m = self._members[gid]
        return np.fromiter(m, np.int64, len(m))

    def group_size(self, gid: int) -> int:
        """Number of members of group ``gid``."""
        return len(self._members[gid])

    def group_sizes(self) -> Iterator[tuple[int, int]]:
        """Yield ``(gid, number of members)`` for every group; ``O(tau)``."""
        for g, m in self._members.items():
            yield g, len(m)

    def groups(self) -> Iterator[tuple[int, float, np.ndarray]]:
        """Yield ``(gid, point, member iids)`` by increasing point; ``O(n)`` in total."""
        by_hi, point, members = self._by_hi, self._point, self._members
        for r in list(self._keys):
            g = by_hi[r]
            m = members[g]
            yield g, point[g], np.fromiter(m, np.int64, len(m))

    def points(self) -> np.ndarray:
        """Stabbing points of all groups, increasing (the stabbing set ``P``)."""
        by_hi, point = self._by_hi, self._point
        return np.fromiter((point[by_hi[r]] for r in self._keys), np.float64, len(self._keys))

    def intervals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(iids, los, his)`` of all live intervals (copies, slot order)."""
        lo = np.frombuffer(self._lo, np.float64)
        live = np.flatnonzero(~np.isnan(lo))
        out = (
            np.frombuffer(self._ids, np.int64)[live],
            lo[live],
            np.frombuffer(self._hi, np.float64)[live],
        )
        del lo
        return out

    # -- updates ------------------------------------------------------------------------
    def insert(self, iid: int, lo: float, hi: float) -> None:
        """Add interval ``iid = [lo, hi]``; ``ValueError`` if ``iid`` is live or ``lo > hi``."""
        iid = int(iid)
        if iid in self._slot:
            raise ValueError(f"interval {iid} is already present")
        lo = float(lo)
        hi = float(hi)
        if not lo <= hi or lo == _INF or hi == -_INF:
            _check_interval(lo, hi)  # raises the error
        if self._add(iid, lo, hi) and len(self._members) >= self._limit:
            self._reconstruct()

    def _new_slots(self, ids: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        """Store the columns of a validated batch in free or new slots (group ids left unset)."""
        k = ids.shape[0]
        nf = min(k, len(self._free))
        reuse = self._free[len(self._free) - nf :]
        del self._free[len(self._free) - nf :]
        if nf:
            at = np.array(reuse, np.int64)
            np.frombuffer(self._lo, np.float64)[at] = lo[:nf]
            np.frombuffer(self._hi, np.float64)[at] = hi[:nf]
            np.frombuffer(self._ids, np.int64)[at] = ids[:nf]
        start = len(self._lo)
        self._lo.frombytes(lo[nf:].tobytes())
        self._hi.frombytes(hi[nf:].tobytes())
        self._ids.frombytes(ids[nf:].tobytes())
        self._gof.frombytes(np.full(k - nf, -1, np.int64).tobytes())
        new = reuse + list(range(start, start + k - nf))
        self._slot.update(zip(ids.tolist(), new, strict=True))

    def _add(self, iid: int, lo: float, hi: float) -> bool:
        """Insert without checks or trigger; returns whether a new group was made."""
        free = self._free
        if free:  # inlined _new_slot: this is the hot path
            s = free.pop()
            self._lo[s] = lo
            self._hi[s] = hi
            self._ids[s] = iid
        else:
            s = len(self._lo)
            self._lo.append(lo)
            self._hi.append(hi)
            self._ids.append(iid)
            self._gof.append(-1)
        self._slot[iid] = s
        self._fresh.add(iid)
        keys = self._keys
        lst = self._listener
        k = keys.bisect_left(lo)
        if k < len(keys):
            r = keys[k]
            g = self._by_hi[r]
            cl = self._core_lo[g]
            if cl <= hi:  # the core [cl, r] meets [lo, hi]: join g
                if lo > cl:
                    self._core_lo[g] = cl = lo
                if hi < r:
                    del keys[k]
                    keys.add(hi)
                    del self._by_hi[r]
                    self._by_hi[hi] = g
                    self._core_hi[g] = r = hi
                p = self._point[g]
                if p < lo or p > hi:
                    p = _pick_point(cl, r)
                    self._point[g] = p
                    if lst is not None:
                        lst.point_moved(g, p)
                self._members[g].add(iid)
                self._gof[s] = g
                if lst is not None:
                    lst.member_added(g, iid)
                return False
        g = self._next_gid
        self._next_gid = g + 1
        p = _pick_point(lo, hi)
        self._members[g] = {iid}
        self._core_lo[g] = lo
        self._core_hi[g] = hi
        self._point[g] = p
        keys.add(hi)
        self._by_hi[hi] = g
        self._gof[s] = g
        if lst is not None:
            lst.group_added(g, p)
            lst.member_added(g, iid)
        return True

    def delete(self, iid: int) -> None:
        """Remove live interval ``iid`` (``KeyError`` if unknown); an emptied group is dropped."""
        s = self._slot.pop(iid)
        self._lo[s] = math.nan
        self._free.append(s)
        fresh = self._fresh
        if iid in fresh:
            fresh.remove(iid)
        else:
            self._m_deleted += 1
            if not self._witness_mode:
                self._limit = self._scale * (self._tau0 - self._m_deleted)
            if iid in self._witnesses:
                self._witnesses.remove(iid)
                self._m_witness += 1
                if self._witness_mode:
                    self._limit = self._scale * (self._tau0 - self._m_witness)
        g = self._gof[s]
        mem = self._members[g]
        mem.remove(iid)
        lst = self._listener
        if lst is not None:
            lst.member_removed(g, iid)
        if not mem:
            self._drop_group(g)
        if len(self._members) >= self._limit:
            self._reconstruct()

    def _drop_group(self, g: int) -> None:
        """Remove the (empty) group ``g`` and tell the listener."""
        r = self._core_hi.pop(g)
        self._keys.remove(r)
        del self._by_hi[r]
        del self._members[g]
        del self._core_lo[g]
        del self._point[g]
        if self._listener is not None:
            self._listener.group_removed(g)

    def pop_group(
        self, gid: int, *, notify_members: bool = True
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Delete every member of group ``gid`` at once; returns their ``(iids, los, his)``.

        Same effect as deleting them one by one (the hotspot tracker promotes whole groups
        this way, Section 2.2), but vectorised; ``O(size + log tau)``.  With
        ``notify_members=False`` the listener hears only ``group_removed`` (for listeners
        that track groups, not members, such as the tracker's size index).
        """
        mem = self._members[gid]
        k = len(mem)
        id_list = list(mem)
        pop = self._slot.pop
        slot_list = [pop(i) for i in id_list]
        slots = np.array(slot_list, np.int64)
        lo_col = np.frombuffer(self._lo, np.float64)
        los = lo_col[slots]
        lo_col[slots] = math.nan
        del lo_col  # release the buffer export
        his = np.frombuffer(self._hi, np.float64)[slots]
        self._free.extend(slot_list)
        fresh = len(self._fresh)
        self._fresh -= mem
        self._m_deleted += k - (fresh - len(self._fresh))
        gone = self._witnesses & mem
        self._witnesses -= gone
        self._m_witness += len(gone)
        m = self._m_witness if self._witness_mode else self._m_deleted
        self._limit = self._scale * (self._tau0 - m)
        lst = self._listener
        if lst is not None and notify_members:
            for iid in id_list:
                lst.member_removed(gid, iid)
        mem.clear()
        self._drop_group(gid)
        iids = np.array(id_list, np.int64)
        if len(self._members) >= self._limit:
            self._reconstruct()
        return iids, los, his

    def insert_many(self, iids: Iterable[int], los: Iterable[float], his: Iterable[float]) -> None:
        """Insert many intervals; the result is as if inserted one by one, in order.

        All are validated first (nothing changes on error).  When the batch is large compared
        with the live set, the whole set is rebuilt once (one ``reset`` instead of ``k`` calls).
        """
        ids = np.asarray(iids, dtype=np.int64).ravel()
        lo, hi = _check_arrays(los, his)
        if ids.shape != lo.shape:
            raise ValueError("iids, los and his must have the same length")
        k = ids.shape[0]
        if k == 0:
            return
        id_list = ids.tolist()
        if len(set(id_list)) != k:
            raise ValueError("duplicate iid in the batch")
        slot = self._slot
        present = [i for i in id_list if i in slot]
        if present:
            raise ValueError(f"interval {present[0]} is already present")
        lo_list = lo.tolist()
        hi_list = hi.tolist()
        if k >= 32 and 12 * k >= len(slot) + k:
            self._new_slots(ids, lo, hi)
            self._reconstruct()
            return
        for iid, a, b in zip(id_list, lo_list, hi_list, strict=True):
            if self._add(iid, a, b) and len(self._members) >= self._limit:
                self._reconstruct()

    def rebuild(self) -> None:
        """Force a reconstruction stage now (canonical partition, then ``reset``)."""
        self._reconstruct()

    def _compact(self) -> None:
        """Drop free slots (after many deletions) so a rebuild scans only live ones."""
        iids, los, his = self.intervals()
        self._lo = array("d", los.tobytes())
        self._hi = array("d", his.tobytes())
        self._ids = array("q", iids.tobytes())
        self._gof = array("q", bytes(8 * iids.shape[0]))
        self._free = []
        self._slot = dict(zip(iids.tolist(), range(iids.shape[0]), strict=True))

    def _reconstruct(self) -> None:
        """Appendix A.1 reconstruction stage: Lemma 1 on the live set, then ``listener.reset``."""
        if len(self._free) > len(self._slot) + 1024:
            self._compact()
        lo_all = np.frombuffer(self._lo, np.float64)
        slots = np.flatnonzero(~np.isnan(lo_all))
        los = lo_all[slots]
        his = np.frombuffer(self._hi, np.float64)[slots]
        order, group, core_lo, core_hi, witness = _canonical(los, his)
        tau = core_lo.shape[0]
        points = _pick_points(core_lo, core_hi)
        first = self._next_gid
        self._next_gid = first + tau
        gids = np.arange(first, first + tau, dtype=np.int64)
        sorted_slots = slots[order]
        np.frombuffer(self._gof, np.int64)[sorted_slots] = gids[group]
        sorted_iids = np.frombuffer(self._ids, np.int64)[sorted_slots]
        del lo_all  # release the buffer export: the columns may grow again
        bounds = np.searchsorted(group, np.arange(tau + 1)).tolist()
        id_list = sorted_iids.tolist()
        gid_list = gids.tolist()
        chi = core_hi.tolist()
        self._members = {g: set(id_list[bounds[j] : bounds[j + 1]]) for j, g in enumerate(gid_list)}
        self._core_lo = dict(zip(gid_list, core_lo.tolist(), strict=True))
        self._core_hi = dict(zip(gid_list, chi, strict=True))
        self._point = dict(zip(gid_list, points.tolist(), strict=True))
        self._keys = SortedList(chi)
        self._by_hi = dict(zip(chi, gid_list, strict=True))
        self._tau0 = tau
        self._witnesses = set(sorted_iids[witness].tolist())
        self._fresh = set()
        self._m_deleted = 0
        self._m_witness = 0
        self._limit = self._scale * tau
        self.reconstructions += 1
        if self._listener is not None:
            self._listener.reset(self)

    # -- checking -----------------------------------------------------------------------
    def check_invariants(self) -> None:
        """Assert the invariant of Lemma 2 and the internal bookkeeping; ``O(n log n)``."""
        n = len(self._slot)
        cap = len(self._lo)
        assert len(self._hi) == len(self._ids) == len(self._gof) == cap
        assert len(self._free) + n == cap and len(set(self._free)) == len(self._free)
        for s in self._free:
            assert math.isnan(self._lo[s])
        for iid, s in self._slot.items():
            assert self._ids[s] == iid and not math.isnan(self._lo[s])
        assert set(self._members) == set(self._core_lo) == set(self._core_hi) == set(self._point)
        assert len(self._keys) == len(self._members) == len(self._by_hi)
        seen = 0
        prev_hi = -_INF
        first = True
        for r in self._keys:
            g = self._by_hi[r]
            cl, ch, p = self._core_lo[g], self._core_hi[g], self._point[g]
            assert ch == r
            assert cl <= p <= ch and math.isfinite(p), f"group {g}: point {p} not in [{cl}, {ch}]"
            assert first or cl > prev_hi, "cores must be pairwise disjoint and ordered"
            first = False
            prev_hi = ch
            mem = self._members[g]
            assert mem, f"group {g} is empty"
            for iid in mem:
                s = self._slot[iid]
                assert self._gof[s] == g
                assert self._lo[s] <= cl and ch <= self._hi[s], f"{iid} misses the core of {g}"
            seen += len(mem)
        assert seen == n
        assert self._fresh <= set(self._slot) and self._witnesses <= set(self._slot)
        _, los, his = self.intervals()
        tau = stabbing_number(los, his)
        m = self._m_witness if self._witness_mode else self._m_deleted
        assert self._m_witness <= self._m_deleted, "a deleted witness is a deleted old interval"
        assert self._limit == self._scale * (self._tau0 - m)
        assert tau >= self._tau0 - m, "the lower bound on tau must hold"
        if n:
            assert len(self._members) < self._limit, "a due reconstruction was not run"
        assert len(self._members) <= self._scale * tau, (
            f"|P| = {len(self._members)} > (1 + {self._eps}) * tau = {self._scale * tau}"
        )
