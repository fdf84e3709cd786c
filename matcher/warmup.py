"""Load every compiled kernel once, before the first real event (guide: "pay JIT compile time once,
at start-up").

numba compiles a kernel (or loads it from its on-disk cache) on its first call in a process. The
engine calls dozens of kernels, many only on some paths: one strategy among five of a kind, the
batch path's multi-event kernels, deletes, snapshots, retention. Without a warm-up, whichever
event first takes such a path pays the load, tens of milliseconds each, in the middle of a stream
(a latency spike on a server, a distorted figure in a benchmark). :func:`warm_up_kernels` drives a
small engine of every kind through every strategy and every call form so that all of them are
loaded; the server runs it at start-up, the benchmarks before timing.

>>> seconds = warm_up_kernels()
>>> seconds >= 0.0
True
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable

import numpy as np

from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.engine import STRATEGIES, Engine
from hotjoin.matcher.joins.protocol import first_descent, merge_two_runs, order_by_event
from hotjoin.matcher.joins.skyline import SkylineIndex, sky_insert_many, stored_sizes
from hotjoin.matcher.model import (
    ALLEN_RELATIONS,
    BandJoin,
    Event,
    IntervalJoin,
    Range,
    SelectJoin,
    WindowJoin,
)
from hotjoin.matcher.partition.exact_counter import count_stabbed
from hotjoin.matcher.partition.hist_fit import lloyd

_done = False
_lock = threading.Lock()
_stop = threading.Event()  # set by an exiting process: finish the current engine, then stop


def _subscriptions(kind: str, n: int = 120) -> list[object]:
    """Clustered ranges (so that the hotspot strategies find hotspots) plus scattered ones."""
    rng = np.random.default_rng(7)
    out: list[object] = []
    for i in range(n):
        lo = float(rng.integers(0, 4)) if i % 3 else float(rng.integers(0, 10))
        a, c = Range(lo, lo + 3.0), Range(lo, lo + 4.0)
        if kind == "select":
            out.append(SelectJoin(a, c))
        elif kind == "band":
            out.append(BandJoin(Range(-1.0 - i % 2, 1.0 + i % 3), a, c))
        elif kind == "interval":
            out.append(IntervalJoin.allen(ALLEN_RELATIONS[i % len(ALLEN_RELATIONS)],
                                          b=Range(-1.0 - i % 2, 1.0 + i % 3), a=a, c=c))
        else:
            out.append(WindowJoin(a, c, w=2 + i % 4))
    return out


def _drive(kind: str, strategy: str, options: dict[str, float] | None = None) -> None:
    """Every call form of one engine whose ``kind`` joins run ``strategy`` (tuned by
    ``options``)."""
    e = Engine(lateness=2, retention=20, strategy={kind: strategy}, options=options)
    subs = _subscriptions(kind)
    e.subscribe_many(subs[:-10])
    n = 60
    keys = np.arange(n, dtype=np.float64) % 4
    values = (np.arange(n, dtype=np.float64) * 0.37) % 10
    times = np.arange(n, dtype=np.int64) // 3
    lengths = np.arange(n, dtype=np.int64) % 5  # intervals and points (interval joins' ends)
    for output in ("pairs", "affected", "none"):
        sides = np.arange(n, dtype=np.int8) % 2
        ids = [f"{output}{i}" for i in range(n)]
        t0 = times + (0 if output == "pairs" else 30)
        e.publish_batch(sides, ids, keys, values, t0, None, ends=t0 + lengths, output=output)
    t = 100
    for side in ("R", "S"):
        for k in range(4):
            t += 1
            e.publish(Event(side, f"one{side}{k}", float(k), 2.0, t, end=t + k))
            e.publish_affected(Event(side, f"aff{side}{k}", float(k), 3.0, t))
            e.publish_identify(Event(side, f"idn{side}{k}", float(k), 4.0, t, end=t + 1))
    e.probe_batch("R", keys[:4], values[:4], times[:4] + t, ends=times[:4] + t + 2)
    sid = e.subscribe_many(subs[-10:], snapshot=True)[0]
    e.result_columnar(sid)
    e.delete_batch(["R", "S"], ["oneR0", "oneS1"], output="pairs")
    e.delete_batch(["R", "S"], ["affR0", "affS1"], output="affected")
    e.delete("R", "idnR2")
    e.delete_affected("S", "idnS3")
    e.unsubscribe(sid)
    e.publish_batch(["R", "S"], ["late0", "late1"], [1.0, 1.0], [1.0, 1.0], [t + 50, t + 51])


def warm_up_kernels(progress: Callable[[str], object] | None = None) -> float:
    """Load (or compile) every kernel the engine can call, once per process; the seconds it took
    (0.0 once done). Thread-safe: a second caller waits for the first. ``progress``, if given,
    is called with ``"kind strategy (k/n)"`` before each strategy's kernels (compiling them all
    takes minutes)."""
    global _done
    with _lock:
        if _done:
            return 0.0
        t0 = time.perf_counter()
        steps = [(kind, name) for kind, names in STRATEGIES.items() for name in names]
        for k, (kind, name) in enumerate(steps, 1):
            if _stop.is_set():
                return time.perf_counter() - t0  # not done: the next caller goes on
            if progress is not None:
                progress(f"{kind} {name} ({k}/{len(steps)})")
            _drive(kind, name)
        _drive("select", "auto")  # every kind's router together on one engine
        # SJ-Hotspot's scattered part by SJ-SelectFirst: at this size every group is a hotspot
        # and the cost comparison picks SJ-SSI, so a larger α and no SelectFirst cost force it
        _drive("select", "SJ-Hotspot", {"alpha": 0.2, "scattered_sf_cost": 0.0})
        # kernels that only some runs reach, called directly with their arrays' types: the
        # routers' exact n' sample (once per max(1,024, n/16) tuples), an insert into a key's
        # window skyline (only when a fresh skyline exists for that key, which depends on the
        # router's timed choices), and the batch path's row ordering
        z = np.zeros(1, dtype=np.float64)
        i64 = np.zeros(1, dtype=np.int64)
        count_stabbed(z, z, i64, 0.0)
        sky = SkylineIndex(BaseTable("S"))
        sky.ready_for(0)
        sky_insert_many(sky.store(), sky.pool, i64, z, z, i64, i64, z)
        # WJ-Dynamic's batch path reads skyline sizes only when a WJ-SSI-like member may win
        stored_sizes(i64, z, i64, i64, z, 0, np.zeros((1, 1)), 0)
        # the batch path's row ordering runs only when a run's rows come out of event order
        # (two members of a router, or SJ-Hotspot's two parts, each with rows)
        order_by_event(i64.copy(), i64.copy(), i64.copy())
        first_descent(i64)
        # the histograms' Lloyd refinement runs only once a side has more blocks than buckets
        # (tens of thousands of subscriptions)
        lloyd(np.arange(4.0), np.ones(4), np.ones(4), np.ones(4), np.array([0, 2, 4], dtype=np.int64), 1)
        merge_two_runs(i64.copy(), i64.copy(), i64.copy(), 0, np.zeros((3, 1), dtype=np.int64))
        _done = True
        return time.perf_counter() - t0


EXIT_WAIT = 120.0
"""Seconds a process that exits waits, at most, for a warm-up to stop."""


def warm_up_in_background(log: logging.Logger | None = None,
                          then: Callable[[], None] | None = None) -> threading.Thread:
    """:func:`warm_up_kernels` in a daemon thread (a server starts serving meanwhile; an event
    that needs a kernel still loading waits for numba's lock, as it would without a warm-up),
    then ``then()`` (the caller's own kernels: the server's delivery passes).

    A process that exits first stops it after the engine it is driving and waits for that (at
    most :data:`EXIT_WAIT` seconds, from an ``atexit`` hook; from the on-disk cache one engine
    loads in well under a second): LLVM compiles with the GIL released, and a compile still
    running while the interpreter tears down can abort the process with an LLVM assertion."""

    def run() -> None:
        t0 = time.perf_counter()
        s = warm_up_kernels()
        if then is not None and not _stop.is_set():
            then()
            s = time.perf_counter() - t0
        if log is not None and s:
            log.info("compiled kernels loaded in %.2fs", s)

    th = threading.Thread(target=run, name="hotjoin-warmup", daemon=True)
    th.start()
    atexit.register(_stop_and_join, th)
    return th


def _stop_and_join(th: threading.Thread) -> None:
    """The exit hook of :func:`warm_up_in_background`."""
    _stop.set()
    th.join(EXIT_WAIT)
