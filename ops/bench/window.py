"""``hotjoin bench window``: window joins (paper 004 §3.3), all four strategies side by side.

The paper has no window-join experiment; this one is designed to show Theorem 4's point: WJ-SSI
probes 𝒟 only with the skyline points m̄_b of the key, WJ-JoinFirst with all m_b joining tuples.

Workload. |S| stored S tuples arrive in order, one per time unit (times 0 … |S|−1), with
S.C ~ Uni(0, 10⁶) and the join key uniform over ``|S| / per_key`` keys, so every key holds about
``per_key`` tuples. Incoming R tuples arrive at the current time, key uniform over the same keys,
R.A ~ Uni(0, 10⁶). Window joins: rangeA as in ``bench select`` (``--selection-rate``), rangeC in
``τ`` clusters of short reach (stabbing number exactly τ), and w = |rint(Normal(w_mu, w_spread))|.
With the default ``w_mu = |S|`` every stored tuple is inside the largest window, so m_b ≈
``per_key``.

Three series: ``n`` (number of subscriptions), ``spread`` (w_spread / w_mu, the spread of w),
``per_key`` (S tuples per join key). Each record carries tuples/s (identify and with pairs),
m_b (joining tuples within w_max, averaged over the R tuples) and m̄_b (stored skyline points
of the key, WJ-SSI), so the JSON shows m_b against the skyline size.
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
from hotjoin.matcher.joins.window import WINDOW_STRATEGIES
from hotjoin.matcher.model import Range, WindowJoin
from hotjoin.ops.bench.common import Progress, machine, plot_lines, write_json
from hotjoin.ops.bench.select import (
    VALUE_DOMAIN,
    a_ranges,
    available,
    build_engine,
    clusters,
    measure,
)

NUMPY = "NumPy brute force"


@dataclass
class WindowBenchConfig:
    subscriptions: int = 10_000
    s_size: int = 100_000
    per_key: int = 1000
    tau: int = 10
    selection_rate: float = 0.1
    c_reach: float = 5.0
    w_mu: float | None = None          # default: s_size (every stored tuple in the window)
    w_spread: float = 0.3              # σ_w as a fraction of w_mu
    events: int = 1000
    budget_s: float = 1.5
    sizes: tuple[int, ...] = (100, 1_000, 10_000, 100_000)
    spreads: tuple[float, ...] = (0.0, 0.1, 0.3, 1.0)
    per_keys: tuple[int, ...] = (10, 100, 1000, 5000)
    alpha: float = 0.001
    epsilon: float = 1.0
    strategies: tuple[str, ...] = WINDOW_STRATEGIES
    series: tuple[str, ...] = ("n", "spread", "per_key")
    seed: int = 13


class WindowReference:
    """The window points' NumPy brute force a user would write: the key's stored S tuples
    (sorted keys, two searches), then every subscription masked at once — A holds the value,
    and some partner has its value in C and its time within the subscription's w of now."""

    def __init__(self, subs: list[WindowJoin], s: tuple[np.ndarray, ...], now: int) -> None:
        self.a_lo = np.array([q.a.lo for q in subs], dtype=np.float64)
        self.a_hi = np.array([q.a.hi for q in subs], dtype=np.float64)
        self.c_lo = np.array([q.c.lo for q in subs], dtype=np.float64)
        self.c_hi = np.array([q.c.hi for q in subs], dtype=np.float64)
        self.w = np.array([q.w for q in subs], dtype=np.int64)
        order = np.argsort(s[0], kind="stable")
        self.keys, self.vals, self.times = s[0][order], s[1][order], s[2][order]
        self.now = now

    def rows(self, r: tuple[np.ndarray, ...]) -> list[tuple[float, ...]]:
        a = np.searchsorted(self.keys, r[0], "left")
        b = np.searchsorted(self.keys, r[0], "right")
        return [(k, v) for k, v, x, y in zip(r[0].tolist(), r[1].tolist(), a.tolist(),
                                             b.tolist(), strict=True) if y > x]

    def affected(self, row: tuple[float, ...]) -> int:
        k, v = row
        a, b = np.searchsorted(self.keys, k, "left"), np.searchsorted(self.keys, k, "right")
        sel = np.flatnonzero((self.a_lo <= v) & (v <= self.a_hi))
        pv, pt = self.vals[a:b], self.times[a:b]
        ok = ((self.c_lo[sel, None] <= pv) & (pv <= self.c_hi[sel, None])
              & (np.abs(pt - self.now) <= self.w[sel, None]))
        return int(np.count_nonzero(ok.any(axis=1)))


