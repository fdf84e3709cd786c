"""Window joins: select join plus ``|r.time − s.time| ≤ w`` — the four strategies of §3.3.

An incoming tuple x (side R or S, key b, value v, event time t) affects q iff v is in q's own
range and some partner of key b has its value in q's other range and ``|t − t_s| ≤ w_q``. The
partners come from the other side's :class:`~matcher.structures.key_index.KeyIndex` (by value
and by time); 𝒟 is a 3-d :class:`~matcher.structures.rect_index.BoxForest` over
``rangeA × rangeC × [0, w]``.

==============  ==================================================  ==============================
strategy        subscription index                                  per-event cost (Theorem 4)
==============  ==================================================  ==============================
WJ-JoinFirst    𝒟                                                   O(log m + m_b g₃(n) + k)
WJ-SelectFirst  interval tree on own ranges; (C, T) per key         O(log n + n' g₂(m') + k)
WJ-SSI          𝒟 + SSI on the other ranges (per direction) +      O(log m + m'_b + m̄_b g₃(n) + k)
                skylines per key and stabbing point (§3.3.2)
WJ-Hotspot      WJ-SSI on the α-hotspots (𝒟 of hot subscriptions    hot part as WJ-SSI with τ ≤ 2/α
                only), WJ-SelectFirst on the scattered ones         + scattered as WJ-SelectFirst
==============  ==================================================  ==============================

Exactness beyond the paper's in-order, append-only streams (:mod:`matcher.joins.skyline`):

* event time, not arrival order, is the T dimension; 𝒟's third coordinate is ``|t − t_s|``;
* the stored skylines rank partners by recency and cover ``t_s ≥ ω_b = W − w_max`` (W the
  watermark; every future tuple has ``t ≥ W``), so they are the skylines by ``|Δt|`` whenever no
  partner is newer than x (always true with lateness 0). Otherwise — x arrived out of order, or
  x is being deleted after W moved past it — the skylines by ``−|t − t_s|`` are computed in one
  pass for this tuple (no worse than WJ-JoinFirst's pass), and the stored ones are untouched;
* removals (delete, retention) of a skyline point mark its key stale.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.joins import window_kernels as K
from hotjoin.matcher.joins.interface import EventRun, KindIndex, OneEvent, Tables
from hotjoin.matcher.joins.protocol import (
    A_LO,
    C_LO,
    PAIRS,
    REG,
    BatchRows,
    KeyedEvents,
    MatchBuffer,
    Partners,
    room_of,
    run_kernel_many,
)
from hotjoin.matcher.joins.select import (
    OwnRangeIndex,
    OwnScanScratch,
    SelectFirstHooks,
    box_coords,
    own_col,
    own_other,
)
from hotjoin.matcher.joins.skyline import SkylineIndex, skyline_pass
from hotjoin.matcher.partition.hotspot import HotspotTracker
from hotjoin.matcher.partition.stabbing import DynamicStabbingPartition
from hotjoin.matcher.structures.interval_tree import IntervalTree
from hotjoin.matcher.structures.rect_index import BoxForest, forest_arrays
from hotjoin.matcher.subscriptions import SubscriptionColumns

WINDOW_STRATEGIES = ("WJ-JoinFirst", "WJ-SelectFirst", "WJ-SSI", "WJ-Hotspot")
_NONE = np.empty(0, dtype=np.int64)


def partners_of(table: BaseTable, b: float) -> Partners | None:
    """The partners of key ``b`` in ``table`` (None when no stored tuple has the key)."""
    ix = table.key_index
    assert ix is not None, "the engine enables the key index before matching equi-joins"
    g = ix.lookup(b)
    return None if g < 0 else Partners(table, g)


def index_arrays(table: BaseTable) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The window batch kernels' ``K`` bundle: the other side's key index by value (keys,
    slots) and by time (keys, slots)."""
    ix = table.key_index
    assert ix is not None and ix.by_time is not None
    return (ix.by_value.keys, ix.by_value.ids, ix.by_time.keys, ix.by_time.ids)


