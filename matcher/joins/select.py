"""Select joins ``r.key == s.key ∧ r.value ∈ A ∧ s.value ∈ C``: the five strategies of §3.2/§4.1.

An incoming tuple x of side R (S) with key b and value v affects q iff v lies in q's *own* range
(A for R, C for S) and some partner of key b has its value in q's *other* range. Every strategy
reads the partners of key b from the other side's
:class:`~matcher.structures.key_index.KeyIndex` (one dict lookup, then a sorted substructure) and
runs one numba kernel of :mod:`matcher.joins.select_kernels`:

==================  ================================================  =========================
strategy            subscription index (per direction R / S)          per-event cost (Thm. 3)
==================  ================================================  =========================
SJ-JoinFirst        one R-tree on the rectangles A × C                O(log m + m' g(n) + k)
SJ-SelectFirst      stabbing partition of the own ranges (A / C),     O(τ_own + m' + n'
                    scan-ordered, partner bucket table per tuple      + k)
SJ-Vanilla          dense array of ids                                O(n log m' + k)
SJ-SSI              stabbing partition of the other ranges (C / A),   O(τ log m' + candidates
                    per group two scan-ordered runs (ScanRuns)        + k)
SJ-Hotspot          SJ-SSI on the α-hotspots of the tracker (Thm. 1),  O(α⁻¹(log m' + g(n))
                    per tuple the cheaper of SJ-SelectFirst and        + min(n'' log m',
                    SJ-SSI on the scattered subscriptions              τ_S log m') + k)
==================  ================================================  =========================

Per stabbing group the paper probes an R-tree with two join result points (§3.2.2); here a group
is two runs sorted by the other range's lower and upper end with the own bounds copied in, and
the probe scans the two prefixes that can hold a partner without data-dependent branches
(:mod:`matcher.structures.scan_runs`, ``select_kernels.sj_scan``): ~2 ns per candidate against
~8 ns with a branch (``docs/benchmarks/engine.md``). COUNT (AFFECTED) takes each
affected subscription's pair count from two binary searches over the key's sorted values.

SJ-Hotspot's scattered part: the paper runs SJ-SelectFirst there (§3.2.3, §5.1 Fig. 9), which is
right when stabbing groups cost much more to probe than selected subscriptions. With flat
kernels a group probe costs a tenth of a selected subscription (one search and a root test
against a row read and two searches), so on scattered workloads like Fig. 9's left end SJ-SSI
beats SJ-SelectFirst even over 200,000 tiny groups. SJ-Hotspot therefore keeps the scattered
subscriptions in both indexes and chooses per tuple by §4.1's cost comparison,
``τ_S < SCATTERED_SF_COST · n''(v)`` with n''(v) counted exactly from the sorted own-range ends.

The SSI is kept per direction because an R tuple needs the partition of the C ranges and an S
tuple that of the A ranges (§3.2.2: "to process incoming S-tuples, we would need a corresponding
SSI constructed on {rangeA_i}"). A topic without select subscriptions never builds any of this
(the engine creates a strategy on the first select subscription).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sortedcontainers import SortedList

from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.joins import select_kernels as K
from hotjoin.matcher.joins.interface import EventRun, KindIndex, OneEvent, Tables
from hotjoin.matcher.joins.protocol import (
    A_LO,
    C_LO,
    PAIRS,
    REG,
    BatchRows,
    KeyedEvents,
    MatchBuffer,
    run_kernel_many,
)
from hotjoin.matcher.partition.hotspot import HotspotTracker
from hotjoin.matcher.partition.stabbing import DynamicStabbingPartition
from hotjoin.matcher.structures.interval_tree import IntervalTree
from hotjoin.matcher.structures.partner_buckets import new_buckets
from hotjoin.matcher.structures.rect_index import BoxForest, forest_arrays
from hotjoin.matcher.structures.scan_runs import ScanRuns
from hotjoin.matcher.subscriptions import SubscriptionColumns

SELECT_STRATEGIES = ("SJ-JoinFirst", "SJ-SelectFirst", "SJ-Vanilla", "SJ-SSI", "SJ-Hotspot")
SCATTERED_SF_COST = 8.0
"""SJ-Hotspot's cost of one selected scattered subscription under SJ-SelectFirst (a row read and
two searches of the key's substructure), in units of one stabbing-group probe of SJ-SSI (one
search and a root test); measured on the Fig. 9 workload (≈ 200 ns against ≈ 20–25 ns).
Option ``scattered_sf_cost`` overrides it."""


def own_other(cols: SubscriptionColumns, dirn: int) -> tuple[np.ndarray, ...]:
    """(own_lo, own_hi, oth_lo, oth_hi) for an incoming R (``dirn > 0``) or S tuple."""
    if dirn > 0:
        return cols.a_lo, cols.a_hi, cols.c_lo, cols.c_hi
    return cols.c_lo, cols.c_hi, cols.a_lo, cols.a_hi


def box_coords(cols: SubscriptionColumns, dirn: int, window: bool = False):
    """Coordinate function of :class:`BoxForest` entries: dims (own, other[, [0, w]]).

    ``dirn == 0`` means the fixed (A, C[, W]) orientation of the global trees.
    """
    def coords(qs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if dirn >= 0:
            los = [cols.a_lo[qs], cols.c_lo[qs]]
            his = [cols.a_hi[qs], cols.c_hi[qs]]
        else:
            los = [cols.c_lo[qs], cols.a_lo[qs]]
            his = [cols.c_hi[qs], cols.a_hi[qs]]
        if window:
            los.append(np.zeros(qs.shape[0]))
            his.append(cols.w[qs].astype(np.float64))
        return np.stack(los, axis=1), np.stack(his, axis=1)
    return coords


def partner_group(table: BaseTable, b: float) -> tuple[Any, int, int]:
    """(by-value pool, base, size) of the partners with key ``b`` (size 0 when none)."""
    ix = table.key_index
    assert ix is not None, "the engine enables the key index before matching equi-joins"
    g = ix.lookup(b)
    pool = ix.by_value
    if g < 0:
        return pool, 0, 0
    return pool, int(pool.start[g]), int(pool.size[g])


def partner_run(pool: Any, base: int, size: int) -> tuple:
    """The partners at ``[base, base + size)`` of a by-value pool (:func:`partner_group`) as a
    kernel bundle: ``PartnerRun``'s fields as a plain tuple (kernels name it back)."""
    return (pool.keys, pool.ids, base, size)


