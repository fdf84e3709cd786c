"""Brute-force reference engine: the semantics of docs/design.md applied literally, for tests only.

``OracleEngine`` has the engine's API (``subscribe``, ``unsubscribe``, ``publish``, ``delete``,
``result``, the batch calls, ``watermark`` and ``seq``) but no index of any kind: every publish
or delete loops over every stored tuple of the other side and every subscription and evaluates
the join predicate directly.  It is meant to be obviously right, not fast; the property tests
(``tests/engine_harness.py``) run the real ``matcher.engine.Engine`` against it.

Conventions this module fixes where docs/design.md leaves room (see the test-suite):

* ``seq`` is the sequence number of the last applied operation, 0 before the first; an
  operation that raises takes none.  ``result`` is a query, not an operation.
* Subscription ids are 0, 1, 2, ... in order of successful ``subscribe`` calls, never reused.
* A publish of an id that is stored on its side raises ``DuplicateEventError`` even if the event
  would also be late (a retried batch then reports ALREADY_EXISTS, not LATE); otherwise a late
  event raises ``LateEventError``.
* ``result(sid)`` is the subscription's full current result over the stored tuples (every pair
  whose predicate holds, whenever it formed), each as a ``+1`` delivery.
* ``publish_many`` publishes one at a time in order; the first failure raises
  ``BatchError(index, cause)`` with the events before it applied (their deliveries are attached
  to the error as ``.deliveries``).  ``subscribe_many`` is all or nothing: every item is checked
  first and a non-subscription raises ``ValueError`` before any is registered.
* ``delete`` with an empty id is malformed input (``ValueError``), not an unknown id.
* ``max_advance`` (None or 0: no bound): an event that is neither a duplicate nor late but whose
  time exceeds the largest time published so far by more than ``max_advance`` raises
  ``ValueError`` (the server's INVALID) and changes nothing; the first event is not bounded.
* Retention: once the largest time is T, a stored tuple whose *end* lies below
  ``T − lateness − retention`` is dropped (a point's end is its time). Lateness, the watermark
  and ``max_advance`` read the start time ``time``.
* Interval joins (:class:`~matcher.model.IntervalJoin`): the key condition as a band join's,
  the values in A and C, and the four endpoint differences of ``r = [r.time, r.end]``,
  ``s = [s.time, s.end]`` in their ranges, on Python ints (exact).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from dataclasses import dataclass

from hotjoin.matcher.errors import (
    BatchError,
    DuplicateEventError,
    HotjoinError,
    LateEventError,
    UnknownEventError,
    UnknownSubscriptionError,
)
from hotjoin.matcher.model import (
    BandJoin,
    Delivery,
    Event,
    IntervalJoin,
    SelectJoin,
    Subscription,
    WindowJoin,
    check_side,
)

_KINDS = (SelectJoin, BandJoin, WindowJoin, IntervalJoin)

__all__ = ["OracleEngine", "matches"]


def _within(lo: int | float | None, hi: int | float | None, x: int) -> bool:
    """``lo <= x <= hi`` with None unbounded, compared as Python numbers (ints stay exact)."""
    return (lo is None or lo <= x) and (hi is None or x <= hi)


def interval_holds(sub: IntervalJoin, r: Event, s: Event) -> bool:
    """The endpoint conditions of an interval join, straight from their definitions:
    ``s.time − r.time ∈ SS``, ``s.time − r.end ∈ SE``, ``s.end − r.time ∈ ES``,
    ``s.end − r.end ∈ EE`` (a point's end is its time)."""
    rt, st = r.time, s.time
    re = rt if r.end is None else r.end
    se = st if s.end is None else s.end
    return (_within(sub.ss.lo, sub.ss.hi, st - rt) and _within(sub.se.lo, sub.se.hi, st - re)
            and _within(sub.es.lo, sub.es.hi, se - rt) and _within(sub.ee.lo, sub.ee.hi, se - re))


def matches(sub: Subscription, r: Event, s: Event) -> bool:
    """The join predicate of ``sub`` on the pair (r, s), evaluated literally.

    Band: ``s.key - r.key`` with Python (IEEE double) subtraction must lie in the closed range B.
    Window: select-join condition and ``abs(r.time - s.time) <= w`` on Python ints.
    Interval: the band condition and :func:`interval_holds`.
    """
    if not (sub.a.contains(r.value) and sub.c.contains(s.value)):
        return False
    if isinstance(sub, BandJoin):
        return sub.b.contains(s.key - r.key)
    if isinstance(sub, IntervalJoin):
        return sub.b.contains(s.key - r.key) and interval_holds(sub, r, s)
    if r.key != s.key:
        return False
    if isinstance(sub, WindowJoin):
        return abs(r.time - s.time) <= sub.w
    return True


def _check_time_param(name: str, x: object, allow_none: bool) -> int | None:
    if x is None and allow_none:
        return None
    if isinstance(x, bool) or not isinstance(x, numbers.Integral) or x < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {x!r}")
    return int(x)


@dataclass
class _Sub:
    """A live subscription with the sequence number it was registered at."""

    sub: Subscription
    reg_seq: int
    snapshot: bool


@dataclass
class _Stored:
    """A stored tuple with the sequence number of its insert."""

    event: Event
    seq: int


class OracleEngine:
    """Reference implementation of one topic's state (docs/design.md), quadratic and literal."""

    def __init__(self, lateness: int = 0, retention: int | None = None,
                 max_advance: int | None = None) -> None:
        self.lateness: int = _check_time_param("lateness", lateness, allow_none=False)  # type: ignore[assignment]
        self.retention: int | None = _check_time_param("retention", retention, allow_none=True)
        # 0 and None both mean "no bound"; kept as given (an int >= 0 or None)
        self.max_advance: int | None = _check_time_param("max_advance", max_advance,
                                                         allow_none=True)
        self._seq = 0
        self._next_sid = 0
        self._max_time: int | None = None
        self._subs: dict[int, _Sub] = {}
        self._stored: dict[str, dict[str, _Stored]] = {"R": {}, "S": {}}

    # ---- read-only state -------------------------------------------------------------------

    @property
    def seq(self) -> int:
        """Sequence number of the last applied operation (0 before any)."""
        return self._seq

    @property
    def watermark(self) -> int | None:
        """W = largest published event time − lateness; ``None`` before the first event."""
        return None if self._max_time is None else self._max_time - self.lateness

    @property
    def next_subscription_id(self) -> int:
        """The id the next successful ``subscribe`` will return (test helper)."""
        return self._next_sid

    def stored(self, side: str) -> dict[str, Event]:
        """The stored tuples of ``side`` by id (a copy; test helper, not an engine call)."""
        return {i: st.event for i, st in self._stored[check_side(side)].items()}

    def subscriptions(self) -> dict[int, Subscription]:
        """The live subscriptions by id (a copy; test helper)."""
        return {sid: s.sub for sid, s in self._subs.items()}

    # ---- subscriptions ---------------------------------------------------------------------

    def subscribe(self, sub: Subscription, snapshot: bool = False) -> int:
        """Register ``sub`` at the next sequence number and return its id (0, 1, 2, ...)."""
        if not isinstance(sub, _KINDS):
            raise ValueError(f"not a subscription: {type(sub).__name__}")
        self._seq += 1
        sid = self._next_sid
        self._next_sid += 1
        self._subs[sid] = _Sub(sub, self._seq, bool(snapshot))
        return sid

    def subscribe_many(self, subs: Iterable[Subscription], snapshot: bool = False) -> list[int]:
        """``subscribe`` each in order; validated first, so a bad item applies none (ValueError)."""
        subs = list(subs)
        for i, sub in enumerate(subs):
            if not isinstance(sub, _KINDS):
                raise ValueError(f"item #{i} is not a subscription: {type(sub).__name__}")
        return [self.subscribe(sub, snapshot) for sub in subs]

    def unsubscribe(self, sid: int) -> None:
        """Remove subscription ``sid``; it takes a sequence number and delivers nothing."""
        if sid not in self._subs:
            raise UnknownSubscriptionError(sid)
        self._seq += 1
        del self._subs[sid]

    def result(self, sid: int) -> list[Delivery]:
        """Every stored pair satisfying ``sid``'s predicate, as ``+1`` deliveries."""
        if sid not in self._subs:
            raise UnknownSubscriptionError(sid)
        sub = self._subs[sid].sub
        return [
            Delivery(sid, 1, r.event.id, s.event.id)
            for r in self._stored["R"].values()
            for s in self._stored["S"].values()
            if matches(sub, r.event, s.event)
        ]

    # ---- events ----------------------------------------------------------------------------

    def publish(self, event: Event) -> list[Delivery]:
        """Insert ``event``: watermark, retention, match, then store."""
        if not isinstance(event, Event):
            raise ValueError(f"not an event: {type(event).__name__}")
        side = event.side
        if event.id in self._stored[side]:
            raise DuplicateEventError(side, event.id)
        w = self.watermark
        if w is not None and event.time < w:
            raise LateEventError(side, event.id, event.time, w)
        if (self.max_advance and self._max_time is not None
                and event.time > self._max_time + self.max_advance):
            raise ValueError(
                f"event time {event.time} is more than {self.max_advance} ahead of the topic's "
                f"largest event time {self._max_time} (max_advance); nothing changed")
        self._seq += 1
        self._max_time = event.time if self._max_time is None else max(self._max_time, event.time)
        if self.retention is not None:
            horizon = self._max_time - self.lateness - self.retention
            for table in self._stored.values():
                for tid in [tid for tid, st in table.items()
                            if (st.event.time if st.event.end is None else st.event.end)
                            < horizon]:
                    del table[tid]
        out: list[Delivery] = []
        other = "S" if side == "R" else "R"
        for y in self._stored[other].values():
            r, s = (event, y.event) if side == "R" else (y.event, event)
            for sid, q in self._subs.items():
                # The pair forms now, at self._seq; every live q registered before it.
                if q.reg_seq < self._seq and matches(q.sub, r, s):
                    out.append(Delivery(sid, 1, r.id, s.id))
        self._stored[side][event.id] = _Stored(event, self._seq)
        return out

    def publish_many(self, events: Iterable[Event]) -> list[Delivery]:
        """``publish`` each in order; first failure raises ``BatchError`` (prefix applied)."""
        out: list[Delivery] = []
        for i, event in enumerate(events):
            try:
                out.extend(self.publish(event))
            except (HotjoinError, ValueError) as exc:
                err = BatchError(i, exc)
                err.deliveries = out  # type: ignore[attr-defined]
                raise err from exc
        return out

    def delete(self, side: str, id: str) -> list[Delivery]:
        """Delete (side, id): retract each pair from every q that received it."""
        side = check_side(side)
        if not isinstance(id, str) or not id:
            raise ValueError(f"event id must be a non-empty string, got {id!r}")
        if id not in self._stored[side]:
            raise UnknownEventError(side, id)
        self._seq += 1
        x = self._stored[side][id]
        other = "S" if side == "R" else "R"
        out: list[Delivery] = []
        for y in self._stored[other].values():
            r, s = (x.event, y.event) if side == "R" else (y.event, x.event)
            formed = max(x.seq, y.seq)
            for sid, q in self._subs.items():
                if (q.snapshot or q.reg_seq < formed) and matches(q.sub, r, s):
                    out.append(Delivery(sid, -1, r.id, s.id))
        del self._stored[side][id]
        return out
