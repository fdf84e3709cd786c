"""Seeded synthetic workload of paper 004 Section 5 (Table I), for benchmarks and tests.

Everything is a pure function of a ``TableIConfig`` (plus explicit arguments): the same config and
arguments always give the same subscriptions and events.  Each generator draws from its own
random stream, ``numpy.random.default_rng([seed, crc32(stream name), *args])``, so e.g. the band
subscriptions do not change when the event generators are called first or with other sizes.

Table I knob by knob (paper 004 §5, Table I):

=====================================  =========================================================
Table I                                ``TableIConfig`` field / function
=====================================  =========================================================
size of each base table (100,000)      ``r_size`` (|R|), ``s_size`` (|S|); ``r_events(cfg, n)``
initial number of queries (100,000)    ``n_subscriptions``
join attribute R.B ~ Uni(0, 10000)     ``key_domain``; ``r_key_sigma=None`` (set it to draw R.B
                                       from Normal(s_key_mu, r_key_sigma) instead: the §5.4
                                       "event join rate" experiments move the incoming keys)
R.A, S.C ~ Uni(0, 1,000,000)           ``value_domain``
S.B ~ Normal(5000, 1000), [0, 10000]   ``s_key_mu``, ``s_key_sigma`` (σ_SB, clipped to
                                       ``key_domain``): smaller σ = higher event join rate for
                                       R.B near the centre; ``expected_join_rate(cfg)``.
                                       With R.B uniform the *mean* rate is |S|/#keys whatever
                                       σ_SB; set ``r_key_sigma`` to raise it.
midpoint of rangeA ~ Normal(μ1, σ1²)   ``a_mid_mu`` (μ1), ``a_mid_sigma`` (σ1): the event
                                       selection rate (fraction of queries whose rangeA holds
                                       an incoming r.A); ``expected_selection_rate(cfg)``
length of rangeA, rangeC ~ N(μ2, σ2²)  ``sel_len_mu`` (μ2), ``sel_len_sigma`` (σ2)
midpoint of rangeC ~ Uni(0, 10000)     ``c_mid_domain``, default (0, 1,000,000): Table I prints
                                       (0, 10000) for rangeB and rangeC together, but C itself is
                                       Uni(0, 1e6), so a literal reading would make every rangeC
                                       select only the bottom 1% of S.C; set it to (0, 10000) to
                                       reproduce the table literally.
midpoint of rangeB ~ Uni(0, 10000)     ``b_mid_domain``, default (−5000, 5000): a band range is
                                       over S.B − R.B (README, paper §3.1), which lies in
                                       [−10000, 10000] and has its mass around 0 (R.B uniform,
                                       S.B centred at 5000), so the table's width 10000 is kept
                                       but centred on 0.  Stabbing numbers depend only on the
                                       width, so Fig. 10's τ values are unaffected.
length of rangeB ~ Normal(μ3, σ3²)     ``b_len_mu`` (μ3), ``b_len_sigma`` (σ3)
integer-valued attributes              ``integer=True``: keys, values and all range bounds are
                                       integers (stored as float); exact band-end hits happen.
=====================================  =========================================================

Negative length draws are reflected (``|x|``), not clipped, so they do not pile up as points.

Section 5.2 figures:

* Fig. 10(i), throughput over 50..500,000 band joins: ``band_ranges_arrays(cfg, n)`` for each n
  with the defaults (μ3 = 1000, σ3 = 240 over a midpoint width of 10000) gives stabbing numbers
  growing from about 10 to about 60 as in the paper (τ ≈ width / shortest local length).
* Fig. 10(ii), throughput over τ at 100,000 queries: ``band_ranges_for_tau(cfg, tau)`` draws the
  ranges around ``tau`` evenly spaced cluster centres so that the greedy stabbing number is
  exactly ``tau`` (needs ``tau <= n`` and, with ``integer=True``, ``tau <= width``).  The
  paper's own method (shrinking μ3, σ3) is also available by setting those fields.
* Fig. 11, maintenance under churn: ``band_churn(cfg, n_updates, insert_fraction=0.5)`` (the
  paper: 100,000 updates on 100,000 queries, each an insert or a delete with probability 0.5);
  ``apply_churn`` replays it on any engine.
* Fig. 9 (hotspots, §5.1, usable for bands too): ``hotspot_ranges_arrays`` puts a fraction of
  the queries into a few big clusters and scatters the rest over a disjoint part of the domain
  in many small groups.
* Output size: ``band_length_for_depth`` picks μ3 so a difference point lies in ``depth`` bands
  on average; ``band_ranges_for_affected`` calibrates the length scale by bisection so that the
  measured mean number of *affected* band joins per incoming R tuple (``mean_affected``) is
  close to a target (with a dense S table almost every band is affected; lower targets need a
  smaller or narrower S).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from hotjoin.matcher.model import (
    ALLEN_RELATIONS,
    ISEQL_JOINS,
    BandJoin,
    Event,
    IntervalJoin,
    Range,
    SelectJoin,
    WindowJoin,
)

__all__ = [
    "IntervalWorkload",
    "TableIConfig",
    "apply_churn",
    "band_churn",
    "band_churn_arrays",
    "band_length_for_depth",
    "band_ranges_arrays",
    "band_ranges_for_affected",
    "band_ranges_for_tau",
    "band_subscriptions",
    "bands_from_arrays",
    "clustered_ranges",
    "events_from_arrays",
    "expected_join_rate",
    "expected_selection_rate",
    "hotspot_ranges_arrays",
    "interval_workload",
    "mean_affected",
    "r_arrays",
    "r_events",
    "s_arrays",
    "s_events",
    "select_ranges_arrays",
    "select_subscriptions",
    "window_arrays",
    "window_subscriptions",
]

FloatArray = np.ndarray
ChurnOp = tuple[Literal["subscribe"], BandJoin] | tuple[Literal["unsubscribe"], int]


@dataclass(frozen=True)
class TableIConfig:
    """Knobs of paper 004 Table I (see the module docstring for the mapping)."""

    n_subscriptions: int = 100_000
    r_size: int = 100_000
    s_size: int = 100_000
    key_domain: tuple[float, float] = (0.0, 10_000.0)
    value_domain: tuple[float, float] = (0.0, 1_000_000.0)
    s_key_mu: float = 5_000.0
    s_key_sigma: float = 1_000.0
    r_key_sigma: float | None = None
    a_mid_mu: float = 500_000.0
    a_mid_sigma: float = 150_000.0
    sel_len_mu: float = 100_000.0
    sel_len_sigma: float = 20_000.0
    c_mid_domain: tuple[float, float] = (0.0, 1_000_000.0)
    b_mid_domain: tuple[float, float] = (-5_000.0, 5_000.0)
    b_len_mu: float = 1_000.0
    b_len_sigma: float = 240.0
    band_selections: bool = False
    integer: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("n_subscriptions", "r_size", "s_size"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        for name in ("key_domain", "value_domain", "c_mid_domain", "b_mid_domain"):
            lo, hi = getattr(self, name)
            if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
                raise ValueError(f"{name} must be a finite (lo, hi) with lo <= hi")
        for name in ("s_key_sigma", "a_mid_sigma", "sel_len_sigma", "b_len_sigma"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")


def _rng(cfg: TableIConfig, stream: str, *extra: int) -> np.random.Generator:
    """Independent, reproducible random stream per (seed, generator, arguments)."""
    return np.random.default_rng([cfg.seed, zlib.crc32(stream.encode()), *extra])


def _round(cfg: TableIConfig, x: FloatArray) -> FloatArray:
    return np.rint(x) if cfg.integer else x


def _bounds(cfg: TableIConfig, mid: FloatArray, length: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Closed range [mid − len/2, mid + len/2], rounded to integers when ``cfg.integer``."""
    length = np.abs(length)
    lo, hi = _round(cfg, mid - length / 2.0), _round(cfg, mid + length / 2.0)
    return lo.astype(np.float64), np.maximum(lo, hi).astype(np.float64)


