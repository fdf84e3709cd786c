"""Cost of durable delivery: ``hotjoin bench serve`` with and without the match log.

Runs the server load test (``hotjoin.ops.loadtest.run_one``, the harness of ``hotjoin bench
serve``) for each rate and delivery mode twice, interleaved in one run: with the default durable
delivery (match log written beside the event log, synced in the same group commit) and with
``--delivery-retention-bytes 0`` (messages in memory only, no match log) as the
same-run reference. Prints one JSON line per run and a Markdown table of the ratios.

    python -m hotjoin.ops.bench.durable --subscriptions 20000 --stored 50000 --duration 10
    python -m hotjoin.ops.bench.durable --codec     # record bytes and encode/decode CPU only
    python -m hotjoin.ops.bench.durable --memory 67108864,536870912   # RSS vs the ring's bound
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from hotjoin.cli.serving import free_port, start_server, stop_server
from hotjoin.clients.client import HotjoinClient, band, event
from hotjoin.ops.loadtest import ServeBenchConfig, numpy_reference, run_one
from hotjoin.server.delivery import Chunk, OpMatches
from hotjoin.server.match_log import MatchLog, decode, encode

MODES = {"durable": (), "memory-only": ("--delivery-retention-bytes", "0")}


def codec(rng_seed: int = 1) -> list[dict[str, Any]]:
    """Bytes and CPU of one batch's match-log record (``Chunk.build`` + ``match_log.encode`` /
    ``decode``), best of 5: 100 events, 10 subscriptions each, 0 / 1 / 10 pairs per message."""



    rng = np.random.default_rng(rng_seed)
    out = []
    for label, per, pp in (("AFFECTED", 10, 0), ("PAIRS, 1 pair", 10, 1), ("PAIRS, 10 pairs", 10, 10)):
        parts: list[OpMatches] = []
        for k in range(100):  # the parts MessageBuilder.of_operation builds for 100 published S events
            sids = np.sort(rng.choice(100_000, per, replace=False)).astype(np.int64)
            pr = flat = None
            if pp:
                r = np.array([f"r{rng.integers(10**6)}" for _ in range(pp * per)], dtype=object)
                s_ = np.array([f"e{1000 + k}"] * (pp * per), dtype=object)
                pr = {i: (r[i * pp:(i + 1) * pp], s_[i * pp:(i + 1) * pp]) for i in range(per)}
                flat = (np.arange(per), r, s_)
            parts.append(OpMatches(1000 + k, 1, "publish", "S", f"e{1000 + k}", 0, sids,
                                   np.full(per, max(pp, 1), dtype=np.int64), pr, flat))
        best = [1e9, 1e9, 1e9]
        for _ in range(5):
            t0 = time.perf_counter()
            ch = Chunk.build(parts)
            t1 = time.perf_counter()
            rec = encode(ch.columns())
            t2 = time.perf_counter()
            decode(rec)
            t3 = time.perf_counter()
            best = [min(b, x) for b, x in zip(best, (t1 - t0, t2 - t1, t3 - t2), strict=True)]
        n = len(ch)
        out.append({"messages": label, "bytes_per_message": round((len(rec) + 36) / n, 1),
                    "build_us": round(best[0] * 1e6), "encode_us": round(best[1] * 1e6),
                    "encode_ns_per_message": round(best[1] * 1e9 / n), "decode_us": round(best[2] * 1e6)})
    return out


def reopen(records: int = 8000, record_bytes: int = 60_000) -> dict[str, Any]:
    """Time to open a match log of ``records`` records (what it adds to a restart)."""


    d = Path(tempfile.mkdtemp(prefix="hotjoin-bench-reopen-"))
    try:
        ml = MatchLog(d, log_seq=0, sync=False)
        payload = os.urandom(record_bytes)
        for seq in range(1, records + 1):
            ml.append(seq, seq, payload)
        ml.close()
        size = sum(p.stat().st_size for p in d.glob("*.seg"))
        t0 = time.perf_counter()
        ml = MatchLog(d, log_seq=records, sync=False)
        el = time.perf_counter() - t0
        ml.close()
        return {"match_log_mib": round(size / 2**20), "segments": len(ml.segments), "open_s": round(el, 3)}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def memory_bound(buffer_bytes: int, seconds: float = 30.0) -> dict[str, Any]:
    """Memory bounded in bytes: three unbounded band subscriptions (every pair matches) beside 1,000
    ordinary ones, 2,000 stored S tuples, a listener that never reads, R events published as fast
    as they are acknowledged; returns the server's peak RSS and the delivery ring's bytes."""


    work = Path(tempfile.mkdtemp(prefix="hotjoin-bench-memory-"))
    port = mport = free_port(0)[0]
    while mport == port:  # two probes of port 0 may hand out the same port
        mport = free_port(0)[0]
    proc = start_server(work / "data", port, mport, work / "server.log",
                        ("--delivery-buffer-bytes", str(buffer_bytes),
                         "--delivery-retention-bytes", str(256 << 20)))

    def rss() -> int:
        with open(f"/proc/{proc.pid}/status") as f:
            return int(f.read().split("VmRSS:")[1].split()[0]) * 1024

    def metric(name: str) -> float:
        text = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10).read().decode()
        return next(float(x.split()[-1]) for x in text.splitlines() if x.startswith(name + "{"))

    try:
        with HotjoinClient(f"127.0.0.1:{port}", timeout=120) as c:
            c.wait_ready(60)
            c.create_topic("t", lateness=10**9)
            c.subscribe_many("t", [band((i, i + 1), subscriber="x") for i in range(1000)])
            for _ in range(3):
                c.subscribe("t", band((None, None), subscriber="big"))
            for k in range(2):
                c.publish("t", [event("S", f"s{k}.{i}", float(i % 100), 0.0, time=0) for i in range(1000)])
            stalled = c.listen("t", subscriber="big")
            next(iter(stalled))
            t0, n, peak = time.monotonic(), 0, 0
            while time.monotonic() - t0 < seconds:
                c.publish("t", [event("R", f"r{n + i}", float(i % 100), 0.0, time=1) for i in range(20)])
                n += 20
                peak = max(peak, rss())
            out = {"buffer_bytes": buffer_bytes, "events": n, "pairs": n * 2000 * 3,
                   "rss_peak_mib": round(peak / 2**20), "ring_mib": round(metric("hotjoin_delivery_buffer_bytes") / 2**20),
                   "match_log_mib": round(metric("hotjoin_match_log_bytes") / 2**20)}
            stalled.cancel()
            return out
    finally:
        stop_server(proc)
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--subscriptions", type=int, default=20_000)
    p.add_argument("--stored", type=int, default=50_000)
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--rates", default="5000,0", help="events/s, 0 = as fast as possible")
    p.add_argument("--deliveries", default="affected,pairs")
    p.add_argument("--kind", default="select")
    p.add_argument("--no-listener", action="store_true",
                   help="no listener process: the publish path's cost alone")
    p.add_argument("--repeat", type=int, default=1, help="run each pair this many times")
    p.add_argument("--codec", action="store_true",
                   help="only the match log's record size, encode/decode CPU per batch and the time "
                        "to open a 458 MiB match log")
    p.add_argument("--memory", default=None, metavar="BYTES,...",
                   help="only the memory bound: peak RSS with unbounded band subscriptions for "
                        "these --delivery-buffer-bytes values")
    args = p.parse_args(argv)
    if args.memory:
        for b in args.memory.split(","):
            print(json.dumps(memory_bound(int(b))), flush=True)
        return 0
    if args.codec:
        for r in codec():
            print(json.dumps(r))
        print(json.dumps(reopen()))
        return 0
    rows: list[dict[str, Any]] = []
    work = Path(tempfile.mkdtemp(prefix="hotjoin-bench-durable-"))
    try:
        for delivery, rate, rep in ((d, float(r), k) for d in args.deliveries.split(",")
                                    for r in args.rates.split(",") for k in range(args.repeat)):
            pair: dict[str, dict[str, Any]] = {}
            for mode, extra in MODES.items():
                cfg = ServeBenchConfig(subscriptions=(args.subscriptions,), stored=args.stored,
                                       rate=rate, duration=args.duration, kind=args.kind,
                                       delivery=delivery, extra_server_args=extra,
                                       listener=not args.no_listener)
                run_dir = work / f"{delivery}-{int(rate)}-{mode}-{rep}"
                run_dir.mkdir(parents=True)
                rec = run_one(cfg, args.subscriptions, run_dir, None)
                rec["mode"] = mode
                print(json.dumps(rec), flush=True)
                pair[mode] = rec
            d, m = pair["durable"], pair["memory-only"]
            ref = numpy_reference(cfg, args.subscriptions)  # the same run's brute force
            print(json.dumps(ref), flush=True)
            rows.append({
                "numpy": ref["throughput_events_per_s"],
                "delivery": delivery, "rate": rate or "max",
                "thr_durable": d["throughput_events_per_s"], "thr_memory": m["throughput_events_per_s"],
                "ack_p99": (d["publish_to_ack_ms"].get("p99"), m["publish_to_ack_ms"].get("p99")),
                "del_p99": (d["publish_to_delivery_ms"].get("p99"), m["publish_to_delivery_ms"].get("p99")),
                "messages_per_event": d["messages_per_event"],
            })
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| delivery | rate | events/s durable | events/s memory-only | ratio | ack p99 ms (durable / memory) "
          "| delivery p99 ms (durable / memory) | messages/event | NumPy brute force events/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['delivery']} | {r['rate']} | {r['thr_durable']:.0f} | {r['thr_memory']:.0f} | "
              f"{r['thr_durable'] / max(r['thr_memory'], 1e-9):.2f} | {r['ack_p99'][0]} / {r['ack_p99'][1]} | "
              f"{r['del_p99'][0]} / {r['del_p99'][1]} | {r['messages_per_event']} | {r['numpy']:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
