"""Publish→ack latency while a checkpoint is taken, and the checkpoint's own costs.

Two parts, one run:

- **In process** (``engine``): an engine with ``--subs`` band joins and ``--tuples`` stored tuples.
  ``capture_s`` is what the topic lock is held for (``checkpoint.capture``: numpy column copies
  and two dict copies), ``encode_s`` the writer thread's work, ``restore_s`` a restart's decode
  plus bulk index build, ``roundtrip_ok`` that the restored engine has the same subscriptions,
  tuples and clock.
- **Through the server** (``server``): a child process runs ``HotjoinServer`` (durable log,
  fsync) with one topic holding the same state; this process publishes ``--rate`` events/s in
  batches of ``--batch`` for ``--seconds`` and records each batch's publish→ack latency from
  its *scheduled* send time (a stall also delays the batches queued behind it). At ``--at``
  seconds the child starts a checkpoint (``Topic.checkpoint_now``). The reference is the same
  run's window before the checkpoint; the target (``docs/reference/persistence.md``) is max ≤ 100 ms and p99 ≤ 50 ms over
  the whole window.

Run: ``python -m hotjoin.ops.bench.checkpoint_stall --subs 100000 --tuples 100000``; prints JSON.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from hotjoin.clients.client import HotjoinClient, band
from hotjoin.matcher import BandJoin, Engine, Range
from hotjoin.server import checkpoint
from hotjoin.server.app import HotjoinServer
from hotjoin.server.convert import SubMeta

TOPIC = "t"


def _workload(n_subs: int, n_tuples: int, seed: int) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Band joins (``b`` 1–3 wide in [−5, 8], so about ten stabbing groups; ``c`` 1 wide in
    [0, 1000]) and sparse stored tuples (keys in [0, 10⁹], values in [0, 1000]): matching is cheap,
    so the latency measured is the server's, not the matcher's; as columns."""
    rng = np.random.default_rng(seed)
    lo = rng.uniform(-5, 5, n_subs)
    c = rng.uniform(0, 1000, n_subs)
    subs = {"b_lo": lo, "b_hi": lo + rng.uniform(1, 3, n_subs), "c_lo": c, "c_hi": c + 1.0}
    ev = {"sides": np.arange(n_tuples) % 2, "ids": [f"e{i}" for i in range(n_tuples)],
          "keys": rng.uniform(0, 1e9, n_tuples), "values": rng.uniform(0, 1000, n_tuples),
          "times": np.arange(n_tuples, dtype=np.int64)}
    return subs, ev


def _band_joins(subs: dict[str, np.ndarray]) -> list[BandJoin]:
    return [BandJoin(b=Range(b0, b1), c=Range(c0, c1)) for b0, b1, c0, c1 in zip(
        subs["b_lo"].tolist(), subs["b_hi"].tolist(), subs["c_lo"].tolist(), subs["c_hi"].tolist(),
        strict=True)]


def measure_engine(n_subs: int, n_tuples: int, seed: int = 1) -> dict[str, Any]:
    """The in-process part: capture, encode, restore (seconds) and the roundtrip check."""
    subs, ev = _workload(n_subs, n_tuples, seed)
    e = Engine()
    e.subscribe_many(_band_joins(subs))
    e.publish_batch(ev["sides"], ev["ids"], ev["keys"], ev["values"], ev["times"], output="none")
    meta = {sid: SubMeta(True, False, "bench", int(e.cols.reg[sid])) for sid in e.subs}
    t0 = time.perf_counter()
    image = checkpoint.capture(e, meta, {}, 0, 0)
    t1 = time.perf_counter()
    payload = checkpoint.encode(image)
    t2 = time.perf_counter()
    back = checkpoint.decode(payload)
    f = Engine()
    f.load_state(checkpoint.engine_state(back))
    t3 = time.perf_counter()
    ok = (f.subs == e.subs and f.seq == e.seq and f.watermark == e.watermark
          and all(len(f.tables[s]) == len(e.tables[s]) for s in "RS"))
    return {"subs": n_subs, "tuples": n_tuples, "capture_s": round(t1 - t0, 4),
            "encode_s": round(t2 - t1, 3), "mib": round(len(payload) / 2**20, 1),
            "restore_s": round(t3 - t2, 2), "roundtrip_ok": bool(ok)}


