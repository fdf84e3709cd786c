"""The data model: events (points or intervals), closed ranges, the subscription kinds,
deliveries (paper 004 §2, §3; the README's "File formats" describe the same fields; interval
joins after Piatov et al., docs/design.md).

Everything here is a small immutable value with validation at construction, so a malformed
request fails with ``ValueError`` before it can touch engine state.

This module needs numpy only, never numba: the client library (``hotjoin.clients``) sends these
very types, and ``import hotjoin.clients`` must stay light (``tests/clients/test_packaging_extras.py``).
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


INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
END_MAX = 2**61
"""Largest absolute interval end (``Event.end``): every endpoint difference of two tuples
then fits in int64 exactly (the batch path limits times the same way, ``matcher/batch.py``)."""

ENDPOINTS: tuple[str, str, str, str] = ("ss", "se", "es", "ee")
"""The four endpoint differences of an interval join, in column order: ``s.time − r.time``,
``s.time − r.end``, ``s.end − r.time``, ``s.end − r.end``."""


def _endpoint_range(name: str, r: object) -> Range:
    """``r`` as an endpoint range: a ``Range`` whose bounds are integers (or unbounded),
    stored as Python ints so that comparisons with int64 differences are exact."""
    r = _as_range(f"range {name.upper()}", r)
    out = object.__new__(Range)
    for end, x in (("lo", r.lo), ("hi", r.hi)):
        if x is not None and not float(x).is_integer():
            raise ValueError(f"range {name.upper()} {end} bound must be an integer, got {x!r}")
        object.__setattr__(out, end, None if x is None else int(x))
    return out


_ALLEN: dict[str, tuple[tuple[int | None, int | None] | None, ...]] = {
    # name: (SS, SE, ES, EE); None = unbounded; times are integers, so ``<`` is a bound of 1
    "before": (None, (1, None), None, None),
    "after": (None, None, (None, -1), None),
    "meets": (None, (0, 0), None, None),
    "met_by": (None, None, (0, 0), None),
    "overlaps": ((1, None), (None, -1), None, (1, None)),
    "overlapped_by": ((None, -1), None, (1, None), (None, -1)),
    "starts": ((0, 0), None, None, (1, None)),
    "started_by": ((0, 0), None, None, (None, -1)),
    "during": ((None, -1), None, None, (1, None)),
    "contains": ((1, None), None, None, (None, -1)),
    "finishes": ((None, -1), None, None, (0, 0)),
    "finished_by": ((1, None), None, None, (0, 0)),
    "equals": ((0, 0), None, None, (0, 0)),
}
ALLEN_RELATIONS: tuple[str, ...] = tuple(_ALLEN)
"""Allen's thirteen relations, by the names :meth:`IntervalJoin.allen` takes."""
ISEQL_JOINS: tuple[str, ...] = ("start_preceding", "end_following", "before", "left_overlap",
                                "during")
"""The parameterised ISEQL joins (Piatov et al.), by the names :meth:`IntervalJoin.iseql`
takes."""


def _param(name: str, preset: str, x: object, least: int) -> int:
    if x is None:
        raise ValueError(f"ISEQL {preset} needs {name}")
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise ValueError(f"ISEQL {preset}: {name} must be an integer, got {x!r}")
    if x < least:
        raise ValueError(f"ISEQL {preset}: {name} must be >= {least}, got {x}")
    return int(x)