def table_arrays(table: BaseTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The window kernels' ``T`` bundle of the other side's ``table``: times, values, seqs."""
    return (table.times, table.values, table.seqs)


def sub_arrays(cols: SubscriptionColumns,
               dirn: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The window kernels' ``Q`` bundle for an incoming tuple of direction ``dirn``: ``(rec,
    mark, acc, oth)``, ``oth`` the other range's ``rec`` column."""
    return (cols.rec, cols.mark, cols.acc, C_LO if dirn > 0 else A_LO)


def run_window_select_first(qids: np.ndarray, cols: SubscriptionColumns, buf: MatchBuffer,
                            dirn: int, b: float, v: float, t: int, xseq: int, table: BaseTable,
                            mode: int, tree: IntervalTree | None = None,
                            p: Partners | None = None) -> None:
    """WJ-SelectFirst over ``tree`` (or over the plain list ``qids`` when ``tree`` is None);
    ``p``: the key's partners if the caller looked them up already."""
    if p is None:
        p = partners_of(table, b)
        if p is None:
            return
    if tree is not None and tree.root < 0:
        return
    if mode != PAIRS:
        buf.reserve(qids.shape[0] if tree is None else len(tree))
    buf.run(K.wj_select_first, _NO_TREE if tree is None else tree.arrays(), qids, p.arrays(),
            table_arrays(table), sub_arrays(cols, dirn), v, t, own_col(dirn), xseq, mode,
            buf.stamp)


_NO_TREE = IntervalTree().arrays()
"""An empty tree's bundle (``root`` −1): ``wj_select_first`` then reads the plain list ``qids``."""
_NO_SCATTERED = IntervalTree()
"""WJ-SSI's stand-in for WJ-Hotspot's tree of scattered ranges: empty."""


class PointGroups:
    """PartitionListener that keeps only the stabbing points (WJ-SSI's skylines need them)."""

    def __init__(self) -> None:
        self.point: dict[int, float] = {}
        self.version = 0
        self._sorted = np.empty(0, dtype=np.float64)
        self._sorted_version = -1

    def __len__(self) -> int:
        return len(self.point)

    def points(self) -> np.ndarray:
        if self._sorted_version != self.version:
            self._sorted = np.sort(np.fromiter(self.point.values(), dtype=np.float64,
                                               count=len(self.point)))
            self._sorted_version = self.version
        return self._sorted

    def reset(self, partition: Any) -> None:
        self.point = {gid: float(p) for gid, p, _ in partition.groups()}
        self.version += 1

    def group_added(self, gid: int, point: float) -> None:
        self.point[gid] = float(point)
        self.version += 1

    def group_removed(self, gid: int) -> None:
        del self.point[gid]
        self.version += 1

    def member_added(self, gid: int, iid: int) -> None:
        pass

    def member_removed(self, gid: int, iid: int) -> None:
        pass

    def point_moved(self, gid: int, point: float) -> None:
        self.point[gid] = float(point)
        self.version += 1


class HotWindowGroups(PointGroups):
    """Hotspot listener: hot points, 𝒟 over the hot subscriptions, interval tree (own ranges)
    over the scattered ones."""

    def __init__(self, cols: SubscriptionColumns, dirn: int) -> None:
        super().__init__()
        self.cols = cols
        self.coords = box_coords(cols, 0, window=True)
        self.d = BoxForest(3)
        self.d.add_group(0)
        self.dirn = dirn  # columns are re-read at each call: they grow (reallocate)
        self.scattered = IntervalTree()

    def reset(self, partition: Any) -> None:
        super().reset(partition)
        members = [np.asarray(m, dtype=np.int64) for _, _, m in partition.groups()]
        allm = np.concatenate(members) if members else _NONE
        self.d.reset_groups({0: allm}, self.coords)

    def member_added(self, gid: int, iid: int) -> None:
        self.d.add(0, iid, self.coords)

    def member_removed(self, gid: int, iid: int) -> None:
        self.d.remove(0, iid)

    def scattered_added(self, iid: int) -> None:
        own_lo, own_hi = own_other(self.cols, self.dirn)[:2]
        self.scattered.insert(iid, float(own_lo[iid]), float(own_hi[iid]))

    def scattered_removed(self, iid: int) -> None:
        self.scattered.remove(iid)

    def memory_bytes(self) -> int:
        return self.d.memory_bytes() + self.scattered.memory_bytes()


class WindowStrategy(KindIndex):
    """A window-join strategy (§3.3): an index over window subscriptions (the kind interface,
    ``joins/interface.py``) that tracks w_max and matches a tuple against the partners of its
    key by value and by time, looked up once per tuple (``OneEvent.partners``) or once per run
    (``EventRun.keyed``). A strategy writes ``_match`` (one tuple with partners) and
    ``_match_keyed`` (the tuples of a run that have partners, in one ``*_many`` kernel call)."""

    kind = "window"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        super().__init__(cols, options, tables)
        self._w_count: dict[int, int] = {}
        self.wmax = 0
        #: smallest w of the indexed subscriptions (``wj_own_scan``'s uniform-window test)
        self.wmin = 0
        #: largest registration sequence number of any subscription ever indexed (a bound)
        self.reg_max = -np.inf

    def _track(self, q: int, delta: int) -> None:
        w = int(self.cols.w[q])
        c = self._w_count.get(w, 0) + delta
        if c:
            self._w_count[w] = c
        else:
            del self._w_count[w]
        self._w_bounds()
        if delta > 0:
            self.reg_max = max(self.reg_max, float(self.cols.rec[q, REG]))

    def _track_many(self, qs: np.ndarray) -> None:
        for w in self.cols.w[qs].tolist():
            self._w_count[w] = self._w_count.get(w, 0) + 1
        self._w_bounds()
        if qs.shape[0]:
            self.reg_max = max(self.reg_max, float(self.cols.rec[qs, REG].max()))

    def _w_bounds(self) -> None:
        self.wmax = max(self._w_count) if self._w_count else 0
        self.wmin = min(self._w_count) if self._w_count else 0

    def match(self, ev: OneEvent) -> None:
        """Output for the tuple ``ev`` (its time ``ev.time``, the watermark ``ev.now``); the
        key's partners are looked up once (none: no output) and handed down."""
        p = ev.partners()
        if p is not None:
            self._match(ev, p)

    def _match(self, ev: OneEvent, p: Partners) -> None:
        """The tuple ``ev``, whose key has the partners ``p``."""
        raise NotImplementedError

    def match_many(self, run: EventRun) -> None:
        """:meth:`match` for each tuple of ``run``, rows in event order: the tuples with
        partners (``run.keyed()``, one compiled lookup for the run) go to
        :meth:`_match_keyed`, then the rows are ordered by event, stably."""
        ev = run.keyed()
        if ev is None:
            return
        n0 = run.rows.n
        self._match_keyed(run, ev)
        run.rows.sort_by_event(n0)

    def _match_keyed(self, run: EventRun, ev: KeyedEvents) -> None:
        """Rows of the events ``ev`` (each with partners), each event's rows together and in
        one-at-a-time order; the caller orders events. Each strategy runs its ``*_many``
        kernel once."""
        raise NotImplementedError

    def snapshot(self, ev: OneEvent, qids: np.ndarray) -> None:
        """WJ-SelectFirst over the subscriptions ``qids`` (``Engine.result``)."""
        p = ev.partners()
        if p is not None:
            run_window_select_first(qids, self.cols, ev.buf, ev.dirn, ev.key, ev.value, ev.time,
                                    ev.seq, ev.table, ev.mode, p=p)

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "w_max": self.wmax}