def scan_coords(cols: SubscriptionColumns, dirn: int):
    """Coordinate function of :class:`ScanRuns` members: (own_lo, own_hi, oth_lo, oth_hi).

    The columns are re-read at each call: they grow (reallocate)."""
    def coords(qs: np.ndarray) -> tuple[np.ndarray, ...]:
        return tuple(x[qs] for x in own_other(cols, dirn))
    return coords


def own_scan_coords(cols: SubscriptionColumns, dirn: int):
    """Coordinate function of own-range runs (SJ-SelectFirst): runs ordered by the *own* range,
    the *other* range copied in for the per-candidate join test; ``(oth_lo, oth_hi, own_lo,
    own_hi)`` in :class:`ScanRuns`' (copied, copied, ordering, ordering) convention."""
    def coords(qs: np.ndarray) -> tuple[np.ndarray, ...]:
        own_lo, own_hi, oth_lo, oth_hi = own_other(cols, dirn)
        return oth_lo[qs], oth_hi[qs], own_lo[qs], own_hi[qs]
    return coords


class ScanGroups:
    """PartitionListener: stabbing groups as scan-ordered runs
    (:class:`~matcher.structures.scan_runs.ScanRuns`) and each group's point. By default the
    groups of the *other* ranges, probed branch-free by ``select_kernels.sj_scan`` (SJ-SSI); with
    ``own_first`` those of the *own* ranges, probed by ``select_kernels.sj_own_scan``
    (SJ-SelectFirst).

    Partition group ids are mapped to small dense local ids so the flat arrays stay compact.
    """

    def __init__(self, cols: SubscriptionColumns, dirn: int, own_first: bool = False) -> None:
        self.cols = cols
        self.dirn = dirn
        self.runs = (ScanRuns(own_scan_coords(cols, dirn), lean=True) if own_first
                     else ScanRuns(scan_coords(cols, dirn)))
        self.point = np.zeros(16, dtype=np.float64)
        self.local: dict[int, int] = {}
        self._free: list[int] = []
        self._next = 0
        self._gids: np.ndarray | None = None
        self.version = 0  # bumped on every change of the set of stabbing points

    def __len__(self) -> int:
        return len(self.local)

    def gids(self) -> np.ndarray:
        if self._gids is None:
            self._gids = np.fromiter(sorted(self.local.values()), dtype=np.int64,
                                     count=len(self.local))
        return self._gids

    def points(self) -> np.ndarray:
        """The current stabbing points, sorted (for the skylines of §3.3.2)."""
        return np.sort(self.point[self.gids()])

    def _alloc(self, gid: int, point: float) -> int:
        u = self._free.pop() if self._free else self._next
        if u == self._next:
            self._next += 1
        if u >= self.point.shape[0]:
            self.point = np.resize(self.point, 2 * u + 2)
        self.point[u] = point
        self.local[gid] = u
        self._gids = None
        self.version += 1
        return u

    # -- PartitionListener -----------------------------------------------------------------
    def reset(self, partition: Any) -> None:
        self.local.clear()
        self._free.clear()
        self._next = 0
        self._gids = None
        self.version += 1
        groups: dict[int, np.ndarray] = {}
        for gid, point, members in partition.groups():
            u = self._alloc(gid, point)
            groups[u] = np.asarray(members, dtype=np.int64)
        self.runs.reset(groups)

    def group_added(self, gid: int, point: float) -> None:
        self.runs.add_group(self._alloc(gid, point))

    def group_removed(self, gid: int) -> None:
        u = self.local.pop(gid)
        self.runs.drop_group(u)
        self._free.append(u)
        self._gids = None
        self.version += 1

    def member_added(self, gid: int, iid: int) -> None:
        self.runs.add(self.local[gid], iid)

    def members_added(self, gid: int, iids: np.ndarray) -> None:
        """A whole group's members at once (hotspot promotion): one rewrite of its runs."""
        self.runs.add_many(self.local[gid], iids)

    def member_removed(self, gid: int, iid: int) -> None:
        self.runs.remove(self.local[gid], iid)

    def point_moved(self, gid: int, point: float) -> None:
        self.point[self.local[gid]] = point
        self.version += 1

    def settle(self) -> None:
        """Fold every delta into its group's runs (after a member-by-member bulk load)."""
        self.runs.settle()

    def check_invariants(self) -> None:
        self.runs.check_invariants()
        assert set(self.local.values()) == self.runs.groups

    def memory_bytes(self) -> int:
        return self.runs.memory_bytes() + self.point.nbytes


