"""Where a columnar batch's time goes inside the server (``python -m hotjoin.ops.bench.serve_path``).

In-process, no gRPC: a ``Topic`` with a log (``fdatasync`` on) on the select-join workload of
``bench serve`` (``clients.loadgen``, AFFECTED delivery), then batches of R tuples through
``Topic.publish_columns``. Reported per event: decoding the request (``decode_columns``), the
engine call (``apply_publish_batch``, i.e. ``Engine.publish_batch``), and the rest of the server
path (checks, log frame + sync, delivery chunk, metrics, outcome). Reference in the same
run: the engine alone, one ``publish_affected`` per event on an identically built engine (what a
user of the engine would call), over the same events.
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
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server import topic as topic_mod
from hotjoin.server.convert import decode_columns
from hotjoin.server.settings import TopicSettings


def run(subscriptions: int = 100_000, stored: int = 100_000, events: int = 30_000, batch: int = 1000) -> dict[str, Any]:
    w = Workload(kind="select", subscriptions=subscriptions, stored=stored, affected=10, delivery="affected",
                 subscriber="b")
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--subscriptions", type=int, default=100_000)
    ap.add_argument("--stored", type=int, default=100_000)
    ap.add_argument("--events", type=int, default=30_000)
    ap.add_argument("--batch", type=int, default=1000)
    a = ap.parse_args()
    run(a.subscriptions, a.stored, a.events, a.batch)


if __name__ == "__main__":
    main()
