"""The engine's facade: one topic's state and operations in one total order (paper 004 §2–§4).

An :class:`Engine` owns the two base tables, the subscription columns and one index per
subscription kind (the registry, ``matcher/kinds.py``: band, select and window joins, each a
``KindIndex`` of ``joins/interface.py`` — one of the paper's strategies or its router). Every
accepted operation takes the next sequence number; a rejected one (late, duplicate, unknown id,
malformed; docs/reference/errors.md) raises before anything changes. Matching is delegated to each
kind's index through the kind interface only: one tuple as a ``OneEvent``, a run of tuples as an
``EventRun``; the indexes write subscription ids and partner slots into shared buffers, and the
engine turns those into ``Delivery`` objects, columnar ``Matches`` or ``Affected`` counts only at
the end, so no Python object is built per pair unless asked for. A kind's index is built on its
first subscription, so a kind without subscriptions costs nothing per event.

The engine is three modules, each doing one thing: this one (the public API, subscriptions, one
operation at a time, results, probes, statistics), the batch apply path (``matcher/apply.py``:
``publish_batch``, ``delete_batch``, ``publish_admitted``, ``probe_batch`` as runs of events) and
the state (``matcher/state.py``: checkpoint columns, ``export_state`` / ``load_state``,
``restore_*``, ``advance_clock``).

>>> from hotjoin.matcher import BandJoin, Event, Range
>>> e = Engine()
>>> sid = e.subscribe(BandJoin(b=Range(-2.5, 2.5)))
>>> _ = e.publish(Event("S", "s1", key=10.0, value=1.0, time=100))
>>> e.publish(Event("R", "r1", key=9.0, value=4.0, time=101))
[Delivery(subscription_id=0, sign=1, r_id='r1', s_id='s1')]
>>> sorted(e.kinds), e.kind_index("select") is None
(['band'], True)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from hotjoin.matcher.apply import OTHER, BatchApply
from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.batch import BatchOutput, BatchResult
from hotjoin.matcher.errors import (
    BatchError,
    DuplicateEventError,
    EventTooFarAheadError,
    LateEventError,
    UnknownEventError,
    UnknownSubscriptionError,
)
from hotjoin.matcher.joins.interface import KindIndex, OneEvent
from hotjoin.matcher.joins.protocol import COUNT, IDENTIFY, PAIRS, BatchRows, MatchBuffer
from hotjoin.matcher.kinds import KINDS, KindSpec, kind_of
from hotjoin.matcher.model import (
    Affected,
    Delivery,
    Event,
    Matches,
    Side,
    Subscription,
    check_side,
    empty_matches,
)
from hotjoin.matcher.state import EngineState
from hotjoin.matcher.subscriptions import SubscriptionColumns

STRATEGIES: dict[str, tuple[str, ...]] = {k: spec.strategy_names() for k, spec in KINDS.items()}
"""Every strategy name a topic may choose, per kind (the paper's names; the router last)."""
DEFAULT_STRATEGY: dict[str, str] = {k: str(spec.router.name) for k, spec in KINDS.items()}
"""``"auto"``: the cost-based router of §4 (``matcher/router/``) for every kind."""
_NO_FILTER_SEQ = np.iinfo(np.int64).max


def _resolve_strategies(strategy: str | Mapping[str, str]) -> dict[str, str]:
    """The strategy of every kind: ``"auto"`` (each kind's router) or a mapping kind → name
    (kinds left out, or given ``"auto"``, take their router); ValueError for anything else."""
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


class Engine(BatchApply, EngineState):
    """One topic: stored R and S tuples, subscriptions, watermark, sequence (paper 004 §2).

    ``strategy``: ``"auto"`` (every kind's router) or a mapping kind → strategy name (the
    paper's, ``STRATEGIES``); ``options``: the strategies' tunables (``epsilon``, ``alpha``,
    ``cost_profile``, ``router_members``, ``router_feedback``, ...), checked here, so a bad one
    refuses the engine rather than its first subscription. ``max_advance`` (event-time units;
    None or 0: no bound) bounds how far one event may move the clock: an event whose time
    exceeds the largest time seen so far by more than this is refused
    (``EventTooFarAheadError``, a ``ValueError``; INVALID in a batch) after the duplicate and
    lateness checks, and changes nothing. The first event is not bounded.
    """

    def __init__(self, lateness: int = 0, retention: int | None = None,
                 strategy: str | Mapping[str, str] = "auto",
                 options: Mapping[str, Any] | None = None,
                 max_advance: int | None = None) -> None:
        if (isinstance(lateness, bool) or not isinstance(lateness, (int, np.integer))
                or lateness < 0):
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
        for kind, name in self.strategy_names.items():
            KINDS[kind].strategy(name).check_options(self.options)
        keep = self.retention is not None  # no retention: no expiry queue to maintain
        # no key order nor key index until a kind that needs one gets its first subscription
        # (``_index_for``): a band-only topic never builds the key index, a select-only one
        # never keeps the key order
        self.tables: dict[Side, BaseTable] = {
            "R": BaseTable("R", track_expiry=keep, key_order=False),
            "S": BaseTable("S", track_expiry=keep, key_order=False)}
        self.cols = SubscriptionColumns()
        self.subs: dict[int, Subscription] = {}
        # kind name -> its index, built on the kind's first subscription; and the indexes in
        # registry order, the order kinds match a tuple (and their rows' order within an event)
        self._kinds: dict[str, KindIndex] = {}
        self._matching: list[KindIndex] = []
        self._buf = MatchBuffer()
        self._rows_buf = BatchRows()
        self._one = OneEvent(self._buf)
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

    # -- the kinds --------------------------------------------------------------------------
    @property
    def kinds(self) -> Mapping[str, KindIndex]:
        """The kinds' indexes built so far, by kind name (read-only; registry order)."""
        return MappingProxyType({index.kind: index for index in self._matching})

    def kind_index(self, kind: str) -> KindIndex | None:
        """The index of ``kind`` (None before its first subscription); ValueError for a kind
        the registry does not know."""
        if kind not in KINDS:
            raise ValueError(f"unknown subscription kind {kind!r}; kinds are {', '.join(KINDS)}")
        return self._kinds.get(kind)

    def _index_for(self, sub: object) -> KindIndex:
        """The index of ``sub``'s kind, built (with what it needs of the tables) on first use;
        ValueError for anything that is not a subscription."""
        spec = kind_of(sub)
        index = self._kinds.get(spec.name)
        return index if index is not None else self._build(spec)

    def _build(self, spec: KindSpec) -> KindIndex:
        """Build ``spec``'s index with the topic's strategy for it; first give the tables the
        key order / key index (by time too for window joins) it needs: O(n log n) once each."""
        for t in self.tables.values():
            if spec.key_order:
                t.enable_key_order()
            if spec.key_index:
                # select joins need only the by-value order: the by-time groups would double
                # the index of every stored tuple
                t.enable_key_index(spec.time_order)
        index = spec.make(self.strategy_names[spec.name], self.cols, self.options, self.tables)
        self._kinds[spec.name] = index
        self._matching = [self._kinds[k] for k in KINDS if k in self._kinds]
        return index

    def _active(self) -> list[KindIndex]:
        """The kinds' indexes that hold subscriptions, in matching order."""
        return [index for index in self._matching if len(index)]

    # -- subscriptions ----------------------------------------------------------------------
    def subscribe(self, sub: Subscription, snapshot: bool = False) -> int:
        """Register ``sub``; returns its id. With ``snapshot`` it is also owed the current
        result."""
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
        """Register many subscriptions in order (validated first: all or nothing); each kind's
        share goes to its index in one ``add_many``."""
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
            for index in self._matching:
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
        request fails): all or nothing. Takes the ids out of their indexes (best effort: a
        failed build may hold only some), the columns and the id counter; restores ``seq0``."""
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
        """The live subscription ``sid`` (UnknownSubscriptionError if it is not registered)."""
        try:
            return self.subs[sid]
        except KeyError:
            raise UnknownSubscriptionError(sid) from None

    def subscriptions(self) -> Iterator[tuple[int, Subscription]]:
        """The live subscriptions as ``(id, subscription)``, in registration order."""
        return iter(self.subs.items())

    # -- matching core ----------------------------------------------------------------------
    def _match(self, side: Side, key: float, value: float, xseq: int, mode: int,
               time: int = 0, end: int | None = None) -> None:
        """Run every kind with subscriptions on one tuple of ``side`` (one ``OneEvent``, filled
        once, shared by the kinds; ``end`` None: a point); output left in ``self._buf``."""
        buf = self._buf
        buf.start()
        other = self.tables[OTHER[side]]
        if len(other) == 0:
            return
        ev = None
        for index in self._matching:
            if len(index):
                if ev is None:
                    mt = self._max_time
                    ev = self._one.set(1 if side == "R" else -1, key, value, time, xseq,
                                       time if mt is None else mt - self.lateness, other, mode,
                                       end=end)
                index.match(ev)

    def _matches(self, side: Side, x_id: str, sign: int) -> Matches:
        buf = self._buf
        n = buf.n
        if n == 0:
            return empty_matches(sign)
        q = buf.out_q[:n].copy()
        partner = self.tables[OTHER[side]].ids_of(buf.out_s[:n])
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
            self._match(ev.side, ev.key, ev.value, seq, mode, ev.time, ev.end)
        table.insert(ev, seq)
        return seq

    def publish(self, ev: Event) -> list[Delivery]:
        """Insert ``ev``; returns the +1 deliveries of the pairs it forms."""
        self._publish(ev, PAIRS)
        return self._matches(ev.side, ev.id, 1).deliveries()

    def publish_columnar(self, ev: Event) -> Matches:
        """Insert ``ev``; returns the +1 pairs it forms as columns (no object per pair)."""
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
                        int(table.seqs[slot]), mode, int(table.times[slot]),
                        int(table.ends[slot]))
        table.remove(event_id)

    def delete(self, side: Side, event_id: str, match: bool = True) -> list[Delivery]:
        """Remove a stored tuple; returns −1 for each pair a subscription had received."""
        self._delete(side, event_id, PAIRS if match else -1)
        return self._matches(side, event_id, -1).deliveries() if match else []

    def delete_columnar(self, side: Side, event_id: str) -> Matches:
        """:meth:`delete` with the −1 pairs as columns."""
        self._delete(side, event_id, PAIRS)
        return self._matches(side, event_id, -1)

    def delete_affected(self, side: Side, event_id: str) -> Affected:
        """:meth:`delete` with each affected subscription and its (negative) pair count."""
        self._delete(side, event_id, COUNT)
        return self._affected(-1)

    def get_event(self, side: Side, event_id: str) -> Event | None:
        """The stored event of ``side`` with ``event_id``, or None (ValueError for a bad side)."""
        return self.tables[check_side(side)].event(event_id)

    # -- results ----------------------------------------------------------------------------
    def result_columnar(self, sid: int) -> Matches:
        """q's current result over the stored tuples, sign +1 (snapshot pairs): each stored R
        tuple matched for q alone (``KindIndex.snapshot``), every pair owed."""
        index = self._index_for(self.subscription(sid))
        r_table, s_table = self.tables["R"], self.tables["S"]
        qids = np.array([sid], dtype=np.int64)
        buf, ev = self._buf, self._one
        qs: list[np.ndarray] = []
        rs: list[np.ndarray] = []
        ss: list[np.ndarray] = []
        for r_slot in r_table.live_slots().tolist():
            buf.start()
            ev.set(1, float(r_table.keys[r_slot]), float(r_table.values[r_slot]),
                   int(r_table.times[r_slot]), _NO_FILTER_SEQ, 0, s_table, PAIRS,
                   end=int(r_table.ends[r_slot]))
            index.snapshot(ev, qids)
            if buf.n:
                qs.append(buf.out_q[: buf.n].copy())
                ss.append(buf.out_s[: buf.n].copy())
                rs.append(np.full(buf.n, r_slot, dtype=np.int64))
        if not qs:
            return empty_matches(1)
        return Matches(np.concatenate(qs), 1, r_table.ids_of(np.concatenate(rs)),
                       s_table.ids_of(np.concatenate(ss)))

    def result(self, sid: int) -> list[Delivery]:
        """:meth:`result_columnar` as ``Delivery`` objects."""
        return self.result_columnar(sid).deliveries()

    def probe(self, side: Side, key: float, value: float, mode: str = "identify",
              time: int | None = None, end: int | None = None) -> int:
        """Match a hypothetical tuple without storing it (benchmarks, paper 004 §5).

        ``mode`` is ``"identify"`` (returns the number of affected subscriptions) or ``"pairs"``
        (returns the number of result pairs). ``time`` (window and interval joins) defaults to
        the largest event time published so far, ``end`` (interval joins) to ``time`` (a
        point). Nothing in the engine changes.
        """
        m = {"identify": IDENTIFY, "pairs": PAIRS, "count": COUNT}[mode]
        if time is None:
            time = self.probe_time
        if end is not None and int(end) < int(time):
            raise ValueError(f"probe end {end} is before its time {time}")
        self._match(check_side(side), float(key), float(value), self._seq + 1, m, int(time),
                    None if end is None else int(end))
        return self._buf.n

    def probe_batch(self, side: Side, keys: Any, values: Any, times: Any = None, *,
                    ends: Any = None, output: str = "affected") -> np.ndarray:
        """Match a batch of hypothetical ``side`` tuples without storing them (benchmarks).

        What :meth:`probe` gives each tuple, through the batch path's compiled matching (the
        ``match_many`` calls of ``publish_batch``, routers deciding inside the batch): per
        tuple the number of rows ``publish_batch`` would output for it alone — affected
        subscriptions (``output="affected"``) or pairs (``"pairs"``). Every tuple sees the
        stored tuples as they stand; ``times`` (window and interval joins) default to the
        largest event time published so far, ``ends`` (interval joins) to the times (points).
        Nothing in the engine changes (a router may learn).

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
        es = ts if ends is None else np.ascontiguousarray(ends, dtype=np.int64).reshape(-1)
        if vs.shape[0] != n or ts.shape[0] != n or es.shape[0] != n:
            raise ValueError(f"probe_batch: {n} keys but {vs.shape[0]} values, "
                             f"{ts.shape[0]} times and {es.shape[0]} ends")
        if bool((es < ts).any()):
            raise ValueError("probe_batch: an end lies before its time")
        return self._probe_batch(side, ks, vs, ts, mode, es)

    # -- introspection ----------------------------------------------------------------------
    def check_invariants(self) -> None:
        """Assert every index's structural invariants (paper 004 Lemma 2, Theorem 1), and the
        tables' key order where a kind keeps one; the tests call this after operations."""
        for index in self._matching:
            index.check_invariants()
        ordered = [k for k, spec in KINDS.items() if spec.key_order]
        for side, t in self.tables.items():
            if not t.key_ordered:  # a kind that needs the key order keeps it once it exists
                assert not any(len(ix) for k, ix in self._kinds.items() if k in ordered), side
                continue
            order = t.order.items(t.alive)
            assert sorted(s for _, s in order) == sorted(t.slot_of.values()), side
            assert all(t.keys[s] == k for k, s in order), side

    def stats(self) -> dict[str, Any]:
        """Counters and gauges (docs/reference/metrics.md): ``seq``, ``watermark``, stored ``tuples`` per
        side, ``subscriptions`` per kind, the ``strategies``, per kind its ``tau`` (its
        ``hotspots`` where it has no τ) and ``hotspots``, the routers' ``decisions`` per
        strategy, and each kind's own stats under its name (``{}`` before its first
        subscription). Read only."""
        per = {k: (self._kinds[k].stats() if k in self._kinds else {}) for k in KINDS}
        counts = dict.fromkeys(KINDS, 0)
        for sub in self.subs.values():
            counts[sub.kind] += 1
        return {
            "seq": self._seq,
            "watermark": self.watermark,
            "tuples": {"R": len(self.tables["R"]), "S": len(self.tables["S"])},
            "subscriptions": counts,
            "strategies": dict(self.strategy_names),
            "tau": {k: int(st.get("tau", st.get("hotspots", 0))) for k, st in per.items()},
            "hotspots": {k: int(st.get("hotspots", 0)) for k, st in per.items()},
            "decisions": {name: int(n) for st in per.values()
                          for name, n in st.get("decisions", {}).items()},
            **per,
        }

    def memory_bytes(self) -> int:
        """Approximate bytes held in numpy arrays by tables, columns and indexes."""
        return (sum(t.memory_bytes() for t in self.tables.values()) + self.cols.memory_bytes()
                + sum(index.memory_bytes() for index in self._matching))

    # -- the batch path (matcher/apply.py) ----------------------------------------------------
    def publish_batch(self, sides: Any, ids: Any, keys: Any, values: Any, times: Any,
                      payloads: Any = None, *, ends: Any = None,
                      output: str = "affected") -> BatchResult:
        """Publish a batch given as columns, exactly as ``publish`` one at a time in input order.

        ``sides``: "R"/"S" strings or 0/1 integers; ``ids``: str; ``keys``/``values``: float64;
        ``times``: int64; ``payloads``: bytes or None; ``ends``: int64 per event (``Event.end``,
        ``== time`` for a point; None: all points; an end before its time or beyond ±2^61 is
        INVALID with its reason). A rejected event (INVALID, DUPLICATE —
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
        return self._publish_batch(sides, ids, keys, values, times, payloads, output, ends)

    def publish_admitted(self, sides: Any, ids: Any, keys: Any, values: Any, times: Any,
                         payloads: Any, seqs: Any, maxes: Any, *, ends: Any = None,
                         output: str = "affected") -> BatchOutput:
        """Store and match a batch that a topic-wide admission has already accepted.

        Event i takes sequence number ``seqs[i]`` and sees the topic's clock ``maxes[i]`` (the
        largest event time after it: the watermark and retention limit it is matched under).
        The key-partitioned scale-out front end (``server/scaleout/``) admits a topic's batch once
        (``batch.admit_publish``) and sends each worker the events of its keys; the worker
        applies them here with the same compiled runs as ``publish_batch``, so the pairs and
        their sequence numbers are those of one engine. No duplicate or lateness
        check is made; ``ends`` as ``publish_batch``'s. ``ValueError`` (nothing changed) for
        invalid columns, seqs not after
        ``seq`` and increasing, or clocks going back.
        """
        return self._publish_admitted(sides, ids, keys, values, times, payloads, seqs, maxes,
                                      output, ends)

    def delete_batch(self, sides: Any, ids: Any, *, output: str = "affected") -> BatchResult:
        """Delete a batch of stored tuples (side, id), exactly as ``delete`` one at a time.

        An id not stored (or deleted earlier in the batch) gets NOT_FOUND, a bad side or id
        INVALID; neither raises, takes a sequence number or changes anything. Column length
        mismatches raise ``ValueError``. Output rows carry sign −1.
        """
        return self._delete_batch(sides, ids, output)


def _kind_attribute(kind: str) -> property:
    """``engine.<kind>``: the kind's index, None before its first subscription (as
    :meth:`Engine.kind_index`), for tools and tests. A property per registered kind rather than
    a ``__getattr__``: a class with ``__getattr__`` loses CPython's specialised attribute loads
    on every ``self.x`` of the engine (measured ~0.3 µs per one-tuple operation)."""

    def get(self: Engine) -> KindIndex | None:
        return self._kinds.get(kind)

    return property(get, doc=f"The {kind} kind's index (None before its first subscription).")


for _kind in KINDS:
    setattr(Engine, _kind, _kind_attribute(_kind))
