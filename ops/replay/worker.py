"""One shard of the replay: a ``matcher.Engine`` applying its operations in seq order.

What the server does per operation (``server/topic.py``), with the topic-wide clock set first
(``Engine.advance_clock``: the next operation takes the topic's seq, the largest event time is
the topic's), so pairs form at the topic's seq, lateness and retention act as online, and a
subscription receives only pairs formed after its ``registered_seq`` (unless snapshot):

- publish → ``publish_columnar``: +1 per new pair, at the publish's seq;
- delete → ``delete_columnar``: −1 per pair a subscription had received, at the delete's seq;
- subscribe → registered with the logged id and seq (runs of consecutive ids and seqs through
  ``subscribe_many``); with ``snapshot`` also ``result_columnar``: +1 per stored pair, at the
  registration's seq, as the server's snapshot message;
- unsubscribe → ``unsubscribe``;
- restore-publish / restore-subscribe (compacted exports) → state without deliveries
  (``restore_event_columns``, ``restore_subscription``, ``restore_clock``), as a server restart.

No Spark here: the Spark job (``ops/replay/job.py``), the single-process baseline and the tests
all call ``run_cell``. Deliveries leave as Arrow record batches (``DELIVERY_SCHEMA``), never one
Python object per pair.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from hotjoin.matcher import Engine, Event
from hotjoin.matcher.errors import HotjoinError
from hotjoin.matcher.model import Matches, Subscription
from hotjoin.ops.replay.log import (
    DELETE,
    OP_NAMES,
    PUBLISH,
    RESTORE_PUBLISH,
    RESTORE_SUBSCRIBE,
    SIDE_NAMES,
    SUBSCRIBE,
    UNSUBSCRIBE,
    Ops,
    TopicOptions,
)

DELIVERY_SCHEMA = pa.schema([
    ("subscription_id", pa.int64()), ("sign", pa.int8()), ("r_id", pa.string()),
    ("s_id", pa.string()), ("seq", pa.int64()),
])
FLUSH_ROWS = 262_144
PROGRESS_SECONDS = 5.0


class ReplayError(RuntimeError):
    """An operation the engine refused: the log is not one the server could have written."""


class DeliverySink:
    """Collects columnar deliveries and hands them on as record batches of ~``FLUSH_ROWS``."""

    def __init__(self, emit: Callable[[pa.RecordBatch], None]) -> None:
        self._emit = emit
        self._parts: list[tuple[np.ndarray, int, np.ndarray, np.ndarray, int]] = []
        self._n = 0
        self.rows = 0

    def add(self, m: Matches, seq: int) -> None:
        n = len(m)
        if n == 0:
            return
        self._parts.append((m.subscription_ids, m.sign, m.r_ids, m.s_ids, seq))
        self._n += n
        if self._n >= FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        if not self._parts:
            return
        parts = self._parts
        counts = np.array([p[0].shape[0] for p in parts], dtype=np.int64)
        batch = pa.RecordBatch.from_arrays([
            pa.array(np.concatenate([p[0] for p in parts]).astype(np.int64, copy=False)),
            pa.array(np.repeat(np.array([p[1] for p in parts], dtype=np.int8), counts)),
            pa.array(np.concatenate([p[2] for p in parts]), type=pa.string()),
            pa.array(np.concatenate([p[3] for p in parts]), type=pa.string()),
            pa.array(np.repeat(np.array([p[4] for p in parts], dtype=np.int64), counts)),
        ], schema=DELIVERY_SCHEMA)
        self._parts = []
        self._n = 0
        self.rows += batch.num_rows
        self._emit(batch)


@dataclass
class CellStats:
    """What one shard did (summed into the replay's summary)."""

    cell: int
    ops: int = 0
    events: int = 0
    deliveries: int = 0
    seconds: float = 0.0
    stored: dict[str, int] = field(default_factory=dict)
    cpu_seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"cell": self.cell, "ops": self.ops, "events": self.events,
                "deliveries": self.deliveries, "seconds": round(self.seconds, 3),
                "cpu_seconds": round(self.cpu_seconds, 3), "stored": self.stored}


def _fail(ops: Ops, i: int, e: Exception) -> ReplayError:
    k = int(ops.kind[i])
    what = (f"{OP_NAMES[k]} of subscription {int(ops.sid[i])}" if ops.sid[i] >= 0
            else f"{OP_NAMES[k]} of {SIDE_NAMES[int(ops.side[i])]} {ops.id[i]!r}")
    return ReplayError(f"seq {int(ops.seq[i])}: {what} was refused by the engine "
                       f"({type(e).__name__}: {e}); the log is not one the server wrote")


def _restore(engine: Engine, ops: Ops, n: int, subs: dict[int, tuple[Subscription, bool]],
             options: TopicOptions) -> None:
    """Rows 0..n-1 are a compacted export's snapshot: load them as state, no deliveries."""
    kind = ops.kind[:n]
    for i in np.flatnonzero(kind == RESTORE_SUBSCRIBE).tolist():
        sid = int(ops.sid[i])
        sub, snap = subs[sid]
        try:
            engine.restore_subscription(sid, sub, int(ops.seq[i]), snap)
        except (ValueError, HotjoinError) as e:
            raise _fail(ops, i, e) from e
    for side_no, side in enumerate(SIDE_NAMES):
        rows = np.flatnonzero((kind == RESTORE_PUBLISH) & (ops.side[:n] == side_no))
        if rows.shape[0]:
            try:
                ends = ops.end[rows]
                engine.restore_event_columns(
                    side, ops.id[rows].tolist(), ops.key[rows], ops.value[rows], ops.time[rows],
                    ops.seq[rows],
                    ends=None if bool((ends == ops.time[rows]).all()) else ends)
            except (ValueError, HotjoinError) as e:
                raise _fail(ops, int(rows[0]), e) from e
    restored = kind == RESTORE_PUBLISH
    max_time = int(ops.time[:n][restored].max()) if restored.any() else None
    engine.restore_clock(int(options.compacted_at_seq or 0), max_time)


