"""``hotjoin bench memory``: resident memory of one topic with mixed subscriptions and tuples.

The issue's target: "500,000 subscriptions of mixed kinds plus 500,000 stored tuples fit in
under 1.5 GB resident; report the figure per subscription and per tuple".

The measurement runs in a **fresh subprocess** (``python -m hotjoin.ops.bench.memory --child``) so
nothing the parent imported or allocated is counted. The child

1. imports the engine and warms every kernel up on a tiny engine of all three kinds (JIT code
   is resident too, but it is per process, not per subscription) → ``rss_base``;
2. builds ``Engine(strategy="auto")`` and subscribes ``--subscriptions`` subscriptions, a third
   of each kind (Table I ranges of :mod:`matcher.workload`; window w ~ |Normal(1000, 300)|),
   with ``subscribe_many`` → ``rss_subscribed``;
3. stores ``--tuples`` tuples, half R and half S (Table I keys and values, event times 0, 1, …),
   through ``restore_events`` (the server's restart path: no matching) → ``rss_stored``;
4. optionally publishes ``--live`` more events of each side through ``publish_affected`` (the
   server's AFFECTED path: matching, delta runs, skylines and hotspot structures touched the
   way live traffic touches them, output dropped) → ``rss_final``. Off by default: on the full
   Table I topic each event costs seconds (band joins counting millions of pairs);

reading ``VmRSS`` / ``VmHWM`` of ``/proc/self/status`` after a ``gc.collect()`` at each step.
Per subscription = (rss_subscribed − rss_base) / subscriptions; per tuple = (rss_stored −
rss_subscribed) / tuples. The engine's own accounting (``Engine.stats()`` memory figures where
present) is reported beside it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

LIMIT_BYTES = 1.5e9


@dataclass
class MemoryBenchConfig:
    subscriptions: int = 500_000
    tuples: int = 500_000
    live: int = 0
    strategy: str = "auto"
    seed: int = 0
    kinds: str = "mixed"  # or "select": Table I select joins only (the engine-speed issue)


def _status() -> dict[str, int]:
    """VmRSS and VmHWM of this process in bytes (Linux ``/proc/self/status``)."""
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    name, val = line.split(":", 1)
                    out[name] = int(val.split()[0]) * 1024
    except OSError:  # pragma: no cover - not Linux
        import resource

        hwm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        out = {"VmRSS": hwm, "VmHWM": hwm}
    return out


def _rss() -> int:
    gc.collect()
    return _status()["VmRSS"]


def _subscriptions(cfg: Any, n: int, kinds: str = "mixed") -> list[Any]:
    from hotjoin.matcher.model import Range, SelectJoin, WindowJoin
    from hotjoin.matcher.workload import band_subscriptions, select_ranges_arrays, window_arrays

    if kinds == "select":
        a_lo, a_hi, c_lo, c_hi = (x.tolist() for x in select_ranges_arrays(cfg, n))
        return [SelectJoin(a=Range(al, ah), c=Range(cl, ch))
                for al, ah, cl, ch in zip(a_lo, a_hi, c_lo, c_hi, strict=True)]
    k = n // 3
    n_band, n_sel, n_win = n - 2 * k, k, k
    subs: list[Any] = list(band_subscriptions(cfg, n_band))
    a_lo, a_hi, c_lo, c_hi = (x.tolist() for x in select_ranges_arrays(cfg, n_sel))
    subs += [SelectJoin(a=Range(al, ah), c=Range(cl, ch))
             for al, ah, cl, ch in zip(a_lo, a_hi, c_lo, c_hi, strict=True)]
    a_lo, a_hi, c_lo, c_hi, w = (x.tolist() for x in window_arrays(cfg, n_win))
    subs += [WindowJoin(a=Range(al, ah), c=Range(cl, ch), w=ww)
             for al, ah, cl, ch, ww in zip(a_lo, a_hi, c_lo, c_hi, w, strict=True)]
    return subs


def _events(cfg: Any, n: int, start_time: int, prefix: str, batch: int) -> list[Any]:
    """``n`` events alternating R and S with times ``start_time, start_time + 1, …``."""
    from hotjoin.matcher.workload import r_events, s_events

    nr = n // 2
    ns = n - nr
    rs = r_events(cfg, nr, start_time=start_time, time_step=2, batch=batch,
                  id_prefix=prefix + "r")
    ss = s_events(cfg, ns, start_time=start_time + 1, time_step=2, batch=batch,
                  id_prefix=prefix + "s")
    out: list[Any] = []
    for i in range(max(nr, ns)):
        if i < nr:
            out.append(rs[i])
        if i < ns:
            out.append(ss[i])
    return out


def _warm_up() -> None:
    """Compile/load every kernel the measured engine will run (tiny engine of all kinds)."""
    from hotjoin.matcher.engine import Engine
    from hotjoin.matcher.workload import TableIConfig

    cfg = TableIConfig(seed=99)
    e = Engine(strategy="auto")
    e.subscribe_many(_subscriptions(cfg, 30))
    evs = _events(cfg, 40, 0, "w", 1)
    for ev in evs:
        e.publish_affected(ev)
    e.delete(evs[0].side, evs[0].id)


def child(c: MemoryBenchConfig) -> dict[str, Any]:
    """The measurement itself (run in a fresh process; see the module docstring)."""
    from hotjoin.matcher.engine import Engine
    from hotjoin.matcher.workload import TableIConfig

    t0 = time.perf_counter()
    rss_import = _rss()
    _warm_up()
    rss_base = _rss()
    cfg = TableIConfig(seed=c.seed)
    strategy: Any = c.strategy
    if c.strategy != "auto":
        strategy = json.loads(c.strategy)
    eng = Engine(strategy=strategy)
    subs = _subscriptions(cfg, c.subscriptions, c.kinds)
    rss_listed = _rss()
    t_many = time.perf_counter()
    eng.subscribe_many(subs)
    t_many = time.perf_counter() - t_many
    peak_subscribe = _status()["VmHWM"]
    del subs
    rss_subs = _rss()
    t_subs = time.perf_counter()
    evs = _events(cfg, c.tuples, 0, "", 0)
    eng.restore_events(evs, list(range(eng.seq + 1, eng.seq + 1 + len(evs))))
    eng.restore_clock(eng.seq + len(evs), c.tuples)
    del evs
    rss_stored = _rss()
    t_stored = time.perf_counter()
    live = _events(cfg, 2 * c.live, c.tuples + 1, "live", 1)
    for ev in live:
        eng.publish_affected(ev)
    del live
    rss_final = _rss()
    st = _status()
    stats = eng.stats()
    mem = {k: v for k, v in stats.items() if "memory" in k or "bytes" in k}
    res = {
        "config": asdict(c),
        "subscriptions": len(eng.subs),
        "stored_tuples": len(eng.tables["R"]) + len(eng.tables["S"]),
        "rss_import_bytes": rss_import,
        "rss_base_bytes": rss_base,
        "rss_listed_bytes": rss_listed,
        "rss_subscribed_bytes": rss_subs,
        "peak_rss_subscribe_bytes": peak_subscribe,
        "seconds_subscribe_many": t_many,
        "rss_stored_bytes": rss_stored,
        "rss_final_bytes": rss_final,
        "peak_rss_bytes": st["VmHWM"],
        "bytes_per_subscription": (rss_subs - rss_base) / max(c.subscriptions, 1),
        "bytes_per_tuple": (rss_stored - rss_subs) / max(c.tuples, 1),
        "seconds_subscribe": t_subs - t0,
        "seconds_store": t_stored - t_subs,
        "seconds_total": time.perf_counter() - t0,
        "engine_memory": mem,
    }
    res["target_met"] = bool(res["rss_final_bytes"] < LIMIT_BYTES)
    return res


def run(c: MemoryBenchConfig, json_path: str | None = None) -> dict[str, Any]:
    """Run :func:`child` in a fresh interpreter and return (and optionally write) its result."""
    from hotjoin.ops.bench.common import machine, write_json

    cmd = [sys.executable, "-m", "hotjoin.ops.bench.memory", "--child",
           "--subscriptions", str(c.subscriptions), "--tuples", str(c.tuples),
           "--live", str(c.live), "--strategy", c.strategy, "--seed", str(c.seed),
           "--kinds", c.kinds]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"memory child failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res = {"benchmark": "memory", "machine": machine(), **res}
    if json_path:
        write_json(json_path, res)
    return res


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = MemoryBenchConfig()
    p.add_argument("--subscriptions", type=int, default=d.subscriptions,
                   help="subscriptions, a third of each kind (band, select, window)")
    p.add_argument("--tuples", type=int, default=d.tuples, help="stored tuples, half R, half S")
    p.add_argument("--live", type=int, default=d.live,
                   help="events of each side published (matched) after loading")
    p.add_argument("--strategy", default=d.strategy,
                   help='"auto" or a JSON mapping kind -> strategy name')
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--kinds", choices=("mixed", "select"), default=d.kinds,
                   help="mixed: a third of each kind; select: Table I select joins only (with "
                        "--tuples 0, the bulk-subscribe time and peak of --subscriptions)")
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")


def config_from_args(a: argparse.Namespace) -> MemoryBenchConfig:
    if min(a.subscriptions, a.tuples, a.live) < 0:
        raise ValueError("--subscriptions, --tuples and --live must be >= 0")
    c = MemoryBenchConfig(subscriptions=a.subscriptions, tuples=a.tuples, live=a.live,
                          strategy=a.strategy, seed=a.seed, kinds=a.kinds)
    if a.quick:
        c.subscriptions, c.tuples, c.live = 3_000, 3_000, 20
    return c


def format_result(res: dict[str, Any]) -> str:
    mib = 2.0 ** 20
    return (f"{res['subscriptions']} subscriptions + {res['stored_tuples']} stored tuples: "
            f"RSS {res['rss_final_bytes'] / mib:.0f} MiB (peak {res['peak_rss_bytes'] / mib:.0f} "
            f"MiB; interpreter + kernels {res['rss_base_bytes'] / mib:.0f} MiB), "
            f"{res['bytes_per_subscription']:.0f} B/subscription, "
            f"{res['bytes_per_tuple']:.0f} B/tuple; target < 1.5 GB "
            f"{'met' if res['target_met'] else 'NOT met'}; subscribe_many "
            f"{res['seconds_subscribe_many']:.1f} s, peak by then "
            f"{res['peak_rss_subscribe_bytes'] / mib:.0f} MiB (the subscription list "
            f"{(res['rss_listed_bytes'] - res['rss_base_bytes']) / mib:.0f} MiB of it)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hotjoin.ops.bench.memory")
    add_arguments(p)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    c = config_from_args(a)
    if a.child:
        print(json.dumps(child(c), default=float))
        return 0
    print(format_result(run(c)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
