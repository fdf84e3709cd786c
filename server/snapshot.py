"""Log compaction: a topic's state as a snapshot, written as the head of a new log file.

A compacted log is ``MAGIC``, a header frame (JSON: the clock — last seq, largest event time —,
the next subscription id and the number of snapshot frames), the snapshot frames (``LogBatch``
of subscribe ops of the live subscriptions and publish ops of the stored tuples, each carrying
its *original* seq), then the ordinary frames appended after the snapshot was taken. Restart
turns the snapshot into the engine's state as columns and loads it into the fresh engine at once
(``TopicEngine.load_state``: clock, next subscription id, subscriptions, tuples; indexes bulk-built,
nothing matched), then replays the rest as usual (``docs/reference/persistence.md``).

``capture`` runs under the topic lock and only copies columns (``TopicEngine.export_state``:
O(live state), no per-tuple Python objects for ``matcher.Engine``); ``snapshot_bytes`` encodes them
outside the lock. The engine is reached only through the contract of ``hotjoin.matcher.contract``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hotjoin.matcher.contract import TopicEngine, subscription_columns
from hotjoin.matcher.model import Subscription
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.convert import (
    SIDE_TO_PB,
    SubMeta,
    decode_event,
    decode_spec,
    encode_spec,
    preset_of,
)
from hotjoin.server.log import MAGIC, frame

OPS_PER_FRAME = 20_000


@dataclass
class Tuples:
    """Stored tuples of one side as columns (``ids``/``payloads`` are lists); ``ends`` the
    interval ends (``end == time`` for a point), None when every tuple is a point."""

    side: str
    ids: list[str]
    keys: np.ndarray
    values: np.ndarray
    times: np.ndarray
    seqs: np.ndarray
    payloads: list[bytes]
    ends: np.ndarray | None = None

    def __post_init__(self) -> None:
        ends = self.ends
        if ends is not None and not bool((np.asarray(ends) != np.asarray(self.times)).any()):
            self.ends = None  # all points: stored and loaded as before interval events existed

    def columns(self) -> tuple[Any, ...]:
        """The ``TopicEngine.load_state`` tuple of this side: ``(ids, keys, values, times,
        seqs, payloads)`` (its ends go beside it: ``load_state_input``)."""
        return (self.ids, self.keys, self.values, self.times, self.seqs, self.payloads)


def tuples_of_state(st: dict[str, Any], side: str) -> Tuples:
    """Side ``side``'s ``Tuples`` of an ``export_state`` answer (its ``ends`` when it has them:
    an engine without interval events answers without)."""
    return Tuples(side, *st["tuples"][side], (st.get("ends") or {}).get(side))


def load_state_input(seq: int, max_time: int | None, next_sid: int,
                     subs: dict[str, np.ndarray], tuples: list[Tuples]) -> dict[str, Any]:
    """The ``TopicEngine.load_state`` input of a snapshot or checkpoint: ``tuples`` per side
    and, only when some tuple is an interval, ``ends`` per side (a state of points loads exactly
    as before interval events existed)."""
    out: dict[str, Any] = {"seq": seq, "max_time": max_time, "next_sid": next_sid, "subs": subs,
                           "tuples": {t.side: t.columns() for t in tuples}}
    ends = {t.side: t.ends for t in tuples if t.ends is not None}
    if ends:
        out["ends"] = ends
    return out


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


def tuples_of(engine: TopicEngine, side: str) -> Tuples:
    """Copy the stored tuples of ``side`` as columns (``TopicEngine.export_state``; O(state))."""
    return tuples_of_state(engine.export_state(), side)


def stored_count(engine: TopicEngine) -> int:
    """Number of stored tuples (``len`` of ``TopicEngine.tables``): O(1) for ``matcher.Engine``,
    one round trip to the workers for a scale-out engine."""
    return sum(len(t) for t in engine.tables.values())


def capture(engine: TopicEngine, meta: dict[int, SubMeta], lateness: int,
            owners: dict[int, str] | None = None) -> State:
    """Copy a topic's state (call with the topic lock held): the engine's columns
    (``export_state``: clock, next subscription id, tuples), each live subscription with its
    metadata, and ``owners`` (sid -> owner principal). ``lateness`` is kept for the callers: the
    clock is the engine's own largest event time."""
    st = engine.export_state()
    subs = [(sid, engine.subscription(sid), m) for sid, m in meta.items()]
    max_time = st["max_time"]
    return State(int(st["seq"]), None if max_time is None else int(max_time), int(st["next_sid"]),
                 subs, [tuples_of_state(st, side) for side in ("R", "S")],
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
        ends = t.times.tolist() if t.ends is None else t.ends.tolist()
        for i, k, v, tm, s, p, e in zip(t.ids, t.keys.tolist(), t.values.tolist(),
                                        t.times.tolist(), t.seqs.tolist(), t.payloads, ends,
                                        strict=True):
            ev = pb.Event(side=side, id=i, key=k, value=v, time=tm, payload=p)
            if e != tm:  # an interval (docs/design.md); a point has no end
                ev.end = e
            yield pb.LogOp(seq=s, publish=ev)


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


def restore(engine: TopicEngine, header: dict[str, Any], batches: Iterator[pb.LogBatch],
            register: Any) -> None:
    """Rebuild the fresh ``engine`` from the snapshot frames of a compacted log: their state as
    columns, loaded at once (``TopicEngine.load_state``: subscriptions under their ids, tuples
    with their original seqs, the clock, the next subscription id, so that ids unsubscribed
    after the last live one stay unused). O(snapshot).

    ``register(sid, meta, owner)`` then records each subscription's server-side metadata and
    owner ("" in logs written before owners were recorded). Raises ``ValueError`` for a
    snapshot that does not load (ids out of order, a duplicate tuple, a bad record).
    """
    sids: list[int] = []
    subs: list[Subscription] = []
    regs: list[int] = []
    metas: list[tuple[SubMeta, str]] = []
    rows: dict[str, tuple[list[str], list[float], list[float], list[int], list[int], list[bytes],
                          list[int]]]
    rows = {side: ([], [], [], [], [], [], []) for side in ("R", "S")}
    for _ in range(int(header["frames"])):
        batch = next(batches)
        for op in batch.ops:
            if op.WhichOneof("op") == "subscribe":
                sub, affected, snap, subscriber = decode_spec(op.subscribe.spec)
                sids.append(int(op.subscribe.subscription_id))
                subs.append(sub)
                regs.append(int(op.seq))
                metas.append((SubMeta(affected, snap, subscriber, int(op.seq), preset_of(sub)),
                              op.subscribe.owner))
            else:
                ev = decode_event(op.publish, op.publish.time)
                ids, keys, values, times, seqs, payloads, ends = rows[ev.side]
                ids.append(ev.id)
                keys.append(ev.key)
                values.append(ev.value)
                times.append(ev.time)
                seqs.append(int(op.seq))
                payloads.append(ev.payload)
                ends.append(ev.end)
    tuples = [Tuples(side, ids, np.array(keys, dtype=np.float64),
                     np.array(values, dtype=np.float64), np.array(times, dtype=np.int64),
                     np.array(seqs, dtype=np.int64), payloads, np.array(ends, dtype=np.int64))
              for side, (ids, keys, values, times, seqs, payloads, ends) in rows.items()]
    cols = subscription_columns(sids, subs, regs, [m.snapshot for m, _ in metas])
    engine.load_state(load_state_input(int(header["seq"]), header["max_time"],
                                       int(header["next_subscription_id"]), cols, tuples))
    for sid, (meta, owner) in zip(sids, metas, strict=True):
        register(sid, meta, owner)
