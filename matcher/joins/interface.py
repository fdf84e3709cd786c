"""The kind interface (paper 004 §3, §4): what the engine asks of a kind's strategies and router.

Every kind's strategies (``joins/band.py``, ``joins/select.py``, ``joins/window.py``) and its
router (``router/band.py``, ``router/select.py``, ``router/window.py``) subclass
:class:`KindIndex`, and the engine (``matcher/engine.py``) drives them through its methods
only, one signature per operation:

==========================  ====================================================================
operation                   method
==========================  ====================================================================
subscribe / unsubscribe     :meth:`~KindIndex.add`, :meth:`~KindIndex.add_many`,
                            :meth:`~KindIndex.remove` (the id list, then the index);
                            a router's members, which share its id list (:meth:`share_ids`),
                            get :meth:`~KindIndex.index`, :meth:`~KindIndex.index_many`,
                            :meth:`~KindIndex.unindex`
match one tuple             :meth:`~KindIndex.match` (:class:`OneEvent`; output in its buffer)
match a run of tuples       :meth:`~KindIndex.match_many` (:class:`EventRun`; rows in its rows)
result of some subs         :meth:`~KindIndex.snapshot` (a snapshot subscription's pairs)
state                       :meth:`~KindIndex.export_state` / :meth:`~KindIndex.load_state`
options                     :meth:`~KindIndex.check_options` (at engine construction)
introspection               :meth:`~KindIndex.stats` (``tau``, ``hotspots``, ``decisions``,
                            ``corrections`` where they apply), :meth:`~KindIndex.check_invariants`,
                            :meth:`~KindIndex.memory_bytes`
==========================  ====================================================================

A run's bundle (:class:`EventRun`) carries what the three kinds need, unified: the incoming
tuples' keys, values, times, sequence numbers and the watermark each is matched under, the other
side's table, the output mode and buffers. The equi-join kinds (select, window) reach their
partners through :meth:`EventRun.keyed`, which looks the run's keys up once (one compiled call)
for every kind and router of the run; a router hands each member its share of those events
(:meth:`EventRun.restricted`) and calls nothing but these methods, besides the public sizes its
members' cost models read (``tau``, ``n_scattered``, ``skies``, ...: ``router/cost_model.py``).

**One tuple is not a run of one.** Matching one tuple through the run path (``keyed``'s
compiled lookup, the bundle's one-element arrays, the row buffer and its copy back) was measured
against the one-tuple path (``Engine.probe``, identify, 3,000 tuples, CPU time, best of 10;
20,000 subscriptions whose A and C ranges are 1–3 wide in [0, 1000], 20,000 stored tuples over
2,000 keys): µs per tuple one at a time against as a run of one, SJ-SelectFirst 7.0 / 14.9,
SJ-SSI 8.9 / 17.0, SJ-Dynamic 7.9 / 21.6, WJ-SSI 10.5 / 19.7, WJ-Dynamic 6.2 / 21.3, BJ-SSI
(~500 pairs per tuple) 120 / 125: 5–15 µs of fixed cost per call, where a whole probe costs
6–11. So :meth:`~KindIndex.match` keeps its own code and its own bundle, :class:`OneEvent`: the
engine keeps one and refills it per operation (no allocation), and the key's partners are looked
up once per tuple for every kind and router (``partner_run``, ``partners``).

>>> ev = OneEvent(); _ = ev.set(1, 2.0, 3.0, 10, 7, 10, None, 0)
>>> ev.dirn, ev.key, ev.value, ev.time, ev.seq, ev.now
(1, 2.0, 3.0, 10, 7, 10)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.joins.protocol import (
    BatchRows,
    DenseIds,
    KeyedEvents,
    MatchBuffer,
    Partners,
)
from hotjoin.matcher.subscriptions import SubscriptionColumns

__all__ = ["EventRun", "KindIndex", "OneEvent", "Tables"]

Tables = Mapping[str, BaseTable]
"""The engine's two base tables by side ("R", "S"), as every kind's constructor takes them."""

_UNKNOWN = -2
"""A key group not looked up yet (``KeyIndex`` groups are ≥ 0, −1 is "no partner")."""


class OneEvent:
    """One incoming tuple matched against the other side's stored tuples (the one-tuple bundle).

    ``dirn`` +1 for an R tuple (its partners are S tuples), −1 for an S tuple; ``key``,
    ``value``, ``time`` and ``end`` (the closed interval ``[time, end]``; ``end == time`` for a
    point, what every kind but the interval joins reads); ``seq`` the sequence number the tuple's pairs form at (the owed test:
    ``matcher/oracle.py``); ``now`` the watermark it is matched under (window joins); ``table``
    the other side's :class:`~matcher.base_table.BaseTable`; ``mode`` IDENTIFY, COUNT or PAIRS;
    ``buf`` the :class:`~matcher.joins.protocol.MatchBuffer` every kind appends to.

    The key's partners are looked up on first use and kept until :meth:`set` refills the
    bundle, so the kinds and a router share one lookup. O(1) per field.
    """

    __slots__ = ("_group", "_partners", "_run", "buf", "dirn", "end", "key", "mode", "now",
                 "seq", "table", "time", "value")

    def __init__(self, buf: MatchBuffer | None = None) -> None:
        self.buf = MatchBuffer() if buf is None else buf
        self.set(1, 0.0, 0.0, 0, 0, 0, None, 0)

    def set(self, dirn: int, key: float, value: float, time: int, seq: int, now: int,
            table: Any, mode: int, group: int = _UNKNOWN, end: int | None = None) -> OneEvent:
        """Refill the bundle for another tuple (``group``: its key's group in ``table``'s key
        index when the caller knows it, which saves the lookup; ``end`` None: a point);
        returns it."""
        self.dirn = dirn
        self.key = key
        self.value = value
        self.time = time
        self.end = time if end is None else end
        self.seq = seq
        self.now = now
        self.table = table
        self.mode = mode
        self._group = group
        self._run: tuple[Any, int, int] | None = None
        self._partners: Partners | None = None
        return self

    def group(self) -> int:
        """The key's group in the other side's key index, −1 when no stored tuple has the key
        (one dict lookup, the first time)."""
        g = self._group
        if g == _UNKNOWN:
            ix = self.table.key_index
            assert ix is not None, "the engine enables the key index before matching equi-joins"
            g = self._group = ix.lookup(self.key)
        return g

    def partner_run(self) -> tuple[Any, int, int]:
        """``(pool, base, size)``: the key's partners sorted by value are ``pool.keys[base :
        base + size]`` (``KeyIndex.by_value``; size 0 when there is none)."""
        r = self._run
        if r is None:
            ix = self.table.key_index
            assert ix is not None, "the engine enables the key index before matching equi-joins"
            g = self._group
            if g == _UNKNOWN:  # :meth:`group`, written out: this is every equi-join's first step
                g = self._group = ix.lookup(self.key)
            pool = ix.by_value
            r = self._run = (pool, 0, 0) if g < 0 else (pool, int(pool.start[g]),
                                                         int(pool.size[g]))
        return r

    def partners(self) -> Partners | None:
        """The key's partners by value and by time (window joins), None when there is none."""
        p = self._partners
        if p is None:
            g = self.group()
            if g < 0:
                return None
            p = self._partners = Partners(self.table, g)
        return p


