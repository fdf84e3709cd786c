"""``hotjoin bench select``: paper 004 §5.1 (Figs. 7(i), 7(ii), 8(i), 8(ii), 9) for select joins.

Workload (Table I shape, real-valued; every knob a flag):

* |S| stored S tuples: S.C ~ Uni(0, 10⁶); S.B = rint(Normal(5000, σ_B)) with σ_B set so an
  incoming R tuple (R.B drawn from the same distribution) joins with about ``--join-rate``
  S tuples on average (|S| Σ p_b² ≈ |S| / (2√π σ_B)); the paper's Fig. 7 uses ≈ 1000.
* rangeA: midpoint Uni(0, 10⁶), length ``selection-rate × 10⁶``, so a uniform R.A satisfies the
  A selection of that fraction of all subscriptions (the *event selection rate*, 0.1 in Fig. 7).
* rangeC: ``τ`` clusters with centres evenly spread over [0, 10⁶]; each range contains its
  centre and reaches Uni(0, ``c-reach``) to either side, so the stabbing number of the C ranges is
  exactly τ (Fig. 7(ii) varies it; the paper obtains it by shrinking the lengths). The short
  reach keeps the *output* small (an affected subscription needs a partner within a few units of
  its centre) so the figures measure identification, as in the paper, not output size.
* Fig. 9: ``--fig9-subscriptions`` (500,000) subscriptions; a fraction p (10 %…100 %) in 5 big
  clusters over the left half of the C domain (α-hotspots for α = 0.1 %), the rest in clusters of
  ~2 over the disjoint right half (many small groups).

Per strategy and point: tuples/s identifying the affected subscriptions (output excluded, the
paper's measure) and tuples/s producing every result pair, on the same R tuples, without storing
them (``Engine.probe``). Strategies run side by side, interleaved in chunks (``common``).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from hotjoin.matcher.engine import Engine
from hotjoin.matcher.joins import select_kernels as K
from hotjoin.matcher.joins.select import SELECT_STRATEGIES
from hotjoin.matcher.model import Event, Range, SelectJoin
from hotjoin.matcher.partition.stabbing import canonical_partition
from hotjoin.matcher.structures.partner_buckets import new_buckets
from hotjoin.ops.bench.common import (
    Progress,
    interleaved,
    machine,
    plot_bars,
    plot_lines,
    write_json,
)

VALUE_DOMAIN = 1_000_000.0
BRUTE = "NumPy brute force"
LIMIT = "flat limit"
LIMIT_OWN = "flat limit, own ranges first"
REFERENCES = (BRUTE, LIMIT, LIMIT_OWN)


@dataclass
class SelectBenchConfig:
    subscriptions: int = 100_000
    s_size: int = 100_000
    tau: int = 30
    selection_rate: float = 0.1
    join_rate: float = 1000.0
    c_reach: float = 5.0
    events: int = 2000
    budget_s: float = 1.5
    sizes: tuple[int, ...] = (100, 1_000, 10_000, 100_000)
    taus: tuple[int, ...] = (10, 30, 100, 300, 1000, 3000, 10000)
    selection_rates: tuple[float, ...] = (0.001, 0.01, 0.05, 0.1, 0.2)
    join_rates: tuple[float, ...] = (10.0, 100.0, 1000.0, 3000.0)
    fig9_subscriptions: int = 500_000
    coverages: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    alpha: float = 0.001
    epsilon: float = 1.0
    strategies: tuple[str, ...] = SELECT_STRATEGIES
    figures: tuple[str, ...] = ("table1", "7i", "7ii", "8i", "8ii", "9")
    seed: int = 11
    table1_subscriptions: int = 100_000
    table1_s_size: int = 100_000
    table1_clusters: tuple[int, ...] = (30, 5, 300, 30, 30)
    table1_spreads: tuple[float, ...] = (5000.0, 5000.0, 5000.0, 500.0, 50000.0)
    table1_strategies: tuple[str, ...] = ("SJ-SelectFirst", "SJ-SSI", "SJ-Hotspot", "auto")
    table1_verify: int = 10


def key_sigma(s_size: int, join_rate: float) -> float:
    """σ_B giving mean join rate ``join_rate`` for keys rint(Normal(5000, σ_B)) on both sides."""
    return max(0.3, s_size / (2.0 * math.sqrt(math.pi) * join_rate))


def s_tuples(c: SelectBenchConfig, join_rate: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng([c.seed, 1, c.s_size, round(join_rate)])
    keys = np.rint(rng.normal(5000.0, key_sigma(c.s_size, join_rate), c.s_size))
    return keys, rng.uniform(0.0, VALUE_DOMAIN, c.s_size), np.arange(c.s_size, dtype=np.int64)


def r_tuples(c: SelectBenchConfig, join_rate: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([c.seed, 2, c.events, round(join_rate)])
    keys = np.rint(rng.normal(5000.0, key_sigma(c.s_size, join_rate), c.events))
    return keys, rng.uniform(0.0, VALUE_DOMAIN, c.events)


def clusters(rng: np.random.Generator, n: int, k: int, lo: float, hi: float,
             reach: float) -> tuple[np.ndarray, np.ndarray]:
    """``n`` ranges around ``k`` evenly spaced centres in [lo, hi], each reaching ≤ ``reach``."""
    k = max(1, min(k, n))
    gap = (hi - lo) / k
    reach = min(reach, 0.45 * gap)
    centres = lo + (np.arange(k) + 0.5) * gap
    c = centres[rng.permutation(np.arange(n) % k)]
    return c - rng.uniform(0.0, reach, n), c + rng.uniform(0.0, reach, n)


def a_ranges(rng: np.random.Generator, n: int, rate: float) -> tuple[np.ndarray, np.ndarray]:
    mid = rng.uniform(0.0, VALUE_DOMAIN, n)
    half = rate * VALUE_DOMAIN / 2
    return mid - half, mid + half


def make_subs(a_lo: np.ndarray, a_hi: np.ndarray, c_lo: np.ndarray,
              c_hi: np.ndarray) -> list[SelectJoin]:
    return [SelectJoin(a=Range(al, ah), c=Range(cl, ch)) for al, ah, cl, ch in
            zip(a_lo.tolist(), a_hi.tolist(), c_lo.tolist(), c_hi.tolist(), strict=True)]


def build_engine(c: SelectBenchConfig, name: str, subs: list[Any],
                 s: tuple[np.ndarray, np.ndarray, np.ndarray], kind: str = "select") -> Engine:
    e = Engine(strategy={"band": "BJ-SSI", "select": "SJ-SSI", "window": "WJ-SSI", kind: name},
               options={"alpha": c.alpha, "epsilon": c.epsilon})
    e.subscribe_many(subs)
    keys, vals, times = s
    e.tables["S"].bulk_load(
        [Event("S", f"s{i}", k, v, t) for i, (k, v, t) in
         enumerate(zip(keys.tolist(), vals.tolist(), times.tolist(), strict=True))],
        list(range(e.seq + 1, e.seq + 1 + keys.shape[0])))
    e.restore_clock(e.seq + keys.shape[0], int(times.max()) if keys.shape[0] else None)
    return e


def available(strategies: tuple[str, ...]) -> tuple[str, ...]:
    """Drop the hotspot strategies while ``matcher.partition.hotspot`` is not importable."""
    if importlib.util.find_spec("hotjoin.matcher.partition.hotspot") is not None:
        return strategies
    return tuple(s for s in strategies if not s.endswith("Hotspot"))


def measure(engines: dict[str, Engine], r: tuple[np.ndarray, np.ndarray], budget: float,
            modes: tuple[str, ...] = ("identify", "pairs"),
            references: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Each engine's probes in each mode, interleaved (``common.interleaved``); the
    ``references`` (name → ``run(lo, hi)``, e.g. a NumPy brute force) join the identify pass."""
    rk, rv = r[0].tolist(), r[1].tolist()
    out: dict[str, dict[str, Any]] = {n: {} for n in engines}
    for name in references or {}:
        out[name] = {}
    for mode in modes:
        def runner(eng: Engine, mode: str = mode):
            def run(a: int, b: int) -> int:
                tot = 0
                for i in range(a, b):
                    tot += eng.probe("R", rk[i], rv[i], mode)
                return tot
            return run

        for eng in engines.values():
            eng.probe("R", rk[0], rv[0], mode)  # warm-up (JIT), not timed
        runners = {nm: runner(e) for nm, e in engines.items()}
        if mode == "identify":
            runners.update(references or {})
        for nm, rr in interleaved(runners, len(rk), budget).items():
            out[nm][mode] = rr
    return out


