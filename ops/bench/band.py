"""``hotjoin bench band``: paper 004 §5.2–5.3 (Figs. 10(i), 10(ii), 11) for all band strategies.

Workload (Table I, real-valued so that band lengths can be small): |S| stored S tuples with
S.B ~ Normal(5000, 1000) on [0, 10000], S.C ~ Uni(0, 1e6); incoming R tuples with
R.B ~ Uni(0, 10000). Band ranges form ``τ`` clusters with centres evenly spread over
[−5000, 5000] (the range of S.B − R.B), so the stabbing number is exactly ``τ``; the half-width
of the clusters is calibrated so that on average about ``--affected`` subscriptions are affected
per incoming tuple at ``--subscriptions`` (dense S plus the paper's long bands would make
every band affected and the output 10⁹ pairs per tuple, which measures nothing but the output).
Fig. 10(i) keeps that half-width for every n and τ(n) = 10..60 as in the paper, except where it
would affect more than ``--affected`` subscriptions per tuple (n above ``--subscriptions``):
there the bands are narrowed to keep the affected count at the target.

Per strategy and point we record tuples/s for *identifying* the affected subscriptions (the
paper's measure: output excluded) and tuples/s *including* generating every result pair, both on
the same events, without storing them (``Engine.probe``); and µs per subscription update under a
50/50 insert/delete churn (Fig. 11). All strategies run side by side, interleaved in chunks.
"""

from __future__ import annotations

import argparse
import gc
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from hotjoin.matcher.engine import Engine
from hotjoin.matcher.joins.band import BAND_STRATEGIES
from hotjoin.matcher.model import BandJoin, Event, Range
from hotjoin.matcher.partition.stabbing import canonical_partition
from hotjoin.matcher.workload import (
    TableIConfig,
    clustered_bands,
    mean_affected,
    r_arrays,
    s_arrays,
)
from hotjoin.ops.bench.common import (
    Progress,
    interleaved,
    machine,
    plot_bars,
    plot_lines,
    write_json,
)

BRUTE = "NumPy brute force"
LIMIT = "flat limit"


class BandBruteForce:
    """What a user would write instead (the same-run reference,
    ``docs/benchmarks/index.md#same-run-references``): per R tuple with key b, the differences
    ``d = s.key − b`` of every stored S tuple (sorted, as the keys are), then per band
    ``n = searchsorted(d, hi, right) − searchsorted(d, lo, left)``; affected iff ``n > 0``."""

    def __init__(self, lo: np.ndarray, hi: np.ndarray, s_keys: np.ndarray) -> None:
        self.lo, self.hi = lo, hi
        self.keys = np.sort(s_keys)

    def affected(self, b: float) -> tuple[np.ndarray, np.ndarray]:
        d = self.keys - b
        cnt = np.searchsorted(d, self.hi, "right") - np.searchsorted(d, self.lo, "left")
        ids = np.flatnonzero(cnt > 0)
        return ids, cnt[ids]

    def pairs(self, b: float) -> int:
        """Every result pair as (subscription, partner position) arrays; their number."""
        d = self.keys - b
        first = np.searchsorted(d, self.lo, "left")
        cnt = np.searchsorted(d, self.hi, "right") - first
        ids = np.flatnonzero(cnt > 0)
        c = cnt[ids]
        q = np.repeat(ids, c)
        pos = np.repeat(first[ids] - np.concatenate(([0], np.cumsum(c)[:-1])), c) + \
            np.arange(q.shape[0])
        return int(pos.shape[0])