class JoinFirst(WindowStrategy):
    """WJ-JoinFirst (§3.3.1): partners within w_max of t, each probing 𝒟."""

    name = "WJ-JoinFirst"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        super().__init__(cols, options, tables)
        self.coords = box_coords(cols, 0, window=True)
        self.d = BoxForest(3)
        self.d.add_group(0)

    def _add(self, q: int) -> None:
        self.d.add(0, q, self.coords)

    def _add_many(self, qs: np.ndarray) -> None:
        self.d.add_many(0, qs, self.coords, whole=len(self.ids) == qs.shape[0])

    def _remove(self, q: int) -> None:
        self.d.remove(0, q)

    def _match(self, ev: OneEvent, p: Partners) -> None:
        c, d, buf, dirn = self.cols, self.d, ev.buf, ev.dirn
        if ev.mode != PAIRS:
            buf.reserve(len(self))
        (d.hits,) = buf.run_fresh(
            K.wj_join_first, (forest_arrays(d), p.arrays(), table_arrays(ev.table),
                              sub_arrays(c, dirn), ev.value, ev.time, self.wmax, dirn, ev.seq,
                              ev.mode, d.stack), (d.hits,))

    def _match_keyed(self, run: EventRun, ev: KeyedEvents) -> None:
        table, dirn, d = run.table, run.dirn, self.d
        (d.hits,) = run_kernel_many(
            K.wj_join_first_many, (forest_arrays(d), index_arrays(table), table_arrays(table),
                                   sub_arrays(self.cols, dirn), self.wmax, tuple(ev),
                                   (dirn, own_col(dirn), run.mode), d.stack),
            ev.pos.shape[0], run.buf, run.rows, room_of(run.mode, len(self)), (d.hits,))

    def memory_bytes(self) -> int:
        return super().memory_bytes() + self.d.memory_bytes()


