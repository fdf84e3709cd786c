"""Generated workloads for ``hotjoin demo`` and ``hotjoin bench serve``, as wire messages.

Paper 004 Table I (``matcher.workload``): stored S tuples with S.B ~ Normal(5000, 1000) on
[0, 10000], incoming R tuples with R.B ~ Uni(0, 10000). Band joins use the clustered bands of
``ops/bench/band.py`` (τ clusters of narrow ranges around offsets spread over [−5000, 5000])
with a half-width calibrated so that an incoming R tuple affects about ``affected``
subscriptions: a moderate, controllable output instead of every band matching every tuple.
Select joins (``matcher.workload.select_ranges_arrays``) use Table I's A/C ranges (midpoints
Normal(500,000, 150,000) and Uni(0, 1,000,000), lengths Normal(100,000, 20,000)) over integer keys
(r.key == s.key): R.B ~ Uni(0, K), S.B ~ Normal(K/2, K/10) clipped to [0, K], with the key domain K
chosen so that an incoming R tuple forms about ``affected`` pairs in expectation
(``select_key_domain``): E[pairs] = Σ_q P(r.A ∈ A_q)·P(s.C ∈ C_q) · |S| / (K + 1).

Everything is built directly as protobuf messages (``SubscriptionSpec``, ``Event``) so that
hundreds of thousands of them cost seconds, not minutes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from hotjoin.proto import hotjoin_pb2 as pb

KINDS = ("band", "select", "window")
BAND_CLUSTERS = 40


@dataclass(frozen=True)
class Workload:
    """Sizes and shape of a generated workload (all deterministic in ``seed``)."""

    kind: str = "band"
    subscriptions: int = 20_000
    stored: int = 10_000
    affected: float = 30.0
    delivery: str = "pairs"
    subscriber: str = "demo"
    seed: int = 1
    # window joins: the window w of every subscription (event-time units, milliseconds in bench
    # serve); the key/value shape is the select join's
    window: int = 600_000

    def table(self) -> object:
        from hotjoin.matcher.workload import TableIConfig

        if self.kind in ("select", "window"):
            k = select_key_domain(self)
            return TableIConfig(n_subscriptions=self.subscriptions, s_size=self.stored, integer=True,
                                seed=self.seed, key_domain=(0.0, k), s_key_mu=k / 2,
                                s_key_sigma=k / 10)
        return TableIConfig(n_subscriptions=self.subscriptions, s_size=self.stored,
                            integer=self.kind != "band", seed=self.seed)


def _coverage(lo: np.ndarray, hi: np.ndarray, v0: float, v1: float) -> np.ndarray:
    """Fraction of the value domain [v0, v1] (uniform values) inside each range [lo, hi]."""
    return np.clip(np.minimum(hi, v1) - np.maximum(lo, v0), 0.0, None) / max(v1 - v0, 1e-300)


@functools.lru_cache(maxsize=8)
def select_key_domain(w: Workload) -> float:
    """Key domain K (integer keys 0..K) giving ≈ ``w.affected`` pairs per incoming R tuple.

    R keys are uniform on 0..K, so an R tuple has |S|/(K+1) partners in expectation, each passing
    subscription q's C range with probability P(s.C ∈ C_q); the R tuple passes A_q with P(r.A ∈ A_q).
    """
    from hotjoin.matcher.workload import TableIConfig, select_ranges_arrays

    base = TableIConfig(n_subscriptions=w.subscriptions, s_size=w.stored, integer=True, seed=w.seed)
    a_lo, a_hi, c_lo, c_hi = select_ranges_arrays(base)
    v0, v1 = base.value_domain
    weight = float(np.sum(_coverage(a_lo, a_hi, v0, v1) * _coverage(c_lo, c_hi, v0, v1)))
    return float(max(1.0, round(w.stored * weight / max(w.affected, 1e-9) - 1)))


def pick_strategy(kind: str = "band") -> dict[str, str]:
    """The topic strategy to use: ``{}`` ("auto") when the engine's default runs, else a fallback.

    Band joins fall back to BJ-SSI when the default router cannot run.
    """
    try:
        from hotjoin.matcher import BandJoin, Engine, Event, Range

        e = Engine()
        e.subscribe(BandJoin(b=Range(-1, 1)))
        e.publish_affected(Event("S", "s", 0.0, 0.0, 0))
        e.publish_affected(Event("R", "r", 0.5, 0.0, 0))
        return {}
    except Exception:
        return {"band": "BJ-SSI"} if kind == "band" else {}


@functools.lru_cache(maxsize=8)
def band_half_width(w: Workload, samples: int = 256, calibration_size: int = 10_000) -> float:
    """Half-width of the clustered bands giving ≈ ``w.affected`` affected subscriptions per R.

    Geometric bisection (within 10 %) against ``mean_affected`` on at most ``calibration_size``
    subscriptions: the affected count scales linearly with the number of bands of one shape.
    """
    from hotjoin.matcher.workload import clustered_bands, mean_affected, r_arrays, s_arrays

    cfg = w.table()
    n = min(w.subscriptions, calibration_size)
    target = w.affected * n / max(w.subscriptions, 1)
    s_keys = s_arrays(cfg, w.stored)[0]  # type: ignore[arg-type]
    r_keys = r_arrays(cfg, samples, batch=99)[0]  # type: ignore[arg-type]
    lo_w, hi_w, best = 1e-9, 200.0, (200.0, float("inf"))
    for _ in range(20):
        mid = math.sqrt(lo_w * hi_w)
        lo, hi = clustered_bands(n, BAND_CLUSTERS, mid, w.seed)
        got = mean_affected(lo, hi, r_keys, s_keys)
        if abs(got - target) < abs(best[1] - target):
            best = (mid, got)
        if abs(got - target) <= 0.1 * target:
            break
        lo_w, hi_w = (mid, hi_w) if got < target else (lo_w, mid)
    return best[0]


def subscription_specs(w: Workload, start: int = 0, stop: int | None = None) -> list[pb.SubscriptionSpec]:
    """Specs ``start..stop`` of the workload's subscriptions (kind, delivery and subscriber set)."""
    stop = w.subscriptions if stop is None else stop
    mode = pb.AFFECTED if w.delivery.lower() == "affected" else pb.PAIRS
    out: list[pb.SubscriptionSpec] = []
    if w.kind == "band":
        from hotjoin.matcher.workload import clustered_bands

        lo, hi = clustered_bands(w.subscriptions, BAND_CLUSTERS, band_half_width(w), w.seed)
        for a, b in zip(lo[start:stop].tolist(), hi[start:stop].tolist(), strict=True):
            s = pb.SubscriptionSpec(delivery=mode, subscriber=w.subscriber)
            s.band.b.lo, s.band.b.hi = a, b
            out.append(s)
    elif w.kind in ("select", "window"):
        from hotjoin.matcher.workload import select_ranges_arrays

        cols = [x[start:stop].tolist() for x in select_ranges_arrays(w.table())]  # type: ignore[arg-type]
        for al, ah, cl, ch in zip(*cols, strict=True):
            s = pb.SubscriptionSpec(delivery=mode, subscriber=w.subscriber)
            body = s.select if w.kind == "select" else s.window
            body.a.lo, body.a.hi = al, ah
            body.c.lo, body.c.hi = cl, ch
            if w.kind == "window":
                s.window.w = w.window
            out.append(s)
    else:
        raise ValueError(f"unknown kind {w.kind!r}; choose one of {', '.join(KINDS)}")
    return out


