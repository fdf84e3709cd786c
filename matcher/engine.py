"""The state of one topic and the operations of SPEC §3, in one total order (SPEC §7's ``Engine``).

An ``Engine`` owns the two base tables, the subscription columns and one join index per
subscription kind. Every accepted operation takes the next sequence number; a rejected one
(late, duplicate, unknown id, malformed) raises before anything changes. Matching is delegated to
the kind's strategy (paper 004 §3), which writes subscription ids and partner slots into a shared
buffer; the engine turns those into ``Delivery`` objects, columnar ``Matches`` or ``Affected``
counts only at the end, so no Python object is built per pair unless asked for.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.batch import (
    BatchOutput,
    BatchResult,
    EventStatus,
    admit_publish,
    check_ids,
    check_lengths,
    check_output,
    empty_output,
    publish_columns,
    reason_for,
    rejection_reasons,
    side_codes,
)
from hotjoin.matcher.errors import (
    BatchError,
    DuplicateEventError,
    EventTooFarAheadError,
    LateEventError,
    UnknownEventError,
    UnknownSubscriptionError,
)
from hotjoin.matcher.joins.band import BAND_STRATEGIES, BandStrategy, make_band_strategy, run_qouter
from hotjoin.matcher.joins.protocol import COUNT, IDENTIFY, PAIRS, BatchRows, MatchBuffer
from hotjoin.matcher.joins.select import (
    SELECT_STRATEGIES,
    SelectStrategy,
    make_select_strategy,
    run_select_subset,
)
from hotjoin.matcher.joins.window import (
    WINDOW_STRATEGIES,
    WindowStrategy,
    make_window_strategy,
    run_window_select_first,
)
from hotjoin.matcher.model import (
    KINDS,
    Affected,
    BandJoin,
    Delivery,
    Event,
    Matches,
    Range,
    SelectJoin,
    Side,
    Subscription,
    WindowJoin,
    check_side,
    empty_matches,
)
from hotjoin.matcher.router.dynamic import DYNAMIC_NAMES, BandDynamic, SelectDynamic, WindowDynamic
from hotjoin.matcher.subscriptions import KIND_CODE, SubscriptionColumns

DEFAULT_STRATEGY = dict(DYNAMIC_NAMES)
"""``"auto"``: the cost-based router of §4 (:mod:`matcher.router`) for every kind."""
STRATEGIES = {
    "band": BAND_STRATEGIES + (DYNAMIC_NAMES["band"],),
    "select": SELECT_STRATEGIES + (DYNAMIC_NAMES["select"],),
    "window": WINDOW_STRATEGIES + (DYNAMIC_NAMES["window"],),
}
_OTHER: dict[str, Side] = {"R": "S", "S": "R"}
_SIDE_NAMES: tuple[Side, Side] = ("R", "S")
_BATCH_MODES = {"pairs": PAIRS, "affected": COUNT, "none": -1}
_NO_FILTER_SEQ = np.iinfo(np.int64).max


def _resolve_strategies(strategy: str | Mapping[str, str]) -> dict[str, str]:
    if isinstance(strategy, str):
        if strategy != "auto":
            raise ValueError(f"strategy must be 'auto' or a mapping kind -> name, got {strategy!r}")
        return dict(DEFAULT_STRATEGY)
    out = dict(DEFAULT_STRATEGY)
    for kind, name in strategy.items():
        if kind not in KINDS:
            raise ValueError(f"unknown subscription kind {kind!r}; kinds are {', '.join(KINDS)}")
        if name != "auto" and name not in STRATEGIES[kind]:
            raise ValueError(f"unknown {kind}-join strategy {name!r}; choose one of "
                             f"{', '.join(STRATEGIES[kind])} or 'auto'")
        if name != "auto":
            out[kind] = name
    return out


def check_max_advance(max_advance: object) -> int | None:
    """``max_advance`` as the engine keeps it: None (no bound) for None or 0, else the int.

    >>> check_max_advance(0) is None, check_max_advance(86_400_000)
    (True, 86400000)
    """
    if max_advance is not None and (isinstance(max_advance, bool)
                                    or not isinstance(max_advance, (int, np.integer))
                                    or max_advance < 0):
        raise ValueError(f"max_advance must be an integer >= 0 or None (0: no bound), "
                         f"got {max_advance!r}")
    if max_advance is None or max_advance == 0:
        return None
    return int(max_advance)


class Engine:
    """One topic: stored R and S tuples, subscriptions, watermark, sequence (SPEC §3, §7).

    ``max_advance`` (event-time units; None or 0: no bound) bounds how far one event may move
    the clock: an event whose time exceeds the largest time seen so far by more than this is
    refused (``EventTooFarAheadError``, a ``ValueError``; INVALID in a batch) after the
    duplicate and lateness checks, and changes nothing. The first event is not bounded.
    """

    def __init__(self, lateness: int = 0, retention: int | None = None,
                 strategy: str | Mapping[str, str] = "auto",
                 options: Mapping[str, Any] | None = None,
                 max_advance: int | None = None) -> None:
        if isinstance(lateness, bool) or not isinstance(lateness, (int, np.integer)) or lateness < 0:
            raise ValueError(f"lateness must be an integer >= 0, got {lateness!r}")
        if retention is not None and (isinstance(retention, bool)
                                      or not isinstance(retention, (int, np.integer))
                                      or retention < 0):
            raise ValueError(f"retention must be an integer >= 0 or None, got {retention!r}")
        self.lateness = int(lateness)
        self.retention = None if retention is None else int(retention)
        self.max_advance: int | None = check_max_advance(max_advance)
        self.strategy_names = _resolve_strategies(strategy)
        self.options = dict(options or {})
        keep = self.retention is not None  # no retention: no expiry queue to maintain
        # no key order until the first band join (``_index_for``): select and window joins
        # reach their partners through the key index
        self.tables: dict[Side, BaseTable] = {
            "R": BaseTable("R", track_expiry=keep, key_order=False),
            "S": BaseTable("S", track_expiry=keep, key_order=False)}
        self.cols = SubscriptionColumns()
        self.subs: dict[int, Subscription] = {}
        self.band: BandStrategy = (
            BandDynamic(self.cols, self.options) if self.strategy_names["band"] == "BJ-Dynamic"
            else make_band_strategy(self.strategy_names["band"], self.cols, self.options))
        # select / window indexes are built on the first subscription of their kind, so a
        # kind without subscriptions costs nothing per event (nor does the per-key index)
        self.select: SelectStrategy | None = None
        self.window: WindowStrategy | None = None
        self._buf = MatchBuffer()
        self._rows_buf = BatchRows()
        self._seq = 0
        self._max_time: int | None = None

    # -- clock ------------------------------------------------------------------------------
    @property
    def seq(self) -> int:
        """Sequence number of the last applied operation (0 before the first)."""
        return self._seq

    @property
    def watermark(self) -> int | None:
        """W = largest published event time − lateness; None before the first publish."""
        return None if self._max_time is None else self._max_time - self.lateness

    @property
    def probe_time(self) -> int:
        """The time a probe without one carries: the largest published event time (0 before
        the first publish)."""
        return 0 if self._max_time is None else self._max_time

    # -- subscriptions ----------------------------------------------------------------------
    def _index_for(self, sub: object) -> BandStrategy | SelectStrategy | WindowStrategy:
        if isinstance(sub, BandJoin):
            for t in self.tables.values():
                t.enable_key_order()
            return self.band
        if isinstance(sub, SelectJoin):
            if self.select is None:
                self._enable_key_indexes(time_order=False)
                name = self.strategy_names["select"]
                self.select = (SelectDynamic(self.cols, self.options) if name == "SJ-Dynamic"
                               else make_select_strategy(name, self.cols, self.options))
            return self.select
        if isinstance(sub, WindowJoin):
            if self.window is None:
                self._enable_key_indexes(time_order=True)
                name = self.strategy_names["window"]
                self.window = (
                    WindowDynamic(self.cols, self.options, self.tables) if name == "WJ-Dynamic"
                    else make_window_strategy(name, self.cols, self.options, self.tables))
            return self.window
        raise ValueError(f"not a subscription: {type(sub).__name__}")

    def _enable_key_indexes(self, time_order: bool) -> None:
        """Key indexes on both sides; by time too for window joins (select joins need only the
        by-value order, and the by-time groups would double the index of every stored tuple)."""
        for t in self.tables.values():
            t.enable_key_index(time_order)

    def subscribe(self, sub: Subscription, snapshot: bool = False) -> int:
        """Register ``sub``; returns its id. With ``snapshot`` it is also owed the current result."""
        index = self._index_for(sub)
        self._seq += 1
        sid = self.cols.add(sub, self._seq, bool(snapshot))
        self.subs[sid] = sub
        try:
            index.add(sid)
        except Exception:
            self.undo_subscribe(np.array([sid], dtype=np.int64), self._seq - 1)
            raise
        return sid

    def subscribe_many(self, subs: Iterable[Subscription], snapshot: bool = False) -> list[int]:
        """Register many subscriptions in order (validated first: all or nothing)."""
        subs = list(subs)
        indexes = [self._index_for(s) for s in subs]
        if not subs:
            return []
        seq0 = self._seq
        sids = self.cols.add_many(subs, self._seq + 1, bool(snapshot))
        self._seq += len(subs)
        for sid, sub in zip(sids.tolist(), subs, strict=True):
            self.subs[sid] = sub
        try:
            for index in (self.band, self.select, self.window):
                if index is None:
                    continue
                mine = np.array([i for i, ix in zip(sids.tolist(), indexes, strict=True)
                                 if ix is index], dtype=np.int64)
                if mine.shape[0]:
                    index.add_many(mine)
        except Exception:
            self.undo_subscribe(sids, seq0)
            raise
        return sids.tolist()

    def undo_subscribe(self, sids: np.ndarray, seq0: int) -> None:
        """Roll back the newest subscriptions ``sids`` (no other operation since; the engine's own
        subscribe paths call it when an index build raises, the server when a later part of one
        request fails): all or nothing, SPEC §7. Takes the ids out of their indexes (best effort:
        a failed build may hold only some), the columns and the id counter; restores ``seq0``."""
        for sid in sids.tolist()[::-1]:
            sub = self.subs.pop(sid, None)
            if sub is not None:
                with contextlib.suppress(Exception):
                    self._index_for(sub).remove(sid)
            self.cols.deactivate(sid)
        self.cols.n = int(sids[0]) if len(sids) else self.cols.n
        self._seq = seq0

    def unsubscribe(self, sid: int) -> None:
        """Remove subscription ``sid`` (UnknownSubscriptionError if it is not registered)."""
        sub = self.subs.get(sid) if isinstance(sid, (int, np.integer)) else None
        if sub is None:
            raise UnknownSubscriptionError(sid)
        index = self._index_for(sub)
        self._seq += 1
        index.remove(int(sid))
        self.cols.deactivate(int(sid))
        del self.subs[sid]

    def subscription(self, sid: int) -> Subscription:
        try:
            return self.subs[sid]
        except KeyError:
            raise UnknownSubscriptionError(sid) from None

    def subscriptions(self) -> Iterator[tuple[int, Subscription]]:
        return iter(self.subs.items())

    # -- matching core ----------------------------------------------------------------------
    def _match(self, side: Side, key: float, value: float, xseq: int, mode: int,
               time: int = 0) -> None:
        """Run every kind's strategy for one tuple of ``side``; output left in ``self._buf``."""
        buf = self._buf
        buf.start()
        other = self.tables[_OTHER[side]]
        if len(other) == 0:
            return
        dirn = 1 if side == "R" else -1
        if len(self.band):
            self.band.match(buf, dirn, key, value, xseq, other, mode)
        if self.select is not None and len(self.select):
            self.select.match(buf, dirn, key, value, xseq, other, mode)
        if self.window is not None and len(self.window):
            w = self.watermark
            self.window.match(buf, dirn, key, value, int(time), xseq, other, mode,
                              int(time) if w is None else w)

    def _matches(self, side: Side, x_id: str, sign: int) -> Matches:
        buf = self._buf
        n = buf.n
        if n == 0:
            return empty_matches(sign)
        q = buf.out_q[:n].copy()
        partner = self.tables[_OTHER[side]].ids_of(buf.out_s[:n])
        mine = np.empty(n, dtype=object)
        mine[:] = x_id
        if side == "R":
            return Matches(q, sign, mine, partner)
        return Matches(q, sign, partner, mine)

    def _affected(self, sign: int) -> Affected:
        buf = self._buf
        q = buf.out_q[: buf.n].copy()
        return Affected(q, self.cols.acc[q] * sign)

    # -- publish ----------------------------------------------------------------------------
    def _admit(self, ev: Event) -> BaseTable:
        """Validate ``ev`` against the state; raise without changing anything if rejected."""
        if not isinstance(ev, Event):
            raise ValueError(f"not an Event: {type(ev).__name__}")
        table = self.tables[ev.side]
        if ev.id in table:
            raise DuplicateEventError(ev.side, ev.id)
        w = self.watermark
        if w is not None and ev.time < w:
            raise LateEventError(ev.side, ev.id, ev.time, w)
        mt = self._max_time
        if self.max_advance is not None and mt is not None and ev.time - mt > self.max_advance:
            raise EventTooFarAheadError(ev.time, mt, self.max_advance)
        return table

    def _advance(self, ev: Event) -> int:
        """Take a sequence number, move the watermark and drop what retention expired."""
        self._seq += 1
        if self._max_time is None or ev.time > self._max_time:
            self._max_time = ev.time
            if self.retention is not None:
                limit = self._max_time - self.lateness - self.retention
                for t in self.tables.values():
                    t.expire_before(limit)
        return self._seq

    def _publish(self, ev: Event, mode: int) -> int:
        table = self._admit(ev)
        seq = self._advance(ev)
        if mode >= 0:
            self._match(ev.side, ev.key, ev.value, seq, mode, ev.time)
        table.insert(ev, seq)
        return seq

    def publish(self, ev: Event) -> list[Delivery]:
        """Insert ``ev``; returns the +1 deliveries of the pairs it forms (SPEC §3, Insert)."""
        self._publish(ev, PAIRS)
        return self._matches(ev.side, ev.id, 1).deliveries()

    def publish_columnar(self, ev: Event) -> Matches:
        self._publish(ev, PAIRS)
        return self._matches(ev.side, ev.id, 1)

    def publish_affected(self, ev: Event) -> Affected:
        """Insert ``ev``; returns each affected subscription with its number of new pairs."""
        self._publish(ev, COUNT)
        return self._affected(1)

    def publish_identify(self, ev: Event) -> np.ndarray:
        """Insert ``ev``; returns only the ids of affected subscriptions (benchmarks, §5)."""
        self._publish(ev, IDENTIFY)
        return self._buf.out_q[: self._buf.n].copy()

    def publish_many(self, events: Iterable[Event], match: bool = True) -> list[Delivery]:
        """Publish in order; the first rejected event raises ``BatchError`` (earlier ones stay).

        With ``match=False`` only the state changes (restoring a log): no deliveries.
        """
        out: list[Delivery] = []
        for i, ev in enumerate(events):
            try:
                if match:
                    self._publish(ev, PAIRS)
                    out += self._matches(ev.side, ev.id, 1).deliveries()
                else:
                    self._publish(ev, -1)
            except (ValueError, LateEventError, DuplicateEventError) as e:
                raise BatchError(i, e) from e
        return out

    # -- delete -----------------------------------------------------------------------------
    def _delete(self, side: Side, event_id: str, mode: int) -> None:
        check_side(side)
        if not isinstance(event_id, str) or not event_id:
            raise ValueError(f"event id must be a non-empty string, got {event_id!r}")
        table = self.tables[side]
        slot = table.slot_of.get(event_id)
        if slot is None:
            raise UnknownEventError(side, str(event_id))
        self._seq += 1
        if mode >= 0:
            self._match(side, float(table.keys[slot]), float(table.values[slot]),
                        int(table.seqs[slot]), mode, int(table.times[slot]))
        table.remove(event_id)

    def delete(self, side: Side, event_id: str, match: bool = True) -> list[Delivery]:
        """Remove a stored tuple; returns −1 for each pair a subscription had received."""
        self._delete(side, event_id, PAIRS if match else -1)
        return self._matches(side, event_id, -1).deliveries() if match else []

    def delete_columnar(self, side: Side, event_id: str) -> Matches:
        self._delete(side, event_id, PAIRS)
        return self._matches(side, event_id, -1)

    def delete_affected(self, side: Side, event_id: str) -> Affected:
        self._delete(side, event_id, COUNT)
        return self._affected(-1)

    def get_event(self, side: Side, event_id: str) -> Event | None:
        return self.tables[check_side(side)].event(event_id)

    # -- results ----------------------------------------------------------------------------
    def result_columnar(self, sid: int) -> Matches:
        """q's current result over the stored tuples, sign +1 (snapshot pairs)."""
        sub = self.subscription(sid)
        r_table, s_table = self.tables["R"], self.tables["S"]
        qids = np.array([sid], dtype=np.int64)
        buf = self._buf
        qs: list[np.ndarray] = []
        rs: list[np.ndarray] = []
        ss: list[np.ndarray] = []
        for r_slot in r_table.live_slots().tolist():
            buf.start()
            key, value = float(r_table.keys[r_slot]), float(r_table.values[r_slot])
            if isinstance(sub, BandJoin):
                run_qouter(qids, self.cols, buf, 1, key, value, _NO_FILTER_SEQ, s_table, PAIRS)
            elif isinstance(sub, SelectJoin):
                run_select_subset(qids, self.cols, buf, 1, key, value, _NO_FILTER_SEQ, s_table,
                                  PAIRS)
            else:
                run_window_select_first(qids, self.cols, buf, 1, key, value,
                                        int(r_table.times[r_slot]), _NO_FILTER_SEQ, s_table,
                                        PAIRS)
            if buf.n:
                qs.append(buf.out_q[: buf.n].copy())
                ss.append(buf.out_s[: buf.n].copy())
                rs.append(np.full(buf.n, r_slot, dtype=np.int64))
        if not qs:
            return empty_matches(1)
        return Matches(np.concatenate(qs), 1, r_table.ids_of(np.concatenate(rs)),
                       s_table.ids_of(np.concatenate(ss)))

    def result(self, sid: int) -> list[Delivery]:
        return self.result_columnar(sid).deliveries()

    def probe(self, side: Side, key: float, value: float, mode: str = "identify",
              time: int | None = None) -> int:
        """Match a hypothetical tuple without storing it (benchmarks, paper 004 §5).

        ``mode`` is ``"identify"`` (returns the number of affected subscriptions) or ``"pairs"``
        (returns the number of result pairs). ``time`` (window joins) defaults to the largest
        event time published so far. Nothing in the engine changes.
        """
        m = {"identify": IDENTIFY, "pairs": PAIRS, "count": COUNT}[mode]
        if time is None:
            time = self.probe_time
        self._match(check_side(side), float(key), float(value), self._seq + 1, m, int(time))
        return self._buf.n

    def probe_batch(self, side: Side, keys: Any, values: Any, times: Any = None, *,
                    output: str = "affected") -> np.ndarray:
        """Match a batch of hypothetical ``side`` tuples without storing them (benchmarks).

        What :meth:`probe` gives each tuple, through the batch path's compiled matching (the
        ``match_many`` calls of ``publish_batch``, routers deciding inside the batch): per
        tuple the number of rows ``publish_batch`` would output for it alone — affected
        subscriptions (``output="affected"``) or pairs (``"pairs"``). Every tuple sees the
        stored tuples as they stand; ``times`` (window joins) default to the largest event time
        published so far. Nothing in the engine changes (a router may learn).

        >>> from hotjoin.matcher import Engine, Event, Range, SelectJoin
        >>> e = Engine()
        >>> _ = e.subscribe(SelectJoin(a=Range(0, 10), c=Range(0, 10)))
        >>> _ = e.publish(Event("S", "s1", key=1.0, value=5.0, time=0))
        >>> e.probe_batch("R", [1.0, 2.0, 1.0], [5.0, 5.0, 50.0]).tolist()
        [1, 0, 0]
        """
        mode = {"affected": COUNT, "pairs": PAIRS}.get(output)
        if mode is None:
            raise ValueError(f"probe_batch output must be 'affected' or 'pairs', not {output!r}")
        side = check_side(side)
        ks = np.ascontiguousarray(keys, dtype=np.float64).reshape(-1)
        vs = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
        n = ks.shape[0]
        ts = (np.full(n, self.probe_time, dtype=np.int64) if times is None
              else np.ascontiguousarray(times, dtype=np.int64).reshape(-1))
        if vs.shape[0] != n or ts.shape[0] != n:
            raise ValueError(f"probe_batch: {n} keys but {vs.shape[0]} values and "
                             f"{ts.shape[0]} times")
        counts = np.zeros(n, dtype=np.int64)
        other = self.tables[_OTHER[side]]
        if n == 0 or len(other) == 0:
            return counts
        dirn = 1 if side == "R" else -1
        xs = np.full(n, self._seq + 1, dtype=np.int64)
        rows, buf = self._rows_buf, self._buf
        w = self.watermark
        if len(self.band):
            self.band.match_many(buf, rows, dirn, ks, vs, xs, other, mode)
            counts += rows.count_by_event(n)
        if self.select is not None and len(self.select):
            self.select.match_many(buf, rows, dirn, ks, vs, xs, other, mode)
            counts += rows.count_by_event(n)
        if self.window is not None and len(self.window):
            self.window.match_many(buf, rows, dirn, ks, vs, ts, xs, other, mode,
                                   ts if w is None else np.full(n, w, dtype=np.int64))
            counts += rows.count_by_event(n)
        return counts

    # -- restore (server restart, Spark replay) -----------------------------------------------
    def restore_clock(self, seq: int, max_time: int | None) -> None:
        """Set the sequence counter and the largest event time seen (restoring a snapshot)."""
        self._seq = int(seq)
        self._max_time = None if max_time is None else int(max_time)

    def advance_clock(self, seq: int, max_time: int | None) -> None:
        """Make the next operation take ``seq``; raise the largest event time to ``max_time``.

        For a shard of the Spark replay (``ops/replay``), which sees only part of a topic's log:
        given the topic-wide clock before each of its operations, lateness, retention and pair
        formation behave exactly as online. Retention drops what the new watermark expires, as
        ``_advance`` does; a ``max_time`` below the current one changes nothing. O(expired log n).
        """
        seq = int(seq)
        if seq <= self._seq:
            raise ValueError(f"advance_clock: seq {seq} is not after the last seq {self._seq}")
        self._seq = seq - 1
        if max_time is not None and (self._max_time is None or max_time > self._max_time):
            self._max_time = int(max_time)
            if self.retention is not None:
                limit = self._max_time - self.lateness - self.retention
                for t in self.tables.values():
                    t.expire_before(limit)

    def restore_subscription(self, sid: int, sub: Subscription, reg_seq: int,
                             snapshot: bool = False) -> None:
        """Re-create subscription ``sid`` as registered at ``reg_seq`` (compacted logs).

        Ids must be restored in increasing order; ids skipped over stay unused forever.
        """
        index = self._index_for(sub)
        if sid < self.cols.n:
            raise ValueError(f"subscription id {sid} is not above the last id {self.cols.n - 1}")
        self.cols.n = int(sid)
        got = self.cols.add(sub, int(reg_seq), bool(snapshot))
        assert got == sid
        self.subs[sid] = sub
        index.add(sid)

    def subscription_columns(self) -> dict[str, np.ndarray]:
        """The live subscriptions as columns (copies, O(live) numpy work, no object per
        subscription): ``sid`` (increasing), ``kind`` (0 select, 1 band, 2 window), ``a_lo, a_hi,
        b_lo, b_hi, c_lo, c_hi`` (±inf where unbounded), ``w``, ``reg`` (registration seq),
        ``snap``. ``restore_subscription_columns`` rebuilds them: a server checkpoint."""
        return self.cols.live_columns()

    def restore_subscription_columns(self, cols: Mapping[str, np.ndarray]) -> None:
        """Re-create the subscriptions of ``subscription_columns`` with their ids and registration
        seqs, building each kind's index in bulk (``add_many``) rather than one by one.

        Ids must be increasing and above every id in use; ids skipped over stay unused. The
        indexes are not saved but rebuilt: matching depends only on the subscriptions and the
        stored tuples (SPEC §3), not on how the index happens to be laid out.
        """
        sids = np.asarray(cols["sid"], dtype=np.int64)
        n = sids.shape[0]
        if n == 0:
            return
        if sids[0] < self.cols.n or (n > 1 and bool((np.diff(sids) <= 0).any())):
            raise ValueError("restore_subscription_columns: ids must increase and be new")
        subs = _subscriptions_from_columns(cols)
        kinds = np.asarray(cols["kind"], dtype=np.int8)
        for code in np.unique(kinds).tolist():  # create the kinds' indexes (select/window lazily)
            self._index_for(subs[int(np.argmax(kinds == code))])
        self.cols.restore_columns(cols)
        self.subs.update(zip(sids.tolist(), subs, strict=True))
        for code, index in ((KIND_CODE["band"], self.band), (KIND_CODE["select"], self.select),
                            (KIND_CODE["window"], self.window)):
            mine = sids[kinds == code]
            if index is not None and mine.shape[0]:
                index.add_many(mine)

    def export_state(self) -> dict[str, Any]:
        """Everything results depend on, as columns (copies): the live subscriptions
        (``subscription_columns``), each side's stored tuples (``BaseTable.live_columns``), the
        clock and the next subscription id. ``load_state`` rebuilds an equivalent engine; the
        indexes are not exported but built anew, since results depend only on subscriptions,
        tuples and the clock (SPEC §3). Used by server checkpoints and scale-out snapshots."""
        return {"seq": self._seq, "max_time": self._max_time, "next_sid": int(self.cols.n),
                "subs": self.subscription_columns(),
                "tuples": {side: t.live_columns() for side, t in self.tables.items()}}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Load ``export_state``'s output into this empty engine (same lateness, retention and
        strategy as the exporter, or results may differ): bulk index builds, no matching."""
        if self.cols.n or self.subs or any(len(t) for t in self.tables.values()):
            raise ValueError("load_state needs an empty engine")
        self.restore_subscription_columns(state["subs"])
        for side, (ids, keys, values, times, seqs, payloads) in state["tuples"].items():
            if ids:
                self.restore_event_columns(side, ids, keys, values, times, seqs,
                                           payloads if any(payloads) else None)
        self.cols.n = max(int(self.cols.n), int(state["next_sid"]))
        self.restore_clock(int(state["seq"]), state["max_time"])

    def restore_events(self, events: list[Event], seqs: list[int]) -> None:
        """Store tuples with their original sequence numbers, without matching (compacted logs).

        No watermark or retention is applied; call ``restore_clock`` afterwards.
        """
        by_side: dict[Side, tuple[list[Event], list[int]]] = {"R": ([], []), "S": ([], [])}
        for ev, seq in zip(events, seqs, strict=True):
            if not isinstance(ev, Event):
                raise ValueError(f"not an Event: {type(ev).__name__}")
            if ev.id in self.tables[ev.side]:
                raise DuplicateEventError(ev.side, ev.id)
            by_side[ev.side][0].append(ev)
            by_side[ev.side][1].append(int(seq))
        for side, (evs, sq) in by_side.items():
            if len({e.id for e in evs}) != len(evs):
                raise ValueError(f"duplicate ids among the restored {side} events")
            if evs:
                self.tables[side].bulk_load(evs, sq)

    # -- introspection ----------------------------------------------------------------------
    def check_invariants(self) -> None:
        """Assert every index's structural invariants (paper 004 Lemma 2, Theorem 1); tests."""
        self.band.check_invariants()
        for side, t in self.tables.items():
            if not t.key_ordered:
                assert not len(self.band), side  # a band join keeps the key order
                continue
            order = t.order.items(t.alive)
            assert sorted(s for _, s in order) == sorted(t.slot_of.values()), side
            assert all(t.keys[s] == k for k, s in order), side
        for ix in (self.select, self.window):
            check = getattr(ix, "check_invariants", None)
            if check is not None:
                check()

    def stats(self) -> dict[str, Any]:
        band = self.band.stats()
        select = self.select.stats() if self.select is not None else {}
        window = self.window.stats() if self.window is not None else {}
        counts = {k: 0 for k in KINDS}
        for sub in self.subs.values():
            counts[sub.kind] += 1
        return {
            "seq": self._seq,
            "watermark": self.watermark,
            "tuples": {"R": len(self.tables["R"]), "S": len(self.tables["S"])},
            "subscriptions": counts,
            "strategies": dict(self.strategy_names),
            "tau": {k: int(st.get("tau", st.get("hotspots", 0)))
                    for k, st in (("band", band), ("select", select), ("window", window))},
            "hotspots": {k: int(st.get("hotspots", 0))
                         for k, st in (("band", band), ("select", select), ("window", window))},
            "decisions": {name: int(n) for st in (band, select, window)
                          for name, n in st.get("decisions", {}).items()},
            "band": band,
            "select": select,
            "window": window,
        }

    def memory_bytes(self) -> int:
        """Approximate bytes held in numpy arrays by tables, columns and indexes."""
        return (sum(t.memory_bytes() for t in self.tables.values()) + self.cols.memory_bytes()
                + self.band.memory_bytes()
                + sum(ix.memory_bytes() for ix in (self.select, self.window) if ix is not None))

    # -- columnar batch calls (server fast paths) ------------------------------------------------
    def restore_event_columns(self, side: Side, ids: list[str], keys: np.ndarray, values: np.ndarray,
                              times: np.ndarray, seqs: np.ndarray,
                              payloads: list[bytes] | None = None) -> None:
        """Store many new tuples of one side from columns, without matching (log replay).

        The columnar form of ``restore_events``: no ``Event`` object per tuple, one re-sort of
        the key order and one rebuild of the key index. Like ``restore_events`` it applies no
        watermark or retention (call ``restore_clock`` afterwards). Validated first, all or
        nothing: finite keys and values, non-empty ids unique among themselves and new on the
        side. O(n log n).
        """
        check_side(side)
        t = self.tables[side]
        n = len(ids)
        keys = np.asarray(keys, dtype=np.float64)
        values = np.asarray(values, dtype=np.float64)
        times = np.asarray(times, dtype=np.int64)
        seqs = np.asarray(seqs, dtype=np.int64)
        if not (keys.shape == values.shape == times.shape == seqs.shape == (n,)):
            raise ValueError("restore_event_columns: columns of different lengths")
        if payloads is not None and len(payloads) != n:
            raise ValueError("restore_event_columns: payloads of a different length")
        if n == 0:
            return
        if not (np.isfinite(keys).all() and np.isfinite(values).all()):
            raise ValueError("event keys and values must be finite")
        if not all(isinstance(i, str) and i for i in ids):
            raise ValueError("event ids must be non-empty strings")
        if len(set(ids)) != n:
            raise ValueError(f"duplicate ids among the restored {side} events")
        for i in ids:
            if i in t.slot_of:
                raise DuplicateEventError(side, i)
        t.load_columns(list(ids), keys, values, times, seqs,
                       None if payloads is None else list(payloads))

    # -- the batch path (SPEC §7 publish_batch / delete_batch, issue 14) ----------------------
    def publish_batch(self, sides: Any, ids: Any, keys: Any, values: Any, times: Any,
                      payloads: Any = None, *, output: str = "affected") -> BatchResult:
        """Publish a batch given as columns, exactly as ``publish`` one at a time in input order.

        ``sides``: "R"/"S" strings or 0/1 integers; ``ids``: str; ``keys``/``values``: float64;
        ``times``: int64; ``payloads``: bytes or None. A rejected event (INVALID, DUPLICATE —
        checked before LATE — or LATE against the watermark as it stands just before it, or
        INVALID when more than ``max_advance`` beyond the largest time before it) does
        not raise, takes no sequence number and changes nothing; column length mismatches
        raise ``ValueError`` before anything changes. ``output``: "pairs" (one row per pair),
        "affected" (one row per event and affected subscription, signed pair count) or "none".

        Admission is one compiled pass (``matcher.batch``). Accepted events are applied as runs
        of consecutive same-side events: each is matched against the other side (whose content
        only retention can change inside a run), skipping the strategies when no partner can
        exist (a select/window-only topic and no stored partner with the event's key), then the
        run is stored with one ``BaseTable.insert_many``.
        """
        mode = _BATCH_MODES[check_output(output)]
        cols = publish_columns(sides, ids, keys, values, times, payloads)
        adm = admit_publish(cols, (self.tables["R"], self.tables["S"]), self.lateness,
                            self.retention, self._max_time, self._seq, self.max_advance)
        status = adm.status
        reasons = rejection_reasons(cols, adm, self.lateness, self.max_advance)
        acc = np.flatnonzero(status == EventStatus.OK)
        parts: list[tuple[np.ndarray, ...]] = []
        if acc.shape[0]:
            self._apply_publishes(cols, adm.seqs, adm.maxes, acc, mode, parts)
        self._seq = adm.seq
        self._max_time = adm.max_time
        return BatchResult(status, adm.seqs, reasons, _gather(parts, output, 1))

    def publish_admitted(self, sides: Any, ids: Any, keys: Any, values: Any, times: Any,
                         payloads: Any, seqs: Any, maxes: Any, *,
                         output: str = "affected") -> BatchOutput:
        """Store and match a batch that a topic-wide admission has already accepted.

        Event i takes sequence number ``seqs[i]`` and sees the topic's clock ``maxes[i]`` (the
        largest event time after it: the watermark and retention limit it is matched under).
        The key-partitioned scale-out front end (``server/scaleout``) admits a topic's batch once
        (``batch.admit_publish``) and sends each worker the events of its keys; the worker
        applies them here with the same compiled runs as ``publish_batch``, so the pairs and
        their sequence numbers are those of one engine (SPEC §3). No duplicate or lateness
        check is made; ``ValueError`` (nothing changed) for invalid columns, seqs not after
        ``seq`` and increasing, or clocks going back.
        """
        mode = _BATCH_MODES[check_output(output)]
        cols = publish_columns(sides, ids, keys, values, times, payloads)
        n = cols.times.shape[0]
        sq = np.asarray(seqs, dtype=np.int64).reshape(-1)
        mx = np.asarray(maxes, dtype=np.int64).reshape(-1)
        if sq.shape[0] != n or mx.shape[0] != n:
            raise ValueError(f"publish_admitted: {n} events but {sq.shape[0]} seqs and "
                             f"{mx.shape[0]} clocks")
        if n == 0:
            return _gather([], output, 1)
        if not cols.valid.all():
            i = int(np.flatnonzero(~cols.valid)[0])
            raise ValueError(f"publish_admitted: event {i} is invalid: "
                             f"{cols.reasons.get(i, 'invalid event')}")
        if sq[0] <= self._seq or (n > 1 and bool((np.diff(sq) <= 0).any())):
            raise ValueError(f"publish_admitted: seqs must increase from after {self._seq}")
        if (n > 1 and bool((np.diff(mx) < 0).any())) or bool((mx < cols.times).any()) or (
                self._max_time is not None and int(mx[0]) < self._max_time):
            raise ValueError("publish_admitted: clocks must not go back nor lie below the "
                             "events' times")
        parts: list[tuple[np.ndarray, ...]] = []
        self._apply_publishes(cols, sq, mx, np.arange(n), mode, parts)
        self._seq = int(sq[-1])
        self._max_time = int(mx[-1])
        return _gather(parts, output, 1)

    def _apply_publishes(self, cols: Any, seqs: np.ndarray, maxes: np.ndarray, acc: np.ndarray,
                         mode: int, parts: list[tuple[np.ndarray, ...]]) -> None:
        """Apply the accepted events ``acc`` (input indexes, ascending) run by run."""
        sd = cols.side[acc]
        cut = np.flatnonzero(sd[1:] != sd[:-1]) + 1
        starts = [0, *cut.tolist()]
        ends = [*cut.tolist(), acc.shape[0]]
        retention = self.retention
        for a, b in zip(starts, ends, strict=True):
            run = acc[a:b]
            if retention is not None:
                # an id published twice in one run (retention dropped the first): split there
                for piece in _split_repeats(run, cols.ids):
                    self._apply_run(cols, seqs, maxes, piece, mode, parts)
            else:
                self._apply_run(cols, seqs, maxes, run, mode, parts)

    def _apply_run(self, cols: Any, seqs: np.ndarray, maxes: np.ndarray, run: np.ndarray,
                   mode: int, parts: list[tuple[np.ndarray, ...]]) -> None:
        side = _SIDE_NAMES[int(cols.side[run[0]])]
        own, other = self.tables[side], self.tables[_OTHER[side]]
        lateness, retention = self.lateness, self.retention
        keys, values, times = cols.keys[run], cols.values[run], cols.times[run]
        run_seqs, run_max = seqs[run], maxes[run]
        if mode >= 0:
            self._match_run(side, other, run, keys, values, times, run_seqs, run_max, mode,
                            cols, parts)
        m = int(run_max[-1])
        self._max_time = m
        if retention is not None:
            limit = m - lateness - retention
            other.expire_before(limit)
            own.expire_before(limit)
        a, b = int(run[0]), int(run[-1]) + 1
        if b - a == run.shape[0]:  # contiguous (no rejected event inside): slices
            ids = cols.ids[a:b]
            pl = None if cols.payloads is None else cols.payloads[a:b]
        else:
            ids = [cols.ids[i] for i in run.tolist()]
            pl = None if cols.payloads is None else [cols.payloads[i] for i in run.tolist()]
        own.insert_many(ids, keys, values, times, run_seqs, pl)
        if retention is not None:
            own.expire_before(m - lateness - retention)

    def _match_run(self, side: Side, other: BaseTable, run: np.ndarray, keys: np.ndarray,
                   values: np.ndarray, times: np.ndarray, run_seqs: np.ndarray,
                   run_max: np.ndarray, mode: int, cols: Any,
                   parts: list[tuple[np.ndarray, ...]]) -> None:
        """Match a run of same-side events against ``other`` with one ``match_many`` call per
        kind and segment, rows appended to ``parts`` in event order.

        The other side changes inside a run only by retention; a segment is a stretch of
        events during which no stored tuple expires, found from the next expiry time
        (``BaseTable.next_expiry``) and the events' limits, so a segment sees exactly what each
        of its events would see one at a time. Events whose key has no partner on the other
        side are skipped when no band join exists (a stale hit is harmless)."""
        band = self.band if len(self.band) else None
        sel = self.select if self.select is not None and len(self.select) else None
        win = self.window if self.window is not None and len(self.window) else None
        if band is None and sel is None and win is None:
            return
        if band is None:
            ix = other.key_index
            assert ix is not None
            todo = np.flatnonzero(ix.lookup_many(keys) >= 0)
        else:
            todo = np.arange(run.shape[0])
        n = todo.shape[0]
        if n == 0:
            return
        retention, lateness = self.retention, self.lateness
        limits = None if retention is None else run_max[todo] - lateness - retention
        dirn = 1 if side == "R" else -1
        a = 0
        while a < n:
            b = n
            if limits is not None:
                other.expire_before(int(limits[a]))
                t = other.next_expiry()
                if t is not None:
                    b = max(a + 1, int(np.searchsorted(limits, t, side="right")))
            self._max_time = int(run_max[todo[b - 1]])
            if len(other):
                idx = todo[a:b]
                bs, vs, xs = keys[idx], values[idx], run_seqs[idx]
                got = []
                rows, buf = self._rows_buf, self._buf
                if band is not None:
                    band.match_many(buf, rows, dirn, bs, vs, xs, other, mode)
                    got.append(rows.take())
                if sel is not None:
                    sel.match_many(buf, rows, dirn, bs, vs, xs, other, mode)
                    got.append(rows.take())
                if win is not None:
                    win.match_many(buf, rows, dirn, bs, vs, times[idx], xs, other, mode,
                                   run_max[idx] - lateness)
                    got.append(rows.take())
                self._add_rows(got, run[idx], side, mode, other, cols, parts)
            a = b

    def _add_rows(self, got: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
                  events: np.ndarray, side: Side, mode: int, other: BaseTable, cols: Any,
                  parts: list[tuple[np.ndarray, ...]]) -> None:
        """Rows ``(position, q, x)`` of each kind, merged stably by event (kinds in band,
        select, window order within an event, as one at a time), as batch-output columns."""
        got = [g for g in got if g[0].shape[0]]
        if not got:
            return
        if len(got) == 1:
            e, q, x = got[0]
        else:
            e = np.concatenate([g[0] for g in got])
            order = np.argsort(e, kind="stable")
            e = e[order]
            q = np.concatenate([g[1] for g in got])[order]
            x = np.concatenate([g[2] for g in got])[order]
        ev = events[e]
        if mode == PAIRS:
            partner = other.ids_of(x)
            mine = np.empty(ev.shape[0], dtype=object)
            id_list = cols.ids
            mine[:] = [id_list[i] for i in ev.tolist()]
            parts.append((ev, q, None, (mine, partner) if side == "R" else (partner, mine)))
        else:
            parts.append((ev, q, x, None))

    def _rows(self, event: int, side: Side, x_id: str, mode: int,
              other: BaseTable) -> tuple[np.ndarray, ...]:
        """The current ``self._buf`` output of input event ``event`` as batch-output columns."""
        buf = self._buf
        n = buf.n
        q = buf.out_q[:n].copy()
        ev = np.full(n, event, dtype=np.int64)
        if mode == PAIRS:
            partner = other.ids_of(buf.out_s[:n])
            mine = np.empty(n, dtype=object)
            mine[:] = x_id
            return (ev, q, None, (mine, partner) if side == "R" else (partner, mine))
        return (ev, q, self.cols.acc[q], None)

    def delete_batch(self, sides: Any, ids: Any, *, output: str = "affected") -> BatchResult:
        """Delete a batch of stored tuples (side, id), exactly as ``delete`` one at a time.

        An id not stored (or deleted earlier in the batch) gets NOT_FOUND, a bad side or id
        INVALID; neither raises, takes a sequence number or changes anything. Column length
        mismatches raise ``ValueError``. Output rows carry sign −1.
        """
        mode = _BATCH_MODES[check_output(output)]
        n = check_lengths(sides=sides, ids=ids)
        valid = np.ones(n, dtype=np.bool_)
        reasons: dict[int, str] = {}
        sd = side_codes(sides, n, valid, reasons)
        id_list = check_ids(ids, valid, reasons)
        status = np.full(n, int(EventStatus.INVALID), dtype=np.int8)
        seqs = np.zeros(n, dtype=np.int64)
        gone: set[tuple[int, str]] = set()
        slot_maps = (self.tables["R"].slot_of, self.tables["S"].slot_of)
        seq = self._seq
        sdl, vl = sd.tolist(), valid.tolist()
        for i in range(n):
            if not vl[i]:
                continue
            x = id_list[i]
            if x in slot_maps[sdl[i]] and (sdl[i], x) not in gone:
                gone.add((sdl[i], x))
                seq += 1
                seqs[i] = seq
                status[i] = EventStatus.OK
            else:
                status[i] = EventStatus.NOT_FOUND
                reasons[i] = reason_for(int(EventStatus.NOT_FOUND), _SIDE_NAMES[sdl[i]], x)
        parts: list[tuple[np.ndarray, ...]] = []
        acc = np.flatnonzero(status == EventStatus.OK)
        if acc.shape[0] and mode >= 0 and self._max_time is not None:
            # runs of same-side deletes: deleting a tuple never changes the other side, and
            # the clock does not move, so a run is matched like a run of publishes (one
            # ``match_many`` per kind), then its tuples are removed
            sd_acc = sd[acc]
            cut = np.flatnonzero(sd_acc[1:] != sd_acc[:-1]) + 1
            by_id = _Ids(id_list)
            for run in np.split(acc, cut):
                side = _SIDE_NAMES[int(sd[run[0]])]
                table = self.tables[side]
                slots = np.fromiter(map(table.slot_of.__getitem__, [id_list[i] for i in run]),
                                    dtype=np.int64, count=run.shape[0])
                self._match_run(side, self.tables[_OTHER[side]], run, table.keys[slots],
                                table.values[slots], table.times[slots], table.seqs[slots],
                                np.full(run.shape[0], self._max_time, dtype=np.int64), mode,
                                by_id, parts)
                for i in run.tolist():
                    table.remove(id_list[i])
        else:
            for i in acc.tolist():
                side = _SIDE_NAMES[sdl[i]]
                table = self.tables[side]
                if mode >= 0:
                    slot = table.slot_of[id_list[i]]
                    self._match(side, float(table.keys[slot]), float(table.values[slot]),
                                int(table.seqs[slot]), mode, int(table.times[slot]))
                    if self._buf.n:
                        parts.append(self._rows(i, side, id_list[i], mode,
                                                self.tables[_OTHER[side]]))
                table.remove(id_list[i])
        self._seq = seq
        return BatchResult(status, seqs, reasons, _gather(parts, output, -1))


