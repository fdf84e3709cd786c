"""Log compaction: a topic's state as a snapshot, written as the head of a new log file.

A compacted log is ``MAGIC``, a header frame (JSON: the clock — last seq, largest event time —,
the next subscription id and the number of snapshot frames), the snapshot frames (``LogBatch``
of subscribe ops of the live subscriptions and publish ops of the stored tuples, each carrying
its *original* seq), then the ordinary frames appended after the snapshot was taken. Restart
feeds the snapshot to ``Engine.restore_subscription`` / ``restore_events`` / ``restore_clock``
and replays the rest as usual (``server/PERSISTENCE.md``).

``capture`` runs under the topic lock and only copies columns (O(live state), no per-tuple
Python objects for ``matcher.Engine``); ``snapshot_bytes`` encodes them outside the lock.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hotjoin.matcher.model import Event, Subscription
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.convert import SIDE_TO_PB, SubMeta, decode_event, decode_spec, encode_spec
from hotjoin.server.log import MAGIC, frame

OPS_PER_FRAME = 20_000


@dataclass
class Tuples:
    """Stored tuples of one side as columns (``ids``/``payloads`` are lists)."""

    side: str
    ids: list[str]
    keys: np.ndarray
    values: np.ndarray
    times: np.ndarray
    seqs: np.ndarray
    payloads: list[bytes]


@dataclass
class State:
    """What a snapshot holds: the clock, the next subscription id, subscriptions (and their
    owners, only the non-empty ones) and tuples."""

    seq: int
    max_time: int | None
    next_sid: int
    subs: list[tuple[int, Subscription, SubMeta]]
    tuples: list[Tuples]
    owners: dict[int, str] = field(default_factory=dict)

    @property
    def n_ops(self) -> int:
        return len(self.subs) + sum(len(t.ids) for t in self.tuples)


def tuples_of(engine: Any, side: str) -> Tuples:
    """Copy the stored tuples of ``side``: columns of ``matcher.Engine`` or ``stored_tuples()``."""
    tables = getattr(engine, "tables", None)
    if tables is not None:
        return Tuples(side, *tables[side].live_columns())
    pairs = [(ev, seq) for ev, seq in engine.stored_tuples() if ev.side == side]
    return Tuples(side, [e.id for e, _ in pairs],
                  np.array([e.key for e, _ in pairs], dtype=np.float64),
                  np.array([e.value for e, _ in pairs], dtype=np.float64),
                  np.array([e.time for e, _ in pairs], dtype=np.int64),
                  np.array([s for _, s in pairs], dtype=np.int64),
                  [bytes(e.payload) for e, _ in pairs])


def stored_count(engine: Any) -> int:
    """Number of stored tuples, O(1) for ``matcher.Engine``."""
    tables = getattr(engine, "tables", None)
    if tables is not None:
        return sum(len(t) for t in tables.values())
    return sum(int(n) for n in engine.stats()["tuples"].values())


def next_subscription_id(engine: Any) -> int:
    cols = getattr(engine, "cols", None)
    return int(cols.n) if cols is not None else int(engine.next_subscription_id)


def set_next_subscription_id(engine: Any, n: int) -> None:
    """Ids unsubscribed after the last live one stay unused after a restore."""
    cols = getattr(engine, "cols", None)
    if cols is not None:
        cols.n = max(int(cols.n), n)
    else:
        engine.set_next_subscription_id(n)


def capture(engine: Any, meta: dict[int, SubMeta], lateness: int,
            owners: dict[int, str] | None = None) -> State:
    """Copy a topic's state (call with the topic lock held); ``owners``: sid -> owner principal."""
    w = engine.watermark
    subs = [(sid, engine.subscription(sid), m) for sid, m in meta.items()]
    return State(int(engine.seq), None if w is None else int(w) + lateness,
                 next_subscription_id(engine), subs, [tuples_of(engine, "R"), tuples_of(engine, "S")],
                 dict(owners or {}))


def _ops(state: State) -> Iterator[pb.LogOp]:
    """Snapshot ops: subscriptions by id, then tuples (seq order is not needed to restore)."""
    owners = state.owners
    for sid, sub, m in sorted(state.subs, key=lambda x: x[0]):
        yield pb.LogOp(seq=m.registered_seq,
                       subscribe=pb.SubscribeOp(subscription_id=sid, spec=encode_spec(sub, m),
                                                owner=owners.get(sid, "")))
    for t in state.tuples:
        side = SIDE_TO_PB[t.side]
        for i, k, v, tm, s, p in zip(t.ids, t.keys.tolist(), t.values.tolist(), t.times.tolist(),
                                     t.seqs.tolist(), t.payloads, strict=True):
            yield pb.LogOp(seq=s, publish=pb.Event(side=side, id=i, key=k, value=v, time=tm, payload=p))


def snapshot_bytes(state: State) -> bytes:
    """``MAGIC`` + header frame + snapshot frames (the head of a compacted log)."""
    frames: list[bytes] = []
    batch = pb.LogBatch()
    for op in _ops(state):
        batch.ops.append(op)
        if len(batch.ops) >= OPS_PER_FRAME:
            frames.append(frame(batch.SerializeToString()))
            batch = pb.LogBatch()
    if len(batch.ops):
        frames.append(frame(batch.SerializeToString()))
    header = {"format": 1, "seq": state.seq, "max_time": state.max_time,
              "next_subscription_id": state.next_sid, "frames": len(frames),
              "subscriptions": len(state.subs), "tuples": state.n_ops - len(state.subs)}
    return b"".join([MAGIC, frame(json.dumps(header).encode()), *frames])


def restore(engine: Any, header: dict[str, Any], batches: Iterator[pb.LogBatch],
            register: Any) -> None:
    """Rebuild ``engine`` from the snapshot frames of a compacted log.

    ``register(sid, meta, owner)`` records each subscription's server-side metadata and owner
    ("" in logs written before owners were recorded).
    """
    events: list[Event] = []
    seqs: list[int] = []
    for _ in range(int(header["frames"])):
        batch = next(batches)
        for op in batch.ops:
            if op.WhichOneof("op") == "subscribe":
                sub, affected, snap, subscriber = decode_spec(op.subscribe.spec)
                sid = int(op.subscribe.subscription_id)
                engine.restore_subscription(sid, sub, int(op.seq), snap)
                register(sid, SubMeta(affected, snap, subscriber, int(op.seq)), op.subscribe.owner)
            else:
                events.append(decode_event(op.publish, op.publish.time))
                seqs.append(int(op.seq))
    if events:
        engine.restore_events(events, seqs)
    set_next_subscription_id(engine, int(header["next_subscription_id"]))
    engine.restore_clock(int(header["seq"]), header["max_time"])