def _events(side: str, keys: np.ndarray, values: np.ndarray, times: np.ndarray,
            prefix: str, start: int) -> list[pb.Event]:
    pside = pb.SIDE_R if side == "R" else pb.SIDE_S
    return [pb.Event(side=pside, id=f"{prefix}{start + i}", key=k, value=v, time=t)
            for i, (k, v, t) in enumerate(zip(keys.tolist(), values.tolist(), times.tolist(), strict=True))]


def stored_events(w: Workload, batch: int = 1000) -> Iterator[list[pb.Event]]:
    """The ``w.stored`` S tuples (time 0), in batches."""
    from hotjoin.matcher.workload import s_arrays

    k, v, _ = s_arrays(w.table(), w.stored)  # type: ignore[arg-type]
    t = np.zeros(w.stored, dtype=np.int64)
    for i in range(0, w.stored, batch):
        yield _events("S", k[i : i + batch], v[i : i + batch], t[i : i + batch], "s", i)


def incoming_events(w: Workload, n: int, stream: int = 0, batch: int = 1000) -> Iterator[list[pb.Event]]:
    """``n`` R tuples of publisher ``stream`` (ids ``r<stream>-<i>``, time 1), in batches."""
    from hotjoin.matcher.workload import r_arrays

    k, v, _ = r_arrays(w.table(), n, batch=1000 + stream)  # type: ignore[arg-type]
    t = np.ones(n, dtype=np.int64)
    for i in range(0, n, batch):
        yield _events("R", k[i : i + batch], v[i : i + batch], t[i : i + batch], f"r{stream}-", i)


def _columns(side: str, keys: np.ndarray, values: np.ndarray, times: np.ndarray, prefix: str,
             start: int) -> pb.EventColumns:
    """One columnar batch (``PublishRequest.columns``); the ids are the only per-event objects."""
    n = len(keys)
    return pb.EventColumns(sides=bytes([pb.SIDE_R if side == "R" else pb.SIDE_S]) * n,
                           ids=[f"{prefix}{start + i}" for i in range(n)], keys=keys.tolist(),
                           values=values.tolist(), times=times.tolist())


def stored_columns(w: Workload, batch: int = 1000, time: int = 0) -> Iterator[pb.EventColumns]:
    """``stored_events`` as columnar batches, every tuple at event time ``time``."""
    from hotjoin.matcher.workload import s_arrays

    k, v, _ = s_arrays(w.table(), w.stored)  # type: ignore[arg-type]
    t = np.full(w.stored, time, dtype=np.int64)
    for i in range(0, w.stored, batch):
        yield _columns("S", k[i : i + batch], v[i : i + batch], t[i : i + batch], "s", i)


def incoming_columns(w: Workload, n: int, stream: int = 0, batch: int = 1000) -> Iterator[pb.EventColumns]:
    """``incoming_events`` as columnar batches (time 1; a window bench overwrites the times at
    send time)."""
    from hotjoin.matcher.workload import r_arrays

    k, v, _ = r_arrays(w.table(), n, batch=1000 + stream)  # type: ignore[arg-type]
    t = np.ones(n, dtype=np.int64)
    for i in range(0, n, batch):
        yield _columns("R", k[i : i + batch], v[i : i + batch], t[i : i + batch], f"r{stream}-", i)
