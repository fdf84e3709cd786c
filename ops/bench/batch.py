"""``hotjoin bench batch``: ``Engine.publish_batch`` against the one-at-a-time loop.

The server's load-test workloads (``clients.loadgen``): ``subscriptions`` select joins (Table I A/C
ranges over integer keys, key domain calibrated for ≈ ``affected`` pairs per incoming R tuple, so
most R tuples have no S partner at all), ``stored`` S tuples, then ``events`` incoming R tuples.
Three kinds of the same load:

* ``select`` — exactly the server load test's select workload (all times 1);
* ``window`` — the same ranges as window joins (w = ``window``), stored S times spread over
  [0, ``window``), incoming R times increasing with out-of-order jitter up to the topic's
  ``lateness`` (> 0), so the watermark moves inside every batch;
* ``band`` — the load test's clustered bands, half-width calibrated for ≈ ``affected``
  subscriptions per R tuple.

Contenders, timed side by side in one run (interleaved chunks, ``ops.bench.common``), each on
its own engine built identically:

* ``one_at_a_time`` — ``Engine.publish_affected(Event(...))`` per event (what the server did);
* ``publish_batch`` — ``Engine.publish_batch(..., output="affected")`` per ``batch`` events;
* ``numpy_reference`` — what a user would write instead: per event, its key's partners by
  binary search over the sorted S keys, then every subscription masked with NumPy (affected
  counts, no state kept; R tuples never join R tuples here, so nothing needs storing).

All three report the same work (affected rows and pair totals), which the run checks. There is
no limit line: no static flat-array prototype exists for the mixed insert/match path.

Before timing, every compiled kernel is loaded once (``matcher.warmup.warm_up_kernels``, as the
server does at start-up), so the figures are a running server's, not its first seconds'; with
``--cold`` the kernels load when first needed, inside the timed stream (the figures of sessions
7–10 were measured that way).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from hotjoin.clients.loadgen import BAND_CLUSTERS, Workload, band_half_width
from hotjoin.matcher import BandJoin, Engine, Event, Range, SelectJoin, WindowJoin
from hotjoin.matcher.engine import STRATEGIES
from hotjoin.matcher.warmup import warm_up_kernels
from hotjoin.matcher.workload import clustered_bands, r_arrays, s_arrays, select_ranges_arrays
from hotjoin.ops.bench.common import interleaved, machine, write_json

KINDS = ("select", "band", "window")
CONTENDERS = ("one_at_a_time", "publish_batch", "numpy_reference")


@dataclass(frozen=True)
class BatchBenchConfig:
    subscriptions: int = 100_000
    stored: int = 100_000
    events: int = 20_000
    batch: int = 1_000
    affected: float = 10.0
    kinds: tuple[str, ...] = KINDS
    window: int = 1_000
    lateness: int = 50
    strategy: str = "auto"
    numpy_share: float | None = None
    seed: int = 1
    cold: bool = False  # no warm-up: kernels load inside the timed stream

    def __post_init__(self) -> None:
        if min(self.subscriptions, self.stored, self.events, self.batch) <= 0:
            raise ValueError("--subscriptions, --stored, --events and --batch must be > 0")
        if self.events % self.batch:
            raise ValueError("--events must be a multiple of --batch")
        if self.numpy_share is not None and not 0 < self.numpy_share <= 1:
            raise ValueError("--numpy-share must be in (0, 1]")
        if self.lateness <= 0 or self.window <= 0:
            raise ValueError("--lateness and --window must be > 0")
        if self.strategy != "auto" and not any(self.strategy in names
                                               for names in STRATEGIES.values()):
            raise ValueError(f"unknown strategy {self.strategy!r}")
        bad = [k for k in self.kinds if k not in KINDS]
        if bad or not self.kinds:
            raise ValueError(f"--kinds must be a comma-separated subset of {','.join(KINDS)}")


QUICK = dict(subscriptions=3_000, stored=3_000, events=2_000, batch=500)


@dataclass
class _Load:
    subs: list[Any]
    lateness: int
    s: tuple[np.ndarray, np.ndarray, np.ndarray]   # stored S keys, values, times
    r: tuple[np.ndarray, np.ndarray, np.ndarray]   # incoming R keys, values, times
    ref: dict[str, np.ndarray]                     # subscription columns for the NumPy reference


def workload(c: BatchBenchConfig, kind: str) -> _Load:
    """The load-test workload of ``kind`` (see the module docstring)."""

    w = Workload(kind="band" if kind == "band" else "select", subscriptions=c.subscriptions,
                 stored=c.stored, affected=c.affected, seed=c.seed)
    cfg = w.table()
    sk, sv, _ = s_arrays(cfg, c.stored)  # type: ignore[arg-type]
    rk, rv, _ = r_arrays(cfg, c.events, batch=1000)  # type: ignore[arg-type]
    st = np.zeros(c.stored, dtype=np.int64)
    rt = np.ones(c.events, dtype=np.int64)
    lateness = 0
    if kind == "band":
        lo, hi = clustered_bands(c.subscriptions, BAND_CLUSTERS, band_half_width(w), c.seed)
        subs: list[Any] = [BandJoin(Range(a, b)) for a, b in zip(lo.tolist(), hi.tolist(),
                                                                  strict=True)]
        ref = {"b_lo": lo, "b_hi": hi}
    else:
        al, ah, cl, ch = select_ranges_arrays(cfg)  # type: ignore[arg-type]
        ref = {"a_lo": al, "a_hi": ah, "c_lo": cl, "c_hi": ch}
        if kind == "select":
            subs = [SelectJoin(Range(a, b), Range(x, y)) for a, b, x, y in
                    zip(al.tolist(), ah.tolist(), cl.tolist(), ch.tolist(), strict=True)]
        else:
            rng = np.random.default_rng([c.seed, 14])
            st = np.sort(rng.integers(0, c.window, c.stored)).astype(np.int64)  # stored in order
            # times rising from w to 1.5 w over the stream (so most stored partners stay inside
            # the window), each up to lateness/2 behind the largest so far: out of order, never late
            rt = c.window + np.arange(c.events, dtype=np.int64) * (c.window // 2) // c.events
            rt = rt - rng.integers(0, c.lateness // 2 + 1, c.events)
            lateness = c.lateness
            subs = [WindowJoin(Range(a, b), Range(x, y), w=c.window) for a, b, x, y in
                    zip(al.tolist(), ah.tolist(), cl.tolist(), ch.tolist(), strict=True)]
            ref["w"] = np.full(c.subscriptions, c.window, dtype=np.int64)
    return _Load(subs, lateness, (sk, sv, st), (rk, rv, rt), ref)


def build(load: _Load, strategy: str = "auto") -> Engine:
    """A fresh engine with the load's subscriptions and stored S tuples (one batch, no output).

    ``strategy``: "auto" (the router, as the server's load test runs) or a strategy name; a
    name of another kind leaves this kind on "auto"."""

    mine = {k: strategy for k, names in STRATEGIES.items() if strategy in names}
    e = Engine(lateness=load.lateness, strategy=mine or "auto")
    e.subscribe_many(load.subs)
    sk, sv, st = load.s
    n = sk.shape[0]
    res = e.publish_batch(np.ones(n, dtype=np.int8), [f"s{i}" for i in range(n)], sk, sv, st,
                          output="none")
    assert res.accepted == n
    return e


NUMPY_SHARE = {"select": 1.0, "window": 1.0, "band": 0.02}
"""Default share of each batch the NumPy reference processes (band: a full-width searchsorted
per subscription costs ~25 ms per event at 100,000 bands, so it times the first 2 %)."""


def numpy_runner(load: _Load, kind: str, c: BatchBenchConfig) -> Any:
    """The NumPy brute force a user would write (join by key, then mask every subscription):
    ``(run(lo, hi), [affected rows, pairs], processed event indexes, events per batch)``."""
    sk, sv, st = load.s
    order = np.argsort(sk, kind="stable")
    skeys, svals, stimes = sk[order], sv[order], st[order]
    rk, rv, rt = load.r
    ref = load.ref
    share = c.numpy_share if c.numpy_share is not None else NUMPY_SHARE[kind]
    per_batch = max(1, int(round(c.batch * share)))
    counts: list[int] = [0, 0]  # affected rows, pairs
    done: list[int] = []  # the event indexes it processed

    def one(k: float, v: float, t: int) -> None:
        if kind == "band":
            lo = np.searchsorted(skeys, k + ref["b_lo"], "left")
            hi = np.searchsorted(skeys, k + ref["b_hi"], "right")
            n = hi - lo
        else:
            a, b = np.searchsorted(skeys, k, "left"), np.searchsorted(skeys, k, "right")
            if a == b:
                return
            sel = np.flatnonzero((ref["a_lo"] <= v) & (v <= ref["a_hi"]))
            if sel.shape[0] == 0:
                return
            pv = svals[a:b]
            ok = (ref["c_lo"][sel, None] <= pv) & (pv <= ref["c_hi"][sel, None])
            if kind == "window":
                ok &= np.abs(stimes[a:b] - t) <= ref["w"][sel, None]
            n = ok.sum(axis=1)
        counts[0] += int(np.count_nonzero(n))
        counts[1] += int(n.sum())

    def run(lo: int, hi: int) -> int:
        for j in range(lo, hi):
            a, b = j * c.batch, j * c.batch + per_batch
            for k, v, t in zip(rk[a:b].tolist(), rv[a:b].tolist(), rt[a:b].tolist(),
                               strict=True):
                one(k, v, t)
            done.extend(range(a, b))
        return (hi - lo) * per_batch

    return run, counts, done, per_batch


def point(c: BatchBenchConfig, kind: str) -> dict[str, Any]:
    """Time the three contenders on one kind; returns the record."""
    t0 = time.perf_counter()
    load = workload(c, kind)
    eng_one, eng_batch = build(load, c.strategy), build(load, c.strategy)
    setup_s = time.perf_counter() - t0
    rk, rv, rt = load.r
    ids = [f"r{i}" for i in range(c.events)]
    sides = np.zeros(c.events, dtype=np.int8)
    work = {n: [0, 0] for n in CONTENDERS}

    # Each contender keeps its outputs; they are counted after its chunk, off the clock
    # (``interleaved``'s ``after``): on output-heavy loads counting 2.9 M rows per batch
    # (two bincounts) would cost the batch path ~25 µs per event inside its timing.
    kept: dict[str, list[Any]] = {"one_at_a_time": [], "publish_batch": []}

    def one_at_a_time(lo: int, hi: int) -> int:
        a, b = lo * c.batch, hi * c.batch
        pub = eng_one.publish_affected
        keep = kept["one_at_a_time"].append
        for i, k, v, t in zip(ids[a:b], rk[a:b].tolist(), rv[a:b].tolist(), rt[a:b].tolist(),
                              strict=True):
            keep(pub(Event("R", i, k, v, t)))
        return b - a

    def batched(lo: int, hi: int) -> int:
        keep = kept["publish_batch"].append
        for j in range(lo, hi):
            a, b = j * c.batch, (j + 1) * c.batch
            keep((a, b, eng_batch.publish_batch(sides[a:b], ids[a:b], rk[a:b], rv[a:b],
                                                rt[a:b])))
        return (hi - lo) * c.batch

    def count_one() -> None:
        wk = work["one_at_a_time"]
        for out in kept["one_at_a_time"]:
            wk[0] += len(out)
            wk[1] += int(out.counts.sum()) if len(out) else 0
        kept["one_at_a_time"].clear()

    def count_batch() -> None:
        wk = work["publish_batch"]
        for a, b, res in kept["publish_batch"]:
            assert res.accepted == b - a
            wk[0] += len(res.output)
            wk[1] += int(res.output.count.sum())
            rows_of[a:b] += np.bincount(res.output.event, minlength=b - a)
            pairs_of[a:b] += np.bincount(res.output.event, weights=res.output.count,
                                         minlength=b - a).astype(np.int64)
        kept["publish_batch"].clear()

    rows_of = np.zeros(c.events, dtype=np.int64)   # per event, from the batch path's output
    pairs_of = np.zeros(c.events, dtype=np.int64)
    numpy_run, numpy_counts, numpy_done, per_batch = numpy_runner(load, kind, c)
    # the whole stream for every contender (no time budget), so the work counters are comparable
    timed = interleaved({"one_at_a_time": one_at_a_time, "publish_batch": batched,
                         "numpy_reference": numpy_run}, c.events // c.batch, float("inf"),
                        chunks=min(5, c.events // c.batch),
                        after={"one_at_a_time": count_one, "publish_batch": count_batch})
    work["numpy_reference"] = numpy_counts
    rec: dict[str, Any] = {"kind": kind, "strategy": eng_batch.strategy_names[kind],
                           "subscriptions": c.subscriptions, "stored": c.stored,
                           "events": c.events, "batch": c.batch, "lateness": load.lateness,
                           "setup_s": round(setup_s, 2)}
    for name in CONTENDERS:
        r = timed[name]
        events = r["work"]  # every runner returns the number of events it processed
        rec[name] = {"events": events, "events_per_s": events / r["seconds"],
                     "us_per_event": 1e6 * r["seconds"] / events,
                     "affected_rows": work[name][0], "pairs": work[name][1]}
    rec["batch_over_one_at_a_time"] = (rec["publish_batch"]["events_per_s"]
                                       / rec["one_at_a_time"]["events_per_s"])
    rec["batch_over_numpy"] = (rec["publish_batch"]["events_per_s"]
                               / rec["numpy_reference"]["events_per_s"])
    rec["same_work"] = work["one_at_a_time"] == work["publish_batch"]
    sub = np.asarray(numpy_done, dtype=np.int64)  # the same events from the batch path
    rec["numpy_same_work"] = work["numpy_reference"] == [int(rows_of[sub].sum()),
                                                          int(pairs_of[sub].sum())]
    rec["affected_per_event"] = work["publish_batch"][0] / c.events
    return rec


def run(c: BatchBenchConfig, json_path: str | None = None) -> dict[str, Any]:
    warm_s = 0.0 if c.cold else warm_up_kernels()
    recs = [point(c, k) for k in c.kinds]
    res = {"benchmark": "batch", "config": asdict(c), "machine": machine(), "records": recs,
           "warm_up_s": round(warm_s, 2),
           "ratios": {r["kind"]: round(r["batch_over_one_at_a_time"], 2) for r in recs}}
    if json_path:
        write_json(json_path, res)
    return res


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = BatchBenchConfig()
    p.add_argument("--quick", action="store_true",
                   help="a smoke run in seconds (3,000 subscriptions and stored, 2,000 events)")
    p.add_argument("--subscriptions", type=int, default=None, help=f"default {d.subscriptions}")
    p.add_argument("--stored", type=int, default=None, help=f"default {d.stored}")
    p.add_argument("--events", type=int, default=None, help=f"default {d.events}")
    p.add_argument("--batch", type=int, default=None, help=f"events per batch, default {d.batch}")
    p.add_argument("--affected", type=float, default=d.affected)
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--lateness", type=int, default=d.lateness, help="window kind's lateness")
    p.add_argument("--window", type=int, default=d.window, help="window joins' w")
    p.add_argument("--strategy", default="auto",
                   help="'auto' (the router, default) or one strategy name, e.g. SJ-SSI")
    p.add_argument("--numpy-share", type=float, default=None,
                   help="share of each batch the NumPy reference times (default: all for "
                        "select/window, 0.02 for band)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--cold", action="store_true",
                   help="no kernel warm-up: kernels load inside the timed stream (a cold start)")


def config_from_args(a: argparse.Namespace) -> BatchBenchConfig:
    base = dict(QUICK) if a.quick else {}
    for name in ("subscriptions", "stored", "events", "batch"):
        if getattr(a, name) is not None:
            base[name] = getattr(a, name)
    return BatchBenchConfig(**base, affected=a.affected,
                            kinds=tuple(k.strip() for k in a.kinds.split(",") if k.strip()),
                            lateness=a.lateness, window=a.window, strategy=a.strategy,
                            numpy_share=a.numpy_share, seed=a.seed, cold=a.cold)


def record_line(r: dict[str, Any]) -> str:
    o, b, n = r["one_at_a_time"], r["publish_batch"], r["numpy_reference"]
    return (f"{r['kind']:<7} {r['strategy']:<11} one-at-a-time {o['events_per_s']:10,.0f}/s  publish_batch "
            f"{b['events_per_s']:10,.0f}/s  numpy {n['events_per_s']:10,.0f}/s  "
            f"batch/one {r['batch_over_one_at_a_time']:5.2f}x  affected/event "
            f"{r['affected_per_event']:.2f}  same work {r['same_work']}")