def _serve(data: str, ready: Any, go: Any, out: Any) -> None:
    """Child: the server; on ``go`` it takes a checkpoint and reports its timings."""

    srv = HotjoinServer(data_dir=Path(data), port=0, compact_ratio=0, checkpoint_min_ops=10**12).start()
    ready.put(srv.target)
    try:
        go.wait()
        topic = srv.registry.get(TOPIC)
        n0 = topic.durability.checkpoints
        t0 = time.time()
        started = topic.checkpoint_now()
        while started and topic.durability.checkpoints == n0 and time.time() - t0 < 120:
            time.sleep(0.005)
        out.put({"started": started, "start_unix": t0, "end_unix": time.time(),
                 "capture_s": round(topic.durability.checkpoint_capture_seconds, 4)})
        go.clear()
        time.sleep(3600)
    finally:
        srv.stop(0)


def _pct(xs: list[float], q: float) -> float:
    return round(float(np.percentile(xs, q)) * 1e3, 2) if xs else float("nan")


def measure_server(n_subs: int, n_tuples: int, rate: float, batch: int, seconds: float, at: float,
                   seed: int = 1) -> dict[str, Any]:
    """The server part: ack latencies before and during a checkpoint (milliseconds)."""

    subs, ev = _workload(n_subs, n_tuples, seed)
    ctx = mp.get_context("spawn")
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    with tempfile.TemporaryDirectory() as data:
        child = ctx.Process(target=_serve, args=(data, ready, go, out), daemon=True)
        child.start()
        try:
            target = ready.get(timeout=120)
            with HotjoinClient(target) as c:
                c.create_topic(TOPIC)
                specs = [band((b0, b1), c=(c0, c1), delivery="affected") for b0, b1, c0, c1 in zip(
                    subs["b_lo"].tolist(), subs["b_hi"].tolist(), subs["c_lo"].tolist(),
                    subs["c_hi"].tolist(), strict=True)]
                c.subscribe_many(TOPIC, specs)
                for i in range(0, n_tuples, 10_000):
                    sl = slice(i, i + 10_000)
                    c.publish_columns(TOPIC, ev["sides"][sl], ev["ids"][sl], ev["keys"][sl],
                                      ev["values"][sl], ev["times"][sl])
                print(f"checkpoint_stall: {n_subs} subscriptions and {n_tuples} tuples loaded; "
                      f"publishing {rate:.0f} events/s for {seconds:.0f} s", file=sys.stderr)
                rng = np.random.default_rng(seed + 1)
                period = batch / rate
                lat: list[tuple[float, float]] = []  # (scheduled unix time, latency s)
                t_start = time.time()
                fired = False
                k = 0
                while True:
                    sched = t_start + k * period
                    now = time.time()
                    if sched - t_start >= seconds:
                        break
                    if now < sched:
                        time.sleep(sched - now)
                    if not fired and sched - t_start >= at:
                        go.set()
                        fired = True
                    ids = [f"x{k}.{j}" for j in range(batch)]
                    c.publish_columns(TOPIC, rng.integers(0, 2, batch), ids, rng.uniform(0, 1e9, batch),
                                      rng.uniform(0, 1000, batch), np.full(batch, n_tuples + k))
                    lat.append((sched, time.time() - sched))
                    k += 1
            ck = out.get(timeout=180)
        finally:
            child.kill()
            child.join(10)
    before = [x for s, x in lat if s < ck["start_unix"]]
    during = [x for s, x in lat if ck["start_unix"] - 0.5 <= s <= ck["end_unix"] + 1.0]
    every = [x for _, x in lat]
    return {"rate": rate, "batch": batch, "seconds": seconds, "checkpoint": ck,
            "checkpoint_s": round(ck["end_unix"] - ck["start_unix"], 2),
            "batches": len(every), "before_p50_ms": _pct(before, 50), "before_p99_ms": _pct(before, 99),
            "before_max_ms": _pct(before, 100), "during_p99_ms": _pct(during, 99),
            "during_max_ms": _pct(during, 100), "window_p99_ms": _pct(every, 99),
            "window_max_ms": _pct(every, 100)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--subs", type=int, default=100_000)
    p.add_argument("--tuples", type=int, default=100_000)
    p.add_argument("--rate", type=float, default=2000.0, help="events/s published through the server")
    p.add_argument("--batch", type=int, default=20, help="events per Publish request")
    p.add_argument("--seconds", type=float, default=20.0, help="length of the publishing window")
    p.add_argument("--at", type=float, default=8.0, help="seconds into the window the checkpoint starts")
    p.add_argument("--no-server", action="store_true", help="the in-process part only")
    a = p.parse_args(argv)
    out: dict[str, Any] = {"engine": measure_engine(a.subs, a.tuples)}
    print(f"checkpoint_stall: engine part {json.dumps(out['engine'])}", file=sys.stderr)
    if not a.no_server:
        out["server"] = measure_server(a.subs, a.tuples, a.rate, a.batch, a.seconds, a.at)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
