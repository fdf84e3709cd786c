"""Subscription parameters as numpy columns indexed by subscription id, plus per-event scratch.

Kernels read these columns instead of per-subscription Python objects (guide: no
per-subscription objects on the hot path). Unbounded range ends are stored as ``±inf``; a
subscription id is never reused, so an id indexes the same row for the engine's lifetime.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from hotjoin.matcher.model import (
    ENDPOINTS,
    BandJoin,
    IntervalJoin,
    SelectJoin,
    Subscription,
    WindowJoin,
)

KIND_CODE = {"select": 0, "band": 1, "window": 2, "interval": 3}

INTERVAL_COLUMNS = tuple(f"{e}_{end}" for e in ENDPOINTS for end in ("lo", "hi"))
"""The interval joins' endpoint ranges in the state's subscription columns (``ss_lo, ss_hi,
se_lo, se_hi, es_lo, es_hi, ee_lo, ee_hi``; float64, ±inf where unbounded, 0 for the other
kinds). A state without them (written before interval joins existed) holds none."""
ENDPOINT_CLIP = 2**62
"""Endpoint bounds are kept as int64 clipped to ±2^62 (exact as a double), unbounded ends at the
clip: every endpoint difference of tuples within ±2^61 lies within ±2^62, so a bound at the
clip decides as an unbounded end and no decision changes."""


def endpoint_rows(cols: Mapping[str, Any], n: int) -> np.ndarray:
    """The int64 endpoint rows ``(n, 8)`` (columns :data:`INTERVAL_COLUMNS`) of state columns
    (float, ±inf unbounded), clipped at :data:`ENDPOINT_CLIP`; zeros where they are absent."""
    out = np.zeros((n, 8), dtype=np.int64)
    if INTERVAL_COLUMNS[0] not in cols:
        return out
    for j, name in enumerate(INTERVAL_COLUMNS):
        x = np.asarray(cols[name], dtype=np.float64)
        out[:, j] = np.clip(x, -ENDPOINT_CLIP, ENDPOINT_CLIP).astype(np.int64)
    return out

_FLOAT_COLS = ("a_lo", "a_hi", "b_lo", "b_hi", "c_lo", "c_hi")
_INT_COLS = ("w", "reg")
_BOOL_COLS = ("snap", "active", "selective")  # selective: bounds A or C


def bounds_of(ranges: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` columns of ``Range`` objects, ``±inf`` where a bound is absent."""
    lo = np.array([r.lo for r in ranges], dtype=object)
    hi = np.array([r.hi for r in ranges], dtype=object)
    return (np.where(lo == None, -np.inf, lo).astype(np.float64),  # noqa: E711
            np.where(hi == None, np.inf, hi).astype(np.float64))  # noqa: E711


class SubArrays(NamedTuple):
    """What a kernel reads and writes of the subscriptions: the 64-byte record rows ``rec``
    and the per-operation dedupe ``mark`` and pair count ``acc`` columns."""

    rec: np.ndarray
    mark: np.ndarray
    acc: np.ndarray