def point(c: SelectBenchConfig, fig: str, x: float, subs: list[SelectJoin],
          s: tuple[np.ndarray, ...], r: tuple[np.ndarray, np.ndarray], prog: Progress,
          strategies: tuple[str, ...], extra: dict[str, Any]) -> list[dict[str, Any]]:
    engines = {nm: build_engine(c, nm, subs, s) for nm in strategies}  # type: ignore[arg-type]
    res = measure(engines, r, c.budget_s)
    rows = []
    for nm, e in engines.items():
        st = e.stats()["select"]
        ident, pairs = res[nm]["identify"], res[nm]["pairs"]
        rows.append({"figure": fig, "x": x, "strategy": nm, "subscriptions": len(subs),
                     "tau": st.get("tau"), "hotspots": st.get("hotspots"),
                     "scattered": st.get("scattered"),
                     "tau_scattered": st.get("tau_scattered"),
                     "scattered_choices": st.get("scattered_choices"), **extra,
                     "identify_tuples_per_s": ident["per_second"],
                     "affected_per_tuple": ident["work"] / max(ident["items"], 1),
                     "pairs_tuples_per_s": pairs["per_second"],
                     "pairs_per_tuple": pairs["work"] / max(pairs["items"], 1),
                     "events_identify": ident["items"], "events_pairs": pairs["items"]})
        prog.step(f"fig {fig} x={x} {nm}: {ident['per_second']:.0f} tuples/s")
    del engines
    gc.collect()
    return rows