@njit(cache=True)
def _band_limit(gpoint: np.ndarray, gstart: np.ndarray, l_key: np.ndarray, l_q: np.ndarray,
                r_key: np.ndarray, r_lo: np.ndarray, r_q: np.ndarray, keys: np.ndarray,
                b: float, pairs: bool, lo: np.ndarray, hi: np.ndarray, out: np.ndarray,
                out_s: np.ndarray) -> int:
    """Static limit line of BJ-SSI (§3.1.2): per group one binary search for ``p`` in the
    differences ``keys − b``, then the prefix of the run sorted by lo (``lo <= d1``) and of the
    run sorted by hi descending (``hi >= d2``, ``lo > d1``); branch-free writes. PAIRS: each
    affected band's partners by two more binary searches. Returns the output count."""
    n = 0
    m = keys.shape[0]
    for g in range(gpoint.shape[0]):
        p = gpoint[g]
        a, c = 0, m
        while a < c:
            mid = (a + c) >> 1
            if keys[mid] - b >= p:
                c = mid
            else:
                a = mid + 1
        s, e = gstart[g], gstart[g + 1]
        have1 = a > 0
        d1 = keys[a - 1] - b if have1 else -np.inf
        if have1:
            k = s
            while k < e and l_key[k] <= d1:
                out[n] = l_q[k]
                n += 1
                k += 1
        if a < m:
            d2 = keys[a] - b
            k = s
            while k < e and r_key[k] >= d2:
                out[n] = r_q[k]
                n += (not have1) | (r_lo[k] > d1)
                k += 1
    if not pairs:
        return n
    w = 0
    for j in range(n):
        q = out[j]
        x, y = 0, m
        while x < y:
            mid = (x + y) >> 1
            if keys[mid] - b >= lo[q]:
                y = mid
            else:
                x = mid + 1
        u, z = x, m
        while u < z:
            mid = (u + z) >> 1
            if keys[mid] - b > hi[q]:
                z = mid
            else:
                u = mid + 1
        for t in range(x, u):
            if w < out_s.shape[0]:
                out_s[w] = t
            w += 1
    return w


class BandLimit:
    """The limit line: BJ-SSI's probe over static flat arrays (canonical stabbing partition of
    the bands, paper 004 Lemma 1; S keys as one sorted array), no engine around it."""

    def __init__(self, lo: np.ndarray, hi: np.ndarray, s_keys: np.ndarray) -> None:
        points, g = canonical_partition(lo, hi)
        self.tau = int(points.shape[0])
        self.gpoint = points
        self.gstart = np.searchsorted(np.sort(g), np.arange(self.tau + 1)).astype(np.int64)
        ol, orr = np.lexsort((lo, g)), np.lexsort((-hi, g))
        self.l = (lo[ol], ol.astype(np.int64))
        self.r = (hi[orr], lo[orr], orr.astype(np.int64))
        self.keys = np.sort(s_keys)
        self.lo, self.hi = lo, hi
        self.out = np.zeros(lo.shape[0] + 16, dtype=np.int64)
        self.out_s = np.zeros(1 << 20, dtype=np.int64)

    def probe(self, b: float, pairs: bool) -> int:
        return _band_limit(self.gpoint, self.gstart, *self.l, *self.r, self.keys, b, pairs,
                           self.lo, self.hi, self.out, self.out_s)

    def affected(self, b: float) -> tuple[np.ndarray, np.ndarray]:
        n = self.probe(b, False)
        ids = self.out[:n].copy()
        d = self.keys - b
        return ids, np.searchsorted(d, self.hi[ids], "right") - np.searchsorted(d, self.lo[ids],
                                                                                  "left")


@dataclass
class BandBenchConfig:
    subscriptions: int = 100_000
    s_size: int = 100_000
    tau: int = 50
    affected: float = 1000.0
    events: int = 2000
    budget_s: float = 1.5
    sizes: tuple[int, ...] = (50, 500, 5_000, 50_000, 100_000, 500_000)
    taus: tuple[int, ...] = (10, 50, 200, 1000, 5000)
    churn_updates: int = 100_000
    alpha: float = 0.001
    epsilon: float = 1.0
    strategies: tuple[str, ...] = BAND_STRATEGIES
    figures: tuple[str, ...] = ("10i", "10ii", "11", "group")
    seed: int = 7
    group_tau: int = 800
    group_affected: float = 20.0
    group_strategies: tuple[str, ...] = ("BJ-SSI", "BJ-Hotspot")
    verify: int = 10


def _table_cfg(c: BandBenchConfig) -> TableIConfig:
    return TableIConfig(n_subscriptions=c.subscriptions, s_size=c.s_size, integer=False,
                        seed=c.seed)


