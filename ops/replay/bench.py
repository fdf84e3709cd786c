"""``hotjoin bench replay``: Spark replay throughput on 1 and 2 cores vs the single-process engine.

The log (written in the export format, no server needed): ``subscriptions`` Table I joins
registered in one bulk subscribe, then ``events`` R and S tuples (half each, in random order)
with event time = position − a jitter within the lateness (disorder, never late), retention
keeping about ``retention / 2`` tuples per side, and ``delete_fraction`` deletes of recently
published tuples. Keys are integers on 0..K; R.B ~ Uni(0, K), S.B ~ Normal(K/2, K/10), and K is
chosen so an event forms about ``affected`` pairs in expectation (``clients.loadgen``'s formula,
times the mean band width for band joins):
E[pairs] = Σ_q P(r.A ∈ A_q)·P(s.C ∈ C_q)·(width_q + 1)·stored / (K + 1).

Runs, each timed from reading the export to the last part file written (Spark session start-up
reported apart): the single-process baseline (one cell over the whole log, in this process —
the same ``worker.run_cell``), then ``local[c]`` for each core count c with c shards. Every
run's output must equal the baseline's (multiset). Reported: events/s per run, the speed-up from
1 to 2 cores (target ≥ 1.6) and the 1-core Spark time over the baseline's (target ≤ 2).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hotjoin.ops.replay.log import TopicOptions, read_export, write_export

KINDS = ("select", "band", "window")
SPEEDUP_TARGET = 1.6
OVERHEAD_TARGET = 2.0


@dataclass
class ReplayBenchConfig:
    """Sizes of the benchmark log and the runs (``quick()``: a smoke run in seconds)."""

    events: int = 1_000_000
    subscriptions: int = 100_000
    kind: str = "band"
    affected: float = 2.0
    lateness: int = 100
    retention: int = 200_000
    delete_fraction: float = 0.01
    cores: tuple[int, ...] = (1, 2)
    shards_per_core: int = 1
    seed: int = 1

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.events < 2 or self.subscriptions < 1:
            raise ValueError("need at least 2 events and 1 subscription")
        if not self.cores or min(self.cores) < 1 or self.shards_per_core < 1:
            raise ValueError("cores and shards per core must be >= 1")
        if self.affected <= 0 or not 0 <= self.delete_fraction < 1:
            raise ValueError("need affected > 0 and 0 <= delete fraction < 1")

    @classmethod
    def quick(cls, **kw: Any) -> ReplayBenchConfig:
        base = {"events": 20_000, "subscriptions": 2_000, "retention": 4_000, "lateness": 20}
        base.update(kw)
        return cls(**base)


def _progress(msg: str) -> None:
    print(f"[bench replay] {msg}", file=sys.stderr, flush=True)


def generate(cfg: ReplayBenchConfig, out_dir: Path) -> dict[str, Any]:
    """Write the benchmark log as an export into ``out_dir``; returns its description."""
    from hotjoin.clients.loadgen import _coverage
    from hotjoin.matcher.workload import TableIConfig, select_ranges_arrays

    rng = np.random.default_rng(cfg.seed)
    m = cfg.subscriptions
    table = TableIConfig(n_subscriptions=m, seed=cfg.seed)
    a_lo, a_hi, c_lo, c_hi = select_ranges_arrays(table)
    v0, v1 = table.value_domain
    weight = _coverage(a_lo, a_hi, v0, v1) * _coverage(c_lo, c_hi, v0, v1)
    none = np.full(m, np.nan)
    b_lo, b_hi, w = none, none, np.full(m, None, dtype=object)
    width = np.zeros(m)
    if cfg.kind == "band":
        centre = rng.integers(-20, 21, m).astype(np.float64)
        half = rng.integers(0, 3, m).astype(np.float64)
        b_lo, b_hi, width = centre - half, centre + half, 2 * half
    elif cfg.kind == "window":
        w = np.abs(np.rint(rng.normal(cfg.retention / 8, cfg.retention / 32, m))).astype(np.int64)
    stored = max(cfg.retention // 2, 1)
    k_dom = max(1.0, round(stored * float(np.sum(weight * (width + 1))) / cfg.affected - 1))
    subs = {
        "subscription_id": np.arange(m, dtype=np.int64), "kind": [cfg.kind] * m,
        "a_lo": a_lo, "a_hi": a_hi, "b_lo": b_lo, "b_hi": b_hi, "c_lo": c_lo, "c_hi": c_hi,
        "w": list(w) if cfg.kind == "window" else [None] * m, "delivery": ["pairs"] * m,
        "snapshot": np.zeros(m, dtype=bool), "subscriber": ["bench"] * m,
        "registered_seq": np.arange(1, m + 1, dtype=np.int64), "unsubscribed_seq": [None] * m,
    }
    subs = {k: (pa.array(v, from_pandas=True) if isinstance(v, np.ndarray) and v.dtype == float
                else v) for k, v in subs.items()}

    n = cfg.events
    is_r = rng.random(n) < 0.5
    keys = np.where(is_r, rng.integers(0, int(k_dom) + 1, n),
                    np.clip(np.rint(rng.normal(k_dom / 2, k_dom / 10, n)), 0, k_dom))
    values = rng.integers(int(v0), int(v1) + 1, n).astype(np.float64)
    times = np.arange(n, dtype=np.int64) - rng.integers(0, cfg.lateness + 1, n)
    ids = np.where(is_r, "r", "s").astype(object) + np.arange(n).astype(str).astype(object)
    # deletes: a tuple published at most retention/4 positions earlier (still stored), once each
    n_del = int(cfg.delete_fraction * n)
    at = np.sort(rng.integers(1, n, n_del))
    target = at - rng.integers(1, max(2, cfg.retention // 4), n_del)
    ok = target >= 0
    at, target = at[ok], target[ok]
    target, first = np.unique(target, return_index=True)
    at = at[first]
    # order: the publishes by position, each delete right after the publish at its position
    pos = np.concatenate([np.arange(n), at]).astype(np.float64)
    pos[n:] += 0.5
    order = np.argsort(pos, kind="stable")
    is_del = order >= n
    src = np.where(is_del, target[np.maximum(order - n, 0)], order)
    total = order.shape[0]
    seq = np.arange(m + 1, m + 1 + total, dtype=np.int64)
    events = {
        "seq": seq, "op": np.where(is_del, "delete", "publish").tolist(),
        "side": np.where(is_r[src], "R", "S").tolist(), "id": ids[src].tolist(),
        "key": pa.array(np.where(is_del, np.nan, keys[src]), from_pandas=True),
        "value": pa.array(np.where(is_del, np.nan, values[src]), from_pandas=True),
        "time": pa.array(np.where(is_del, 0, times[src]), mask=is_del),
    }
    write_export(out_dir, TopicOptions("bench", cfg.lateness, cfg.retention, {}), events, subs)
    return {"key_domain": int(k_dom), "publishes": n, "deletes": int(at.shape[0]),
            "operations": int(m + total)}


def _sorted(out: Path) -> pa.Table:
    t = pq.read_table(out)
    return t.sort_by([(c, "ascending") for c in ("seq", "subscription_id", "r_id", "s_id", "sign")])


def run(cfg: ReplayBenchConfig, json_path: str | None = None, markdown: str | None = None,
        workdir: str | None = None, keep: bool = False) -> dict[str, Any]:
    """Generate the log, run the baseline and each Spark configuration; returns the results."""
    from hotjoin.ops.replay.job import replay_in_process, replay_spark, spark_session

    work = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="hotjoin-bench-replay-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        _progress(f"generating {cfg.events:,} events, {cfg.subscriptions:,} {cfg.kind} joins")
        log_info = generate(cfg, work / "export")
        _progress(f"log written in {time.perf_counter() - t0:.1f} s: {log_info}")
        export = work / "export"
        records: list[dict[str, Any]] = []

        def record(name: str, cores: int, shards: int, seconds: float, summary: dict[str, Any],
                   startup: float | None = None) -> None:
            r = {"run": name, "cores": cores, "shards": shards, "seconds": round(seconds, 3),
                 "events_per_s": round(log_info["publishes"] / seconds, 1),
                 "deliveries": summary["deliveries"], "cells": summary["plan"]["cells"],
                 "routed_operations": summary["routed_operations"],
                 "cell_seconds": [c["seconds"] for c in summary["cells"]],
                 "cell_cpu_seconds": [c["cpu_seconds"] for c in summary["cells"]]}
            if startup is not None:
                r["spark_startup_s"] = round(startup, 2)
            r["load_average_1m_after"] = round(os.getloadavg()[0], 2)
            records.append(r)
            _progress(f"{name}: {r['events_per_s']:,.0f} events/s ({seconds:.1f} s, "
                      f"{r['deliveries']:,} deliveries)")

        _progress("single-process baseline (one engine over the whole log, no Spark)")
        t = time.perf_counter()
        log = read_export(export / "events.parquet", export / "subscriptions.parquet")
        summary, _ = replay_in_process(log, str(work / "out-baseline"), shards=1,
                                       progress=_progress, worker_progress=True)
        record("single-process", 1, 1, time.perf_counter() - t, summary)
        baseline = _sorted(work / "out-baseline")
        for cores in cfg.cores:
            shards = cores * cfg.shards_per_core
            t = time.perf_counter()
            spark = spark_session(f"local[{cores}]", {"spark.default.parallelism": str(cores)})
            startup = time.perf_counter() - t
            try:
                _progress(f"spark local[{cores}], {shards} shard(s) (session up in {startup:.1f} s)")
                t = time.perf_counter()
                log = read_export(export / "events.parquet", export / "subscriptions.parquet")
                summary = replay_spark(spark, log, str(work / f"out-{cores}"), shards=shards,
                                       overwrite=True, progress=_progress)
                record(f"spark local[{cores}]", cores, shards, time.perf_counter() - t, summary,
                       startup)
            finally:
                spark.stop()
            if not _sorted(work / f"out-{cores}").equals(baseline):
                raise RuntimeError(f"spark local[{cores}] delivered something else than the "
                                   "single-process engine")
        res = {"config": asdict(cfg), "log": log_info, "records": records,
               "ratios": _ratios(records), "machine": _machine()}
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(json.dumps(res, indent=1))
    if markdown:
        Path(markdown).write_text(to_markdown(res))
    return res


def _ratios(records: list[dict[str, Any]]) -> dict[str, Any]:
    by = {r["run"]: r for r in records}
    base = by.get("single-process")
    one, two = by.get("spark local[1]"), by.get("spark local[2]")
    out: dict[str, Any] = {}
    if one and two:
        out["speedup_1_to_2_cores"] = round(two["events_per_s"] / one["events_per_s"], 3)
        out["speedup_target"] = SPEEDUP_TARGET
        out["speedup_met"] = out["speedup_1_to_2_cores"] >= SPEEDUP_TARGET
    if base and one:
        out["spark_1_core_over_single_process"] = round(one["seconds"] / base["seconds"], 3)
        out["overhead_target"] = OVERHEAD_TARGET
        out["overhead_met"] = out["spark_1_core_over_single_process"] <= OVERHEAD_TARGET
    return out


def _machine() -> dict[str, Any]:
    import platform

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"cpus": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "load_average": load}


def to_markdown(res: dict[str, Any]) -> str:
    """The results as a Markdown table (docs/benchmarks/replay.md)."""
    lines = ["| run | cores | shards (cells) | seconds | events/s | deliveries | Spark start-up |",
             "|---|---|---|---|---|---|---|"]
    for r in res["records"]:
        lines.append(f"| {r['run']} | {r['cores']} | {r['shards']} ({r['cells']}) | "
                     f"{r['seconds']:.1f} | {r['events_per_s']:,.0f} | {r['deliveries']:,} | "
                     f"{r.get('spark_startup_s', '—')} |")
    ra = res["ratios"]
    if "speedup_1_to_2_cores" in ra:
        lines.append(f"\nSpeed-up 1 → 2 cores: **{ra['speedup_1_to_2_cores']:.2f}×** (target ≥ "
                     f"{SPEEDUP_TARGET}: {'met' if ra['speedup_met'] else 'not met'}).")
    if "spark_1_core_over_single_process" in ra:
        lines.append(f"Spark on 1 core / single-process engine: "
                     f"**{ra['spark_1_core_over_single_process']:.2f}×** the time (target ≤ "
                     f"{OVERHEAD_TARGET}: {'met' if ra['overhead_met'] else 'not met'}).")
    return "\n".join(lines) + "\n"


# ---- command line (`hotjoin bench replay`, registered in ops/bench/command.py) -------------


def add_arguments(p: Any) -> None:
    p.add_argument("--events", type=int, default=None, help="events in the log (default 1,000,000)")
    p.add_argument("--subscriptions", type=int, default=None,
                   help="subscriptions (default 100,000)")
    p.add_argument("--kind", choices=KINDS, default="band", help="subscription kind (default band)")
    p.add_argument("--affected", type=float, default=2.0, help="expected pairs per event")
    p.add_argument("--cores", default="1,2", help="comma-separated core counts (local[N])")
    p.add_argument("--shards-per-core", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="a smoke run in seconds (small log)")
    p.add_argument("--json", dest="json_path", default=None, help="write the results as JSON")
    p.add_argument("--markdown", default=None, help="write the table as Markdown")
    p.add_argument("--workdir", default=None, help="where the log and outputs go (default: temp)")
    p.add_argument("--keep", action="store_true", help="keep the work directory")


def run_cli(args: Any) -> int:
    from hotjoin.cli.main import CliError

    try:
        cores = tuple(int(x) for x in str(args.cores).split(",") if x.strip())
        kw: dict[str, Any] = {"kind": args.kind, "affected": args.affected, "cores": cores,
                              "shards_per_core": args.shards_per_core}
        if args.events is not None:
            kw["events"] = args.events
        if args.subscriptions is not None:
            kw["subscriptions"] = args.subscriptions
        cfg = ReplayBenchConfig.quick(**kw) if args.quick else ReplayBenchConfig(**kw)
    except ValueError as e:
        raise CliError(str(e)) from None
    res = run(cfg, args.json_path, args.markdown, args.workdir, args.keep)
    print(to_markdown(res), end="")
    print(json.dumps(res["ratios"], indent=1))
    sys.stdout.flush()
    return 0
