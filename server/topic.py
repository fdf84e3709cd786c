"""One topic: the total order of its operations and how each is applied (README, "Design choices").

An event's way through the server: the servicer (``server/service.py``) decodes the request
(``server/convert.py``) and calls a ``Topic`` method here, which under the topic lock gives the
operation the next sequence number by applying it to the engine (ok / late / duplicate / not
found, and who is affected; any ``TopicEngine`` of ``hotjoin.matcher.contract``, built by
``settings.engine_factory``), turns the engine's output into messages
(``server/messages.py``), hands messages and operation to the topic's durability
(``server/durability.py``: match log, then one event-log frame) and, outside the lock, waits
for the frame to be durable before the messages go to the delivery hub (``server/delivery.py``).
The lock therefore defines the topic's sequence; an acknowledgement is sent only after its
frame is durable.

``Topic`` composes the rooms that own the rest: the subscription book (``server/book.py``:
metadata and owners of the live subscriptions), durability (event log, match log, group
commit, checkpoints, compaction; recovery in ``server/recovery.py``), the message builder, the
committed cursors (``server/cursors.py``) and the delivery hub. They share the topic lock and
talk through their public methods.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hotjoin.matcher.contract import TopicEngine
from hotjoin.matcher.errors import (
    BatchError,
    DuplicateEventError,
    LateEventError,
    UnknownEventError,
    UnknownSubscriptionError,
)
from hotjoin.matcher.model import Event, Subscription
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server import metrics
from hotjoin.server.batch_apply import EventStatus, apply_publish_batch
from hotjoin.server.book import SubscriptionBook
from hotjoin.server.convert import (
    MAX_ID_LEN,
    MAX_PAYLOAD,
    MAX_TIME,
    EventBatch,
    SubMeta,
    decode_event,
    decode_id,
    decode_side,
    decode_spec,
    encode_columns,
    encode_spec,
    event_end,
    preset_of,
)
from hotjoin.server.cursors import CursorStore
from hotjoin.server.delivery import Chunk, DeliveryHub, Listener, OpMatches
from hotjoin.server.durability import Durability
from hotjoin.server.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unavailable,
    Unimplemented,
)
from hotjoin.server.heap import FREEZE_AFTER, freeze_long_lived
from hotjoin.server.messages import MessageBuilder
from hotjoin.server.records import DamagedFileError
from hotjoin.server.settings import DEFAULT_SETTINGS, TopicSettings

log = logging.getLogger("hotjoin.topic")

MAX_BATCH_EVENTS = 10_000
MAX_SUBSCRIBE_BATCH = 1_000_000


@dataclass(frozen=True, slots=True)
class Status:
    """Outcome of one event of a batch: code is ok, late, duplicate, invalid or not_found."""

    code: str
    id: str
    seq: int = 0
    reason: str = ""
    identical: bool = False  # duplicate only: the stored event equals this one (a re-sent event)


@dataclass(frozen=True, slots=True)
class ColumnsOutcome:
    """Outcome of a columnar batch: ``status`` (``EventStatus`` per event, int8) and ``seq``
    (0 where rejected) per event, the reasons of the rejected events, the ids assigned to
    accepted events sent without one, the batch's consecutive seqs ``first_seq..last_seq``, and
    the indexes of the duplicates equal to their stored event (``identical``: re-sent events)."""

    status: np.ndarray
    seq: np.ndarray
    ids: np.ndarray
    reasons: dict[int, str]
    assigned: dict[int, str]
    first_seq: int
    last_seq: int
    identical: frozenset[int] = frozenset()

    @property
    def accepted(self) -> int:
        return 0 if self.first_seq == 0 else self.last_seq - self.first_seq + 1


class Topic:
    """The state of one topic and the only path by which operations reach its engine."""

    def __init__(
        self,
        name: str,
        lateness: int,
        retention: int | None,
        strategy: Mapping[str, str],
        directory: Path | None,
        settings: TopicSettings = DEFAULT_SETTINGS,
        max_advance: int = 0,
    ) -> None:
        self.name = name
        self.settings = settings
        self.delivery = settings.delivery
        self.lateness = lateness
        self.retention = retention
        self.max_advance = int(max_advance or 0)  # 0: no bound (topic.json, docs/reference/persistence.md)
        self.strategy = dict(strategy)
        self.directory = directory
        self._lock = threading.Lock()
        self._deleted = False
        self.book = SubscriptionBook(name)
        self.durability = Durability(name, directory, settings, lateness, retention, self._lock, self.book)
        try:
            self.engine: TopicEngine = self.durability.restore(lambda: settings.engine_factory(
                lateness=lateness, retention=retention, strategy=self.strategy or "auto",
                max_advance=self.max_advance or None))
            # the committed cursors (server/cursors.py) are kept beside the logs
            self.cursors = CursorStore(directory, sync=settings.sync)
            self._check_cursors()
        except BaseException:
            self.durability.abandon()  # a topic that does not open holds no file open
            raise
        self.messages = MessageBuilder(name, self.book)
        self._m_published = metrics.EVENTS_PUBLISHED.labels(name)
        self._m_deleted = metrics.EVENTS_DELETED.labels(name)
        self._m_to_match = metrics.PUBLISH_TO_MATCH.labels(name)
        self._m_duration = metrics.PUBLISH_DURATION.labels(name)
        match_log = self.durability.match_log
        self.hub = DeliveryHub(
            settings.buffer_capacity,
            settings.buffer_max_pairs,
            boot_seq=self.engine.seq,
            on_gap=metrics.GAPS.labels(name).inc,
            on_deliver=self.messages.observe_delivery,
            store=match_log,
            buffer_bytes=self.delivery.buffer_bytes,
            listener_bytes=self.delivery.listener_bytes,
        )
        if match_log is not None:
            match_log.on_drop = self.hub.dropped
        self.hub.add_subscriptions(self.book.hub_entries())
        self.durability.start()

    def _check_cursors(self) -> None:
        """A committed cursor beyond the log's last seq means the log lost operations that were
        acknowledged (a cursor is committed only for durable ones): damage, not a crash."""
        positions = self.cursors.positions()
        if positions and self.directory is not None:
            sid, at = max(positions.items(), key=lambda kv: kv[1])
            if at > self.engine.seq:
                self.cursors.close()
                raise DamagedFileError.at(
                    self.directory / "log", 0, f"the log ends at seq {self.engine.seq}, but "
                    f"subscription {sid}'s committed cursor is at seq {at}: acknowledged "
                    "operations are missing from it")

    # ---- events -----------------------------------------------------------------------------

    def publish(self, events: Sequence[pb.Event], received_ns: int) -> list[Status]:
        """Apply a batch in order; each event gets its own status. Returns once durable."""
        statuses, token = self.publish_begin(events, received_ns)
        self.commit(token)
        self.observe_publish(received_ns)
        return statuses

    def observe_publish(self, received_ns: int) -> None:
        """Record a batch's receive-to-durable time (after ``commit``)."""
        self._m_duration.observe((time.time_ns() - received_ns) / 1e9)

    def publish_begin(self, events: Sequence[pb.Event], received_ns: int) -> tuple[list[Status], int]:
        """Apply a batch and write its frame; ``commit(token)`` then makes it durable and visible.

        Lets one publish stream apply its next batch while the previous one is being synced.
        """
        _check_batch(len(events), MAX_BATCH_EVENTS, "events")
        now_ms = received_ns // 1_000_000
        statuses: list[Status] = []
        ops: list[pb.LogOp] = []
        parts: list[OpMatches] = []
        with self._lock:
            self._check_open()
            engine = self.engine
            publish = engine.publish_columnar if self.book.wants_pairs else engine.publish_affected
            for e in events:
                try:
                    ev = decode_event(e, now_ms, self._auto_id)
                except ValueError as x:
                    statuses.append(Status("invalid", e.id, 0, str(x)))
                    continue
                side, eid = ev.side, ev.id
                try:
                    out = publish(ev)
                except DuplicateEventError as x:
                    same = _same_event(engine.get_event(side, eid), ev.key, ev.value,
                                       ev.time if e.HasField("time") else None, ev.payload,
                                       event_end(ev))
                    why = _identical_reason(side, eid) if same else str(x)
                    statuses.append(Status("duplicate", eid, 0, why, same))
                    continue
                except LateEventError as x:
                    statuses.append(Status("late", eid, 0, str(x)))
                    continue
                except ValueError as x:
                    statuses.append(Status("invalid", eid, 0, str(x)))
                    continue
                seq = engine.seq
                statuses.append(Status("ok", eid, seq))
                point_end = e.HasField("end") and event_end(ev) is None  # end == time: a point
                if e.id and e.HasField("time") and not point_end:
                    logged = e
                else:
                    logged = pb.Event()
                    logged.CopyFrom(e)
                    logged.id, logged.time = eid, ev.time
                    if point_end:
                        logged.ClearField("end")
                ops.append(pb.LogOp(seq=seq, publish=logged, received_unix_nanos=received_ns))
                if len(out):
                    self.messages.of_operation(out, seq, 1, "publish", side, eid, received_ns, parts)
            token = 0
            if ops:
                self._m_to_match.observe_many(np.full(len(ops), (time.time_ns() - received_ns) / 1e9))
                token = self._write(ops, _chunk(parts))
                self._m_published.inc(len(ops))
        _count_rejections(self.name, statuses)
        return statuses, token

    def publish_columns(self, batch: EventBatch, received_ns: int) -> ColumnsOutcome:
        """Apply a columnar batch in order (the per-event form's semantics and statuses); returns
        once durable."""
        outcome, token = self.publish_columns_begin(batch, received_ns)
        self.commit(token)
        self.observe_publish(received_ns)
        return outcome

    def publish_columns_begin(self, batch: EventBatch, received_ns: int) -> tuple[ColumnsOutcome, int]:
        """Apply a columnar batch and write it as one log frame; ``commit(token)`` makes it
        durable and visible. No Python object per event: the server's own checks (side, id
        length, payload size) are vectorised, the engine gets the rest through
        ``apply_publish_batch`` and the delivery hub gets its output as one columnar chunk."""
        n = len(batch)
        _check_batch(n, MAX_BATCH_EVENTS, "events")
        now_ms = received_ns // 1_000_000
        status = np.zeros(n, dtype=np.int8)
        reasons: dict[int, str] = {}
        side_code = batch.side_codes()
        bad = (side_code < 0) | (side_code > 1)
        for i in np.flatnonzero(bad).tolist():
            status[i], reasons[i] = EventStatus.INVALID, "side must be R or S"
        ids = batch.ids
        id_len = np.fromiter(map(len, ids), dtype=np.int64, count=n)
        for i in np.flatnonzero(~bad & (id_len > MAX_ID_LEN)).tolist():
            status[i], reasons[i] = EventStatus.INVALID, f"event id longer than {MAX_ID_LEN} characters"
        payloads = batch.payloads
        if payloads is not None:
            big = np.fromiter(map(len, payloads), dtype=np.int64, count=n) > MAX_PAYLOAD
            for i in np.flatnonzero(big & (status == 0)).tolist():
                status[i], reasons[i] = EventStatus.INVALID, f"payload larger than {MAX_PAYLOAD} bytes"
        times = batch.times if batch.times is not None else np.full(n, now_ms, dtype=np.int64)
        ends = batch.ends
        if ends is not None:  # interval events (server/convert.py ``check_event_end``)
            far = (ends > MAX_TIME) | (ends < -MAX_TIME)
            for i in np.flatnonzero(far & (status == 0)).tolist():
                status[i], reasons[i] = EventStatus.INVALID, (
                    f"event end {int(ends[i])} is outside the supported range [-2^61, 2^61]")
            for i in np.flatnonzero(~far & (ends < times) & (status == 0)).tolist():
                status[i], reasons[i] = EventStatus.INVALID, (
                    f"event end {int(ends[i])} is before its time {int(times[i])} "
                    "(an interval needs end >= time)")
            if not bool((ends != times).any()):
                ends = None  # all points
        seq = np.zeros(n, dtype=np.int64)
        assigned: dict[int, str] = {}
        with self._lock:
            self._check_open()
            engine = self.engine
            take = np.flatnonzero(status == 0)
            empty = take[id_len[take] == 0]
            if empty.size:  # server-assigned ids: "auto-<the seq it takes if all before it do>"
                ids = ids.copy()
                seq0 = engine.seq
                for i in empty.tolist():
                    side = "R" if side_code[i] == 0 else "S"
                    eid, k = f"auto-{seq0 + 1 + i}", 0
                    while engine.get_event(side, eid) is not None:
                        k += 1
                        eid = f"auto-{seq0 + 1 + i}.{k}"
                    ids[i] = eid
                    assigned[i] = eid
            output = "pairs" if self.book.wants_pairs else "affected"
            whole = take.size == n
            sub = (lambda c: c) if whole else (lambda c: c[take])  # noqa: E731
            res = apply_publish_batch(
                engine, sub(side_code).astype(np.int8), sub(ids), sub(batch.keys), sub(batch.values),
                sub(times), payloads if payloads is None or whole else [payloads[i] for i in take.tolist()],
                output, None if ends is None else sub(ends))
            status[take] = res.status
            seq[take] = res.seq
            for j, why in res.reasons.items():
                reasons[int(take[j])] = why
            # duplicates against what is stored now (an id repeated in the batch: its first event)
            identical: set[int] = set()
            for i in take[res.status == EventStatus.DUPLICATE].tolist():
                side, eid = ("R" if side_code[i] == 0 else "S"), ids[i]
                end_i = None if ends is None or ends[i] == times[i] else int(ends[i])
                if _same_event(engine.get_event(side, eid), float(batch.keys[i]),
                               float(batch.values[i]),
                               None if batch.times is None else int(batch.times[i]),
                               b"" if payloads is None else payloads[i], end_i):
                    identical.add(i)
                    reasons[i] = _identical_reason(side, eid)
            ok_local = np.flatnonzero(res.status == EventStatus.OK)
            ok = take[ok_local]
            first = last = 0
            token = 0
            if ok.size:
                first, last = int(res.seq[ok_local[0]]), int(res.seq[ok_local[-1]])
                if last - first + 1 != ok.size or first != engine.seq - ok.size + 1:
                    self.durability.fail("engine sequence diverged from the topic's log; topic closed")
                cols = encode_columns(side_code[ok] + 1, ids[ok], batch.keys[ok], batch.values[ok],
                                      times[ok], None if payloads is None else [payloads[i] for i in ok.tolist()],
                                      None if ends is None else ends[ok])
                op = pb.LogOp(seq=first, publish_columns=cols, received_unix_nanos=received_ns)
                chunk = self.messages.of_batch(res.output, take, seq, side_code, ids, received_ns)
                self._m_to_match.observe_many(np.full(ok.size, (time.time_ns() - received_ns) / 1e9))
                token = self._write([op], None if chunk is None else chunk.seal(first, last),
                                    n_ops=int(ok.size))
                self._m_published.inc(int(ok.size))
        assigned = {i: e for i, e in assigned.items() if status[i] == EventStatus.OK}
        _count_rejection_codes(self.name, status, len(identical))
        same = frozenset(identical)
        return ColumnsOutcome(status, seq, ids, reasons, assigned, first, last, same), token

    def delete(self, refs: Sequence[pb.EventRef], received_ns: int) -> list[Status]:
        """Delete events in order; each gets its own status (a deleted tuple's pairs are
        retracted: −1 messages)."""
        _check_batch(len(refs), MAX_BATCH_EVENTS, "events")
        statuses: list[Status] = []
        ops: list[pb.LogOp] = []
        parts: list[OpMatches] = []
        token = 0
        with self._lock:
            self._check_open()
            engine = self.engine
            columnar = self.book.wants_pairs
            for ref in refs:
                try:
                    side = decode_side(ref.side)
                    eid = decode_id(ref.id, allow_empty=False)
                except ValueError as x:
                    statuses.append(Status("invalid", ref.id, 0, str(x)))
                    continue
                try:
                    if columnar:
                        out = engine.delete_columnar(side, eid)
                    else:
                        out = engine.delete_affected(side, eid)
                except UnknownEventError as x:
                    statuses.append(Status("not_found", eid, 0, str(x)))
                    continue
                seq = engine.seq
                statuses.append(Status("ok", eid, seq))
                ops.append(pb.LogOp(seq=seq, delete=ref, received_unix_nanos=received_ns))
                if len(out):
                    self.messages.of_operation(out, seq, -1, "delete", side, eid, received_ns, parts)
            if ops:
                token = self._write(ops, _chunk(parts))
                self._m_deleted.inc(len(ops))
        self.commit(token)
        _count_rejections(self.name, statuses)
        return statuses

    # ---- subscriptions ----------------------------------------------------------------------

    # ---- subscriptions ----------------------------------------------------------------------

    def subscribe(self, specs: Sequence[pb.SubscriptionSpec], received_ns: int,
                  owner: str = "") -> list[tuple[int, int]]:
        """Register ``specs`` in order, all or nothing, owned by principal ``owner`` ("" without
        auth); returns ``(id, registered_seq)`` each."""
        _check_batch(len(specs), MAX_SUBSCRIBE_BATCH, "subscriptions")
        decoded: list[tuple[Subscription, bool, bool, str]] = []
        for i, spec in enumerate(specs):
            try:
                decoded.append(decode_spec(spec))
            except ValueError as x:
                where = f"subscription #{i}: " if len(specs) > 1 else ""
                raise InvalidArgument(f"{where}{x}") from None
        with self._lock:
            self._check_open()
            engine = self.engine
            seq0 = engine.seq
            ids: list[int] = []
            error: Exception | None = None
            start = 0
            while start < len(decoded) and error is None:
                snap = decoded[start][2]
                end = start
                while end < len(decoded) and decoded[end][2] == snap:
                    end += 1
                run = [d[0] for d in decoded[start:end]]
                try:
                    ids.extend(engine.subscribe_many(run, snapshot=snap))
                except Exception as x:  # noqa: BLE001 - any failed index build: roll back
                    error = x
                    n_applied = engine.seq - seq0 - len(ids)
                    first = self.book.next_sid + len(ids)
                    ids.extend(range(first, first + n_applied))
                start = end
            if error is not None and ids:
                engine.undo_subscribe(np.array(ids, dtype=np.int64), seq0)  # all or nothing
                ids = []
            if engine.seq - seq0 != len(ids):
                self.durability.fail("engine sequence diverged from the topic's log; topic closed")
            ops: list[pb.LogOp] = []
            out: list[tuple[int, int]] = []
            for k, sid in enumerate(ids):
                sub, affected, snap, subscriber = decoded[k]
                reg = seq0 + 1 + k
                self.book.register(sid, SubMeta(affected, snap, subscriber, reg, preset_of(sub)),
                                   owner)
                ops.append(
                    pb.LogOp(
                        seq=reg,
                        subscribe=pb.SubscribeOp(subscription_id=sid, spec=specs[k], owner=owner),
                        received_unix_nanos=received_ns,
                    )
                )
                out.append((sid, reg))
            token = 0
            if ops:
                adds = [(sid, self.book.meta[sid].subscriber, reg, owner) for sid, reg in out]
                parts: list[OpMatches] = []
                for sid, reg in out:
                    if self.book.meta[sid].snapshot:
                        self.messages.of_snapshot(engine.result_columnar(sid), sid, reg, received_ns, parts)
                token = self._write(ops, _chunk(parts), lambda: self.hub.add_subscriptions(adds))
                metrics.SUBSCRIBE_OPS.labels(self.name, "subscribe").inc(len(ops))
        self.commit(token)
        if len(ids) >= FREEZE_AFTER:
            freeze_long_lived()  # a bulk load: keep the new long-lived objects out of full GCs
        if error is not None:
            cause = error.cause if isinstance(error, BatchError) else error
            applied = f" ({len(ids)} subscriptions before it were registered)" if ids else ""
            if isinstance(cause, NotImplementedError):
                raise Unimplemented(f"the engine does not support this subscription yet: {cause}{applied}")
            if not isinstance(cause, (BatchError, ValueError)):  # an engine defect, not bad input
                log.error("topic %r: subscribe failed and was rolled back: %r", self.name, cause)
                raise FailedPrecondition(f"the engine could not index this subscription ({cause!r}); "
                                         "nothing was registered")
            raise InvalidArgument(f"{cause}{applied}")
        return out

    def unsubscribe(self, sid: int, owner: str | None = None) -> int:
        """Remove subscription ``sid``; returns the operation's seq. With ``owner`` set, only a
        subscription of that owner may be removed (``PermissionDenied`` otherwise)."""
        with self._lock:
            self._check_open()
            if owner is not None and sid in self.book:
                self.book.check_owner(sid, owner, "cancel")
            try:
                self.engine.unsubscribe(sid)
            except UnknownSubscriptionError:
                raise NotFound(f"topic {self.name!r} has no subscription {sid}") from None
            seq = self.engine.seq
            self.book.unregister(sid)
            token = self._write([pb.LogOp(seq=seq, unsubscribe=sid, received_unix_nanos=time.time_ns())],
                                None, lambda: self.hub.remove_subscription(sid, seq))
        self.commit(token)
        self.cursors.forget([sid])
        metrics.SUBSCRIBE_OPS.labels(self.name, "unsubscribe").inc()
        return seq

    def list_subscriptions(
        self, subscriber: str, after_id: int | None, page_size: int, owner: str | None = None
    ) -> tuple[list[tuple[int, pb.SubscriptionSpec, int]], bool]:
        """A page of live subscriptions with id > after_id: ``[(id, spec, registered_seq)], more``;
        with ``owner`` set only that owner's subscriptions."""
        with self._lock:
            self._check_open()
            return self.book.page(subscriber, after_id, page_size, owner,
                                  lambda sid, meta: encode_spec(self.engine.subscription(sid), meta))

    def owned(self, owner: str) -> int:
        """Live subscriptions of ``owner`` on this topic (O(1); for the subscriptions quota)."""
        return self.book.owned(owner)

    # ---- listening ----------------------------------------------------------------------------

    def listen(
        self,
        subscriber: str,
        subscription_ids: Sequence[int],
        cursors: Mapping[int, int],
        default_after_seq: int,
        from_latest: bool,
        owner: str | None = None,
        use_committed: bool = True,
    ) -> Listener:
        """Open a listener; unknown ids fail with ``NotFound``, nothing to listen to with
        ``InvalidArgument``. With ``owner`` set the listener sees only that owner's subscriptions:
        ids of another owner fail with ``PermissionDenied`` and listening by subscriber name
        attaches only the owner's subscriptions of that name."""
        if not subscriber and not subscription_ids:
            raise InvalidArgument("listen needs a subscriber or at least one subscription id")
        with self._lock:
            self._check_open()
            for sid in (*subscription_ids, *cursors):
                if sid not in self.book and not self.hub.has(sid):
                    raise NotFound(f"topic {self.name!r} has no subscription {sid}")
                if owner is not None:  # a live one, or one unsubscribed but still draining
                    theirs = self.book.owner_of(sid)
                    if (self.hub.owner_of(sid) if theirs is None else theirs) != owner:
                        self.book.deny(sid, "listen to")
            # committed positions come before the request's defaults (default_after_seq,
            # from_latest), as Kafka's committed offsets before auto.offset.reset; explicit
            # cursors come first
            start = dict(self.cursors.positions()) if use_committed else {}
            start.update(cursors)
            try:
                return self.hub.listen(
                    subscriber, list(subscription_ids), start, default_after_seq,
                    from_latest, self.engine.seq, owner=owner,
                )
            except KeyError as x:
                raise NotFound(f"topic {self.name!r} has no subscription {x.args[0]}") from None
            except PermissionError as x:
                raise PermissionDenied(
                    f"subscription {x.args[0]} of topic {self.name!r} belongs to another principal",
                    "admin") from None

    def commit_cursors(self, cursors: Mapping[int, int], subscriber: str = "",
                       after_seq: int | None = None, owner: str | None = None) -> list[tuple[int, int]]:
        """Commit processed positions (server/cursors.py): ``cursors`` per subscription, and
        ``after_seq`` for every subscription of ``subscriber``; durable on return. With ``owner``
        set only that owner's subscriptions. Returns the committed ``(sid, seq)`` pairs."""
        with self._lock:
            self._check_open()
            seq = self.engine.seq
            pairs: dict[int, int] = {}
            if subscriber and after_seq is not None:
                for sid, _ in self.book.select(subscriber, set(), owner):
                    pairs[sid] = after_seq
            for sid, at in cursors.items():
                if sid not in self.book:
                    raise NotFound(f"topic {self.name!r} has no subscription {sid}")
                if owner is not None:
                    self.book.check_owner(sid, owner, "commit a cursor of")
                pairs[sid] = at
            for sid, at in pairs.items():
                if at > seq:
                    raise InvalidArgument(f"cursor {at} of subscription {sid} is beyond the "
                                          f"topic's sequence {seq}")
            if not pairs and not subscriber:
                raise InvalidArgument("commit needs cursors, or a subscriber and after_seq")
            token = self.durability.written()
        out = sorted(pairs.items())
        try:
            # the operations up to ``seq`` are durable before a cursor may point at them (a failed
            # sync closes the topic: Unavailable)
            self.durability.sync(token)
        except OSError as x:  # the log closed by a shutdown meanwhile
            raise Unavailable(f"topic {self.name!r}: cannot make the cursors durable ({x})") from x
        try:
            self.cursors.commit(out)
        except OSError as x:  # nothing recorded: the file is cut back, the positions unchanged
            raise self.durability.refuse(x, "its committed cursors", "nothing was committed") from x
        return out

    def committed(self, subscriber: str = "", subscription_ids: Sequence[int] = (),
                  owner: str | None = None
                  ) -> tuple[int, list[tuple[int, str, int | None, int | None, int, int, int]]]:
        """``(topic seq, rows)`` of the live subscriptions asked for (all when neither
        ``subscriber`` nor ids are given; of ``owner`` when set), a row per subscription:
        ``(sid, subscriber, committed seq or None, lag or None, pending messages, pending bytes,
        newest seq)``. Lag is max(0, newest − committed): sequence numbers between the commit
        and the subscription's newest message, 0 when nothing newer was delivered to it (other
        subscriptions' operations do not count), None without a commit; pending and newest as
        ``DeliveryHub.backlog`` (counted since the server started; docs/reference/persistence.md).
        O(subscriptions asked for), the backlog read as one vectorised gather."""
        with self._lock:
            self._check_open()
            seq = self.engine.seq
            wanted = set(subscription_ids)
            for sid in wanted:
                if sid not in self.book:
                    raise NotFound(f"topic {self.name!r} has no subscription {sid}")
            rows = [(sid, meta.subscriber, self.cursors.get(sid))
                    for sid, meta in self.book.select(subscriber, wanted, owner)]
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        pending, nbytes, newest = (a.tolist() for a in self.hub.backlog(ids))
        out = [(sid, name, at, None if at is None else max(0, nw - at), p, b, nw)
               for (sid, name, at), p, b, nw in zip(rows, pending, nbytes, newest, strict=True)]
        return seq, out

    # ---- info -------------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "lateness": self.lateness,
            "retention": self.retention,
            "strategy": self.strategy,
            "max_advance": self.max_advance,
            "seq": self.engine.seq,
        }

    def stats(self) -> dict[str, Any]:
        """Engine stats plus the topic's seq, watermark and listener count, ``delivery``
        (``delivery_stats``) and ``subscribers``: per subscriber name with live subscriptions
        ``(pending messages, pending bytes, largest committed lag or None)``
        (``DeliveryHub.subscriber_backlog``: one vectorised pass; docs/reference/metrics.md)."""
        with self._lock:
            self._check_open()
            st = dict(self.engine.stats())
            st["seq"] = self.engine.seq
            st["watermark"] = self.engine.watermark
            st["listeners"] = len(self.hub.listeners)
        positions = self.cursors.positions()
        st["delivery"] = self.delivery_stats(st["seq"], positions)
        st["subscribers"] = self.hub.subscriber_backlog(positions)
        return st

    def delivery_stats(self, seq: int, positions: dict[int, int] | None = None) -> dict[str, int]:
        """Memory ring, match log and committed cursors in numbers (stats RPC and metrics). A
        committed cursor's lag is max(0, newest seq of its subscription − committed seq), as in
        ``committed``; ``positions``: the committed positions when already read."""
        ring_bytes, ring_messages, _ = self.hub.buffer_stats()
        pos = self.cursors.positions() if positions is None else positions
        n, lag_sum, lag_max = len(pos), 0, 0
        if pos:
            ids = np.fromiter(pos.keys(), dtype=np.int64, count=n)
            at = np.fromiter(pos.values(), dtype=np.int64, count=n)
            lag = np.maximum(self.hub.backlog(ids)[2] - at, 0)
            lag_sum, lag_max = int(lag.sum()), int(lag.max())
        ml = self.durability.match_log
        return {"buffer_bytes": ring_bytes, "buffer_limit_bytes": self.hub.buffer_bytes,
                "buffer_messages": ring_messages,
                "match_log_bytes": ml.bytes if ml is not None else 0,
                "retained_from_seq": ml.retained_from if ml is not None else self.hub.boot_seq + 1,
                "committed_cursors": n, "cursor_lag_sum": lag_sum, "cursor_lag_max": lag_max}

    def close(self, deleted: bool = False) -> None:
        """Stop serving (topic deleted or server stopping): end listeners, close the logs.

        A clean stop first compacts the log when it holds anything but live records.
        """
        if not deleted:
            self.durability.compact_at_shutdown()
        with contextlib.suppress(Exception):
            self.durability.release()
        with self._lock:
            self.durability.stop()
            self._deleted = deleted
            if deleted:
                self.hub.close("NOT_FOUND", f"topic {self.name!r} was deleted")
            else:
                self.hub.close("UNAVAILABLE", "the server is shutting down")
            self.durability.close()
            self.cursors.close()

    # ---- durability ---------------------------------------------------------------------------

    def commit(self, token: int) -> None:
        """Wait until the frame of ``token`` is durable (group commit), then hand every queued
        chunk whose frame is durable to the delivery hub, in sequence order."""
        self.durability.commit(token)

    def compact(self) -> bool:
        """Rewrite the log as snapshot + appends since (``Durability.compact``); False when the
        topic is closed or has no log."""
        return self.durability.compact()

    def checkpoint_now(self) -> bool:
        """Start a checkpoint now (``Durability.checkpoint_now``); False when checkpoints are off
        for this topic or one is running."""
        return self.durability.checkpoint_now()

    # ---- internals --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.durability.closed:
            if not self._deleted:  # shutting down or a failed log: retryable elsewhere/later
                raise Unavailable(f"topic {self.name!r} is not available: the server is shutting "
                                  "down or its log failed")
            raise NotFound(f"topic {self.name!r} was deleted")

    def _auto_id(self, side: str) -> str:
        base = f"auto-{self.engine.seq + 1}"
        eid, k = base, 0
        while self.engine.get_event(side, eid) is not None:
            k += 1
            eid = f"{base}.{k}"
        return eid

    def _write(self, ops: list[pb.LogOp], chunk: Chunk | None,
               hub_update: Callable[[], None] | None = None, n_ops: int | None = None) -> int:
        """Log ``chunk``'s messages, then ``ops`` as one frame, and queue what the hub gets once
        both are durable: ``hub_update``, then the chunk. Call with the topic lock held; returns
        the token to pass to ``commit``. ``n_ops``: as ``Durability.append``.

        When a write fails (ENOSPC, EIO, ...) the batch is undone: both logs are cut back to
        where it began (``Durability.rollback``), the engine and the book are rebuilt from the
        files (``_rebuild_engine``) and the request gets RESOURCE_EXHAUSTED (a full disk) or
        UNAVAILABLE; the next batch simply tries again (docs/reference/persistence.md, "Disk faults")."""
        durability, hub = self.durability, self.hub

        def release() -> None:
            if hub_update is not None:
                hub_update()
            if chunk is not None:
                hub.push(chunk)

        mark = durability.mark()
        try:
            mtoken = 0 if chunk is None else durability.log_matches(chunk)
            return durability.append(ops, release, mtoken, n_ops)
        except OSError as x:
            refused = durability.rollback(mark, x)  # closes the topic when it cannot cut back
            self._rebuild_engine()
            raise refused from x

    def _rebuild_engine(self) -> None:
        """Swap in an engine (and a book) rebuilt from the topic's files, as a restart would read
        them (``Durability.rebuild``: checkpoint + log tail), after a failed write left the old
        engine ahead of the log. Topic lock held. The delivery hub, the committed cursors and the
        listeners stay: they only ever saw durable operations. O(checkpoint + log tail)."""
        self.engine = self.durability.rebuild()