def calibrate_half_width(c: BandBenchConfig, s_keys: np.ndarray, n: int | None = None,
                         tau: int | None = None) -> tuple[float, float]:
    """Half-width giving ≈ ``c.affected`` affected subscriptions per R tuple (bisection)."""
    n = c.subscriptions if n is None else n
    tau = c.tau if tau is None else tau
    r_keys = r_arrays(_table_cfg(c), 64, batch=99)[0]
    lo_w, hi_w = 0.0, 200.0
    best = (hi_w, math.inf)
    for _ in range(40):
        mid = (lo_w + hi_w) / 2
        lo, hi = clustered_bands(n, tau, mid, c.seed)
        got = mean_affected(lo, hi, r_keys, s_keys)
        if abs(got - c.affected) < abs(best[1] - c.affected):
            best = (mid, got)
        if got < c.affected:
            lo_w = mid
        else:
            hi_w = mid
        if abs(got - c.affected) <= 0.02 * c.affected:
            break
    return best


def _engine(c: BandBenchConfig, name: str, lo: np.ndarray, hi: np.ndarray,
            s: tuple[np.ndarray, np.ndarray, np.ndarray]) -> Engine:
    e = Engine(strategy={"band": name}, options={"alpha": c.alpha, "epsilon": c.epsilon})
    e.subscribe_many([BandJoin(b=Range(a, b)) for a, b in zip(lo.tolist(), hi.tolist(),
                                                               strict=True)])

    keys, vals, times = s
    e.tables["S"].bulk_load(
        [Event("S", f"s{i}", k, v, t) for i, (k, v, t) in
         enumerate(zip(keys.tolist(), vals.tolist(), times.tolist(), strict=True))],
        list(range(e.seq + 1, e.seq + 1 + keys.shape[0])))
    e.restore_clock(e.seq + keys.shape[0], int(times.max()) if keys.shape[0] else None)
    return e