# ---- events -----------------------------------------------------------------------------------


def _times(
    rng: np.random.Generator, n: int, start_time: int, time_step: int, disorder: int
) -> np.ndarray:
    """``start_time + i*time_step`` minus a jitter in [0, disorder].

    With ``disorder <= lateness + time_step`` no event of one stream is late (docs/design.md).
    """
    t = start_time + np.arange(n, dtype=np.int64) * time_step
    if disorder > 0:
        t = t - rng.integers(0, disorder + 1, size=n, dtype=np.int64)
    return t


def r_arrays(
    cfg: TableIConfig, n: int, start_time: int = 0, time_step: int = 1, disorder: int = 0, batch: int = 0
) -> tuple[FloatArray, FloatArray, np.ndarray]:
    """(keys R.B, values R.A, times) of ``n`` R tuples; ``batch`` selects another draw."""
    rng = _rng(cfg, "r", n, batch)
    k0, k1 = cfg.key_domain
    if cfg.r_key_sigma is None:
        keys = rng.uniform(k0, k1, n) if not cfg.integer else rng.integers(int(k0), int(k1) + 1, n)
    else:
        keys = np.clip(_round(cfg, rng.normal(cfg.s_key_mu, cfg.r_key_sigma, n)), k0, k1)
    v0, v1 = cfg.value_domain
    vals = rng.uniform(v0, v1, n) if not cfg.integer else rng.integers(int(v0), int(v1) + 1, n)
    times = _times(rng, n, start_time, time_step, disorder)
    return keys.astype(np.float64), vals.astype(np.float64), times


