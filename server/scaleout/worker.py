"""One scale-out worker: a ``hotjoin.matcher.Engine`` applying batches of operations (docs/how-to/scale-out.md).

``ShardWorker`` is a plain class (no Ray import) so it can be tested in-process; the facade in
``hotjoin.server.scaleout.engine`` runs it as a Ray actor. A worker is one *subscription shard*: it
stores every tuple of the topic and a subset of its subscriptions, and applies the same operation
sequence as every other shard with the same sequence numbers. An operation carries the topic-wide
sequence number it takes; operations the shard does not see (another shard's subscribe or
unsubscribe) are skipped over with ``Engine.advance_clock``, so a pair forms at the same sequence
number, and the same lateness and retention decisions are taken, on every shard as in the single
engine (docs/how-to/scale-out.md). Under the key-partitioned scheme (``key_engine``) a worker instead holds every
subscription and the tuples of its keys; it gets its events already admitted by the front end,
each with its topic sequence number and clock (``PUBLISH_ADMITTED``), and an ``ADVANCE`` to the
topic's clock before other operations. The matching itself is the unchanged engine: no second
implementation.

Operations are tuples ``(kind, seq, *args)``; a batch crosses to the worker in one call and each
operation's result (or the engine error it raised, which changed nothing) comes back in order.
"""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hotjoin.matcher.engine import Engine
from hotjoin.matcher.errors import HotjoinError
from hotjoin.matcher.warmup import warm_up_in_background

Op = tuple[Any, ...]

# operation kinds
PUBLISH = "pub"          # (PUBLISH, seq, event, mode): mode "pairs" | "affected" | "list"
PUBLISH_BATCH = "pubbatch"  # (PUBLISH_BATCH, seq, sides, ids, keys, values, times, payloads, output
#                             [, ends]): ends of interval events, absent or None for points
PUBLISH_ADMITTED = "pubadm"  # (PUBLISH_ADMITTED, seq, sides, ids, keys, values, times, payloads,
#                               seqs, maxes, output[, ends]): a batch admitted by the
#                               key-partitioned front end, each event at its own seq and clock
PUBLISH_MANY = "pubmany"  # (PUBLISH_MANY, seq, events): publish_many(match=False) (log replay)
ADVANCE = "adv"          # (ADVANCE, seq, max_time): the topic's clock before the next operation
DELETE = "del"           # (DELETE, seq, side, id, mode): mode "pairs" | "affected" | "list" | "none"
SUBSCRIBE = "sub"        # (SUBSCRIBE, seq, subs, snapshot) -> local ids
UNSUBSCRIBE = "unsub"    # (UNSUBSCRIBE, seq, local id)
RESTORE_CLOCK = "clock"  # (RESTORE_CLOCK, seq, max_time)
RESTORE_COLUMNS = "cols"  # (RESTORE_COLUMNS, 0, side, ids, keys, values, times, seqs, payloads
#                            [, ends])
RESTORE_EVENTS = "revents"  # (RESTORE_EVENTS, 0, events, seqs)
RESTORE_SUB = "rsub"     # (RESTORE_SUB, 0, local id, sub, reg_seq, snapshot)
RESULT = "result"        # (RESULT, 0, local id) -> Matches (read only)
GET_EVENT = "get"        # (GET_EVENT, 0, side, id) -> Event | None (read only)
STORED = "stored"        # (STORED, 0) -> [(Event, seq)] of every stored tuple (read only)
UNDO_SUB = "undosub"     # (UNDO_SUB, 0, local ids, seq0): roll back the newest subscriptions
LOAD_STATE = "load"      # (LOAD_STATE, 0, state): Engine.load_state into the empty engine
EXPORT = "export"        # (EXPORT, 0) -> Engine.export_state() (read only)
EXPORT_SUBS = "exportsubs"  # (EXPORT_SUBS, 0) -> Engine.subscription_columns() (read only)
EXPORT_TUPLES = "exporttuples"  # (EXPORT_TUPLES, 0) -> {side: (ids, keys, values, times, seqs,
#                                  payloads, ends)} of the stored tuples (read only)
COUNT = "count"          # (COUNT, 0) -> {side: stored tuples} (read only)

# operations that change the state (kept in the facade's tail for recovery); reads are not
MUTATING = frozenset({PUBLISH, PUBLISH_BATCH, PUBLISH_ADMITTED, PUBLISH_MANY, ADVANCE, DELETE,
                      SUBSCRIBE, UNSUBSCRIBE, RESTORE_CLOCK, RESTORE_COLUMNS, RESTORE_EVENTS,
                      RESTORE_SUB, UNDO_SUB, LOAD_STATE})