def _throughput_point(c: BandBenchConfig, n: int, tau: int, half_width: float,
                      s: tuple[np.ndarray, np.ndarray, np.ndarray],
                      r: tuple[np.ndarray, np.ndarray, np.ndarray],
                      prog: Progress, strategies: tuple[str, ...] | None = None
                      ) -> list[dict[str, Any]]:
    """Every strategy beside the NumPy brute force and the flat limit line, interleaved on the
    same R tuples; the first ``c.verify`` tuples are checked to affect the same subscriptions
    with the same pair counts in every contender (``agrees_with_brute_force``)."""

    lo, hi = clustered_bands(n, tau, half_width, c.seed)
    strategies = c.strategies if strategies is None else strategies
    engines = {name: _engine(c, name, lo, hi, s) for name in strategies}
    brute, limit = BandBruteForce(lo, hi, s[0]), BandLimit(lo, hi, s[0])
    rk, rv = r[0].tolist(), r[1].tolist()
    n_verify = min(c.verify, len(rk))
    want = [dict(zip(*(x.tolist() for x in brute.affected(rk[i])), strict=True))
            for i in range(n_verify)]
    agree = {BRUTE: True, LIMIT: all(
        dict(zip(*(x.tolist() for x in limit.affected(rk[i])), strict=True)) == want[i]
        for i in range(n_verify))}
    t_pub = int(s[2].max()) + 1 if s[2].shape[0] else 0
    for nm, e in engines.items():
        ok = True
        first = min(sid for sid, _ in e.subscriptions())  # one subscribe_many: consecutive
        for i in range(n_verify):
            aff = e.publish_affected(Event("R", f"verify{i}", rk[i], rv[i], t_pub))
            e.delete("R", f"verify{i}", match=False)
            ok &= {q - first: k for q, k in zip(aff.subscription_ids.tolist(),
                                                aff.counts.tolist(), strict=True)} == want[i]
        agree[nm] = ok
    out: dict[str, dict[str, Any]] = {name: {} for name in (*engines, BRUTE, LIMIT)}
    for mode in ("identify", "pairs"):
        def runner(eng: Engine, mode: str = mode):
            def run(a: int, b: int) -> int:
                tot = 0
                for i in range(a, b):
                    tot += eng.probe("R", rk[i], rv[i], mode)
                return tot
            return run

        def run_brute(a: int, b: int, mode: str = mode) -> int:
            if mode == "pairs":
                return sum(brute.pairs(rk[i]) for i in range(a, b))
            return sum(brute.affected(rk[i])[0].shape[0] for i in range(a, b))

        def run_limit(a: int, b: int, pairs: bool = mode == "pairs") -> int:
            return sum(limit.probe(rk[i], pairs) for i in range(a, b))

        for eng in engines.values():   # warm-up: JIT compile and caches, not timed
            eng.probe("R", rk[0], rv[0], mode)
        limit.probe(rk[0], True)
        runners = {nm: runner(e) for nm, e in engines.items()}
        runners[BRUTE], runners[LIMIT] = run_brute, run_limit
        res = interleaved(runners, len(rk), c.budget_s)
        for nm, rr in res.items():
            out[nm][mode] = rr
    rows = []
    lim = out[LIMIT]["identify"]["per_second"]
    for nm in out:
        st = engines[nm].stats()["band"] if nm in engines else {}
        ident, pairs = out[nm]["identify"], out[nm]["pairs"]
        tau_real = int(st["tau"]) if "tau" in st else limit.tau
        rows.append({
            "strategy": nm, "subscriptions": n, "tau_target": tau,
            "tau": int(st.get("tau", 0)) if "tau" in st else (limit.tau if nm == LIMIT else None),
            "hotspots": st.get("hotspots"), "s_size": c.s_size, "half_width": half_width,
            "identify_tuples_per_s": ident["per_second"],
            "affected_per_tuple": ident["work"] / max(ident["items"], 1),
            "pairs_tuples_per_s": pairs["per_second"],
            "pairs_per_tuple": pairs["work"] / max(pairs["items"], 1),
            "ns_per_group": 1e9 / ident["per_second"] / max(tau_real, 1),
            "identify_vs_limit": ident["per_second"] / lim,
            "verified_tuples": n_verify, "agrees_with_brute_force": agree[nm],
            "events_identify": ident["items"], "events_pairs": pairs["items"],
        })
        prog.step(f"n={n} tau={tau} {nm}: {ident['per_second']:.0f} tuples/s")
    del engines
    gc.collect()
    return rows


def fig11(c: BandBenchConfig, half_width: float, prog: Progress) -> list[dict[str, Any]]:
    """Fig. 11: µs per subscription update under 50/50 insert/delete churn, side by side."""
    lo, hi = clustered_bands(c.subscriptions, c.tau, half_width, c.seed)
    nlo, nhi = clustered_bands(c.churn_updates, c.tau, half_width, c.seed, stream=1)
    rng = np.random.default_rng([c.seed, 12])
    coin = rng.random(c.churn_updates) < 0.5
    pick = rng.random(c.churn_updates)
    empty = (np.empty(0), np.empty(0), np.empty(0, dtype=np.int64))
    engines = {name: _engine(c, name, lo, hi, empty) for name in c.strategies}
    lives = {name: list(range(c.subscriptions)) for name in engines}
    subs = [BandJoin(b=Range(a, b)) for a, b in zip(nlo.tolist(), nhi.tolist(), strict=True)]
    ops: list[tuple[bool, float]] = list(zip(coin.tolist(), pick.tolist(), strict=True))

    def runner(name: str):
        eng, live = engines[name], lives[name]

        def run(a: int, b: int) -> int:
            for i in range(a, b):
                ins, u = ops[i]
                if ins or not live:
                    live.append(eng.subscribe(subs[i]))
                else:
                    j = min(int(u * len(live)), len(live) - 1)
                    sid = live[j]
                    live[j] = live[-1]
                    live.pop()
                    eng.unsubscribe(sid)
            return b - a
        return run

    res = interleaved({nm: runner(nm) for nm in engines}, len(ops), budget_s=1e9, chunks=10)
    rows = []
    for nm, rr in res.items():
        st = engines[nm].stats()["band"]
        rows.append({"strategy": nm, "subscriptions": c.subscriptions, "updates": rr["items"],
                     "us_per_update": 1e6 * rr["seconds"] / max(rr["items"], 1),
                     "tau_after": st.get("tau"), "hotspots_after": st.get("hotspots"),
                     "reconstructions": st.get("reconstructions")})
        prog.step(f"churn {nm}: {rows[-1]['us_per_update']:.2f} us/update")
    return rows