class HotScanGroups(ScanGroups):
    """Hotspot listener: hot groups as scan-ordered runs; scattered subscriptions twice — an
    interval tree on the *own* ranges (the SJ-SelectFirst index restricted to the scattered set, §4.1) and a
    stabbing partition of their *other* ranges as scan-ordered runs (SJ-SSI restricted to
    the scattered set) — plus the sorted own-range ends, which count n''(v) exactly.

    :meth:`Hotspot._match` picks, per tuple, the cheaper of the two for the scattered part
    (§4.1's cost-based choice): SJ-SelectFirst costs about n'' row probes, SJ-SSI about τ_S
    group probes. New scattered members reach the partition and the counts in batches
    (:meth:`flush`, called before matching), so bulk subscription stays one rebuild.
    """

    def __init__(self, cols: SubscriptionColumns, dirn: int, epsilon: float = 1.0) -> None:
        super().__init__(cols, dirn)
        self.scattered = IntervalTree()
        self.scat_groups = ScanGroups(cols, dirn)
        self.scat_part = DynamicStabbingPartition(epsilon=epsilon, listener=self.scat_groups)
        self.own_lo: SortedList = SortedList()
        self.own_hi: SortedList = SortedList()
        self._pending: dict[int, None] = {}
        self._ends: tuple[np.ndarray, np.ndarray] | None = None  # own_lo, own_hi as arrays

    def scattered_added(self, iid: int) -> None:
        own_lo, own_hi = own_other(self.cols, self.dirn)[:2]
        self.scattered.insert(iid, float(own_lo[iid]), float(own_hi[iid]))
        self._pending[iid] = None

    def scattered_removed(self, iid: int) -> None:
        self.scattered.remove(iid)
        if iid in self._pending:
            del self._pending[iid]
            return
        own_lo, own_hi = own_other(self.cols, self.dirn)[:2]
        self._ends = None
        self.own_lo.remove(float(own_lo[iid]))
        self.own_hi.remove(float(own_hi[iid]))
        self.scat_part.delete(iid)

    def flush(self) -> None:
        """Move the pending scattered members into the partition and the end counts."""
        if not self._pending:
            return
        qs = np.fromiter(self._pending, dtype=np.int64, count=len(self._pending))
        self._pending.clear()
        own_lo, own_hi, oth_lo, oth_hi = own_other(self.cols, self.dirn)
        self.scat_part.insert_many(qs, oth_lo[qs], oth_hi[qs])
        self._ends = None
        self.own_lo.update(own_lo[qs].tolist())
        self.own_hi.update(own_hi[qs].tolist())

    def n_selected(self, v: float) -> int:
        """n''(v): scattered subscriptions whose own range holds v (#lo ≤ v − #hi < v)."""
        return self.own_lo.bisect_right(v) - self.own_hi.bisect_left(v)

    def n_selected_many(self, vs: np.ndarray) -> np.ndarray:
        """:meth:`n_selected` of each value of ``vs``, by two ``searchsorted`` calls over the
        ends as arrays (kept until the scattered set changes)."""
        if self._ends is None:
            self._ends = (np.asarray(self.own_lo, dtype=np.float64),
                          np.asarray(self.own_hi, dtype=np.float64))
        lo, hi = self._ends
        return np.searchsorted(lo, vs, side="right") - np.searchsorted(hi, vs, side="left")

    def memory_bytes(self) -> int:
        return (super().memory_bytes() + self.scattered.memory_bytes()
                + self.scat_groups.memory_bytes() + 16 * (len(self.own_lo) + len(self.own_hi)))


def own_col(dirn: int) -> int:
    """Column of ``SubscriptionColumns.rec`` holding the selection on the incoming tuple."""
    return A_LO if dirn > 0 else C_LO


