"""``hotjoin bench interval``: interval joins, every engine strategy side by side with the
baselines a user would otherwise run (docs/design.md, "Interval joins").

Workload (``matcher.workload.interval_workload``): ``--subscriptions`` interval joins mixing
every Allen relation and ISEQL join with random δ and ε (key conditions a few keys wide, one in
four with a value selection), ``--stored`` stored intervals with heavy-tailed lengths over a key
domain of ``--key-domain`` keys, then ``--probes`` incoming intervals (later start times, both
sides) that are matched against them.

Measured, all on the same events:

* **AFFECTED throughput** (incoming events/s, every affected subscription with its pair count,
  nothing stored: ``Engine.probe_batch``) of every interval strategy and ``auto``, interleaved
  in chunks (``ops/bench/common.py``), and of three baselines over the same stored tuples,
  sorted by (key, start time):

  - *nested loop*: per subscription, every stored partner of its partner keys, all conditions
    checked (compiled);
  - *plane sweep* (Piatov et al., one join per subscription): per subscription and partner key,
    a binary search of the start-time window its SS/SE (R probes) or SS/ES (S probes) ranges
    allow in the key's start-ordered run, then the scan of that window (compiled);
  - *NumPy brute force*: the partners of the union of all key windows, the subscriptions whose
    own value range holds the probe's value (one vectorised comparison), then one boolean mask
    of those subscriptions' other conditions against the partners (in blocks).

* **publish_batch ÷ one at a time**: the probes published (stored) by ``publish_batch`` against
  ``publish_affected`` per event, each on an engine loaded with the same state (``auto``).
* **Memory per subscription** (``Engine.memory_bytes``) of the interval joins against band
  joins with the same key and value ranges, without stored tuples.
* **auto ÷ best static**: per chunk of probes, ``auto``'s throughput over the best static
  strategy's, averaged.

Targets (recorded with the results in the JSON, met or not): AFFECTED throughput ÷ best baseline
≥ 100; publish_batch ÷ one at a time ≥ 5; memory per interval subscription ≤ 2 × a band
subscription's; auto ÷ best static ≥ 0.97 on average. The baselines and the brute force must
agree with each other (checked on every run); each strategy's agreement with them is recorded.
JSON goes only where ``--json PATH`` says, never over a file git tracks.
"""

from __future__ import annotations

import argparse
import gc
import math
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from hotjoin.matcher.engine import Engine
from hotjoin.matcher.joins.interval import INTERVAL_STRATEGIES
from hotjoin.matcher.model import BandJoin, IntervalJoin
from hotjoin.matcher.workload import interval_workload
from hotjoin.ops.bench.common import interleaved, machine, write_json

# The baselines' helpers are inlined into their loops (``inline="always"``), as a numba user
# tuning them would: a called helper costs each probe about 20 % more.

BIG = 1 << 62  # an unbounded endpoint bound (every difference of two times fits well inside)
TARGETS = {"affected_over_best_baseline": 100.0, "batch_over_one_at_a_time": 5.0,
           "memory_interval_over_band": 2.0, "auto_over_best_static": 0.97}
CHUNK_PROBES = 200  # probes per chunk of the auto ÷ best static pass
QUICK = {"subscriptions": 2_000, "stored": 2_000, "probes": 200, "key_domain": 50,
         "brute_probes": 20}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--subscriptions", type=int, default=100_000)
    p.add_argument("--stored", type=int, default=100_000, help="stored intervals")
    p.add_argument("--probes", type=int, default=2_000, help="incoming intervals matched")
    p.add_argument("--key-domain", type=int, default=1_000)
    p.add_argument("--brute-probes", type=int, default=50,
                   help="probes the NumPy brute force is timed on (it is the slowest)")
    p.add_argument("--budget", type=float, default=20.0,
                   help="seconds per strategy and baseline at most (a slow one sees fewer probes)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true",
                   help="a small workload for a smoke run (seconds, not minutes)")
    p.add_argument("--json", dest="json_path", default=None,
                   help="write the results as JSON to this path (never a file git tracks)")


