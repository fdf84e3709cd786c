"""``hotjoin bench router``: paper 004 §5.4, Figs. 12–20 — Dynamic against every static strategy.

Each point builds one ``"auto"`` engine holding every member strategy's index and times, on
the same incoming R tuples, every member alone (``force``) and the router (its decision, its
online calibration and the chosen member), each in whole passes over the tuples as a static
engine would run the stream, passes in a random order, ``rounds`` times (a tuple's time: its
median), each pass after ``lead_in`` untimed tuples of its own so that it starts with warm
caches; the router's choice per tuple is recorded (:func:`hotjoin.matcher.router.calibrate.time_members`):

* a static strategy's throughput is tuples / Σ its times;
* **Dynamic**'s is tuples / Σ the routed times (routing overhead included);
* **Optimum** (the paper's SJ-Optimum) is tuples / Σ per-tuple minimum over the members;
* the decision breakdown (Figs. 13, 16, 19) and the share of optimal decisions (14, 17, 20)
  come from the recorded choices.

Select-join workload (Table I shape): S.B and R.B = rint(Normal(5000, σ_B)), σ_B set for the
mean event join rate (``--join-rate``; per tuple m′ varies from ~0 in the tails to ~2× the
mean at the centre — the per-tuple variation the router exploits); S.C, R.A ~ Uni(0, 10⁶);
rangeA of length ``selection rate × 10⁶``; rangeC: ``--hot-fraction`` of the subscriptions in 5
big clusters (hotspots), the rest in clusters of ~2 (scattered). Fig. 12 grows |Q| = |S|
together; Fig. 15 varies the join rate and Fig. 18 the selection rate at ``--size``. Series
``band`` and ``window`` run BJ- and WJ-Dynamic on the workloads of ``bench band`` (Table I
bands, τ clusters) and ``bench window`` (w spread, per-key tuples) at growing sizes.
"""

from __future__ import annotations

import argparse
import gc
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hotjoin.matcher.engine import Engine
from hotjoin.matcher.model import BandJoin, Range, SelectJoin
from hotjoin.matcher.router.calibrate import (
    ALL_MEMBERS,
    BatchTimes,
    MemberTimes,
    load,
    time_batches,
    time_members,
    warm_up,
)
from hotjoin.matcher.workload import r_arrays, s_arrays
from hotjoin.ops.bench.band import (
    BandBenchConfig,
    BandBruteForce,
    _table_cfg,
    calibrate_half_width,
    clustered_bands,
)
from hotjoin.ops.bench.common import Progress, machine, plot_lines, write_json
from hotjoin.ops.bench.select import (
    VALUE_DOMAIN,
    KeyedValues,
    NumpyBruteForce,
    Table1Data,
    a_ranges,
    clusters,
    key_sigma,
)
from hotjoin.ops.bench.window import WindowBenchConfig, WindowReference, data, subs


@dataclass
class RouterBenchConfig:
    sizes: tuple[int, ...] = (25_000, 50_000, 100_000, 200_000)
    size: int = 100_000
    join_rate: float = 100.0
    selection_rate: float = 0.05
    join_rates: tuple[float, ...] = (1.0, 10.0, 100.0, 1000.0)
    selection_rates: tuple[float, ...] = (0.001, 0.01, 0.05, 0.2)
    hot_fraction: float = 0.5
    band_sizes: tuple[int, ...] = (10_000, 100_000)
    window_sizes: tuple[int, ...] = (1_000, 10_000)
    tuples: int = 300
    rounds: int = 3
    lead_in: int = 50
    feedback: bool = True
    alpha: float = 0.001
    figures: tuple[str, ...] = ("12", "15", "18", "band", "window")
    seed: int = 23
    batch: int = 0  # > 0: also time every runner on the batch path, this many tuples a call
    #: passes per runner on the batch path: a pass there is one or two calls of 0.8–2 ms at
    #: the fast select points, whose median over 9 moved by ±3 % between runs of the same
    #: code and decisions, so it takes more passes than per-tuple timing
    batch_rounds: int = 25


