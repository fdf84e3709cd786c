"""``hotjoin serve``: run the gRPC server (docs/how-to/cli.md) until SIGINT/SIGTERM; SIGHUP reloads the
auth file. Security options (TLS, auth, quotas, audit log) are described in docs/how-to/security.md."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the hotjoin gRPC server",
                       description="Serve the hotjoin gRPC API on loopback with embedded persistence.")
    p.add_argument("--data-dir", type=Path, default=Path("hotjoin-data"),
                   help="directory of the topics' logs (default: ./hotjoin-data)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1, loopback only; any other address needs "
                        "TLS and --auth-file, or --allow-insecure)")
    p.add_argument("--port", type=int, default=50051, help="gRPC port (default 50051)")
    p.add_argument("--metrics-port", type=int, default=9464,
                   help="Prometheus /metrics port (default 9464; -1 disables)")
    p.add_argument("--buffer", type=int, default=1024,
                   help="messages buffered per subscription for resuming listeners when the topic "
                        "keeps messages in memory only (--delivery-retention-bytes 0; default 1024)")
    p.add_argument("--max-workers", type=int, default=64,
                   help="threads serving unary RPCs; streams run on the event loop and hold none "
                        "(default 64)")
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
    d = p.add_argument_group("durable delivery (docs/reference/persistence.md)")
    d.add_argument("--delivery-retention-bytes", type=int, default=1 << 30,
                   help="per topic: keep delivery messages on disk for resuming listeners until the "
                        "topic's match log exceeds this size (default 1 GiB; 0: memory only, no "
                        "resume across restarts); a topic may set its own at creation")
    d.add_argument("--delivery-retention-ms", type=int, default=7 * 24 * 3600 * 1000,
                   help="... or until they are older than this (default 7 days; -1: no time limit)")
    d.add_argument("--delivery-segment-bytes", type=int, default=64 << 20,
                   help="match log segment size, the unit of retention (default 64 MiB)")
    d.add_argument("--delivery-buffer-bytes", type=int, default=256 << 20,
                   help="per topic: delivery messages kept in memory (default 256 MiB); older ones "
                        "are read back from the match log, or become a Gap without one")
    d.add_argument("--listener-max-bytes", type=int, default=4 << 20,
                   help="per listener: messages taken from the buffers at once, the listener's "
                        "backlog in memory (default 4 MiB)")
    d.add_argument("--listen-linger-ms", type=int, default=50,  # delivery.LINGER_MS
                   help="per Listen stream, while the server is saturated: wait up to this long "
                        "before a drain, to send the batches pushed meanwhile in one response "
                        "(default 50; 0: never; docs/explanation/choices.md)")
    w = p.add_argument_group("scale-out (docs/how-to/scale-out.md)")
    w.add_argument("--workers", type=int, default=0,
                   help="match each topic in N Ray actors (default 0: in this process, no Ray)")
    w.add_argument("--ray-address", default=None,
                   help="with --workers: an existing Ray cluster ('auto', or HOST:PORT); default: "
                        "start a local Ray instance")
    w.add_argument("--scale-out-scheme", choices=("subscription", "key", "key-replicated"),
                   default="subscription",
                   help="with --workers: 'subscription' (default) shards the subscriptions and "
                        "every worker stores every tuple; 'key' shards the tuples by join key, so "
                        "each event is matched by one worker (a band join subscription replicates "
                        "the S tuples to every worker); 'key-replicated' keeps S on every worker "
                        "and spreads R round robin, which splits hot keys (docs/how-to/scale-out.md)")
    p.add_argument("--shutdown-timeout", type=float, default=10.0,
                   help="on SIGTERM/SIGINT: stop accepting work, let in-flight batches finish or "
                        "answer UNAVAILABLE, end listeners, and exit within this many seconds "
                        "(default 10; docs/reference/errors.md)")
    s = p.add_argument_group("security (docs/how-to/security.md)")
    s.add_argument("--tls-cert", type=Path, help="serve TLS with this certificate chain (PEM)")
    s.add_argument("--tls-key", type=Path, help="the private key of --tls-cert (PEM)")
    s.add_argument("--tls-client-ca", type=Path,
                   help="mutual TLS: require client certificates signed by this CA (PEM)")
    s.add_argument("--auth-file", type=Path,
                   help="principals, token hashes and per-topic rights (TOML or .json); turns on "
                        "authentication for every RPC but health checking; SIGHUP reloads it")
    s.add_argument("--audit-log", type=Path,
                   help="append the audit trail (JSON lines) to this file instead of the log")
    s.add_argument("--allow-insecure", action="store_true",
                   help="allow a non-loopback --host without TLS and/or --auth-file (logs a warning)")
    s.add_argument("--metrics-host", default=None,
                   help="address of the /metrics endpoint, which has no authentication (default: --host)")
    q = p.add_argument_group("quotas, per principal (0 disables a limit; docs/how-to/security.md)")
    q.add_argument("--max-message-bytes", type=int, default=64 << 20,
                   help="largest request message (default 64 MiB)")
    q.add_argument("--max-batch-events", type=int, default=10_000,
                   help="events per publish/delete request or stream message (default and maximum 10000)")
    q.add_argument("--max-subscriptions", type=int, default=0,
                   help="live subscriptions a principal may own over all topics (default 0: unlimited)")
    q.add_argument("--max-listeners", type=int, default=None,
                   help="open Listen streams per principal (default: --max-workers / 2)")
    q.add_argument("--max-streams", type=int, default=None,
                   help="open PublishStream/SubscribeStream calls per principal (default: --max-workers / 4)")
    q.add_argument("--publish-rate", type=float, default=0.0,
                   help="events per second a principal may publish or delete (default 0: unlimited)")
    q.add_argument("--publish-burst", type=float, default=0.0,
                   help="token-bucket size in events (default: max(rate, --max-batch-events))")
    p.set_defaults(func=run)


def require_ray() -> None:
    """``--workers`` runs on Ray, an optional extra: without it, one line says what to install."""
    from hotjoin.cli.main import CliError

    try:
        import ray  # noqa: F401  (imported next by the scale-out runtime anyway)
    except ImportError:
        raise CliError("--workers needs Ray, which is not installed: pip install 'hotjoin[ray]' "
                       "(or leave out --workers to match in this process)") from None


def limits_of(args: argparse.Namespace) -> Any:
    """The ``Limits`` the quota options describe."""
    from hotjoin.server.quotas import Limits

    kw: dict[str, Any] = dict(
        message_bytes=args.max_message_bytes, batch_events=args.max_batch_events,
        subscriptions=args.max_subscriptions, publish_rate=args.publish_rate,
        publish_burst=args.publish_burst)
    if args.max_listeners is not None:
        kw["listeners"] = args.max_listeners
    if args.max_streams is not None:
        kw["streams"] = args.max_streams
    return Limits.for_workers(args.max_workers, **kw)


def _check_port(host: str, port: int, what: str, option: str, more: str = "") -> None:
    """Fail with one line, before gRPC logs its own, when ``host:port`` cannot be bound."""
    import errno
    import socket

    from hotjoin.cli.main import CliError

    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host.strip("[]"), port))
        except OSError as e:
            why = ("address already in use" if e.errno == errno.EADDRINUSE else e.strerror or str(e))
            raise CliError(f"cannot listen on {host}:{port} for {what}: {why} ({option} chooses "
                           f"another{more})", code=1) from None


def run(args: argparse.Namespace, engine_factory: Any = None) -> int:
    """Start the server and block until a signal stops it."""
    from hotjoin.cli.main import CliError
    from hotjoin.server.app import HotjoinServer, TlsFiles
    from hotjoin.server.auth import AuthFileError
    from hotjoin.server.datadir import DataDirInUse
    from hotjoin.server.errors import InvalidArgument
    from hotjoin.server.settings import DeliveryOptions

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    kwargs: dict[str, Any] = {}
    if engine_factory is not None:
        kwargs["engine_factory"] = engine_factory
    if args.workers < 0:
        raise CliError(f"--workers must be >= 0, got {args.workers}")
    if args.ray_address and not args.workers:
        raise CliError("--ray-address needs --workers N")
    if args.scale_out_scheme != "subscription" and not args.workers:
        raise CliError("--scale-out-scheme needs --workers N")
    if args.workers:
        require_ray()
        from hotjoin.server.scaleout.engine import ensure_ray
        from hotjoin.server.scaleout.factory import ShardedEngineFactory

        try:
            ensure_ray(args.ray_address)
        except Exception as e:  # no cluster at that address, or Ray cannot start here
            raise CliError(f"cannot start or reach Ray ({args.ray_address or 'local'}): {e}") from None
        kwargs["engine_factory"] = ShardedEngineFactory(args.workers, args.ray_address,
                                                        scheme=args.scale_out_scheme)
    if (args.tls_cert is None) != (args.tls_key is None):
        raise CliError("TLS needs both --tls-cert and --tls-key")
    if args.tls_client_ca is not None and args.tls_cert is None:
        raise CliError("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key")
    tls = None if args.tls_cert is None else TlsFiles(args.tls_cert, args.tls_key, args.tls_client_ca)
    for flag in ("delivery_retention_bytes", "delivery_buffer_bytes", "listener_max_bytes",
                 "listen_linger_ms"):
        if getattr(args, flag) < 0:
            raise CliError(f"--{flag.replace('_', '-')} must be >= 0")
    if args.delivery_retention_ms < -1 or args.delivery_segment_bytes <= 0:
        raise CliError("--delivery-retention-ms must be >= 0 or -1, --delivery-segment-bytes > 0")
    delivery = DeliveryOptions(args.delivery_retention_bytes, args.delivery_retention_ms,
                               args.delivery_segment_bytes, args.delivery_buffer_bytes,
                               max(args.listener_max_bytes, 1), args.listen_linger_ms)
    _check_port(args.host, args.port, "gRPC", "--port")
    if args.metrics_port > 0:
        _check_port(args.metrics_host or args.host, args.metrics_port, "/metrics",
                    "--metrics-port", "; -1 turns /metrics off")
    try:
        srv = HotjoinServer(
            data_dir=args.data_dir, host=args.host, port=args.port,
            metrics_port=None if args.metrics_port < 0 else args.metrics_port,
            max_workers=args.max_workers, buffer_capacity=args.buffer,
            compact_min_bytes=args.compact_min_bytes, compact_ratio=args.compact_ratio,
            compact_all=args.compact_all, checkpoint_min_ops=args.checkpoint_min_ops,
            tls=tls, auth_file=args.auth_file, limits=limits_of(args), audit_log=args.audit_log,
            allow_insecure=args.allow_insecure, metrics_host=args.metrics_host, delivery=delivery,
            **kwargs,
        ).start()
    except (AuthFileError, InvalidArgument, ValueError, DataDirInUse) as e:
        raise CliError(str(e)) from None
    except RuntimeError as e:  # grpc: "Failed to bind to address ..." (taken since the check)
        raise CliError(f"cannot listen on {args.host}:{args.port}: {e}", code=1) from None
    except OSError as e:
        what = f" {e.filename}" if e.filename else ""
        raise CliError(f"cannot start:{what}: {e.strerror or e} (--data-dir {args.data_dir})",
                       code=1) from None
    metrics_at = "off" if srv.metrics_port is None else f"port {srv.metrics_port}"
    print(f"hotjoin serving on {srv.target} (data directory {args.data_dir}, metrics {metrics_at})",
          flush=True)
    for d in srv.registry.damaged():
        print(f"hotjoin serve: warning: {d.message}", file=sys.stderr, flush=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    signal.signal(signal.SIGHUP, lambda *_: srv.reload_auth())
    while not stop.wait(0.5):
        pass
    return _shut_down(srv, max(0.0, float(args.shutdown_timeout)))


def _shut_down(srv: Any, timeout: float) -> int:
    """Stop ``srv`` (server/app.py ``stop``) within ``timeout`` seconds; past it, exit anyway
    (acknowledged batches are durable, so a hard exit loses nothing acknowledged)."""
    t = threading.Thread(target=srv.stop, args=(timeout * 0.8,), name="hotjoin-shutdown", daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        logging.getLogger("hotjoin.server").error(
            "shutdown did not finish within %.1fs; exiting anyway", timeout)
        logging.shutdown()
        os._exit(1)
    return 0
