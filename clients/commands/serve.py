"""``hotjoin serve``: run the gRPC server (SPEC §4) until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import logging
import signal
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the hotjoin gRPC server",
                       description="Serve the hotjoin gRPC API on loopback with embedded persistence.")
    p.add_argument("--data-dir", type=Path, default=Path("hotjoin-data"),
                   help="directory of the topics' logs (default: ./hotjoin-data)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=50051, help="gRPC port (default 50051)")
    p.add_argument("--metrics-port", type=int, default=9464,
                   help="Prometheus /metrics port (default 9464; -1 disables)")
    p.add_argument("--buffer", type=int, default=1024,
                   help="messages buffered per subscription for resuming listeners (default 1024)")
    p.add_argument("--max-workers", type=int, default=64,
                   help="RPC worker threads; each open Listen stream holds one (default 64)")
    p.add_argument("--compact-min-bytes", type=int, default=64 << 20,
                   help="compact a topic's log once it is at least this big (default 64 MiB) ...")
    p.add_argument("--compact-ratio", type=float, default=2.0,
                   help="... and holds this many times more operations than live records "
                        "(default 2.0; 0 disables compaction, also at shutdown)")
    p.add_argument("--compact-all", action="store_true",
                   help="compact topics without retention too (their export then starts with a "
                        "snapshot instead of the full history)")
    p.add_argument("--checkpoint-min-ops", type=int, default=200_000,
                   help="checkpoint a topic whose log is not compacted once this many operations "
                        "(and half as many as its live records) were logged since the last one, so a restart "
                        "replays only the tail (default 200000; 0 disables)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, engine_factory: Any = None) -> int:
    """Start the server and block until a signal stops it."""
    from server.app import HotjoinServer

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    kwargs: dict[str, Any] = {}
    if engine_factory is not None:
        kwargs["engine_factory"] = engine_factory
    srv = HotjoinServer(
        data_dir=args.data_dir, host=args.host, port=args.port,
        metrics_port=None if args.metrics_port < 0 else args.metrics_port,
        max_workers=args.max_workers, buffer_capacity=args.buffer,
        compact_min_bytes=args.compact_min_bytes, compact_ratio=args.compact_ratio,
        compact_all=args.compact_all, checkpoint_min_ops=args.checkpoint_min_ops, **kwargs,
    ).start()
    print(f"hotjoin serving on {srv.target} (data {args.data_dir}, metrics port {srv.metrics_port})",
          flush=True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: srv.stop(1.0))
    srv.wait()
    return 0