class SelectFirst(SelectFirstHooks, WindowStrategy):
    """WJ-SelectFirst (§3.3.1): SJ-SelectFirst's index (:class:`OwnRangeIndex`: the own ranges
    as scan-ordered stabbing groups), its scan lists the subscriptions whose own range holds v
    and whose other range holds a partner value, then B → (C, T) per candidate
    (``window_kernels.wj_own_scan``)."""

    name = "WJ-SelectFirst"
    own: OwnRangeIndex

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        super().__init__(cols, options, tables)  # type: ignore[call-arg]
        self.own = OwnRangeIndex(cols, float(options.get("epsilon", 1.0)))
        self.scratch = OwnScanScratch()

    def _match(self, ev: OneEvent, p: Partners) -> None:
        dirn = ev.dirn
        groups = self.own.of(dirn)
        if not groups.local:
            return
        r = groups.runs
        r.ensure_scratch()
        buf = ev.buf
        if ev.mode != PAIRS:
            buf.reserve(r.n_members + 16)
        buf.run(K.wj_own_scan, (groups.gids(), groups.point, r.arrays(), r.cand, r.clo, r.chi,
                                self.scratch.side_for(r.n_members), self.scratch.buckets),
                p.arrays(), table_arrays(ev.table), sub_arrays(self.cols, dirn),
                (self.wmin, self.wmax, self.reg_max), ev.value, ev.time, own_col(dirn), ev.seq,
                ev.mode, buf.stamp)

    def _match_keyed(self, run: EventRun, ev: KeyedEvents) -> None:
        dirn, table = run.dirn, run.table
        groups = self.own.of(dirn)
        if not groups.local:
            return
        r = groups.runs
        r.ensure_scratch()
        run_kernel_many(
            K.wj_own_scan_many, ((groups.gids(), groups.point, r.arrays(), r.cand, r.clo, r.chi,
                                  self.scratch.side_for(r.n_members), self.scratch.buckets),
                                 index_arrays(table), table_arrays(table),
                                 sub_arrays(self.cols, dirn), (self.wmin, self.wmax, self.reg_max),
                                 tuple(ev), (dirn, own_col(dirn), run.mode)),
            ev.pos.shape[0], run.buf, run.rows, room_of(run.mode, r.n_members))

    def tau(self, d: int) -> int:
        """Stabbing number of the own ranges an incoming tuple of direction ``d`` scans."""
        return len(self.own.of(d))

    def check_invariants(self) -> None:
        """Every own-range group's runs hold exactly its members (tests)."""
        self.own.check_invariants()

    def memory_bytes(self) -> int:
        return super().memory_bytes() + self.scratch.memory_bytes()


def run_window_ssi(sky: SkylineIndex, groups: PointGroups, d: BoxForest, wmax: int,
                   cols: SubscriptionColumns, buf: MatchBuffer, dirn: int, b: float, v: float,
                   t: int, xseq: int, table: BaseTable, mode: int, now: int,
                   p: Partners, members: int) -> str:
    """WJ-SSI for one tuple whose key has partners ``p`` (``members``: the subscriptions in
    ``d``); returns which skylines were probed (``stored`` / ``one-pass``, ``none`` without
    groups)."""
    if not len(groups):
        return "none"
    sky.set_points(groups.points())
    newest = int(table.times[p.ts[p.tbase + p.tsize - 1]])
    if newest <= t and now <= t:
        cand = sky.refresh(b, now - wmax, p.g)
        assert cand is not None
        how = "stored"
    else:
        cand = skyline_pass(p.pv, p.ps, table.times, p.base, p.size, sky.points, 0, True, t,
                            wmax)[2]
        how = "one-pass"
    if mode != PAIRS:
        buf.reserve(members)
    (d.hits,) = buf.run_fresh(
        K.wj_ssi, (cand, forest_arrays(d), p.arrays(), table_arrays(table),
                   sub_arrays(cols, dirn), v, t, wmax, dirn, xseq, mode, d.stack), (d.hits,))
    return how


