"""One topic: its engine, its total order of operations, its log and its delivery hub (SPEC §3–4).

Every operation on the topic is applied under one lock, in this order: apply to the engine
(which decides ok / late / duplicate / not found and computes who is affected), write the applied
operations to the log as one frame, and queue the resulting messages (one columnar ``Chunk``)
behind the frame's log position. Then, *outside* the lock, the caller waits for its frame to be
durable — group commit: one ``fdatasync`` covers every frame written since the last one, so
concurrent publish streams share syncs while others keep applying — and releases the queued
chunks whose frames are durable to the delivery hub, strictly in sequence order. The lock
therefore defines the topic's sequence, an acknowledgement is sent only after its frame is
durable, and listeners never see a message whose operation could be lost by a crash. A failed
write or sync leaves the engine ahead of the log, so the topic is then closed (``Unavailable``)
rather than diverge; a restart rebuilds it from the log.

Recovery replays the log in sequence order through the engine's batch calls with matching turned
off (``publish_many(match=False)``), which rebuilds the same stored tuples (retention included),
the same subscription ids and the same sequence counter. A compacted log starts with a snapshot
that is restored with the engine's ``restore_*`` calls instead (``server/snapshot.py``).

Topics whose log is never compacted are checkpointed instead (``server/checkpoint.py``): the
pickled engine and metadata at a seq and log offset, so a restart replays only the log's tail;
publish runs of topics without retention are replayed as columns (``restore_event_columns``).

Compaction runs in a background thread once the log holds at least ``compact_min_bytes`` and
``compact_ratio`` times as many operations as there are live records (subscriptions + stored
tuples), and at clean shutdown: the state is copied under the lock, encoded and fsynced outside
it, then — under the lock again — the frames appended meanwhile are copied behind it and the new
file replaces the old one by an atomic rename (``server/PERSISTENCE.md``).
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import ctypes
import logging
import os
import threading
import time
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hotjoin.matcher.errors import (
    BatchError,
    DuplicateEventError,
    LateEventError,
    UnknownEventError,
    UnknownSubscriptionError,
)
from hotjoin.matcher.model import Affected, Event, Matches, Subscription
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server import checkpoint, metrics, snapshot
from hotjoin.server.batch_apply import BatchOutput, EventStatus, apply_publish_batch
from hotjoin.server.convert import (
    MAX_ID_LEN,
    MAX_PAYLOAD,
    EventBatch,
    SubMeta,
    check_event_time,
    decode_columns,
    decode_event,
    decode_id,
    decode_side,
    decode_spec,
    encode_columns,
    encode_spec,
)
from hotjoin.server.cursors import CursorStore
from hotjoin.server.delivery import (
    Chunk,
    DeliveryHub,
    Item,
    Listener,
    MatchBlock,
    OpMatches,
)
from hotjoin.server.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unavailable,
    Unimplemented,
)
from hotjoin.server.log import (
    LogCorruptError,
    OpLog,
    _fsync_dir,
    frame,
    read_batches,
    read_log,
    write_all,
)
from hotjoin.server.match_log import MatchLog
from hotjoin.server.match_log import encode as encode_match_columns
from hotjoin.server.settings import DEFAULT_SETTINGS, TopicSettings

log = logging.getLogger("hotjoin.topic")

MAX_BATCH_EVENTS = 10_000
MAX_SUBSCRIBE_BATCH = 1_000_000
LIST_PAGE_MAX = 10_000
CHECKPOINT_IDLE_SECONDS = 5.0
# While busy, a checkpoint is taken once the log's tail holds BUSY_FACTOR × min_ops operations
# and half as many as the live state (subscriptions + stored tuples): a restart then replays at
# most about half the state's worth of operations after loading the checkpoint, and the
# background encode (O(state)) runs at most once per half-state of operations. (Not "as many as
# the state": when every operation stores a tuple, the tail never catches up with the state.)
# The capture under the lock is a few ms (columns).
CHECKPOINT_BUSY_FACTOR = 2


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the OS (glibc ``malloc_trim``; a no-op elsewhere).

    A restart bulk-builds indexes through many temporaries; without this the process keeps
    their pages (measured in process, 500,000 select joins + 1,000,000 tuples: 1,944 MiB after
    the load, 1,692 MiB after the trim, 1,783 MiB for the engine before the restart)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


@dataclass(frozen=True, slots=True)
class Status:
    """Outcome of one event of a batch: code is ok, late, duplicate, invalid or not_found."""

    code: str
    id: str
    seq: int = 0
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ColumnsOutcome:
    """Outcome of a columnar batch: ``status`` (``EventStatus`` per event, int8) and ``seq``
    (0 where rejected) per event, the reasons of the rejected events, the ids assigned to
    accepted events sent without one, and the batch's consecutive seqs ``first_seq..last_seq``."""

    status: np.ndarray
    seq: np.ndarray
    ids: np.ndarray
    reasons: dict[int, str]
    assigned: dict[int, str]
    first_seq: int
    last_seq: int

    @property
    def accepted(self) -> int:
        return 0 if self.first_seq == 0 else self.last_seq - self.first_seq + 1


class OpColumns:
    """The operation table of a columnar chunk (``Chunk.op_table``) without a tuple per event:
    entry k is ``("publish", sides[k], ids[k], received_ns)``, built on access."""

    __slots__ = ("sides", "ids", "received_ns")

    def __init__(self, sides: np.ndarray, ids: np.ndarray, received_ns: int) -> None:
        self.sides, self.ids, self.received_ns = sides, ids, received_ns

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, k: int) -> tuple[str, str, str, int]:
        return ("publish", self.sides[k], self.ids[k], self.received_ns)

    def __iter__(self) -> Iterator[tuple[str, str, str, int]]:
        return (self[k] for k in range(len(self)))

    def received(self, ops: np.ndarray) -> np.ndarray:
        """Receive times (Unix ns) of rows with operation indexes ``ops``."""
        return np.full(len(ops), self.received_ns, dtype=np.int64)