def s_arrays(
    cfg: TableIConfig, n: int, start_time: int = 0, time_step: int = 1, disorder: int = 0, batch: int = 0
) -> tuple[FloatArray, FloatArray, np.ndarray]:
    """(keys S.B ~ clipped discretized Normal(s_key_mu, s_key_sigma), values S.C, times)."""
    rng = _rng(cfg, "s", n, batch)
    k0, k1 = cfg.key_domain
    keys = np.clip(_round(cfg, rng.normal(cfg.s_key_mu, cfg.s_key_sigma, n)), k0, k1)
    v0, v1 = cfg.value_domain
    vals = rng.uniform(v0, v1, n) if not cfg.integer else rng.integers(int(v0), int(v1) + 1, n)
    times = _times(rng, n, start_time, time_step, disorder)
    return keys.astype(np.float64), vals.astype(np.float64), times


def events_from_arrays(
    side: Literal["R", "S"],
    keys: FloatArray,
    values: FloatArray,
    times: np.ndarray,
    id_prefix: str | None = None,
    start_index: int = 0,
) -> list[Event]:
    """Build ``Event`` objects with ids ``f"{prefix}{start_index + i}"`` (prefix: side lower)."""
    prefix = side.lower() if id_prefix is None else id_prefix
    return [
        Event(side, f"{prefix}{start_index + i}", k, v, t)
        for i, (k, v, t) in enumerate(zip(keys.tolist(), values.tolist(), times.tolist(), strict=True))
    ]


def r_events(
    cfg: TableIConfig,
    n: int,
    start_time: int = 0,
    time_step: int = 1,
    disorder: int = 0,
    batch: int = 0,
    id_prefix: str = "r",
    start_index: int = 0,
) -> list[Event]:
    """``n`` R events (Table I: R.B, R.A uniform); ids ``r{start_index+i}``."""
    k, v, t = r_arrays(cfg, n, start_time, time_step, disorder, batch)
    return events_from_arrays("R", k, v, t, id_prefix, start_index)


def s_events(
    cfg: TableIConfig,
    n: int,
    start_time: int = 0,
    time_step: int = 1,
    disorder: int = 0,
    batch: int = 0,
    id_prefix: str = "s",
    start_index: int = 0,
) -> list[Event]:
    """``n`` S events (Table I: S.B discretized normal, S.C uniform); ids ``s{start_index+i}``."""
    k, v, t = s_arrays(cfg, n, start_time, time_step, disorder, batch)
    return events_from_arrays("S", k, v, t, id_prefix, start_index)


def _normal_cdf(x: FloatArray) -> FloatArray:
    return 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _s_key_pmf(cfg: TableIConfig, mu: float, sigma: float) -> tuple[FloatArray, FloatArray]:
    """Support and pmf of clip(rint(Normal(mu, sigma)), key_domain) over integer keys."""
    k0, k1 = int(cfg.key_domain[0]), int(cfg.key_domain[1])
    b = np.arange(k0, k1 + 1, dtype=np.float64)
    if sigma == 0:
        p = (b == min(max(round(mu), k0), k1)).astype(np.float64)
        return b, p
    edges = np.concatenate([b - 0.5, [k1 + 0.5]])
    cdf = _normal_cdf((edges - mu) / sigma)
    cdf[0], cdf[-1] = 0.0, 1.0  # clipping moves both tails onto the domain ends
    return b, np.diff(cdf)