_NO_POINTS = np.empty(0, dtype=np.float64)


def run_window_ssi_many(sky: SkylineIndex, groups: PointGroups, d: BoxForest, wmax: int,
                        tree: IntervalTree, cols: SubscriptionColumns, buf: MatchBuffer,
                        rows: BatchRows, dirn: int, ev: KeyedEvents, table: BaseTable,
                        mode: int, members: int) -> None:
    """:func:`run_window_ssi` and then WJ-SelectFirst over ``tree`` (WJ-Hotspot's scattered
    ranges; empty for WJ-SSI) for every event of ``ev``, in one compiled call that also keeps
    the skylines (``window_kernels.wj_ssi_many``); ``members``: the subscriptions of ``d``
    and ``tree``."""
    points = _NO_POINTS
    sky.sync()
    if len(groups):
        sky.set_points(groups.points())
        points = sky.points
        sky.ready_for(int(ev.g.max()))  # any of the run's keys may be given skylines
    d.hits, sky.pool = run_kernel_many(
        K.wj_ssi_many, (sky.store(), points, forest_arrays(d), tree.arrays(),
                        index_arrays(table), table_arrays(table), sub_arrays(cols, dirn), wmax,
                        tuple(ev), (dirn, own_col(dirn), mode), d.stack),
        ev.pos.shape[0], buf, rows, room_of(mode, members), (d.hits, sky.pool))


class SSI(WindowStrategy):
    """WJ-SSI (§3.3.2): 𝒟 probed only with skyline points around the SSI's stabbing points."""

    name = "WJ-SSI"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        super().__init__(cols, options, tables)
        self.coords = box_coords(cols, 0, window=True)
        self.d = BoxForest(3)
        self.d.add_group(0)
        eps = float(options.get("epsilon", 1.0))
        self.groups = {d: PointGroups() for d in (1, -1)}
        self.parts = {d: DynamicStabbingPartition(epsilon=eps, listener=self.groups[d])
                      for d in (1, -1)}
        # an R tuple probes the skylines of S tuples (C plane), an S tuple those of R tuples
        self.skies = {1: SkylineIndex(tables["S"]), -1: SkylineIndex(tables["R"])}

    def _add(self, q: int) -> None:
        self.d.add(0, q, self.coords)
        for d, part in self.parts.items():
            lo, hi = own_other(self.cols, d)[2:]
            part.insert(q, float(lo[q]), float(hi[q]))

    def _add_many(self, qs: np.ndarray) -> None:
        self.d.add_many(0, qs, self.coords, whole=len(self.ids) == qs.shape[0])
        for d, part in self.parts.items():
            lo, hi = own_other(self.cols, d)[2:]
            part.insert_many(qs, lo[qs], hi[qs])

    def _remove(self, q: int) -> None:
        self.d.remove(0, q)
        for part in self.parts.values():
            part.delete(q)

    def _match(self, ev: OneEvent, p: Partners) -> None:
        dirn = ev.dirn
        d = 1 if dirn > 0 else -1
        sky = self.skies[d]
        sky.count_probe(run_window_ssi(sky, self.groups[d], self.d, self.wmax, self.cols,
                                       ev.buf, dirn, ev.key, ev.value, ev.time, ev.seq, ev.table,
                                       ev.mode, ev.now, p, len(self)))

    def _match_keyed(self, run: EventRun, ev: KeyedEvents) -> None:
        dirn = run.dirn
        d = 1 if dirn > 0 else -1
        run_window_ssi_many(self.skies[d], self.groups[d], self.d, self.wmax, _NO_SCATTERED,
                            self.cols, run.buf, run.rows, dirn, ev, run.table, run.mode,
                            len(self))

    def probes(self) -> dict[str, int]:
        """Matches through the stored skylines, a one-pass skyline, or none (both directions)."""
        a, b = self.skies[1].probes(), self.skies[-1].probes()
        return {k: a[k] + b[k] for k in a}

    def tau(self, d: int) -> int:
        """The stabbing number of direction ``d``'s partition (the cost model's input)."""
        return len(self.groups[d])

    def stats(self) -> dict[str, Any]:
        sk = self.skies[1]
        return {**super().stats(), "tau": self.tau(1), "tau_s": self.tau(-1),
                "skyline_points": sk.size() + self.skies[-1].size(),
                "skyline_recomputes": sk.recomputes + self.skies[-1].recomputes,
                "skyline_trims": sk.trims + self.skies[-1].trims,
                "skyline_inserts": sk.inserts + self.skies[-1].inserts,
                "probes": self.probes()}

    def check_invariants(self) -> None:
        """The skyline stores' entries are well formed (tests)."""
        for sky in self.skies.values():
            sky.check_invariants()

    def memory_bytes(self) -> int:
        return (super().memory_bytes() + self.d.memory_bytes()
                + sum(s.memory_bytes() for s in self.skies.values()))


