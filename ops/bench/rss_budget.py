"""Server RSS with unbounded band subscriptions in the mix, and SIGTERM at the end.

A ``hotjoin serve`` child holds one topic with ``--subs`` ordinary band joins (narrow bands,
a few pairs per event) and ``--unbounded`` band joins without any bound (every stored tuple of the
other side pairs with every event: an enormous result). ``--stored`` tuples are stored first. Then
this process publishes ``--rate`` events/s in requests of ``--batch`` for ``--seconds``, with one
listener on the unbounded subscriptions that reads slowly (it falls behind and gets Gaps), and
samples the server's RSS every 0.5 s. At the end it sends SIGTERM and times the exit.

The budget: the RSS after setup plus the configured delivery buffer (``--delivery-buffer-bytes``),
the listener drains (``--listener-max-bytes`` each) and ``--slack`` MiB for one request's transient
output. The reference is the same run's RSS after setup, before the unbounded subscriptions see
any event.

Run: ``python -m hotjoin.ops.bench.rss_budget`` (defaults: the issue's 100,000 + 3 at 2,000
events/s for 60 s); prints JSON.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from hotjoin.cli.serving import start_server
from hotjoin.clients.client import HotjoinClient, band

TOPIC = "t"
MIB = 2**20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def measure(n_subs: int, n_unbounded: int, stored: int, rate: float, batch: int, seconds: float,
            buffer_bytes: int, listener_bytes: int, slack_mib: int, shutdown_timeout: float) -> dict[str, Any]:
    rng = np.random.default_rng(1)
    port = mport = _free_port()
    while mport == port:  # two probes of port 0 may hand out the same port
        mport = _free_port()
    with tempfile.TemporaryDirectory() as work:
        proc = start_server(Path(work) / "data", port, mport, Path(work) / "server.log",
                            extra=("--delivery-buffer-bytes", str(buffer_bytes),
                                   "--listener-max-bytes", str(listener_bytes),
                                   "--shutdown-timeout", str(shutdown_timeout)))
        target = f"127.0.0.1:{port}"
        stop = threading.Event()
        got = {"messages": 0, "gaps": 0}
        try:
            with HotjoinClient(target, timeout=600) as c:
                c.wait_ready(120)
                c.create_topic(TOPIC)
                lo = rng.uniform(-5, 5, n_subs)
                c.subscribe_many(TOPIC, [band((x, x + 0.01)) for x in lo.tolist()])
                big = c.subscribe_many(TOPIC, [band(subscriber="firehose") for _ in range(n_unbounded)])
                for i in range(0, stored, 5000):
                    n = min(5000, stored - i)
                    c.publish_columns(TOPIC, np.ones(n, dtype=np.int64), [f"s{i + j}" for j in range(n)],
                                      rng.uniform(0, 1e9, n), np.zeros(n), np.zeros(n, dtype=np.int64))
                rss_setup = _rss(proc.pid)
                print(f"rss_budget: setup done, RSS {rss_setup / MIB:.0f} MiB; publishing {rate:.0f}/s "
                      f"for {seconds:.0f} s", file=sys.stderr)

                def slow_listener() -> None:
                    with HotjoinClient(target, timeout=None) as lc:
                        stream = lc.listen(TOPIC, subscription_ids=big)
                        try:
                            for m in stream:
                                got["messages"] += 1
                                got["gaps"] += int(m.kind == "gap")
                                time.sleep(0.01)
                                if stop.is_set():
                                    break
                        except Exception:  # noqa: BLE001 - the stream ends with the server
                            pass
                        finally:
                            stream.cancel()

                lt = threading.Thread(target=slow_listener, daemon=True)
                lt.start()
                t0 = time.time()
                samples: list[float] = []
                acks: list[float] = []
                next_sample = t0
                k = 0
                while time.time() - t0 < seconds:
                    sched = t0 + k * batch / rate
                    now = time.time()
                    if now >= next_sample:
                        samples.append(_rss(proc.pid) / MIB)
                        next_sample = now + 0.5
                    if now < sched:
                        time.sleep(min(sched - now, 0.05))
                        continue
                    r0 = time.time()
                    c.publish_columns(TOPIC, np.zeros(batch, dtype=np.int64), [f"r{k}.{j}" for j in range(batch)],
                                      rng.uniform(0, 1e9, batch), np.zeros(batch), np.full(batch, 1, dtype=np.int64))
                    acks.append(time.time() - r0)
                    k += 1
                samples.append(_rss(proc.pid) / MIB)
                published = k * batch
            stop.set()
            t_term = time.time()
            proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(shutdown_timeout + 30)
            except Exception:  # noqa: BLE001 - still running: killed below, reported as such
                code = None
            exit_s = time.time() - t_term
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        log_text = (Path(work) / "server.log").read_text(errors="replace")
    budget = rss_setup / MIB + buffer_bytes / MIB + 2 * listener_bytes / MIB + slack_mib
    return {"subs": n_subs, "unbounded": n_unbounded, "stored": stored, "rate_target": rate,
            "published": published, "rate_achieved": round(published / seconds, 1),
            "pairs_per_event_unbounded": stored * n_unbounded,
            "rss_setup_mib": round(rss_setup / MIB, 1), "rss_max_mib": round(max(samples), 1),
            "rss_end_mib": round(samples[-1], 1), "budget_mib": round(budget, 1),
            "within_budget": max(samples) <= budget,
            "ack_p50_ms": round(float(np.percentile(acks, 50)) * 1e3, 1) if acks else None,
            "ack_max_ms": round(max(acks) * 1e3, 1) if acks else None,
            "listener_messages": got["messages"], "listener_gaps": got["gaps"], "sigterm_exit_s": round(exit_s, 2), "exit_code": code,
            "traceback_in_log": "Traceback" in log_text}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--subs", type=int, default=100_000, help="ordinary band joins")
    p.add_argument("--unbounded", type=int, default=3, help="band joins without any bound")
    p.add_argument("--stored", type=int, default=10_000, help="S tuples stored before publishing R events")
    p.add_argument("--rate", type=float, default=2000.0)
    p.add_argument("--batch", type=int, default=20)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--delivery-buffer-bytes", type=int, default=256 * MIB)
    p.add_argument("--listener-max-bytes", type=int, default=4 * MIB)
    p.add_argument("--slack", type=int, default=256, help="MiB allowed for one request's transient output")
    p.add_argument("--shutdown-timeout", type=float, default=10.0)
    a = p.parse_args(argv)
    print(json.dumps(measure(a.subs, a.unbounded, a.stored, a.rate, a.batch, a.seconds,
                             a.delivery_buffer_bytes, a.listener_max_bytes, a.slack, a.shutdown_timeout)))


if __name__ == "__main__":
    main()
