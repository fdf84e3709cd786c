"""The replay driver: read the export, plan the shards, run them as Spark tasks, write Parquet.

Steps (``replay_spark``):

1. the driver reads the export into seq-ordered operations with the topic-wide clock and the
   keys of deletes (``ops/replay/log.py``; columnar, ~1 s per million operations);
2. it plans the cells — key ranges, band replication, hot-key splits (``sharding.py``) — and
   routes every operation to its cells;
3. each cell's operations travel as one Arrow IPC payload (``sc.parallelize``, one partition per
   cell, the biggest first), the subscriptions as one broadcast (a warm-up job starts the
   Python workers and decodes it while the driver still plans); each Spark task runs
   ``worker.run_cell`` — the same ``matcher.Engine`` the server runs — and writes its deliveries
   to ``OUT/part-NNNNN.parquet`` (schema ``worker.DELIVERY_SCHEMA``);
4. the driver collects the per-cell counts and writes ``OUT/_replay.json`` and ``OUT/_SUCCESS``.

``replay_in_process`` runs the same cells one after another in this process, without Spark (the
single-process baseline of ``hotjoin bench replay``; tests). Executors must have hotjoin
installed (same version) and see OUT: a local path (local mode or a shared file system) or a
URI pyarrow understands (``s3://…``, ``hdfs://…``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from hotjoin.ops.replay.log import ReplayLog, TopicOptions, band_hull, decode_subscriptions
from hotjoin.ops.replay.sharding import (
    ShardPlan,
    plan_shards,
    published_keys,
    route,
    single_cell_plan,
)
from hotjoin.ops.replay.worker import DELIVERY_SCHEMA, CellStats, run_cell

Progress = Callable[[str], None]


def stderr_progress(msg: str) -> None:
    """Default progress sink: one line on stderr."""
    print(f"[replay] {msg}", file=sys.stderr, flush=True)


def no_progress(msg: str) -> None:
    """Progress sink that prints nothing (``--quiet``)."""


@dataclass
class Prepared:
    """A log with its plan: the rows of ``log.ops`` for each cell."""

    log: ReplayLog
    plan: ShardPlan
    cells: list[np.ndarray]


def prepare(log: ReplayLog, shards: int, skew: float = 1.0,
            plan: ShardPlan | None = None) -> Prepared:
    """Plan ``shards`` key-range shards (plus hot-key splits) and route the operations.

    ``plan`` replaces the planner (tests pin shard boundaries with it).
    """
    hull = band_hull(log.subscriptions)
    if plan is not None:
        covers = hull is None or (plan.hull is not None and plan.hull[0] <= hull[0]
                                  and plan.hull[1] >= hull[1])
        if not covers:
            raise ValueError(f"plan's band hull {plan.hull} does not cover the log's {hull}")
    elif shards == 1:
        plan = single_cell_plan(hull)
    else:
        plan = plan_shards(*published_keys(log.ops), shards=shards, hull=hull, skew=skew)
    return Prepared(log, plan, route(plan, log.ops))


# ---- output -----------------------------------------------------------------------------------


def _out_fs(out: str) -> tuple[pafs.FileSystem, str]:
    if "://" in out:
        return pafs.FileSystem.from_uri(out)
    return pafs.LocalFileSystem(), os.path.abspath(out)


def prepare_output(out: str, overwrite: bool) -> str:
    """Create the output directory; refuse a non-empty one unless ``overwrite``. Returns its URI
    (an absolute path for local directories)."""
    fs, path = _out_fs(out)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.File:
        raise FileExistsError(f"--out {out} is a file, not a directory")
    if info.type == pafs.FileType.Directory:
        existing = fs.get_file_info(pafs.FileSelector(path))
        if existing and not overwrite:
            raise FileExistsError(f"--out {out} is not empty (use --overwrite to replace it)")
        if existing:
            fs.delete_dir_contents(path)
    fs.create_dir(path, recursive=True)
    return out if "://" in out else path


def part_path(out: str, cell: int) -> str:
    return f"{out.rstrip('/')}/part-{cell:05d}.parquet"


def _write_cell(out: str, cell: int, ops_payload: bytes, subs: dict[int, Any],
                options: TopicOptions, progress: bool) -> CellStats:
    """Run one cell and write its part file (inside a Spark task or in process)."""
    from hotjoin.ops.replay.log import Ops

    ops = Ops.from_arrow(pa.ipc.open_stream(ops_payload).read_all())
    fs, path = _out_fs(part_path(out, cell))
    report = None
    if progress:
        def report(done: int, total: int, secs: float) -> None:
            print(f"[replay] shard {cell}: {done:,}/{total:,} operations "
                  f"({100.0 * done / max(total, 1):.0f}%), {secs:.0f} s", file=sys.stderr, flush=True)
    with fs.open_output_stream(path) as f, pq.ParquetWriter(f, DELIVERY_SCHEMA) as writer:
        return run_cell(cell, ops, subs, options, writer.write_batch, report)


def _ipc(batch: pa.RecordBatch | pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write(batch)
    return sink.getvalue().to_pybytes()


def _payloads(prep: Prepared) -> list[tuple[int, bytes]]:
    """(cell, Arrow IPC of its operations), the biggest cells first (they start first)."""
    order = sorted(range(len(prep.cells)), key=lambda c: -prep.cells[c].shape[0])
    return [(c, _ipc(prep.log.ops.take(prep.cells[c]).to_arrow())) for c in order]


def _summary(prep: Prepared, stats: list[CellStats], out: str | None, seconds: dict[str, float],
             mode: str) -> dict[str, Any]:
    stats = sorted(stats, key=lambda s: s.cell)
    total = seconds["total"]
    return {
        "mode": mode,
        "out": out,
        "events": prep.log.n_events - prep.log.n_restored,
        "restored": prep.log.n_restored,
        "operations": len(prep.log.ops),
        "routed_operations": int(sum(c.shape[0] for c in prep.cells)),
        "deliveries": int(sum(s.deliveries for s in stats)),
        "events_per_s": round((prep.log.n_events - prep.log.n_restored) / total, 1) if total else None,
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "plan": prep.plan.describe(),
        "cells": [s.to_json() for s in stats],
    }


def _finish(out: str, summary: dict[str, Any]) -> None:
    fs, path = _out_fs(out)
    with fs.open_output_stream(f"{path}/_replay.json") as f:
        f.write(json.dumps(summary, indent=1).encode())
    with fs.open_output_stream(f"{path}/_SUCCESS"):
        pass


# ---- in process (baseline, tests) ---------------------------------------------------------------


def replay_in_process(log: ReplayLog, out: str | None, shards: int = 1, skew: float = 1.0,
                      overwrite: bool = False, progress: Progress = stderr_progress,
                      worker_progress: bool = False, plan: ShardPlan | None = None,
                      ) -> tuple[dict[str, Any], pa.Table | None]:
    """Run every cell here, one after another. With ``out=None`` the deliveries are returned as
    one Arrow table instead of written."""
    t0 = time.perf_counter()
    prep = prepare(log, shards, skew, plan)
    t1 = time.perf_counter()
    progress(f"{len(prep.cells)} cell(s) planned in {t1 - t0:.1f} s")
    subs = decode_subscriptions(log.subscriptions)
    stats: list[CellStats] = []
    batches: list[pa.RecordBatch] = []
    if out is not None:
        out = prepare_output(out, overwrite)
    for cell, payload in _payloads(prep):
        if out is None:
            from hotjoin.ops.replay.log import Ops

            ops = Ops.from_arrow(pa.ipc.open_stream(payload).read_all())
            stats.append(run_cell(cell, ops, subs, log.options, batches.append))
        else:
            stats.append(_write_cell(out, cell, payload, subs, log.options, worker_progress))
        progress(f"cell {cell} done: {stats[-1].ops:,} operations, {stats[-1].deliveries:,} "
                 f"deliveries, {stats[-1].seconds:.1f} s")
    t2 = time.perf_counter()
    summary = _summary(prep, stats, out, {"prepare": t1 - t0, "run": t2 - t1, "total": t2 - t0},
                       "in-process")
    if out is not None:
        _finish(out, summary)
        return summary, None
    return summary, pa.Table.from_batches(batches, schema=DELIVERY_SCHEMA)


# ---- Spark ------------------------------------------------------------------------------------


class JavaMissingError(RuntimeError):
    """No Java runtime for Spark."""


def check_java() -> str:
    """Path of the ``java`` Spark will use; raises ``JavaMissingError`` with the fix."""
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.join(home, "bin", "java")
    found = shutil.which("java")
    if found is None:
        raise JavaMissingError("Spark needs a Java 17+ runtime and none was found (no JAVA_HOME, "
                               "no java on PATH): run ./scripts/setup or install "
                               "openjdk-17-jre-headless")
    return found


def spark_session(master: str = "local[*]", conf: dict[str, str] | None = None,
                  log_level: str = "ERROR") -> Any:
    """A SparkSession for the replay (UI off, Python workers = this interpreter)."""
    check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName("hotjoin-replay")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.python.worker.reuse", "true")
               .config("spark.rpc.message.maxSize", "1024")
               .config("spark.sql.shuffle.partitions", "8"))
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark


# cache of decoded subscriptions per broadcast, per Python worker process (workers are reused)
_SUBS_CACHE: dict[str, dict[int, Any]] = {}


def _spark_task(items: Iterator[tuple[int, bytes]], subs_bc: Any, token: str,
                options_json: dict[str, Any], out: str, progress: bool) -> Iterator[dict[str, Any]]:
    """One Spark partition = one cell: decode, run the engine, write the part file.

    ``token`` names this replay's broadcast: a reused Python worker decodes it once.
    """
    subs = _subscriptions(subs_bc, token)
    options = TopicOptions.from_json(options_json)
    for cell, payload in items:
        yield _write_cell(out, cell, payload, subs, options, progress).to_json()


def _subscriptions(subs_bc: Any, token: str) -> dict[int, Any]:
    """The broadcast subscriptions, decoded once per Python worker process."""
    subs = _SUBS_CACHE.get(token)
    if subs is None:
        _SUBS_CACHE.clear()
        subs = decode_subscriptions(pa.ipc.open_stream(subs_bc.value).read_all())
        _SUBS_CACHE[token] = subs
    return subs


def _warm_task(items: Iterator[int], subs_bc: Any, token: str) -> Iterator[int]:
    _subscriptions(subs_bc, token)
    yield sum(1 for _ in items)


def _warm_up(sc: Any, subs_bc: Any, token: str, n: int) -> threading.Thread:
    """Start ``n`` Python workers and decode the subscriptions in them while the driver plans
    (workers are reused, so the cells' tasks find them ready)."""

    def run() -> None:
        with contextlib.suppress(Exception):  # only a head start: the cells do it themselves too
            sc.parallelize(range(n), n).mapPartitions(
                lambda it: _warm_task(it, subs_bc, token)).collect()

    t = threading.Thread(target=run, name="replay-warm-up", daemon=True)
    t.start()
    return t


def _watch(sc: Any, stop: threading.Event, progress: Progress, n_cells: int, t0: float) -> None:
    """Report finished / running cells every few seconds while the job runs."""
    tracker = sc.statusTracker()
    last = None
    last_t = 0.0
    while not stop.wait(2.0):
        done = running = 0
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info is not None:
                done += info.numCompletedTasks
                running += info.numActiveTasks
        now = time.perf_counter()
        state = (done, running)
        if state != last or now - last_t >= 15.0:
            progress(f"{done}/{n_cells} shards done, {running} running, {now - t0:.0f} s")
            last, last_t = state, now


def replay_spark(spark: Any, log: ReplayLog, out: str, shards: int | None = None,
                 skew: float = 1.0, overwrite: bool = False, progress: Progress = stderr_progress,
                 worker_progress: bool = True, plan: ShardPlan | None = None) -> dict[str, Any]:
    """Replay ``log`` on ``spark``; deliveries go to ``out`` as Parquet. Returns the summary."""
    sc = spark.sparkContext
    shards = int(shards or sc.defaultParallelism)
    t0 = time.perf_counter()
    out = prepare_output(out, overwrite)
    subs_bc = sc.broadcast(_ipc(log.subscriptions))
    token = uuid.uuid4().hex
    warm = _warm_up(sc, subs_bc, token, min(shards, int(sc.defaultParallelism)))
    prep = prepare(log, shards, skew, plan)
    payloads = _payloads(prep)
    warm.join()
    t1 = time.perf_counter()
    progress(f"{len(log.ops):,} operations planned into {len(payloads)} shard(s) "
             f"({sum(c.shape[0] for c in prep.cells):,} routed) in {t1 - t0:.1f} s")
    options_json = log.options.to_json()
    rdd = sc.parallelize(payloads, numSlices=len(payloads))
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(sc, stop, progress, len(payloads), t1),
                               daemon=True)
    watcher.start()
    try:
        rows = rdd.mapPartitions(
            lambda it: _spark_task(it, subs_bc, token, options_json, out, worker_progress)).collect()
    finally:
        stop.set()
        watcher.join(timeout=5)
        with contextlib.suppress(Exception):
            subs_bc.unpersist()
    t2 = time.perf_counter()
    stats = [CellStats(r["cell"], r["ops"], r["events"], r["deliveries"], r["seconds"], r["stored"],
                       r["cpu_seconds"]) for r in rows]
    summary = _summary(prep, stats, out, {"prepare": t1 - t0, "run": t2 - t1, "total": t2 - t0},
                       f"spark {sc.master}")
    _finish(out, summary)
    progress(f"done: {summary['deliveries']:,} deliveries in {t2 - t0:.1f} s")
    return summary
