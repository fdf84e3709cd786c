"""``hotjoin bench serve``: load test of the gRPC server with separate processes, loopback only.

One run per subscription count: start ``hotjoin serve`` (child process, temporary data dir),
bulk-subscribe N generated subscriptions (``clients.loadgen``), publish the stored S tuples, start
``listeners`` listener processes (Listen by subscriber; with more than one, listener k holds the
subscriptions i with i mod listeners = k, its own subscriber name: the fan-out case) and
``publishers`` publisher processes that stream R tuples over ``PublishStream`` at ``rate``
events/s in total (0 = as fast as they can) for ``duration`` seconds. A listener reads columns
(``listen_columns``, ``listen_form="columns"``) or the repeated-field batches
(``listen(batch=True, batch_pairs=True)``, ``"batch"``). Measured:

- sustained throughput: acknowledged (durable) events / duration;
- publish→ack per batch (client clock: send to durable acknowledgement);
- publish→match (server histogram ``hotjoin_publish_to_match_seconds``, bucket-interpolated);
- publish→delivery per message (listener: arrival − the message's ``received_unix_nanos``; a
  systematic sample of at most ``LATENCY_SAMPLES`` per listener, every k-th message);
- what the listeners received per second (messages and pairs, first to last arrival);
- the server's CPU (``/proc/PID/stat`` utime + stime) from the start of publishing until the
  listeners stop receiving, per event and per delivered message (and pair), and the same-run
  in-process reference: ``Engine.publish_batch`` CPU (``time.process_time``) on the very events
  the publishers had acknowledged, the same subscriptions and stored tuples
  (``engine_reference``);
- server RSS (``/proc/PID/status``), and optionally restart time (``restart_test``).

Percentiles p50/p90/p99/p99.9 go to stdout and JSON; CDFs to a PNG per run.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
LATENCY_SAMPLES = 1 << 20  # publish→delivery samples kept per listener (every k-th message)
UNTHROTTLED_PER_PUBLISHER = 40_000  # events/s a publisher pre-generates for when --rate is 0
TOPIC = "bench"


@dataclass
class ServeBenchConfig:
    subscriptions: tuple[int, ...] = (100_000,)
    stored: int = 100_000
    affected: float = 10.0
    rate: float = 5_000.0
    duration: float = 20.0
    kind: str = "select"
    delivery: str = "affected"
    publishers: int = 2
    batch_size: int = 100
    max_in_flight: int = 4
    restart_test: bool = False
    restart_stored: int = 1_000_000
    strategy: str = "auto"
    listener: bool = True
    seed: int = 1
    # window kind: the topic's lateness (ms); R events carry the publisher's clock minus a random
    # delay of up to lateness/2, so they arrive out of order yet none is late
    lateness: int = 1000
    # publish forms, one run each per subscription count: "columns" (PublishRequest.columns) and/or
    # "events" (one Event message per event, the old form, as a same-run reference)
    wire: tuple[str, ...] = ("columns",)
    extra_server_args: tuple[str, ...] = field(default_factory=tuple)
    # listener processes (each a share of the subscriptions) and how they read: "columns"
    # (listen_columns) or "batch" (listen(batch=True, batch_pairs=True))
    listeners: int = 1
    listen_form: str = "columns"
    # processes the listeners run in (one stream and thread per listener, one channel per
    # process): 100 listener processes would measure 100 Python clients on the server's cores
    listener_processes: int = 2
    # time Engine.publish_batch in process on the same events after each run
    engine_reference: bool = True
    # also run each configuration without a listener first: the server's CPU per delivered
    # message is then the difference per event times events over messages (the delivery's own
    # cost), beside the total CPU per message
    marginal: bool = False


class BenchFailed(RuntimeError):
    """The run could not take place (the server or a child process failed to start); the
    message says which, and ``hotjoin bench serve`` prints it as its one error line."""


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) process ``pid`` has used so far, from ``/proc/PID/stat``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Sampler:
    """A systematic sample of at most ``limit`` values of a stream: every ``stride``-th value,
    the stride doubling (and the sample halving) whenever the sample is full, so each value of
    the stream is equally likely to be kept whatever the batch sizes.

    >>> s = Sampler(limit=4)
    >>> for b in (np.arange(5), np.arange(5, 9)):
    ...     s.add(b)
    >>> s.values().tolist(), s.seen
    ([0, 4, 8], 9)
    """

    def __init__(self, limit: int = LATENCY_SAMPLES) -> None:
        self.limit, self.stride, self.seen = limit, 1, 0
        self.parts: list[np.ndarray] = []
        self.kept = 0

    def add(self, x: np.ndarray) -> None:
        """Offer the values ``x`` (in stream order)."""
        first = (-self.seen) % self.stride
        self.seen += x.shape[0]
        part = x[first::self.stride]
        self.parts.append(part)
        self.kept += part.shape[0]
        while self.kept > self.limit:
            kept = self.values()  # stream indexes 0, stride, 2 stride, ...
            self.parts = [kept[::2]]
            self.kept = self.parts[0].shape[0]
            self.stride *= 2

    def values(self) -> np.ndarray:
        """The sample so far."""
        return np.concatenate(self.parts) if self.parts else np.zeros(0, dtype=np.int64)


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def _metric_sum(text: str, name: str) -> float:
    total = 0.0
    for m in re.finditer(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+-]+)$", text, re.M):
        total += float(m.group(1))
    return total


def _histogram(text: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative bucket counts ``(upper_bounds, counts)`` of histogram ``name`` (all labels)."""
    acc: dict[float, float] = {}
    for m in re.finditer(rf'^{name}_bucket{{[^}}]*le="([^"]+)"[^}}]*}} ([0-9.e+-]+)$', text, re.M):
        le = float("inf") if m.group(1) == "+Inf" else float(m.group(1))
        acc[le] = acc.get(le, 0.0) + float(m.group(2))
    les = np.array(sorted(acc))
    return les, np.array([acc[x] for x in les])


