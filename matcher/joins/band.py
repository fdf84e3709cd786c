"""Band joins ``s.key − r.key ∈ rangeB`` (+ optional A, C selections): the five strategies of §3.1.

Each strategy keeps its own index over the band subscriptions and answers "which band
subscriptions does this incoming tuple affect, with which partners" by running a numba kernel of
:mod:`matcher.joins.band_kernels` over each sorted run of the other side's base table:

==============  =============================================  ==================================
strategy        subscription index                             per-event cost (Theorem 2)
==============  =============================================  ==================================
BJ-QOuter       dense array of ids                             O(n log m + k)
BJ-DOuter       centred interval tree on rangeB                O(m log n + k)
BJ-MJ           ranges in ascending-lo order                   O(n + m + k)
BJ-SSI          dynamic stabbing partition (App. A) + I^l/I^r  O(τ log m + k)
BJ-Hotspot      BJ-SSI on α-hotspots (Thm. 1); scattered by    O(α⁻¹ log m + scattered + k)
                the cheaper of QOuter and MJ per event
==============  =============================================  ==================================

All strategies use the same base-table runs and output buffers, so ratios between them measure
the algorithms, not the plumbing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.joins import band_kernels as K
from hotjoin.matcher.joins.interface import EventRun, KindIndex, OneEvent, Tables
from hotjoin.matcher.joins.protocol import (
    A_HI,
    A_LO,
    C_HI,
    C_LO,
    PAIRS,
    BatchRows,
    DenseIds,
    MatchBuffer,
    run_kernel_many,
)
from hotjoin.matcher.partition.hotspot import HotspotTracker
from hotjoin.matcher.partition.stabbing import DynamicStabbingPartition
from hotjoin.matcher.structures.gapped_pool import DELTA, GappedGroupPool, insert_pair, remove_pair
from hotjoin.matcher.structures.interval_tree import IntervalTree
from hotjoin.matcher.structures.sorted_runs import SAMPLE_EVERY, SortedRuns
from hotjoin.matcher.subscriptions import SubscriptionColumns

BAND_STRATEGIES = ("BJ-QOuter", "BJ-DOuter", "BJ-MJ", "BJ-SSI", "BJ-Hotspot")


def key_runs(table: BaseTable) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """The main and delta runs of ``table``'s key order as kernel bundles (``KeyRun``'s fields
    as plain tuples, see :mod:`~matcher.joins.protocol`; either may be empty)."""
    o = table.order
    mk, mp, dk, dp = o.runs()
    return (mk, mp, o.main_sample), (dk, dp, _NO_SAMPLE)


class RangeOrder:
    """Band ranges in ascending-lo order (BJ-MJ's sorted list of band windows), as entry ids.

    Entry ``e`` carries a copy of its subscription's record row (``ent_rec[e]``), and after every
    merge of the underlying runs the entries are renumbered in key order, so a merge join reads
    windows sequentially, as from the paper's sorted list. A subscription that leaves and
    re-enters (hotspot demotion) gets a fresh entry: a stale, not yet merged entry is dead and can
    never be counted twice.
    """

    def __init__(self, rec_source: SubscriptionColumns) -> None:
        self.cols = rec_source
        self.runs = SortedRuns()
        self.ent_q = np.zeros(64, dtype=np.int64)
        self.ent_alive = np.zeros(64, dtype=np.bool_)
        self.ent_rec = np.zeros((64, 8), dtype=np.float64)
        self.n_ent = 0
        self.entry_of = np.full(64, -1, dtype=np.int64)  # subscription id -> live entry
        self.n_live = 0
        self._merges_seen = 0

    def __len__(self) -> int:
        return self.n_live

    def _grow_entries(self, need: int) -> None:
        cap = max(need, 2 * self.ent_q.shape[0])
        self.ent_q = np.resize(self.ent_q, cap)
        alive = np.zeros(cap, dtype=np.bool_)
        alive[: self.ent_alive.shape[0]] = self.ent_alive
        self.ent_alive = alive
        rec = np.zeros((cap, 8), dtype=np.float64)
        rec[: self.ent_rec.shape[0]] = self.ent_rec
        self.ent_rec = rec

    def add(self, q: int, lo: float) -> None:
        e = self.n_ent
        if e == self.ent_q.shape[0]:
            self._grow_entries(e + 1)
        if q >= self.entry_of.shape[0]:
            grown = np.full(max(q + 1, 2 * self.entry_of.shape[0]), -1, dtype=np.int64)
            grown[: self.entry_of.shape[0]] = self.entry_of
            self.entry_of = grown
        self.ent_q[e] = q
        self.ent_alive[e] = True
        self.ent_rec[e] = self.cols.rec[q]
        self.n_ent += 1
        self.entry_of[q] = e
        self.n_live += 1
        self.runs.insert(lo, e, self.ent_alive)
        self._after_update()

    def remove(self, q: int) -> None:
        e = int(self.entry_of[q])
        if e < 0:
            raise KeyError(q)
        self.entry_of[q] = -1
        self.ent_alive[e] = False
        self.n_live -= 1
        self.runs.mark_dead(self.ent_alive)
        self._after_update()

    def _after_update(self) -> None:
        if self.runs.merges != self._merges_seen:
            self._merges_seen = self.runs.merges
            self._renumber()

    def _renumber(self) -> None:
        """Number the present entries in run order (main run first); O(n) numpy."""
        r = self.runs
        old = np.concatenate([r.main_pays[: r.n_main], r.delta_pays[: r.n_delta]])
        n = old.shape[0]
        q = self.ent_q[old]
        alive = self.ent_alive[old]
        recs = self.ent_rec[old]
        cap = max(64, 2 * n)
        self.ent_q = np.zeros(cap, dtype=np.int64)
        self.ent_alive = np.zeros(cap, dtype=np.bool_)
        self.ent_rec = np.zeros((cap, 8), dtype=np.float64)
        self.ent_q[:n], self.ent_alive[:n], self.ent_rec[:n] = q, alive, recs
        self.n_ent = n
        new = np.arange(n, dtype=np.int64)
        r.main_pays[: r.n_main] = new[: r.n_main]
        r.delta_pays[: r.n_delta] = new[r.n_main:]
        self.entry_of[q[alive]] = new[alive]

    def bulk(self, qs: np.ndarray, los: np.ndarray) -> None:
        for q, lo in zip(qs.tolist(), los.tolist(), strict=True):
            self.add(q, lo)
        self.runs.merge(self.ent_alive)
        self._after_update()

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The entries as a kernel bundle: ``band_kernels.RangeArrays``' fields as a plain
        tuple (see :mod:`~matcher.joins.protocol`)."""
        return (self.ent_q, self.ent_alive, self.ent_rec)

    def memory_bytes(self) -> int:
        r = self.runs
        return (r.main_keys.nbytes + r.main_pays.nbytes + r.delta_keys.nbytes
                + r.delta_pays.nbytes + self.ent_q.nbytes + self.ent_rec.nbytes
                + self.entry_of.nbytes)


def _sides(dirn: int) -> tuple[int, int]:
    """Record columns (own, oth): the selection on the incoming tuple, then on its partner."""
    return (A_LO, C_LO) if dirn > 0 else (C_LO, A_LO)


class BandStrategy(KindIndex):
    """A band-join strategy (§3.1): an index over band subscriptions (the kind interface,
    ``joins/interface.py``). Every strategy matches a run in one call of its multi-event
    kernel; a band join needs the tables' key order, not the key index."""

    kind = "band"

    def snapshot(self, ev: OneEvent, qids: np.ndarray) -> None:
        """BJ-QOuter over the subscriptions ``qids`` (``Engine.result``)."""
        run_qouter(qids, self.cols, ev.buf, ev.dirn, ev.key, ev.value, ev.seq, ev.table,
                   ev.mode)


_NO_SAMPLE = np.empty(0, dtype=np.float64)
_ONE_EVENT = np.zeros(1, dtype=np.int64)
_NO_HINTS = np.empty((2, 0), dtype=np.int64)
_NO_ROWS = np.empty(0, dtype=np.int64)


def _data_runs(
    table: BaseTable,
) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], bool]:
    """Non-empty sorted runs of ``table`` as (keys, slots, key sample), and whether a
    subscription may meet more than one of them (then IDENTIFY/COUNT must deduplicate)."""
    o = table.order
    mk, mp, dk, dp = o.runs()
    runs = [(k, p, smp) for k, p, smp in ((mk, mp, o.main_sample), (dk, dp, _NO_SAMPLE))
            if k.shape[0]]
    return runs, len(runs) > 1


