"""Interval joins (``model.IntervalJoin``): Allen's relations and the ISEQL joins (Piatov et al.)
over interval tuples, as subscriptions of the stabbing-set index (paper 004).

A tuple is the closed interval ``[time, end]`` (``Event.end``; a point has ``end == time``). An
interval join holds for (r, s) when the key difference ``s.key − r.key`` lies in B, the values
in A and C, and the four endpoint differences (``s.time − r.time``, ``s.time − r.end``,
``s.end − r.time``, ``s.end − r.end``) in their integer ranges; every Allen relation and ISEQL
join is such a conjunction (``IntervalJoin.allen`` / ``.iseql``). Like band joins, the kind
needs the tables' key order, and the key condition B is what the index is built on:

================  ======================================================  =====================
strategy          subscription index                                      per-tuple cost
================  ======================================================  =====================
IJ-NestedLoop     dense array of ids; per subscription a search of its    O(m log n + scanned)
                  key range and a scan of the partners in it
IJ-SSI            subscriptions split by which endpoint bounds they       O(τ log n + n_B + k_V)
                  have (a preset's shape), each class by a minimum
                  stabbing partition of its B ranges (paper 004 §2,
                  §3.1, as BJ-SSI); per group one search at its point
                  and the partners inside its loosest endpoint bounds
                  collected; with AFFECTED output counted member by
                  member (two searches bound a member's partners, one
                  branch-free loop counts them), else visited partner
                  by partner: the members by far end of B (after the
                  incoming tuple's own value selection), or a second
                  stabbing partition of the partner's value range (C
                  or A), whichever the build estimates visits fewer
IJ-Dynamic        the cheaper of the two by their cost models             (``router/interval.py``)
================  ======================================================  =====================

(m subscriptions, n stored tuples, τ the number of groups (the stabbing numbers of the classes'
B ranges), n_B the partners within a group's B ranges, k_V the (member, partner) pairs a walk
visits or counts.) On the benchmark's workload (``docs/benchmarks/interval.md``) an incoming
tuple searches 5–9 of 48 groups (the others need a partner later than any stored one), and
AFFECTED output is counted member by member over each group's collected partners (sorted by
key difference, or by value where the group has a value stage). Not built yet: a walk of each key's partners in start-time order within the window the group's endpoint
bounds allow (a group scans the partners in its B ranges and tests the window per partner).
Paper 000's per-subscription plane sweep is a baseline of ``hotjoin bench interval``, not a
strategy. Both match a whole run of tuples in one compiled call
(``interval_kernels``); one tuple is a run of one. IJ-SSI adds subscriptions to a pending list
matched by the nested loop and rebuilds its partition once the list (or the removed members)
outgrows a fraction of the index: amortised O(log m) per change.

**Ends on the matching path.** The kind interface's bundles carry the incoming tuples' ends
(``OneEvent.end``, ``EventRun.ends``; a point's end is its time), which only this kind
reads.

**Memory.** Measured with ``engine.memory_bytes()`` over 100,000 subscriptions of each kind on
an otherwise empty engine (B ranges 0–20 wide, lower ends uniform in [−10, 10]; ``overlaps``
for the interval joins): ~318 bytes per interval subscription against ~282 per band
subscription with IJ-SSI / BJ-SSI (1.13×), and ~318 against ~615 with the routers (IJ-Dynamic /
BJ-Dynamic, which keep every member's index): within 2×. An interval subscription holds
its record row (64 bytes) and endpoint row (64, ``SubscriptionColumns.irec``, allocated on the
first interval join, so the other kinds pay nothing), the columns every kind has, IJ-SSI's
four member arrays (32 bytes) and the members' value bounds in both orders (64, read in
sequence by the own-value filter); a group with a value stage adds 32 bytes per member and
direction (~348 bytes per subscription on the benchmark's workload).
``tests/matcher/joins/test_interval.py::test_memory_per_subscription`` keeps the bound.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.joins import interval_kernels as K
from hotjoin.matcher.joins.band import key_runs
from hotjoin.matcher.joins.interface import EventRun, KindIndex, OneEvent, Tables
from hotjoin.matcher.joins.protocol import BatchRows, MatchBuffer, room_of, run_kernel_many
from hotjoin.matcher.partition.stabbing import canonical_partition
from hotjoin.matcher.structures.sorted_runs import SAMPLE_EVERY
from hotjoin.matcher.subscriptions import ENDPOINT_CLIP, SubscriptionColumns

__all__ = ["INTERVAL_CLASSES", "INTERVAL_STRATEGIES", "IntervalStrategy", "NestedLoop",
           "StabbingIndex"]

INTERVAL_STRATEGIES = ("IJ-NestedLoop", "IJ-SSI")
_NO_FILTER_SEQ = np.iinfo(np.int64).max
_EMPTY_F = np.empty(0, dtype=np.float64)
_EMPTY_I = np.empty(0, dtype=np.int64)


def _partners(table: BaseTable) -> tuple[Any, ...]:
    """The kernels' view of the other side (``K.Partners`` as a plain tuple): both runs of its
    key order, its columns and its latest start time and end."""
    (mk, mp, ms), (dk, dp, ds) = key_runs(table)
    return (mk, mp, ms, dk, dp, ds, SAMPLE_EVERY, table.alive, table.values, table.times,
            table.ends, table.seqs, table.latest_time, table.latest_end)


def _subs(cols: SubscriptionColumns) -> tuple[np.ndarray, ...]:
    """``K.Subs`` as a plain tuple."""
    return (cols.rec, cols.irec, cols.mark, cols.acc)


class IntervalStrategy(KindIndex):
    """An interval-join strategy: an index over interval subscriptions (the kind interface,
    ``joins/interface.py``). Subclasses implement :meth:`_rows` (one compiled call for a run of
    tuples, rows appended to given arrays); the one-tuple path, the batch path and snapshots
    are written once here."""

    kind = "interval"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        super().__init__(cols, options, tables)
        cols.enable_intervals()
        self._out = BatchRows()

    def _rows(self, table: BaseTable, dirn: int, incoming: tuple[np.ndarray, ...], mode: int,
              buf: MatchBuffer, rows: BatchRows) -> None:
        """Append the rows ``(event, q, x)`` of the tuples ``incoming`` (``K.Incoming``)
        against ``table`` to ``rows``, each event's together; one stamp of ``buf`` per event."""
        raise NotImplementedError

    def _one(self, ev: OneEvent, run_rows: Any) -> None:
        """Match one tuple into ``ev.buf`` through ``run_rows`` (a ``_rows``-like call)."""
        if len(ev.table.order) == 0:
            return
        o = self._out
        o.n = 0
        run_rows(ev.table, ev.dirn,
                 (np.array([ev.key]), np.array([ev.value]), np.array([ev.time], dtype=np.int64),
                  np.array([ev.end], dtype=np.int64),
                  np.array([ev.seq], dtype=np.int64)), ev.mode, ev.buf, o)
        k = o.n
        if k:
            buf: MatchBuffer = ev.buf
            buf.reserve(k)
            buf.out_q[buf.n: buf.n + k] = o.q[:k]
            buf.out_s[buf.n: buf.n + k] = o.x[:k]
            buf.n += k

    def match(self, ev: OneEvent) -> None:
        """The tuple ``ev`` as a run of one (the strategy's compiled call), into ``ev.buf``."""
        if len(self):
            self._one(ev, self._rows)

    def match_many(self, run: EventRun) -> None:
        """A run of tuples in one compiled call; rows into ``run.rows`` in event order."""
        n = len(run)
        if n == 0 or not len(self) or len(run.table.order) == 0:
            return
        rows: BatchRows = run.rows
        start = rows.n
        self._rows(run.table, run.dirn,
                   (run.keys, run.values, run.times, run.ends, run.seqs), run.mode, run.buf,
                   rows)
        rows.sort_by_event(start)

    def snapshot(self, ev: OneEvent, qids: np.ndarray) -> None:
        """The nested loop over ``qids`` for the tuple ``ev`` (``Engine.result``)."""
        def rows(table: BaseTable, dirn: int, *args: Any) -> Any:
            return nested_rows(qids, self.cols, table, dirn, *args)
        self._one(ev, rows)

    def memory_bytes(self) -> int:
        """The id list, the scratch rows and the strategy's own index."""
        o = self._out
        return super().memory_bytes() + o.e.nbytes + o.q.nbytes + o.x.nbytes