def data(c: WindowBenchConfig, per_key: int) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    rng = np.random.default_rng([c.seed, 1, c.s_size, per_key])
    n_keys = max(1, c.s_size // per_key)
    s = (rng.integers(0, n_keys, c.s_size).astype(np.float64),
         rng.uniform(0.0, VALUE_DOMAIN, c.s_size), np.arange(c.s_size, dtype=np.int64))
    r = (rng.integers(0, n_keys, c.events).astype(np.float64),
         rng.uniform(0.0, VALUE_DOMAIN, c.events))
    return s, r


def subs(c: WindowBenchConfig, n: int, spread: float) -> list[WindowJoin]:
    rng = np.random.default_rng([c.seed, 2, n, round(spread * 1000)])
    w_mu = float(c.s_size if c.w_mu is None else c.w_mu)
    c_lo, c_hi = clusters(rng, n, c.tau, 0.0, VALUE_DOMAIN, c.c_reach)
    a_lo, a_hi = a_ranges(rng, n, c.selection_rate)
    w = np.abs(np.rint(rng.normal(w_mu, spread * w_mu, n))).astype(np.int64)
    return [WindowJoin(a=Range(al, ah), c=Range(cl, ch), w=int(ww)) for al, ah, cl, ch, ww in
            zip(a_lo.tolist(), a_hi.tolist(), c_lo.tolist(), c_hi.tolist(), w.tolist(),
                strict=True)]


def m_b_and_skyline(e: Engine, r: tuple[np.ndarray, ...]) -> tuple[float, float]:
    """Mean m_b (S tuples of the key within w_max of now) and mean stored skyline size m̄_b."""
    w = e.window
    assert w is not None
    s_table = e.tables["S"]
    ix = s_table.key_index
    assert ix is not None
    now = e.probe_time
    mbs, sks = [], []
    sky = getattr(w, "skies", {}).get(1)
    for key in r[0][:200].tolist():
        g = ix.lookup(key)
        if g < 0:
            mbs.append(0)
            sks.append(0)
            continue
        bt = ix.by_time
        times = bt.keys[bt.start[g]: bt.start[g] + bt.size[g]]
        mbs.append(int(np.sum(times >= now - w.wmax)))
        if sky is not None:
            sks.append(max(sky.fresh_size(key), 0.0))  # after the probes: current
    return float(np.mean(mbs)), (float(np.mean(sks)) if sks else float("nan"))


def point(c: WindowBenchConfig, series: str, x: float, n: int, spread: float, per_key: int,
          prog: Progress, strategies: tuple[str, ...]) -> list[dict[str, Any]]:
    s, r = data(c, per_key)
    sl = subs(c, n, spread)
    engines = {nm: build_engine(c, nm, sl, s, kind="window")  # type: ignore[arg-type]
               for nm in strategies}
    # the NumPy brute force a user would write (the same-run reference), on the same tuples, timed in the
    # identify pass; it must find what the engines find on the first tuples
    some = next(iter(engines.values()))
    now = 0 if some.watermark is None else some.watermark + some.lateness
    ref = WindowReference(sl, s, now)
    rk, rv = r[0].tolist(), r[1].tolist()
    for i in range(min(5, len(rk))):
        want = ref.affected((rk[i], rv[i]))
        for nm, e in engines.items():
            got = e.probe("R", rk[i], rv[i], "identify")
            assert got == want, f"{nm} affects {got} on tuple {i}, the NumPy brute force {want}"

    def brute(a: int, b: int) -> int:
        return sum(ref.affected((rk[i], rv[i])) for i in range(a, b))

    res = measure(engines, r, c.budget_s, references={NUMPY: brute})
    numpy_ident = res[NUMPY]["identify"]
    rows = []
    for nm, e in engines.items():
        st = e.stats()["window"]
        ident, pairs = res[nm]["identify"], res[nm]["pairs"]
        mb, sk = m_b_and_skyline(e, r)
        rows.append({"series": series, "x": x, "strategy": nm, "subscriptions": n,
                     "w_spread": spread, "per_key": per_key, "w_max": st["w_max"],
                     "tau": st.get("tau"), "hotspots": st.get("hotspots"),
                     "m_b": mb, "skyline_points_per_key": sk,
                     "identify_tuples_per_s": ident["per_second"],
                     "numpy_identify_tuples_per_s": numpy_ident["per_second"],
                     "identify_vs_numpy": ident["per_second"] / numpy_ident["per_second"],
                     "events_numpy": numpy_ident["items"],
                     "affected_per_tuple": ident["work"] / max(ident["items"], 1),
                     "pairs_tuples_per_s": pairs["per_second"],
                     "pairs_per_tuple": pairs["work"] / max(pairs["items"], 1),
                     "events_identify": ident["items"], "events_pairs": pairs["items"]})
        prog.step(f"{series}={x} {nm}: {ident['per_second']:.0f} tuples/s m_b={mb:.0f} "
                  f"sky={sk:.0f} (NumPy brute force {numpy_ident['per_second']:.0f}/s)")
    del engines
    gc.collect()
    return rows


def run(c: WindowBenchConfig, json_path: str | None, plot_dir: str | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    strategies = available(c.strategies)
    steps = len(strategies) * (len(c.sizes) * ("n" in c.series) + len(c.spreads) * ("spread" in c.series)
                               + len(c.per_keys) * ("per_key" in c.series))
    prog = Progress(steps, "bench window")
    recs: list[dict[str, Any]] = []
    if "n" in c.series:
        for n in c.sizes:
            recs += point(c, "n", n, n, c.w_spread, c.per_key, prog, strategies)
    if "spread" in c.series:
        for sp in c.spreads:
            recs += point(c, "spread", sp, c.subscriptions, sp, c.per_key, prog, strategies)
    if "per_key" in c.series:
        for pk in c.per_keys:
            recs += point(c, "per_key", pk, c.subscriptions, c.w_spread, pk, prog, strategies)
    prog.close()
    result = {"benchmark": "window", "machine": machine(), "config": asdict(c),
              "strategies_run": list(strategies), "records": recs,
              "elapsed_s": time.perf_counter() - t0, "ratios": ratios(recs)}
    if json_path:
        write_json(json_path, result)
    if plot_dir:
        plots(result, Path(plot_dir))
    return result


def ratios(recs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    keys = sorted({(r["series"], r["x"]) for r in recs})
    worst = None
    for series, x in keys:
        row = {r["strategy"]: r for r in recs if r["series"] == series and r["x"] == x}
        if "WJ-SSI" in row and "WJ-JoinFirst" in row:
            ratio = row["WJ-SSI"]["identify_tuples_per_s"] / row["WJ-JoinFirst"]["identify_tuples_per_s"]
            out[f"{series}={x}: WJ-SSI / WJ-JoinFirst (m_b={row['WJ-SSI']['m_b']:.0f}, "
                f"skyline={row['WJ-SSI']['skyline_points_per_key']:.0f})"] = ratio
            if row["WJ-SSI"]["m_b"] >= 1000:
                worst = ratio if worst is None else min(worst, ratio)
    if worst is not None:
        out["worst WJ-SSI / WJ-JoinFirst with m_b >= 1000"] = worst
    return out


def plots(result: dict[str, Any], d: Path) -> None:
    recs = result["records"]
    for series, xlabel, logx in (("n", "number of window-join subscriptions", True),
                                 ("spread", "spread of w (σ_w / w_mu)", False),
                                 ("per_key", "S tuples per join key", True)):
        rows = [r for r in recs if r["series"] == series]
        if not rows:
            continue
        sr: dict[str, tuple[list[float], list[float]]] = {}
        for r in sorted(rows, key=lambda r: r["x"]):
            xs, ys = sr.setdefault(r["strategy"], ([], []))
            xs.append(r["x"] if r["x"] > 0 else 0.01)
            ys.append(r["identify_tuples_per_s"])
        plot_lines(d / f"window_{series}.png", f"Window joins: throughput over {series}",
                   xlabel, "incoming tuples / s (identify)", sr, logx=logx)


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = WindowBenchConfig()
    for name, typ in (("subscriptions", int), ("s_size", int), ("per_key", int), ("tau", int),
                      ("selection_rate", float), ("c_reach", float), ("w_spread", float),
                      ("events", int), ("alpha", float), ("epsilon", float), ("seed", int)):
        p.add_argument("--" + name.replace("_", "-"), type=typ, default=getattr(d, name))
    p.add_argument("--w-mu", type=float, default=None, help="mean window (default: --s-size)")
    p.add_argument("--budget", type=float, default=d.budget_s)
    for name in ("sizes", "spreads", "per_keys", "strategies", "series"):
        p.add_argument("--" + name.replace("_", "-"), default=",".join(map(str, getattr(d, name))))
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run in seconds")


def config_from_args(a: argparse.Namespace) -> WindowBenchConfig:
    def nums(s: str, typ: type) -> tuple:
        return tuple(typ(x) for x in s.split(",") if x)

    c = WindowBenchConfig(
        subscriptions=a.subscriptions, s_size=a.s_size, per_key=a.per_key, tau=a.tau,
        selection_rate=a.selection_rate, c_reach=a.c_reach, w_mu=a.w_mu, w_spread=a.w_spread,
        events=a.events, budget_s=a.budget, sizes=nums(a.sizes, int),
        spreads=nums(a.spreads, float), per_keys=nums(a.per_keys, int), alpha=a.alpha,
        epsilon=a.epsilon, strategies=nums(a.strategies, str), series=nums(a.series, str),
        seed=a.seed)
    for s in c.strategies:
        if s not in WINDOW_STRATEGIES:
            raise ValueError(f"unknown window strategy {s!r}; choose from {', '.join(WINDOW_STRATEGIES)}")
    if a.quick:
        quick(c)
    return c


def quick(c: WindowBenchConfig) -> WindowBenchConfig:
    """Shrink ``c`` in place to a seconds-long smoke run of every series."""
    c.subscriptions, c.s_size, c.per_key, c.events, c.budget_s = 500, 2000, 100, 30, 0.03
    c.sizes, c.spreads, c.per_keys = (50, 500), (0.0, 0.5), (20, 200)
    return c