def select_engine(c: RouterBenchConfig, n: int, m: int, join_rate: float,
                  selection_rate: float) -> tuple[Engine, tuple[np.ndarray, np.ndarray],
                                                  SelectReference]:
    rng = np.random.default_rng([c.seed, n, m, round(join_rate * 100),
                                 round(selection_rate * 1e5)])
    e = Engine(strategy="auto", options={"alpha": c.alpha, "router_feedback": c.feedback,
                                         "router_members": {"select": ALL_MEMBERS["select"][:4]}})
    n_hot = round(n * c.hot_fraction)
    half = VALUE_DOMAIN / 2
    parts = [clusters(rng, n_hot, 5, 0.0, half, 5.0),
             clusters(rng, n - n_hot, max(1, (n - n_hot) // 2), half, VALUE_DOMAIN, 5.0)]
    c_lo = np.concatenate([x[0] for x in parts])
    c_hi = np.concatenate([x[1] for x in parts])
    a_lo, a_hi = a_ranges(rng, n, selection_rate)
    e.subscribe_many([SelectJoin(a=Range(a, b), c=Range(x, y)) for a, b, x, y in
                      zip(a_lo.tolist(), a_hi.tolist(), c_lo.tolist(), c_hi.tolist(),
                          strict=True)])
    sigma = key_sigma(m, join_rate)
    s_keys, s_vals = np.rint(rng.normal(5000.0, sigma, m)), rng.uniform(0.0, VALUE_DOMAIN, m)
    s_ids = np.arange(m, dtype=np.int64)
    load(e, s_keys, s_vals, s_ids)
    t = c.tuples + c.lead_in
    r = (np.rint(rng.normal(5000.0, sigma, t)), rng.uniform(0.0, VALUE_DOMAIN, t))
    brute = NumpyBruteForce(Table1Data(a_lo, a_hi, c_lo, c_hi, (s_keys, s_vals, s_ids), r),
                            KeyedValues(s_keys, s_vals))
    return e, r, SelectReference(brute)


class SelectReference:
    """The select points' NumPy brute force (``ops/bench/select.NumpyBruteForce``) over the
    tuples with partners, as ``time_members`` picks them."""

    def __init__(self, brute: NumpyBruteForce) -> None:
        self.brute = brute

    def rows(self, r: tuple[np.ndarray, ...]) -> list[tuple[float, ...]]:
        kv = self.brute.kv
        return [(k, v) for k, v in zip(r[0].tolist(), r[1].tolist(), strict=True)
                if kv.get(k)[1] > kv.get(k)[0]]

    def affected(self, row: tuple[float, ...]) -> int:
        return int(self.brute.affected(*row)[0].shape[0])


class BandReference:
    """The band points' NumPy brute force (``ops/bench/band.BandBruteForce``: every band
    against the sorted S keys, two searchsorted calls per tuple); every tuple has work."""

    def __init__(self, brute: BandBruteForce) -> None:
        self.brute = brute

    def rows(self, r: tuple[np.ndarray, ...]) -> list[tuple[float, ...]]:
        return [(k,) for k in r[0].tolist()]

    def affected(self, row: tuple[float, ...]) -> int:
        return int(self.brute.affected(row[0])[0].shape[0])


Reference = SelectReference | BandReference | WindowReference


def time_brute_force(ref: Reference, r: tuple[np.ndarray, ...], mt: MemberTimes,
                     lead_in: int) -> float:
    """Seconds the NumPy brute force (the same-run reference) takes for the tuples the members were timed on
    (those with partners, after the lead-in, as ``time_members`` picks them); it must find the
    same number of affected subscriptions on each (AssertionError otherwise)."""
    rows = ref.rows(r)[lead_in:]
    assert len(rows) == mt.affected.shape[0], (len(rows), mt.affected.shape)
    got = np.zeros(len(rows))
    t0 = time.perf_counter()
    for x, row in enumerate(rows):
        got[x] = ref.affected(row)
    dt = time.perf_counter() - t0
    bad = np.flatnonzero(got != mt.affected)
    assert not bad.size, f"NumPy brute force: tuple {int(bad[0])} affects {got[bad[0]]:.0f}, " \
        f"the engine {mt.affected[bad[0]]:.0f}"
    return dt


def band_engine(c: RouterBenchConfig, n: int) -> tuple[Engine, tuple[np.ndarray, np.ndarray],
                                                      BandReference]:
    bc = BandBenchConfig(subscriptions=n, s_size=n)
    s_keys, s_vals, s_times = s_arrays(_table_cfg(bc), n)
    hw, _ = calibrate_half_width(bc, s_keys, n, bc.tau)
    lo, hi = clustered_bands(n, bc.tau, hw, bc.seed)
    e = Engine(strategy="auto", options={"alpha": c.alpha, "router_feedback": c.feedback})
    e.subscribe_many([BandJoin(b=Range(a, b)) for a, b in zip(lo.tolist(), hi.tolist(),
                                                               strict=True)])
    load(e, s_keys, s_vals, np.asarray(s_times, dtype=np.int64))
    rk, rv = r_arrays(_table_cfg(bc), c.tuples + c.lead_in, batch=7)[:2]
    return e, (rk, rv), BandReference(BandBruteForce(lo, hi, s_keys))


def window_engine(c: RouterBenchConfig, n: int) -> tuple[Engine, tuple[np.ndarray, ...],
                                                        WindowReference]:
    wc = WindowBenchConfig(subscriptions=n, events=c.tuples + c.lead_in)
    s, r = data(wc, wc.per_key)
    e = Engine(strategy="auto", options={"alpha": c.alpha, "router_feedback": c.feedback})
    q = subs(wc, n, wc.w_spread)
    e.subscribe_many(q)
    load(e, *s)
    return e, r, WindowReference(q, s, e.probe_time)


def summarise(mt: MemberTimes) -> dict[str, Any]:
    """Throughputs (tuples/s), decision breakdown and share of optimal decisions."""
    t = mt.ns.shape[0]
    best = mt.ns.argmin(axis=1)
    out: dict[str, Any] = {"tuples": t, "members": list(mt.members)}
    out["throughput"] = {n: t / (mt.ns[:, j].sum() / 1e9) for j, n in enumerate(mt.members)}
    prefix = mt.members[0][:3]
    out["throughput"][prefix + "Dynamic"] = t / (mt.dynamic_ns.sum() / 1e9)
    out["throughput"][prefix + "Optimum"] = t / (mt.ns.min(axis=1).sum() / 1e9)
    out["decisions"] = {n: int((mt.choice == j).sum()) for j, n in enumerate(mt.members)}
    out["optimum_choices"] = {n: int((best == j).sum()) for j, n in enumerate(mt.members)}
    out["optimal_share"] = float((mt.choice == best).mean()) if t else float("nan")
    statics = {n: v for n, v in out["throughput"].items() if n in mt.members}
    best_static = max(statics, key=statics.__getitem__)
    out["best_static"] = best_static
    dyn = out["throughput"][prefix + "Dynamic"]
    out["dynamic_over_best_static"] = dyn / statics[best_static]
    out["optimum_over_dynamic"] = out["throughput"][prefix + "Optimum"] / dyn
    out["median_us"] = {n: float(np.median(mt.ns[:, j]) / 1e3)
                        for j, n in enumerate(mt.members)}
    out["median_us"][prefix + "Dynamic"] = float(np.median(mt.dynamic_ns) / 1e3)
    out["affected_per_tuple"] = float(mt.affected.mean()) if t else 0.0
    return out


def summarise_batches(bt: BatchTimes, mt: MemberTimes) -> dict[str, Any]:
    """Batch-path throughputs (tuples / median pass time) and Dynamic / best static; the
    batch runners must have found the one-at-a-time affected counts on every tuple."""
    bad = np.flatnonzero(bt.affected != mt.affected)
    assert not bad.size, f"batch path: tuple {int(bad[0])} affects {bt.affected[bad[0]]:.0f}, " \
        f"one at a time {mt.affected[bad[0]]:.0f}"
    t = bt.affected.shape[0]
    med = np.median(bt.pass_ns, axis=0)
    prefix = bt.members[0][:3]
    tp = {n: t / (med[j] / 1e9) for j, n in enumerate(bt.members)}
    best = max(tp, key=tp.__getitem__)
    dyn = t / (med[-1] / 1e9)
    return {"throughput": {**tp, prefix + "Dynamic": dyn}, "best_static": best,
            "dynamic_over_best_static": dyn / tp[best],
            "decisions": dict(zip(bt.members, bt.decisions.tolist(), strict=True)),
            "median_pass_ms": {n: float(m / 1e6) for n, m in zip((*bt.members, prefix + "Dynamic"),
                                                                   med.tolist(), strict=True)}}


def _measure(e: Engine, kind: str, r: tuple[np.ndarray, ...], c: RouterBenchConfig) -> MemberTimes:
    warm_up(e, kind, r[0], r[1])
    return time_members(e, kind, "R", r[0], r[1], rounds=c.rounds, lead_in=c.lead_in)


def run(c: RouterBenchConfig, json_path: str | None, plot_dir: str | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    plan: list[tuple[str, float, Any]] = []
    if "12" in c.figures:
        plan += [("12", n, lambda n=n: select_engine(c, n, n, c.join_rate, c.selection_rate))
                 for n in c.sizes]
    if "15" in c.figures:
        plan += [("15", jr, lambda jr=jr: select_engine(c, c.size, c.size, jr, c.selection_rate))
                 for jr in c.join_rates]
    if "18" in c.figures:
        plan += [("18", sr, lambda sr=sr: select_engine(c, c.size, c.size, c.join_rate, sr))
                 for sr in c.selection_rates]
    if "band" in c.figures:
        plan += [("band", n, lambda n=n: band_engine(c, n)) for n in c.band_sizes]
    if "window" in c.figures:
        plan += [("window", n, lambda n=n: window_engine(c, n)) for n in c.window_sizes]
    prog = Progress(len(plan), "bench router")
    recs: list[dict[str, Any]] = []
    for fig, x, make in plan:
        kind = {"band": "band", "window": "window"}.get(fig, "select")
        e, r, brute = make()
        mt = _measure(e, kind, r, c)
        s = summarise(mt)
        if mt.affected.shape[0]:  # the reference a user would write, same tuples
            secs = time_brute_force(brute, r, mt, c.lead_in)
            s["throughput"]["NumPy brute force"] = mt.affected.shape[0] / secs
            s["dynamic_over_numpy"] = (s["throughput"][mt.members[0][:3] + "Dynamic"]
                                       / s["throughput"]["NumPy brute force"])
        msg = ""
        if c.batch > 0:
            bt = time_batches(e, kind, "R", r[0], r[1], rounds=c.batch_rounds,
                              lead_in=c.lead_in, batch=c.batch)
            s["batch"] = summarise_batches(bt, mt)
            if "NumPy brute force" in s["throughput"]:
                s["batch"]["throughput"]["NumPy brute force"] = s["throughput"]["NumPy brute force"]
            msg = f"; batch path {s['batch']['dynamic_over_best_static']:.3f} of best static"
        recs.append({"figure": fig, "x": x, "kind": kind, **s})
        dyn = s["throughput"][mt.members[0][:3] + "Dynamic"]
        prog.step(f"fig {fig} x={x:g}: Dynamic {dyn:.0f}/s, best static {s['best_static']} "
                  f"{s['throughput'][s['best_static']]:.0f}/s, optimal {s['optimal_share']:.0%}"
                  + msg)
        del e
        gc.collect()
    prog.close()
    result: dict[str, Any] = {"benchmark": "router", "machine": machine(), "config": asdict(c),
                              "records": recs, "elapsed_s": time.perf_counter() - t0}
    result["ratios"] = ratios(recs)
    if json_path:
        write_json(json_path, result)
    if plot_dir:
        plots(result, Path(plot_dir))
    return result


def ratios(recs: list[dict[str, Any]]) -> dict[str, Any]:
    """The targets: Dynamic ≥ best static everywhere; SJ within 1.25× of Optimum."""
    out: dict[str, Any] = {}
    for r in recs:
        tag = f"fig {r['figure']} x={r['x']:g}"
        out[f"{tag}: Dynamic / best static ({r['best_static']})"] = r["dynamic_over_best_static"]
        out[f"{tag}: Optimum / Dynamic"] = r["optimum_over_dynamic"]
        if "dynamic_over_numpy" in r:
            out[f"{tag}: Dynamic / NumPy brute force"] = r["dynamic_over_numpy"]
        if "batch" in r:
            b = r["batch"]
            out[f"{tag}: batch path Dynamic / best static ({b['best_static']})"] = \
                b["dynamic_over_best_static"]
    sel = [r for r in recs if r["kind"] == "select"]
    if sel:
        out["select: worst Dynamic / best static"] = min(r["dynamic_over_best_static"]
                                                         for r in sel)
        out["select: worst Optimum / Dynamic"] = max(r["optimum_over_dynamic"] for r in sel)
    for kind in ("band", "window"):
        rk = [r for r in recs if r["kind"] == kind]
        if rk:
            out[f"{kind}: worst Dynamic / best static"] = min(r["dynamic_over_best_static"]
                                                              for r in rk)
    for kind in ("select", "band", "window"):
        rb = [r["batch"]["dynamic_over_best_static"] for r in recs
              if r["kind"] == kind and "batch" in r]
        if rb:
            out[f"{kind}: batch path worst Dynamic / best static"] = min(rb)
            out[f"{kind}: batch path mean Dynamic / best static"] = float(np.mean(rb))
    return out


def plots(result: dict[str, Any], d: Path) -> None:
    """Throughput (Figs. 12/15/18), decisions (13/16/19) and optimal share (14/17/20)."""
    xl = {"12": "workload size |Q| = |S|", "15": "event join rate (mean m′)",
          "18": "event selection rate", "band": "band subscriptions", "window":
          "window subscriptions"}
    for fig, xlabel in xl.items():
        rows = sorted((r for r in result["records"] if r["figure"] == fig), key=lambda r: r["x"])
        if not rows:
            continue
        xs = [float(r["x"]) for r in rows]
        tp: dict[str, tuple[list[float], list[float]]] = {}
        for r in rows:
            for name, v in r["throughput"].items():
                tp.setdefault(name, ([], []))
                tp[name][0].append(float(r["x"]))
                tp[name][1].append(v)
        plot_lines(d / f"router_fig{fig}_throughput.png", f"Fig. {fig}: throughput",
                   xlabel, "tuples/s", tp)
        if all("batch" in r for r in rows):
            bp: dict[str, tuple[list[float], list[float]]] = {}
            for r in rows:
                for name, v in r["batch"]["throughput"].items():
                    bp.setdefault(name, ([], []))
                    bp[name][0].append(float(r["x"]))
                    bp[name][1].append(v)
            plot_lines(d / f"router_fig{fig}_batch_throughput.png",
                       f"Fig. {fig}: throughput on the batch path", xlabel, "tuples/s", bp)
        dec: dict[str, tuple[list[float], list[float]]] = {
            n: (xs, [100.0 * r["decisions"].get(n, 0) / max(r["tuples"], 1) for r in rows])
            for n in rows[0]["members"]}
        plot_lines(d / f"router_fig{fig}_decisions.png", f"Fig. {fig}: router decisions",
                   xlabel, "% of tuples", dec, logy=False)
        plot_lines(d / f"router_fig{fig}_optimal.png", f"Fig. {fig}: optimal decisions",
                   xlabel, "% optimal", {"Dynamic": (xs, [100.0 * r["optimal_share"]
                                                          for r in rows])}, logy=False)


def to_markdown(result: dict[str, Any]) -> str:
    lines = []
    for r in result["records"]:
        tp = r["throughput"]
        lines.append(f"| {r['figure']} | {r['x']:g} | "
                     + ", ".join(f"{k} {v:,.0f}" for k, v in tp.items())
                     + f" | {r['dynamic_over_best_static']:.2f} ({r['best_static']}) | "
                     f"{r['optimum_over_dynamic']:.2f} | {r['optimal_share']:.0%} | "
                     + ", ".join(f"{k} {v}" for k, v in r["decisions"].items()) + " |")
    head = ("| fig | x | tuples/s | Dynamic / best static | Optimum / Dynamic | optimal | "
            "decisions |\n|---|---|---|---|---|---|---|\n")
    out = head + "\n".join(lines) + "\n"
    batch = [r for r in result["records"] if "batch" in r]
    if batch:
        out += ("\nBatch path (`Engine.probe_batch`, "
                f"{result['config']['batch']} tuples a call):\n\n"
                "| fig | x | tuples/s | Dynamic / best static | decisions |\n|---|---|---|---|---|\n")
        for r in batch:
            b = r["batch"]
            out += (f"| {r['figure']} | {r['x']:g} | "
                    + ", ".join(f"{k} {v:,.0f}" for k, v in b["throughput"].items())
                    + f" | {b['dynamic_over_best_static']:.3f} ({b['best_static']}) | "
                    + ", ".join(f"{k} {v}" for k, v in b["decisions"].items()) + " |\n")
    return out


def _floats(s: str) -> tuple[float, ...]:
    return tuple(float(x) for x in s.split(",") if x.strip())


def _ints(s: str) -> tuple[int, ...]:
    return tuple(int(x) for x in s.split(",") if x.strip())


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = RouterBenchConfig()
    p.add_argument("--sizes", default=",".join(map(str, d.sizes)),
                   help="Fig. 12: workload sizes |Q| = |S|")
    p.add_argument("--size", type=int, default=d.size, help="|Q| = |S| of Figs. 15 and 18")
    p.add_argument("--join-rate", type=float, default=d.join_rate)
    p.add_argument("--selection-rate", type=float, default=d.selection_rate)
    p.add_argument("--join-rates", default=",".join(map(str, d.join_rates)))
    p.add_argument("--selection-rates", default=",".join(map(str, d.selection_rates)))
    p.add_argument("--hot-fraction", type=float, default=d.hot_fraction)
    p.add_argument("--band-sizes", default=",".join(map(str, d.band_sizes)))
    p.add_argument("--window-sizes", default=",".join(map(str, d.window_sizes)))
    p.add_argument("--tuples", type=int, default=d.tuples, help="incoming tuples per point")
    p.add_argument("--rounds", type=int, default=d.rounds,
                   help="passes per strategy over the tuples (a tuple's time: the median)")
    p.add_argument("--lead-in", type=int, default=d.lead_in,
                   help="extra tuples each pass runs untimed first (warm caches)")
    p.add_argument("--no-feedback", action="store_true",
                   help="route by the cost profile alone (no online calibration)")
    p.add_argument("--figures", default=",".join(d.figures))
    p.add_argument("--batch", type=int, default=d.batch,
                   help="also time every strategy and the router on the batch path "
                        "(Engine.probe_batch), this many tuples a call (0: off)")
    p.add_argument("--batch-rounds", type=int, default=d.batch_rounds,
                   help="passes per strategy on the batch path (the median pass is timed)")
    p.add_argument("--markdown", default=None, help="write the table as Markdown to this path")
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")


def config_from_args(a: argparse.Namespace) -> RouterBenchConfig:
    try:
        c = RouterBenchConfig(
            sizes=_ints(a.sizes), size=a.size, join_rate=a.join_rate,
            selection_rate=a.selection_rate, join_rates=_floats(a.join_rates),
            selection_rates=_floats(a.selection_rates), hot_fraction=a.hot_fraction,
            band_sizes=_ints(a.band_sizes), window_sizes=_ints(a.window_sizes),
            tuples=a.tuples, rounds=a.rounds, lead_in=a.lead_in, feedback=not a.no_feedback,
            batch=a.batch, batch_rounds=a.batch_rounds,
            figures=tuple(x.strip() for x in a.figures.split(",") if x.strip()))
    except ValueError as e:
        raise ValueError(f"bad number in the size/rate lists: {e}") from None
    bad = set(c.figures) - {"12", "15", "18", "band", "window"}
    if bad:
        raise ValueError(f"unknown figures {sorted(bad)}; choose from 12, 15, 18, band, window")
    if (c.tuples < 1 or c.rounds < 1 or c.batch_rounds < 1 or c.lead_in < 0 or c.batch < 0
            or not 0 <= c.hot_fraction <= 1):
        raise ValueError("--tuples, --rounds and --batch-rounds must be >= 1, --lead-in and "
                         "--batch >= 0 and --hot-fraction in [0, 1]")
    if a.quick:
        c = RouterBenchConfig(sizes=(500, 1000), size=1000, join_rates=(1.0, 30.0),
                              selection_rates=(0.01, 0.2), band_sizes=(500,),
                              window_sizes=(300,), tuples=40, rounds=2, lead_in=5,
                              feedback=c.feedback, figures=c.figures, batch=min(c.batch, 16),
                              batch_rounds=2)
    return c