def nested_rows(qids: np.ndarray, cols: SubscriptionColumns, table: BaseTable, dirn: int,
                incoming: tuple[np.ndarray, ...], mode: int, buf: MatchBuffer,
                rows: BatchRows) -> None:
    """IJ-NestedLoop's rows for the subscriptions ``qids`` (``K.nested_many``)."""
    if qids.shape[0] == 0:
        return
    run_kernel_many(K.nested_many, (qids, _partners(table), _subs(cols), incoming, (dirn, mode)),
                    incoming[0].shape[0], buf, rows, room_of(mode, qids.shape[0]))


class NestedLoop(IntervalStrategy):
    """IJ-NestedLoop: per subscription, a nested loop over the partners in its key range (what
    a user of one join per subscription runs); the baseline of IJ-SSI."""

    name = "IJ-NestedLoop"

    def _rows(self, table: BaseTable, dirn: int, *args: Any) -> Any:
        return nested_rows(self.ids.view(), self.cols, table, dirn, *args)


REBUILD_MIN = 32
"""IJ-SSI rebuilds its partition once more than ``REBUILD_MIN + built / REBUILD_PENDING``
subscriptions wait in the pending list, or more than ``REBUILD_MIN + built / REBUILD_DEAD``
built members were removed."""
REBUILD_PENDING = 8
REBUILD_DEAD = 4