def check_output_path(path: str | None) -> None:
    """``ValueError`` when ``path`` is a file git tracks (the results never overwrite one)."""
    if path is None:
        return
    p = Path(path).resolve()
    if not p.exists():
        return
    try:
        out = subprocess.run(["git", "ls-files", "--error-unmatch", p.name], cwd=p.parent,
                             capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return
    if out.returncode == 0:
        raise ValueError(f"--json {path} is a file git tracks; write the results elsewhere")


# ---- baselines -------------------------------------------------------------------------------


class Partners:
    """One side's stored tuples sorted by (key, start time), with each key's run."""

    def __init__(self, keys: np.ndarray, values: np.ndarray, times: np.ndarray,
                 ends: np.ndarray) -> None:
        order = np.lexsort((times, keys))
        self.keys, self.values = keys[order], values[order]
        self.times, self.ends = times[order], ends[order]
        self.uk, start = np.unique(self.keys, return_index=True)
        self.run = np.append(start, self.keys.shape[0]).astype(np.int64)


class SubColumns:
    """Every subscription's ranges as flat columns (endpoint bounds ±``BIG`` when unbounded)."""

    def __init__(self, subs: list[IntervalJoin]) -> None:
        def f(r: Any, end: str) -> float:
            x = getattr(r, end)
            return (-math.inf if end == "lo" else math.inf) if x is None else float(x)

        def i(r: Any, end: str) -> int:
            x = getattr(r, end)
            return (-BIG if end == "lo" else BIG) if x is None else int(x)

        self.fb = np.array([[f(getattr(s, n), e) for n in "bac" for e in ("lo", "hi")]
                            for s in subs], dtype=np.float64).reshape(-1, 6)
        self.ib = np.array([[i(getattr(s, n), e) for n in ("ss", "se", "es", "ee")
                             for e in ("lo", "hi")] for s in subs], dtype=np.int64).reshape(-1, 8)


@njit(cache=True, inline="always")
def _holds(fb: np.ndarray, ib: np.ndarray, q: int, rk: float, rv: float, rt: int, re: int,
           sk: float, sv: float, st: int, se: int) -> bool:
    d = sk - rk
    if d < fb[q, 0] or d > fb[q, 1] or rv < fb[q, 2] or rv > fb[q, 3]:
        return False
    if sv < fb[q, 4] or sv > fb[q, 5]:
        return False
    x = st - rt
    if x < ib[q, 0] or x > ib[q, 1]:
        return False
    x = st - re
    if x < ib[q, 2] or x > ib[q, 3]:
        return False
    x = se - rt
    if x < ib[q, 4] or x > ib[q, 5]:
        return False
    x = se - re
    return ib[q, 6] <= x <= ib[q, 7]


@njit(cache=True, inline="always")
def _lower(a: np.ndarray, lo: int, hi: int, x: float) -> int:
    while lo < hi:
        m = (lo + hi) >> 1
        if a[m] < x:
            lo = m + 1
        else:
            hi = m
    return lo


@njit(cache=True, inline="always")
def _upper(a: np.ndarray, lo: int, hi: int, x: float) -> int:
    while lo < hi:
        m = (lo + hi) >> 1
        if a[m] <= x:
            lo = m + 1
        else:
            hi = m
    return lo


@njit(cache=True, inline="always")
def _add(t: int, b: int) -> int:
    """``t + b`` with ±``BIG`` (unbounded) kept unbounded."""
    if b <= -(1 << 62):
        return -(1 << 62)
    if b >= (1 << 62):
        return 1 << 62
    return t + b


@njit(cache=True)
def _per_subscription(fb: np.ndarray, ib: np.ndarray, probe_r: bool, pk: np.ndarray,
                      pv: np.ndarray, pt: np.ndarray, pe: np.ndarray, uk: np.ndarray,
                      run: np.ndarray, keys: np.ndarray, values: np.ndarray, times: np.ndarray,
                      ends: np.ndarray, sweep: bool, affected: np.ndarray,
                      pairs: np.ndarray) -> None:
    """Per probe, per subscription: its partner keys' runs, scanned whole (nested loop) or in
    the start-time window its ranges allow (plane sweep). ``affected[i]``/``pairs[i]``: the
    affected subscriptions and the pairs of probe i."""
    nk = uk.shape[0]
    for i in range(pk.shape[0]):
        k, v, t, e = pk[i], pv[i], pt[i], pe[i]
        na, npairs = 0, 0
        for q in range(fb.shape[0]):
            if probe_r:
                klo, khi = k + fb[q, 0], k + fb[q, 1]
                tlo = max(_add(t, ib[q, 0]), _add(e, ib[q, 2]))
                thi = min(_add(t, ib[q, 1]), _add(e, ib[q, 3]))
            else:
                klo, khi = k - fb[q, 1], k - fb[q, 0]
                tlo = max(_add(t, -ib[q, 1]), _add(e, -ib[q, 5]))
                thi = min(_add(t, -ib[q, 0]), _add(e, -ib[q, 4]))
            if sweep and tlo > thi:
                continue
            g0 = _lower(uk, 0, nk, klo - 1e-9 * (abs(klo) + 1.0))
            g1 = _upper(uk, g0, nk, khi + 1e-9 * (abs(khi) + 1.0))
            c = 0
            for g in range(g0, g1):
                a, b = run[g], run[g + 1]
                if sweep:
                    a = _lower(times, a, b, tlo)
                    b = _upper(times, a, b, thi)
                for j in range(a, b):
                    if probe_r:
                        ok = _holds(fb, ib, q, k, v, t, e, keys[j], values[j], times[j], ends[j])
                    else:
                        ok = _holds(fb, ib, q, keys[j], values[j], times[j], ends[j], k, v, t, e)
                    c += ok
            na += c > 0
            npairs += c
        affected[i] = na
        pairs[i] = npairs


class Baselines:
    """The three baselines over the stored tuples (module docstring)."""

    def __init__(self, subs: list[IntervalJoin], sides: np.ndarray, keys: np.ndarray,
                 values: np.ndarray, times: np.ndarray, ends: np.ndarray) -> None:
        self.cols = SubColumns(subs)
        self.side = {s: Partners(keys[sides == s], values[sides == s], times[sides == s],
                                 ends[sides == s]) for s in (0, 1)}

    def per_subscription(self, probe_side: int, k: np.ndarray, v: np.ndarray, t: np.ndarray,
                         e: np.ndarray, sweep: bool) -> tuple[np.ndarray, np.ndarray]:
        p = self.side[1 - probe_side]
        aff = np.zeros(k.shape[0], dtype=np.int64)
        pairs = np.zeros(k.shape[0], dtype=np.int64)
        _per_subscription(self.cols.fb, self.cols.ib, probe_side == 0, k, v, t, e, p.uk, p.run,
                          p.keys, p.values, p.times, p.ends, sweep, aff, pairs)
        return aff, pairs

    def brute_force(self, probe_side: int, k: np.ndarray, v: np.ndarray, t: np.ndarray,
                    e: np.ndarray, block: int = 8192) -> tuple[np.ndarray, np.ndarray]:
        """Join by key (the union of every subscription's key window), keep the subscriptions
        whose own value range holds the probe's value (A of an R probe, C of an S probe: one
        vectorised comparison), then mask those subscriptions' other conditions against the
        partners, ``block`` subscriptions at a time."""
        p = self.side[1 - probe_side]
        fb, ib = self.cols.fb, self.cols.ib
        aff = np.zeros(k.shape[0], dtype=np.int64)
        pairs = np.zeros(k.shape[0], dtype=np.int64)
        blo, bhi = fb[:, 0].min(), fb[:, 1].max()
        own = 2 if probe_side == 0 else 4
        for i in range(k.shape[0]):
            lo, hi = ((k[i] + blo, k[i] + bhi) if probe_side == 0 else (k[i] - bhi, k[i] - blo))
            a = np.searchsorted(p.keys, lo - 1e-9 * (abs(lo) + 1), "left")
            b = np.searchsorted(p.keys, hi + 1e-9 * (abs(hi) + 1), "right")
            if probe_side == 0:
                rk, rv, rt, re = k[i], v[i], t[i], e[i]
                sk, sv, st, se = p.keys[a:b], p.values[a:b], p.times[a:b], p.ends[a:b]
                pv = sv
            else:
                sk, sv, st, se = k[i], v[i], t[i], e[i]
                rk, rv, rt, re = p.keys[a:b], p.values[a:b], p.times[a:b], p.ends[a:b]
                pv = rv
            sel = np.flatnonzero((fb[:, own] <= v[i]) & (v[i] <= fb[:, own + 1]))
            if sel.shape[0] == 0 or b == a:
                continue
            other = 4 if probe_side == 0 else 2
            d = np.asarray(sk - rk)[None, :]
            dif = [np.asarray(x)[None, :] for x in (st - rt, st - re, se - rt, se - re)]
            pv_ = np.asarray(pv)[None, :]
            for q0 in range(0, sel.shape[0], block):
                f, g = fb[sel[q0:q0 + block]], ib[sel[q0:q0 + block]]
                m = (d >= f[:, 0:1]) & (d <= f[:, 1:2])
                m &= (pv_ >= f[:, other:other + 1]) & (pv_ <= f[:, other + 1:other + 2])
                for c, x in enumerate(dif):
                    m &= (x >= g[:, 2 * c:2 * c + 1]) & (x <= g[:, 2 * c + 1:2 * c + 2])
                cnt = m.sum(axis=1)
                aff[i] += int((cnt > 0).sum())
                pairs[i] += int(cnt.sum())
        return aff, pairs


# ---- the run ---------------------------------------------------------------------------------


def _engine(strategy: str, state: dict[str, Any]) -> Engine:
    e = Engine(lateness=1 << 40, strategy={"interval": strategy})
    e.load_state(state)
    return e


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The whole benchmark (module docstring); returns the JSON record."""
    opts = {k: getattr(args, k) for k in ("subscriptions", "stored", "probes", "key_domain",
                                          "brute_probes")}
    if args.quick:
        opts.update(QUICK)
    n_stored, n_probes = opts["stored"], opts["probes"]
    w = interval_workload(opts["subscriptions"], n_stored + n_probes, seed=args.seed,
                          key_domain=opts["key_domain"])
    subs = w.subscriptions
    st = slice(0, n_stored)
    pr = slice(n_stored, n_stored + n_probes)
    base = Engine(lateness=1 << 40)
    base.subscribe_many(subs)
    base.publish_batch(w.sides[st], w.ids[st], w.keys[st], w.values[st], w.times[st],
                       ends=w.ends[st], output="none")
    state = base.export_state()
    del base
    gc.collect()
    ps = w.sides[pr]
    probe = {s: tuple(np.ascontiguousarray(c[pr][ps == s]) for c in (w.keys, w.values, w.times,
                                                                       w.ends)) for s in (0, 1)}
    order = [(s, j) for j in range(max(len(probe[0][0]), len(probe[1][0])))
             for s in (0, 1) if j < len(probe[s][0])]  # both sides, alternating

    def slices(lo: int, hi: int) -> dict[int, np.ndarray]:
        return {s: np.array([j for s2, j in order[lo:hi] if s2 == s], dtype=np.int64)
                for s in (0, 1)}

    # -- AFFECTED throughput: strategies and baselines, interleaved ---------------------------
    engines = {name: _engine(name, state) for name in (*INTERVAL_STRATEGIES, "auto")}
    bl = Baselines(subs, w.sides[st], w.keys[st], w.values[st], w.times[st], w.ends[st])
    counts: dict[str, dict[int, np.ndarray]] = {
        name: {s: np.full(len(probe[s][0]), -1, dtype=np.int64) for s in (0, 1)}
        for name in (*engines, "nested loop", "plane sweep", "NumPy brute force")}
    for s in (0, 1):  # compile and warm up outside the clock
        for e in engines.values():
            e.probe_batch("RS"[s], probe[s][0][:2], probe[s][1][:2], probe[s][2][:2],
                          ends=probe[s][3][:2])
        for sweep in (False, True):
            bl.per_subscription(s, *(c[:1] for c in probe[s]), sweep=sweep)

    def engine_runner(name: str) -> Any:
        e = engines[name]

        def go(lo: int, hi: int) -> int:
            done = 0
            for s, idx in slices(lo, hi).items():
                if idx.shape[0]:
                    k, v, t, en = (c[idx] for c in probe[s])
                    out = e.probe_batch("RS"[s], k, v, t, ends=en, output="affected")
                    counts[name][s][idx] = out
                    done += int(out.sum())
            return done
        return go

    def baseline_runner(name: str) -> Any:
        def go(lo: int, hi: int) -> int:
            done = 0
            for s, idx in slices(lo, hi).items():
                if idx.shape[0]:
                    cols = [c[idx] for c in probe[s]]
                    if name == "NumPy brute force":
                        aff, _ = bl.brute_force(s, *cols)
                    else:
                        aff, _ = bl.per_subscription(s, *cols, sweep=name == "plane sweep")
                    counts[name][s][idx] = aff
                    done += int(aff.sum())
            return done
        return go

    runners = {name: engine_runner(name) for name in engines}
    runners.update({name: baseline_runner(name) for name in ("nested loop", "plane sweep")})
    n_items = len(order)
    timed = interleaved(runners, n_items, args.budget, chunks=5)
    brute_n = min(opts["brute_probes"], n_items)
    timed.update(interleaved({"NumPy brute force": baseline_runner("NumPy brute force")},
                             brute_n, args.budget, chunks=1))
    per_chunk = _chunk_ratios(runners, engines, n_items, args.budget)

    def agree(name: str, ref: str) -> bool | None:
        both = [(counts[name][s] >= 0) & (counts[ref][s] >= 0) for s in (0, 1)]
        if not any(b.any() for b in both):
            return None
        return all(bool((counts[name][s][b] == counts[ref][s][b]).all())
                   for s, b in zip((0, 1), both, strict=True))

    baselines_agree = (agree("plane sweep", "nested loop") is not False
                       and agree("NumPy brute force", "nested loop") is not False)
    agreement = {name: agree(name, "nested loop") for name in engines}
    static = {n: timed[n]["per_second"] for n in INTERVAL_STRATEGIES}
    best_static = max(static, key=lambda n: static[n])
    base_rate = {n: timed[n]["per_second"] for n in ("nested loop", "plane sweep",
                                                     "NumPy brute force")}
    best_baseline = max(base_rate, key=lambda n: base_rate[n])
    best_engine = max((*INTERVAL_STRATEGIES, "auto"), key=lambda n: timed[n]["per_second"])

    # -- publish_batch against one at a time ---------------------------------------------------
    one, batch = _engine("auto", state), _engine("auto", state)
    ids = [f"p{i}" for i in range(n_probes)]
    cols = (w.sides[pr], ids, w.keys[pr], w.values[pr], w.times[pr])
    t0 = time.perf_counter()
    res = batch.publish_batch(*cols, ends=w.ends[pr], output="affected")
    t_batch = time.perf_counter() - t0
    from hotjoin.matcher.model import Event

    evs = [Event("RS"[int(s)], i, float(k), float(v), int(t), b"", int(e)) for s, i, k, v, t, e in
           zip(w.sides[pr].tolist(), ids, w.keys[pr].tolist(), w.values[pr].tolist(),
               w.times[pr].tolist(), w.ends[pr].tolist(), strict=True)]
    t0 = time.perf_counter()
    for ev in evs:
        one.publish_affected(ev)
    t_one = time.perf_counter() - t0
    assert int((res.status == 0).sum()) == n_probes and one.seq == batch.seq

    # -- memory per subscription -------------------------------------------------------------
    mem = _memory(subs)

    rec = {
        "benchmark": "interval", "machine": machine(), "options": opts, "seed": args.seed,
        "quick": bool(args.quick),
        "affected_throughput": timed,
        "best_static": best_static, "best_baseline": best_baseline, "best_engine": best_engine,
        "affected_over_best_baseline": timed[best_engine]["per_second"] / base_rate[best_baseline],
        "batch_events_per_second": n_probes / t_batch,
        "one_at_a_time_events_per_second": n_probes / t_one,
        "batch_over_one_at_a_time": t_one / t_batch,
        "memory": mem,
        "memory_interval_over_band": mem["interval_bytes_per_subscription"]
        / max(mem["band_bytes_per_subscription"], 1e-9),
        "auto_over_best_static_per_chunk": per_chunk,
        "auto_over_best_static": float(np.mean(per_chunk)) if per_chunk else float("nan"),
        "baselines_agree": baselines_agree, "strategies_agree_with_baselines": agreement,
    }
    rec["targets"] = {k: {"target": v, "value": rec[k],
                          "met": bool(rec[k] >= v) if k != "memory_interval_over_band"
                          else bool(rec[k] <= v)} for k, v in TARGETS.items()}
    return rec


def _chunk_ratios(runners: dict[str, Any], engines: dict[str, Engine], n_items: int,
                  budget: float) -> list[float]:
    """Per chunk of probes, auto's throughput over the best static strategy's (timed again,
    one strategy after another on each chunk alone; at most ``CHUNK_PROBES`` probes of each
    chunk, so this pass stays within a few budgets)."""
    out = []
    chunks = 5
    bounds = np.linspace(0, n_items, chunks + 1).astype(int)
    for c in range(chunks):
        lo = int(bounds[c])
        hi = min(int(bounds[c + 1]), lo + CHUNK_PROBES)
        if hi <= lo:
            continue
        rates = {}
        for name in engines:
            t = time.perf_counter()
            runners[name](lo, hi)
            rates[name] = (hi - lo) / max(time.perf_counter() - t, 1e-9)
        best = max(rates[n] for n in INTERVAL_STRATEGIES)
        out.append(rates["auto"] / best)
    return out


def _memory(subs: list[IntervalJoin]) -> dict[str, float]:
    """``Engine.memory_bytes`` per subscription: the interval joins, and band joins with the
    same B, A and C, each on an engine without stored tuples."""
    empty = Engine().memory_bytes()
    iv = Engine()
    iv.subscribe_many(subs)
    band = Engine()
    band.subscribe_many([BandJoin(s.b, s.a, s.c) for s in subs])
    n = max(len(subs), 1)
    return {"interval_bytes_per_subscription": (iv.memory_bytes() - empty) / n,
            "band_bytes_per_subscription": (band.memory_bytes() - empty) / n}


def main(args: argparse.Namespace) -> int:
    """``hotjoin bench interval``: run, print a summary line per measure, write ``--json``."""
    import json
    import sys

    rec = run(args)
    for name, r in rec["affected_throughput"].items():
        print(f"{name:<20} {r['per_second']:12.1f} events/s (AFFECTED, {r['items']} events)")
    for k, t in rec["targets"].items():
        print(f"{k:<30} {t['value']:10.3g}  target {t['target']:g}  "
              f"{'met' if t['met'] else 'NOT met'}")
    if not rec["baselines_agree"]:
        print("warning: the baselines disagree with each other", file=sys.stderr)
    if args.json_path:
        write_json(args.json_path, rec)
    else:
        print(json.dumps({k: rec[k] for k in TARGETS}))
    return 0