class OpError:
    """An engine error raised by one operation, carried back as a value (nothing changed)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __reduce__(self) -> tuple[Any, ...]:
        # engine errors take several constructor arguments, so default exception pickling (which
        # calls ``cls(*args)`` with the message only) cannot rebuild them; rebuild without __init__
        e = self.error
        attrs = {k: OpError(v) if isinstance(v, BaseException) else v  # BatchError.cause
                 for k, v in getattr(e, "__dict__", {}).items()}
        return (_rebuild, (type(e), e.args, attrs))


def _rebuild(cls: type, args: tuple[Any, ...], attrs: dict[str, Any]) -> OpError:
    e = cls.__new__(cls)
    e.args = args
    e.__dict__.update({k: v.error if isinstance(v, OpError) else v for k, v in attrs.items()})
    return OpError(e)


class ShardWorker:
    """A subscription shard of one topic: the engine plus the batch entry point ``apply``."""

    def __init__(self, lateness: int, retention: int | None, strategy: str | Mapping[str, str],
                 state: bytes | None = None, max_advance: int | None = None) -> None:
        warm_up_in_background()  # this process's kernels load while the first calls arrive
        self.engine = Engine(lateness=lateness, retention=retention, strategy=strategy,
                             max_advance=max_advance)
        if state is not None:  # a snapshot: columns, the indexes are bulk-built from them
            self.engine.load_state(pickle.loads(state))
        self.applied = 0  # operations applied since start (health: is it moving)
        self.cpu_seconds = 0.0  # CPU time spent applying (the model's per-worker cost)

    def pid(self) -> int:
        return os.getpid()

    def apply(self, ops: Sequence[Op]) -> list[Any]:
        """Apply ``ops`` in order; one result per operation (``OpError`` for a rejected one)."""
        out: list[Any] = []
        t0 = time.process_time()
        for op in ops:
            try:
                out.append(self._apply(op))
            except (HotjoinError, ValueError, KeyError, NotImplementedError) as e:
                out.append(OpError(e))
        self.applied += len(ops)
        self.cpu_seconds += time.process_time() - t0
        return out

    def _align(self, seq: int | None) -> None:
        """Make the next operation take ``seq`` (skipping other shards' operations); None: the
        next one, for the operations of a run after its first."""
        if seq is not None and self.engine.seq < seq - 1:
            self.engine.advance_clock(seq, None)

    def _apply(self, op: Op) -> Any:
        e = self.engine
        kind, seq = op[0], op[1]
        if kind == PUBLISH:
            self._align(seq)
            ev, mode = op[2], op[3]
            if mode == "pairs":
                return e.publish_columnar(ev)
            if mode == "affected":
                return e.publish_affected(ev)
            if mode == "none":  # state only (log replay)
                return e.publish_many([ev], match=False)
            return e.publish(ev)
        if kind == DELETE:
            self._align(seq)
            side, eid, mode = op[2], op[3], op[4]
            if mode == "pairs":
                return e.delete_columnar(side, eid)
            if mode == "affected":
                return e.delete_affected(side, eid)
            return e.delete(side, eid, match=mode != "none")
        if kind == PUBLISH_BATCH:  # the compiled batch path, one call per batch
            self._align(seq)
            return e.publish_batch(*op[2:8], output=op[8], ends=op[9] if len(op) > 9 else None)
        if kind == PUBLISH_ADMITTED:  # key-partitioned: admitted topic-wide by the front end
            return e.publish_admitted(*op[2:10], output=op[10],
                                      ends=op[11] if len(op) > 11 else None)
        if kind == ADVANCE:  # key-partitioned: catch up with the topic's seq and clock
            if seq > e.seq:
                e.advance_clock(seq, op[2])
            return None
        if kind == PUBLISH_MANY:
            self._align(seq)
            return e.publish_many(op[2], match=False)
        if kind == SUBSCRIBE:
            self._align(seq)
            return e.subscribe_many(op[2], snapshot=op[3])
        if kind == UNSUBSCRIBE:
            self._align(seq)
            return e.unsubscribe(op[2])
        if kind == RESTORE_CLOCK:
            return e.restore_clock(seq, op[2])
        if kind == RESTORE_COLUMNS:
            return e.restore_event_columns(*op[2:9], ends=op[9] if len(op) > 9 else None)
        if kind == RESTORE_EVENTS:
            return e.restore_events(op[2], op[3])
        if kind == RESTORE_SUB:
            return e.restore_subscription(op[2], op[3], op[4], op[5])
        if kind == RESULT:
            return e.result_columnar(op[2])
        if kind == GET_EVENT:
            return e.get_event(op[2], op[3])
        if kind == STORED:
            return [pair for t in e.tables.values() for pair in t.events()]
        if kind == UNDO_SUB:
            return e.undo_subscribe(np.asarray(op[2], dtype=np.int64), int(op[3]))
        if kind == LOAD_STATE:
            return e.load_state(op[2])
        if kind == EXPORT:
            return e.export_state()
        if kind == EXPORT_SUBS:
            return e.subscription_columns()
        if kind == EXPORT_TUPLES:
            return {side: (*t.live_columns(), t.live_ends()) for side, t in e.tables.items()}
        if kind == COUNT:
            return {side: len(t) for side, t in e.tables.items()}
        raise ValueError(f"unknown operation kind {kind!r}")

    def snapshot(self) -> bytes:
        """The engine's state as columns (``Engine.export_state``, pickled: numpy arrays and
        the id lists, no index objects); with the operations sent after it, it rebuilds this
        shard."""
        return pickle.dumps(self.engine.export_state(), protocol=pickle.HIGHEST_PROTOCOL)

    def status(self) -> dict[str, Any]:
        """Health and load: last sequence applied, memory, subscriptions, engine stats."""
        e = self.engine
        return {"pid": os.getpid(), "seq": e.seq, "memory_bytes": e.memory_bytes(),
                "subscriptions": len(e.subs), "applied": self.applied, "time": time.time(),
                "cpu_seconds": self.cpu_seconds,
                "stats": e.stats()}