def has_selection(rec: np.ndarray) -> bool:
    """Whether a record row bounds A or C (band joins' optional local selections)."""
    return bool(rec[A_LO] != -np.inf or rec[A_HI] != np.inf or rec[C_LO] != -np.inf
                or rec[C_HI] != np.inf)


class QOuter(BandStrategy):
    """BJ-QOuter (§3.1.1): queries as the outer relation; no index beyond the id list."""

    name = "BJ-QOuter"

    def _add(self, q: int) -> None:
        pass

    def _remove(self, q: int) -> None:
        pass

    def match(self, ev: OneEvent) -> None:
        run_qouter(self.ids.view(), self.cols, ev.buf, ev.dirn, ev.key, ev.value, ev.seq,
                   ev.table, ev.mode)

    def match_many(self, run: EventRun) -> None:
        run_qouter_many(self.ids.view(), self.cols, run.buf, run.rows, run.dirn, run.keys,
                        run.values, run.seqs, run.table, run.mode)


def run_qouter(qids: np.ndarray, cols: SubscriptionColumns, buf: MatchBuffer, dirn: int,
               b: float, v: float, xseq: int, table: BaseTable, mode: int) -> None:
    """BJ-QOuter over the subscriptions ``qids`` for one tuple (key ``b``, value ``v``): one
    ``K.qouter`` call per sorted run of ``table``'s key order. O(n log m + k)."""
    own, oth = _sides(dirn)
    runs, dedupe = _data_runs(table)
    for keys, pays, samp in runs:
        if mode != PAIRS:
            buf.reserve(qids.shape[0])
        buf.run(K.qouter, qids, (keys, pays, samp), table.arrays(), cols.arrays(), SAMPLE_EVERY,
                b, v, dirn, xseq, own, oth, mode, dedupe, buf.stamp)