def histogram_percentiles(les: np.ndarray, before: np.ndarray, after: np.ndarray) -> dict[str, float]:
    """Percentiles (ms) of the observations between two scrapes, linear within a bucket."""
    cum = after - before
    out: dict[str, float] = {}
    if cum.size == 0 or cum[-1] <= 0:
        return out
    for p in PERCENTILES:
        target = cum[-1] * p / 100
        i = int(np.searchsorted(cum, target))
        lo_b = 0.0 if i == 0 else les[i - 1]
        hi_b = les[i] if np.isfinite(les[i]) else lo_b
        c0 = 0.0 if i == 0 else cum[i - 1]
        frac = 0.0 if cum[i] == c0 else (target - c0) / (cum[i] - c0)
        out[f"p{p:g}"] = round(float(1000 * (lo_b + frac * (hi_b - lo_b))), 3)
    return out


def percentiles_ms(samples_ns: np.ndarray) -> dict[str, float]:
    if samples_ns.size == 0:
        return {}
    return {f"p{p:g}": round(float(np.percentile(samples_ns, p)) / 1e6, 3) for p in PERCENTILES}


# ---- child processes ---------------------------------------------------------------------------


def _listener_main(target: str, out_path: str, ready: Any, stop: Any, counter: Any,
                   subscribers: str | list[str] = "bench", form: str = "columns") -> None:
    """Listen to every subscription of each of ``subscribers`` (one stream and thread each, one
    channel); record arrival − received per message (a ``Sampler``), messages and pairs received
    and their first and last arrival times."""
    import threading

    from hotjoin.clients import Client, Match, MatchBatch, MatchColumns

    names = [subscribers] if isinstance(subscribers, str) else list(subscribers)
    lat = Sampler()
    lock = threading.Lock()
    tot = {"messages": 0, "first_ns": 0, "last_ns": 0, "pairs": 0, "first_pair_ns": 0,
           "last_pair_ns": 0}

    def follow(hj: Any, name: str) -> None:
        if form == "columns":
            stream: Any = hj.listen_columns(TOPIC, subscriber=name, from_latest=True)
        else:
            stream = hj.listen(TOPIC, subscriber=name, from_latest=True, batch=True, batch_pairs=True)
        threading.Thread(target=lambda: (stop.wait(), stream.cancel()), daemon=True).start()
        attached = False
        try:
            for item in stream:
                now = time.time_ns()
                if not attached:  # the stream is open (its first item is CaughtUp): go
                    attached = True
                    ready.release()
                if isinstance(item, MatchColumns):
                    k, kp = len(item), len(item.pair_row)
                    d = now - item.received_unix_nanos
                elif isinstance(item, MatchBatch):
                    mb = item.wire  # the columns as they came: no Python object per row
                    rns = np.array([o.received_unix_nanos for o in mb.ops], dtype=np.int64)
                    d = now - rns[np.array(mb.op_index, dtype=np.int64)]
                    k, kp = len(mb.op_index), len(mb.r_ids)
                elif isinstance(item, Match):
                    d = np.array([now - item.received_unix_nanos], dtype=np.int64)
                    k, kp = 1, len(item.pairs)
                else:
                    continue
                with lock:
                    lat.add(d)
                    tot["messages"] += k
                    tot["first_ns"] = tot["first_ns"] or now
                    tot["last_ns"] = max(tot["last_ns"], now)
                    if kp:
                        tot["pairs"] += kp
                        tot["first_pair_ns"] = tot["first_pair_ns"] or now
                        tot["last_pair_ns"] = max(tot["last_pair_ns"], now)
                    counter.value = tot["messages"]
        except Exception as e:  # noqa: BLE001 - reported through the result file
            print(f"listener {name}: {e}", file=sys.stderr)

    with Client(target, timeout=None) as hj:
        threads = [threading.Thread(target=follow, args=(hj, name), daemon=True) for name in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        counter.value = tot["messages"]
    np.save(out_path, lat.values().astype(np.int64))
    Path(out_path + ".pairs.json").write_text(json.dumps(tot))


def _publisher_main(target: str, cfg: dict[str, Any], stream_no: int, rate: float, duration: float,
                    out_path: str, start: Any, counter: Any, ready: Any = None,
                    ended: Any = None) -> None:
    """Stream R tuples at ``rate`` events/s (0: unthrottled) for ``duration`` s; record ack
    latency. ``ended`` (a shared double): set to ``time.monotonic()`` once the last batch is
    acknowledged (the end of the publishing window; the clock is the machine's, the same in
    every process)."""
    from hotjoin.clients.client import HotjoinClient
    from hotjoin.clients.loadgen import Workload, incoming_columns, incoming_events

    wire = os.environ.get("HOTJOIN_BENCH_WIRE", "columns")
    lateness = int(os.environ.get("HOTJOIN_BENCH_LATENESS", "0"))
    w = Workload(**cfg)
    bs = int(os.environ.get("HOTJOIN_BENCH_BATCH", "100"))
    n_max = int((rate if rate > 0 else UNTHROTTLED_PER_PUBLISHER) * duration * 1.2) + bs
    gen = incoming_columns if wire == "columns" else incoming_events
    batches: list[Any] = list(gen(w, n_max, stream=stream_no, batch=bs))
    # window joins: event time = the publisher's clock (ms) minus up to lateness/2, so events
    # arrive out of order within the lateness and none is late
    jitter = (np.random.default_rng(100 + stream_no).integers(0, lateness // 2 + 1, bs)
              if w.kind == "window" else None)
    acks: list[int] = []
    acked = 0
    with HotjoinClient(target, timeout=None) as hj:
        pub = hj.publisher(TOPIC, batch_size=bs, max_in_flight=int(os.environ.get("HOTJOIN_BENCH_INFLIGHT", "4")))
        if ready is not None:
            ready.release()  # events generated: the coordinator starts the clock when all are
        start.wait()
        t0 = time.monotonic()
        sent = 0
        for b in batches:
            now = time.monotonic()
            if now - t0 >= duration:
                break
            if rate > 0:
                due = t0 + sent / rate
                if due > now:
                    time.sleep(due - now)
            if jitter is not None:
                times = (time.time_ns() // 1_000_000 - jitter[: len(b.ids) if wire == "columns" else len(b)]).tolist()
                if wire == "columns":
                    del b.times[:]
                    b.times.extend(times)
                else:
                    for e, t in zip(b, times, strict=True):
                        e.time = t
            sent_at = time.monotonic_ns()
            fut = pub.publish_request(b) if wire == "columns" else pub.publish_batch(b)

            def done(f: Any, sent_at: int = sent_at, n: int = len(b.ids) if wire == "columns" else len(b)) -> None:
                nonlocal acked
                if f.exception() is None:
                    acks.append(time.monotonic_ns() - sent_at)
                    acked += n
                    counter.value = acked

            fut.add_done_callback(done)
            sent += len(b.ids) if wire == "columns" else len(b)
        try:
            pub.close()
        except Exception as e:  # noqa: BLE001 - the acks so far are still reported
            print(f"publisher {stream_no}: {e}", file=sys.stderr)
        if ended is not None:
            ended.value = time.monotonic()
    np.save(out_path, np.array(acks, dtype=np.int64))


# ---- coordinator -------------------------------------------------------------------------------


def _progress(msg: str) -> None:
    print(f"[bench serve {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run_one(cfg: ServeBenchConfig, n_subs: int, work: Path, plot_dir: Path | None,
            wire: str = "columns") -> dict[str, Any]:
    """One load test at ``n_subs`` subscriptions with publish form ``wire``; returns the record."""
    from hotjoin.cli.serving import free_port, start_server, stop_server
    from hotjoin.clients.client import HotjoinClient, event, ref
    from hotjoin.clients.loadgen import Workload, pick_strategy, stored_columns, subscription_specs

    data = Path(tempfile.mkdtemp(prefix=f"data-{n_subs}-{wire}-", dir=work))  # one per run
    port, _ = free_port(0)
    mport = port
    while mport == port:  # two probes of port 0 may hand out the same port
        mport, _ = free_port(0, exclude=port)
    target = f"127.0.0.1:{port}"
    proc = start_server(data, port, mport, work / f"server-{n_subs}.log",
                        ("--max-workers", str(32 + 2 * cfg.listeners),  # a thread per stream
                         "--max-listeners", str(16 + cfg.listeners), *cfg.extra_server_args))
    window = cfg.kind == "window"
    lateness = cfg.lateness if window else 0
    rec: dict[str, Any] = {"subscriptions": n_subs, "kind": cfg.kind, "delivery": cfg.delivery, "wire": wire,
                           "lateness": lateness,
                           "stored": cfg.stored, "rate_target": cfg.rate, "duration_s": cfg.duration,
                           "publishers": cfg.publishers, "batch_size": cfg.batch_size}
    w = Workload(kind=cfg.kind, subscriptions=n_subs, stored=cfg.stored, affected=cfg.affected,
                 delivery=cfg.delivery, subscriber="bench", seed=cfg.seed)
    try:
        with HotjoinClient(target, timeout=600) as hj:
            try:
                hj.wait_ready(120)
            except Exception as x:  # say why: the server's own last words
                tail = (work / f"server-{n_subs}.log").read_text(errors="replace")[-2000:]
                raise BenchFailed(f"the bench server (pid {proc.pid}, exit code {proc.poll()}) did not "
                                  f"become ready on port {port}; its log ends:\n{tail}") from x
            strategy = pick_strategy(cfg.kind) if cfg.strategy == "auto" else {cfg.kind: cfg.strategy}
            hj.create_topic(TOPIC, lateness=lateness, strategy=strategy)
            rec["strategy"] = strategy or "auto"
            t0 = time.monotonic()
            chunk = 50_000
            n_lis = max(cfg.listeners, 1)
            for i in range(0, n_subs, chunk):
                specs = subscription_specs(w, i, min(n_subs, i + chunk))
                if n_lis > 1:  # fan-out: listener k holds the subscriptions i = k mod n_lis
                    for k, spec in enumerate(specs):
                        spec.subscriber = f"bench-{(i + k) % n_lis}"
                hj.subscribe_many(TOPIC, specs)
                _progress(f"{min(n_subs, i + chunk)}/{n_subs} subscriptions registered "
                          f"({time.monotonic() - t0:.1f}s)")
            rec["subscribe_s"] = round(time.monotonic() - t0, 2)
            rec["subscribe_per_s"] = round(n_subs / max(rec["subscribe_s"], 1e-9))
            t0 = time.monotonic()
            # window joins: the stored tuples are "now" (the run's R events fall in their window w)
            t_stored = time.time_ns() // 1_000_000 - lateness if window else 0
            with hj.publisher(TOPIC, batch_size=1000, max_in_flight=4) as pub:
                for cb in stored_columns(w, 1000, t_stored):
                    pub.publish_request(cb)
            rec["store_s"] = round(time.monotonic() - t0, 2)
            # warm-up (numba kernels of the R side load or compile on first use): publish and
            # delete a few R tuples before any listener or clock starts
            warm = [event("R", f"warm-{i}", float(i), 0.0, time=t_stored) for i in range(200)]
            hj.publish(TOPIC, warm)
            hj.delete_events(TOPIC, [ref("R", f"warm-{i}") for i in range(200)])
            _progress(f"{n_subs} subscriptions ({rec['subscribe_s']}s), {cfg.stored} stored S tuples "
                      f"({rec['store_s']}s); server RSS {_rss_bytes(proc.pid) / 2**20:.0f} MiB")
            ctx = mp.get_context("spawn")
            stop, start, ready = ctx.Event(), ctx.Event(), ctx.Semaphore(0)
            n_listen = cfg.listeners if cfg.listener else 0
            n_procs = min(n_listen, max(cfg.listener_processes, 1))
            names = ["bench"] if n_listen == 1 else [f"bench-{k}" for k in range(n_listen)]
            lis_counts = [ctx.Value("q", 0) for _ in range(n_procs)]
            lis_outs = [str(work / f"{data.name}-listener-{k}.npy") for k in range(n_procs)]
            procs = []
            lps = []
            for k in range(n_procs):  # listener k of n_listen runs in process k mod n_procs
                lp = ctx.Process(target=_listener_main, args=(
                    target, lis_outs[k], ready, stop, lis_counts[k], names[k::n_procs],
                    cfg.listen_form))
                lp.start()
                lps.append(lp)
            await_children(ready, n_listen, lps, lps, "listener", 120)  # every stream open
            counters = [ctx.Value("q", 0) for _ in range(cfg.publishers)]
            ends = [ctx.Value("d", 0.0) for _ in range(cfg.publishers)]
            generated = ctx.Semaphore(0)
            outs = [str(work / f"{data.name}-pub-{k}.npy") for k in range(cfg.publishers)]
            os.environ["HOTJOIN_BENCH_BATCH"] = str(cfg.batch_size)
            os.environ["HOTJOIN_BENCH_INFLIGHT"] = str(cfg.max_in_flight)
            os.environ["HOTJOIN_BENCH_WIRE"] = wire
            os.environ["HOTJOIN_BENCH_LATENESS"] = str(lateness)
            wcfg = asdict(w)
            for k in range(cfg.publishers):
                p = ctx.Process(target=_publisher_main,
                                args=(target, wcfg, k, cfg.rate / cfg.publishers, cfg.duration, outs[k],
                                      start, counters[k], generated, ends[k]))
                p.start()
                procs.append(p)
            # publishers generate their events before the clock starts
            await_children(generated, len(procs), procs, procs + lps, "publisher", 600)
            # A topic without retention is checkpointed once idle for 5 s after 200,000 logged
            # operations (server/checkpoint.py), which the setup above is. Wait for that
            # checkpoint so its background encode and write do not share the measured window
            # (they would land there or not depending on how long the publishers took).
            t_wait = time.monotonic()
            if n_subs + cfg.stored >= 200_000:
                while (_metric_sum(_scrape(mport), "hotjoin_checkpoints_total") < 1
                       and time.monotonic() - t_wait < 60):
                    time.sleep(0.5)
            rec["checkpoint_wait_s"] = round(time.monotonic() - t_wait, 1)
            before = _scrape(mport)
            cpu0 = cpu_seconds(proc.pid)
            start.set()
            t0 = time.monotonic()
            rss_max, last = 0, 0
            while any(p.is_alive() for p in procs):
                time.sleep(0.5)
                rss_max = max(rss_max, _rss_bytes(proc.pid))
                el = time.monotonic() - t0
                if el - last >= 2.0:
                    last = el
                    n = sum(c.value for c in counters)
                    _progress(f"{el:5.1f}s: {n} events durable ({n / el:.0f}/s), listeners "
                              f"{sum(c.value for c in lis_counts)} messages, server RSS "
                              f"{rss_max / 2**20:.0f} MiB")
                if el > cfg.duration + 120:
                    for p in procs:
                        p.terminate()
            elapsed = time.monotonic() - t0
            for p in procs:
                p.join()
            if all(e.value > 0 for e in ends):
                # the publishing window ends at the last acknowledgement, not at the poll above
                # that saw the publishers gone (every 0.5 s: up to 15 % of a 3 s run)
                elapsed = max(e.value for e in ends) - t0
            # the listeners catch up: wait until they stop receiving (at most 120 s more)
            t_end = time.monotonic()
            seen, still = -1, 0.0
            while n_listen and time.monotonic() - t_end < 120:
                time.sleep(0.25)
                got = sum(c.value for c in lis_counts)
                if got == seen:
                    still += 0.25
                    if still >= 1.0:
                        break
                else:
                    seen, still = got, 0.0
            if not n_listen:
                time.sleep(1.0)
            cpu1 = cpu_seconds(proc.pid)
            after = _scrape(mport)
            stop.set()
            for lp in lps:
                lp.join(30)
                if lp.is_alive():
                    lp.terminate()
            acks = np.concatenate([np.load(o) for o in outs if os.path.exists(o)])
            deliveries = (np.concatenate([np.load(o) for o in lis_outs if os.path.exists(o)])
                          if lis_outs else np.zeros(0, np.int64))
            infos = [json.loads(Path(o + ".pairs.json").read_text()) for o in lis_outs
                     if Path(o + ".pairs.json").exists()]
            acked = [int(c.value) for c in counters]
            published = _metric_sum(after, "hotjoin_events_published_total") - _metric_sum(
                before, "hotjoin_events_published_total")
            messages = _metric_sum(after, "hotjoin_messages_total") - _metric_sum(before, "hotjoin_messages_total")
            les, b0 = _histogram(before, "hotjoin_publish_to_match_seconds")
            _, b1 = _histogram(after, "hotjoin_publish_to_match_seconds")
            gaps = _metric_sum(after, "hotjoin_listener_gaps_total")
            st = hj.stats(TOPIC)
            delivered = sum(i["messages"] for i in infos)
            pairs = sum(i["pairs"] for i in infos)
            cpu = cpu1 - cpu0
            rec["listeners"] = n_listen
            rec["listener_processes"] = n_procs
            rec["listen_form"] = cfg.listen_form
            rec["server_cpu_s"] = round(cpu, 3)
            rec["server_cpu_us_per_event"] = round(1e6 * cpu / max(published, 1), 3)
            if delivered:
                span = max((max(i["last_ns"] for i in infos if i["messages"])
                            - min(i["first_ns"] for i in infos if i["messages"])) / 1e9, 1e-9)
                rec["messages_received_per_s"] = round(delivered / span, 1)
                rec["server_cpu_us_per_message"] = round(1e6 * cpu / delivered, 4)
            if pairs:
                span = max((max(i["last_pair_ns"] for i in infos if i["pairs"])
                            - min(i["first_pair_ns"] for i in infos if i["pairs"])) / 1e9, 1e-9)
                rec["pairs_delivered"] = pairs
                rec["pairs_delivered_per_s"] = round(pairs / span, 1)
                rec["server_cpu_us_per_pair"] = round(1e6 * cpu / pairs, 4)
            if cfg.engine_reference and published:
                rec["engine_reference"] = engine_reference(cfg, w, acked, lateness)
                eng = rec["engine_reference"]["cpu_us_per_event"]
                rec["server_cpu_over_engine"] = round(rec["server_cpu_us_per_event"] / max(eng, 1e-9), 2)
            rejected = _metric_sum(after, "hotjoin_events_rejected_total") - _metric_sum(
                before, "hotjoin_events_rejected_total")
            rec.update({
                "rejected": int(rejected),
                "events": int(published),
                "publish_s": round(elapsed, 3),
                "throughput_events_per_s": round(published / min(elapsed, cfg.duration + 0.5), 1),
                "messages": int(messages),
                "messages_per_event": round(messages / max(published, 1), 2),
                "delivered_messages": int(delivered),
                "gaps": int(gaps),
                "publish_to_ack_ms": percentiles_ms(acks),
                "publish_to_match_ms": histogram_percentiles(les, b0, b1),
                "publish_to_delivery_ms": percentiles_ms(deliveries),
                "server_rss_mib": round(max(rss_max, _rss_bytes(proc.pid)) / 2**20, 1),
                "tau": dict(st.tau), "hotspots": dict(st.hotspots),
            })
            if plot_dir is not None:
                rec["plot"] = _plot(plot_dir, n_subs, cfg, acks, deliveries, wire)
        if cfg.restart_test:
            rec.update(_restart(cfg, w, hj_target=target, proc=proc, data=data, work=work,
                                port=port, mport=mport, n_subs=n_subs))
            proc = rec.pop("_proc")
    finally:
        stop_server(proc)
    return rec


def await_children(sem: Any, count: int, watched: list[Any], everyone: list[Any], what: str,
                   limit: float) -> None:
    """Take ``count`` signals from ``sem`` (each of the ``watched`` child processes gives its
    own when it is ready), at most ``limit`` seconds in all. A watched child that exits first,
    or the limit passing, terminates ``everyone`` and stops the run with an error that says
    which child and its exit code (its traceback is above it, on the same terminal): a child
    that fails at start-up (an unguarded ``__main__`` under ``spawn``, a missing module) would
    otherwise leave the run waiting out the limit and then report figures of nothing."""
    deadline = time.monotonic() + limit
    got = 0
    while got < count:
        if sem.acquire(timeout=0.25):
            got += 1
            continue
        gone = [p for p in watched if p.exitcode is not None]
        late = time.monotonic() > deadline
        if gone or late:
            for p in everyone:
                if p.exitcode is None:
                    p.terminate()
            if gone:
                raise BenchFailed(f"a {what} process (pid {gone[0].pid}) exited with code "
                                  f"{gone[0].exitcode} before it was ready; its error is above")
            raise BenchFailed(f"{count - got} of {count} {what}s were not ready after {limit:g} s")


def _wait_serving(target: str, t0: float, limit: float = 600.0) -> float:
    """Seconds from ``t0`` until the server at ``target`` answers ``GetTopic``, polled every 50 ms
    with a fresh channel each time. (One channel's ``wait_ready`` would add gRPC's reconnect
    backoff, 1 s growing 1.6× per attempt, to the figure: up to several seconds that are the
    client's, not the restart's.)"""
    from hotjoin.clients import Client, Unavailable

    while time.monotonic() - t0 < limit:
        with Client(target, timeout=1.0) as hj:
            try:
                hj.get_topic(TOPIC)
                return time.monotonic() - t0
            except Unavailable:
                pass
        time.sleep(0.05)
    raise TimeoutError(f"the restarted server did not answer within {limit:.0f} s")


def _restart(cfg: ServeBenchConfig, w: Any, hj_target: str, proc: Any, data: Path, work: Path,
             port: int, mport: int, n_subs: int) -> dict[str, Any]:
    """Fill the topic up to ``restart_stored`` stored tuples, kill -9, time the restart."""
    from hotjoin.cli.serving import start_server
    from hotjoin.clients.client import HotjoinClient, event

    with HotjoinClient(hj_target, timeout=600) as hj:
        have = sum(hj.stats(TOPIC).tuples.values())
        t0 = time.monotonic()
        rng = np.random.default_rng(5)
        with hj.publisher(TOPIC, batch_size=2000, max_in_flight=4) as pub:
            for i in range(0, max(0, cfg.restart_stored - have), 2000):
                n = min(2000, cfg.restart_stored - have - i)
                keys = rng.uniform(0, 10_000, n).tolist()
                pub.publish_batch([event("S", f"x{i + k}", keys[k], 0.0, time=2) for k in range(n)])
                if i % 200_000 == 0:
                    _progress(f"restart test: {have + i} stored tuples")
        stored = sum(hj.stats(TOPIC).tuples.values())
        fill_s = time.monotonic() - t0
    rss_before = _rss_bytes(proc.pid)
    proc.kill()  # kill -9: the restart replays the log (no shutdown compaction)
    proc.wait()
    log_bytes = (data / "topics" / TOPIC / "log").stat().st_size
    t0 = time.monotonic()
    proc2 = start_server(data, port, mport, work / f"server-{n_subs}-restart.log")
    restart_s = _wait_serving(hj_target, t0)
    with HotjoinClient(hj_target, timeout=600) as hj:
        st = hj.stats(TOPIC)
    _progress(f"restart with {sum(st.subscriptions.values())} subscriptions and "
              f"{sum(st.tuples.values())} stored tuples ({log_bytes / 2**20:.0f} MiB log): {restart_s:.1f}s")
    return {"restart_s": round(restart_s, 2), "restart_stored": stored,
            "restart_log_mib": round(log_bytes / 2**20, 1), "restart_fill_s": round(fill_s, 1),
            "restart_rss_mib": round(_rss_bytes(proc2.pid) / 2**20, 1),
            "rss_before_kill_mib": round(rss_before / 2**20, 1),
            # how the restart went, in the server's words (which checkpoint, how long a tail)
            "restart_server_log": [line.split(" hotjoin.topic ", 1)[-1] for line in
                                   (work / f"server-{n_subs}-restart.log").read_text(errors="replace").splitlines()
                                   if "restored checkpoint" in line or "replaying the whole log" in line],
            "restart_checkpoint": (data / "topics" / TOPIC / "checkpoint").exists(), "_proc": proc2}


def _plot(plot_dir: Path, n_subs: int, cfg: ServeBenchConfig, acks: np.ndarray, deliveries: np.ndarray,
          wire: str = "columns") -> str:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plot_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, x in (("publish→ack (batch durable)", acks), ("publish→delivery (listener)", deliveries)):
        if x.size:
            xs = np.sort(x) / 1e6
            ax.plot(xs, np.arange(1, xs.size + 1) / xs.size, label=name)
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # labels would overlap
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("fraction ≤ x")
    rate = f"rate {cfg.rate:g}/s" if cfg.rate else "unthrottled"
    ax.set_title(f"hotjoin serve: {n_subs:,} {cfg.kind} joins, {cfg.delivery}, {rate}, {wire}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    path = plot_dir / f"serve-cdf-{cfg.kind}-{cfg.delivery.lower()}-{n_subs}-{int(cfg.rate)}-{wire}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def engine_reference(cfg: ServeBenchConfig, w: Any, acked: list[int], lateness: int = 0
                     ) -> dict[str, Any]:
    """The same-run in-process reference: an ``Engine`` with the run's subscriptions and stored
    tuples, then ``Engine.publish_batch`` (output as the delivery mode needs) on exactly the
    events publisher k had acknowledged (``acked[k]``, regenerated from the same seeds, in
    batches of ``batch_size``); CPU of this process (``time.process_time``) over the publish
    calls only. A window run's events take the stored tuples' time (the server took the
    publishers' clocks). O(the run)."""
    from hotjoin.clients.loadgen import (
        incoming_columns,
        pick_strategy,
        stored_columns,
        subscription_specs,
    )
    from hotjoin.matcher import Engine
    from hotjoin.server.convert import decode_columns, decode_spec

    strategy = pick_strategy(cfg.kind) if cfg.strategy == "auto" else {cfg.kind: cfg.strategy}
    eng = Engine(lateness=lateness, strategy=strategy or "auto")
    subs = [decode_spec(s)[0] for s in subscription_specs(w)]
    eng.subscribe_many(subs)
    t_stored = time.time_ns() // 1_000_000 - lateness if cfg.kind == "window" else 0
    for cb in stored_columns(w, 1000, t_stored):
        b = decode_columns(cb)
        eng.publish_batch(b.side_codes(), b.ids, b.keys, b.values, b.times, None, output="none")
    output = "pairs" if cfg.delivery == "pairs" else "affected"
    batches = []
    rate = cfg.rate / cfg.publishers if cfg.rate else 0
    for k, n_k in enumerate(acked):
        n_max = int((rate if rate > 0 else UNTHROTTLED_PER_PUBLISHER) * cfg.duration * 1.2) + cfg.batch_size
        left = n_k
        for cb in incoming_columns(w, n_max, stream=k, batch=cfg.batch_size):
            if left <= 0:
                break
            b = decode_columns(cb)
            m = min(left, len(b))
            left -= m
            times = np.full(m, t_stored if cfg.kind == "window" else 1, dtype=np.int64)
            batches.append((b.side_codes()[:m], b.ids[:m], b.keys[:m], b.values[:m], times))
    n = sum(len(b[1]) for b in batches)
    rows = 0
    t0 = time.process_time()
    for sides, ids, keys, values, times in batches:
        res = eng.publish_batch(sides, ids, keys, values, times, None, output=output)
        rows += len(res.output.event)
    cpu = time.process_time() - t0
    return {"events": n, "output": output, "output_rows": rows, "cpu_s": round(cpu, 3),
            "cpu_us_per_event": round(1e6 * cpu / max(n, 1), 3)}


def numpy_reference(cfg: ServeBenchConfig, n_subs: int, events: int = 2_000) -> dict[str, Any]:
    """The same-run matching reference (``docs/benchmarks/serve.md``): what a user would write
    instead of the server, a NumPy brute force (join by key, then mask every subscription) over
    the same kind of load-test workload,
    in process, matching only (no ordering, durability or delivery): events/s on ``events`` R
    tuples (``hotjoin.ops.bench.batch``'s reference, which its bench checks against the engine)."""
    from hotjoin.ops.bench.batch import BatchBenchConfig, numpy_runner, workload

    bc = BatchBenchConfig(subscriptions=n_subs, stored=cfg.stored, events=events, batch=events,
                          affected=cfg.affected, kinds=(cfg.kind,), lateness=max(cfg.lateness, 1),
                          seed=cfg.seed)
    load = workload(bc, cfg.kind)
    run_batches, counts, _done, per_batch = numpy_runner(load, cfg.kind, bc)
    t0 = time.perf_counter()
    n = run_batches(0, 1)
    el = time.perf_counter() - t0
    return {"subscriptions": n_subs, "kind": cfg.kind, "contender": "numpy_reference",
            "events": n, "throughput_events_per_s": round(n / el, 1) if el > 0 else None,
            "affected_per_event": round(counts[0] / max(n, 1), 2)}


def run(cfg: ServeBenchConfig, json_path: str | None = None, plot_dir: str | None = None) -> dict[str, Any]:
    """Every subscription count of ``cfg``; returns ``{"config", "machine", "records"}``."""
    work = Path(tempfile.mkdtemp(prefix="hotjoin-bench-serve-"))
    records = []
    references = []
    try:
        for n in cfg.subscriptions:
            for wire in cfg.wire:
                base = None
                if cfg.marginal and cfg.listener:
                    base = run_one(replace(cfg, listener=False, engine_reference=False), n, work,
                                   None, wire)
                rec = run_one(cfg, n, work, Path(plot_dir) if plot_dir else None, wire)
                if base is not None:
                    rec["no_listener_cpu_us_per_event"] = base["server_cpu_us_per_event"]
                    extra = (rec["server_cpu_us_per_event"] - base["server_cpu_us_per_event"]) * rec["events"]
                    if rec.get("delivered_messages"):
                        rec["delivery_cpu_us_per_message"] = round(extra / rec["delivered_messages"], 4)
                    if rec.get("pairs_delivered"):
                        rec["delivery_cpu_us_per_pair"] = round(extra / rec["pairs_delivered"], 4)
                records.append(rec)
                _progress(json.dumps(rec))
            references.append(numpy_reference(cfg, n))
            _progress(json.dumps(references[-1]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = {"config": asdict(cfg), "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
           "records": records, "references": references}
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(out, indent=1))
    return out