def run(c: BandBenchConfig, json_path: str | None, plot_dir: str | None) -> dict[str, Any]:
    tcfg = _table_cfg(c)
    s = s_arrays(tcfg, c.s_size)
    r = r_arrays(tcfg, c.events)
    t0 = time.perf_counter()
    half_width, achieved = calibrate_half_width(c, s[0])
    steps = (len(c.strategies) + 2) * (len(c.sizes) * ("10i" in c.figures)
                                       + len(c.taus) * ("10ii" in c.figures))
    steps += len(c.strategies) * ("11" in c.figures)
    steps += (len(c.group_strategies) + 2) * ("group" in c.figures)
    prog = Progress(steps, "bench band")
    result: dict[str, Any] = {
        "benchmark": "band", "machine": machine(), "config": asdict(c),
        "calibration": {"half_width": half_width, "affected_estimate": achieved},
        "records": [],
    }
    if "10i" in c.figures:
        r_sample = r_arrays(tcfg, 64, batch=99)[0]
        for n in c.sizes:
            tau = max(1, round(10 + 50 * math.log(n / min(c.sizes)) /
                               math.log(max(c.sizes) / min(c.sizes)))) if len(c.sizes) > 1 else c.tau
            # the bands of the base point; where they would affect more than the target per
            # tuple (larger n), narrower bands keep it at the target ("at most --affected")
            hw = half_width
            if mean_affected(*clustered_bands(n, tau, hw, c.seed), r_sample, s[0]) > \
                    1.05 * c.affected:
                hw = calibrate_half_width(c, s[0], n, tau)[0]
            for row in _throughput_point(c, n, tau, hw, s, r, prog):
                result["records"].append({"figure": "10i", **row})
    if "10ii" in c.figures:
        for tau in c.taus:
            for row in _throughput_point(c, c.subscriptions, tau, half_width, s, r, prog):
                result["records"].append({"figure": "10ii", **row})
    if "11" in c.figures:
        for row in fig11(c, half_width, prog):
            result["records"].append({"figure": "11", **row})
    if "group" in c.figures:  # per-group probe cost: many groups, little output (PERF-NOTES)
        cg = BandBenchConfig(**{**asdict(c), "affected": c.group_affected, "tau": c.group_tau})
        hw = calibrate_half_width(cg, s[0])[0]
        for row in _throughput_point(c, c.subscriptions, c.group_tau, hw, s, r, prog,
                                     tuple(x for x in c.group_strategies if x in c.strategies)):
            result["records"].append({"figure": "group", **row})
    prog.close()
    result["elapsed_s"] = time.perf_counter() - t0
    result["ratios"] = ratios(result["records"], c)
    if json_path:
        write_json(json_path, result)
    if plot_dir:
        plots(result, Path(plot_dir))
    return result