def ssi_scaling(c: SelectBenchConfig, subs: dict[int, list[SelectJoin]],
                s: tuple[np.ndarray, ...], r: tuple[np.ndarray, np.ndarray]) -> list[dict[str, Any]]:
    """SJ-SSI at every size of Fig. 7(i) *side by side* (figure ``7i-ssi``).

    Fig. 7(i) measures its sizes one after the other, so on a shared machine the loss between
    the smallest and the largest size mixes in whatever the neighbours did meanwhile. Here one
    SJ-SSI engine per size is timed interleaved on the same R tuples (as strategies are within a
    point), which is what the "loses at most 20 %" target compares.
    """
    engines = {str(n): build_engine(c, "SJ-SSI", ss, s) for n, ss in subs.items()}
    res = measure(engines, r, 2 * c.budget_s, modes=("identify",))
    rows = []
    for n, e in zip(subs, engines.values(), strict=True):
        ident = res[str(n)]["identify"]
        rows.append({"figure": "7i-ssi", "x": n, "strategy": "SJ-SSI", "subscriptions": n,
                     "tau": e.stats()["select"].get("tau"),
                     "identify_tuples_per_s": ident["per_second"],
                     "affected_per_tuple": ident["work"] / max(ident["items"], 1),
                     "pairs_tuples_per_s": 0.0, "pairs_per_tuple": 0.0,  # identify only
                     "events_identify": ident["items"], "events_pairs": 0})
    del engines
    gc.collect()
    return rows