class Hotspot(WindowStrategy):
    """WJ-Hotspot (§3.3.3): WJ-SSI on the α-hotspots, WJ-SelectFirst on the scattered."""

    name = "WJ-Hotspot"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        super().__init__(cols, options, tables)
        self.groups = {d: HotWindowGroups(cols, d) for d in (1, -1)}
        self.trackers = {d: HotspotTracker(alpha=float(options.get("alpha", 0.001)),
                                           epsilon=float(options.get("epsilon", 1.0)),
                                           listener=self.groups[d]) for d in (1, -1)}
        self.skies = {1: SkylineIndex(tables["S"]), -1: SkylineIndex(tables["R"])}

    def _add(self, q: int) -> None:
        for d, tr in self.trackers.items():
            lo, hi = own_other(self.cols, d)[2:]
            tr.insert(q, float(lo[q]), float(hi[q]))

    def _add_many(self, qs: np.ndarray) -> None:
        for d, tr in self.trackers.items():
            lo, hi = own_other(self.cols, d)[2:]
            tr.insert_many(qs, lo[qs], hi[qs])
            self.groups[d].d.settle()  # promotions arrive member by member

    def _remove(self, q: int) -> None:
        for tr in self.trackers.values():
            tr.delete(q)

    def check_invariants(self) -> None:
        """The skyline stores' entries are well formed (tests)."""
        for sky in self.skies.values():
            sky.check_invariants()

    def _match(self, ev: OneEvent, p: Partners) -> None:
        buf, dirn, b, v, t, xseq, table, mode, now = (ev.buf, ev.dirn, ev.key, ev.value, ev.time,
                                                      ev.seq, ev.table, ev.mode, ev.now)
        d = 1 if dirn > 0 else -1
        g = self.groups[d]
        sky = self.skies[d]
        sky.count_probe(run_window_ssi(sky, g, g.d, self.wmax, self.cols, buf, dirn, b, v, t,
                                       xseq, table, mode, now, p, len(self)))
        run_window_select_first(_NONE, self.cols, buf, dirn, b, v, t, xseq, table, mode,
                                g.scattered, p)

    def _match_keyed(self, run: EventRun, ev: KeyedEvents) -> None:
        dirn = run.dirn
        d = 1 if dirn > 0 else -1
        g = self.groups[d]
        run_window_ssi_many(self.skies[d], g, g.d, self.wmax, g.scattered, self.cols, run.buf,
                            run.rows, dirn, ev, run.table, run.mode, len(self))

    def tau(self, d: int) -> int:
        """The number of direction ``d``'s hotspots (the cost model's input)."""
        return len(self.groups[d])

    def n_scattered(self, d: int) -> int:
        """Direction ``d``'s scattered subscriptions (the cost model's input)."""
        return len(self.groups[d].scattered)

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "hotspots": self.tau(1), "hotspots_s": self.tau(-1),
                "scattered": self.n_scattered(1), "scattered_s": self.n_scattered(-1),
                "skyline_points": self.skies[1].size() + self.skies[-1].size()}

    def memory_bytes(self) -> int:
        return (super().memory_bytes() + sum(g.memory_bytes() for g in self.groups.values())
                + sum(s.memory_bytes() for s in self.skies.values()))


WINDOW_CLASSES: dict[str, type[WindowStrategy]] = {
    "WJ-JoinFirst": JoinFirst, "WJ-SelectFirst": SelectFirst, "WJ-SSI": SSI,
    "WJ-Hotspot": Hotspot,
}
"""The window strategies by paper name (``WINDOW_STRATEGIES`` order)."""