def run_select_first(tree: IntervalTree, cols: SubscriptionColumns, buf: MatchBuffer,
                     dirn: int, v: float, xseq: int, table: BaseTable, mode: int,
                     pool: Any, base: int, size: int) -> None:
    """SJ-SelectFirst over the subscriptions of ``tree`` (interval tree on own ranges)."""
    if tree.root < 0 or size == 0:
        return
    buf.reserve(len(tree))
    buf.run(K.sj_select_first, tree.arrays(), partner_run(pool, base, size), table.arrays(),
            cols.arrays(), v, own_col(dirn), xseq, mode)


def run_ssi(groups: ScanGroups, cols: SubscriptionColumns, buf: MatchBuffer, dirn: int,
            v: float, xseq: int, table: BaseTable, mode: int, pool: Any, base: int,
            size: int, n_members: int, reg_max: float = np.inf) -> None:
    """SJ-SSI over the groups of ``groups`` (``n_members`` subscriptions in all; none
    registered after ``reg_max``, so COUNT skips the per-pair registration test when the
    tuple is later)."""
    if not groups.local or size == 0:
        return
    r = groups.runs
    buf.reserve(n_members)
    r.ensure_scratch()
    buf.run(K.sj_scan, groups.gids(), groups.point, r.arrays(), r.cand, r.clo, r.chi, reg_max,
            pool.keys, pool.ids, base, size, v, cols.rec, own_col(dirn), table.seqs, xseq, mode,
            cols.acc)


def run_own_scan(groups: ScanGroups, cols: SubscriptionColumns, buf: MatchBuffer, dirn: int,
                 v: float, xseq: int, table: BaseTable, mode: int, pool: Any, base: int,
                 size: int, scratch: OwnScanScratch, reg_max: float = np.inf) -> None:
    """SJ-SelectFirst over the own-range groups of ``groups`` (``select_kernels.sj_own_scan``)."""
    if not groups.local or size == 0:
        return
    r = groups.runs
    buf.reserve(r.n_members)
    buf.run(K.sj_own_scan, groups.gids(), groups.point, r.arrays(), r.probe_scratch(),
            scratch.side_for(r.n_members), scratch.buckets, reg_max,
            partner_run(pool, base, size), table.arrays(), cols.arrays(), v, own_col(dirn), xseq,
            mode)


def run_many(kernel: Any, head: tuple[Any, ...], ev: KeyedEvents, dirn: int, mode: int,
             buf: MatchBuffer, rows: BatchRows, room: int) -> None:
    """Call a ``select_kernels.*_many`` kernel over the events ``ev`` (``head``: its arguments
    before the events), rows into ``rows``; IDENTIFY/COUNT keep ``room`` rows free per event
    (one per subscription the member may output)."""
    n = ev.pos.shape[0]
    if n:
        run_kernel_many(kernel, (*head, ev.select_tuple(), (own_col(dirn), mode)), n, buf,
                        rows, 0 if mode == PAIRS else room + 16)


def run_ssi_many(groups: ScanGroups, cols: SubscriptionColumns, buf: MatchBuffer,
                 rows: BatchRows, dirn: int, ev: KeyedEvents, table: BaseTable, mode: int,
                 pool: Any, n_members: int, reg_max: float) -> None:
    """:func:`run_ssi` for every event of ``ev`` in one call (``K.sj_scan_many``)."""
    if not groups.local:
        return
    r = groups.runs
    r.ensure_scratch()
    run_many(K.sj_scan_many, (groups.gids(), groups.point, r.arrays(), r.cand, r.clo, r.chi,
                              reg_max, pool.keys, pool.ids, cols.rec, table.seqs, cols.acc),
             ev, dirn, mode, buf, rows, n_members)


def run_own_scan_many(groups: ScanGroups, cols: SubscriptionColumns, buf: MatchBuffer,
                      rows: BatchRows, dirn: int, ev: KeyedEvents, table: BaseTable,
                      mode: int, pool: Any, scratch: OwnScanScratch, reg_max: float) -> None:
    """:func:`run_own_scan` for every event of ``ev`` in one call (``K.sj_own_scan_many``)."""
    if not groups.local:
        return
    r = groups.runs
    run_many(K.sj_own_scan_many, (groups.gids(), groups.point, r.arrays(), r.probe_scratch(),
                                  scratch.side_for(r.n_members), scratch.buckets, reg_max,
                                  pool.keys, pool.ids, table.arrays(), cols.arrays()),
             ev, dirn, mode, buf, rows, r.n_members)