def _subscriptions_from_columns(cols: Mapping[str, np.ndarray]) -> list[Subscription]:
    """The ``Subscription`` objects of ``Engine.subscription_columns`` rows (±inf → unbounded).

    The rows passed the model's checks once already, so the frozen objects are filled directly
    (``object.__new__``): validating 500,000 specs again would cost seconds and cannot fail."""
    new, put, inf = object.__new__, object.__setattr__, math.inf

    def rng(lo: float, hi: float) -> Range:
        r = new(Range)
        put(r, "lo", None if lo == -inf else lo)
        put(r, "hi", None if hi == inf else hi)
        return r

    out: list[Subscription] = []
    cs = [np.asarray(cols[k]).tolist() for k in ("kind", "a_lo", "a_hi", "b_lo", "b_hi", "c_lo",
                                                  "c_hi", "w")]
    select, band, window = KIND_CODE["select"], KIND_CODE["band"], KIND_CODE["window"]
    for kind, a_lo, a_hi, b_lo, b_hi, c_lo, c_hi, w in zip(*cs, strict=True):
        if kind == select:
            sub: Any = new(SelectJoin)
            put(sub, "kind", "select")
        elif kind == band:
            sub = new(BandJoin)
            put(sub, "b", rng(b_lo, b_hi))
            put(sub, "kind", "band")
        elif kind == window:
            sub = new(WindowJoin)
            put(sub, "w", int(w))
            put(sub, "kind", "window")
        else:
            raise ValueError(f"unknown subscription kind code {kind!r}")
        put(sub, "a", rng(a_lo, a_hi))
        put(sub, "c", rng(c_lo, c_hi))
        out.append(sub)
    return out


