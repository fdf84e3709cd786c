"""``hotjoin demo``: the whole server on its embedded defaults, end to end, in seconds.

Starts ``hotjoin serve`` as a child process (a temporary data directory, loopback ports 50051 and
9464 or free ones when those are taken), creates a topic, registers a generated Table I
band-join workload with the bulk subscribe RPC, starts a listener that prints the first matches
as they arrive plus running totals, publishes stored S tuples and then incoming R tuples with the
streaming publish RPC, prints a summary (events/s, matches, the stats RPC: τ, hotspots, stored
tuples) and shuts everything down cleanly.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from hotjoin.cli.serving import free_port, start_server, stop_server
from hotjoin.clients.errors import CallError
from hotjoin.clients.results import EventRef, Gap, Match

DEFAULT_PORT = 50051
DEFAULT_METRICS_PORT = 9464
TOPIC = "demo"
PER_EVENT = 2  # match lines printed per triggering event


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo", help="start a server, subscribe, publish and listen (end to end)",
        description="The whole server on its embedded defaults, end to end, in seconds: starts "
        "`hotjoin serve` as a child process (a temporary data directory unless --data-dir; "
        "loopback ports 50051 and 9464, or free ones when those are taken), creates a topic, "
        "registers a generated Table I band-join workload with the bulk subscribe RPC, starts a "
        "listener that prints the first matches as they arrive, publishes stored S tuples and "
        "then incoming R tuples with the streaming publish RPC, prints a summary (events/s, "
        "matches, tau, hotspots, stored tuples) and shuts everything down cleanly.")
    p.add_argument("--kind", choices=("band", "select"), default="band",
                   help="subscription kind (select needs the engine's select joins)")
    p.add_argument("--subscriptions", type=int, default=20_000, help="subscriptions registered")
    p.add_argument("--stored", type=int, default=10_000, help="S tuples published first")
    p.add_argument("--events", type=int, default=3_000, help="R tuples published after them")
    p.add_argument("--affected", type=float, default=10.0,
                   help="target subscriptions affected per R tuple (band calibration)")
    p.add_argument("--delivery", choices=("pairs", "affected"), default="pairs",
                   help="the subscriptions' delivery: the pairs, or their count")
    p.add_argument("--batch-size", type=int, default=200, help="events per streamed batch")
    p.add_argument("--show", type=int, default=15, help="print this many match messages")
    p.add_argument("--strategy", default="auto",
                   help="band strategy (auto, BJ-SSI, BJ-Hotspot, ...); auto falls back to "
                        "BJ-SSI while the engine's default is unavailable")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="server data directory, relative to the current directory (default: a "
                        "temporary one, removed at the end)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help="gRPC port (a free one when it is taken)")
    p.add_argument("--metrics-port", type=int, default=DEFAULT_METRICS_PORT,
                   help="Prometheus /metrics port (a free one when it is taken)")
    p.set_defaults(func=_run)


class _Printer:
    """The listener: prints the first ``show`` messages, counts the rest."""

    def __init__(self, stream: Any, show: int) -> None:
        self.stream, self.show = stream, show
        self.messages = self.pairs = self.gaps = self.printed = 0
        self._last_event, self._per_event = "", 0
        self.last_at = time.monotonic()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="demo-listener", daemon=True)

    def _run(self) -> None:
        try:
            for m in self.stream:
                if isinstance(m, Match):
                    self.messages += 1
                    self.pairs += m.count
                    self.last_at = time.monotonic()
                    ev = m.event or EventRef("", "")
                    if ev.id != self._last_event:
                        self._last_event, self._per_event = ev.id, 0
                    self._per_event += 1
                    if self.printed < self.show and self._per_event <= PER_EVENT:
                        self.printed += 1
                        sample = " ".join(f"({r},{s})" for r, s in m.pairs[:3])
                        more = " ..." if len(m.pairs) > 3 else ""
                        print(f"  listener: sub {m.subscription_id:<6} seq {m.seq:<7} "
                              f"{'+' if m.sign > 0 else '-'}{m.count} pair(s) from "
                              f"{ev.side} {ev.id}"
                              f"{': ' + sample + more if sample else ''}", flush=True)
                        if self.printed == self.show:
                            print("  listener: (further matches are counted, not printed)",
                                  flush=True)
                elif isinstance(m, Gap):
                    self.gaps += 1
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            self.error = e


def _publish(hj: Any, batches: Any, total: int, batch_size: int, what: str,
             printer: _Printer) -> tuple[int, float]:
    """Stream ``batches`` and print progress once a second; returns (accepted, seconds)."""
    t0 = last = time.monotonic()
    sent = 0
    with hj.publisher(TOPIC, batch_size=batch_size, max_in_flight=8) as pub:
        for batch in batches:
            pub.publish_batch(batch)
            sent += len(batch)
            now = time.monotonic()
            if now - last >= 1.0:
                last = now
                print(f"  {what}: {sent}/{total} sent, {pub.accepted} durable "
                      f"({sent / (now - t0):.0f}/s); listener {printer.messages} messages, "
                      f"{printer.pairs} pairs", flush=True)
        pub.flush()
        dt = time.monotonic() - t0
        if pub.rejections:
            print(f"  {pub.rejected} events rejected, e.g. {pub.rejections[0].reason}")
        return pub.accepted, dt


def _run(args: argparse.Namespace) -> int:
    from hotjoin.cli.main import CliError

    t_start = time.monotonic()
    tmp = None
    data_dir = args.data_dir.resolve() if args.data_dir is not None else None  # where it is run
    if data_dir is None:
        tmp = tempfile.mkdtemp(prefix="hotjoin-demo-")
        data_dir = Path(tmp) / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    port, ok = free_port(args.port)
    mport, mok = free_port(args.metrics_port, exclude=port)
    print(f"hotjoin demo: server on 127.0.0.1:{port}"
          f"{'' if ok else f' (port {args.port} is taken)'}, metrics on "
          f"http://127.0.0.1:{mport}/metrics{'' if mok else f' (port {args.metrics_port} is taken)'}"
          f", data in {data_dir}", flush=True)
    log_path = data_dir.parent / f"demo-server-{port}.log"
    proc = start_server(data_dir, port, mport, log_path)
    try:
        return _demo(args, f"127.0.0.1:{port}", proc, log_path, t_start)
    except CliError:
        raise
    except CallError as e:
        raise CliError(str(e), code=1) from None
    finally:
        rc = stop_server(proc)
        print(f"server stopped (exit code {rc}); total {time.monotonic() - t_start:.1f}s", flush=True)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _demo(args: argparse.Namespace, target: str, proc: subprocess.Popen[bytes], log_path: Path,
          t_start: float) -> int:
    from hotjoin.cli.main import CliError
    from hotjoin.clients import Client, Unavailable, Unimplemented
    from hotjoin.clients.loadgen import (
        Workload,
        incoming_events,
        pick_strategy,
        stored_events,
        subscription_specs,
    )

    w = Workload(kind=args.kind, subscriptions=args.subscriptions, stored=args.stored,
                 affected=args.affected, delivery=args.delivery, subscriber="demo")
    strategy = pick_strategy(args.kind) if args.strategy == "auto" else {args.kind: args.strategy}
    with Client(target, timeout=120) as hj:
        try:
            hj.wait_ready(30)
        except Unavailable:
            tail = log_path.read_text()[-2000:] if log_path.exists() else ""
            raise CliError(f"the server did not start (exit code {proc.poll()}):\n{tail}", 1) from None
        print(f"server ready after {time.monotonic() - t_start:.1f}s (pid {proc.pid})", flush=True)
        hj.create_topic(TOPIC, lateness=0, strategy=strategy)
        print(f"created topic {TOPIC!r} (strategy {strategy or 'auto'})")
        t0 = time.monotonic()
        specs = subscription_specs(w)
        try:
            ids = hj.subscribe_many(TOPIC, specs)
        except Unimplemented as e:
            raise CliError(f"the server cannot run {args.kind} joins yet: {e.message}", 3) from None
        what = ("band joins s.key - r.key in narrow bands around 40 offsets" if args.kind == "band"
                else "select joins with Table I ranges A, C")
        print(f"registered {len(ids)} {what} ({args.delivery} delivery) in "
              f"{time.monotonic() - t0:.1f}s with one bulk subscribe")
        printer = _Printer(hj.listen(TOPIC, subscriber="demo"), args.show)
        printer.thread.start()
        n_s, dt_s = _publish(hj, stored_events(w, args.batch_size), args.stored, args.batch_size,
                             "stored S", printer)
        print(f"published {n_s} S tuples in {dt_s:.2f}s ({n_s / max(dt_s, 1e-9):.0f} events/s)")
        n_r, dt_r = _publish(hj, incoming_events(w, args.events, batch=args.batch_size), args.events,
                             args.batch_size, "incoming R", printer)
        print(f"published {n_r} R tuples in {dt_r:.2f}s ({n_r / max(dt_r, 1e-9):.0f} events/s), "
              "each batch acknowledged once durable")
        # wait for the listener: until it has been quiet for 2 s after its first message (or
        # for 10 s without any: a busy machine may start delivering late), at most 30 s
        published = last = time.monotonic()
        deadline = published + 30
        while time.monotonic() < deadline:
            now = time.monotonic()
            if (now - printer.last_at >= 2.0 if printer.messages else now - published >= 10.0):
                break
            time.sleep(0.1)
            if time.monotonic() - last >= 1.0:
                last = time.monotonic()
                print(f"  listener catching up: {printer.messages} messages, {printer.pairs} pairs",
                      flush=True)
        printer.stream.cancel()
        printer.thread.join(5)
        if printer.error is not None:
            raise printer.error
        st = hj.stats(TOPIC)
        print(f"listener received {printer.messages} messages, {printer.pairs} result pairs "
              f"({printer.messages / max(n_r, 1):.1f} subscriptions affected per R tuple), "
              f"{printer.gaps} gaps")
        print(f"stats: seq {st.seq}, stored {dict(st.tuples)}, subscriptions "
              f"{ {k: v for k, v in st.subscriptions.items() if v} }, tau {dict(st.tau)}, "
              f"hotspots {dict(st.hotspots)}, listeners {st.listeners}")
        if printer.messages == 0:
            raise CliError("no matches were delivered", 1)
    return 0