@dataclass(frozen=True, slots=True)
class IntervalJoin:
    """Interval join: a pair (r, s) of interval tuples (``[time, end]``, a point when
    ``end == time``) is in the result iff ``s.key − r.key ∈ b`` (IEEE double subtraction),
    ``r.value ∈ a``, ``s.value ∈ c`` and each endpoint difference lies in its range:
    ``s.time − r.time ∈ ss``, ``s.time − r.end ∈ se``, ``s.end − r.time ∈ es``,
    ``s.end − r.end ∈ ee`` (exact integer arithmetic; the endpoint ranges' bounds are integers
    or unbounded). ``b`` is required. Allen's relations and the ISEQL joins are presets
    (:meth:`allen`, :meth:`iseql`); ``preset`` names the one a join was built from, for
    display only: equality and matching use the ranges alone.

    >>> j = IntervalJoin.allen("overlaps", b=Range(0, 0))
    >>> j.ss, j.se, j.ee, j.preset
    (Range(lo=1, hi=None), Range(lo=None, hi=-1), Range(lo=1, hi=None), 'allen:overlaps')
    >>> j == IntervalJoin(Range(0, 0), ss=Range(1, None), se=Range(None, -1), ee=Range(1, None))
    True
    >>> IntervalJoin.iseql("left_overlap", delta=5, eps=3, b=Range(0, 0)).preset
    'iseql:left_overlap(5,3)'
    """

    b: Range
    a: Range = UNBOUNDED
    c: Range = UNBOUNDED
    ss: Range = UNBOUNDED
    se: Range = UNBOUNDED
    es: Range = UNBOUNDED
    ee: Range = UNBOUNDED
    preset: str | None = field(default=None, compare=False)
    kind: str = field(default="interval", init=False)

    def __post_init__(self) -> None:
        if self.b is None:
            raise ValueError("an interval join needs range B (the key condition)")
        object.__setattr__(self, "b", _as_range("range B", self.b))
        object.__setattr__(self, "a", _as_range("range A", self.a))
        object.__setattr__(self, "c", _as_range("range C", self.c))
        for name in ENDPOINTS:
            object.__setattr__(self, name, _endpoint_range(name, getattr(self, name)))
        if self.preset is not None and not isinstance(self.preset, str):
            raise ValueError(f"preset must be a string or None, got {self.preset!r}")

    @classmethod
    def allen(cls, name: str, b: Range, a: Range = UNBOUNDED,
              c: Range = UNBOUNDED) -> IntervalJoin:
        """The interval join of Allen's relation ``name`` (``"before"``, ``"overlaps"``, ...;
        :data:`ALLEN_RELATIONS`) holding from r to s, with the key condition ``b`` and the
        value selections ``a``, ``c``; ValueError for an unknown name.

        >>> IntervalJoin.allen("during", b=Range(0, 0)).ss
        Range(lo=None, hi=-1)
        """
        spec = _ALLEN.get(name) if isinstance(name, str) else None
        if spec is None:
            raise ValueError(f"unknown Allen relation {name!r}; choose one of "
                             f"{', '.join(ALLEN_RELATIONS)}")
        rs = [UNBOUNDED if x is None else Range(*x) for x in spec]
        return cls(b, a, c, *rs, preset=f"allen:{name}")

    @classmethod
    def iseql(cls, name: str, delta: int | None = None, eps: int | None = None, *,
              b: Range, a: Range = UNBOUNDED, c: Range = UNBOUNDED) -> IntervalJoin:
        """The ISEQL join ``name`` (:data:`ISEQL_JOINS`) with its parameters δ (``delta``)
        and ε (``eps``), integers ≥ 0 (``before`` needs δ ≥ 1); ValueError naming what is
        wrong for an unknown name or a missing or bad parameter.

        >>> j = IntervalJoin.iseql("start_preceding", delta=4, b=Range(0, 0))
        >>> j.ss, j.se, j.preset
        (Range(lo=0, hi=4), Range(lo=None, hi=0), 'iseql:start_preceding(4)')
        """
        if not isinstance(name, str) or name not in ISEQL_JOINS:
            raise ValueError(f"unknown ISEQL join {name!r}; choose one of "
                             f"{', '.join(ISEQL_JOINS)}")
        u = UNBOUNDED
        if name == "start_preceding":
            d = _param("delta", name, delta, 0)
            rs, label = (Range(0, d), Range(None, 0), u, u), f"({d})"
        elif name == "end_following":
            e = _param("eps", name, eps, 0)
            rs, label = (u, u, Range(0, None), Range(-e, 0)), f"({e})"
        elif name == "before":
            d = _param("delta", name, delta, 1)
            rs, label = (u, Range(1, d), u, u), f"({d})"
        elif name == "left_overlap":
            d, e = _param("delta", name, delta, 0), _param("eps", name, eps, 0)
            rs, label = (Range(0, d), Range(None, 0), u, Range(0, e)), f"({d},{e})"
        else:  # during: s around r
            d, e = _param("delta", name, delta, 0), _param("eps", name, eps, 0)
            rs, label = (Range(-d, 0), u, u, Range(0, e)), f"({d},{e})"
        return cls(b, a, c, *rs, preset=f"iseql:{name}{label}")


Subscription = SelectJoin | BandJoin | WindowJoin | IntervalJoin
KINDS: tuple[str, ...] = ("select", "band", "window", "interval")


@dataclass(frozen=True, slots=True)
class Event:
    """One tuple of stream R (key=B, value=A) or S (key=B, value=C) with its event time.

    ``end`` (optional): the tuple is the closed interval ``[time, end]`` (interval joins);
    absent, it is a point and ``end == time``. ``end < time``, a non-integer end and an end
    beyond ±2^61 are invalid. Lateness, the watermark and ``max_advance`` use ``time`` (streams
    are ordered by start time); retention drops a tuple once its ``end`` falls behind.

    >>> Event("R", "r1", 1.0, 2.0, time=5).end, Event("R", "r2", 1.0, 2.0, 5, end=9).end
    (5, 9)
    """

    side: Side
    id: str
    key: float
    value: float
    time: int
    payload: bytes = b""
    end: int | None = None

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
        end = self.end
        if end is None:
            object.__setattr__(self, "end", self.time)
            return
        if isinstance(end, bool) or not isinstance(end, (int, np.integer)):
            raise ValueError(f"event end must be an integer, got {end!r}")
        if int(end) != self.time and not -END_MAX <= int(end) <= END_MAX:
            raise ValueError(f"event end {end} is outside [-2**61, 2**61]")
        if int(end) < self.time:
            raise ValueError(f"event end {end} is before its time {self.time}")
        object.__setattr__(self, "end", int(end))


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