def run_merge_join(order: RangeOrder, cols: SubscriptionColumns, buf: MatchBuffer, dirn: int,
                   b: float, v: float, xseq: int, table: BaseTable, mode: int) -> None:
    """BJ-MJ over the ranges of ``order`` for one tuple: a merge of each run of ranges with each
    run of ``table``'s key order (``K.merge_join``). O(n + m + k)."""
    own, oth = _sides(dirn)
    ik1, ip1, ik2, ip2 = order.runs.runs()
    runs, dedupe = _data_runs(table)
    dedupe = dedupe or ik2.shape[0] > 0
    ents, tab, sub = order.arrays(), table.arrays(), cols.arrays()
    for ikeys, ipays in ((ik1, ip1), (ik2, ip2)):
        if ikeys.shape[0] == 0:
            continue
        for run in runs:
            if mode != PAIRS:
                buf.reserve(len(order))
            buf.run(K.merge_join, ikeys, ipays, ents, run, tab, sub, b, v, dirn, xseq, own,
                    oth, mode, dedupe, buf.stamp)


def run_qouter_many(qids: np.ndarray, cols: SubscriptionColumns, buf: MatchBuffer,
                    rows: BatchRows, dirn: int, bs: np.ndarray, vs: np.ndarray,
                    xseqs: np.ndarray, table: BaseTable, mode: int) -> None:
    """:func:`run_qouter` for a run of incoming tuples in one compiled call
    (``K.qouter_many``)."""
    if qids.shape[0] == 0 or len(table.order) == 0:
        return
    own, oth = _sides(dirn)
    main, dlt = key_runs(table)
    room = 0 if mode == PAIRS else 2 * qids.shape[0] + 16
    run_kernel_many(K.qouter_many,
                    (qids, main, dlt, table.arrays(), cols.arrays(), (bs, vs, xseqs),
                     (dirn, own, oth, mode), SAMPLE_EVERY), bs.shape[0], buf, rows, room)


