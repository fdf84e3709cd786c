"""The data model: events, closed ranges, the three subscription kinds, deliveries (paper 004
§2, §3; the README's "File formats" describe the same fields).

Everything here is a small immutable value with validation at construction, so a malformed
request fails with ``ValueError`` before it can touch engine state.

This module needs numpy only, never numba: the client library (``hotjoin.clients``) sends these
very types, and ``import hotjoin.clients`` must stay light (``tests/clients/test_import_weight.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

Side = Literal["R", "S"]
SIDES: tuple[Side, Side] = ("R", "S")

INF = math.inf


def _check_finite(name: str, x: float) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number, got {type(x).__name__}")
    fx = float(x)
    if not math.isfinite(fx):
        raise ValueError(f"{name} must be finite, got {fx!r}")
    return fx


def check_side(side: object) -> Side:
    """Return ``side`` if it is ``"R"`` or ``"S"``, else raise ``ValueError``."""
    if side not in SIDES:
        raise ValueError(f"side must be 'R' or 'S', got {side!r}")
    return side  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class Range:
    """Closed range ``[lo, hi]``; ``None`` on either end means unbounded.

    >>> Range(0, 10).contains(10.0), Range(None, 5).contains(-1e300), Range(1, 2).contains(3)
    (True, True, False)
    """

    lo: float | None = None
    hi: float | None = None

    def __post_init__(self) -> None:
        lo = None if self.lo is None else _check_finite("range lower bound", self.lo)
        hi = None if self.hi is None else _check_finite("range upper bound", self.hi)
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"empty range: lower bound {lo!r} > upper bound {hi!r}")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    @property
    def lo_f(self) -> float:
        """Lower bound with ``-inf`` for unbounded (what the numeric kernels use)."""
        return -INF if self.lo is None else self.lo  # type: ignore[return-value]

    @property
    def hi_f(self) -> float:
        """Upper bound with ``+inf`` for unbounded."""
        return INF if self.hi is None else self.hi  # type: ignore[return-value]

    @property
    def unbounded(self) -> bool:
        return self.lo is None and self.hi is None

    def contains(self, x: float) -> bool:
        return self.lo_f <= x <= self.hi_f


UNBOUNDED = Range()


def _as_range(name: str, r: object) -> Range:
    if r is None:
        return UNBOUNDED
    if not isinstance(r, Range):
        raise ValueError(f"{name} must be a Range, got {type(r).__name__}")
    return r


@dataclass(frozen=True, slots=True)
class SelectJoin:
    """``r.key == s.key and r.value ∈ a and s.value ∈ c`` (paper 004 §3.2)."""

    a: Range = UNBOUNDED
    c: Range = UNBOUNDED
    kind: str = field(default="select", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "a", _as_range("range A", self.a))
        object.__setattr__(self, "c", _as_range("range C", self.c))


@dataclass(frozen=True, slots=True)
class BandJoin:
    """``s.key − r.key ∈ b`` (IEEE double subtraction), ``r.value ∈ a``, ``s.value ∈ c`` (§3.1)."""

    b: Range = UNBOUNDED
    a: Range = UNBOUNDED
    c: Range = UNBOUNDED
    kind: str = field(default="band", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "b", _as_range("range B", self.b))
        object.__setattr__(self, "a", _as_range("range A", self.a))
        object.__setattr__(self, "c", _as_range("range C", self.c))


@dataclass(frozen=True, slots=True)
class WindowJoin:
    """Select-join condition and ``abs(r.time − s.time) ≤ w`` (§3.3)."""

    a: Range = UNBOUNDED
    c: Range = UNBOUNDED
    w: int = 0
    kind: str = field(default="window", init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "a", _as_range("range A", self.a))
        object.__setattr__(self, "c", _as_range("range C", self.c))
        if isinstance(self.w, bool) or not isinstance(self.w, (int, np.integer)):
            raise ValueError(f"window w must be an integer, got {self.w!r}")
        if self.w < 0:
            raise ValueError(f"window w must be >= 0, got {self.w}")
        object.__setattr__(self, "w", int(self.w))


Subscription = SelectJoin | BandJoin | WindowJoin
KINDS: tuple[str, ...] = ("select", "band", "window")

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Event:
    """One tuple of stream R (key=B, value=A) or S (key=B, value=C) with its event time."""

    side: Side
    id: str
    key: float
    value: float
    time: int
    payload: bytes = b""

    def __post_init__(self) -> None:
        check_side(self.side)
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"event id must be a non-empty string, got {self.id!r}")
        object.__setattr__(self, "key", _check_finite("event key", self.key))
        object.__setattr__(self, "value", _check_finite("event value", self.value))
        if isinstance(self.time, bool) or not isinstance(self.time, (int, np.integer)):
            raise ValueError(f"event time must be an integer, got {self.time!r}")
        if not INT64_MIN <= int(self.time) <= INT64_MAX:
            raise ValueError(f"event time {self.time} does not fit in int64")
        object.__setattr__(self, "time", int(self.time))
        if not isinstance(self.payload, (bytes, bytearray)):
            raise ValueError("event payload must be bytes")


@dataclass(frozen=True, slots=True)
class Delivery:
    """One gained (+1) or lost (−1) result pair of one subscription."""

    subscription_id: int
    sign: int
    r_id: str
    s_id: str


@dataclass(frozen=True, slots=True)
class Matches:
    """Columnar deliveries of one operation: pair i is ``(subscription_ids[i], r_ids[i], s_ids[i])``.

    All pairs of one operation share one sign (+1 for a publish, −1 for a delete). Id arrays are
    numpy object arrays of ``str``; no Python object is built per pair beyond the id references.
    """

    subscription_ids: np.ndarray
    sign: int
    r_ids: np.ndarray
    s_ids: np.ndarray

    def __len__(self) -> int:
        return int(self.subscription_ids.shape[0])

    def deliveries(self) -> list[Delivery]:
        sign = self.sign
        return [
            Delivery(int(q), sign, r, s)
            for q, r, s in zip(self.subscription_ids.tolist(), self.r_ids, self.s_ids, strict=True)
        ]


@dataclass(frozen=True, slots=True)
class Affected:
    """Affected-only form: subscription ``subscription_ids[i]`` gained ``counts[i]`` pairs (signed)."""

    subscription_ids: np.ndarray
    counts: np.ndarray

    def __len__(self) -> int:
        return int(self.subscription_ids.shape[0])


def empty_matches(sign: int) -> Matches:
    e = np.empty(0, dtype=object)
    return Matches(np.empty(0, dtype=np.int64), sign, e, e)
