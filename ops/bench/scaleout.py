"""``hotjoin bench scaleout``: a matching-bound topic on 1 and 2 Ray workers against one process.

What is timed, all in one run on one workload (docs/how-to/scale-out.md, "Model"):

- **single**: ``Engine.publish_affected`` per event in this process (the single-process server's
  matching, without its front end);
- **single, batch path**: ``Engine.publish_batch`` in batches of ``--batch`` (what the server's
  columnar publish calls, ``server/batch_apply.py``), the same events under fresh ids;
- **N workers, batch path**: the scale-out engine's ``publish_batch`` likewise (one RPC per worker
  per batch, each worker on the engine's compiled batch path): the server's path with
  ``--workers``. ``--scheme subscription`` (``ShardedEngine``: every worker stores every tuple and
  matches its share of the subscriptions) or ``--scheme key`` (``KeyShardedEngine``: each event
  goes to the worker of its key, which holds every subscription);
- **N workers**: ``ShardedEngine.publish_ops`` with batches of ``--batch`` events (one RPC per
  batch per worker), for each N of ``--workers``; and the same with one call per event
  (``publish_affected``, what ``server/topic.py`` does per event today);
- **worker matching cost**: ``Engine.publish_affected`` in process with what worker 0 of N
  holds (subscription scheme: 1/N of the subscriptions, every event; key scheme: every
  subscription, the stored tuples and events of its keys), per topic event;
- **front end alone**: ``server.topic.Topic.publish`` (validation, ordering, log write + fsync,
  delivery hub) in batches of ``--batch`` over an engine without subscriptions;
- **reference**: the NumPy brute force a user would write (for each stored partner of the
  event's key, mask every subscription's ranges), on a sample of events, whose affected counts
  must equal the engine's.

The workload: ``--subscriptions`` select joins with random ranges A, C (widths up to
``--width`` of the value domain [0, 100]), ``--stored`` R tuples over ``--keys`` keys, then
``--events`` S events (AFFECTED delivery, the output cost excluded as in paper 004 §5).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from hotjoin.cli.main import CliError
from hotjoin.matcher.engine import Engine
from hotjoin.matcher.model import Event, Range, SelectJoin
from hotjoin.server.scaleout.engine import ShardedEngine, ensure_ray
from hotjoin.server.scaleout.key_engine import KeyShardedEngine, worker_of_keys


def _progress(msg: str) -> None:
    print(f"[scaleout] {msg}", flush=True)


def workload(n_subs: int, n_stored: int, n_events: int, n_keys: int, width: float,
             seed: int = 1) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    alo = rng.uniform(0, 100, n_subs)
    clo = rng.uniform(0, 100, n_subs)
    ahi = alo + rng.uniform(0, width, n_subs)
    chi = clo + rng.uniform(0, width, n_subs)
    subs = [SelectJoin(a=Range(float(a), float(b)), c=Range(float(c), float(d)))
            for a, b, c, d in zip(alo.tolist(), ahi.tolist(), clo.tolist(), chi.tolist(), strict=True)]
    rk = rng.integers(0, n_keys, n_stored).astype(float)
    rv = rng.uniform(0, 100, n_stored)
    stored = [Event("R", f"r{i}", float(k), float(v), 0) for i, (k, v) in enumerate(zip(rk, rv, strict=True))]
    sk = rng.integers(0, n_keys, n_events).astype(float)
    sv = rng.uniform(0, 100, n_events)
    events = [Event("S", f"s{i}", float(k), float(v), 1 + i) for i, (k, v) in enumerate(zip(sk, sv, strict=True))]
    return {"subs": subs, "stored": stored, "events": events,
            "cols": (alo, ahi, clo, chi), "rk": rk, "rv": rv}


def brute_force_affected(w: dict[str, Any], ev: Event) -> int:
    """Total pairs an event forms over all subscriptions, by NumPy masks (the user's way)."""
    alo, ahi, clo, chi = w["cols"]
    cmask = (clo <= ev.value) & (ev.value <= chi)
    total = 0
    for v in w["rv"][w["rk"] == ev.key].tolist():
        total += int(np.count_nonzero(cmask & (alo <= v) & (v <= ahi)))
    return total


_last_cpu = [0.0]


def _timed_single(eng: Engine, events: list[Event]) -> tuple[float, int]:
    """Wall seconds and pairs of publishing ``events`` one by one (CPU seconds in ``_last_cpu``)."""
    t0, c0 = time.perf_counter(), time.process_time()
    pairs = 0
    for ev in events:
        pairs += int(eng.publish_affected(ev).counts.sum())
    _last_cpu[0] = time.process_time() - c0
    return time.perf_counter() - t0, pairs


def _columns(events: list[Event], prefix: str, t0: int) -> tuple[np.ndarray, ...]:
    """``events`` as ``publish_batch`` columns, with fresh ids (``prefix``) and times from ``t0``
    (the same keys and values: for select joins S tuples never join S tuples, so the matches are
    those of the original events)."""
    n = len(events)
    return (np.ones(n, dtype=np.int8), np.array([f"{prefix}{i}" for i in range(n)], dtype=object),
            np.array([e.key for e in events]), np.array([e.value for e in events]),
            np.arange(t0, t0 + n, dtype=np.int64))


def _timed_batches(eng: Any, cols: tuple[np.ndarray, ...], batch: int) -> tuple[float, float, int]:
    """Wall and CPU seconds and pairs of ``publish_batch`` (AFFECTED output) over ``cols`` in
    batches of ``batch``: the server's path (``server/batch_apply.py``)."""
    t0, c0 = time.perf_counter(), time.process_time()
    pairs = 0
    n = cols[0].shape[0]
    for i in range(0, n, batch):
        res = eng.publish_batch(*(c[i : i + batch] for c in cols), output="affected")
        pairs += int(np.asarray(res.output.count).sum())
    return time.perf_counter() - t0, time.process_time() - c0, pairs


def _repeated_batches(eng: Any, events: list[Event], t0: int, batch: int, repeat: int,
                      pairs: int, what: str) -> tuple[float, float, list[float]]:
    """``repeat`` timed passes of ``events`` through ``publish_batch`` (fresh ids, later times
    each pass; each must give ``pairs`` pairs): the median pass's wall and CPU seconds and every
    pass's events/s. The machines are shared and noisy, so one pass proves little."""
    runs: list[tuple[float, float]] = []
    n = len(events)
    for r in range(repeat):
        dt, cpu, got = _timed_batches(eng, _columns(events, f"b{r}.", t0 + r * (n + 10)), batch)
        assert got == pairs, f"{what}: {got} pairs, one at a time {pairs}"
        runs.append((dt, cpu))
    runs.sort()
    dt, cpu = runs[len(runs) // 2]
    return dt, cpu, sorted(n / d for d, _ in runs)


def _front_end_alone(n_events: int, batch: int) -> float:
    """Seconds per event of Topic.publish (order, log, fsync, hub) with no subscriptions."""
    # the server stack loads only when this runs: the CLI imports this module to build its
    # parser, before it sets gRPC's log level
    from hotjoin.proto import hotjoin_pb2 as pb
    from hotjoin.server.settings import TopicSettings
    from hotjoin.server.topic import Topic

    with tempfile.TemporaryDirectory() as d:
        topic = Topic("bench", 0, None, {}, Path(d), TopicSettings(engine_factory=Engine))
        evs = [pb.Event(side=pb.SIDE_S, id=f"f{i}", key=float(i % 97), value=1.0, time=i)
               for i in range(n_events)]
        t0 = time.perf_counter()
        for i in range(0, n_events, batch):
            topic.publish(evs[i : i + batch], time.time_ns())
        dt = time.perf_counter() - t0
        topic.close()
    return dt / n_events


def run(subscriptions: int, stored: int, events: int, keys: int, width: float, batch: int,
        workers: list[int], per_event: int, sample: int, scheme: str = "subscription",
        repeat: int = 3) -> dict[str, Any]:
    _progress(f"workload: {subscriptions:,} select joins, {stored:,} stored, {events:,} events; "
              f"scale-out scheme: {scheme}")
    w = workload(subscriptions, stored, events, keys, width)
    facade = KeyShardedEngine if scheme == "key" else ShardedEngine
    res: dict[str, Any] = {"config": {"subscriptions": subscriptions, "stored": stored,
                                      "events": events, "keys": keys, "width": width,
                                      "batch": batch, "workers": workers, "scheme": scheme,
                                      "repeat": repeat},
                           "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                       "platform": platform.platform()}}
    # single process
    eng = Engine()
    eng.subscribe_many(w["subs"])
    eng.publish_many(w["stored"], match=False)
    _timed_single(eng, [Event("S", f"warm{i}", 0.0, 50.0, 0) for i in range(20)])
    dt, pairs = _timed_single(eng, w["events"])
    res["single"] = {"events_per_s": events / dt, "us_per_event": 1e6 * dt / events, "pairs": pairs,
                     "cpu_us_per_event": 1e6 * _last_cpu[0] / events}
    _progress(f"single process: {events / dt:,.0f} events/s, {1e6 * _last_cpu[0] / events:.0f} us CPU "
              f"per event ({pairs:,} pairs)")
    # single process, the server's batch path (fresh ids and later times, same keys and values)
    t_batch = w["events"][-1].time + 10 + 2 * batch
    # warm-up: the batch kernels load on first use, and the first full-size batches page-fault
    # their output arrays (a server is past both after its first seconds)
    warm = _columns(w["events"][: 2 * batch], "wb", t_batch - 2 * batch - 10)
    _timed_batches(eng, warm, batch)
    dt_b, cpu_b, runs_b = _repeated_batches(eng, w["events"], t_batch, batch, repeat, pairs,
                                            "single process, batch path")
    res["single_batch"] = {"events_per_s": events / dt_b, "us_per_event": 1e6 * dt_b / events,
                           "cpu_us_per_event": 1e6 * cpu_b / events, "runs_events_per_s": runs_b}
    _progress(f"single process, publish_batch: {events / dt_b:,.0f} events/s (median of "
              f"{repeat}: " + ", ".join(f"{x:,.0f}" for x in runs_b) + f"), "
              f"{1e6 * cpu_b / events:.0f} us CPU per event")
    # reference: NumPy brute force on a sample, checked against the engine
    idx = list(range(0, events, max(1, events // sample)))[:sample]
    check = Engine()
    check.subscribe_many(w["subs"])
    check.publish_many(w["stored"], match=False)
    t0 = time.perf_counter()
    bf = [brute_force_affected(w, w["events"][i]) for i in idx]
    bf_dt = (time.perf_counter() - t0) / len(idx)
    got = []
    for i, ev in enumerate(w["events"]):  # the engine stores S too; brute force only pairs with R
        out = check.publish_affected(ev)
        if i in idx:
            got.append(int(out.counts.sum()))
    assert bf == got, "brute force and engine disagree"
    del check
    res["numpy_brute_force"] = {"events_per_s": 1 / bf_dt, "us_per_event": 1e6 * bf_dt,
                                "sample": len(idx)}
    _progress(f"NumPy brute force: {1 / bf_dt:,.0f} events/s (sample of {len(idx)}, counts equal)")
    # one worker's matching: what worker 0 of n holds, in process (per topic event)
    res["worker_matching"] = {}
    for n in sorted(set(workers)):
        part = Engine()
        if scheme == "key":
            part.subscribe_many(w["subs"])
            mine = worker_of_keys(w["rk"], n) == 0
            part.publish_many([e for e, m in zip(w["stored"], mine.tolist(), strict=True) if m],
                              match=False)
            own = worker_of_keys(np.array([e.key for e in w["events"]]), n) == 0
            evs = [e for e, m in zip(w["events"], own.tolist(), strict=True) if m]
            what = f"the keys of worker 0 of {n}"
        else:
            part.subscribe_many(w["subs"][: len(w["subs"]) // n])
            part.publish_many(w["stored"], match=False)
            evs = w["events"]
            what = f"1/{n} of the subscriptions"
        _timed_single(part, [Event("S", f"warm{i}", 0.0, 50.0, 0) for i in range(20)])  # as single
        dt_p, _ = _timed_single(part, evs)
        res["worker_matching"][str(n)] = {"us_per_event": 1e6 * dt_p / events,
                                          "cpu_us_per_event": 1e6 * _last_cpu[0] / events}
        _progress(f"matching {what}: {1e6 * dt_p / events:.1f} us per topic event")
        del part
    # front end alone
    fe = _front_end_alone(max(events, 2000), batch)
    res["front_end"] = {"us_per_event": 1e6 * fe, "events_per_s": 1 / fe}
    _progress(f"front end alone (order, log + fsync, hub): {1e6 * fe:.1f} us/event")
    # N workers
    ensure_ray()
    res["workers"] = {}
    for n in workers:
        sh = facade(workers=n, worker_cpus=0)
        sh.subscribe_many(w["subs"])
        sh.publish_many(w["stored"], match=False)
        # every worker's one-at-a-time path loads its kernels here (keys spread over workers)
        sh.publish_ops([Event("S", f"warm{i}", float(i % keys), 50.0, 0) for i in range(40)],
                       "affected")
        cpu0 = [s["cpu_seconds"] for s in sh.refresh_status()]
        t0, c0 = time.perf_counter(), time.process_time()
        pairs_n = 0
        for i in range(0, events, batch):
            for o in sh.publish_ops(w["events"][i : i + batch], "affected"):
                pairs_n += int(o.counts.sum())
        dt_n, front_cpu = time.perf_counter() - t0, time.process_time() - c0
        worker_cpu = [s["cpu_seconds"] - c for s, c in zip(sh.refresh_status(), cpu0, strict=True)]
        assert pairs_n == pairs, f"{n} workers: {pairs_n} pairs, single process {pairs}"
        # the server's path: publish_batch, one RPC per worker per batch
        _timed_batches(sh, warm, batch)
        cpu0 = [s["cpu_seconds"] for s in sh.refresh_status()]
        dt_nb, front_b, runs_nb = _repeated_batches(sh, w["events"], t_batch, batch, repeat, pairs,
                                                    f"{n} workers, batch path")
        worker_b = [(s["cpu_seconds"] - c) / repeat
                    for s, c in zip(sh.refresh_status(), cpu0, strict=True)]
        _progress(f"{n} worker(s), publish_batch: {events / dt_nb:,.0f} events/s (median of {repeat}: "
                  + ", ".join(f"{x:,.0f}" for x in runs_nb) + "); CPU per event: front "
                  f"end {1e6 * front_b / events:.0f} us, workers "
                  + ", ".join(f"{1e6 * c / events:.0f}" for c in worker_b) + " us")
        t_end = t_batch + repeat * (events + 10)
        extra = [Event("S", f"x{i}", e.key, e.value, t_end + 1 + i)
                 for i, e in enumerate(w["events"][:per_event])]
        t0 = time.perf_counter()
        for ev in extra:
            sh.publish_affected(ev)
        dt_e = (time.perf_counter() - t0) / max(len(extra), 1)
        mem = sh.memory_bytes()
        # a worker crash: kill worker 0, then time the next batch (restart + snapshot + tail + batch)
        t_kill = t_end + 10 + per_event
        nxt = [Event("S", f"k{i}", e.key, e.value, t_kill + i) for i, e in enumerate(w["events"][:batch])]
        tail_before = sh.workers_info()[0]["tail_ops"]
        sh.kill_worker(0)
        t0 = time.perf_counter()
        sh.publish_ops(nxt, "affected")
        kill_s = time.perf_counter() - t0
        info = sh.workers_info()[0]
        sh.close()
        res["workers"][str(n)] = {"events_per_s": events / dt_n, "us_per_event": 1e6 * dt_n / events,
                                  "per_event_call_us": 1e6 * dt_e, "memory_bytes": mem,
                                  "front_end_cpu_us_per_event": 1e6 * front_cpu / events,
                                  "worker_cpu_us_per_event": [1e6 * c / events for c in worker_cpu],
                                  # with a core per worker and one for the front end
                                  "modelled_events_per_s": events / max(front_cpu, *worker_cpu),
                                  "kill_batch_seconds": kill_s,
                                  "recovery_seconds": info["last_recovery_seconds"],
                                  "tail_ops_replayed": tail_before,
                                  "batch": {"events_per_s": events / dt_nb,
                                            "runs_events_per_s": runs_nb,
                                            "front_end_cpu_us_per_event": 1e6 * front_b / events,
                                            "worker_cpu_us_per_event": [1e6 * c / events for c in worker_b],
                                            "modelled_events_per_s": events / max(front_b, *worker_b)}}
        _progress(f"{n} worker(s): CPU per event: front end {1e6 * front_cpu / events:.0f} us, workers "
                  + ", ".join(f"{1e6 * c / events:.0f}" for c in worker_cpu) + " us; modelled with a "
                  f"core each: {events / max(front_cpu, *worker_cpu):,.0f} events/s")
        _progress(f"{n} worker(s), batches of {batch}: {events / dt_n:,.0f} events/s; one call per "
                  f"event: {1e6 * dt_e:.0f} us/event; worker memory {mem >> 20} MiB; a batch of {batch} "
                  f"after killing worker 0 took {kill_s:.2f}s (restart {info['last_recovery_seconds']:.2f}s)")
    r = res["workers"]
    res["ratios"] = {}
    if "1" in r and "2" in r:
        res["ratios"]["2_workers_vs_1_worker"] = r["2"]["events_per_s"] / r["1"]["events_per_s"]
    if "2" in r:
        res["ratios"]["2_workers_vs_single"] = r["2"]["events_per_s"] / res["single"]["events_per_s"]
    if "1" in r and "2" in r:
        res["ratios"]["modelled_2_vs_1_worker"] = r["2"]["modelled_events_per_s"] / r["1"]["modelled_events_per_s"]
    if "2" in r:
        res["ratios"]["modelled_2_workers_vs_single"] = (r["2"]["modelled_events_per_s"] * 1e-6
                                                        * res["single"]["cpu_us_per_event"])
    if "1" in r and "2" in r:
        res["ratios"]["batch_2_workers_vs_1_worker"] = (r["2"]["batch"]["events_per_s"]
                                                       / r["1"]["batch"]["events_per_s"])
    if "2" in r:
        res["ratios"]["batch_2_workers_vs_single"] = (r["2"]["batch"]["events_per_s"]
                                                     / res["single_batch"]["events_per_s"])
        res["ratios"]["batch_modelled_2_workers_vs_single"] = (
            r["2"]["batch"]["modelled_events_per_s"] * 1e-6 * res["single_batch"]["cpu_us_per_event"])
    res["ratios"]["single_vs_numpy"] = res["single"]["events_per_s"] / res["numpy_brute_force"]["events_per_s"]
    _progress("ratios: " + ", ".join(f"{k} {v:.2f}" for k, v in res["ratios"].items()))
    return res


def plot_runs(runs: list[tuple[str, dict[str, Any]]], path: str | Path) -> None:
    """Grouped bars of the batch path's events/s per run (single process, 1 worker, 2 workers;
    whiskers: the slowest and fastest pass), each run's NumPy brute force in its label."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars = [("single process", lambda r: r["single_batch"]),
            ("1 worker", lambda r: r["workers"].get("1", {}).get("batch")),
            ("2 workers", lambda r: r["workers"].get("2", {}).get("batch"))]
    fig, ax = plt.subplots(figsize=(max(6.4, 2.4 * len(runs)), 4.6))
    width = 0.8 / len(bars)
    for b, (name, get) in enumerate(bars):
        xs, ys, lo, hi = [], [], [], []
        for i, (_, res) in enumerate(runs):
            rec = get(res)
            if not rec:
                continue
            passes = rec.get("runs_events_per_s") or [rec["events_per_s"]]
            xs.append(i + (b - 1) * width)
            ys.append(rec["events_per_s"])
            lo.append(rec["events_per_s"] - min(passes))
            hi.append(max(passes) - rec["events_per_s"])
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=3, label=name)
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels([f"{label}\nNumPy {res['numpy_brute_force']['events_per_s']:,.0f}/s"
                        for label, res in runs], fontsize=8)
    ax.set_ylabel("events/s (publish_batch, median pass)")
    ax.set_title("Scale-out: 500,000 select joins, 2 cores")
    ax.legend()
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--subscriptions", type=int, default=500_000)
    p.add_argument("--stored", type=int, default=2_000, help="stored R tuples")
    p.add_argument("--events", type=int, default=3_000, help="published S events (timed)")
    p.add_argument("--keys", type=int, default=200, help="distinct join keys")
    p.add_argument("--width", type=float, default=2.0, help="widest range A, C in [0, 100]")
    p.add_argument("--batch", type=int, default=500, help="events per batch RPC")
    p.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    p.add_argument("--per-event", type=int, default=200, help="events timed with one call each")
    p.add_argument("--sample", type=int, default=20, help="events timed by the NumPy brute force")
    p.add_argument("--repeat", type=int, default=3,
                   help="timed passes of the batch path per configuration (the median is kept)")
    p.add_argument("--scheme", choices=("subscription", "key"), default="subscription",
                   help="scale-out scheme of the workers (docs/how-to/scale-out.md)")
    p.add_argument("--quick", action="store_true", help="a smoke run: 20,000 subscriptions, 300 events")
    p.add_argument("--json", dest="json_path", help="write the results as JSON to this path")
    p.add_argument("--plot", help="draw this run's batch-path bars to this PNG")
    p.add_argument("--plot-from", default="",
                   help="comma-separated JSON files of earlier runs: plot them together to "
                        "--plot (labels: scheme, width, batch) instead of running")


def run_cli(args: argparse.Namespace) -> int:
    try:
        workers = [int(x) for x in args.workers.split(",") if x]
    except ValueError:
        raise CliError(f"--workers must be comma-separated integers, got {args.workers!r}") from None
    if not workers or min(workers) < 1:
        raise CliError("--workers needs counts >= 1")
    if args.plot_from:
        if not args.plot:
            raise CliError("--plot-from needs --plot PATH")
        runs = []
        for f in (x for x in args.plot_from.split(",") if x):
            try:
                res = json.loads(Path(f).read_text())
            except (OSError, ValueError) as e:
                raise CliError(f"cannot read {f}: {e}") from None
            c = res["config"]
            runs.append((f"{c.get('scheme', 'subscription')}, width {c['width']:g}, "
                         f"batch {c['batch']:,}", res))
        plot_runs(runs, args.plot)
        return 0
    subs, events, per_event = args.subscriptions, args.events, args.per_event
    if args.quick:
        subs, events, per_event = 20_000, 300, 50
    res = run(subs, args.stored, events, args.keys, args.width, args.batch, workers, per_event,
              min(args.sample, events), args.scheme, max(1, args.repeat))
    print(json.dumps(res["ratios"]))
    if args.json_path:
        Path(args.json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_path).write_text(json.dumps(res, indent=2))
    if args.plot:
        c = res["config"]
        plot_runs([(f"{c['scheme']}, width {c['width']:g}, batch {c['batch']:,}", res)], args.plot)
    return 0


def to_markdown(res: dict[str, Any]) -> str:
    """The figures of one run as the table of docs/how-to/scale-out.md."""
    s, fe, r = res["single"], res["front_end"], res["ratios"]
    lines = ["| measured in one run | wall clock | CPU time |", "|---|---|---|",
             f"| single process, `Engine.publish_affected` per event | {s['events_per_s']:,.0f} events/s "
             f"({s['us_per_event']:,.0f} µs/event) | {s['cpu_us_per_event']:,.0f} µs/event |",
             f"| reference: NumPy brute force (sample of {res['numpy_brute_force']['sample']}, same counts) | "
             f"{res['numpy_brute_force']['events_per_s']:,.0f} events/s | — |",
             f"| single process, `Engine.publish_batch` (the server's path) | "
             f"{res['single_batch']['events_per_s']:,.0f} events/s | "
             f"{res['single_batch']['cpu_us_per_event']:,.0f} µs/event |",
             f"| front end alone (`Topic.publish`: validation, seq, log + fsync, hub; batches of "
             f"{res['config']['batch']}) | {fe['us_per_event']:,.1f} µs/event | — |"]
    for n, m in res["worker_matching"].items():
        held = (f"the keys of worker 0 of {n}, all subscriptions" if res["config"].get("scheme") == "key"
                else f"1/{n} of the subscriptions")
        lines.append(f"| one worker's matching: {held}, in process (per topic event) | "
                     f"{m['us_per_event']:,.0f} µs/event | {m['cpu_us_per_event']:,.0f} µs/event |")
    for n, x in res["workers"].items():
        cpu = ", ".join(f"{c:,.0f}" for c in x["worker_cpu_us_per_event"])
        b = x["batch"]
        bcpu = ", ".join(f"{c:,.0f}" for c in b["worker_cpu_us_per_event"])
        lines.append(f"| {n} Ray worker(s), `publish_batch` (the server's path) | "
                     f"{b['events_per_s']:,.0f} events/s | front end "
                     f"{b['front_end_cpu_us_per_event']:,.0f}, workers {bcpu} µs/event |")
        lines.append(f"| {n} Ray worker(s), `publish_ops` batches | {x['events_per_s']:,.0f} events/s | "
                     f"front end {x['front_end_cpu_us_per_event']:,.0f}, workers {cpu} µs/event → "
                     f"{x['modelled_events_per_s']:,.0f} events/s with a core each |")
        lines.append(f"| {n} Ray worker(s), one call per event (today's `topic.py`) | "
                     f"{x['per_event_call_us']:,.0f} µs/event | — |")
        lines.append(f"| {n} Ray worker(s): batch after killing worker 0 (restart from snapshot + "
                     f"{x['tail_ops_replayed']:,} tail ops) | {x['kill_batch_seconds']:.1f} s "
                     f"(restart {x['recovery_seconds']:.1f} s) | — |")
    lines += ["", "| target | wall clock here | modelled from CPU time, a core each |",
              "|---|---|---|"]
    if "2_workers_vs_1_worker" in r:
        lines.append(f"| 2 workers vs 1 worker ≥ 1.6× | {r['2_workers_vs_1_worker']:.2f}× | "
                     f"{r['modelled_2_vs_1_worker']:.2f}× |")
    if "2_workers_vs_single" in r:
        lines.append(f"| 2 workers vs single process ≥ 1.4× | {r['2_workers_vs_single']:.2f}× | "
                     f"{r['modelled_2_workers_vs_single']:.2f}× |")
    if "batch_2_workers_vs_1_worker" in r:
        lines.append(f"| batch path: 2 workers vs 1 worker ≥ 1.6× | {r['batch_2_workers_vs_1_worker']:.2f}× | — |")
    if "batch_2_workers_vs_single" in r:
        lines.append(f"| batch path: 2 workers vs single process ≥ 1.4× | "
                     f"{r['batch_2_workers_vs_single']:.2f}× | "
                     f"{r['batch_modelled_2_workers_vs_single']:.2f}× |")
    return "\n".join(lines)