def run_merge_join_many(order: RangeOrder, cols: SubscriptionColumns, buf: MatchBuffer,
                        rows: BatchRows, dirn: int, bs: np.ndarray, vs: np.ndarray,
                        xseqs: np.ndarray, table: BaseTable, mode: int) -> None:
    """:func:`run_merge_join` for a run of incoming tuples in one compiled call
    (``K.merge_join_many``)."""
    if len(order) == 0 or len(table.order) == 0:
        return
    own, oth = _sides(dirn)
    main, dlt = key_runs(table)
    room = 0 if mode == PAIRS else 2 * len(order) + 16
    run_kernel_many(K.merge_join_many,
                    (order.runs.runs(), order.arrays(), main, dlt, table.arrays(),
                     cols.arrays(), (bs, vs, xseqs), (dirn, own, oth, mode)),
                    bs.shape[0], buf, rows, room)


class MergeJoin(BandStrategy):
    """BJ-MJ (§3.1.1): merge join of ranges sorted by left end with the key-ordered table."""

    name = "BJ-MJ"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        super().__init__(cols, options, tables)
        self.order = RangeOrder(cols)

    def _add(self, q: int) -> None:
        self.order.add(q, float(self.cols.b_lo[q]))

    def _add_many(self, qs: np.ndarray) -> None:
        self.order.bulk(qs, self.cols.b_lo[qs])

    def _remove(self, q: int) -> None:
        self.order.remove(q)

    def match(self, ev: OneEvent) -> None:
        run_merge_join(self.order, self.cols, ev.buf, ev.dirn, ev.key, ev.value, ev.seq,
                       ev.table, ev.mode)

    def match_many(self, run: EventRun) -> None:
        run_merge_join_many(self.order, self.cols, run.buf, run.rows, run.dirn, run.keys,
                            run.values, run.seqs, run.table, run.mode)

    def check_invariants(self) -> None:
        o = self.order
        items = o.runs.items(o.ent_alive)
        assert sorted(int(o.ent_q[e]) for _, e in items) == sorted(self.ids.view().tolist())
        assert all(k == self.cols.b_lo[o.ent_q[e]] for k, e in items)

    def memory_bytes(self) -> int:
        return super().memory_bytes() + self.order.memory_bytes()


class DOuter(BandStrategy):
    """BJ-DOuter (§3.1.1): data as the outer relation, probing an interval tree on rangeB."""

    name = "BJ-DOuter"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        super().__init__(cols, options, tables)
        self.tree = IntervalTree(gapped=True)

    def _add(self, q: int) -> None:
        self.tree.insert(q, float(self.cols.b_lo[q]), float(self.cols.b_hi[q]))

    def _add_many(self, qs: np.ndarray) -> None:
        if len(self.tree) == 0:
            self.tree.build(qs, self.cols.b_lo[qs], self.cols.b_hi[qs])
        else:
            super()._add_many(qs)

    def _remove(self, q: int) -> None:
        self.tree.remove(q)

    def match(self, ev: OneEvent) -> None:
        t = self.tree
        if t.root < 0:
            return
        buf, dirn, b, v, xseq, table, mode = (ev.buf, ev.dirn, ev.key, ev.value, ev.seq,
                                              ev.table, ev.mode)
        own, oth = _sides(dirn)
        tree, tab, sub = t.arrays(), table.arrays(), self.cols.arrays()
        for run in _data_runs(table)[0]:
            if mode != PAIRS:
                buf.reserve(len(self))
            buf.run(K.douter, tree, run, tab, sub, DELTA, b, v, dirn, xseq, own, oth, mode,
                    buf.stamp)

    def match_many(self, run: EventRun) -> None:
        """:meth:`match` for a run of incoming tuples in one compiled call (``K.douter_many``)."""
        buf, rows, dirn, bs, vs, xseqs, table, mode = (run.buf, run.rows, run.dirn, run.keys,
                                                       run.values, run.seqs, run.table, run.mode)
        t = self.tree
        if t.root < 0 or len(table.order) == 0:
            return
        own, oth = _sides(dirn)
        main, dlt = key_runs(table)
        room = 0 if mode == PAIRS else len(self) + 16
        run_kernel_many(K.douter_many,
                        (t.arrays(), main, dlt, table.arrays(), self.cols.arrays(),
                         (bs, vs, xseqs), (dirn, own, oth, mode), DELTA),
                        bs.shape[0], buf, rows, room)

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "tree_nodes": self.tree.n_nodes, "tree_depth": self.tree.depth()}

    def check_invariants(self) -> None:
        assert sorted(self.tree.node_of) == sorted(self.ids.view().tolist())

    def memory_bytes(self) -> int:
        return super().memory_bytes() + self.tree.memory_bytes()