class SubscriptionColumns:
    """Growable columns ``a_lo … c_hi, w, reg (registration seq), snap, active, kind``."""

    def __init__(self, capacity: int = 1024) -> None:
        self.capacity = 0
        self.n = 0  # ids handed out so far: 0 .. n-1
        for name in _FLOAT_COLS:
            setattr(self, name, np.zeros(0, dtype=np.float64))
        for name in _INT_COLS:
            setattr(self, name, np.zeros(0, dtype=np.int64))
        for name in _BOOL_COLS:
            setattr(self, name, np.zeros(0, dtype=np.bool_))
        self.kind = np.zeros(0, dtype=np.int8)
        # per-event scratch used by the kernels (IDENTIFY/COUNT dedupe and counters)
        self.mark = np.zeros(0, dtype=np.int64)
        self.acc = np.zeros(0, dtype=np.int64)
        # band subscriptions' parameters as one 64-byte row each (see band_kernels)
        # select and window joins fill the same row layout too (select/window kernels), with the
        # B columns holding the window [0, w] (w = 0 for a select join)
        self.rec = np.zeros((0, 8), dtype=np.float64)
        # interval joins' endpoint ranges, one int64 row each (INTERVAL_COLUMNS, clipped):
        # allocated on the first interval join, so the other kinds pay nothing for it
        self.irec = np.zeros((0, 8), dtype=np.int64)
        self.reserve(capacity)

    # declared for type checkers; set in __init__ via setattr
    a_lo: np.ndarray
    a_hi: np.ndarray
    b_lo: np.ndarray
    b_hi: np.ndarray
    c_lo: np.ndarray
    c_hi: np.ndarray
    w: np.ndarray
    reg: np.ndarray
    snap: np.ndarray
    active: np.ndarray
    selective: np.ndarray

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The columns as a kernel bundle: :class:`SubArrays`' fields as a plain tuple (see
        ``matcher.joins.protocol``: kernels name it back)."""
        return (self.rec, self.mark, self.acc)

    def reserve(self, capacity: int) -> None:
        """Make room for ids below ``capacity`` (amortised doubling)."""
        if capacity <= self.capacity:
            return
        cap = max(capacity, 2 * self.capacity)
        for name in (*_FLOAT_COLS, *_INT_COLS, *_BOOL_COLS, "kind", "mark", "acc"):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[: old.shape[0]] = old
            setattr(self, name, new)
        self.mark[self.capacity:] = -1
        rec = np.zeros((cap, 8), dtype=np.float64)
        rec[: self.rec.shape[0]] = self.rec
        self.rec = rec
        if self.irec.shape[0]:
            self._grow_irec(cap)
        self.capacity = cap

    def _grow_irec(self, cap: int) -> None:
        irec = np.zeros((cap, 8), dtype=np.int64)
        irec[: self.irec.shape[0]] = self.irec
        self.irec = irec

    def enable_intervals(self) -> None:
        """Keep the endpoint rows ``irec`` from now on (the first interval join)."""
        if self.irec.shape[0] < self.capacity:
            self._grow_irec(self.capacity)

    def add(self, sub: Subscription, reg: int, snap: bool) -> int:
        """Store one subscription's parameters; returns its new id."""
        sid = self.n
        self.reserve(sid + 1)
        self.n += 1
        self._fill(sid, sub, reg, snap)
        return sid

    def _fill(self, sid: int, sub: Subscription, reg: int, snap: bool) -> None:
        self.a_lo[sid], self.a_hi[sid] = sub.a.lo_f, sub.a.hi_f
        self.c_lo[sid], self.c_hi[sid] = sub.c.lo_f, sub.c.hi_f
        if isinstance(sub, BandJoin):
            self.b_lo[sid], self.b_hi[sid] = sub.b.lo_f, sub.b.hi_f
            self.rec[sid] = (sub.b.lo_f, sub.b.hi_f, sub.a.lo_f, sub.a.hi_f, sub.c.lo_f,
                             sub.c.hi_f, float(reg), 1.0 if snap else 0.0)
        elif isinstance(sub, WindowJoin):
            self.w[sid] = sub.w
        elif isinstance(sub, IntervalJoin):
            self.b_lo[sid], self.b_hi[sid] = sub.b.lo_f, sub.b.hi_f
            self.rec[sid] = (sub.b.lo_f, sub.b.hi_f, sub.a.lo_f, sub.a.hi_f, sub.c.lo_f,
                             sub.c.hi_f, float(reg), 1.0 if snap else 0.0)
            self.enable_intervals()
            self.irec[sid] = endpoint_rows(interval_columns([sub]), 1)[0]
        else:
            assert isinstance(sub, SelectJoin)
        if not isinstance(sub, (BandJoin, IntervalJoin)):
            self.rec[sid] = (0.0, float(sub.w) if isinstance(sub, WindowJoin) else 0.0,
                             sub.a.lo_f, sub.a.hi_f, sub.c.lo_f, sub.c.hi_f, float(reg),
                             1.0 if snap else 0.0)
        self.selective[sid] = not (sub.a.unbounded and sub.c.unbounded)
        self.kind[sid] = KIND_CODE[sub.kind]
        self.reg[sid] = reg
        self.snap[sid] = snap
        self.active[sid] = True

    def add_many(self, subs: list[Subscription], first_reg: int, snap: bool) -> np.ndarray:
        """Store many subscriptions; subscription i registers at ``first_reg + i``. The
        parameters are gathered into columns once and stored as ``restore_columns`` stores a
        checkpoint's (no per-subscription row writes: ~1 µs per subscription instead of ~5)."""
        k = len(subs)
        first = self.n
        sids = np.arange(first, first + k, dtype=np.int64)
        if k == 0:
            return sids

        kind = np.fromiter((KIND_CODE[sub.kind] for sub in subs), dtype=np.int8, count=k)
        cols: dict[str, np.ndarray] = {"sid": sids, "kind": kind}
        cols["a_lo"], cols["a_hi"] = bounds_of([sub.a for sub in subs])
        cols["c_lo"], cols["c_hi"] = bounds_of([sub.c for sub in subs])
        band = (kind == KIND_CODE["band"]) | (kind == KIND_CODE["interval"])
        cols["b_lo"], cols["b_hi"] = np.zeros(k), np.zeros(k)
        if band.any():
            at = np.flatnonzero(band)
            lo, hi = bounds_of([subs[i].b for i in at.tolist()])
            cols["b_lo"][at], cols["b_hi"][at] = lo, hi
        cols["w"] = np.fromiter((getattr(sub, "w", 0) for sub in subs), dtype=np.int64, count=k)
        cols["reg"] = np.arange(first_reg, first_reg + k, dtype=np.int64)
        cols["snap"] = np.full(k, bool(snap))
        cols.update(interval_columns(subs))
        self.restore_columns(cols)
        return sids

    def restore_columns(self, cols: Mapping[str, np.ndarray]) -> None:
        """Store the rows of ``live_columns`` under their ids (increasing, above ``n``; restoring a
        checkpoint), vectorised; ids skipped over stay inactive and unused."""
        sids = np.asarray(cols["sid"], dtype=np.int64)
        top = int(sids[-1]) + 1
        self.reserve(top)
        self.n = top
        for name in (*_FLOAT_COLS, *_INT_COLS):
            getattr(self, name)[sids] = cols[name]
        kind = np.asarray(cols["kind"], dtype=np.int8)
        snap = np.asarray(cols["snap"], dtype=np.bool_)
        self.kind[sids] = kind
        self.snap[sids] = snap
        self.active[sids] = True
        a_lo, a_hi, c_lo, c_hi = (np.asarray(cols[k], dtype=np.float64) for k in ("a_lo", "a_hi", "c_lo", "c_hi"))
        self.selective[sids] = ~((a_lo == -np.inf) & (a_hi == np.inf) & (c_lo == -np.inf) & (c_hi == np.inf))
        band = (kind == KIND_CODE["band"]) | (kind == KIND_CODE["interval"])
        window = kind == KIND_CODE["window"]
        interval = kind == KIND_CODE["interval"]
        if interval.any():
            if INTERVAL_COLUMNS[0] not in cols:
                raise ValueError("interval subscriptions need the endpoint columns "
                                 + ", ".join(INTERVAL_COLUMNS))
            self.enable_intervals()
        if self.irec.shape[0]:
            self.irec[sids] = np.where(interval[:, None], endpoint_rows(cols, sids.shape[0]), 0)
        rec = np.empty((sids.shape[0], 8), dtype=np.float64)
        rec[:, 0] = np.where(band, cols["b_lo"], 0.0)
        rec[:, 1] = np.where(band, cols["b_hi"], np.where(window, cols["w"], 0).astype(np.float64))
        rec[:, 2], rec[:, 3], rec[:, 4], rec[:, 5] = a_lo, a_hi, c_lo, c_hi
        rec[:, 6] = np.asarray(cols["reg"], dtype=np.float64)
        rec[:, 7] = snap.astype(np.float64)
        self.rec[sids] = rec

    def live_columns(self) -> dict[str, np.ndarray]:
        """Copies of the active subscriptions' columns: ``sid, kind, a_lo … c_hi, w, reg, snap``."""
        sids = np.flatnonzero(self.active[: self.n]).astype(np.int64)
        out = {"sid": sids, "kind": self.kind[sids]}
        for name in (*_FLOAT_COLS, *_INT_COLS, "snap"):
            out[name] = getattr(self, name)[sids]
        ir = (self.irec[sids].astype(np.float64) if self.irec.shape[0]
              else np.zeros((sids.shape[0], 8)))
        ir[ir <= -ENDPOINT_CLIP] = -np.inf
        ir[ir >= ENDPOINT_CLIP] = np.inf
        for j, name in enumerate(INTERVAL_COLUMNS):
            out[name] = ir[:, j].copy()
        return out

    def deactivate(self, sid: int) -> None:
        self.active[sid] = False

    def is_active(self, sid: int) -> bool:
        return 0 <= sid < self.n and bool(self.active[sid])

    def memory_bytes(self) -> int:
        return self.rec.nbytes + self.irec.nbytes + sum(getattr(self, n).nbytes for n in
                                     (*_FLOAT_COLS, *_INT_COLS, *_BOOL_COLS, "kind", "mark", "acc"))


def interval_columns(subs: list[Any]) -> dict[str, np.ndarray]:
    """The :data:`INTERVAL_COLUMNS` of ``subs`` (float64, ±inf unbounded; 0 for a subscription
    that is not an interval join). O(n).

    >>> from hotjoin.matcher.model import Range
    >>> cols = interval_columns([IntervalJoin(Range(0, 0), se=Range(1, None)), SelectJoin()])
    >>> cols["se_lo"].tolist(), cols["se_hi"].tolist()
    ([1.0, 0.0], [inf, 0.0])
    """
    n = len(subs)
    out = {name: np.zeros(n, dtype=np.float64) for name in INTERVAL_COLUMNS}
    at = [i for i, sub in enumerate(subs) if isinstance(sub, IntervalJoin)]
    if at:
        idx = np.array(at, dtype=np.int64)
        for e in ENDPOINTS:
            lo, hi = bounds_of([getattr(subs[i], e) for i in at])
            out[f"{e}_lo"][idx], out[f"{e}_hi"][idx] = lo, hi
    return out