class EventRun:
    """A run of incoming tuples of one side matched against the same stored tuples (the run
    bundle): arrays ``keys``, ``values`` (float64), ``times``, ``ends`` (``== times`` for
    points), ``seqs`` (the sequence number each tuple's pairs form at) and ``nows`` (the watermark each is matched under; int64), one entry
    per tuple; ``dirn``, ``table``, ``mode`` as :class:`OneEvent`; the output goes to ``rows``
    (:class:`~matcher.joins.protocol.BatchRows`, tagged with each tuple's position in the run),
    ``buf`` lends its dedupe stamp.

    ``groups`` (optional): each tuple's key group in ``table``'s key index, when the caller
    looked them up against the table as it stands (it then need not be looked up again).
    """

    __slots__ = ("_groups", "_keyed", "buf", "dirn", "ends", "keys", "mode", "nows", "rows",
                 "seqs", "table", "times", "values")

    def __init__(self, dirn: int, keys: np.ndarray, values: np.ndarray, times: np.ndarray,
                 seqs: np.ndarray, nows: np.ndarray, table: BaseTable, mode: int,
                 buf: MatchBuffer, rows: BatchRows, groups: np.ndarray | None = None,
                 keyed: KeyedEvents | None = None, ends: np.ndarray | None = None) -> None:
        self.dirn = dirn
        self.keys = keys
        self.values = values
        self.times = times
        self.ends = times if ends is None else ends
        self.seqs = seqs
        self.nows = nows
        self.table = table
        self.mode = mode
        self.buf = buf
        self.rows = rows
        self._groups = groups
        self._keyed = keyed

    def __len__(self) -> int:
        return int(self.keys.shape[0])

    def keyed(self) -> KeyedEvents | None:
        """The tuples whose key has partners on the other side, as one
        :class:`~matcher.joins.protocol.KeyedEvents` (positions, key groups, partner runs by
        value and — once window joins keep that order — by time, values, times, seqs,
        watermarks); None when no tuple has one. Looked up the first time, for the whole run
        in one compiled call (``KeyIndex.lookup_many``), and shared by every kind and router
        that matches the run. O(n)."""
        ev = self._keyed
        if ev is None:
            ix = self.table.key_index
            assert ix is not None, "the engine enables the key index before matching equi-joins"
            gs = ix.lookup_many(self.keys) if self._groups is None else self._groups
            keep = np.flatnonzero(gs >= 0)
            g = gs[keep]
            bv, bt = ix.by_value, ix.by_time
            base, size = bv.start[g], bv.size[g]
            tbase, tsize = (base, size) if bt is None else (bt.start[g], bt.size[g])
            ev = self._keyed = KeyedEvents(keep, g, self.keys[keep], base, size, tbase, tsize,
                                           self.values[keep], self.times[keep],
                                           self.seqs[keep], self.nows[keep])
        return ev if ev.pos.shape[0] else None

    def restricted(self, ev: KeyedEvents) -> EventRun:
        """This run narrowed to the keyed tuples ``ev`` (a router's share for one member): its
        :meth:`keyed` is ``ev``, whose rows keep their positions in the whole run. For the
        equi-join kinds, which read only :meth:`keyed`."""
        return EventRun(self.dirn, self.keys, self.values, self.times, self.seqs, self.nows,
                        self.table, self.mode, self.buf, self.rows, None, ev, self.ends)