STAGE_MIN = 64
"""A key group with fewer members keeps only the walk by key (no value stage)."""
STAGE_GAIN = 1.0
"""A group walks by the partner's value when that visits fewer than ``1 / STAGE_GAIN`` times
the members the walk by key would (estimated, :func:`value_stage`; 0 builds the stage for
every group of :data:`STAGE_MIN` members or more)."""
COUNT_RATIO = 16
"""With AFFECTED output a group counts its partners member by member (one branch-free loop per
member over the partners in its range) when it has at most this many members per partner that
passed its bounds, and visits the members partner by partner otherwise (``K.ssi_many``)."""
_COVER_SAMPLES = 64
_A, _C = (2, 3), (4, 5)  # a record row's columns of the value ranges A and C
_B = (0, 1)


def _empty_stage(groups: int) -> K.ValueStage:
    z = np.zeros((2, groups), dtype=np.int64)
    return K.ValueStage(z, z.copy(), _EMPTY_F, _EMPTY_I, _EMPTY_I, _EMPTY_I, _EMPTY_F,
                        _EMPTY_I, _EMPTY_F)


def cover(los: np.ndarray, his: np.ndarray) -> float:
    """How many of the ranges ``[los[i], his[i]]`` contain a typical point: the mean count
    over points spread evenly through the ranges' finite ends (all of them when no end is
    finite). The data-free estimate IJ-SSI's build compares walks by.

    >>> cover(np.array([0.0, 10.0, -np.inf]), np.array([1.0, 11.0, np.inf]))
    2.0
    >>> cover(np.full(3, -np.inf), np.full(3, np.inf))
    3.0
    """
    m = los.shape[0]
    ends = np.concatenate((los[np.isfinite(los)], his[np.isfinite(his)]))
    if ends.shape[0] == 0:
        return float(m)
    ends.sort()
    xs = ends[np.linspace(0, ends.shape[0] - 1, min(_COVER_SAMPLES, ends.shape[0]))
              .astype(np.int64)]
    inside = (np.searchsorted(np.sort(los), xs, side="right")
              - np.searchsorted(np.sort(his), xs, side="left"))
    return float(inside.mean())