class OwnScanScratch:
    """Per-probe scratch of :func:`run_own_scan`: the key's partner bucket table
    (:mod:`matcher.structures.partner_buckets`) and the candidates of mixed buckets set aside
    (ids and other bounds, room for every member)."""

    def __init__(self) -> None:
        self.buckets = tuple(new_buckets())  # a plain tuple: the kernel names it back
        self.side = (np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0))

    def side_for(self, n_members: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.side[0].shape[0] < n_members + 16:
            n = n_members + n_members // 4 + 64
            self.side = (np.zeros(n, dtype=np.int64), np.zeros(n), np.zeros(n))
        return self.side

    def memory_bytes(self) -> int:
        return sum(a.nbytes for a in (*self.buckets, *self.side))


def run_vanilla(qids: np.ndarray, cols: SubscriptionColumns, buf: MatchBuffer, dirn: int,
                v: float, xseq: int, table: BaseTable, mode: int, pool: Any, base: int,
                size: int) -> None:
    """SJ-Vanilla over ``qids`` (also used for ``Engine.result``)."""
    if size == 0 or qids.shape[0] == 0:
        return
    buf.reserve(qids.shape[0])
    buf.run(K.sj_vanilla, qids, pool.keys, pool.ids, base, size, v, cols.rec, own_col(dirn),
            table.seqs, xseq, mode, cols.acc)


def run_select_first_many(tree: IntervalTree, cols: SubscriptionColumns, buf: MatchBuffer,
                          rows: BatchRows, dirn: int, ev: KeyedEvents, table: BaseTable,
                          mode: int, pool: Any) -> None:
    """:func:`run_select_first` for every event of ``ev`` in one call."""
    if tree.root >= 0:
        run_many(K.sj_select_first_many, (tree.arrays(), pool.keys, pool.ids, table.arrays(),
                                          cols.arrays()), ev, dirn, mode, buf, rows, len(tree))


class SelectStrategy(KindIndex):
    """A select-join strategy (§3.2): an index over select subscriptions (the kind interface,
    ``joins/interface.py``) that matches a tuple against the partners of its key, looked up
    once per tuple (``OneEvent.partner_run``) or once per run (``EventRun.keyed``) for every
    kind and router. A strategy writes ``_match`` (one tuple with partners) and
    ``_match_keyed`` (the tuples of a run that have partners, in one ``*_many`` kernel call)."""

    kind = "select"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        super().__init__(cols, options, tables)
        #: largest registration sequence number of any subscription ever indexed (a bound)
        self.reg_max = -np.inf

    def _track(self, q: int, delta: int) -> None:
        if delta > 0:
            self.reg_max = max(self.reg_max, float(self.cols.rec[q, REG]))

    def _track_many(self, qs: np.ndarray) -> None:
        if qs.shape[0]:
            self.reg_max = max(self.reg_max, float(self.cols.rec[qs, REG].max()))

    def match(self, ev: OneEvent) -> None:
        """Append this strategy's output for the tuple ``ev`` to ``ev.buf`` (nothing when its
        key has no partner)."""
        pool, base, size = ev.partner_run()
        if size:
            self._match(ev, pool, base, size)

    def _match(self, ev: OneEvent, pool: Any, base: int, size: int) -> None:
        """The tuple ``ev``, whose key's partners are ``pool.keys[base : base + size]``."""
        raise NotImplementedError

    def match_many(self, run: EventRun) -> None:
        """:meth:`match` for each tuple of ``run``, rows in event order: the tuples with
        partners (``run.keyed()``, one compiled lookup for the run) go to
        :meth:`_match_keyed`, then the rows are ordered by event, stably."""
        ev = run.keyed()
        if ev is None:
            return
        n0 = run.rows.n
        self._match_keyed(run, ev, run.table.key_index.by_value)
        run.rows.sort_by_event(n0)

    def _match_keyed(self, run: EventRun, ev: KeyedEvents, pool: Any) -> None:
        """Rows of the events ``ev`` (each with partners in ``pool``, ``KeyIndex.by_value``),
        each event's rows together and in one-at-a-time order; the caller orders events. Each
        strategy runs its ``*_many`` kernel once."""
        raise NotImplementedError

    def snapshot(self, ev: OneEvent, qids: np.ndarray) -> None:
        """SJ-Vanilla over the subscriptions ``qids`` (``Engine.result``)."""
        pool, base, size = ev.partner_run()
        run_vanilla(qids, self.cols, ev.buf, ev.dirn, ev.value, ev.seq, ev.table, ev.mode, pool,
                    base, size)


class JoinFirst(SelectStrategy):
    """SJ-JoinFirst (§3.2.1): join with the key's partners, probe an R-tree on A × C per pair."""

    name = "SJ-JoinFirst"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        super().__init__(cols, options, tables)
        self.coords = box_coords(cols, 0)
        self.forest = BoxForest(2)
        self.forest.add_group(0)

    def _add(self, q: int) -> None:
        self.forest.add(0, q, self.coords)

    def _add_many(self, qs: np.ndarray) -> None:
        self.forest.add_many(0, qs, self.coords, whole=len(self.ids) == qs.shape[0])

    def _remove(self, q: int) -> None:
        self.forest.remove(0, q)

    def _match(self, ev: OneEvent, pool: Any, base: int, size: int) -> None:
        c, f, buf = self.cols, self.forest, ev.buf
        if ev.mode != PAIRS:
            buf.reserve(len(self))  # a row per subscription at most (the out-of-room protocol)
        (f.hits,) = buf.run_fresh(
            K.sj_join_first, (forest_arrays(f), partner_run(pool, base, size), ev.table.arrays(),
                              c.arrays(), c.reg, c.snap, ev.value, ev.dirn, ev.seq, ev.mode,
                              f.stack), (f.hits,))

    def _match_keyed(self, run: EventRun, ev: KeyedEvents, pool: Any) -> None:
        """Every event of ``ev`` in one compiled call (``K.sj_join_first_many``)."""
        c, f = self.cols, self.forest
        (f.hits,) = run_kernel_many(
            K.sj_join_first_many, (forest_arrays(f), pool.keys, pool.ids, run.table.arrays(),
                                   c.arrays(), c.reg, c.snap, ev.select_tuple(), run.dirn,
                                   run.mode, f.stack), ev.pos.shape[0], run.buf, run.rows,
            0 if run.mode == PAIRS else len(self) + 16, (f.hits,))

    def memory_bytes(self) -> int:
        return super().memory_bytes() + self.forest.memory_bytes()


class OwnRangeIndex:
    """The index of SJ-SelectFirst (§3.2.1, §4.1; the SSI layout of §3.2.2 applied to the
    selection): per direction a dynamic stabbing partition of the *own* ranges (A for incoming
    R tuples, C for S tuples) whose groups are scan-ordered runs with the other range copied
    in (:class:`ScanGroups` with ``own_first``). A probe scans exactly the n′ subscriptions
    whose own range holds v: O(τ_own + n′); updates as SJ-SSI's."""

    def __init__(self, cols: SubscriptionColumns, epsilon: float = 1.0) -> None:
        self.cols = cols
        self.groups = {d: ScanGroups(cols, d, own_first=True) for d in (1, -1)}
        self.parts = {d: DynamicStabbingPartition(epsilon=epsilon, listener=self.groups[d])
                      for d in (1, -1)}

    def of(self, dirn: int) -> ScanGroups:
        """The groups an incoming tuple of direction ``dirn`` scans."""
        return self.groups[1 if dirn > 0 else -1]

    def add(self, q: int) -> None:
        for d, part in self.parts.items():
            lo, hi = own_other(self.cols, d)[:2]
            part.insert(q, float(lo[q]), float(hi[q]))

    def add_many(self, qs: np.ndarray) -> None:
        for d, part in self.parts.items():
            lo, hi = own_other(self.cols, d)[:2]
            part.insert_many(qs, lo[qs], hi[qs])

    def remove(self, q: int) -> None:
        for part in self.parts.values():
            part.delete(q)

    def check_invariants(self) -> None:
        """Every own-range group's runs hold exactly its members (tests)."""
        for d, g in self.groups.items():
            g.check_invariants()
            assert sum(len(m) for _, _, m in self.parts[d].groups()) == g.runs.n_members

    def memory_bytes(self) -> int:
        return sum(g.memory_bytes() for g in self.groups.values())


class SelectFirstHooks(KindIndex):
    """The index hooks of a strategy whose whole index is its ``own`` :class:`OwnRangeIndex`
    (SJ-SelectFirst, WJ-SelectFirst: one index for both kinds); put it before the kind's base."""

    own: OwnRangeIndex

    def _add(self, q: int) -> None:
        self.own.add(q)

    def _add_many(self, qs: np.ndarray) -> None:
        self.own.add_many(qs)

    def _remove(self, q: int) -> None:
        self.own.remove(q)

    def memory_bytes(self) -> int:
        return super().memory_bytes() + self.own.memory_bytes()


class SelectFirst(SelectFirstHooks, SelectStrategy):
    """SJ-SelectFirst (§3.2.1, §4.1's improved version): select on the own range first, then
    test the join. The own ranges are an :class:`OwnRangeIndex`, so a probe visits exactly the
    n′ selected subscriptions in scan order, and each one's join test is two loads from the
    key's partner bucket table instead of a binary search: O(τ_own + m′ + n′ + k) per tuple."""

    name = "SJ-SelectFirst"
    own: OwnRangeIndex

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        super().__init__(cols, options, tables)
        self.own = OwnRangeIndex(cols, float(options.get("epsilon", 1.0)))
        self.scratch = OwnScanScratch()

    def _match(self, ev: OneEvent, pool: Any, base: int, size: int) -> None:
        dirn = ev.dirn
        run_own_scan(self.own.of(dirn), self.cols, ev.buf, dirn, ev.value, ev.seq, ev.table,
                     ev.mode, pool, base, size, self.scratch, self.reg_max)

    def _match_keyed(self, run: EventRun, ev: KeyedEvents, pool: Any) -> None:
        dirn = run.dirn
        run_own_scan_many(self.own.of(dirn), self.cols, run.buf, run.rows, dirn, ev, run.table,
                          run.mode, pool, self.scratch, self.reg_max)

    def tau(self, d: int) -> int:
        """Stabbing number of the own ranges an incoming tuple of direction ``d`` scans."""
        return len(self.own.of(d))

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "tau_own": self.tau(1), "tau_own_s": self.tau(-1)}

    def check_invariants(self) -> None:
        """Every own-range group's runs hold exactly its members (tests)."""
        self.own.check_invariants()

    def memory_bytes(self) -> int:
        return super().memory_bytes() + self.scratch.memory_bytes()