def ratios(records: list[dict[str, Any]], c: BandBenchConfig) -> dict[str, Any]:
    """The ratios the issue judges, computed from the records (None where not measured)."""
    out: dict[str, Any] = {}

    def pick(fig: str, **kw: Any) -> dict[str, dict[str, Any]]:
        return {r["strategy"]: r for r in records if r["figure"] == fig
                and all(r.get(k) == v for k, v in kw.items())}

    at = pick("10ii", tau_target=c.tau) or pick("10i", subscriptions=c.subscriptions)
    if "BJ-SSI" in at:
        ssi = at["BJ-SSI"]["identify_tuples_per_s"]
        for other in ("BJ-MJ", "BJ-DOuter", "BJ-QOuter", "BJ-Hotspot"):
            if other in at:
                out[f"identify BJ-SSI / {other} at n={c.subscriptions}"] = \
                    ssi / at[other]["identify_tuples_per_s"]
    fi = [r for r in records if r["figure"] == "10i" and r["strategy"] == "BJ-SSI"]
    if len(fi) >= 2:
        fi.sort(key=lambda r: r["subscriptions"])
        out[f"BJ-SSI identify throughput n={fi[0]['subscriptions']} / n={fi[-1]['subscriptions']}"] = \
            fi[0]["identify_tuples_per_s"] / fi[-1]["identify_tuples_per_s"]
    for r in records:
        if r["figure"] in ("10ii", "group") and r["strategy"] in ("BJ-SSI", "BJ-Hotspot"):
            out[f"fig {r['figure']} tau={r['tau_target']} {r['strategy']}: ns per group / flat "
                f"limit's"] = 1.0 / r["identify_vs_limit"]
    f11 = pick("11")
    if "BJ-SSI" in f11 and "BJ-MJ" in f11:
        out["maintenance BJ-SSI / BJ-MJ (us per update)"] = \
            f11["BJ-SSI"]["us_per_update"] / f11["BJ-MJ"]["us_per_update"]
    if "BJ-Hotspot" in f11 and "BJ-MJ" in f11:
        out["maintenance BJ-Hotspot / BJ-MJ (us per update)"] = \
            f11["BJ-Hotspot"]["us_per_update"] / f11["BJ-MJ"]["us_per_update"]
    return out


def to_markdown(result: dict[str, Any]) -> str:
    """The records as Markdown tables (one per figure), as pasted into docs/benchmarks/engine.md."""
    recs = result["records"]
    names = list(dict.fromkeys(r["strategy"] for r in recs))
    out: list[str] = []
    for fig, xkey, xname in (("10i", "subscriptions", "subscriptions"),
                             ("10ii", "tau_target", "τ")):
        rows = [r for r in recs if r["figure"] == fig]
        if not rows:
            continue
        for metric, what in (("identify_tuples_per_s", "identifying affected subscriptions"),
                             ("pairs_tuples_per_s", "including every result pair")):
            out.append(f"Fig. {fig} — incoming tuples/s, {what}:\n")
            out.append(f"| {xname} | affected/tuple | " + " | ".join(names) + " |")
            out.append("|---" * (len(names) + 2) + "|")
            for x in sorted({r[xkey] for r in rows}):
                at = {r["strategy"]: r for r in rows if r[xkey] == x}
                aff = max(at.values(), key=lambda r: r["events_identify"])["affected_per_tuple"]
                cells = [f"{at[n][metric]:,.0f}" if n in at else "—" for n in names]
                out.append(f"| {x:,} | {aff:,.0f} | " + " | ".join(cells) + " |")
            out.append("")
    grp = [r for r in recs if r["figure"] == "group"]
    if grp:
        out.append(f"Per-group probe cost (τ = {grp[0]['tau_target']}, "
                   f"{grp[0]['affected_per_tuple']:.0f} affected per tuple):\n")
        out.append("| contender | identify tuples/s | ns per group | × flat limit | agrees |")
        out.append("|---|---|---|---|---|")
        for r in grp:
            out.append(f"| {r['strategy']} | {r['identify_tuples_per_s']:,.0f} | "
                       f"{r['ns_per_group']:.1f} | {1 / r['identify_vs_limit']:.2f} | "
                       f"{r['agrees_with_brute_force']} |")
        out.append("")
    f11 = [r for r in recs if r["figure"] == "11"]
    if f11:
        out.append("Fig. 11 — µs per subscription update (50/50 insert/delete churn):\n")
        out.append("| " + " | ".join(r["strategy"] for r in f11) + " |")
        out.append("|---" * len(f11) + "|")
        out.append("| " + " | ".join(f"{r['us_per_update']:.2f}" for r in f11) + " |")
        out.append("")
    out.append("Ratios:\n")
    out += [f"- {k}: **{v:.2f}**" for k, v in result["ratios"].items()]
    return "\n".join(out) + "\n"


