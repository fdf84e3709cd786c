"""``hotjoin bench histogram``: paper 004 App. B, Fig. 25 — quality of interval histograms.

Workload (App. B): ``--intervals`` intervals with midpoints ``Normal(5000, 1500)`` and lengths
``|Normal(1000, 2000)|`` (a negative draw is mirrored; clipping at 0 instead would make 31 % of
the intervals points and the stabbing number ~30,000), endpoints not clipped to
``[0, 10000]`` (clipping cannot change any count for a query inside it except at the two
ends); ``--queries`` stabbing queries uniform over ``[0, 10000]``.  Per histogram and bucket
count: the mean over the queries of ``|estimate − true| / max(true, 1)``
(:func:`matcher.partition.hist_common.relative_error`), averaged over ``--repeats`` independent draws of
intervals and queries.

Histograms, all with ``k`` buckets = ``k`` constant pieces over the query domain:

* **HIST-EQW** — :class:`~matcher.partition.hist_eqw.EquiWidthHistogram` over ``[0, 10000]`` (stores ``k``
  values; its boundaries are implicit);
* **HIST-SSI** — :class:`~matcher.partition.hist_ssi.SSIHistogram` with ``φ`` uniform over
  ``[0, 10000]``; its step function has at most ``k`` pieces and stores ``k`` values plus
  ``k + 1`` breakpoints;
* **HIST-EQW (same floats)** — HIST-EQW given as many buckets as HIST-SSI stores floats
  (``2·pieces + 1``), the comparison at equal memory;
* **HIST-OPT\\*** (``--opt-candidates M``, 0 disables) — the least-``E²`` histogram (App. B's
  objective, ``φ`` uniform) by the ``O(k·M²)`` dynamic program, with bucket boundaries restricted
  to ``M`` of ``f_I``'s breakpoints (evenly spaced in rank) and computed on *all* intervals (the
  paper, unable to run the DP on 100,000 intervals, used a 10,000-interval sample).  Lemma 4
  puts the optimum's boundaries on breakpoints, so restricting them only raises ``E²``: this is
  an upper bound on the true HIST-OPT's ``E²``.

The paper reports 14.9 % for HIST-SSI and over 70 % for HIST-EQW at 20 buckets, on intervals that
"happen to form 18 stabbing groups"; the distribution stated above forms ~400 (see the
``tau`` column), which changes what HIST-SSI can do with 20 buckets —
``docs/benchmarks/engine.md`` (Fig. 25) discusses it.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from hotjoin.matcher.partition.histogram import (
    EquiWidthHistogram,
    ExactStabbingCounter,
    SSIHistogram,
    relative_error,
)
from hotjoin.ops.bench.common import Progress, machine, plot_lines, write_json

EQW, SSI, EQW_MEM, OPT = "HIST-EQW", "HIST-SSI", "HIST-EQW (same floats)", "HIST-OPT*"


@dataclass
class HistogramBenchConfig:
    intervals: int = 100_000
    queries: int = 5000
    buckets: tuple[int, ...] = (20, 30, 40, 50, 60, 70)
    domain: tuple[float, float] = (0.0, 10_000.0)
    mid_mean: float = 5000.0
    mid_sd: float = 1500.0
    length_mean: float = 1000.0
    length_sd: float = 2000.0
    repeats: int = 3
    opt_candidates: int = 2000
    allocation: str = "cardinality"
    match_limit: int = 400
    seed: int = 25


def workload(c: HistogramBenchConfig, rep: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lo, hi, queries)`` of repeat ``rep`` (module docstring)."""
    rng = np.random.default_rng([c.seed, rep])
    mid = rng.normal(c.mid_mean, c.mid_sd, c.intervals)
    length = np.abs(rng.normal(c.length_mean, c.length_sd, c.intervals))
    q = rng.uniform(c.domain[0], c.domain[1], c.queries)
    return mid - length / 2, mid + length / 2, q


# ---- HIST-OPT* ---------------------------------------------------------------------------------