def expected_join_rate(cfg: TableIConfig) -> float:
    """E[#S tuples with S.B == r.B] for an incoming R tuple (the "event join rate", integer keys)."""
    b, ps = _s_key_pmf(cfg, cfg.s_key_mu, cfg.s_key_sigma)
    if cfg.r_key_sigma is None:
        pr = np.full(b.shape, 1.0 / b.size)
    else:
        _, pr = _s_key_pmf(cfg, cfg.s_key_mu, cfg.r_key_sigma)
    return float(cfg.s_size * np.dot(pr, ps))


def expected_selection_rate(cfg: TableIConfig, samples: int = 20_000) -> float:
    """Monte-Carlo fraction of select joins whose rangeA holds a uniform incoming r.A (§5.1)."""
    a_lo, a_hi, _, _ = select_ranges_arrays(cfg, min(samples, max(cfg.n_subscriptions, 1)))
    a = _rng(cfg, "selection-rate").uniform(*cfg.value_domain, size=1024)
    inside = np.searchsorted(np.sort(a_lo), a, "right") - np.searchsorted(np.sort(a_hi), a, "left")
    return float(np.mean(inside) / a_lo.size)


# ---- subscriptions ----------------------------------------------------------------------------


def select_ranges_arrays(
    cfg: TableIConfig, n: int | None = None, stream: str = "select"
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(a_lo, a_hi, c_lo, c_hi) of ``n`` (default ``cfg.n_subscriptions``) select joins."""
    n = cfg.n_subscriptions if n is None else n
    rng = _rng(cfg, stream, n)
    a_mid = rng.normal(cfg.a_mid_mu, cfg.a_mid_sigma, n)
    a_len = rng.normal(cfg.sel_len_mu, cfg.sel_len_sigma, n)
    c_mid = rng.uniform(*cfg.c_mid_domain, size=n)
    c_len = rng.normal(cfg.sel_len_mu, cfg.sel_len_sigma, n)
    return (*_bounds(cfg, a_mid, a_len), *_bounds(cfg, c_mid, c_len))


def select_subscriptions(cfg: TableIConfig, n: int | None = None) -> list[SelectJoin]:
    """Select joins of Table I: rangeA midpoint Normal(μ1, σ1), rangeC midpoint uniform."""
    a_lo, a_hi, c_lo, c_hi = (x.tolist() for x in select_ranges_arrays(cfg, n))
    return [
        SelectJoin(a=Range(al, ah), c=Range(cl, ch))
        for al, ah, cl, ch in zip(a_lo, a_hi, c_lo, c_hi, strict=True)
    ]


def window_arrays(
    cfg: TableIConfig, n: int | None = None, w_mu: float = 1_000.0, w_sigma: float = 300.0
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, np.ndarray]:
    """(a_lo, a_hi, c_lo, c_hi, w): select-join ranges plus w = |rint(Normal(w_mu, w_sigma))|."""
    n = cfg.n_subscriptions if n is None else n
    rng = _rng(cfg, "window", n)
    w = np.abs(np.rint(rng.normal(w_mu, w_sigma, n))).astype(np.int64)
    return (*select_ranges_arrays(cfg, n), w)


def window_subscriptions(
    cfg: TableIConfig, n: int | None = None, w_mu: float = 1_000.0, w_sigma: float = 300.0
) -> list[WindowJoin]:
    """Window joins (paper §3.3): Table I select-join ranges and a window w per query."""
    a_lo, a_hi, c_lo, c_hi, w = (x.tolist() for x in window_arrays(cfg, n, w_mu, w_sigma))
    return [
        WindowJoin(a=Range(al, ah), c=Range(cl, ch), w=ww)
        for al, ah, cl, ch, ww in zip(a_lo, a_hi, c_lo, c_hi, w, strict=True)
    ]


def band_ranges_arrays(
    cfg: TableIConfig, n: int | None = None, stream: str = "band"
) -> tuple[FloatArray, FloatArray]:
    """(lo, hi) of ``n`` band ranges: midpoint Uni(b_mid_domain), length Normal(μ3, σ3)."""
    n = cfg.n_subscriptions if n is None else n
    rng = _rng(cfg, stream, n)
    mid = rng.uniform(*cfg.b_mid_domain, size=n)
    length = rng.normal(cfg.b_len_mu, cfg.b_len_sigma, n)
    return _bounds(cfg, mid, length)


def bands_from_arrays(
    cfg: TableIConfig, lo: FloatArray, hi: FloatArray, stream: str = "band-sel"
) -> list[BandJoin]:
    """``BandJoin`` objects for (lo, hi); with ``cfg.band_selections`` also Table I A/C ranges."""
    los, his = lo.tolist(), hi.tolist()
    if not cfg.band_selections:
        return [BandJoin(b=Range(a, b)) for a, b in zip(los, his, strict=True)]
    a_lo, a_hi, c_lo, c_hi = (x.tolist() for x in select_ranges_arrays(cfg, len(los), stream))
    return [
        BandJoin(b=Range(b0, b1), a=Range(al, ah), c=Range(cl, ch))
        for b0, b1, al, ah, cl, ch in zip(los, his, a_lo, a_hi, c_lo, c_hi, strict=True)
    ]


def band_subscriptions(cfg: TableIConfig, n: int | None = None) -> list[BandJoin]:
    """Band joins of Table I (``band_ranges_arrays`` as objects)."""
    return bands_from_arrays(cfg, *band_ranges_arrays(cfg, n))


# ---- stabbing-number and output-size targeting ------------------------------------------------


def clustered_ranges(
    rng: np.random.Generator,
    n: int,
    k: int,
    lo: float,
    hi: float,
    integer: bool = True,
    spread: float = 0.45,
) -> tuple[FloatArray, FloatArray]:
    """``n`` ranges around ``k`` evenly spaced centres in [lo, hi]; stabbing number exactly ``k``.

    Every range contains its centre (so ``k`` points stab all: τ ≤ k) and reaches at most
    ``spread`` (< 0.5) of the centre spacing to either side, so ranges of different clusters are
    disjoint and one range per cluster is a set of ``k`` pairwise disjoint ranges (τ ≥ k).
    Cluster sizes are as equal as possible (``n >= k`` required).
    """
    if n < 1 or not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if not 0.0 <= spread < 0.5:
        raise ValueError("spread must be in [0, 0.5)")
    gap = (hi - lo) / k
    centres = lo + (np.arange(k) + 0.5) * gap
    cluster = rng.permutation(np.arange(n) % k)
    if integer:
        centres = np.floor(centres)
        min_gap = float(np.min(np.diff(centres))) if k > 1 else 2.0 * max(gap, 1.0)
        if min_gap < 1:
            raise ValueError(f"integer ranges: {k} distinct centres do not fit in [{lo}, {hi}]")
        # integer reach r with 2r < min_gap keeps neighbouring clusters disjoint
        reach = min(math.floor(spread * min_gap), math.ceil(min_gap / 2) - 1)
        left = rng.integers(0, reach + 1, n).astype(np.float64)
        right = rng.integers(0, reach + 1, n).astype(np.float64)
    else:
        left = rng.uniform(0.0, spread * gap, n)
        right = rng.uniform(0.0, spread * gap, n)
    c = centres[cluster]
    return (c - left).astype(np.float64), (c + right).astype(np.float64)


def band_ranges_for_tau(cfg: TableIConfig, tau: int, n: int | None = None) -> tuple[FloatArray, FloatArray]:
    """Fig. 10(ii): ``n`` band ranges over ``b_mid_domain`` whose stabbing number is ``tau``."""
    n = cfg.n_subscriptions if n is None else n
    return clustered_ranges(_rng(cfg, "band-tau", n, tau), n, tau, *cfg.b_mid_domain, cfg.integer)


def hotspot_ranges_arrays(
    cfg: TableIConfig,
    hot_fraction: float,
    n_hot: int = 5,
    n_scattered_groups: int | None = None,
    n: int | None = None,
) -> tuple[FloatArray, FloatArray, np.ndarray]:
    """Fig. 9-style ranges: (lo, hi, is_hot).

    ``round(n * hot_fraction)`` ranges form ``n_hot`` big clusters over the left half of
    ``b_mid_domain``; the rest form ``n_scattered_groups`` (default: one per ~2 ranges, at most
    the integer width) small clusters over the disjoint right half.  τ = n_hot + scattered groups.
    """
    n = cfg.n_subscriptions if n is None else n
    if not 0.0 <= hot_fraction <= 1.0:
        raise ValueError("hot_fraction must be in [0, 1]")
    rng = _rng(cfg, "hotspot", n, n_hot, round(hot_fraction * 1e6))
    n_h = round(n * hot_fraction)
    n_s = n - n_h
    m0, m1 = cfg.b_mid_domain
    mid = (m0 + m1) / 2.0
    lo = np.empty(0)
    hi = np.empty(0)
    if n_h:
        lo, hi = clustered_ranges(rng, n_h, min(n_hot, n_h), m0, mid, cfg.integer)
    if n_s:
        g = n_scattered_groups if n_scattered_groups is not None else max(1, n_s // 2)
        if cfg.integer:
            g = min(g, int(m1 - mid) - 1)
        slo, shi = clustered_ranges(rng, n_s, max(1, min(g, n_s)), mid + 1.0, m1, cfg.integer)
        lo, hi = np.concatenate([lo, slo]), np.concatenate([hi, shi])
    hot = np.arange(n) < n_h
    order = rng.permutation(n)
    return lo[order], hi[order], hot[order]


def band_length_for_depth(cfg: TableIConfig, depth: float, n: int | None = None) -> float:
    """Mean band length μ3 so an interior difference point lies in ≈ ``depth`` bands (n·μ3/width)."""
    n = cfg.n_subscriptions if n is None else n
    width = cfg.b_mid_domain[1] - cfg.b_mid_domain[0]
    return depth * width / max(n, 1)


def mean_affected(lo: FloatArray, hi: FloatArray, r_keys: FloatArray, s_keys: FloatArray) -> float:
    """Mean number of bands with at least one S partner (s − r ∈ [lo, hi]) per incoming r.

    Uses ``r + lo <= s <= r + hi`` on the sorted S keys, which equals the IEEE-subtraction
    predicate for the integer-valued workload (exact in doubles); an estimate otherwise.
    """
    s = np.sort(np.asarray(s_keys, dtype=np.float64))
    total = 0
    for r in np.asarray(r_keys, dtype=np.float64):
        first = np.searchsorted(s, r + lo, side="left")
        last = np.searchsorted(s, r + hi, side="right")
        total += int(np.count_nonzero(last > first))
    return total / max(len(r_keys), 1)


def band_ranges_for_affected(
    cfg: TableIConfig,
    target: float,
    n: int | None = None,
    samples: int = 32,
    iterations: int = 24,
    rel_tol: float = 0.01,
) -> tuple[FloatArray, FloatArray, float]:
    """(lo, hi, achieved): band ranges whose mean affected count per R tuple is ≈ ``target``.

    Midpoints as Table I; lengths ``scale·|1 + cv·z|`` with cv = σ3/μ3, ``scale`` found by
    bisection against ``mean_affected`` over ``samples`` R keys and an S table of
    ``cfg.s_size`` keys, stopping within ``rel_tol`` of the target.  If the target is out of
    reach the closest end is returned.
    """
    n = cfg.n_subscriptions if n is None else n
    rng = _rng(cfg, "band-affected", n)
    mid = rng.uniform(*cfg.b_mid_domain, size=n)
    z = rng.standard_normal(n)
    cv = cfg.b_len_sigma / cfg.b_len_mu if cfg.b_len_mu else 0.0
    r_keys = r_arrays(cfg, samples, batch=7)[0]
    s_keys = s_arrays(cfg, cfg.s_size)[0]

    def make(scale: float) -> tuple[FloatArray, FloatArray, float]:
        lo, hi = _bounds(cfg, mid, scale * (1.0 + cv * z))
        return lo, hi, mean_affected(lo, hi, r_keys, s_keys)

    width = cfg.b_mid_domain[1] - cfg.b_mid_domain[0]
    a, b = 0.0, 2.0 * (width + cfg.key_domain[1] - cfg.key_domain[0])
    best = make(a)
    if best[2] >= target:
        return best
    top = make(b)
    if top[2] <= target:
        return top
    for _ in range(iterations):
        m = (a + b) / 2.0
        cur = make(m)
        if abs(cur[2] - target) < abs(best[2] - target):
            best = cur
        if abs(cur[2] - target) <= rel_tol * target:
            break
        if cur[2] < target:
            a = m
        else:
            b = m
    return best


# ---- churn (Fig. 11) ---------------------------------------------------------------------------


def band_churn_arrays(
    cfg: TableIConfig, n_updates: int, insert_fraction: float = 0.5, n_initial: int | None = None
) -> tuple[np.ndarray, np.ndarray, FloatArray, FloatArray]:
    """(is_insert, index, lo, hi): row i inserts [lo[i], hi[i]] or deletes ``live[index[i]]``.

    ``live`` starts as the ``n_initial`` (default ``cfg.n_subscriptions``) initial subscriptions in
    order; an insert appends, a delete of position j swap-removes (``live[j] = live[-1]``, pop) —
    see ``apply_churn``.  A delete drawn while ``live`` is empty becomes an insert.  ``lo``/``hi``
    are NaN on delete rows.
    """
    if not 0.0 <= insert_fraction <= 1.0:
        raise ValueError("insert_fraction must be in [0, 1]")
    live = cfg.n_subscriptions if n_initial is None else n_initial
    rng = _rng(cfg, "churn", n_updates, live, round(insert_fraction * 1e6))
    coin = rng.random(n_updates) < insert_fraction
    u = rng.random(n_updates)
    is_insert = np.empty(n_updates, dtype=bool)
    index = np.full(n_updates, -1, dtype=np.int64)
    for i in range(n_updates):
        ins = bool(coin[i]) or live == 0
        is_insert[i] = ins
        if ins:
            live += 1
        else:
            index[i] = min(int(u[i] * live), live - 1)
            live -= 1
    blo, bhi = band_ranges_arrays(cfg, n_updates, stream="churn-band")
    lo = np.where(is_insert, blo, np.nan)
    hi = np.where(is_insert, bhi, np.nan)
    return is_insert, index, lo, hi


def band_churn(
    cfg: TableIConfig, n_updates: int, insert_fraction: float = 0.5, n_initial: int | None = None
) -> list[ChurnOp]:
    """Fig. 11 churn as ``("subscribe", BandJoin)`` / ``("unsubscribe", index-into-live)`` ops."""
    is_insert, index, lo, hi = band_churn_arrays(cfg, n_updates, insert_fraction, n_initial)
    out: list[ChurnOp] = []
    for ins, j, a, b in zip(is_insert.tolist(), index.tolist(), lo.tolist(), hi.tolist(), strict=True):
        out.append(("subscribe", BandJoin(b=Range(a, b))) if ins else ("unsubscribe", j))
    return out


class _Subscriber(Protocol):
    def subscribe(self, sub: BandJoin, snapshot: bool = ...) -> int: ...

    def unsubscribe(self, sid: int) -> None: ...


def apply_churn(
    engine: _Subscriber,
    ops: list[ChurnOp],
    live: list[int],
    on_op: Callable[[str, int], None] | None = None,
) -> list[int]:
    """Replay ``ops`` on ``engine``; ``live`` (engine ids, initial set in order) is updated in place.

    Implements the swap-remove convention of ``band_churn_arrays``; returns ``live``.
    """
    for kind, arg in ops:
        if kind == "subscribe":
            sid = engine.subscribe(arg)  # type: ignore[arg-type]
            live.append(sid)
        else:
            j = int(arg)  # type: ignore[arg-type]
            sid = live[j]
            live[j] = live[-1]
            live.pop()
            engine.unsubscribe(sid)
        if on_op is not None:
            on_op(kind, sid)
    return live


CENTRE_SPAN = (-5000.0, 5000.0)
"""Where the band benchmarks and the load test put the centres of clustered bands."""


def clustered_bands(n: int, tau: int, half_width: float, seed: int,
                    stream: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` ranges in ``tau`` clusters (the stabbing number τ of §2 is ``tau``): each contains its cluster centre, reaches ≤ half_width."""
    rng = np.random.default_rng([seed, 11, n, tau, stream])
    k = min(tau, n)
    centres = CENTRE_SPAN[0] + (np.arange(k) + 0.5) * (CENTRE_SPAN[1] - CENTRE_SPAN[0]) / k
    c = centres[rng.permutation(np.arange(n) % k)]
    lo = c - rng.uniform(0.0, half_width, n)
    hi = c + rng.uniform(0.0, half_width, n)
    return lo, hi


# -- interval joins --------------------------------------------------------------------------------


@dataclass(frozen=True)
class IntervalWorkload:
    """An interval-join workload (``interval_workload``): the subscriptions, and the stored
    intervals as columns (``sides``, ``ids``, ``keys``, ``values``, ``times``, ``ends``) in
    start-time order, as ``Engine.publish_batch`` takes them."""

    subscriptions: list[IntervalJoin]
    sides: np.ndarray
    ids: list[str]
    keys: FloatArray
    values: FloatArray
    times: np.ndarray
    ends: np.ndarray


def interval_workload(n_subs: int = 100_000, n_events: int = 100_000, seed: int = 0,
                      key_domain: int = 1_000, mean_length: float = 50.0,
                      tail: float = 1.5, time_step: int = 10,
                      max_param: int = 200, selectivity: float = 0.05) -> IntervalWorkload:
    """The interval-join benchmark's workload: ``n_subs`` subscriptions mixing every Allen
    relation and ISEQL join (δ and ε uniform in [0, ``max_param``], ``before`` δ ≥ 1) with key
    conditions ``B = [k, k + w]`` (k ∈ {−2, …, 0}, w ∈ {0, …, 2}: a few partner keys each) and
    a selection on r's value A of width ``selectivity`` × 100 (each subscription sees that
    fraction of the R tuples; one in two also selects s's value C the same way: without them
    every subscription would relate every key, and an unbounded relation such as ``before``
    would pair each tuple with its key's whole history); and ``n_events`` stored intervals
    over integer keys
    in [0, ``key_domain``), values in [0, 100), start times ``time_step`` apart (both sides
    interleaved) and heavy-tailed lengths (Pareto with shape ``tail``, mean about
    ``mean_length``, capped at 1,000 × the mean). Deterministic per seed; O(n).

    >>> w = interval_workload(50, 40, seed=1)
    >>> len(w.subscriptions), w.times.shape[0], bool((w.ends >= w.times).all())
    (50, 40, True)
    """
    rng = np.random.default_rng([seed, 4242])
    names = [("allen", n) for n in ALLEN_RELATIONS] + [("iseql", n) for n in ISEQL_JOINS]
    pick = rng.integers(0, len(names), n_subs)
    k0 = rng.integers(-2, 1, n_subs)
    kw = rng.integers(0, 3, n_subs)
    d = rng.integers(0, max_param + 1, n_subs)
    e = rng.integers(0, max_param + 1, n_subs)
    sel = rng.integers(0, 2, n_subs)
    width = 100.0 * selectivity
    lo = rng.uniform(0, 100.0 - width, n_subs)
    lo_c = rng.uniform(0, 100.0 - width, n_subs)
    subs: list[IntervalJoin] = []
    for i in range(n_subs):
        family, name = names[int(pick[i])]
        b = Range(float(k0[i]), float(k0[i] + kw[i]))
        a = Range(float(lo[i]), float(lo[i]) + width)
        c = Range(float(lo_c[i]), float(lo_c[i]) + width) if sel[i] else Range()
        if family == "allen":
            subs.append(IntervalJoin.allen(name, b=b, a=a, c=c))
        else:
            delta = max(int(d[i]), 1) if name == "before" else int(d[i])
            subs.append(IntervalJoin.iseql(name, delta=delta, eps=int(e[i]), b=b, a=a, c=c))
    sides = rng.integers(0, 2, n_events).astype(np.int8)
    keys = rng.integers(0, key_domain, n_events).astype(np.float64)
    values = rng.uniform(0, 100, n_events)
    times = np.arange(n_events, dtype=np.int64) * time_step
    scale = mean_length * (tail - 1.0) / tail if tail > 1.0 else mean_length
    lengths = np.minimum(scale * (1.0 + rng.pareto(tail, n_events)), 1000.0 * mean_length)
    ends = times + lengths.astype(np.int64)
    ids = [f"{'RS'[int(s)]}{j}" for j, s in enumerate(sides.tolist())]
    return IntervalWorkload(subs, sides, ids, keys, values, times, ends)