def run_cell(cell: int, ops: Ops, subs: dict[int, tuple[Subscription, bool]],
             options: TopicOptions, emit: Callable[[pa.RecordBatch], None],
             progress: Callable[[int, int, float], None] | None = None) -> CellStats:
    """Apply ``ops`` (seq order) to a fresh engine; deliveries go to ``emit`` as record batches.

    ``subs``: subscription id → (subscription, snapshot) for every id the ops mention.
    ``progress(done, total, seconds)`` is called about every ``PROGRESS_SECONDS``.
    """
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    engine = Engine(lateness=options.lateness, retention=options.retention,
                    strategy=dict(options.strategy) or "auto")
    sink = DeliverySink(emit)
    n = len(ops)
    seq, kind, side, ids = ops.seq, ops.kind, ops.side, ops.id
    key, value, times, sid_col = ops.key, ops.value, ops.time, ops.sid
    clock, has_clock = ops.clock, ops.has_clock
    i = 0
    if options.compacted_at_seq is not None:
        i = int(np.searchsorted(seq, options.compacted_at_seq, side="right"))
        _restore(engine, ops, i, subs, options)
    events = 0
    next_report = t0 + PROGRESS_SECONDS
    # plain Python lists: indexing them per operation is several times cheaper than numpy
    seq_l, kind_l, side_l = seq.tolist(), kind.tolist(), side.tolist()
    key_l, value_l, time_l, end_l = key.tolist(), value.tolist(), times.tolist(), ops.end.tolist()
    sid_l, clock_l, has_l = sid_col.tolist(), clock.tolist(), has_clock.tolist()
    while i < n:
        k = kind_l[i]
        s = seq_l[i]
        try:
            engine.advance_clock(s, clock_l[i] if has_l[i] else None)
            if k == PUBLISH:
                ev = Event(SIDE_NAMES[side_l[i]], ids[i], key_l[i], value_l[i], time_l[i],
                           b"", end_l[i])
                sink.add(engine.publish_columnar(ev), s)
                events += 1
            elif k == DELETE:
                sink.add(engine.delete_columnar(SIDE_NAMES[side_l[i]], ids[i]), s)
                events += 1
            elif k == SUBSCRIBE:
                i = _subscribe_run(engine, ops, i, sid_l, seq_l, kind_l, subs, sink)
            elif k == UNSUBSCRIBE:
                engine.unsubscribe(sid_l[i])
            else:
                raise ValueError(f"restore row at seq {s} after compacted_at_seq")
        except ReplayError:
            raise
        except (ValueError, HotjoinError) as e:
            raise _fail(ops, i, e) from e
        i += 1
        if progress is not None and (i & 1023) == 0:
            now = time.perf_counter()
            if now >= next_report:
                progress(i, n, now - t0)
                next_report = now + PROGRESS_SECONDS
    sink.flush()
    stats = CellStats(cell, ops=n, events=events, deliveries=sink.rows,
                      seconds=time.perf_counter() - t0,
                      stored={s_: len(engine.tables[s_]) for s_ in SIDE_NAMES},
                      cpu_seconds=time.process_time() - cpu0)
    if progress is not None and stats.seconds >= PROGRESS_SECONDS:
        progress(n, n, stats.seconds)
    return stats


def _subscribe_run(engine: Engine, ops: Ops, i: int, sid_l: list[int], seq_l: list[int],
                   kind_l: list[int], subs: dict[int, tuple[Subscription, bool]],
                   sink: DeliverySink) -> int:
    """Register the run of subscribes starting at row i (consecutive ids and seqs, one snapshot
    flag) as the server's bulk subscribe did; returns the run's last row."""
    snap = subs[sid_l[i]][1]
    j = i
    n = len(kind_l)
    while (j + 1 < n and kind_l[j + 1] == SUBSCRIBE and seq_l[j + 1] == seq_l[j] + 1
           and sid_l[j + 1] == sid_l[j] + 1 and subs[sid_l[j + 1]][1] == snap):
        j += 1
    first = sid_l[i]
    engine.restore_subscription(first, subs[first][0], seq_l[i], snap)
    if j > i:
        engine.advance_clock(seq_l[i] + 1, None)
        got = engine.subscribe_many([subs[sid_l[r]][0] for r in range(i + 1, j + 1)], snap)
        if got[0] != first + 1 or got[-1] != sid_l[j]:
            raise ReplayError(f"seq {seq_l[i + 1]}: engine gave subscription ids {got[0]}..{got[-1]},"
                              f" the log says {first + 1}..{sid_l[j]}")
    if snap:
        for r in range(i, j + 1):
            sink.add(engine.result_columnar(sid_l[r]), seq_l[r])
    return j