class SSIGroups:
    """Flat per-group I^l / I^r sequences mirroring a stabbing partition (listener of §2.1/App. A).

    Partition group ids are mapped to small dense local ids so the flat arrays stay compact.
    """

    def __init__(self, cols: SubscriptionColumns) -> None:
        self.cols = cols
        self._clear()

    def _clear(self) -> None:
        # aux = the range's other end (I^l: hi, I^r: lo), so a probe needs no record read for
        # the dedupe of the two scans, nor for counting pairs in a group without selections
        self.lpool = GappedGroupPool()
        self.rpool = GappedGroupPool()
        self.point = np.zeros(16, dtype=np.float64)
        self.gsel = np.zeros(16, dtype=np.int64)  # members with an A/C selection, per group
        # per group: a lower bound of its members' lo and an upper bound of their hi (exact
        # after a reset or when the extreme member leaves; never tighter than the truth)
        self.gminlo = np.full(16, np.inf)
        self.gmaxhi = np.full(16, -np.inf)
        self.local: dict[int, int] = {}
        self.n_members = 0
        self._free: list[int] = []
        self._next = 0
        self._gids: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.local)

    def arrays(self) -> tuple:
        """The groups as a kernel bundle: ``band_kernels.SSIArrays``' fields as a plain tuple
        (see :mod:`~matcher.joins.protocol`)."""
        return (self.gids(), self.point, *self.lpool.arrays(), *self.rpool.arrays(),
                self.gsel, self.gminlo, self.gmaxhi)

    def gids(self) -> np.ndarray:
        """Local group ids in increasing order of their points, so a probe's searches for
        ``p`` move forward through the other side's key order (``K.ssi_many``'s searches)."""
        if self._gids is None:
            u = np.fromiter(self.local.values(), dtype=np.int64, count=len(self.local))
            self._gids = u[np.argsort(self.point[u], kind="stable")]
        return self._gids

    def _alloc(self, gid: int, point: float) -> int:
        u = self._free.pop() if self._free else self._next
        if u == self._next:
            self._next += 1
        if u >= self.point.shape[0]:
            self.point = np.resize(self.point, 2 * u + 2)
            gsel = np.zeros(2 * u + 2, dtype=np.int64)
            gsel[: self.gsel.shape[0]] = self.gsel
            self.gsel = gsel
            self.gminlo = np.concatenate([self.gminlo, np.full(2 * u + 2 - len(self.gminlo), np.inf)])
            self.gmaxhi = np.concatenate([self.gmaxhi,
                                          np.full(2 * u + 2 - len(self.gmaxhi), -np.inf)])
        self.point[u] = point
        self.gsel[u] = 0
        self.gminlo[u] = np.inf
        self.gmaxhi[u] = -np.inf
        self.local[gid] = u
        self._gids = None
        return u

    # -- PartitionListener -----------------------------------------------------------------
    def reset(self, partition: Any) -> None:
        self._clear()
        b_lo, b_hi = self.cols.b_lo, self.cols.b_hi
        for gid, point, members in partition.groups():
            u = self._alloc(gid, point)
            self.lpool.add_group(u)
            self.rpool.add_group(u)
            m = np.asarray(members, dtype=np.int64)
            self.n_members += m.shape[0]
            lo = b_lo[m]
            o = np.argsort(lo, kind="stable")
            self.lpool.load_group(u, lo[o], m[o], b_hi[m][o])
            nh = -b_hi[m]
            o = np.argsort(nh, kind="stable")
            self.rpool.load_group(u, nh[o], m[o], lo[o])
            self.gsel[u] = int(np.count_nonzero(self.cols.selective[m]))
            if m.shape[0]:
                self.gminlo[u] = lo.min()
                self.gmaxhi[u] = b_hi[m].max()

    def group_added(self, gid: int, point: float) -> None:
        u = self._alloc(gid, point)
        self.lpool.add_group(u)
        self.rpool.add_group(u)

    def group_removed(self, gid: int) -> None:
        u = self.local.pop(gid)
        self.lpool.drop_group(u)
        self.rpool.drop_group(u)
        self._free.append(u)
        self._gids = None

    def member_added(self, gid: int, iid: int) -> None:
        r = self.cols.rec[iid]
        u = self.local[gid]
        insert_pair(self.lpool, self.rpool, u, r[0], -r[1], iid, r[1], r[0])
        self.n_members += 1
        if r[0] < self.gminlo[u]:
            self.gminlo[u] = r[0]
        if r[1] > self.gmaxhi[u]:
            self.gmaxhi[u] = r[1]
        if self.cols.selective[iid]:
            self.gsel[u] += 1

    def member_removed(self, gid: int, iid: int) -> None:
        r = self.cols.rec[iid]
        u = self.local[gid]
        remove_pair(self.lpool, self.rpool, u, r[0], -r[1], iid)
        self.n_members -= 1
        if r[0] == self.gminlo[u]:
            self.gminlo[u] = self.lpool.min_key(u)
        if r[1] == self.gmaxhi[u]:
            self.gmaxhi[u] = -self.rpool.min_key(u)
        if self.cols.selective[iid]:
            self.gsel[u] -= 1

    def point_moved(self, gid: int, point: float) -> None:
        self.point[self.local[gid]] = point
        self._gids = None

    def check_mirror(self, groups: Any) -> None:
        """Assert the flat arrays hold exactly ``groups`` (gid, point, members), sorted (tests)."""
        seen = set()
        for gid, point, members in groups:
            u = self.local[gid]
            seen.add(gid)
            assert self.point[u] == point, (gid, self.point[u], point)
            b_lo, b_hi = self.cols.b_lo, self.cols.b_hi
            left, right = self.lpool.members(u), self.rpool.members(u)
            assert sorted(q for _, q in left) == sorted(int(m) for m in members), gid
            assert sorted(q for _, q in right) == sorted(int(m) for m in members), gid
            assert [k for k, _ in left] == sorted(k for k, _ in left)
            assert [k for k, _ in right] == sorted(k for k, _ in right)
            assert all(k == b_lo[q] and b_lo[q] <= point for k, q in left)
            assert all(k == -b_hi[q] and b_hi[q] >= point for k, q in right)
            assert all(a == b_lo[q] for _, q, a in self.rpool.members(u, with_aux=True)), gid
            assert all(a == b_hi[q] for _, q, a in self.lpool.members(u, with_aux=True)), gid
            assert self.gsel[u] == sum(has_selection(self.cols.rec[int(m)]) for m in members)
            assert all(self.gminlo[u] <= b_lo[q] and self.gmaxhi[u] >= b_hi[q] for _, q in left)
        assert seen == set(self.local), "the arrays hold groups the partition does not"

    # -- matching --------------------------------------------------------------------------
    def match(self, buf: MatchBuffer, dirn: int, b: float, v: float, xseq: int,
              table: BaseTable, mode: int) -> None:
        """One tuple: ``K.ssi_many`` over a one-event bundle, writing into ``buf`` (its
        ``out_s`` takes the partner slots; rows are not tagged with an event)."""
        if not self.local or len(table.order) == 0:
            return
        cols = self.cols
        own, oth = _sides(dirn)
        main, dlt = key_runs(table)
        clean = table.order.n_dead == 0
        # every pair is owed when x is newer than every registration (an insert)
        fast_count = clean and cols.n > 0 and xseq > cols.reg[cols.n - 1]
        head = (self.arrays(), main, table.order.main_cells, dlt, table.arrays(), cols.arrays(),
                (np.array([b], dtype=np.float64), np.array([v], dtype=np.float64),
                 np.array([xseq], dtype=np.int64)), _ONE_EVENT, _NO_HINTS,
                (dirn, own, oth, mode), (clean, fast_count, DELTA, SAMPLE_EVERY))
        if mode != PAIRS:
            buf.reserve(self.n_members)
        while True:
            done, n, _ = K.ssi_many(*head, (_NO_ROWS, buf.out_q, buf.out_s),
                                    (0, buf.n, buf.stamp - 1, 0))
            if done:
                buf.n = n
                return
            buf.reserve(buf.out_q.shape[0])  # PAIRS overflowed: nothing was kept, run again

    def match_many(self, buf: MatchBuffer, rows: BatchRows, dirn: int, bs: np.ndarray,
                   vs: np.ndarray, xseqs: np.ndarray, table: BaseTable, mode: int) -> None:
        """:meth:`match` for a run of incoming tuples in one compiled call (``K.ssi_many``)."""
        if not self.local or len(table.order) == 0:
            return
        cols = self.cols
        own, oth = _sides(dirn)
        main, dlt = key_runs(table)
        clean = table.order.n_dead == 0
        fast_count = bool(clean and cols.n > 0 and int(xseqs.min()) > cols.reg[cols.n - 1])
        room = 0 if mode == PAIRS else 2 * self.n_members + 16
        order = np.argsort(bs if dirn > 0 else -bs, kind="stable")
        hints = np.zeros((2, self.point.shape[0]), dtype=np.int64)
        n0 = rows.n
        run_kernel_many(K.ssi_many,
                        (self.arrays(), main, table.order.main_cells, dlt, table.arrays(),
                         cols.arrays(), (bs, vs, xseqs), order, hints, (dirn, own, oth, mode),
                         (clean, fast_count, DELTA, SAMPLE_EVERY)),
                        bs.shape[0], buf, rows, room)
        rows.sort_by_event(n0)

    def memory_bytes(self) -> int:
        return self.lpool.memory_bytes() + self.rpool.memory_bytes() + self.point.nbytes