class Vanilla(SelectStrategy):
    """SJ-Vanilla (§4.1): no index on the subscriptions, only the key substructure."""

    name = "SJ-Vanilla"

    def _match(self, ev: OneEvent, pool: Any, base: int, size: int) -> None:
        run_vanilla(self.ids.view(), self.cols, ev.buf, ev.dirn, ev.value, ev.seq, ev.table,
                    ev.mode, pool, base, size)

    def _match_keyed(self, run: EventRun, ev: KeyedEvents, pool: Any) -> None:
        qids = self.ids.view()
        if qids.shape[0]:
            c = self.cols
            run_many(K.sj_vanilla_many,
                     (qids, pool.keys, pool.ids, c.rec, run.table.seqs, c.acc),
                     ev, run.dirn, run.mode, run.buf, run.rows, qids.shape[0])


class SSI(SelectStrategy):
    """SJ-SSI (§3.2.2): stabbing partitions of the C ranges (for R) and A ranges (for S)."""

    name = "SJ-SSI"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        super().__init__(cols, options, tables)
        eps = float(options.get("epsilon", 1.0))
        self.groups = {d: ScanGroups(cols, d) for d in (1, -1)}
        self.parts = {d: DynamicStabbingPartition(epsilon=eps, listener=self.groups[d])
                      for d in (1, -1)}

    def _other(self, dirn: int) -> tuple[np.ndarray, np.ndarray]:
        return own_other(self.cols, dirn)[2:]

    def _add(self, q: int) -> None:
        for d, part in self.parts.items():
            lo, hi = self._other(d)
            part.insert(q, float(lo[q]), float(hi[q]))

    def _add_many(self, qs: np.ndarray) -> None:
        for d, part in self.parts.items():
            lo, hi = self._other(d)
            part.insert_many(qs, lo[qs], hi[qs])

    def _remove(self, q: int) -> None:
        for part in self.parts.values():
            part.delete(q)

    def _match(self, ev: OneEvent, pool: Any, base: int, size: int) -> None:
        dirn = ev.dirn
        run_ssi(self.groups[1 if dirn > 0 else -1], self.cols, ev.buf, dirn, ev.value, ev.seq,
                ev.table, ev.mode, pool, base, size, len(self), self.reg_max)

    def _match_keyed(self, run: EventRun, ev: KeyedEvents, pool: Any) -> None:
        dirn = run.dirn
        run_ssi_many(self.groups[1 if dirn > 0 else -1], self.cols, run.buf, run.rows, dirn, ev,
                     run.table, run.mode, pool, len(self), self.reg_max)

    def tau(self, d: int) -> int:
        """The stabbing number of direction ``d``'s partition (the cost model's input)."""
        return len(self.groups[d])

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "tau": self.tau(1), "tau_s": self.tau(-1),
                "reconstructions": sum(p.reconstructions for p in self.parts.values())}

    def check_invariants(self) -> None:
        """Every stabbing group's runs hold exactly its members (tests)."""
        for d, g in self.groups.items():
            g.check_invariants()
            assert sum(len(m) for _, _, m in self.parts[d].groups()) == g.runs.n_members

    def memory_bytes(self) -> int:
        return super().memory_bytes() + sum(g.memory_bytes() for g in self.groups.values())