@njit(cache=True)
def _opt_dp(pw: np.ndarray, pwy: np.ndarray, pwyy: np.ndarray, cand: np.ndarray,
            kmax: int) -> np.ndarray:  # pragma: no cover - compiled
    """V-optimal segmentation DP over candidate boundaries, O(kmax · M²).

    ``pw, pwy, pwyy``: prefix sums (float64[m+1]) of ``w``, ``w·y``, ``w·y²`` over the pieces;
    ``cand``: int64[M+1] candidate boundaries (piece indices, ``cand[0] = 0``,
    ``cand[M] = m``).  Returns ``arg`` (int64[kmax+1, M+1]): ``arg[k, j]`` is the previous
    boundary of the best ``k``-segment split of pieces ``0:cand[j]``.
    """
    nm = cand.shape[0]
    inf = np.inf
    prev = np.full(nm, inf)
    prev[0] = 0.0
    arg = np.zeros((kmax + 1, nm), np.int64)
    for k in range(1, kmax + 1):
        cur = np.full(nm, inf)
        for j in range(k, nm):
            b = cand[j]
            best = inf
            bi = 0
            for i in range(k - 1, j):
                d = prev[i]
                if d == inf:
                    continue
                a = cand[i]
                w = pw[b] - pw[a]
                c = pwyy[b] - pwyy[a]
                if w > 0.0:
                    s = pwy[b] - pwy[a]
                    c -= s * s / w
                if c < 0.0:
                    c = 0.0
                if d + c < best:
                    best = d + c
                    bi = i
            cur[j] = best
            arg[k, j] = bi
        prev = cur
    return arg


