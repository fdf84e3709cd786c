"""Recovery: a topic's engine and subscription book rebuilt from its event log after a restart.

The log is replayed in sequence order through the engine's batch calls with matching turned off
(``publish_many(match=False)``, ``subscribe_many``, ``delete(match=False)``, ``unsubscribe``),
which rebuilds the same stored tuples (retention included), the same subscription ids and the
same sequence counter; a replay that does not end at the log's last seq is ``LogCorruptError``.
A compacted log starts with a snapshot that is loaded as the engine's state instead
(``server/snapshot.py``); after a checkpoint (``server/checkpoint.py``) only the frames from its
offset on are replayed. Without retention a run of logged publishes leaves exactly its tuples
stored (each was accepted when logged: new id, not late), so the run is loaded as columns at once
(``restore_event_columns``, then ``restore_clock``). Every engine call is a member of the engine
contract (``hotjoin.matcher.contract.TopicEngine``). ``docs/reference/persistence.md`` has the formats.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hotjoin.matcher.contract import TopicEngine
from hotjoin.matcher.model import Event, Subscription
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server import snapshot
from hotjoin.server.batch_apply import EventStatus, apply_publish_batch
from hotjoin.server.book import SubscriptionBook
from hotjoin.server.convert import (
    LoggedColumns,
    SubMeta,
    decode_columns,
    decode_event,
    decode_side,
    decode_spec,
    preset_of,
)
from hotjoin.server.log import LogCorruptError, read_batches, read_log


class LogReplay:
    """One replay of one topic's log into ``engine`` and ``book`` (no matching, no delivery).

    Consecutive operations of one kind are applied as one batch call; ``run`` returns the number
    of operations the log holds (snapshot records included), which the compaction and checkpoint
    thresholds count from.
    """

    def __init__(self, topic: str, engine: TopicEngine, book: SubscriptionBook,
                 retention: int | None) -> None:
        self.topic = topic
        self.engine = engine
        self.book = book
        self._columnar = retention is None  # runs of publishes load as columns (module docstring)
        self._events: list[Event] = []
        self._columns = LoggedColumns()
        self._subs: list[tuple[pb.LogOp, Subscription, SubMeta]] = []  # op.subscribe.owner: "" in old logs

    def run(self, path: Path, start: tuple[int, int] | None = None, log_ops: int = 0) -> int:
        """Replay the log at ``path``; ``start``: ``(offset, seq)`` of a checkpoint already loaded
        (only the frames from ``offset`` on, which must continue at ``seq + 1``), ``log_ops``: the
        operations before it. Returns the operations of the whole log."""
        engine = self.engine
        if start is not None:
            header, batches = None, read_batches(path, start[0])
            last_seq = start[1]
        else:
            header, batches = read_log(path)
            last_seq = 0
        if header is not None:
            snapshot.restore(engine, header, batches, self.book.register)
            self.book.reserve(int(header["next_subscription_id"]))
            last_seq = int(header["seq"])
            log_ops = int(header["subscriptions"]) + int(header["tuples"])
        for batch in batches:
            log_ops += len(batch.ops)
            for op in batch.ops:
                kind = op.WhichOneof("op")
                if kind not in ("publish", "publish_columns"):
                    self._flush_events()
                if kind != "subscribe":
                    self._flush_subs()
                if kind == "publish" and self._columnar:
                    self._columns.add(op.publish, op.seq)
                elif kind == "publish":
                    self._events.append(decode_event(op.publish, op.publish.time))
                elif kind == "subscribe":
                    sub, affected, snap, subscriber = decode_spec(op.subscribe.spec)
                    self._subs.append((op, sub, SubMeta(affected, snap, subscriber, op.seq,
                                                        preset_of(sub))))
                elif kind == "publish_columns":
                    log_ops += self._replay_columns(op) - 1
                elif kind == "delete":
                    engine.delete(decode_side(op.delete.side), op.delete.id, match=False)
                elif kind == "unsubscribe":
                    engine.unsubscribe(op.unsubscribe)
                    self.book.unregister(op.unsubscribe)
                if start is not None and op.seq != last_seq + 1:
                    raise LogCorruptError(f"log after the checkpoint: seq {op.seq} follows {last_seq}")
                if kind == "publish_columns":
                    last_seq = op.seq + len(op.publish_columns.ids) - 1
                else:
                    last_seq = op.seq
        self._flush_events()
        self._flush_subs()
        if engine.seq != last_seq:
            raise LogCorruptError(
                f"topic {self.topic!r}: replay reached seq {engine.seq}, log ends at {last_seq}"
            )
        return log_ops

    def _flush_events(self) -> None:
        engine = self.engine
        if self._events:
            engine.publish_many(self._events, match=False)
            self._events.clear()
        cols = self._columns
        if not cols.n:
            return
        seq, run_max = cols.last_seq, cols.max_time
        for side, *columns, ends in cols.take():
            if ends is None:  # points only: the call as before interval events existed
                engine.restore_event_columns(side, *columns)
            else:
                engine.restore_event_columns(side, *columns, ends=ends)
        old = engine.watermark
        old_max = None if old is None else old + engine.lateness
        engine.restore_clock(seq, run_max if old_max is None else max(old_max, run_max))  # type: ignore[type-var]

    def _flush_subs(self) -> None:
        subs = self._subs
        i = 0
        while i < len(subs):
            snap = subs[i][2].snapshot
            j = i
            while j < len(subs) and subs[j][2].snapshot == snap:
                j += 1
            ids = self.engine.subscribe_many([s[1] for s in subs[i:j]], snapshot=snap)
            for (op, _, meta), sid in zip(subs[i:j], ids, strict=True):
                if sid != op.subscribe.subscription_id:
                    raise LogCorruptError(
                        f"replay gave subscription id {sid}, log says {op.subscribe.subscription_id}"
                    )
                self.book.register(sid, meta, op.subscribe.owner)
            i = j
        subs.clear()

    def _replay_columns(self, op: pb.LogOp) -> int:
        """Re-apply a columnar publish frame (state only); every event was accepted when logged,
        so each must be accepted again at seqs ``op.seq, op.seq + 1, ...``. Without retention the
        frame joins the run of logged publishes loaded as columns at once (as single publishes
        do); with retention it goes through ``publish_batch`` (``output="none"``), which expires
        what the moving watermark drops."""
        engine = self.engine
        b = decode_columns(op.publish_columns)
        n = len(b)
        if b.times is None:
            raise LogCorruptError(f"columnar publish at seq {op.seq} without times")
        if self._columnar:
            cols = self._columns
            before = cols.last_seq if cols.n else engine.seq
            if op.seq != before + 1:
                raise LogCorruptError(f"columnar publish at seq {op.seq} follows seq {before}")
            cols.add_columns(b, op.seq)
            return n
        self._flush_events()
        if engine.seq != op.seq - 1:
            raise LogCorruptError(f"columnar publish at seq {op.seq} follows seq {engine.seq}")
        res = apply_publish_batch(engine, b.side_codes().astype(np.int8), b.ids,
                                  b.keys, b.values, b.times, b.payloads, "none", b.ends)
        bad = np.flatnonzero(res.status != EventStatus.OK)
        if bad.size or engine.seq != op.seq + n - 1:
            why = res.reasons.get(int(bad[0]), "") if bad.size else f"engine at seq {engine.seq}"
            raise LogCorruptError(f"columnar publish at seq {op.seq} does not replay: {why}")
        return n