class SSI(BandStrategy):
    """BJ-SSI (§3.1.2): SSI over all band ranges with a dynamic (1+ε)τ stabbing partition."""

    name = "BJ-SSI"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        super().__init__(cols, options, tables)
        self.groups = SSIGroups(cols)
        self.partition = DynamicStabbingPartition(epsilon=float(options.get("epsilon", 1.0)),
                                                  listener=self.groups)

    def _add(self, q: int) -> None:
        self.partition.insert(q, float(self.cols.b_lo[q]), float(self.cols.b_hi[q]))

    def _add_many(self, qs: np.ndarray) -> None:
        self.partition.insert_many(qs, self.cols.b_lo[qs], self.cols.b_hi[qs])

    def _remove(self, q: int) -> None:
        self.partition.delete(q)

    def match(self, ev: OneEvent) -> None:
        self.groups.match(ev.buf, ev.dirn, ev.key, ev.value, ev.seq, ev.table, ev.mode)

    def match_many(self, run: EventRun) -> None:
        self.groups.match_many(run.buf, run.rows, run.dirn, run.keys, run.values, run.seqs,
                               run.table, run.mode)

    def tau(self) -> int:
        """The stabbing number τ: groups probed per tuple (the cost model's input)."""
        return len(self.groups)

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "tau": self.tau(),
                "reconstructions": self.partition.reconstructions}

    def check_invariants(self) -> None:
        """Lemma 2's (1+ε)τ bound and the flat arrays mirroring the partition."""
        self.partition.check_invariants()
        assert len(self.partition) == len(self.ids)
        self.groups.check_mirror(self.partition.groups())

    def memory_bytes(self) -> int:
        return super().memory_bytes() + self.groups.memory_bytes()