def value_stage(rec: np.ndarray, members: np.ndarray, gstart: np.ndarray,
                gsize: np.ndarray) -> K.ValueStage:
    """IJ-SSI's second stage (:class:`~matcher.joins.interval_kernels.ValueStage`) over the
    key groups ``members[gstart[g] … + gsize[g]]``: for each group of at least
    :data:`STAGE_MIN` members and each direction, a minimum stabbing partition of the
    partner's value range (C of an S partner, A of an R partner) when a partner would visit
    fewer members through it than through the key walk. Estimates (:func:`cover`): by value,
    the subgroups plus the members whose range holds a typical partner value; by key, the
    members the incoming tuple's own value selects times the share whose B holds a typical
    key difference. O(m log m)."""
    groups = gsize.shape[0]
    first = np.zeros((2, groups), dtype=np.int64)
    num = np.zeros((2, groups), dtype=np.int64)
    point: list[np.ndarray] = []
    start: list[np.ndarray] = []
    size: list[np.ndarray] = []
    vh_q: list[np.ndarray] = []
    vh_v: list[np.ndarray] = []
    vl_q: list[np.ndarray] = []
    vl_v: list[np.ndarray] = []
    n_sub = n_mem = 0
    for g in np.flatnonzero(gsize >= STAGE_MIN).tolist():
        qg = members[gstart[g]: gstart[g] + gsize[g]]
        m = qg.shape[0]
        r = rec[qg]
        b_share = cover(r[:, _B[0]], r[:, _B[1]]) / m
        for which, (partner, own) in enumerate(((_C, _A), (_A, _C))):
            lo, hi = r[:, partner[0]], r[:, partner[1]]
            by_key = cover(r[:, own[0]], r[:, own[1]]) * b_share
            by_value = cover(lo, hi)
            if STAGE_GAIN * (by_value + 1) > by_key:  # at least one subgroup, whatever the split
                continue
            pts, go = canonical_partition(lo, hi)
            if STAGE_GAIN * (pts.shape[0] + by_value) > by_key:
                continue
            cnt = np.bincount(go, minlength=pts.shape[0]).astype(np.int64)
            at = np.zeros_like(cnt)
            np.cumsum(cnt[:-1], out=at[1:])
            by_hi = np.lexsort((-hi, go))
            by_lo = np.lexsort((lo, go))
            first[which, g], num[which, g] = n_sub, pts.shape[0]
            point.append(np.asarray(pts, dtype=np.float64))
            start.append(at + n_mem)
            size.append(cnt)
            vh_q.append(qg[by_hi])
            vh_v.append(hi[by_hi])
            vl_q.append(qg[by_lo])
            vl_v.append(lo[by_lo])
            n_sub += pts.shape[0]
            n_mem += m
    if not point:
        return _empty_stage(groups)

    def cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
        return np.ascontiguousarray(np.concatenate(parts), dtype=dtype)

    return K.ValueStage(first, num, cat(point, np.float64), cat(start, np.int64),
                        cat(size, np.int64), cat(vh_q, np.int64), cat(vh_v, np.float64),
                        cat(vl_q, np.int64), cat(vl_v, np.float64))