class KindIndex:
    """One kind's index over its subscriptions: a strategy of §3, or a router of §4 over them.

    The id list (``ids``, a :class:`~matcher.joins.protocol.DenseIds`) holds the live
    subscriptions of the kind; a strategy keeps its own index beside it through the hooks
    ``_add``/``_add_many``/``_remove``, and per-kind bookkeeping over the live subscriptions
    (w_max, the largest registration) through ``_track``/``_track_many``. Every constructor
    takes ``(cols, options, tables)``: the subscription columns, the engine's options and the
    two base tables.
    """

    kind: ClassVar[str] = ""
    """The kind's name in the registry (``matcher/kinds.py``)."""
    name: ClassVar[str] = ""
    """The strategy's paper name (``SJ-SSI``, ``BJ-Dynamic``, ...)."""

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: Tables) -> None:
        self.cols = cols
        self.options = options
        self.tables = tables
        self.ids = DenseIds()

    def __len__(self) -> int:
        return self.ids.n  # ``len(self.ids)`` without a second call: asked per kind and tuple

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        """Raise ValueError (one line) for an option this strategy cannot take, before any
        index exists: the engine asks at construction, so a bad option refuses the topic
        instead of its first subscription. Nothing to check by default."""

    # -- subscriptions ---------------------------------------------------------------------------
    def add(self, q: int) -> None:
        """Register subscription ``q``: the id list, then :meth:`index`."""
        self.ids.add(q)
        self.index(q)

    def add_many(self, qs: np.ndarray) -> None:
        """Register many subscriptions at once (a bulk build)."""
        self.ids.add_many(np.asarray(qs, dtype=np.int64))
        self.index_many(qs)

    def remove(self, q: int) -> None:
        """Unregister ``q``: the id list, then :meth:`unindex`."""
        self.ids.remove(q)
        self.unindex(q)

    def share_ids(self, ids: DenseIds) -> None:
        """Use ``ids`` as the id list (a router's members share the router's, so a subscription
        is listed once); the router then calls only :meth:`index` / :meth:`unindex`."""
        self.ids = ids

    def index(self, q: int) -> None:
        """Index subscription ``q`` (already in the id list)."""
        self._track(q, 1)
        self._add(q)

    def index_many(self, qs: np.ndarray) -> None:
        """Index many subscriptions at once (a bulk build; already in the id list)."""
        self._track_many(qs)
        self._add_many(qs)

    def unindex(self, q: int) -> None:
        """Drop subscription ``q`` from the index (the id list is the caller's)."""
        self._track(q, -1)
        self._remove(q)

    # -- hooks -----------------------------------------------------------------------------------
    def _track(self, q: int, delta: int) -> None:
        """Per-kind bookkeeping of ``q`` entering (``delta = 1``) or leaving (−1)."""

    def _track_many(self, qs: np.ndarray) -> None:
        for q in qs.tolist():
            self._track(q, 1)

    def _add(self, q: int) -> None:
        """Put ``q`` into the strategy's own index (none by default)."""

    def _add_many(self, qs: np.ndarray) -> None:
        for q in qs.tolist():
            self._add(q)

    def _remove(self, q: int) -> None:
        """Take ``q`` out of the strategy's own index."""

    # -- matching --------------------------------------------------------------------------------
    def match(self, ev: OneEvent) -> None:
        """Append the output of the tuple ``ev`` to ``ev.buf`` (subscription ids, and partner
        slots in PAIRS; in COUNT each subscription's pair count in ``cols.acc``)."""
        raise NotImplementedError

    def match_many(self, run: EventRun) -> None:
        """Append the output of every tuple of ``run`` to ``run.rows`` as ``(position, q, x)``
        rows, in position order, each tuple's rows as :meth:`match` would give them."""
        raise NotImplementedError

    def snapshot(self, ev: OneEvent, qids: np.ndarray) -> None:
        """Append to ``ev.buf`` the output of the tuple ``ev`` for the subscriptions ``qids``
        of this kind only (a snapshot subscription's current result: ``Engine.result``)."""
        raise NotImplementedError

    # -- state -----------------------------------------------------------------------------------
    def export_state(self) -> dict[str, Any] | None:
        """What results depend on beyond the subscriptions and the stored tuples, or None.
        An index is a function of those two and is built anew on load, so no kind exports
        anything today (docs/reference/persistence.md); a kind whose results depend on more returns
        it here and gets it back in :meth:`load_state`."""
        return None

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Take back what :meth:`export_state` gave (after the subscriptions are indexed)."""

    # -- introspection ---------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Sizes and counters for ``Engine.stats()``: ``subscriptions`` always; ``tau`` (the
        stabbing number probed per tuple), ``hotspots``, a router's ``decisions`` (per member)
        and ``corrections`` (per side and member) where they apply (docs/reference/metrics.md)."""
        return {"subscriptions": len(self)}

    def check_invariants(self) -> None:
        """Assert the index is consistent with the live subscriptions (the tests call this)."""

    def memory_bytes(self) -> int:
        """Bytes held in numpy arrays by the id list; a strategy adds its index."""
        return self.ids.memory_bytes()