class _HotspotListener(SSIGroups):
    """Hot groups go to the SSI arrays; scattered ranges to both scattered-side indexes."""

    def __init__(self, cols: SubscriptionColumns) -> None:
        super().__init__(cols)
        self.scattered_ids = DenseIds()
        self.scattered_order = RangeOrder(cols)

    def scattered_added(self, iid: int) -> None:
        self.scattered_ids.add(iid)
        self.scattered_order.add(iid, float(self.cols.b_lo[iid]))

    def scattered_removed(self, iid: int) -> None:
        self.scattered_ids.remove(iid)
        self.scattered_order.remove(iid)


class Hotspot(BandStrategy):
    """BJ-Hotspot (§3.1.3): BJ-SSI on the α-hotspots of Theorem 1, a baseline on the rest.

    For the scattered ranges it takes, per event, the cheaper of BJ-QOuter (n_s log m) and
    BJ-MJ (n_s + m) by Theorem 2's bounds — both indexes are kept, each O(log n) per move.
    """

    name = "BJ-Hotspot"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        super().__init__(cols, options, tables)
        self.listener = _HotspotListener(cols)
        self.tracker = HotspotTracker(alpha=float(options.get("alpha", 0.001)),
                                      epsilon=float(options.get("epsilon", 1.0)),
                                      listener=self.listener)
        self.scattered_by = {"BJ-QOuter": 0, "BJ-MJ": 0}

    def _add(self, q: int) -> None:
        self.tracker.insert(q, float(self.cols.b_lo[q]), float(self.cols.b_hi[q]))

    def _add_many(self, qs: np.ndarray) -> None:
        self.tracker.insert_many(qs, self.cols.b_lo[qs], self.cols.b_hi[qs])

    def _remove(self, q: int) -> None:
        self.tracker.delete(q)

    def match(self, ev: OneEvent) -> None:
        buf, dirn, b, v, xseq, table, mode = (ev.buf, ev.dirn, ev.key, ev.value, ev.seq,
                                              ev.table, ev.mode)
        lis = self.listener
        lis.match(buf, dirn, b, v, xseq, table, mode)
        n_s = len(lis.scattered_ids)
        if n_s == 0:
            return
        m = len(table.order)
        if n_s * math.log2(m + 2) <= n_s + m:
            self.scattered_by["BJ-QOuter"] += 1
            run_qouter(lis.scattered_ids.view(), self.cols, buf, dirn, b, v, xseq, table, mode)
        else:
            self.scattered_by["BJ-MJ"] += 1
            run_merge_join(lis.scattered_order, self.cols, buf, dirn, b, v, xseq, table, mode)

    def match_many(self, run: EventRun) -> None:
        """Hot groups in one ``K.ssi_many`` call, then the scattered ranges (a subscription is
        in exactly one of the two, so their rows never need merging per subscription) in one
        ``K.qouter_many`` call when QOuter is the cheaper, else one ``K.merge_join_many``
        call; then the rows are ordered by event, stably (hot before scattered, as one at a
        time)."""
        buf, rows, dirn, bs, vs, xseqs, table, mode = (run.buf, run.rows, run.dirn, run.keys,
                                                       run.values, run.seqs, run.table, run.mode)
        lis = self.listener
        n0 = rows.n
        lis.match_many(buf, rows, dirn, bs, vs, xseqs, table, mode)
        n_s = len(lis.scattered_ids)
        if n_s == 0 or len(table.order) == 0:
            return
        m = len(table.order)
        n = bs.shape[0]
        cols = self.cols
        if n_s * math.log2(m + 2) <= n_s + m:
            self.scattered_by["BJ-QOuter"] += n
            run_qouter_many(lis.scattered_ids.view(), cols, buf, rows, dirn, bs, vs, xseqs,
                            table, mode)
        else:
            self.scattered_by["BJ-MJ"] += n
            run_merge_join_many(lis.scattered_order, cols, buf, rows, dirn, bs, vs, xseqs,
                                table, mode)
        rows.sort_by_event(n0)  # each event's hot rows, then its scattered ones

    def hot_groups(self) -> int:
        """The number of α-hotspots H (groups probed as in BJ-SSI; the cost model's input)."""
        return len(self.listener)

    def n_scattered(self) -> int:
        """n_s, the scattered subscriptions (the cost model's input)."""
        return len(self.listener.scattered_ids)

    def check_invariants(self) -> None:
        """Theorem 1's I1–I3, hot groups mirrored in the SSI arrays, scattered in both indexes."""
        self.tracker.check_invariants()
        assert len(self.tracker) == len(self.ids)
        self.listener.check_mirror(self.tracker.hot_groups())
        scattered = sorted(int(q) for q in self.tracker.scattered())
        assert sorted(self.listener.scattered_ids.view().tolist()) == scattered
        order = self.listener.scattered_order
        live = [int(order.ent_q[e]) for _, e in order.runs.items(order.ent_alive)]
        assert sorted(live) == scattered

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "hotspots": len(self.listener),
                "scattered": len(self.listener.scattered_ids),
                "moved_into_scattered": self.tracker.moved_into_scattered,
                "moved_out_of_scattered": self.tracker.moved_out_of_scattered,
                "scattered_strategy": dict(self.scattered_by)}

    def memory_bytes(self) -> int:
        return super().memory_bytes() + self.listener.memory_bytes()


BAND_CLASSES: dict[str, type[BandStrategy]] = {
    "BJ-QOuter": QOuter, "BJ-DOuter": DOuter, "BJ-MJ": MergeJoin, "BJ-SSI": SSI,
    "BJ-Hotspot": Hotspot,
}
"""The band strategies by paper name (``BAND_STRATEGIES`` order)."""