class StabbingIndex(IntervalStrategy):
    """IJ-SSI: the subscriptions grouped by a minimum stabbing partition of their B ranges
    (``partition.stabbing.canonical_partition``, Lemma 1), as flat per-group member arrays the
    kernel walks (``K.ssi_many``): by upper bound descending and lower bound ascending; big
    groups also by the partner's value range (:func:`value_stage`)."""

    name = "IJ-SSI"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        super().__init__(cols, options, tables)
        self._pending: list[int] = []
        self._pending_arr: np.ndarray | None = _EMPTY_I
        self._built = 0
        self._dead = 0
        self._live = np.zeros(64, dtype=np.bool_)
        self.points = _EMPTY_F
        self.gstart = _EMPTY_I
        self.gsize = _EMPTY_I
        self.gbound = np.zeros((0, 8), dtype=np.int64)
        self.hi_q, self.hi_v = _EMPTY_I, _EMPTY_F
        self.lo_q, self.lo_v = _EMPTY_I, _EMPTY_F
        self.hi_own = self.lo_own = np.zeros((0, 4), dtype=np.float64)
        self.stage = _empty_stage(0)

    # -- the index ---------------------------------------------------------------------------
    def _room(self, q: int) -> None:
        if q >= self._live.shape[0]:
            live = np.zeros(max(q + 1, 2 * self._live.shape[0]), dtype=np.bool_)
            live[: self._live.shape[0]] = self._live
            self._live = live

    def _add(self, q: int) -> None:
        self._pending.append(q)
        self._pending_arr = None
        self._maybe_rebuild()

    def _add_many(self, qs: np.ndarray) -> None:
        self._pending.extend(qs.tolist())
        self._pending_arr = None
        self._maybe_rebuild()

    def _remove(self, q: int) -> None:
        if q < self._live.shape[0] and self._live[q]:
            self._live[q] = False
            self._dead += 1
        else:
            self._pending.remove(q)
            self._pending_arr = None
        self._maybe_rebuild()

    def _maybe_rebuild(self) -> None:
        if (len(self._pending) > REBUILD_MIN + self._built // REBUILD_PENDING
                or self._dead > REBUILD_MIN + self._built // REBUILD_DEAD):
            self.rebuild()

    def rebuild(self) -> None:
        """Partition every live subscription anew (the pending ones included): the members
        are split by which endpoint bounds they have (a preset's shape: every ``overlaps`` join
        in one class, every ``before(δ)`` in another), each class by a minimum stabbing
        partition of its B ranges (one sort and the greedy scan of Lemma 1), then the
        per-group member orders, the group's loosest endpoint bounds and the value stage
        (:func:`value_stage`). O(m log m)."""
        qs = np.sort(self.ids.view().astype(np.int64))
        self._pending = []
        self._pending_arr = _EMPTY_I
        self._dead = 0
        self._built = int(qs.shape[0])
        if qs.shape[0]:
            self._room(int(qs[-1]))
        self._live[:] = False
        if qs.shape[0] == 0:
            self.points = _EMPTY_F
            self.gstart = self.gsize = _EMPTY_I
            self.gbound = np.zeros((0, 8), dtype=np.int64)
            self.hi_q, self.hi_v, self.lo_q, self.lo_v = _EMPTY_I, _EMPTY_F, _EMPTY_I, _EMPTY_F
            self.hi_own = self.lo_own = np.zeros((0, 4), dtype=np.float64)
            self.stage = _empty_stage(0)
            return
        self._live[qs] = True
        los = self.cols.rec[qs, 0].copy()
        his = self.cols.rec[qs, 1].copy()
        ir = self.cols.irec[qs]
        bounded = (np.abs(ir) < ENDPOINT_CLIP).astype(np.int64)
        shape = bounded @ (1 << np.arange(8, dtype=np.int64))
        classes, cls = np.unique(shape, return_inverse=True)
        g = np.empty(qs.shape[0], dtype=np.int64)
        pts: list[np.ndarray] = []
        base = 0
        for c in range(classes.shape[0]):
            at = np.flatnonzero(cls == c)
            p, go = canonical_partition(los[at], his[at])
            g[at] = np.asarray(go, dtype=np.int64) + base
            pts.append(np.asarray(p, dtype=np.float64))
            base += p.shape[0]
        points = np.concatenate(pts)
        size = np.bincount(g, minlength=points.shape[0]).astype(np.int64)
        bound = np.empty((points.shape[0], 8), dtype=np.int64)
        bound[:, 0::2] = np.iinfo(np.int64).max
        bound[:, 1::2] = np.iinfo(np.int64).min
        for j in range(0, 8, 2):
            np.minimum.at(bound[:, j], g, ir[:, j])
            np.maximum.at(bound[:, j + 1], g, ir[:, j + 1])
        self.gbound = bound
        start = np.zeros_like(size)
        np.cumsum(size[:-1], out=start[1:])
        by_hi = np.lexsort((-his, g))
        by_lo = np.lexsort((los, g))
        self.points = np.ascontiguousarray(points, dtype=np.float64)
        self.gstart, self.gsize = start, size
        self.hi_q, self.hi_v = qs[by_hi], np.ascontiguousarray(his[by_hi])
        self.lo_q, self.lo_v = qs[by_lo], np.ascontiguousarray(los[by_lo])
        own = self.cols.rec[:, 2:6]
        self.hi_own = np.ascontiguousarray(own[self.hi_q])
        self.lo_own = np.ascontiguousarray(own[self.lo_q])
        self.stage = value_stage(self.cols.rec, self.hi_q, start, size)

    def tau(self) -> int:
        """The number of stabbing groups built (the searches per tuple), plus one for a
        non-empty pending list."""
        return int(self.points.shape[0]) + (1 if self._pending else 0)

    def pending(self) -> np.ndarray:
        """The subscriptions added since the last build (matched by the nested loop)."""
        if self._pending_arr is None:
            self._pending_arr = np.array(self._pending, dtype=np.int64)
        return self._pending_arr

    # -- matching ----------------------------------------------------------------------------
    def _rows(self, table: BaseTable, dirn: int, incoming: tuple[np.ndarray, ...], mode: int,
              buf: MatchBuffer, rows: BatchRows) -> None:
        c = self.cols
        if self.points.shape[0]:
            groups = (self.points, self.gstart, self.gsize, self.gbound, self.hi_q,
                      self.hi_v, self.lo_q, self.lo_v, self.hi_own, self.lo_own, self._live)
            run_kernel_many(K.ssi_many, (groups, tuple(self.stage), _partners(table), _subs(c),
                                         incoming, (dirn, mode), COUNT_RATIO),
                            incoming[0].shape[0], buf, rows, room_of(mode, self.hi_q.shape[0]))
        if self._pending:
            nested_rows(self.pending(), c, table, dirn, incoming, mode, buf, rows)

    # -- introspection -----------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """``subscriptions``, ``tau`` (groups searched per tuple), ``pending``."""
        return {"subscriptions": len(self), "tau": self.tau(), "pending": len(self._pending)}

    def check_invariants(self) -> None:
        """Every live subscription is built (and live) or pending, exactly once; each group's
        members contain its stabbing point and are in the kernel's orders."""
        built = set(self.hi_q[self._live[self.hi_q]].tolist()) if self.hi_q.shape[0] else set()
        assert built.isdisjoint(self._pending)
        assert built | set(self._pending) == set(self.ids.view().tolist())
        assert len(self._pending) == len(set(self._pending))
        for g in range(self.points.shape[0]):
            a, m = int(self.gstart[g]), int(self.gsize[g])
            p = self.points[g]
            assert (self.lo_v[a: a + m] <= p).all() and (self.hi_v[a: a + m] >= p).all()
            hv, lv = self.hi_v[a: a + m], self.lo_v[a: a + m]
            assert (hv[1:] <= hv[:-1]).all() and (lv[1:] >= lv[:-1]).all()
            ir = self.cols.irec[self.hi_q[a: a + m]]
            assert (ir[:, 0::2] >= self.gbound[g, 0::2]).all()
            assert (ir[:, 1::2] <= self.gbound[g, 1::2]).all()
            own = self.cols.rec[:, 2:6]
            assert (self.hi_own[a: a + m] == own[self.hi_q[a: a + m]]).all()
            assert (self.lo_own[a: a + m] == own[self.lo_q[a: a + m]]).all()
            self._check_stage(g, a, m)

    def _check_stage(self, g: int, a: int, m: int) -> None:
        """Group g's value subgroups (if any) hold exactly its members, each subgroup's ranges
        contain its point and are in the kernel's orders."""
        st = self.stage
        for which, (c0, c1) in enumerate(((4, 5), (2, 3))):
            u0, nu = int(st.first[which, g]), int(st.num[which, g])
            if nu == 0:
                continue
            seen: list[int] = []
            for u in range(u0, u0 + nu):
                k, z = int(st.start[u]), int(st.start[u] + st.size[u])
                p = st.point[u]
                hq, hv, lq, lv = st.vh_q[k:z], st.vh_v[k:z], st.vl_q[k:z], st.vl_v[k:z]
                assert set(hq.tolist()) == set(lq.tolist())
                assert (hv == self.cols.rec[hq, c1]).all() and (lv == self.cols.rec[lq, c0]).all()
                assert (hv >= p).all() and (lv <= p).all()
                assert (hv[1:] <= hv[:-1]).all() and (lv[1:] >= lv[:-1]).all()
                seen.extend(hq.tolist())
            assert sorted(seen) == sorted(self.hi_q[a: a + m].tolist())

    def memory_bytes(self) -> int:
        """The id list, the groups, the member orders (with their value bounds), the value
        stage and the live flags."""
        return (super().memory_bytes() + self._live.nbytes + self.points.nbytes
                + self.gstart.nbytes + self.gsize.nbytes + self.gbound.nbytes
                + self.hi_q.nbytes + self.hi_v.nbytes
                + self.lo_q.nbytes + self.lo_v.nbytes + self.hi_own.nbytes
                + self.lo_own.nbytes + sum(a.nbytes for a in self.stage)
                + 8 * len(self._pending))


INTERVAL_CLASSES: dict[str, type[IntervalStrategy]] = {
    "IJ-NestedLoop": NestedLoop,
    "IJ-SSI": StabbingIndex,
}
"""The static interval-join strategies by name (the registry's, ``matcher/kinds.py``)."""