_SIDE_OF_CODE = np.array(["R", "S"], dtype=object)


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
    ) -> None:
        self.name = name
        self.settings = settings
        self.delivery = settings.delivery
        engine_factory = settings.engine_factory
        sync = settings.sync
        checkpoint_min_ops = settings.checkpoint_min_ops
        self.lateness = lateness
        self.retention = retention
        self.strategy = dict(strategy)
        self.directory = directory
        self.engine = engine_factory(
            lateness=lateness, retention=retention, strategy=self.strategy or "auto"
        )
        self._lock = threading.Lock()
        self._meta: dict[int, SubMeta] = {}
        # Owner principal of each subscription (server/SECURITY.md); only non-empty owners are
        # kept, so a server without --auth-file pays nothing per subscription.
        self._owners: dict[int, str] = {}
        self._owner_counts: collections.Counter[str] = collections.Counter()
        self._affected = np.zeros(1024, dtype=bool)
        self._n_pairs = 0
        self._next_sid = 0
        self._closed = False
        self._deleted = False
        self._log: OpLog | None = None
        self._sync = sync
        self.compact_min_bytes = settings.compact_min_bytes
        self.compact_ratio = settings.compact_ratio
        # Automatic compaction only where the log would otherwise grow without bound (retention
        # set) unless asked for every topic; a topic without retention keeps its full history.
        self._compacts = retention is not None or settings.compact_all
        self.compactions = 0
        # chunks (and hub actions) waiting for their frame to be durable, in seq order
        self._pending: collections.deque[tuple[int, Callable[[], None]]] = collections.deque()
        self._release_lock = threading.Lock()
        self._log_ops = 0  # operations (snapshot records included) in the current log file
        self._compact_lock = threading.Lock()
        self._compacting = False
        # Checkpoints (server/checkpoint.py) bound the replay of topics whose log is never
        # compacted; a compacted log starts with its own snapshot instead.
        self.checkpoint_min_ops = checkpoint_min_ops
        self._checkpoints = directory is not None and not self._compacts and checkpoint_min_ops > 0
        self._ckpt_ops = 0  # log operations since the last checkpoint was started
        self.checkpoint_idle_seconds = CHECKPOINT_IDLE_SECONDS
        self._last_op = 0.0
        self._ckpt_running = False
        self.checkpoints = 0
        self.checkpoint_capture_seconds = 0.0  # topic lock held by the last checkpoint's capture
        self._engine_factory = engine_factory
        if directory is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / "log.compact")  # a compaction interrupted by a crash
            self._log = OpLog(directory / "log", sync=sync)
            if not self._restore_checkpoint(directory):
                self._recover(directory / "log")
                self._ckpt_ops = self._log_ops  # nothing checkpointed: the whole log is the tail
            release_free_memory()  # the rebuild's temporaries: RSS back near the pre-crash level
        self._m_published = metrics.EVENTS_PUBLISHED.labels(name)
        self._m_deleted = metrics.EVENTS_DELETED.labels(name)
        self._m_matches = metrics.MATCHES.labels(name)
        self._m_messages = metrics.MESSAGES.labels(name)
        self._m_to_match = metrics.PUBLISH_TO_MATCH.labels(name)
        self._m_sync = metrics.LOG_SYNC.labels(name)
        self._m_duration = metrics.PUBLISH_DURATION.labels(name)
        self._m_gaps = metrics.GAPS.labels(name)
        self._m_deliveries = metrics.DELIVERIES.labels(name)
        self._m_to_delivery = metrics.PUBLISH_TO_DELIVERY.labels(name)
        # Durable delivery (server/match_log.py): every batch's messages are logged beside the
        # event log, so listeners resume across restarts within the delivery retention; the
        # committed cursors (server/cursors.py) are kept beside them.
        opts = self.delivery
        self.match_log: MatchLog | None = None
        if directory is not None and opts.retention_bytes != 0:
            self.match_log = MatchLog(directory / "matches", self.engine.seq,
                                      retention_bytes=opts.retention_bytes,
                                      retention_ms=opts.retention_ms,
                                      segment_bytes=opts.segment_bytes, sync=sync)
        self.cursors = CursorStore(directory, sync=sync)
        self._retention_checked = time.monotonic()
        self.hub = DeliveryHub(
            settings.buffer_capacity,
            settings.buffer_max_pairs,
            boot_seq=self.engine.seq,
            on_gap=self._m_gaps.inc,
            on_deliver=self._observe_delivery,
            store=self.match_log,
            buffer_bytes=opts.buffer_bytes,
            listener_bytes=opts.listener_bytes,
        )
        if self.match_log is not None:
            self.match_log.on_drop = self.hub.dropped
        owners = self._owners
        self.hub.add_subscriptions(
            (sid, m.subscriber, m.registered_seq, owners.get(sid, "")) for sid, m in self._meta.items()
        )
        if self._checkpoints:
            threading.Thread(target=self._checkpoint_when_idle, name=f"checkpointer-{name}",
                             daemon=True).start()

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
            columnar = self._n_pairs > 0
            publish = engine.publish_columnar if columnar else engine.publish_affected
            for e in events:
                try:
                    side = _SIDES[e.side]
                    eid = e.id
                    if not eid or len(eid) > MAX_ID_LEN:
                        eid = decode_id(eid, allow_empty=True) or self._auto_id(side)
                    payload = e.payload
                    if len(payload) > MAX_PAYLOAD:
                        raise ValueError(f"payload larger than {MAX_PAYLOAD} bytes")
                    # the model validates key, value (finite) and time, with the same messages
                    ev = Event(side, eid, e.key, e.value,
                               check_event_time(e.time) if e.HasField("time") else now_ms, payload)
                except KeyError:
                    statuses.append(Status("invalid", e.id, 0, "side must be R or S"))
                    continue
                except ValueError as x:
                    statuses.append(Status("invalid", e.id, 0, str(x)))
                    continue
                try:
                    out = publish(ev)
                except DuplicateEventError as x:
                    statuses.append(Status("duplicate", eid, 0, str(x)))
                    continue
                except LateEventError as x:
                    statuses.append(Status("late", eid, 0, str(x)))
                    continue
                except ValueError as x:
                    statuses.append(Status("invalid", eid, 0, str(x)))
                    continue
                seq = engine.seq
                statuses.append(Status("ok", eid, seq))
                if e.id and e.HasField("time"):
                    logged = e
                else:
                    logged = pb.Event()
                    logged.CopyFrom(e)
                    logged.id, logged.time = eid, ev.time
                ops.append(pb.LogOp(seq=seq, publish=logged, received_unix_nanos=received_ns))
                if len(out):
                    self._messages(out, seq, 1, "publish", side, eid, received_ns, parts)
            token = 0
            if ops:
                self._m_to_match.observe_many(np.full(len(ops), (time.time_ns() - received_ns) / 1e9))
                token = self._append(ops, self._deliver_action(parts))
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
        side_code = batch.sides.astype(np.int16) - 1  # wire R=1, S=2 -> engine 0, 1
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
            output = "pairs" if self._n_pairs > 0 else "affected"
            whole = take.size == n
            sub = (lambda c: c) if whole else (lambda c: c[take])  # noqa: E731
            res = apply_publish_batch(
                engine, sub(side_code).astype(np.int8), sub(ids), sub(batch.keys), sub(batch.values),
                sub(times), payloads if payloads is None or whole else [payloads[i] for i in take.tolist()],
                output)
            status[take] = res.status
            seq[take] = res.seq
            for j, why in res.reasons.items():
                reasons[int(take[j])] = why
            ok_local = np.flatnonzero(res.status == EventStatus.OK)
            ok = take[ok_local]
            first = last = 0
            token = 0
            if ok.size:
                first, last = int(res.seq[ok_local[0]]), int(res.seq[ok_local[-1]])
                if last - first + 1 != ok.size or first != engine.seq - ok.size + 1:
                    self._closed = True
                    raise Unavailable("engine sequence diverged from the topic's log; topic closed")
                cols = encode_columns(side_code[ok] + 1, ids[ok], batch.keys[ok], batch.values[ok],
                                      times[ok], None if payloads is None else [payloads[i] for i in ok.tolist()])
                op = pb.LogOp(seq=first, publish_columns=cols, received_unix_nanos=received_ns)
                chunk = self._column_chunk(res.output, take, seq, side_code, ids, received_ns)
                self._m_to_match.observe_many(np.full(ok.size, (time.time_ns() - received_ns) / 1e9))
                action = (_nothing if chunk is None
                          else self._deliver_chunk(chunk.seal(first, last)))
                token = self._append([op], action, n_ops=int(ok.size))
                self._m_published.inc(int(ok.size))
        assigned = {i: e for i, e in assigned.items() if status[i] == EventStatus.OK}
        _count_rejection_codes(self.name, status)
        return ColumnsOutcome(status, seq, ids, reasons, assigned, first, last), token

    def _column_chunk(self, out: BatchOutput, take: np.ndarray, seq: np.ndarray, side_code: np.ndarray,
                      ids: np.ndarray, received_ns: int) -> Chunk | None:
        """The delivery chunk of a batch's columnar output: one row per (event, subscription),
        rows in seq order; PAIRS rows carry their pairs, AFFECTED rows only the signed count."""
        m = len(out.event)
        if m == 0:
            return None
        ev = take[out.event]  # batch index of each output row's event
        sids = np.asarray(out.subscription, dtype=np.int64)
        if out.r_id is None:  # affected output: one row per (event, subscription) already
            counts = np.asarray(out.count, dtype=np.int64)
            self._m_matches.inc(int(np.abs(counts).sum()))
            pairs = None
        else:
            self._m_matches.inc(m)
            order = np.lexsort((sids, ev))
            ev, sids = ev[order], sids[order]
            starts = np.flatnonzero(np.r_[True, (ev[1:] != ev[:-1]) | (sids[1:] != sids[:-1])])
            lens = np.diff(np.r_[starts, m])
            sign = np.asarray(out.sign, dtype=np.int64)[order][starts]
            ev, sids, counts = ev[starts], sids[starts], lens * sign
            pairs = {}
            want = np.flatnonzero(~self._affected[sids])
            if want.size:
                r_ids, s_ids = out.r_id[order], out.s_id[order]
                for row in want.tolist():
                    st, ln = int(starts[row]), int(lens[row])
                    pairs[row] = (r_ids[st:st + ln], s_ids[st:st + ln])
        used, op_index = np.unique(ev, return_inverse=True)
        signs = np.where(counts < 0, -1, 1).astype(np.int8)
        table = OpColumns(_SIDE_OF_CODE[side_code[used]], ids[used], received_ns)
        self._m_messages.inc(len(sids))
        return Chunk(sids, seq[ev], signs, np.abs(counts), op_index.astype(np.int32), table,  # type: ignore[arg-type]
                     pairs or None)

    def delete(self, refs: Sequence[pb.EventRef], received_ns: int) -> list[Status]:
        """Delete events in order (SPEC §3 Delete); each gets its own status."""
        _check_batch(len(refs), MAX_BATCH_EVENTS, "events")
        statuses: list[Status] = []
        ops: list[pb.LogOp] = []
        parts: list[OpMatches] = []
        token = 0
        with self._lock:
            self._check_open()
            engine = self.engine
            columnar = self._n_pairs > 0
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
                    self._messages(out, seq, -1, "delete", side, eid, received_ns, parts)
            if ops:
                token = self._append(ops, self._deliver_action(parts))
                self._m_deleted.inc(len(ops))
        self.commit(token)
        _count_rejections(self.name, statuses)
        return statuses

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
                    first = self._next_sid + len(ids)
                    ids.extend(range(first, first + n_applied))
                start = end
            if error is not None and ids and hasattr(engine, "undo_subscribe"):
                engine.undo_subscribe(np.array(ids, dtype=np.int64), seq0)  # all or nothing
                ids = []
            if engine.seq - seq0 != len(ids):
                self._closed = True
                raise Unavailable("engine sequence diverged from the topic's log; topic closed")
            ops: list[pb.LogOp] = []
            out: list[tuple[int, int]] = []
            for k, sid in enumerate(ids):
                sub, affected, snap, subscriber = decoded[k]
                reg = seq0 + 1 + k
                self._register_meta(sid, SubMeta(affected, snap, subscriber, reg), owner)
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
                adds = [(sid, self._meta[sid].subscriber, reg, owner) for sid, reg in out]
                parts: list[OpMatches] = []
                for sid, reg in out:
                    if self._meta[sid].snapshot:
                        self._snapshot_message(sid, reg, received_ns, parts)
                deliver = self._deliver_action(parts)

                def action(adds: Any = adds, deliver: Any = deliver) -> None:
                    self.hub.add_subscriptions(adds)
                    deliver()

                token = self._append(ops, action)
                metrics.SUBSCRIBE_OPS.labels(self.name, "subscribe").inc(len(ops))
        self.commit(token)
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
            if owner is not None and sid in self._meta:
                self._check_owner(sid, owner, "cancel")
            try:
                self.engine.unsubscribe(sid)
            except UnknownSubscriptionError:
                raise NotFound(f"topic {self.name!r} has no subscription {sid}") from None
            seq = self.engine.seq
            self._unregister_meta(sid)
            token = self._append([pb.LogOp(seq=seq, unsubscribe=sid, received_unix_nanos=time.time_ns())],
                                 lambda: self.hub.remove_subscription(sid, seq))
        self.commit(token)
        self.cursors.forget([sid])
        metrics.SUBSCRIBE_OPS.labels(self.name, "unsubscribe").inc()
        return seq

    def list_subscriptions(
        self, subscriber: str, after_id: int | None, page_size: int, owner: str | None = None
    ) -> tuple[list[tuple[int, pb.SubscriptionSpec, int]], bool]:
        """A page of live subscriptions with id > after_id: ``[(id, spec, registered_seq)], more``;
        with ``owner`` set only that owner's subscriptions."""
        size = min(page_size or LIST_PAGE_MAX, LIST_PAGE_MAX)
        owners = self._owners

        def wanted(sid: int) -> bool:
            return ((not subscriber or self._meta[sid].subscriber == subscriber)
                    and (owner is None or owners.get(sid, "") == owner))

        with self._lock:
            self._check_open()
            ids = list(self._meta)
            i = 0 if after_id is None else bisect.bisect_right(ids, after_id)
            page: list[tuple[int, pb.SubscriptionSpec, int]] = []
            while i < len(ids) and len(page) < size:
                sid = ids[i]
                if wanted(sid):
                    meta = self._meta[sid]
                    spec = encode_spec(self.engine.subscription(sid), meta)
                    page.append((sid, spec, meta.registered_seq))
                i += 1
            more = any(wanted(s) for s in ids[i:])
        return page, more

    def owned(self, owner: str) -> int:
        """Live subscriptions of ``owner`` on this topic (O(1); for the subscriptions quota)."""
        return self._owner_counts[owner]

    def owner_of(self, sid: int) -> str | None:
        """The owner of live subscription ``sid`` ("" without auth), None when it does not exist."""
        if sid not in self._meta:
            return None
        return self._owners.get(sid, "")

    def _check_owner(self, sid: int, owner: str, action: str) -> None:
        if self._owners.get(sid, "") != owner:
            self._deny(sid, action)

    def _deny(self, sid: int, action: str) -> None:
        raise PermissionDenied(
            f"subscription {sid} of topic {self.name!r} belongs to another principal; "
            f"to {action} it needs the 'admin' right on the topic", "admin")

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
                if sid not in self._meta and not self.hub.has(sid):
                    raise NotFound(f"topic {self.name!r} has no subscription {sid}")
                if owner is not None:  # a live one, or one unsubscribed but still draining
                    theirs = self.owner_of(sid)
                    if (self.hub.owner_of(sid) if theirs is None else theirs) != owner:
                        self._deny(sid, "listen to")
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
                for sid, meta in self._meta.items():
                    if meta.subscriber == subscriber and (owner is None
                                                          or self._owners.get(sid, "") == owner):
                        pairs[sid] = after_seq
            for sid, at in cursors.items():
                if sid not in self._meta:
                    raise NotFound(f"topic {self.name!r} has no subscription {sid}")
                if owner is not None:
                    self._check_owner(sid, owner, "commit a cursor of")
                pairs[sid] = at
            for sid, at in pairs.items():
                if at > seq:
                    raise InvalidArgument(f"cursor {at} of subscription {sid} is beyond the "
                                          f"topic's sequence {seq}")
            if not pairs and not subscriber:
                raise InvalidArgument("commit needs cursors, or a subscriber and after_seq")
            token = self._log.written if self._log is not None else 0
        out = sorted(pairs.items())
        try:
            if token:  # the operations up to ``seq`` are durable before a cursor may point at them
                self._log.sync_upto(token)  # type: ignore[union-attr]
            self.cursors.commit(out)
        except OSError as x:
            raise Unavailable(f"topic {self.name!r}: cannot make the cursors durable ({x})") from x
        return out

    def committed(self, subscriber: str = "", subscription_ids: Sequence[int] = (),
                  owner: str | None = None) -> tuple[int, list[tuple[int, str, int | None]]]:
        """``(topic seq, [(sid, subscriber, committed seq or None)])`` of the live subscriptions
        asked for (all when neither ``subscriber`` nor ids are given; of ``owner`` when set)."""
        with self._lock:
            self._check_open()
            seq = self.engine.seq
            wanted = set(subscription_ids)
            for sid in wanted:
                if sid not in self._meta:
                    raise NotFound(f"topic {self.name!r} has no subscription {sid}")
            out = []
            for sid, meta in self._meta.items():
                mine = bool(subscriber) and meta.subscriber == subscriber
                if (wanted or subscriber) and sid not in wanted and not mine:
                    continue
                if owner is not None and self._owners.get(sid, "") != owner:
                    continue
                out.append((sid, meta.subscriber, self.cursors.get(sid)))
        return seq, out

    # ---- info -------------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "lateness": self.lateness,
            "retention": self.retention,
            "strategy": self.strategy,
            "seq": self.engine.seq,
        }

    def stats(self) -> dict[str, Any]:
        """Engine stats plus the topic's seq, watermark and listener count."""
        with self._lock:
            self._check_open()
            st = dict(self.engine.stats())
            st["seq"] = self.engine.seq
            st["watermark"] = self.engine.watermark
            st["listeners"] = len(self.hub.listeners)
        st["delivery"] = self.delivery_stats(st["seq"])
        return st

    def delivery_stats(self, seq: int) -> dict[str, int]:
        """Memory ring, match log and committed cursors in numbers (stats RPC and metrics)."""
        ring_bytes, ring_messages, _ = self.hub.buffer_stats()
        n, lag_sum, lag_max = self.cursors.summary(seq)
        ml = self.match_log
        return {"buffer_bytes": ring_bytes, "buffer_limit_bytes": self.hub.buffer_bytes,
                "buffer_messages": ring_messages,
                "match_log_bytes": ml.bytes if ml is not None else 0,
                "retained_from_seq": ml.retained_from if ml is not None else self.hub.boot_seq + 1,
                "committed_cursors": n, "cursor_lag_sum": lag_sum, "cursor_lag_max": lag_max}

    def close(self, deleted: bool = False) -> None:
        """Stop serving (topic deleted or server stopping): end listeners, close the log.

        A clean stop first compacts the log when it holds anything but live records.
        """
        if not deleted and self._log is not None and self.compact_ratio > 0 and self._compacts:
            with self._lock:
                worth = not self._closed and self._log_ops > self._live_records()
            if worth:
                try:
                    self.compact()
                except Exception:  # the old log is intact; never fail a shutdown on this
                    log.exception("topic %r: compaction at shutdown failed", self.name)
        with contextlib.suppress(Exception):
            self._release()
        with self._lock:
            self._closed = True
            self._deleted = deleted
            if deleted:
                self.hub.close("NOT_FOUND", f"topic {self.name!r} was deleted")
            else:
                self.hub.close("UNAVAILABLE", "the server is shutting down")
            if self._log is not None:
                # every frame written is made durable first, so the batches whose commit is
                # waiting are acknowledged; the close holds sync_lock so that no sync runs on a
                # closed descriptor (the fdatasync traceback of issue 16). The match log's records
                # precede their frames, so it is synced first.
                if self.match_log is not None:
                    with contextlib.suppress(OSError, ValueError):
                        self.match_log.sync_upto(self.match_log.written)
                with contextlib.suppress(OSError, ValueError):
                    self._log.sync_upto(self._log.written)
                with self._log.sync_lock:
                    self._log.close()
            if self.match_log is not None:
                self.match_log.close()
            self.cursors.close()

    # ---- internals --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            if not self._deleted:  # shutting down or a failed log: retryable elsewhere/later
                raise Unavailable(f"topic {self.name!r} is not available: the server is shutting "
                                  "down or its log failed")
            raise NotFound(f"topic {self.name!r} was deleted")

    def _append(self, ops: list[pb.LogOp], action: Callable[[], None] | None = None,
                n_ops: int | None = None) -> int:
        """Write ``ops`` as one frame (no sync) and queue ``action`` (hub updates) behind it.

        ``n_ops``: the operations the frame holds when not ``len(ops)`` (a columnar publish op
        holds a whole batch). Call with the topic lock held; returns the token to pass to
        ``commit``.
        """
        n_ops = len(ops) if n_ops is None else n_ops
        token = 0
        if self._log is not None:
            try:
                token = self._log.write(frame(pb.LogBatch(ops=ops).SerializeToString()))
            except OSError as x:
                self._closed = True
                raise Unavailable(f"topic {self.name!r}: log write failed ({x}); topic closed") from x
            self._log_ops += n_ops
            self._ckpt_ops += n_ops
            self._last_op = time.monotonic()
            if self.match_log is not None and self._last_op - self._retention_checked > 1.0:
                self._retention_checked = self._last_op
                self.match_log.enforce_retention()  # retention.ms (bytes: at each segment roll)
            if (self._checkpoints and not self._ckpt_running
                    and self._ckpt_ops >= max(CHECKPOINT_BUSY_FACTOR * self.checkpoint_min_ops,
                                              self._live_records() // 2)):
                self._start_checkpoint()  # the replay tail would be long: even while busy
            if (self.compact_ratio > 0 and self._compacts and not self._compacting
                    and self._log.size >= self.compact_min_bytes
                    and self._log_ops >= self.compact_ratio * max(self._live_records(), 1)):
                self._compacting = True
                threading.Thread(target=self._compact_in_background, name=f"compact-{self.name}",
                                 daemon=True).start()
        if action is not None:
            self._pending.append((token, action))
        return token

    def _start_checkpoint(self) -> None:
        """Copy the state as columns (topic lock held: it is the state at this seq; a few ms) and
        encode and write it in the background (``server/checkpoint.py``)."""
        assert self._log is not None and self.directory is not None
        t0 = time.perf_counter()
        try:
            image = checkpoint.capture(self.engine, self._meta, self._owners, self._next_sid,
                                       self._log_ops)
        except Exception:
            log.exception("topic %r: cannot capture the state as columns; checkpoints disabled",
                          self.name)
            self._checkpoints = False
            return
        offset = self._log.size
        held = time.perf_counter() - t0
        self.checkpoint_capture_seconds = held
        self._ckpt_running = True
        self._ckpt_ops = 0
        directory, path = self.directory, self._log.path

        def write() -> None:
            try:
                payload = checkpoint.encode(image)
                checkpoint.write(directory, payload, image.seq, offset, path)
                self.checkpoints += 1
                metrics.CHECKPOINTS.labels(self.name).inc()
                metrics.CHECKPOINT_DURATION.labels(self.name).observe(time.perf_counter() - t0)
                log.info("topic %r: checkpoint at seq %d (%d MiB): captured in %.3fs under the lock, "
                         "written in %.1fs", self.name, image.seq, len(payload) >> 20, held,
                         time.perf_counter() - t0 - held)
            except Exception:
                log.exception("topic %r: checkpoint write failed", self.name)
            finally:
                self._ckpt_running = False

        threading.Thread(target=write, name=f"checkpoint-{self.name}", daemon=True).start()

    def checkpoint_now(self) -> bool:
        """Start a checkpoint now (the capture holds the topic lock a few ms; the write runs in
        the background). False when checkpoints are off for this topic or one is running."""
        with self._lock:
            if self._closed or not self._checkpoints or self._ckpt_running:
                return False
            self._start_checkpoint()
            return self._ckpt_running

    def _checkpoint_when_idle(self) -> None:
        """Take a checkpoint once ``checkpoint_min_ops`` operations were logged since the last one
        and the topic has been idle for ``checkpoint_idle_seconds`` (publishers wait while the
        state is pickled, so a long quiet moment is the cheap time for it)."""
        while not self._closed:
            time.sleep(min(self.checkpoint_idle_seconds / 2, 1.0))
            if (self._ckpt_running or self._ckpt_ops < self.checkpoint_min_ops
                    or time.monotonic() - self._last_op < self.checkpoint_idle_seconds):
                continue
            with self._lock:
                if (not self._closed and not self._ckpt_running
                        and self._ckpt_ops >= self.checkpoint_min_ops):
                    self._start_checkpoint()

    def _restore_checkpoint(self, directory: Path) -> bool:
        """Load ``directory/checkpoint`` and replay the log after it; False: replay everything.

        The engine's indexes are bulk-built from the checkpoint's columns (not unpickled)."""
        if not self._checkpoints:
            checkpoint.remove(directory)
            return False
        t0 = time.perf_counter()
        try:
            got = checkpoint.read(directory)
            if got is None:
                return False
            seq, offset, image = got
            self.engine.load_state(checkpoint.engine_state(image))
            for sid, meta in image.meta.items():
                self._register_meta(sid, meta, image.owners.get(sid, ""))
            self._next_sid = max(self._next_sid, image.next_sid)
            self._log_ops = image.log_ops
            loaded = time.perf_counter() - t0
            self._recover(directory / "log", start=(offset, seq))
            self._ckpt_ops = self._log_ops - image.log_ops  # the tail a restart would replay again
        except Exception:
            log.exception("topic %r: checkpoint unusable; replaying the whole log", self.name)
            self.engine = self._engine_factory(lateness=self.lateness, retention=self.retention,
                                               strategy=self.strategy or "auto")
            self._meta = {}
            self._owners = {}
            self._owner_counts = collections.Counter()
            self._affected = np.zeros(1024, dtype=bool)
            self._n_pairs = 0
            self._next_sid = 0
            self._log_ops = 0
            return False
        log.info("topic %r: restored checkpoint at seq %d in %.1fs, replayed the log to seq %d "
                 "in %.1fs", self.name, seq, loaded, self.engine.seq, time.perf_counter() - t0 - loaded)
        return True

    def commit(self, token: int) -> None:
        """Wait until the frame of ``token`` is durable (group commit), then hand every queued
        chunk whose frame is durable to the delivery hub, in sequence order."""
        log_ = self._log
        if log_ is not None and token:
            t0 = time.perf_counter()
            try:
                # the match log's records were written before the frame; both are synced (the
                # match log first) before anything is acknowledged. Syncing them in parallel in a
                # helper thread measured no better: under load the thread hand-offs wait for the GIL
                ml = self.match_log
                if ml is not None:
                    ml.sync_upto(ml.written)
                log_.sync_upto(token)
            except (OSError, ValueError) as x:
                if self._closed:
                    raise Unavailable(f"topic {self.name!r}: the server is shutting down; the "
                                      "batch may or may not be durable (a retry is safe)") from None
                self._closed = True
                raise Unavailable(f"topic {self.name!r}: log sync failed ({x}); topic closed") from x
            self._m_sync.observe(time.perf_counter() - t0)
        self._release()

    def _release(self) -> None:
        pending = self._pending
        if not pending:
            return
        with self._release_lock:
            log_ = self._log
            ml = self.match_log
            while pending:
                token, action = pending[0]
                if log_ is not None and token > log_.durable:
                    break
                if ml is not None and getattr(action, "mtoken", 0) > ml.durable:
                    break
                pending.popleft()
                action()

    def _deliver_action(self, parts: list[OpMatches]) -> Callable[[], None]:
        """Build the batch's chunk and, with a match log, write it there (before the batch's
        frame goes to the event log: call with the topic lock held, before ``_append``)."""
        if not parts:
            return _nothing
        return self._deliver_chunk(Chunk.build(parts))

    def _deliver_chunk(self, chunk: Chunk) -> Callable[[], None]:
        """``_deliver_action`` for a chunk already built (the columnar publish path)."""
        hub = self.hub
        mtoken = 0
        if self.match_log is not None:
            try:
                mtoken = self.match_log.append(chunk.first_seq, chunk.last_seq,
                                               encode_match_columns(chunk.columns()))
            except OSError as x:
                self._closed = True
                raise Unavailable(f"topic {self.name!r}: match log write failed ({x}); "
                                  "topic closed") from x

        def deliver() -> None:
            hub.push(chunk)

        deliver.mtoken = mtoken  # type: ignore[attr-defined]
        return deliver

    def _live_records(self) -> int:
        """Live subscriptions plus stored tuples (what a snapshot would hold)."""
        return len(self._meta) + snapshot.stored_count(self.engine)

    def _compact_in_background(self) -> None:
        try:
            self.compact()
        except Exception:
            log.exception("topic %r: compaction failed; the old log stays in use", self.name)
        finally:
            self._compacting = False

    def compact(self) -> bool:
        """Rewrite the log as snapshot + appends since; atomic (temp file, fsync, rename, fsync dir).

        Publishers wait only while the state is copied and while the frames appended during the
        encoding are copied behind the snapshot. Returns False when the topic is closed.
        """
        if self._log is None or self.directory is None:
            return False
        path, tmp = self.directory / "log", self.directory / "log.compact"
        with self._compact_lock:
            t0 = time.perf_counter()
            with self._lock:
                if self._closed:
                    return False
                state = snapshot.capture(self.engine, self._meta, self.lateness, self._owners)
                offset, ops_at = self._log.size, self._log_ops
            head = snapshot.snapshot_bytes(state)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                write_all(fd, head)
                os.fsync(fd)
                with self._lock:
                    if self._closed:
                        return False
                    with open(path, "rb") as f:
                        f.seek(offset)
                        tail = f.read(self._log.size - offset)
                    write_all(fd, tail)
                    os.fsync(fd)
                    os.close(fd)
                    fd = -1
                    with self._log.sync_lock:
                        os.replace(tmp, path)
                        _fsync_dir(self.directory)
                        self._log.reopen(path, len(head) + len(tail))
                    self._log_ops = state.n_ops + self._log_ops - ops_at
            finally:
                if fd >= 0:
                    os.close(fd)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            self.compactions += 1
            metrics.COMPACTIONS.labels(self.name).inc()
            metrics.COMPACTION_DURATION.labels(self.name).observe(time.perf_counter() - t0)
            log.info("topic %r: compacted log to %d bytes (%d subscriptions, %d tuples) in %.2fs",
                     self.name, len(head) + len(tail), len(state.subs),
                     state.n_ops - len(state.subs), time.perf_counter() - t0)
            return True

    def _auto_id(self, side: str) -> str:
        base = f"auto-{self.engine.seq + 1}"
        eid, k = base, 0
        while self.engine.get_event(side, eid) is not None:
            k += 1
            eid = f"{base}.{k}"
        return eid

    def _register_meta(self, sid: int, meta: SubMeta, owner: str = "") -> None:
        self._meta[sid] = meta
        if owner:
            self._owners[sid] = owner
        self._owner_counts[owner] += 1
        self._next_sid = max(self._next_sid, sid + 1)
        if sid >= len(self._affected):
            grown = np.zeros(max(2 * len(self._affected), sid + 1), dtype=bool)
            grown[: len(self._affected)] = self._affected
            self._affected = grown
        self._affected[sid] = meta.affected
        if not meta.affected:
            self._n_pairs += 1

    def _unregister_meta(self, sid: int) -> None:
        meta = self._meta.pop(sid)
        owner = self._owners.pop(sid, "")
        self._owner_counts[owner] -= 1
        if self._owner_counts[owner] <= 0:
            del self._owner_counts[owner]
        if not meta.affected:
            self._n_pairs -= 1

    def _messages(
        self,
        out: Matches | Affected,
        seq: int,
        sign: int,
        op: str,
        side: str,
        eid: str,
        received_ns: int,
        sink: list[OpMatches],
    ) -> None:
        """One operation's engine output as one part of a chunk: a row per affected subscription."""
        n = len(out)
        if n == 0:
            return
        if isinstance(out, Affected):
            counts = out.counts
            self._m_matches.inc(int(np.abs(counts).sum()))
            self._m_messages.inc(n)
            sink.append(OpMatches(seq, sign, op, side, eid, received_ns, out.subscription_ids, counts))
            return
        self._m_matches.inc(n)
        sids = out.subscription_ids
        order = np.argsort(sids, kind="stable")
        uniq, starts, counts = np.unique(sids[order], return_index=True, return_counts=True)
        pairs: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        aff = self._affected
        wanted = ~aff[uniq]
        want = np.flatnonzero(wanted)
        flat = None
        if want.size:
            r_ids, s_ids = out.r_ids[order], out.s_ids[order]
            for row in want.tolist():
                st, c = int(starts[row]), int(counts[row])
                pairs[row] = (r_ids[st : st + c], s_ids[st : st + c])
            if want.size == uniq.size:  # the same pairs as two arrays, for the match log
                flat = (want, r_ids, s_ids)
            else:
                m = np.repeat(wanted, counts)
                flat = (want, r_ids[m], s_ids[m])
        sink.append(OpMatches(seq, sign, op, side, eid, received_ns, uniq, counts * sign, pairs or None, flat))
        self._m_messages.inc(len(uniq))

    def _snapshot_message(self, sid: int, seq: int, received_ns: int, sink: list[OpMatches]) -> None:
        res = self.engine.result_columnar(sid)
        if len(res) == 0:
            return
        pairs = None if self._affected[sid] else {0: (res.r_ids, res.s_ids)}
        sink.append(OpMatches(seq, 1, "snapshot", "", "", received_ns, np.array([sid], dtype=np.int64),
                              np.array([len(res)], dtype=np.int64), pairs))

    def _observe_delivery(self, items: list[Item]) -> None:
        now = time.time_ns()
        n = 0
        for it in items:
            if isinstance(it, MatchBlock):
                n += len(it)
                table = it.op_table
                if isinstance(table, OpColumns):
                    rns = table.received(it.ops)
                else:
                    rns = np.array([o[3] for o in table], dtype=np.int64)[it.ops]
                self._m_to_delivery.observe_many((now - rns) / 1e9)
        if n:
            self._m_deliveries.inc(n)

    def _recover(self, path: Path, start: tuple[int, int] | None = None) -> None:
        """Rebuild engine state and subscription metadata by replaying the log (no matching)."""
        engine = self.engine
        events: list[Event] = []
        subs: list[tuple[pb.LogOp, Subscription, SubMeta]] = []  # op.subscribe.owner: "" in old logs
        last_seq = 0
        # Without retention a run of logged publishes leaves exactly its tuples stored (each was
        # accepted when logged: new id, not late), so the run is loaded as columns at once.
        columnar = self.retention is None and hasattr(engine, "restore_event_columns")
        # numbers go straight into typed arrays: no float/int object per replayed event outlives
        # its frame (a million of them would fragment the heap around the ids that stay)
        cols: dict[str, tuple[list[str], array, array, array, array, list[bytes]]] = {
            side: ([], array("d"), array("d"), array("q"), array("q"), []) for side in ("R", "S")}
        run = {"seq": 0, "max_time": None, "n": 0}

        def flush_events() -> None:
            if events:
                engine.publish_many(events, match=False)
                events.clear()
            if run["n"]:
                for side, (ids, keys, values, times, seqs, pays) in cols.items():
                    if ids:
                        engine.restore_event_columns(
                            side, ids, np.frombuffer(keys, dtype=np.float64).copy(),
                            np.frombuffer(values, dtype=np.float64).copy(),
                            np.frombuffer(times, dtype=np.int64).copy(),
                            np.frombuffer(seqs, dtype=np.int64).copy(), pays if any(pays) else None)
                    ids.clear()
                    pays.clear()
                    for a in (keys, values, times, seqs):
                        del a[:]
                old = engine.watermark
                old_max = None if old is None else old + engine.lateness
                mt = run["max_time"] if old_max is None else max(old_max, run["max_time"])
                engine.restore_clock(run["seq"], mt)
                run.update(seq=0, max_time=None, n=0)

        def flush_subs() -> None:
            i = 0
            while i < len(subs):
                snap = subs[i][2].snapshot
                j = i
                while j < len(subs) and subs[j][2].snapshot == snap:
                    j += 1
                ids = engine.subscribe_many([s[1] for s in subs[i:j]], snapshot=snap)
                for (op, _, meta), sid in zip(subs[i:j], ids, strict=True):
                    if sid != op.subscribe.subscription_id:
                        raise LogCorruptError(
                            f"replay gave subscription id {sid}, log says {op.subscribe.subscription_id}"
                        )
                    self._register_meta(sid, meta, op.subscribe.owner)
                i = j
            subs.clear()

        if start is not None:  # after a checkpoint: the frames from its offset on
            header, batches = None, read_batches(path, start[0])
            last_seq = start[1]
        else:
            header, batches = read_log(path)
        if header is not None:
            snapshot.restore(engine, header, batches, self._register_meta)
            self._next_sid = max(self._next_sid, int(header["next_subscription_id"]))
            last_seq = int(header["seq"])
            self._log_ops = int(header["subscriptions"]) + int(header["tuples"])
        for batch in batches:
            self._log_ops += len(batch.ops)
            for op in batch.ops:
                kind = op.WhichOneof("op")
                if kind != "publish":
                    flush_events()
                if kind != "subscribe":
                    flush_subs()
                if kind == "publish" and columnar:
                    e = op.publish
                    c = cols["R" if e.side == pb.SIDE_R else "S"]
                    c[0].append(e.id)
                    c[1].append(e.key)
                    c[2].append(e.value)
                    c[3].append(e.time)
                    c[4].append(op.seq)
                    c[5].append(e.payload)
                    mt = run["max_time"]
                    if mt is None or e.time > mt:
                        run["max_time"] = e.time
                    run["seq"] = op.seq
                    run["n"] += 1
                elif kind == "publish":
                    e = op.publish
                    events.append(decode_event(e, e.id, e.time))
                elif kind == "subscribe":
                    sub, affected, snap, subscriber = decode_spec(op.subscribe.spec)
                    subs.append((op, sub, SubMeta(affected, snap, subscriber, op.seq)))
                elif kind == "publish_columns":
                    n_batch = self._replay_columns(op)
                    self._log_ops += n_batch - 1
                elif kind == "delete":
                    engine.delete(decode_side(op.delete.side), op.delete.id, match=False)
                elif kind == "unsubscribe":
                    engine.unsubscribe(op.unsubscribe)
                    self._unregister_meta(op.unsubscribe)
                if start is not None and op.seq != last_seq + 1:
                    raise LogCorruptError(f"log after the checkpoint: seq {op.seq} follows {last_seq}")
                last_seq = engine.seq if kind == "publish_columns" else op.seq
        flush_events()
        flush_subs()
        if engine.seq != last_seq:
            raise LogCorruptError(
                f"topic {self.name!r}: replay reached seq {engine.seq}, log ends at {last_seq}"
            )

    def _replay_columns(self, op: pb.LogOp) -> int:
        """Re-apply a columnar publish frame (state only, ``output="none"``); every event was
        accepted when logged, so each must be accepted again at seqs ``op.seq, op.seq + 1, ...``."""
        b = decode_columns(op.publish_columns)
        n = len(b)
        if b.times is None:
            raise LogCorruptError(f"columnar publish at seq {op.seq} without times")
        if self.engine.seq != op.seq - 1:
            raise LogCorruptError(f"columnar publish at seq {op.seq} follows seq {self.engine.seq}")
        res = apply_publish_batch(self.engine, (b.sides.astype(np.int16) - 1).astype(np.int8), b.ids,
                                  b.keys, b.values, b.times, b.payloads, "none")
        bad = np.flatnonzero(res.status != EventStatus.OK)
        if bad.size or self.engine.seq != op.seq + n - 1:
            why = res.reasons.get(int(bad[0]), "") if bad.size else f"engine at seq {self.engine.seq}"
            raise LogCorruptError(f"columnar publish at seq {op.seq} does not replay: {why}")
        return n

    def iter_log(self) -> Iterator[pb.LogBatch]:
        """The durable log, frame by frame (for export)."""
        if self.directory is None:
            return iter(())
        return read_batches(self.directory / "log")


_SIDES = {pb.SIDE_R: "R", pb.SIDE_S: "S"}


def _nothing() -> None:
    pass


def _check_batch(n: int, limit: int, what: str) -> None:
    if n > limit:
        raise InvalidArgument(f"batch of {n} {what} exceeds the limit of {limit} per request")


def _count_rejections(topic: str, statuses: list[Status]) -> None:
    counts: dict[str, int] = {}
    for st in statuses:
        if st.code != "ok":
            counts[st.code] = counts.get(st.code, 0) + 1
    for code, n in counts.items():
        metrics.EVENTS_REJECTED.labels(topic, code).inc(n)


_CODE_NAMES = {EventStatus.LATE: "late", EventStatus.DUPLICATE: "duplicate",
               EventStatus.INVALID: "invalid", EventStatus.NOT_FOUND: "not_found"}


def _count_rejection_codes(topic: str, status: np.ndarray) -> None:
    """``_count_rejections`` for a columnar batch: one counter update per code."""
    counts = np.bincount(status.astype(np.int64), minlength=len(EventStatus))
    for code, name in _CODE_NAMES.items():
        if counts[code]:
            metrics.EVENTS_REJECTED.labels(topic, name).inc(int(counts[code]))


__all__ = ["ColumnsOutcome", "Topic", "Status", "FailedPrecondition"]