def plots(result: dict[str, Any], d: Path) -> None:
    recs = result["records"]
    for fig, xkey, xlabel in (("10i", "subscriptions", "number of band-join subscriptions"),
                              ("10ii", "tau_target", "stabbing number τ")):
        rows = [r for r in recs if r["figure"] == fig]
        if not rows:
            continue
        for metric, label in (("identify_tuples_per_s", "identify"),
                              ("pairs_tuples_per_s", "with result pairs")):
            series: dict[str, tuple[list[float], list[float]]] = {}
            for r in sorted(rows, key=lambda r: r[xkey]):
                xs, ys = series.setdefault(r["strategy"], ([], []))
                xs.append(r[xkey])
                ys.append(r[metric])
            plot_lines(d / f"band_fig{fig}_{label.split()[0]}.png",
                       f"Band joins, Fig. {fig}: throughput ({label})", xlabel,
                       "incoming tuples / s", series)
    grp = {r["strategy"]: r["ns_per_group"] for r in recs if r["figure"] == "group"}
    if grp:
        plot_bars(d / "band_group.png", "Band joins: identify cost per stabbing group",
                  "ns per group (per tuple / τ)", grp)
    f11 = {r["strategy"]: r["us_per_update"] for r in recs if r["figure"] == "11"}
    if f11:
        plot_bars(d / "band_fig11.png", "Band joins, Fig. 11: maintenance cost",
                  "µs per subscription update", f11)


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = BandBenchConfig()
    p.add_argument("--subscriptions", type=int, default=d.subscriptions)
    p.add_argument("--s-size", type=int, default=d.s_size)
    p.add_argument("--tau", type=int, default=d.tau)
    p.add_argument("--affected", type=float, default=d.affected,
                   help="target mean affected subscriptions per incoming tuple")
    p.add_argument("--events", type=int, default=d.events)
    p.add_argument("--budget", type=float, default=d.budget_s,
                   help="seconds per strategy and point (slow baselines see fewer events)")
    p.add_argument("--sizes", default=",".join(map(str, d.sizes)))
    p.add_argument("--taus", default=",".join(map(str, d.taus)))
    p.add_argument("--churn-updates", type=int, default=d.churn_updates)
    p.add_argument("--alpha", type=float, default=d.alpha)
    p.add_argument("--epsilon", type=float, default=d.epsilon)
    p.add_argument("--strategies", default=",".join(d.strategies))
    p.add_argument("--figures", default=",".join(d.figures))
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--group-tau", type=int, default=d.group_tau,
                   help="stabbing number of the per-group cost point (figure 'group')")
    p.add_argument("--group-affected", type=float, default=d.group_affected,
                   help="target affected subscriptions per tuple at the per-group cost point")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes: a smoke run of every figure in seconds")


def config_from_args(a: argparse.Namespace) -> BandBenchConfig:
    def ints(s: str) -> tuple[int, ...]:
        return tuple(int(x) for x in s.split(",") if x)

    c = BandBenchConfig(
        subscriptions=a.subscriptions, s_size=a.s_size, tau=a.tau, affected=a.affected,
        events=a.events, budget_s=a.budget, sizes=ints(a.sizes), taus=ints(a.taus),
        churn_updates=a.churn_updates, alpha=a.alpha, epsilon=a.epsilon,
        strategies=tuple(x for x in a.strategies.split(",") if x),
        figures=tuple(x for x in a.figures.split(",") if x), seed=a.seed,
        group_tau=a.group_tau, group_affected=a.group_affected)
    for s in c.strategies:
        if s not in BAND_STRATEGIES:
            raise ValueError(f"unknown band strategy {s!r}; choose from {', '.join(BAND_STRATEGIES)}")
    if a.quick:
        c.subscriptions, c.s_size, c.tau, c.affected = 2000, 2000, 10, 50.0
        c.events, c.budget_s, c.churn_updates = 60, 0.05, 400
        c.sizes, c.taus = (50, 500, 2000), (5, 20)
        c.group_tau, c.group_affected = 200, 5.0
    return c
