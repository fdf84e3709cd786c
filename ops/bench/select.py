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

from hotjoin.matcher.engine import Engine
from hotjoin.matcher.joins.select import SELECT_STRATEGIES
from hotjoin.matcher.model import Event, Range, SelectJoin
from hotjoin.ops.bench.common import Progress, interleaved, machine, plot_lines, write_json

VALUE_DOMAIN = 1_000_000.0


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
    figures: tuple[str, ...] = ("7i", "7ii", "8i", "8ii", "9")
    seed: int = 11


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
    """Drop the hotspot strategies while ``matcher.hotspot`` is not importable."""
    if importlib.util.find_spec("hotjoin.matcher.partition.hotspot") is not None:
        return strategies
    return tuple(s for s in strategies if not s.endswith("Hotspot"))


def measure(engines: dict[str, Engine], r: tuple[np.ndarray, np.ndarray], budget: float,
            modes: tuple[str, ...] = ("identify", "pairs")) -> dict[str, dict[str, Any]]:
    rk, rv = r[0].tolist(), r[1].tolist()
    out: dict[str, dict[str, Any]] = {n: {} for n in engines}
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
        for nm, rr in interleaved({nm: runner(e) for nm, e in engines.items()}, len(rk),
                                  budget).items():
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
        figures=nums(a.figures, str), seed=a.seed)
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
    return c