class Hotspot(SelectStrategy):
    """SJ-Hotspot (§3.2.3, §4.1): SJ-SSI on the α-hotspots, SJ-SelectFirst on the scattered."""

    name = "SJ-Hotspot"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        super().__init__(cols, options, tables)
        eps = float(options.get("epsilon", 1.0))
        self.groups = {d: HotScanGroups(cols, d, epsilon=eps) for d in (1, -1)}
        self.sf_cost = float(options.get("scattered_sf_cost", SCATTERED_SF_COST))
        self.choices = {"SJ-SelectFirst": 0, "SJ-SSI": 0}
        self.trackers = {d: HotspotTracker(alpha=float(options.get("alpha", 0.001)),
                                           epsilon=float(options.get("epsilon", 1.0)),
                                           listener=self.groups[d]) for d in (1, -1)}
        self._hot_sqrt: dict[int, float] = {}  # cleared on every subscription change

    def _other(self, dirn: int) -> tuple[np.ndarray, np.ndarray]:
        return own_other(self.cols, dirn)[2:]

    def _track(self, q: int, delta: int) -> None:
        super()._track(q, delta)
        self._hot_sqrt.clear()

    def _track_many(self, qs: np.ndarray) -> None:
        super()._track_many(qs)
        self._hot_sqrt.clear()

    def hot_sqrt_sum(self, d: int) -> float:
        """Σ_i √|Q_i^H| over direction ``d``'s hotspots (the cost model's R-tree term; hot sets
        change only with subscriptions, so it is recomputed only after one changed: O(2/α))."""
        s = self._hot_sqrt.get(d)
        if s is None:
            sizes = self.trackers[d].hotspot_sizes()
            s = self._hot_sqrt[d] = float(sum(math.sqrt(n) for n in sizes))
        return s

    def scattered_sizes(self, d: int) -> tuple[float, float]:
        """(|Q_S|, τ_S): direction ``d``'s scattered subscriptions and the stabbing number of
        their partition (pending members flushed first; the cost model's inputs)."""
        g = self.groups[d]
        g.flush()
        return float(len(g.scattered)), float(len(g.scat_groups))

    def _add(self, q: int) -> None:
        for d, tr in self.trackers.items():
            lo, hi = self._other(d)
            tr.insert(q, float(lo[q]), float(hi[q]))

    def _add_many(self, qs: np.ndarray) -> None:
        for d, tr in self.trackers.items():
            lo, hi = self._other(d)
            tr.insert_many(qs, lo[qs], hi[qs])
            self.groups[d].settle()  # promotions arrive member by member

    def _remove(self, q: int) -> None:
        for tr in self.trackers.values():
            tr.delete(q)

    def _match(self, ev: OneEvent, pool: Any, base: int, size: int) -> None:
        buf, dirn, v, xseq, table, mode = ev.buf, ev.dirn, ev.value, ev.seq, ev.table, ev.mode
        g = self.groups[1 if dirn > 0 else -1]
        run_ssi(g, self.cols, buf, dirn, v, xseq, table, mode, pool, base, size, len(self),
                self.reg_max)
        if not len(g.scattered):
            return
        g.flush()
        if len(g.scat_groups) < self.sf_cost * g.n_selected(v):
            self.choices["SJ-SSI"] += 1
            run_ssi(g.scat_groups, self.cols, buf, dirn, v, xseq, table, mode, pool, base, size,
                    len(self), self.reg_max)
        else:
            self.choices["SJ-SelectFirst"] += 1
            run_select_first(g.scattered, self.cols, buf, dirn, v, xseq, table, mode, pool,
                             base, size)

    def _match_keyed(self, run: EventRun, ev: KeyedEvents, pool: Any) -> None:
        """:meth:`_match` for every event: the hot groups in one call, then the scattered part
        per event by the same cost comparison, one call per side of it (the caller's stable
        sort by event keeps each event's hot rows before its scattered ones)."""
        buf, rows, dirn, table, mode = run.buf, run.rows, run.dirn, run.table, run.mode
        g = self.groups[1 if dirn > 0 else -1]
        run_ssi_many(g, self.cols, buf, rows, dirn, ev, table, mode, pool, len(self),
                     self.reg_max)
        if not len(g.scattered):
            return
        g.flush()
        by_ssi = len(g.scat_groups) < self.sf_cost * g.n_selected_many(ev.values)
        n_ssi = int(np.count_nonzero(by_ssi))
        self.choices["SJ-SSI"] += n_ssi
        self.choices["SJ-SelectFirst"] += by_ssi.shape[0] - n_ssi
        if n_ssi:
            run_ssi_many(g.scat_groups, self.cols, buf, rows, dirn,
                         ev.subset(np.flatnonzero(by_ssi)), table, mode, pool, len(self),
                         self.reg_max)
        if n_ssi < by_ssi.shape[0]:
            run_select_first_many(g.scattered, self.cols, buf, rows, dirn,
                                  ev.subset(np.flatnonzero(~by_ssi)), table, mode, pool)

    def stats(self) -> dict[str, Any]:
        g = self.groups[1]
        return {**super().stats(), "hotspots": len(g), "hotspots_s": len(self.groups[-1]),
                "scattered": len(g.scattered), "scattered_s": len(self.groups[-1].scattered),
                "tau_scattered": len(g.scat_groups), "scattered_choices": dict(self.choices)}

    def check_invariants(self) -> None:
        """Hot and scattered runs hold exactly their groups' members (tests)."""
        for g in self.groups.values():
            g.flush()
            g.check_invariants()
            g.scat_groups.check_invariants()

    def memory_bytes(self) -> int:
        return super().memory_bytes() + sum(g.memory_bytes() for g in self.groups.values())


SELECT_CLASSES: dict[str, type[SelectStrategy]] = {
    "SJ-JoinFirst": JoinFirst, "SJ-SelectFirst": SelectFirst, "SJ-Vanilla": Vanilla,
    "SJ-SSI": SSI, "SJ-Hotspot": Hotspot,
}
"""The select strategies by paper name (``SELECT_STRATEGIES`` order)."""