def opt_histograms(lo: np.ndarray, hi: np.ndarray, domain: tuple[float, float],
                   ks: tuple[int, ...],
                   candidates: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """HIST-OPT* (module docstring) for every ``k`` in ``ks``: ``k -> (breakpoints, values)``."""
    d0, d1 = domain
    ev = np.concatenate([lo, np.nextafter(hi, np.inf)])
    delta = np.concatenate([np.ones(lo.shape[0]), -np.ones(lo.shape[0])])
    order = np.argsort(ev, kind="stable")
    ev, delta = ev[order], delta[order]
    last = np.ones(ev.shape[0], np.bool_)
    last[:-1] = ev[1:] != ev[:-1]
    edges, vals = ev[last], np.cumsum(delta)[last]
    # pieces clipped to the domain (the value before the first edge is 0)
    inside = (edges > d0) & (edges < d1)
    e = np.concatenate([[d0], edges[inside], [d1]])
    first = np.searchsorted(edges, d0, side="right") - 1
    y = np.concatenate([[vals[first] if first >= 0 else 0.0], vals[inside]])
    w = np.diff(e) / (d1 - d0) / np.maximum(y, 1.0) ** 2
    z = np.zeros(1)
    pw, pwy, pwyy = (np.concatenate([z, np.cumsum(a)]) for a in (w, w * y, w * y * y))
    m = y.shape[0]
    cand = np.unique(np.linspace(0, m, min(candidates, m) + 1).round().astype(np.int64))
    kmax = min(max(ks), cand.shape[0] - 1)
    arg = _opt_dp(pw, pwy, pwyy, cand, kmax)
    out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for k in ks:
        kk = min(k, kmax)
        cuts = [cand.shape[0] - 1]
        for level in range(kk, 0, -1):
            cuts.append(int(arg[level, cuts[-1]]))
        idx = cand[np.array(cuts[::-1])]
        seg_w = pw[idx[1:]] - pw[idx[:-1]]
        seg_wy = pwy[idx[1:]] - pwy[idx[:-1]]
        v = np.where(seg_w > 0, seg_wy / np.where(seg_w > 0, seg_w, 1.0), 0.0)
        out[k] = (e[idx], v)
    return out


def _step_estimate(bp: np.ndarray, vals: np.ndarray, xs: np.ndarray) -> np.ndarray:
    i = np.searchsorted(bp, xs, side="right") - 1
    ok = (i >= 0) & (i < vals.shape[0])
    out = np.zeros(xs.shape[0])
    out[ok] = vals[i[ok]]
    return out


# ---- the run -----------------------------------------------------------------------------------


def _ns_per_call(fn: Any, xs: list[float]) -> float:
    """Best of 3: ns per ``fn(x)`` over ``xs``, the bare loop's cost subtracted."""
    best, loop = math.inf, math.inf
    for _ in range(3):
        t = time.perf_counter()
        for x in xs:
            fn(x)
        best = min(best, time.perf_counter() - t)
        t = time.perf_counter()
        for _x in xs:
            pass
        loop = min(loop, time.perf_counter() - t)
    return max(best - loop, 0.0) / len(xs) * 1e9


def _eqw_error(lo: np.ndarray, hi: np.ndarray, c: HistogramBenchConfig, k: int, q: np.ndarray,
               t: np.ndarray) -> float:
    h = EquiWidthHistogram(*c.domain, k)
    h.add_many(lo, hi)
    return float(np.mean(relative_error(h.estimate_many(q), t)))


def _one_repeat(c: HistogramBenchConfig, rep: int, prog: Progress) -> list[dict[str, Any]]:
    lo, hi, q = workload(c, rep)
    t = ExactStabbingCounter(lo, hi).count_many(q)
    qs = q.tolist()
    opt = opt_histograms(lo, hi, c.domain, c.buckets, c.opt_candidates) \
        if c.opt_candidates > 0 else {}
    rows: list[dict[str, Any]] = []
    for k in c.buckets:
        t0 = time.perf_counter()
        eqw = EquiWidthHistogram(*c.domain, k)
        eqw.add_many(lo, hi)
        eqw_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        ssi = SSIHistogram.build(lo, hi, k, domain=c.domain, allocation=c.allocation)
        ssi_s = time.perf_counter() - t0
        e_eqw = float(np.mean(relative_error(eqw.estimate_many(q), t)))
        e_ssi = float(np.mean(relative_error(ssi.estimate_many(q), t)))
        mem_buckets = 2 * ssi.pieces + 1
        base = {"figure": "25", "repeat": rep, "buckets": k}
        rows.append({**base, "histogram": EQW, "mean_relative_error": e_eqw, "pieces": k,
                     "stored_floats": k, "build_s": eqw_s,
                     "estimate_ns": _ns_per_call(eqw.estimate, qs)})
        rows.append({**base, "histogram": SSI, "mean_relative_error": e_ssi,
                     "pieces": ssi.pieces, "stored_floats": 2 * ssi.pieces + 1,
                     "build_s": ssi_s, "estimate_ns": _ns_per_call(ssi.estimate, qs),
                     "tau": ssi.tau, "groups": ssi.groups, "build_rms_error": ssi.build_error,
                     "candidates": [[g, e] for g, e in ssi.candidates]})
        rows.append({**base, "histogram": EQW_MEM, "pieces": mem_buckets,
                     "stored_floats": mem_buckets,
                     "mean_relative_error": _eqw_error(lo, hi, c, mem_buckets, q, t)})
        if k in opt:
            bp, vals = opt[k]
            rows.append({**base, "histogram": OPT, "pieces": int(vals.shape[0]),
                         "stored_floats": 2 * int(vals.shape[0]) + 1,
                         "candidates_M": c.opt_candidates,
                         "mean_relative_error": float(np.mean(relative_error(
                             _step_estimate(bp, vals, q), t)))})
        prog.step(f"repeat {rep} k={k}: EQW {e_eqw:.4f} SSI {e_ssi:.4f} "
                  f"(tau {ssi.tau}, groups {ssi.groups})")
    # how many EQW buckets reach HIST-SSI's error at the smallest k (the paper: 50 for 20)
    k0 = min(c.buckets)
    target = next(r["mean_relative_error"] for r in rows
                  if r["histogram"] == SSI and r["buckets"] == k0)
    need = next((b for b in range(k0, c.match_limit + 1)
                 if _eqw_error(lo, hi, c, b, q, t) <= target), None)
    rows.append({"figure": "25-match", "repeat": rep, "buckets": k0,
                 "eqw_buckets_to_match_ssi": need, "ssi_error": target})
    return rows


def _aggregate(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per (buckets, histogram): the mean over repeats and the per-repeat values."""
    out = []
    keys = list(dict.fromkeys((r["buckets"], r["histogram"]) for r in raw
                              if r["figure"] == "25"))
    for k, name in keys:
        rs = [r for r in raw if r["figure"] == "25" and r["buckets"] == k
              and r["histogram"] == name]
        errs = [r["mean_relative_error"] for r in rs]
        rec: dict[str, Any] = {
            "figure": "25", "buckets": k, "histogram": name,
            "mean_relative_error": float(np.mean(errs)), "min": float(min(errs)),
            "max": float(max(errs)), "per_repeat": errs,
            "pieces": float(np.mean([r["pieces"] for r in rs])),
            "stored_floats": float(np.mean([r["stored_floats"] for r in rs])),
        }
        for f in ("build_s", "estimate_ns", "tau", "groups", "build_rms_error"):
            if f in rs[0]:
                rec[f] = float(np.mean([r[f] for r in rs]))
        if "candidates" in rs[0]:
            rec["candidates_first_repeat"] = rs[0]["candidates"]
        out.append(rec)
    return out


def ratios(records: list[dict[str, Any]], raw: list[dict[str, Any]]) -> dict[str, Any]:
    """The numbers the issue judges (None where not measured)."""
    at = {(r["buckets"], r["histogram"]): r["mean_relative_error"] for r in records}
    ks = sorted({r["buckets"] for r in records})
    out: dict[str, Any] = {}
    if not ks:
        return out
    k0 = ks[0]
    if (k0, SSI) in at and (k0, EQW) in at:
        r = at[(k0, SSI)] / at[(k0, EQW)]
        out[f"HIST-SSI / HIST-EQW error at {k0} buckets"] = r
        out["target HIST-SSI <= 0.5 x HIST-EQW met"] = bool(r <= 0.5)
    if (k0, OPT) in at and (k0, EQW) in at:
        out[f"HIST-OPT* / HIST-EQW error at {k0} buckets"] = at[(k0, OPT)] / at[(k0, EQW)]
    if (k0, SSI) in at and (k0, EQW_MEM) in at:
        out[f"HIST-SSI / HIST-EQW (same floats) error at {k0} buckets"] = \
            at[(k0, SSI)] / at[(k0, EQW_MEM)]
    need = [r["eqw_buckets_to_match_ssi"] for r in raw if r["figure"] == "25-match"]
    out[f"HIST-EQW buckets to match HIST-SSI at {k0} (per repeat)"] = need
    return out


def run(c: HistogramBenchConfig, json_path: str | None, plot_dir: str | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    prog = Progress(c.repeats * len(c.buckets), "bench histogram")
    raw: list[dict[str, Any]] = []
    for rep in range(c.repeats):
        raw += _one_repeat(c, rep, prog)
    prog.close()
    records = _aggregate(raw)
    result: dict[str, Any] = {
        "benchmark": "histogram", "machine": machine(), "config": asdict(c),
        "records": records, "raw": raw, "ratios": ratios(records, raw),
        "elapsed_s": time.perf_counter() - t0,
    }
    if json_path:
        write_json(json_path, result)
    if plot_dir:
        plots(result, Path(plot_dir))
    return result


def record_line(r: dict[str, Any]) -> str:
    """One printed line per record (``hotjoin bench histogram``)."""
    extra = ""
    if r["histogram"] == SSI:
        extra = (f"  tau {r['tau']:.0f} groups {r['groups']:.1f}  build {r['build_s']:.2f}s"
                 f"  estimate {r['estimate_ns']:.0f} ns")
    elif r["histogram"] == EQW:
        extra = f"  build {r['build_s']:.3f}s  estimate {r['estimate_ns']:.0f} ns"
    return (f"fig 25 k={r['buckets']:<3} {r['histogram']:<23} mean rel. error "
            f"{r['mean_relative_error']:.4f} (min {r['min']:.4f}, max {r['max']:.4f}) "
            f"pieces {r['pieces']:.0f} floats {r['stored_floats']:.0f}{extra}")


def to_markdown(result: dict[str, Any]) -> str:
    """The Fig. 25 table (mean relative error, mean over repeats) as Markdown."""
    recs = result["records"]
    names = list(dict.fromkeys(r["histogram"] for r in recs))
    out = ["| buckets | " + " | ".join(names) + " | SSI / EQW | τ | SSI groups |",
           "|---" * (len(names) + 4) + "|"]
    for k in sorted({r["buckets"] for r in recs}):
        at = {r["histogram"]: r for r in recs if r["buckets"] == k}
        cells = [f"{100 * at[n]['mean_relative_error']:.2f} %" if n in at else "—"
                 for n in names]
        ratio = at[SSI]["mean_relative_error"] / at[EQW]["mean_relative_error"] \
            if SSI in at and EQW in at else math.nan
        ssi = at.get(SSI, {})
        out.append(f"| {k} | " + " | ".join(cells) + f" | {ratio:.2f} | "
                   f"{ssi.get('tau', math.nan):.0f} | {ssi.get('groups', math.nan):.1f} |")
    return "\n".join(out) + "\n"


def plots(result: dict[str, Any], d: Path) -> None:
    series: dict[str, tuple[list[float], list[float]]] = {}
    for r in sorted(result["records"], key=lambda r: r["buckets"]):
        xs, ys = series.setdefault(r["histogram"], ([], []))
        xs.append(r["buckets"])
        ys.append(100 * r["mean_relative_error"])
    plot_lines(d / "histogram_fig25.png", "Interval histograms, Fig. 25: estimate quality",
               "number of buckets", "mean relative error (%)", series, logx=False, logy=False)


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = HistogramBenchConfig()
    p.add_argument("--intervals", type=int, default=d.intervals)
    p.add_argument("--queries", type=int, default=d.queries, help="stabbing queries per repeat")
    p.add_argument("--buckets", default=",".join(map(str, d.buckets)))
    p.add_argument("--length-sd", type=float, default=d.length_sd,
                   help="standard deviation of the interval lengths (the paper: 2000)")
    p.add_argument("--repeats", type=int, default=d.repeats,
                   help="independent draws of intervals and queries, averaged")
    p.add_argument("--opt-candidates", type=int, default=d.opt_candidates,
                   help="candidate boundaries of the HIST-OPT* DP (0: no HIST-OPT*)")
    p.add_argument("--allocation", choices=("cardinality", "greedy"), default=d.allocation,
                   help="HIST-SSI's bucket allocation across groups")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")


def config_from_args(a: argparse.Namespace) -> HistogramBenchConfig:
    try:
        buckets = tuple(int(x) for x in a.buckets.split(",") if x)
    except ValueError:
        raise ValueError(f"--buckets must be comma-separated integers, got {a.buckets!r}") \
            from None
    if not buckets or min(buckets) < 1:
        raise ValueError("--buckets needs at least one count >= 1")
    if a.intervals < 1 or a.queries < 1 or a.repeats < 1 or a.opt_candidates < 0:
        raise ValueError("--intervals, --queries, --repeats must be >= 1, --opt-candidates >= 0")
    c = HistogramBenchConfig(intervals=a.intervals, queries=a.queries, buckets=buckets,
                             length_sd=a.length_sd, repeats=a.repeats,
                             opt_candidates=a.opt_candidates, allocation=a.allocation,
                             seed=a.seed)
    if a.quick:
        c.intervals, c.queries, c.buckets, c.repeats, c.opt_candidates = \
            5000, 500, (20, 40), 1, 300
    return c
