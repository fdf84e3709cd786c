"""Shard planning for the replay: which shard ("cell") applies which operation. Pure numpy.

Key ranges. The key axis is cut into half-open intervals ``[bounds[i], bounds[i+1])``
(``bounds[0] = −inf``); each interval belongs to a *unit*, and a unit is one cell or, when its
keys are skewed, ``k`` cells. Every R tuple goes to the unit of its key. Every S tuple goes to the
unit of its key and, when the log has band joins, to every unit holding an r.key it could pair
with under the widest band ``[bmin, bmax]`` (``band_reach``). Subscribe and unsubscribe go to
every cell, so every cell holds every subscription.

Exactly once. A pair (r, s) can form only in a cell holding both. r is in the cells of one unit
u only (its key's). For a select or window pair, s.key == r.key, so s is in u too; for a band
pair, r.key ∈ band_reach(s.key), so s is in u too. Within u:

- a unit of one cell holds both once;
- a unit split on R (``split_side = R``) puts r in cell ``crc32(r.id) mod k`` and every S tuple
  of the unit (owned or replicated) in all k cells: the pair is in exactly r's cell;
- a unit split on S puts s in cell ``crc32(s.id) mod k`` and every R tuple of the unit in all k
  cells: the pair is in exactly s's cell.

So each pair is produced — inserted, retracted, snapshotted — by exactly one cell, and replicated
S tuples in other units never pair there: their key is outside that unit, so an equi-join pair
is impossible and a band pair is owned by r's unit. A delete carries the key and id of the tuple
it removes (``ops/replay/log.py``), so it reaches exactly the cells the publish reached.

Skew. A key holding more than ``skew`` × (events / shards) events is a *hot key*: it gets a unit
of its own, ``[h, nextafter(h, +inf))``, split into ``k = ceil(count / (events / shards))``
cells (at most ``shards``) on its busier side; the other side is replicated to its k cells.
Results do not change (above); the work of one key is spread over k cores. The other keys are cut
into units of about equal event counts (weighted quantiles).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np

from hotjoin.ops.replay.log import NO_SIDE, PUBLISH, RESTORE_PUBLISH, SIDE_R, SIDE_S, Ops

_EPS = 2.0**-48


def band_reach(s_keys: np.ndarray, hull: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """For each s.key, an interval [lo, hi] holding every r.key with ``bmin <= s.key − r.key <= bmax``.

    The condition is on the IEEE double difference fl(s − r) (docs/design.md, "Subscriptions"), so the bounds are widened:
    fl(s − r) <= bmax implies s − r <= bmax + 2^-52·|bmax| (the rounding of a difference is
    monotone and at most half an ulp), and computing s − bmax in doubles errs by at most
    2^-53·(|s| + |bmax|); a pad of 2^-48·(|s| + |bmax|) + the smallest subnormal covers both with
    room to spare. Too wide is harmless (the engine decides the predicate); too narrow would lose
    pairs. Unbounded band ends give infinite reach.
    """
    s = np.asarray(s_keys, dtype=np.float64)
    bmin, bmax = hull
    with np.errstate(over="ignore", invalid="ignore"):
        if math.isinf(bmax):
            lo = np.full(s.shape, -math.inf)
        else:
            lo = (s - bmax) - (_EPS * (np.abs(s) + abs(bmax)) + 5e-324)
        if math.isinf(bmin):
            hi = np.full(s.shape, math.inf)
        else:
            hi = (s - bmin) + (_EPS * (np.abs(s) + abs(bmin)) + 5e-324)
    return np.nan_to_num(lo, nan=-math.inf), np.nan_to_num(hi, nan=math.inf)


def id_hash(ids: np.ndarray) -> np.ndarray:
    """crc32 of each id (utf-8): a hash that is the same in every process and every run."""
    return np.fromiter((zlib.crc32(i.encode()) for i in ids), dtype=np.int64, count=len(ids))


@dataclass(frozen=True)
class ShardPlan:
    """Intervals → units → cells (see the module docstring).

    ``bounds``: sorted lower ends, ``bounds[0] = −inf``; ``interval_unit[i]``: unit of interval i;
    ``unit_first[u]``, ``unit_k[u]``: first cell and number of cells of unit u;
    ``unit_split[u]``: the side (SIDE_R / SIDE_S) split by id hash when ``unit_k[u] > 1``;
    ``hull``: the widest band (None without band joins); ``hot_keys``: keys with a unit of their own.
    """

    bounds: np.ndarray
    interval_unit: np.ndarray
    unit_first: np.ndarray
    unit_k: np.ndarray
    unit_split: np.ndarray
    hull: tuple[float, float] | None
    hot_keys: np.ndarray

    @property
    def n_cells(self) -> int:
        return int(self.unit_first[-1] + self.unit_k[-1]) if self.unit_k.shape[0] else 1

    @property
    def n_units(self) -> int:
        return int(self.unit_k.shape[0])

    def interval_of(self, keys: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.bounds, keys, side="right") - 1

    def describe(self) -> dict[str, object]:
        """A JSON-able summary (printed by ``hotjoin replay``)."""
        return {"cells": self.n_cells, "units": self.n_units, "intervals": len(self.bounds),
                "band_hull": None if self.hull is None else list(self.hull),
                "hot_keys": [{"key": float(h), "cells": int(self.unit_k[u]),
                              "split_side": "RS"[int(self.unit_split[u])]}
                             for h, u in zip(self.hot_keys.tolist(),
                                             self.interval_unit[self.interval_of(self.hot_keys)]
                                             .tolist(), strict=True)]}


def single_cell_plan(hull: tuple[float, float] | None = None) -> ShardPlan:
    """One cell for everything (the single-process baseline)."""
    one = np.zeros(1, dtype=np.int64)
    return ShardPlan(np.array([-math.inf]), one, one, np.ones(1, dtype=np.int64), one.copy(),
                     hull, np.empty(0))


def plan_shards(r_keys: np.ndarray, s_keys: np.ndarray, shards: int,
                hull: tuple[float, float] | None, skew: float = 1.0) -> ShardPlan:
    """Cut the key axis into about ``shards`` cells of equal event counts; split hot keys.

    ``r_keys`` / ``s_keys``: the keys of every published R / S tuple. O(n log n).
    """
    if shards < 1:
        raise ValueError(f"shards must be >= 1, got {shards}")
    if skew <= 0:
        raise ValueError(f"skew must be > 0, got {skew}")
    r = np.asarray(r_keys, dtype=np.float64)
    s = np.asarray(s_keys, dtype=np.float64)
    keys = np.concatenate([r, s])
    if shards == 1 or keys.shape[0] == 0:
        return single_cell_plan(hull)
    uniq, inv, counts = np.unique(keys, return_inverse=True, return_counts=True)
    r_counts = np.bincount(inv[: r.shape[0]], minlength=uniq.shape[0])
    total = int(counts.sum())
    target = total / shards
    hot = counts > skew * target
    hot_keys = uniq[hot]
    hot_k = np.minimum(np.ceil(counts[hot] / target).astype(np.int64), shards)
    hot_k = np.maximum(hot_k, 1)
    hot_split = np.where(r_counts[hot] * 2 >= counts[hot], SIDE_R, SIDE_S)

    # the other keys: cut at weighted quantiles into units of ≈ target events
    nk, nc = uniq[~hot], counts[~hot]
    rest = int(nc.sum())
    n_rest = max(1, min(int(round(rest / target)), shards, nk.shape[0])) if rest else 1
    if nk.shape[0]:
        start = np.cumsum(nc) - nc
        nk_unit = np.minimum((start * n_rest // max(rest, 1)).astype(np.int64), n_rest - 1)
        used, nk_unit = np.unique(nk_unit, return_inverse=True)  # no empty units
        n_rest = int(used.shape[0])
    else:
        nk_unit = np.empty(0, dtype=np.int64)

    # interval lower bounds: −inf, where the rest unit changes, each hot key and just above it
    cuts = [np.array([-math.inf])]
    if nk.shape[0] > 1:
        cuts.append(nk[1:][np.diff(nk_unit) != 0])
    if hot_keys.shape[0]:
        above = np.nextafter(hot_keys, math.inf)
        cuts += [hot_keys, above[np.isfinite(above)]]
    bounds = np.unique(np.concatenate(cuts))
    # unit of each interval: the hot key's own, else the rest unit of its first non-hot key (or
    # of the one before, for intervals without keys)
    n_hot = hot_keys.shape[0]
    interval_unit = np.empty(bounds.shape[0], dtype=np.int64)
    if nk.shape[0]:
        j = np.searchsorted(nk, bounds, side="left")
        nxt = np.append(bounds[1:], math.inf)
        inside = (j < nk.shape[0]) & (nk[np.minimum(j, nk.shape[0] - 1)] < nxt)
        interval_unit[:] = np.where(inside, nk_unit[np.minimum(j, nk.shape[0] - 1)],
                                    nk_unit[np.clip(j - 1, 0, nk.shape[0] - 1)])
    else:
        interval_unit[:] = 0
    if n_hot:
        at = np.searchsorted(bounds, hot_keys)
        interval_unit[at] = n_rest + np.arange(n_hot)
    unit_k = np.concatenate([np.ones(n_rest, dtype=np.int64), hot_k])
    unit_split = np.concatenate([np.full(n_rest, SIDE_R, dtype=np.int64), hot_split])
    unit_first = np.concatenate([[0], np.cumsum(unit_k)[:-1]]).astype(np.int64)
    return ShardPlan(bounds, interval_unit, unit_first, unit_k, unit_split, hull, hot_keys)


def route(plan: ShardPlan, ops: Ops) -> list[np.ndarray]:
    """Row indices of ``ops`` for each cell, each in seq order. O(rows × replication)."""
    n_cells = plan.n_cells
    if n_cells == 1:
        return [np.arange(len(ops))]
    is_ev = ops.side != NO_SIDE
    ev_rows = np.flatnonzero(is_ev)
    keys = ops.key[ev_rows]
    sides = ops.side[ev_rows]
    own = plan.interval_unit[plan.interval_of(keys)]
    rows_parts = [ev_rows]
    unit_parts = [own]
    if plan.hull is not None:
        s_rows = np.flatnonzero(sides == SIDE_S)
        lo, hi = band_reach(keys[s_rows], plan.hull)
        i0, i1 = plan.interval_of(lo), plan.interval_of(hi)
        i0 = np.maximum(i0, 0)
        span = i1 - i0 + 1
        total = int(span.sum())
        rep = np.repeat(s_rows, span)
        offs = np.arange(total) - np.repeat(np.cumsum(span) - span, span)
        rows_parts.append(ev_rows[rep])
        unit_parts.append(plan.interval_unit[np.repeat(i0, span) + offs])
    rows = np.concatenate(rows_parts)
    units = np.concatenate(unit_parts)
    n_units = plan.n_units
    pair = np.unique(rows * n_units + units)  # one (row, unit) per unit reached
    rows, units = pair // n_units, pair % n_units
    # cells of each (row, unit): one, or all k, or the id-hash one on the split side
    k = plan.unit_k[units]
    first = plan.unit_first[units]
    split = k > 1
    own_side = split & (ops.side[rows] == plan.unit_split[units])
    cell_parts = [first[~split]]
    row_parts = [rows[~split]]
    if own_side.any():
        h = id_hash(ops.id[rows[own_side]])
        cell_parts.append(first[own_side] + h % k[own_side])
        row_parts.append(rows[own_side])
    allk = split & ~own_side
    if allk.any():
        kk = k[allk]
        tot = int(kk.sum())
        cell_parts.append(np.repeat(first[allk], kk)
                          + (np.arange(tot) - np.repeat(np.cumsum(kk) - kk, kk)))
        row_parts.append(np.repeat(rows[allk], kk))
    cells = np.concatenate(cell_parts)
    rows = np.concatenate(row_parts)
    # subscription changes go everywhere
    sub_rows = np.flatnonzero(~is_ev)
    cells = np.concatenate([cells, np.repeat(np.arange(n_cells), sub_rows.shape[0])])
    rows = np.concatenate([rows, np.tile(sub_rows, n_cells)])
    order = np.lexsort((rows, cells))
    cells, rows = cells[order], rows[order]
    starts = np.searchsorted(cells, np.arange(n_cells + 1))
    return [rows[starts[c]: starts[c + 1]] for c in range(n_cells)]


def published_keys(ops: Ops) -> tuple[np.ndarray, np.ndarray]:
    """(R keys, S keys) of every publish (restored tuples included): the planning sample."""
    pub = (ops.kind == PUBLISH) | (ops.kind == RESTORE_PUBLISH)
    return ops.key[pub & (ops.side == SIDE_R)], ops.key[pub & (ops.side == SIDE_S)]


__all__ = ["ShardPlan", "band_reach", "id_hash", "plan_shards", "published_keys", "route",
           "single_cell_plan"]
