"""Profiling every strategy per tuple and fitting the cost constants (paper 004 §5.4, Table II).

``time_members`` is the measuring core shared by ``hotjoin calibrate`` and ``hotjoin bench
router``: for each incoming tuple it records every member strategy's feature vector
(:mod:`matcher.router.cost_model`), the router's choice, and the time of each member run alone on that
tuple (``force``), each member in a pass of its own over the tuples as a static engine would run
them (passes in a random order, median over rounds). From those the
benchmark derives the static strategies, Dynamic and ``*-Optimum`` (the fastest member per
tuple); calibration fits ``time ≈ Σ c_j f_j + c_k k`` per strategy by least squares on relative
errors (rows scaled by 1/time), keeping constants non-negative by dropping a feature that fits
negative and refitting (an active-set NNLS: a negative cost would make the router prefer a
strategy for doing *more*). 95% intervals are ±1.96 standard errors (every fit has hundreds of residual degrees of freedom).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import platform
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from hotjoin.matcher.engine import Engine
from hotjoin.matcher.model import BandJoin, Range, SelectJoin, WindowJoin
from hotjoin.matcher.router.cost_model import FEATURES, CostProfile
from hotjoin.matcher.router.dynamic import DEFAULT_MEMBERS

VALUE_DOMAIN = 1_000_000.0
ALL_MEMBERS = {"select": DEFAULT_MEMBERS["select"] + ("SJ-SSI",),
               "band": DEFAULT_MEMBERS["band"], "window": DEFAULT_MEMBERS["window"]}


# -- measuring --------------------------------------------------------------------------------


@dataclass
class MemberTimes:
    """Per tuple: each member's time (ns) and features, the router's choice, and its own time."""

    members: tuple[str, ...]
    ns: np.ndarray            # (tuples, members) time of each member alone
    dynamic_ns: np.ndarray    # (tuples,) time of the routed run (features + choice + member)
    choice: np.ndarray        # (tuples,) index of the member the router ran
    affected: np.ndarray      # (tuples,) affected subscriptions (identify mode)
    features: list[np.ndarray]  # per member: (tuples, len(FEATURES[member]))


def _strategy(e: Engine, kind: str) -> Any:
    return {"band": e.band, "select": e.select, "window": e.window}[kind]


def _features(e: Engine, kind: str, side: str, key: float, value: float,
              t: int) -> list[list[float]] | None:
    """Every member's features for one tuple of ``side`` (the router's own cost models)."""
    return _strategy(e, kind).features(1 if side == "R" else -1, key, value, t,
                                       e.tables["S" if side == "R" else "R"])


def warm_up(e: Engine, kind: str, keys: np.ndarray, values: np.ndarray, n: int = 10) -> None:
    """Run every member and the router on the first ``n`` tuples (JIT compiles, caches); the
    router does not learn from these runs (its online calibration is part of what is timed)."""
    ix = _strategy(e, kind)
    learn, ix.feedback = ix.feedback, False
    try:
        for name in (*ix.member_names, None):
            ix.force(name)
            for k, v in zip(keys[:n].tolist(), values[:n].tolist(), strict=True):
                e.probe("R", k, v)
    finally:
        ix.force(None)
        ix.feedback = learn


def time_members(e: Engine, kind: str, side: str, keys: np.ndarray, values: np.ndarray,
                 times: np.ndarray | None = None, progress: Any = None,
                 rounds: int = 1, lead_in: int = 0) -> MemberTimes:
    """Run every member and the router over the tuples (``Engine.probe``, identify mode).

    Each run is a whole pass over the tuples by one member alone (``force``) or by the router —
    as a static engine would see the stream, with its own index and code warm in the caches.
    The passes run in a random order, ``rounds`` times; a tuple's time is its median over the
    rounds. (Interleaving all runners per tuple instead would make every run a cold one and
    charge the router's Python-side state cache misses a stream would not have.) The first
    ``lead_in`` tuples with partners are not timed: each pass runs them first, untimed, so that
    the timed part finds the runner's index in the caches whatever pass came before it (a pass
    of 300 tuples lasts only a few ms; without a lead-in, a pass right after a heavy one was
    measured ~20 % slower). Tuples without
    partners (no member does any work) are skipped. Every run must report the same number of
    affected subscriptions on every tuple (AssertionError otherwise): the benchmark checks the
    strategies against each other on every tuple it times.
    """
    with gc_paused():  # a collection inside one member's timing is not that member's cost
        return _time_members(e, kind, side, keys, values, times, progress, rounds, lead_in)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off inside the block (timed passes)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


EVICT_BYTES = 64 << 20
"""Bytes read before every pass of :func:`time_members` (well above a last-level cache)."""
_evict_buffer: list[np.ndarray] = []


def evict_caches() -> None:
    """Read ``EVICT_BYTES`` of memory, so the next pass starts from caches holding none of the
    pass before it. Without this, a pass right after a heavy one (SJ-Vanilla, SJ-JoinFirst:
    0.3–0.4 ms per tuple through the whole table) started colder than one after a light pass,
    and the fixed order of passes (seed 7) put the router after a heavy pass in three rounds
    of five and SJ-SelectFirst in two: at Fig. 18's first point the router measured 3–4 %
    slower than SJ-SelectFirst even with its decision replaced by SJ-SelectFirst's own call."""
    if not _evict_buffer:
        _evict_buffer.append(np.ones(EVICT_BYTES // 8))
    _evict_buffer[0].sum()


def _time_members(e: Engine, kind: str, side: str, keys: np.ndarray, values: np.ndarray,
                  times: np.ndarray | None, progress: Any, rounds: int,
                  lead_in: int) -> MemberTimes:
    ix = _strategy(e, kind)
    names: tuple[str, ...] = tuple(ix.member_names)
    nm = len(names)
    clock = time.perf_counter_ns
    ks, vs = keys.tolist(), values.tolist()
    ts = times.tolist() if times is not None else [e.probe_time] * len(ks)
    rows: list[tuple[float, float, int]] = []
    feats: list[list[list[float]]] = [[] for _ in names]
    for k, v, t in zip(ks, vs, ts, strict=True):
        f = _features(e, kind, side, k, v, t)
        if f is not None:
            rows.append((k, v, t))
            for j in range(nm):
                feats[j].append(f[j])
    lead, rows = rows[:lead_in], rows[lead_in:]
    feats = [fj[lead_in:] for fj in feats]
    nt = len(rows)
    ns = np.zeros((rounds, nm + 1, nt))
    counts = np.zeros((rounds, nm + 1, nt), dtype=np.int64)
    choice = np.zeros(nt, dtype=np.int64)
    rng = np.random.default_rng(7)
    for r in range(rounds):
        for step, j in enumerate(rng.permutation(nm + 1).tolist()):
            ix.force(None if j == nm else names[j])
            evict_caches()
            for k, v, t in lead:
                e.probe(side, k, v, "identify", t)  # type: ignore[arg-type]
            out_t, out_c = ns[r, j], counts[r, j]
            for x, (k, v, t) in enumerate(rows):
                t0 = clock()
                out_c[x] = e.probe(side, k, v, "identify", t)  # type: ignore[arg-type]
                out_t[x] = clock() - t0
                if j == nm:
                    choice[x] = ix.last
            if progress is not None:
                progress(r * (nm + 1) + step + 1, rounds * (nm + 1))
    ix.force(None)
    c = counts.reshape(-1, nt)
    bad = np.flatnonzero((c != c[0]).any(axis=0))
    if bad.size:  # every member (and the router) must affect the same set
        x = int(bad[0])
        k, v, _ = rows[x]
        raise AssertionError(f"{kind} tuple {x} (key {k}, value {v}): affected counts differ: "
                             f"{dict(zip((*names, 'router'), counts[0, :, x].tolist(), strict=True))}")
    med = np.median(ns, axis=0)  # (runners, tuples)
    return MemberTimes(
        names, np.ascontiguousarray(med[:nm].T).reshape(-1, nm), med[nm].copy(), choice,
        counts[0, 0].astype(np.float64),
        [np.array(fj, dtype=np.float64).reshape(-1, len(FEATURES[n]))
         for fj, n in zip(feats, names, strict=True)])


@dataclass
class BatchTimes:
    """Whole-pass times of each member and the router on the batch path (``probe_batch``)."""

    members: tuple[str, ...]
    pass_ns: np.ndarray       # (rounds, members + 1) time of each pass; the router last
    decisions: np.ndarray     # (members,) tuples of the router's timed passes it gave each
                              # member, all rounds (lead-ins not counted)
    affected: np.ndarray      # (tuples,) affected subscriptions of each timed tuple


def time_batches(e: Engine, kind: str, side: str, keys: np.ndarray, values: np.ndarray,
                 times: np.ndarray | None = None, rounds: int = 1, lead_in: int = 0,
                 batch: int = 100) -> BatchTimes:
    """:func:`time_members` on the batch path: every member alone and the router probe the
    same tuples (those with partners; the first ``lead_in`` of them untimed) in calls of
    ``batch`` tuples to ``Engine.probe_batch`` — the compiled matching of ``publish_batch``,
    with SJ-/WJ-Dynamic deciding inside the batch. A pass is timed as a
    whole (no per-tuple times: Optimum is not defined here); passes run in a random order
    after evicted caches, ``rounds`` times. Every runner must report the same affected counts
    on every tuple (AssertionError otherwise)."""
    with gc_paused():
        return _time_batches(e, kind, side, keys, values, times, rounds, lead_in, batch)


def _time_batches(e: Engine, kind: str, side: str, keys: np.ndarray, values: np.ndarray,
                  times: np.ndarray | None, rounds: int, lead_in: int,
                  batch: int) -> BatchTimes:
    ix = _strategy(e, kind)
    names: tuple[str, ...] = tuple(ix.member_names)
    nm = len(names)
    ts = (np.asarray(times, dtype=np.int64) if times is not None
          else np.full(len(keys), e.probe_time, dtype=np.int64))
    keep = [x for x, (k, v, t) in enumerate(zip(keys.tolist(), values.tolist(), ts.tolist(),
                                                 strict=True))
            if _features(e, kind, side, k, v, t) is not None]
    sel = np.asarray(keep, dtype=np.int64)
    ks, vs, tt = (np.ascontiguousarray(a[sel]) for a in (keys, values, ts))
    lead = slice(0, min(lead_in, sel.shape[0]))
    nt = sel.shape[0] - lead.stop
    cuts = [(a, min(a + batch, sel.shape[0])) for a in range(lead.stop, sel.shape[0], batch)]
    pass_ns = np.zeros((rounds, nm + 1))
    counts = np.zeros((nm + 1, nt), dtype=np.int64)
    decisions = np.zeros(nm, dtype=np.int64)
    clock = time.perf_counter_ns
    rng = np.random.default_rng(7)
    for r in range(rounds):
        for j in rng.permutation(nm + 1).tolist():
            ix.force(None if j == nm else names[j])
            evict_caches()
            e.probe_batch(side, ks[lead], vs[lead], tt[lead])
            got = []
            before = np.array(ix.counts, dtype=np.int64)
            t0 = clock()
            for a, b in cuts:
                got.append(e.probe_batch(side, ks[a:b], vs[a:b], tt[a:b]))
            pass_ns[r, j] = clock() - t0
            if j == nm:
                decisions += np.array(ix.counts, dtype=np.int64) - before
            counts[j] = np.concatenate(got) if got else 0
    ix.force(None)
    bad = np.flatnonzero((counts != counts[0]).any(axis=0))
    if bad.size:
        x = int(bad[0])
        raise AssertionError(f"{kind} tuple {x} (key {ks[lead.stop + x]}): batch affected counts "
                             f"differ: {dict(zip((*names, 'router'), counts[:, x].tolist(), strict=True))}")
    return BatchTimes(names, pass_ns, decisions, counts[0].astype(np.float64))


# -- fitting ----------------------------------------------------------------------------------


def fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Non-negative least squares ``y ≈ x c`` (active set) and ±1.96·SE per constant.

    A column that would fit negative is fixed at 0 and the rest refitted; constants fixed at 0
    get a zero-width interval. Columns that never vary from 0 are fixed at 0 too.
    """
    n, p = x.shape
    free = [j for j in range(p) if np.any(x[:, j] != 0)]
    coef = np.zeros(p)
    se = np.zeros(p)
    while free:
        xf = x[:, free]
        c, *_ = np.linalg.lstsq(xf, y, rcond=None)
        if (c >= 0).all():
            coef[:] = 0
            coef[free] = c
            dof = max(n - len(free), 1)
            resid = y - xf @ c
            s2 = float(resid @ resid) / dof
            cov = s2 * np.linalg.pinv(xf.T @ xf)
            se[:] = 0
            se[free] = np.sqrt(np.clip(np.diag(cov), 0, None))
            break
        free.pop(int(np.argmin(c)))
    return coef, 1.96 * se


def fit_profile(samples: list[MemberTimes], meta: dict[str, Any]) -> tuple[CostProfile,
                                                                          dict[str, Any]]:
    """Fit every strategy seen in ``samples``; returns the profile and a per-strategy report."""
    by: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {}
    for s in samples:
        for j, name in enumerate(s.members):
            xs, ys = by.setdefault(name, ([], []))
            xs.append(np.column_stack([s.features[j], s.affected]))
            ys.append(s.ns[:, j])
    coef: dict[str, list[float]] = {}
    ci: dict[str, list[tuple[float, float]]] = {}
    report: dict[str, Any] = {}
    for name, (xs, ys) in by.items():
        x = np.vstack(xs)
        y = np.concatenate(ys)
        keep = y <= np.quantile(y, 0.99)  # a GC pause or a neighbour is not a cost
        x, y = x[keep], y[keep]
        # relative least squares: costs span 4 orders of magnitude and the router compares
        # them, so a 10 µs tuple's error matters as much as a 10 ms tuple's (weights 1/y)
        w = 1.0 / np.maximum(y, 500.0)
        c, half = fit(x * w[:, None], y * w)
        pred = x @ c
        r2 = 1.0 - float(((y - pred) ** 2).sum()) / max(float(((y - y.mean()) ** 2).sum()), 1e-9)
        coef[name] = [float(v) for v in c[:-1]]
        ci[name] = [(float(v - h), float(v + h)) for v, h in zip(c[:-1], half[:-1], strict=True)]
        report[name] = {"samples": int(y.shape[0]), "r2": r2, "per_affected_ns": float(c[-1]),
                        "median_ns": float(np.median(y))}
    return CostProfile(coef, ci, {**meta, "fit": report}), report


# -- workloads --------------------------------------------------------------------------------


def _clusters(rng: np.random.Generator, n: int, k: int, reach: float) -> tuple[np.ndarray,
                                                                              np.ndarray]:
    k = max(1, min(k, n))
    gap = VALUE_DOMAIN / k
    reach = min(reach, 0.45 * gap)
    centres = (np.arange(k) + 0.5) * gap
    c = centres[rng.permutation(np.arange(n) % k)]
    return c - rng.uniform(0.0, reach, n), c + rng.uniform(0.0, reach, n)


def load(e: Engine, keys: np.ndarray, values: np.ndarray, times: np.ndarray) -> None:
    """Store S tuples without matching (bulk), then set the clock past them."""
    e.restore_event_columns("S", [f"s{i}" for i in range(keys.shape[0])], keys, values, times,
                            np.arange(e.seq + 1, e.seq + 1 + keys.shape[0], dtype=np.int64))
    e.restore_clock(e.seq + keys.shape[0], int(times.max()) if keys.shape[0] else None)


@dataclass
class Point:
    """One workload: sizes and the knobs that move the per-tuple quantities."""

    kind: str
    subscriptions: int
    s_size: int
    tau: int = 30                  # clusters of the non-hot part; 0: clusters of ~2 (scattered)
    join_rate: float = 100.0       # select/window: mean S tuples per key of an R tuple
    selection_rate: float = 0.1    # select/window: fraction of A ranges a uniform R.A hits
    hot_fraction: float = 0.5      # select/band: share of subscriptions in 5 big clusters
    seed: int = 17

    def label(self) -> str:
        return (f"{self.kind} n={self.subscriptions} |S|={self.s_size} τ={self.tau} "
                f"join={self.join_rate:g} sel={self.selection_rate:g}")


def build(p: Point, options: dict[str, Any] | None = None,
          members: tuple[str, ...] | None = None) -> tuple[Engine, tuple[np.ndarray, ...]]:
    """An ``"auto"`` engine for ``p`` with every member of its kind; returns it and R tuples."""
    rng = np.random.default_rng([p.seed, p.subscriptions, p.s_size, p.tau,
                                 round(p.join_rate), round(p.selection_rate * 1e4)])
    opts = {"alpha": 0.001, **(options or {}),
            "router_members": {p.kind: members or ALL_MEMBERS[p.kind]}}
    e = Engine(strategy="auto", options=opts)
    n = p.subscriptions
    n_hot = round(n * p.hot_fraction)
    if p.kind == "band":
        width = 40.0
        lo1, hi1 = _clusters(rng, n_hot, 5, width)
        lo2, hi2 = _clusters(rng, n - n_hot, max(1, p.tau), width)
        lo = np.concatenate([lo1, lo2]) / VALUE_DOMAIN * 2000 - 1000
        hi = np.concatenate([hi1, hi2]) / VALUE_DOMAIN * 2000 - 1000
        e.subscribe_many([BandJoin(b=Range(a, b)) for a, b in zip(lo.tolist(), hi.tolist(),
                                                                   strict=True)])
        keys = rng.uniform(0, 10_000, p.s_size)
        load(e, keys, rng.uniform(0, VALUE_DOMAIN, p.s_size),
             np.arange(p.s_size, dtype=np.int64))
        r = (rng.uniform(0, 10_000, 400), rng.uniform(0, VALUE_DOMAIN, 400))
        return e, r
    # τ ≤ 0: the rest in clusters of ~2 (scattered subscriptions, as in Fig. 9 and bench router)
    k_rest = max(1, p.tau if p.tau > 0 else (n - n_hot) // 2)
    parts = [_clusters(rng, n_hot, 5, 5.0), _clusters(rng, n - n_hot, k_rest, 5.0)]
    c_lo = np.concatenate([x[0] for x in parts])
    c_hi = np.concatenate([x[1] for x in parts])
    mid = rng.uniform(0.0, VALUE_DOMAIN, n)
    half = p.selection_rate * VALUE_DOMAIN / 2
    a_lo, a_hi = mid - half, mid + half
    if p.kind == "select":
        e.subscribe_many([SelectJoin(a=Range(a, b), c=Range(x, y)) for a, b, x, y in
                          zip(a_lo.tolist(), a_hi.tolist(), c_lo.tolist(), c_hi.tolist(),
                              strict=True)])
    else:
        w = np.abs(np.rint(rng.normal(p.s_size / 4, p.s_size / 8, n))).astype(np.int64)
        e.subscribe_many([WindowJoin(a=Range(a, b), c=Range(x, y), w=int(ww))
                          for a, b, x, y, ww in zip(a_lo.tolist(), a_hi.tolist(),
                                                    c_lo.tolist(), c_hi.tolist(), w.tolist(),
                                                    strict=True)])
    # keys rint(Normal(5000, σ)) as Table I: m′ varies per tuple around the mean join rate
    sigma = max(0.3, p.s_size / (2.0 * math.sqrt(math.pi) * max(p.join_rate, 1e-9)))
    keys = np.rint(rng.normal(5000.0, sigma, p.s_size))
    load(e, keys, rng.uniform(0, VALUE_DOMAIN, p.s_size), np.arange(p.s_size, dtype=np.int64))
    r = (np.rint(rng.normal(5000.0, sigma, 400)), rng.uniform(0, VALUE_DOMAIN, 400))
    return e, r


def grid(kind: str, quick: bool = False) -> list[Point]:
    """The calibration grid: sizes × the knobs that spread m′, n′, τ (§5.4 varies |Q|, |S|)."""
    if quick:
        return [Point(kind, 300, 300, join_rate=10.0), Point(kind, 1000, 1000, tau=100,
                                                              selection_rate=0.01)]
    sizes = (10_000, 50_000, 100_000, 200_000)  # bench router's Fig. 12 reaches 200k
    pts = []
    for n in sizes:
        for m in sizes:
            for jr, sel, tau in ((10.0, 0.01, 300), (300.0, 0.2, 30), (100.0, 0.05, 0)):
                pts.append(Point(kind, n, m, tau=tau, join_rate=jr, selection_rate=sel))
    return pts


def calibrate(kinds: tuple[str, ...], quick: bool, tuples: int,
              log: Any = None) -> tuple[CostProfile, dict[str, Any]]:
    """Run the grid for ``kinds`` and fit; ``log(msg)`` receives progress lines."""
    samples: list[MemberTimes] = []
    points = [p for k in kinds for p in grid(k, quick)]
    t0 = time.perf_counter()
    for i, p in enumerate(points):
        e, (rk, rv) = build(p)
        warm_up(e, p.kind, rk, rv)
        mt = time_members(e, p.kind, "R", rk[:tuples], rv[:tuples])
        samples.append(mt)
        if log is not None:
            med = ", ".join(f"{n} {np.median(mt.ns[:, j]) / 1e3:.1f}"
                            for j, n in enumerate(mt.members))
            log(f"[calibrate] {i + 1}/{len(points)} {p.label()}: median µs {med} "
                f"({time.perf_counter() - t0:.0f}s)")
        del e
    meta = {"grid": [p.label() for p in points], "tuples_per_point": tuples,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    meta["machine"] = machine()
    return fit_profile(samples, meta)


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gb = None
    with contextlib.suppress(ValueError, OSError):
        mem_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": mem_gb,
            "python": platform.python_version(), "platform": platform.platform()}


def table(profile: CostProfile, report: dict[str, Any]) -> str:
    """Table II's layout: strategy, parameter, value and 95% interval (ns)."""
    lines = [f"{'strategy':<16} {'term':<26} {'value (ns)':>12}  95% interval"]
    for name in FEATURES:
        if name not in report:
            continue
        for term, c, (lo, hi) in zip(FEATURES[name], profile.coef[name], profile.ci[name],
                                     strict=True):
            lines.append(f"{name:<16} {term:<26} {c:>12.3f}  [{lo:.3f}, {hi:.3f}]")
        r = report[name]
        lines.append(f"{'':<16} {'(R², samples)':<26} {r['r2']:>12.3f}  {r['samples']}")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kinds", default="select,band,window",
                   help="comma-separated join kinds to profile (default all three)")
    p.add_argument("--tuples", type=int, default=300, help="incoming tuples per grid point")
    p.add_argument("--quick", action="store_true", help="a tiny grid: a smoke run in seconds")