def fig9_ranges(c: SelectBenchConfig, p: float) -> tuple[np.ndarray, ...]:
    n = c.fig9_subscriptions
    rng = np.random.default_rng([c.seed, 9, n, round(p * 1000)])
    n_h = round(n * p)
    n_s = n - n_h
    half = VALUE_DOMAIN / 2
    parts = []
    if n_h:
        parts.append(clusters(rng, n_h, 5, 0.0, half, c.c_reach))
    if n_s:
        parts.append(clusters(rng, n_s, max(1, n_s // 2), half, VALUE_DOMAIN, c.c_reach))
    c_lo = np.concatenate([x[0] for x in parts])
    c_hi = np.concatenate([x[1] for x in parts])
    a_lo, a_hi = a_ranges(rng, n, c.selection_rate)
    return a_lo, a_hi, c_lo, c_hi


def run(c: SelectBenchConfig, json_path: str | None, plot_dir: str | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    strategies = available(c.strategies)
    base_s = s_tuples(c, c.join_rate)
    base_r = r_tuples(c, c.join_rate)
    steps = len(strategies) * (len(c.sizes) * ("7i" in c.figures) + len(c.taus) * ("7ii" in c.figures)
                               + len(c.selection_rates) * ("8i" in c.figures)
                               + len(c.join_rates) * ("8ii" in c.figures))
    steps += (len(c.table1_strategies) + 2) * len(c.table1_clusters) * ("table1" in c.figures)
    steps += len(c.coverages) * len([s for s in strategies if s in
                                     ("SJ-SelectFirst", "SJ-SSI", "SJ-Hotspot")]) * ("9" in c.figures)
    prog = Progress(steps, "bench select")
    result: dict[str, Any] = {"benchmark": "select", "machine": machine(), "config": asdict(c),
                              "strategies_run": list(strategies), "records": []}
    recs = result["records"]

    def subs_for(n: int, tau: int, rate: float, stream: int = 0) -> list[SelectJoin]:
        rng = np.random.default_rng([c.seed, 3, n, tau, round(rate * 1e6), stream])
        c_lo, c_hi = clusters(rng, n, tau, 0.0, VALUE_DOMAIN, c.c_reach)
        a_lo, a_hi = a_ranges(rng, n, rate)
        return make_subs(a_lo, a_hi, c_lo, c_hi)

    if "table1" in c.figures:
        for k, spread in zip(c.table1_clusters, c.table1_spreads, strict=True):
            recs += table1_point(c, k, spread, prog, available(c.table1_strategies))
    if "7i" in c.figures:
        for n in c.sizes:
            recs += point(c, "7i", n, subs_for(n, c.tau, c.selection_rate), base_s, base_r, prog,
                          strategies, {"tau_target": c.tau})
    if "7i" in c.figures and "SJ-SSI" in strategies and len(c.sizes) > 1:
        recs += ssi_scaling(c, {n: subs_for(n, c.tau, c.selection_rate) for n in c.sizes},
                            base_s, base_r)
    if "7ii" in c.figures:
        for tau in c.taus:
            recs += point(c, "7ii", tau, subs_for(c.subscriptions, tau, c.selection_rate), base_s,
                          base_r, prog, strategies, {"tau_target": tau})
    if "8i" in c.figures:
        for rate in c.selection_rates:
            recs += point(c, "8i", rate, subs_for(c.subscriptions, c.tau, rate), base_s, base_r,
                          prog, strategies, {"selection_rate": rate,
                                             "selected_per_tuple": rate * c.subscriptions})
    if "8ii" in c.figures:
        subs = subs_for(c.subscriptions, c.tau, c.selection_rate)
        for jr in c.join_rates:
            recs += point(c, "8ii", jr, subs, s_tuples(c, jr), r_tuples(c, jr), prog, strategies,
                          {"join_rate_target": jr})
    if "9" in c.figures:
        f9 = tuple(s for s in strategies if s in ("SJ-SelectFirst", "SJ-SSI", "SJ-Hotspot"))
        for p in c.coverages:
            subs = make_subs(*fig9_ranges(c, p))
            rows = point(c, "9", p, subs, base_s, base_r, prog, f9, {"coverage_target": p})
            for row in rows:
                if row["strategy"] == "SJ-Hotspot" and row.get("scattered") is not None:
                    row["coverage_actual"] = 1.0 - row["scattered"] / len(subs)
            recs += rows
    prog.close()
    result["elapsed_s"] = time.perf_counter() - t0
    result["ratios"] = ratios(recs, c)
    if json_path:
        write_json(json_path, result)
    if plot_dir:
        plots(result, Path(plot_dir))
    return result


def ratios(recs: list[dict[str, Any]], c: SelectBenchConfig) -> dict[str, Any]:
    """The figures the issue judges (None where a strategy was not run)."""
    out: dict[str, Any] = {}
    for r in recs:
        if r["figure"] == "table1" and r["strategy"] not in REFERENCES:
            where = f"table1 {r['x']} {r['strategy']}"
            out[f"{where}: AFFECTED / NumPy brute force"] = r["count_vs_brute"]
            out[f"{where}: identify / flat limit"] = r["identify_vs_limit"]
            out[f"{where}: identify / own-first flat limit"] = r["identify_vs_own_limit"]
            out[f"{where}: identify tuples/s"] = r["identify_tuples_per_s"]

    def at(fig: str, x: float) -> dict[str, dict[str, Any]]:
        return {r["strategy"]: r for r in recs if r["figure"] == fig and r["x"] == x}

    big = at("7i", max(c.sizes)) if c.sizes else {}
    if "SJ-SSI" in big:
        for other in ("SJ-JoinFirst", "SJ-SelectFirst", "SJ-Vanilla", "SJ-Hotspot"):
            if other in big:
                out[f"identify SJ-SSI / {other} at n={max(c.sizes)}"] = (
                    big["SJ-SSI"]["identify_tuples_per_s"] / big[other]["identify_tuples_per_s"])
    small = at("7i", min(c.sizes)) if c.sizes else {}
    if "SJ-SSI" in big and "SJ-SSI" in small:
        out[f"SJ-SSI throughput loss n={min(c.sizes)} -> n={max(c.sizes)}"] = (
            1.0 - big["SJ-SSI"]["identify_tuples_per_s"] / small["SJ-SSI"]["identify_tuples_per_s"])
    side = {r["x"]: r for r in recs if r["figure"] == "7i-ssi"}
    if len(side) > 1:
        lo, hi = side[min(side)], side[max(side)]
        out[f"SJ-SSI throughput loss n={min(side):g} -> n={max(side):g}, side by side"] = (
            1.0 - hi["identify_tuples_per_s"] / lo["identify_tuples_per_s"])
    f9 = sorted({r["x"] for r in recs if r["figure"] == "9"})
    worst = None
    for p in f9:
        row = at("9", p)
        if "SJ-Hotspot" in row:
            best = max(row[s]["identify_tuples_per_s"] for s in ("SJ-SelectFirst", "SJ-SSI")
                       if s in row)
            ratio = row["SJ-Hotspot"]["identify_tuples_per_s"] / best
            out[f"fig9 p={p}: SJ-Hotspot / max(SJ-SelectFirst, SJ-SSI)"] = ratio
            worst = ratio if worst is None else min(worst, ratio)
    if worst is not None:
        out["fig9 worst SJ-Hotspot / best baseline"] = worst
    return out


def plots(result: dict[str, Any], d: Path) -> None:
    recs = result["records"]
    labels = {"7i": ("number of select-join subscriptions", True),
              "7ii": ("stabbing number τ of the C ranges", True),
              "8i": ("event selection rate (fraction of subscriptions)", True),
              "8ii": ("event join rate (S tuples per R tuple)", True),
              "9": ("hotspot coverage (target fraction)", False)}
    t1 = [r for r in recs if r["figure"] == "table1"]
    if t1:
        for metric, label in (("identify_tuples_per_s", "identify"),
                              ("count_tuples_per_s", "affected")):
            for x in sorted({r["x"] for r in t1}):
                plot_bars(d / f"select_table1_{label}_{x.replace(',', '_').replace('=', '')}.png",
                          f"Select joins, Table I ({x}): {label} tuples/s", "incoming tuples / s",
                          {r["strategy"]: r[metric] for r in t1 if r["x"] == x})
    for fig, (xlabel, logx) in labels.items():
        rows = [r for r in recs if r["figure"] == fig]
        if not rows:
            continue
        for metric, label in (("identify_tuples_per_s", "identify"),
                              ("pairs_tuples_per_s", "pairs")):
            series: dict[str, tuple[list[float], list[float]]] = {}
            for r in sorted(rows, key=lambda r: r["x"]):
                xs, ys = series.setdefault(r["strategy"], ([], []))
                xs.append(r["x"])
                ys.append(r[metric])
            plot_lines(d / f"select_fig{fig}_{label}.png",
                       f"Select joins, Fig. {fig}: throughput ({label})", xlabel,
                       "incoming tuples / s", series, logx=logx)


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = SelectBenchConfig()
    for name, typ in (("subscriptions", int), ("s_size", int), ("tau", int),
                      ("selection_rate", float), ("join_rate", float), ("c_reach", float),
                      ("events", int), ("fig9_subscriptions", int), ("alpha", float),
                      ("epsilon", float), ("seed", int)):
        p.add_argument("--" + name.replace("_", "-"), type=typ, default=getattr(d, name))
    p.add_argument("--budget", type=float, default=d.budget_s,
                   help="seconds per strategy and point (slow baselines see fewer events)")
    for name in ("sizes", "taus", "selection_rates", "join_rates", "coverages", "strategies",
                 "figures"):
        p.add_argument("--" + name.replace("_", "-"), default=",".join(map(str, getattr(d, name))))
    p.add_argument("--table1-subscriptions", type=int, default=d.table1_subscriptions)
    p.add_argument("--table1-s-size", type=int, default=d.table1_s_size)
    p.add_argument("--table1-clusters", default=",".join(map(str, d.table1_clusters)),
                   help="cluster counts of the C ranges, one Table I point each")
    p.add_argument("--table1-spreads", default=",".join(f"{x:g}" for x in d.table1_spreads),
                   help="σ of the C-range centres around their cluster (as many as clusters)")
    p.add_argument("--table1-strategies", default=",".join(d.table1_strategies),
                   help="strategies (or auto) timed beside the brute force and the flat limit")
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")


def config_from_args(a: argparse.Namespace) -> SelectBenchConfig:
    def nums(s: str, typ: type) -> tuple:
        return tuple(typ(x) for x in s.split(",") if x)

    c = SelectBenchConfig(
        subscriptions=a.subscriptions, s_size=a.s_size, tau=a.tau,
        selection_rate=a.selection_rate, join_rate=a.join_rate, c_reach=a.c_reach,
        events=a.events, budget_s=a.budget, sizes=nums(a.sizes, int), taus=nums(a.taus, int),
        selection_rates=nums(a.selection_rates, float), join_rates=nums(a.join_rates, float),
        fig9_subscriptions=a.fig9_subscriptions, coverages=nums(a.coverages, float),
        alpha=a.alpha, epsilon=a.epsilon, strategies=nums(a.strategies, str),
        figures=nums(a.figures, str), seed=a.seed,
        table1_subscriptions=a.table1_subscriptions, table1_s_size=a.table1_s_size,
        table1_clusters=nums(a.table1_clusters, int), table1_spreads=nums(a.table1_spreads, float),
        table1_strategies=nums(a.table1_strategies, str))
    if len(c.table1_clusters) != len(c.table1_spreads):
        raise ValueError("--table1-clusters and --table1-spreads need as many values each")
    for s in c.table1_strategies:
        if s not in SELECT_STRATEGIES and s != "auto":
            raise ValueError(f"unknown select strategy {s!r} in --table1-strategies")
    for s in c.strategies:
        if s not in SELECT_STRATEGIES:
            raise ValueError(f"unknown select strategy {s!r}; choose from {', '.join(SELECT_STRATEGIES)}")
    if a.quick:
        quick(c)
    return c


def quick(c: SelectBenchConfig) -> SelectBenchConfig:
    """Shrink ``c`` in place to a seconds-long smoke run of every figure."""
    c.subscriptions, c.s_size, c.events, c.budget_s = 2000, 2000, 40, 0.03
    c.join_rate, c.sizes, c.taus = 20.0, (100, 2000), (10, 100)
    c.selection_rates, c.join_rates = (0.01, 0.1), (5.0, 20.0)
    c.fig9_subscriptions, c.coverages = 3000, (0.5, 1.0)
    c.table1_subscriptions, c.table1_s_size = 3000, 3000
    c.table1_clusters, c.table1_spreads = (30, 3), (5000.0, 500.0)
    c.table1_strategies = (*SELECT_STRATEGIES, "auto")
    return c


# -- Table I workload, with its same-run reference lines -----------------------------------------

@dataclass
class Table1Data:
    """One Table I point: subscription columns, stored S tuples, incoming R tuples."""

    a_lo: np.ndarray
    a_hi: np.ndarray
    c_lo: np.ndarray
    c_hi: np.ndarray
    s: tuple[np.ndarray, np.ndarray, np.ndarray]
    r: tuple[np.ndarray, np.ndarray]


def table1_data(c: SelectBenchConfig, clusters_k: int, spread: float) -> Table1Data:
    """The workload of the engine-speed issue (paper 004 Table I shape).

    S.B ~ rint(Normal(5000, 1000)), S.C ~ Uni(0, 10⁶); rangeA of length |Normal(10⁵, 2·10⁴)|
    centred on Normal(5·10⁵, 2·10⁵); rangeC of length |Normal(4·10⁴, 10⁴)| centred on one of
    ``clusters_k`` centres ~ Uni(0, 10⁶) plus Normal(0, ``spread``); R.B ~ rint(Uni(3000, 7000)),
    R.A ~ Uni(0, 10⁶). With 30 clusters and spread 5,000: τ ≈ 54, ≈ 5,500 affected per tuple.
    """
    n, m = c.table1_subscriptions, c.table1_s_size
    rng = np.random.default_rng([c.seed, 13, n, m, clusters_k, round(spread)])
    a_mid = rng.normal(500_000.0, 200_000.0, n)
    a_len = np.abs(rng.normal(100_000.0, 20_000.0, n))
    centres = rng.uniform(0.0, VALUE_DOMAIN, clusters_k)
    c_mid = centres[rng.integers(0, clusters_k, n)] + rng.normal(0.0, spread, n)
    c_len = np.abs(rng.normal(40_000.0, 10_000.0, n))
    s_keys = np.rint(rng.normal(5000.0, 1000.0, m))
    s_vals = rng.uniform(0.0, VALUE_DOMAIN, m)
    r_keys = np.rint(rng.uniform(3000.0, 7000.0, c.events))
    r_vals = rng.uniform(0.0, VALUE_DOMAIN, c.events)
    return Table1Data(a_mid - a_len / 2, a_mid + a_len / 2, c_mid - c_len / 2, c_mid + c_len / 2,
                      (s_keys, s_vals, np.arange(m, dtype=np.int64)), (r_keys, r_vals))


class KeyedValues:
    """The stored S tuples joined by key, as a user would hold them: C values sorted per key."""

    def __init__(self, keys: np.ndarray, values: np.ndarray) -> None:
        o = np.lexsort((values, keys))
        self.values = values[o].astype(np.float64)
        uk, first, cnt = np.unique(keys[o], return_index=True, return_counts=True)
        self.span = {float(k): (int(f), int(f + n)) for k, f, n in
                     zip(uk.tolist(), first.tolist(), cnt.tolist(), strict=True)}

    def get(self, b: float) -> tuple[int, int]:
        return self.span.get(b, (0, 0))


class NumpyBruteForce:
    """What a user would write instead: join by key, then mask every subscription (the same-run
    reference).

    Per tuple (b, a): the key's sorted C values pv; ``n = searchsorted(pv, c_hi, right) −
    searchsorted(pv, c_lo, left)`` for every subscription; affected = ``a ∈ A ∧ n > 0``.
    """

    def __init__(self, d: Table1Data, kv: KeyedValues) -> None:
        self.d, self.kv = d, kv

    def affected(self, b: float, a: float) -> tuple[np.ndarray, np.ndarray]:
        s, e = self.kv.get(b)
        pv = self.kv.values[s:e]
        d = self.d
        cnt = np.searchsorted(pv, d.c_hi, "right") - np.searchsorted(pv, d.c_lo, "left")
        ids = np.flatnonzero((d.a_lo <= a) & (a <= d.a_hi) & (cnt > 0))
        return ids, cnt[ids]


@njit(cache=True)
def _flat_probe(gpoint: np.ndarray, gstart: np.ndarray, l_key: np.ndarray, l_alo: np.ndarray,
                l_ahi: np.ndarray, l_q: np.ndarray, r_key: np.ndarray, r_clo: np.ndarray,
                r_alo: np.ndarray, r_ahi: np.ndarray, r_q: np.ndarray, pv: np.ndarray,
                a: float, count: bool, c_lo: np.ndarray, c_hi: np.ndarray, out: np.ndarray,
                cnt: np.ndarray) -> int:
    """Static limit line: per group a prefix of the run sorted by c_lo and of the run sorted by
    c_hi descending, A bounds copied in, branch-free output cursor (``PERF-NOTES.md``)."""
    n = 0
    m = pv.shape[0]
    for g in range(gpoint.shape[0]):
        i = np.searchsorted(pv, gpoint[g])
        s, e = gstart[g], gstart[g + 1]
        x1 = pv[i - 1] if i > 0 else -np.inf
        have1 = i > 0
        if have1:
            k = s
            while k < e and l_key[k] <= x1:
                out[n] = l_q[k]
                n += (l_alo[k] <= a) & (a <= l_ahi[k])
                k += 1
        if i < m:
            x2 = pv[i]
            fresh = not have1
            k = s
            while k < e and r_key[k] >= x2:
                out[n] = r_q[k]
                n += (r_alo[k] <= a) & (a <= r_ahi[k]) & (fresh | (r_clo[k] > x1))
                k += 1
    if count:
        for j in range(n):
            q = out[j]
            cnt[j] = np.searchsorted(pv, c_hi[q], "right") - np.searchsorted(pv, c_lo[q], "left")
    return n


class FlatLimit:
    """The limit line: the same per-group probe over static flat arrays, no engine around it
    (canonical stabbing partition of the C ranges, paper 004 Lemma 1)."""

    def __init__(self, d: Table1Data, kv: KeyedValues) -> None:
        self.d, self.kv = d, kv
        points, g = canonical_partition(d.c_lo, d.c_hi)
        self.tau = int(points.shape[0])
        self.gpoint = points
        self.gstart = np.searchsorted(np.sort(g), np.arange(self.tau + 1)).astype(np.int64)
        ol = np.lexsort((d.c_lo, g))
        orr = np.lexsort((-d.c_hi, g))
        self.l = (d.c_lo[ol], d.a_lo[ol], d.a_hi[ol], ol.astype(np.int64))
        self.r = (d.c_hi[orr], d.c_lo[orr], d.a_lo[orr], d.a_hi[orr], orr.astype(np.int64))
        self.out = np.zeros(d.a_lo.shape[0] + 16, dtype=np.int64)
        self.cnt = np.zeros(d.a_lo.shape[0] + 16, dtype=np.int64)

    def probe(self, b: float, a: float, count: bool) -> int:
        s, e = self.kv.get(b)
        if s == e:
            return 0
        return _flat_probe(self.gpoint, self.gstart, *self.l, *self.r, self.kv.values[s:e], a,
                           count, self.d.c_lo, self.d.c_hi, self.out, self.cnt)

    def affected(self, b: float, a: float) -> tuple[np.ndarray, np.ndarray]:
        n = self.probe(b, a, True)
        return self.out[:n].copy(), self.cnt[:n].copy()


class FlatOwnLimit:
    """The limit line of SJ-SelectFirst's probe: its kernel (``select_kernels.sj_own_scan``)
    called directly over static flat arrays (canonical stabbing partition of the A ranges, each
    group sorted by own lower and upper end with the C bounds copied in, no delta, no
    tombstone), no engine around it: what the dynamic structure and the engine cost on top."""

    def __init__(self, d: Table1Data, kv: KeyedValues) -> None:
        self.K, self.kv = K, kv
        n = d.a_lo.shape[0]
        points, g = canonical_partition(d.a_lo, d.a_hi)
        self.tau = int(points.shape[0])
        self.gids = np.arange(self.tau, dtype=np.int64)
        self.gpoint = points
        sizes = np.bincount(g, minlength=self.tau).astype(np.int64)
        gstart = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        ol, orr = np.lexsort((d.a_lo, g)), np.lexsort((-d.a_hi, g))
        empty = np.zeros(self.tau, dtype=np.int64)
        self.arrays = (gstart, sizes, d.a_lo[ol], d.c_lo[ol], d.c_hi[ol], ol.astype(np.int64),
                       d.a_hi[orr], d.a_lo[orr], d.c_lo[orr], d.c_hi[orr], orr.astype(np.int64),
                       empty, empty, np.zeros(1, dtype=np.int64), d.a_hi[ol])
        self.rec = np.zeros((n, 8))
        self.rec[:, K.A_LO], self.rec[:, K.A_LO + 1] = d.a_lo, d.a_hi
        self.rec[:, K.C_LO], self.rec[:, K.C_LO + 1] = d.c_lo, d.c_hi
        self.rec[:, 6] = -1.0  # registered before every tuple (REG)
        self.scratch = [np.zeros(n + 16, dtype=np.int64) for _ in range(3)]
        self.bounds = [np.zeros(n + 16) for _ in range(2)]
        self.side = (np.zeros(n + 16, dtype=np.int64), np.zeros(n + 16), np.zeros(n + 16))
        self.acc = np.zeros(n + 16, dtype=np.int64)
        self.slots = np.arange(kv.values.shape[0], dtype=np.int64)
        # bundles: TableArrays (seqs = slots: every pair formed before the probe), SubArrays
        self.tab = (np.ones(kv.values.shape[0], dtype=np.bool_), kv.values, self.slots)
        self.sub = (self.rec, np.zeros(n + 16, dtype=np.int64), self.acc)
        self.buckets = tuple(new_buckets())  # a plain tuple: the kernel names it back

    def probe(self, b: float, a: float, count: bool) -> int:
        s, e = self.kv.get(b)
        if s == e:
            return 0
        cand, out_q, out_s = self.scratch
        K = self.K
        return K.sj_own_scan(self.gids, self.gpoint, self.arrays, (cand, *self.bounds),
                             self.side, self.buckets, -1.0, (self.kv.values, self.slots, s, e - s),
                             self.tab, self.sub, a, K.A_LO, 1, K.COUNT if count else K.IDENTIFY,
                             out_q, out_s, 0)

    def affected(self, b: float, a: float) -> tuple[np.ndarray, np.ndarray]:
        n = self.probe(b, a, True)
        ids = self.scratch[1][:n].copy()
        return ids, self.acc[ids].copy()


def _engine_for(name: str, c: SelectBenchConfig, d: Table1Data) -> tuple[Engine, np.ndarray]:
    subs = make_subs(d.a_lo, d.a_hi, d.c_lo, d.c_hi)
    if name == "auto":
        e = Engine(strategy="auto", options={"alpha": c.alpha, "epsilon": c.epsilon})
    else:
        e = Engine(strategy={"band": "BJ-SSI", "select": name, "window": "WJ-SSI"},
                   options={"alpha": c.alpha, "epsilon": c.epsilon})
    sids = np.asarray(e.subscribe_many(subs), dtype=np.int64)
    keys, vals, times = d.s
    e.tables["S"].bulk_load(
        [Event("S", f"s{i}", k, v, t) for i, (k, v, t) in
         enumerate(zip(keys.tolist(), vals.tolist(), times.tolist(), strict=True))],
        list(range(e.seq + 1, e.seq + 1 + keys.shape[0])))
    e.restore_clock(e.seq + keys.shape[0], int(times.max()) if keys.shape[0] else None)
    return e, sids


def _as_dict(ids: np.ndarray, counts: np.ndarray) -> dict[int, int]:
    return dict(zip(ids.tolist(), counts.tolist(), strict=True))


def table1_point(c: SelectBenchConfig, clusters_k: int, spread: float, prog: Progress,
                 strategies: tuple[str, ...]) -> list[dict[str, Any]]:
    """Strategies, the NumPy brute force and the flat limit, timed interleaved on the same
    tuples (identify and AFFECTED counts); the first ``verify`` tuples are checked to affect the
    same subscriptions with the same counts in every contender."""
    d = table1_data(c, clusters_k, spread)
    kv = KeyedValues(d.s[0], d.s[1])
    brute, limit, limit_own = NumpyBruteForce(d, kv), FlatLimit(d, kv), FlatOwnLimit(d, kv)
    engines = {nm: _engine_for(nm, c, d) for nm in strategies}
    rk, rv = d.r[0].tolist(), d.r[1].tolist()
    t_pub = int(d.s[2].max()) + 1
    agree: dict[str, bool] = {}
    n_verify = min(c.table1_verify, len(rk))
    want = [_as_dict(*brute.affected(rk[i], rv[i])) for i in range(n_verify)]
    agree[BRUTE] = True
    agree[LIMIT] = all(_as_dict(*limit.affected(rk[i], rv[i])) == want[i]
                       for i in range(n_verify))
    agree[LIMIT_OWN] = all(_as_dict(*limit_own.affected(rk[i], rv[i])) == want[i]
                           for i in range(n_verify))
    for nm, (e, sids) in engines.items():
        ok = True
        for i in range(n_verify):
            aff = e.publish_affected(Event("R", f"verify{i}", rk[i], rv[i], t_pub))
            e.delete("R", f"verify{i}", match=False)
            got = {int(np.searchsorted(sids, q)): int(k) for q, k in
                   zip(aff.subscription_ids.tolist(), aff.counts.tolist(), strict=True)}
            ok &= got == want[i]
        agree[nm] = ok
    out: dict[str, dict[str, Any]] = {}
    for mode in ("identify", "count"):
        runners: dict[str, Any] = {}
        for nm, (e, _) in engines.items():
            def run_e(a: int, b: int, e: Engine = e, mode: str = mode) -> int:
                return sum(e.probe("R", rk[i], rv[i], mode) for i in range(a, b))
            e.probe("R", rk[0], rv[0], mode)  # warm-up (JIT), not timed
            runners[nm] = run_e

        def run_brute(a: int, b: int) -> int:
            return sum(brute.affected(rk[i], rv[i])[0].shape[0] for i in range(a, b))

        def run_limit(a: int, b: int, cnt: bool = mode == "count") -> int:
            return sum(limit.probe(rk[i], rv[i], cnt) for i in range(a, b))

        def run_limit_own(a: int, b: int, cnt: bool = mode == "count") -> int:
            return sum(limit_own.probe(rk[i], rv[i], cnt) for i in range(a, b))

        runners[BRUTE], runners[LIMIT], runners[LIMIT_OWN] = run_brute, run_limit, run_limit_own
        limit.probe(rk[0], rv[0], True)
        limit_own.probe(rk[0], rv[0], True)
        for nm, rr in interleaved(runners, len(rk), c.budget_s).items():
            out.setdefault(nm, {})[mode] = rr
    rows = []
    ref = {m: out[BRUTE][m]["per_second"] for m in ("identify", "count")}
    lim = {m: out[LIMIT][m]["per_second"] for m in ("identify", "count")}
    lim_own = {m: out[LIMIT_OWN][m]["per_second"] for m in ("identify", "count")}
    for nm, res in out.items():
        st = engines[nm][0].stats()["select"] if nm in engines else {}
        ident, cnt = res["identify"], res["count"]
        aff = ident["work"] / max(ident["items"], 1)
        rows.append({"figure": "table1", "x": f"k={clusters_k},spread={spread:g}",
                     "clusters": clusters_k, "spread": spread, "strategy": nm,
                     "subscriptions": int(d.a_lo.shape[0]), "tau": st.get("tau", limit.tau),
                     "identify_tuples_per_s": ident["per_second"],
                     "affected_per_tuple": aff,
                     "ns_per_affected": 1e9 / ident["per_second"] / max(aff, 1.0),
                     "count_tuples_per_s": cnt["per_second"],
                     "identify_vs_brute": ident["per_second"] / ref["identify"],
                     "count_vs_brute": cnt["per_second"] / ref["count"],
                     "identify_vs_limit": ident["per_second"] / lim["identify"],
                     "count_vs_limit": cnt["per_second"] / lim["count"],
                     "identify_vs_own_limit": ident["per_second"] / lim_own["identify"],
                     "count_vs_own_limit": cnt["per_second"] / lim_own["count"],
                     "verified_tuples": n_verify, "agrees_with_brute_force": agree[nm],
                     "events_identify": ident["items"], "events_count": cnt["items"]})
        prog.step(f"table1 k={clusters_k} spread={spread:g} {nm}: "
                  f"{ident['per_second']:.0f} identify, {cnt['per_second']:.0f} AFFECTED tuples/s")
    del engines
    gc.collect()
    return rows