class _Ids(NamedTuple):
    """The ``ids`` column ``Engine._match_run`` reads for PAIRS rows (a delete batch's ids)."""

    ids: list[Any]


def _split_repeats(run: np.ndarray, ids: list[Any]) -> list[np.ndarray]:
    """Cut a run of same-side events before each id already seen in the current piece."""
    pieces: list[np.ndarray] = []
    seen: set[str] = set()
    a = 0
    for j, i in enumerate(run.tolist()):
        if ids[i] in seen:
            pieces.append(run[a:j])
            seen = set()
            a = j
        seen.add(ids[i])
    pieces.append(run[a:])
    return pieces


def _gather(parts: list[tuple[np.ndarray, ...]], output: str, sign: int) -> BatchOutput:
    """Concatenate per-event output columns into one ``BatchOutput`` (rows in event order)."""
    if not parts or output == "none":
        return empty_output(output)
    def cat(i: int) -> np.ndarray:  # a batch of one run: its columns as they are, no copy
        return parts[0][i] if len(parts) == 1 else np.concatenate([p[i] for p in parts])

    ev, q = cat(0), cat(1)
    signs = np.full(ev.shape[0], sign, dtype=np.int8)
    if output == "pairs":
        r_id = np.concatenate([p[3][0] for p in parts])
        s_id = np.concatenate([p[3][1] for p in parts])
        return BatchOutput(ev, q, signs, np.full(ev.shape[0], sign, dtype=np.int64), r_id, s_id)
    counts = cat(2).astype(np.int64, copy=False)
    return BatchOutput(ev, q, signs, counts if sign == 1 else counts * sign, None, None)
