"""Where a columnar batch's time goes inside the server (``python -m hotjoin.ops.bench.serve_path``).

In-process, no gRPC: a ``Topic`` with a log (``fdatasync`` on) on the select-join workload of
``bench serve`` (``clients.loadgen``, AFFECTED delivery), then batches of R tuples through
``Topic.publish_columns``. Reported per event: decoding the request (``decode_columns``), the
engine call (``apply_publish_batch``, i.e. ``Engine.publish_batch``), and the rest of the server
path (checks, log frame + sync, delivery chunk, metrics, outcome). Reference in the same
run: the engine alone, one ``publish_affected`` per event on an identically built engine (what a
user of the engine would call), over the same events.

``--catch-up`` measures delivery from the match log against live delivery (``catch_up``): the
same messages drained and encoded as columnar Listen responses, once by a listener that keeps up
(from the memory ring, after every batch) and once by a listener that starts after them all,
with a ring too small to hold them (every message read back from the match log).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from hotjoin.clients.loadgen import (
    Workload,
    incoming_columns,
    stored_columns,
    subscription_specs,
)
from hotjoin.matcher import Engine
from hotjoin.matcher.model import Event
from hotjoin.matcher.warmup import warm_up_kernels
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server import malloc
from hotjoin.server import topic as topic_mod
from hotjoin.server.convert import decode_columns
from hotjoin.server.delivery import MatchBlock
from hotjoin.server.kernels import warm_up_server
from hotjoin.server.service import encode_items, listen_response_bytes
from hotjoin.server.settings import DeliveryOptions, TopicSettings


def run(subscriptions: int = 100_000, stored: int = 100_000, events: int = 30_000, batch: int = 1000) -> dict[str, Any]:
    w = Workload(kind="select", subscriptions=subscriptions, stored=stored, affected=10, delivery="affected",
                 subscriber="b")
    _warm_up()
    specs = subscription_specs(w)
    t = topic_mod.Topic("t", 0, None, {}, Path(tempfile.mkdtemp()),
                        TopicSettings(engine_factory=Engine, checkpoint_min_ops=0))
    t.subscribe(specs, 0)
    ref = Engine()
    ref.subscribe_many([t.engine.subscription(i) for i in range(subscriptions)])
    for cb in stored_columns(w, 1000):
        b = decode_columns(cb)
        t.publish_columns(b, time.time_ns())
        for i in range(len(b)):
            ref.publish_affected(Event("S", b.ids[i], float(b.keys[i]), float(b.values[i]), 0))
    wire = [pb.PublishRequest(topic="t", columns=c).SerializeToString()
            for c in incoming_columns(w, events + batch, batch=batch)]
    # warm-up batch (kernels), then the measured ones
    t.publish_columns(decode_columns(pb.PublishRequest.FromString(wire[0]).columns), time.time_ns())
    engine_s = [0.0]
    inner = topic_mod.apply_publish_batch

    def timed(*args: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(*args, **kw)
        finally:
            engine_s[0] += time.perf_counter() - t0

    topic_mod.apply_publish_batch = timed  # type: ignore[assignment]
    decode_s = total_s = 0.0
    decoded = []
    try:
        for raw in wire[1:]:
            t0 = time.perf_counter()
            b = decode_columns(pb.PublishRequest.FromString(raw).columns)
            t1 = time.perf_counter()
            t.publish_columns(b, time.time_ns())
            t2 = time.perf_counter()
            decode_s += t1 - t0
            total_s += t2 - t1
            decoded.append(b)
    finally:
        topic_mod.apply_publish_batch = inner  # type: ignore[assignment]
    n = sum(len(b) for b in decoded)
    ref.publish_affected(Event("R", "warm", 0.0, 0.0, 1))
    t0 = time.perf_counter()
    for b in decoded:
        for i in range(len(b)):
            ref.publish_affected(Event("R", b.ids[i], float(b.keys[i]), float(b.values[i]), 1))
    ref_s = time.perf_counter() - t0
    us = 1e6 / n
    out = {"events": n, "batch": batch, "subscriptions": subscriptions, "stored": stored,
           "engine_path": "publish_batch" if hasattr(t.engine, "publish_batch") else "per-event fallback",
           "decode_us": round(decode_s * us, 2), "engine_us": round(engine_s[0] * us, 2),
           "server_rest_us": round((total_s - engine_s[0]) * us, 2),
           "server_events_per_s": round(n / (decode_s + total_s)),
           "reference_engine_alone_us": round(ref_s * us, 2),
           "reference_events_per_s": round(n / ref_s)}
    print(out)
    return out


def _warm_up() -> None:
    """Every compiled kernel loaded before timing and the allocator set, as a server does at
    start-up."""
    malloc.tune()
    warm_up_kernels()
    warm_up_server()


def _drain(lis: Any) -> tuple[int, int, float]:
    """Drain ``lis`` to the end and encode what it hands out as columnar Listen responses:
    ``(messages, pairs, CPU seconds)``."""
    msgs = pairs = 0
    t0 = time.process_time()
    while True:
        items = lis.next_batch(0)
        if not items and not lis.wake.is_set():  # (empty with wake set: switched to the disk)
            break
        for r in encode_items(items, columnar=True):
            listen_response_bytes(r)  # what the server hands gRPC
        for it in items:
            if isinstance(it, MatchBlock):
                msgs += len(it)
                if it.pcols is not None:
                    pairs += int(it.pcols.offsets[-1] - it.pcols.offsets[0])
    return msgs, pairs, time.process_time() - t0


def catch_up(kind: str = "select", delivery: str = "affected", subscriptions: int = 50_000,
             stored: int = 50_000, events: int = 20_000, affected: float = 13.0,
             batch: int = 1000) -> dict[str, Any]:
    """Messages per CPU second delivered live (from the ring) and caught up from the match log,
    the same messages, drained and encoded as columnar Listen responses (``Listen`` with
    ``columnar``), in process."""
    w = Workload(kind=kind, subscriptions=subscriptions, stored=stored, affected=affected,
                 delivery=delivery, subscriber="b")
    _warm_up()
    t = topic_mod.Topic("t", 0, None, {}, Path(tempfile.mkdtemp()),
                        TopicSettings(engine_factory=Engine, checkpoint_min_ops=0,
                                      delivery=DeliveryOptions(buffer_bytes=1 << 20)))
    t.subscribe(subscription_specs(w), 0)
    for cb in stored_columns(w, 1000):
        t.publish_columns(decode_columns(cb), time.time_ns())
    start = t.info()["seq"]
    live = t.listen("b", [], {}, start, False)
    _drain(live)
    got = [0, 0, 0.0]
    for c in incoming_columns(w, events, batch=batch):
        t.publish_columns(decode_columns(c), time.time_ns())
        m, p, cpu = _drain(live)
        got = [got[0] + m, got[1] + p, got[2] + cpu]
    live.close()
    late = t.listen("b", [], {}, start, False, use_committed=False)
    m, p, cpu = _drain(late)
    out = {"kind": kind, "delivery": delivery, "messages": got[0], "pairs": got[1],
           "live_messages_per_cpu_s": round(got[0] / max(got[2], 1e-9)),
           "caught_up_messages": m, "caught_up_pairs": p,
           "catch_up_messages_per_cpu_s": round(m / max(cpu, 1e-9)),
           "catch_up_over_live": round((m / max(cpu, 1e-9)) / max(got[0] / max(got[2], 1e-9), 1e-9), 2)}
    print(out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--catch-up", action="store_true",
                    help="live delivery against catching up from the match log (catch_up)")
    ap.add_argument("--kind", default="select")
    ap.add_argument("--delivery", default="affected")
    ap.add_argument("--affected", type=float, default=13.0)
    ap.add_argument("--subscriptions", type=int, default=100_000)
    ap.add_argument("--stored", type=int, default=100_000)
    ap.add_argument("--events", type=int, default=30_000)
    ap.add_argument("--batch", type=int, default=1000)
    a = ap.parse_args()
    if a.catch_up:
        catch_up(a.kind, a.delivery, a.subscriptions, a.stored, a.events, a.affected, a.batch)
        return
    run(a.subscriptions, a.stored, a.events, a.batch)


if __name__ == "__main__":
    main()