def _chunk(parts: list[OpMatches]) -> Chunk | None:
    """The chunk of a batch's messages, None when no subscription is affected."""
    return Chunk.build(parts) if parts else None


def _check_batch(n: int, limit: int, what: str) -> None:
    if n > limit:
        raise InvalidArgument(f"batch of {n} {what} exceeds the limit of {limit} per request")


def _same_event(stored: Event | None, key: float, value: float, time: int | None,
                payload: bytes, end: int | None = None) -> bool:
    """Whether a rejected duplicate equals the ``stored`` event of its side and id: same key,
    value, payload and end (``end`` None: a point, which equals a stored point only), and the
    same time unless the request carried none (an event sent without a time takes the server's
    clock, so it matches any stored time). ``stored`` None (no longer stored) counts as a
    conflict. O(payload size)."""
    return (stored is not None and stored.key == key and stored.value == value
            and (time is None or stored.time == time) and stored.payload == payload
            and event_end(stored) == end)


def _identical_reason(side: str, eid: str) -> str:
    """The reason of a duplicate equal to its stored event (``EventStatus.identical``)."""
    return f"event {side}/{eid} already exists with the same content (a re-sent event)"


def _count_rejections(topic: str, statuses: list[Status]) -> None:
    """Count a batch's rejected events by reason; identical duplicates (re-sent events) under
    ``duplicate_identical`` (docs/reference/metrics.md)."""
    counts: dict[str, int] = {}
    for st in statuses:
        if st.code != "ok":
            code = "duplicate_identical" if st.identical else st.code
            counts[code] = counts.get(code, 0) + 1
    for code, n in counts.items():
        metrics.EVENTS_REJECTED.labels(topic, code).inc(n)


_CODE_NAMES = {EventStatus.LATE: "late", EventStatus.DUPLICATE: "duplicate",
               EventStatus.INVALID: "invalid", EventStatus.NOT_FOUND: "not_found"}


def _count_rejection_codes(topic: str, status: np.ndarray, identical: int = 0) -> None:
    """``_count_rejections`` for a columnar batch: one counter update per code; ``identical``
    of its duplicates are counted as ``duplicate_identical``."""
    counts = np.bincount(status.astype(np.int64), minlength=len(EventStatus))
    counts[EventStatus.DUPLICATE] -= identical
    for code, name in _CODE_NAMES.items():
        if counts[code]:
            metrics.EVENTS_REJECTED.labels(topic, name).inc(int(counts[code]))
    if identical:
        metrics.EVENTS_REJECTED.labels(topic, "duplicate_identical").inc(identical)


__all__ = ["ColumnsOutcome", "Topic", "Status", "FailedPrecondition"]
