"""Engine state out and in: checkpoint columns, ``export_state`` / ``load_state``, ``restore_*``.

Results depend only on the live subscriptions, the stored tuples and the clock (the brute
force, ``matcher/oracle.py``, needs nothing else), so that is all the state holds; every kind's
index is built anew from the subscriptions on load (``KindIndex.add_many``), never saved. The
format is the engine contract's (``matcher/contract.py``: ``SUBSCRIPTION_COLUMNS``) and
docs/reference/persistence.md's: server
checkpoints, scale-out snapshots, the head of a compacted log, and the Spark replay's shards
(``advance_clock``). :class:`EngineState` is mixed into ``Engine`` (``matcher/engine.py``).

>>> from hotjoin.matcher import Engine, Event, Range, SelectJoin
>>> e = Engine()
>>> _ = e.subscribe(SelectJoin(a=Range(0, 5)))
>>> _ = e.publish(Event("S", "s1", key=1.0, value=2.0, time=3))
>>> f = Engine(); f.load_state(e.export_state())
>>> f.seq, f.subscription(0) == e.subscription(0), f.get_event("S", "s1") == e.get_event("S", "s1")
(2, True, True)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

import numpy as np

from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.errors import DuplicateEventError
from hotjoin.matcher.joins.interface import KindIndex
from hotjoin.matcher.kinds import KINDS, kind_of_code
from hotjoin.matcher.model import (
    END_MAX,
    ENDPOINTS,
    Event,
    IntervalJoin,
    Range,
    Side,
    Subscription,
    check_side,
)
from hotjoin.matcher.subscriptions import SubscriptionColumns


class EngineState:
    """The state half of ``Engine``: clock and tuple restores, subscription columns, export and
    load. Reads and writes the engine's own fields (declared below)."""

    tables: dict[Side, BaseTable]
    cols: SubscriptionColumns
    subs: dict[int, Subscription]
    lateness: int
    retention: int | None
    _seq: int
    _max_time: int | None
    _kinds: dict[str, KindIndex]

    def _index_for(self, sub: object) -> KindIndex:
        raise NotImplementedError  # the engine's (matcher/engine.py)

    def restore_clock(self, seq: int, max_time: int | None) -> None:
        """Set the sequence counter and the largest event time seen (restoring a snapshot)."""
        self._seq = int(seq)
        self._max_time = None if max_time is None else int(max_time)

    def advance_clock(self, seq: int, max_time: int | None) -> None:
        """Make the next operation take ``seq``; raise the largest event time to ``max_time``.

        For a shard of the Spark replay (``ops/replay``), which sees only part of a topic's log:
        given the topic-wide clock before each of its operations, lateness, retention and pair
        formation behave exactly as online. Retention drops what the new watermark expires, as
        ``_advance`` does; a ``max_time`` below the current one changes nothing. O(expired log n).
        """
        seq = int(seq)
        if seq <= self._seq:
            raise ValueError(f"advance_clock: seq {seq} is not after the last seq {self._seq}")
        self._seq = seq - 1
        if max_time is not None and (self._max_time is None or max_time > self._max_time):
            self._max_time = int(max_time)
            if self.retention is not None:
                limit = self._max_time - self.lateness - self.retention
                for t in self.tables.values():
                    t.expire_before(limit)

    def restore_subscription(self, sid: int, sub: Subscription, reg_seq: int,
                             snapshot: bool = False) -> None:
        """Re-create subscription ``sid`` as registered at ``reg_seq`` (compacted logs).

        Ids must be restored in increasing order; ids skipped over stay unused forever.
        """
        index = self._index_for(sub)
        if sid < self.cols.n:
            raise ValueError(f"subscription id {sid} is not above the last id {self.cols.n - 1}")
        self.cols.n = int(sid)
        got = self.cols.add(sub, int(reg_seq), bool(snapshot))
        assert got == sid
        self.subs[sid] = sub
        index.add(sid)

    def subscription_columns(self) -> dict[str, np.ndarray]:
        """The live subscriptions as columns (copies, O(live) numpy work, no object per
        subscription): ``sid`` (increasing), ``kind`` (0 select, 1 band, 2 window, 3
        interval), ``a_lo, a_hi, b_lo, b_hi, c_lo, c_hi`` (±inf where unbounded), ``w``,
        ``reg`` (registration seq), ``snap``, and the interval joins' endpoint ranges
        ``ss_lo … ee_hi`` (``subscriptions.INTERVAL_COLUMNS``; 0 for the other kinds).
        ``restore_subscription_columns`` rebuilds them: a server checkpoint."""
        return self.cols.live_columns()

    def restore_subscription_columns(self, cols: Mapping[str, np.ndarray]) -> None:
        """Re-create the subscriptions of ``subscription_columns`` with their ids and registration
        seqs, building each kind's index in bulk (``add_many``) rather than one by one.

        Ids must be increasing and above every id in use; ids skipped over stay unused. The
        indexes are not saved but rebuilt: matching depends only on the subscriptions and the
        stored tuples, not on how the index happens to be laid out. Columns without the
        endpoint ranges (written before interval joins existed) hold no interval join; an
        interval join without them is a ValueError.
        """
        sids = np.asarray(cols["sid"], dtype=np.int64)
        n = sids.shape[0]
        if n == 0:
            return
        if sids[0] < self.cols.n or (n > 1 and bool((np.diff(sids) <= 0).any())):
            raise ValueError("restore_subscription_columns: ids must increase and be new")
        subs = subscriptions_from_columns(cols)
        kinds = np.asarray(cols["kind"], dtype=np.int8)
        for code in np.unique(kinds).tolist():  # each kind's index, built on its first use
            self._index_for(subs[int(np.argmax(kinds == code))])
        self.cols.restore_columns(cols)
        self.subs.update(zip(sids.tolist(), subs, strict=True))
        for name, index in list(self._kinds.items()):
            mine = sids[kinds == KINDS[name].code]
            if mine.shape[0]:
                index.add_many(mine)

    def export_state(self) -> dict[str, Any]:
        """Everything results depend on, as columns (copies): the live subscriptions
        (``subscription_columns``), each side's stored tuples (``BaseTable.live_columns``:
        ``tuples[side] = (ids, keys, values, times, seqs, payloads)``) and their ends in the
        same row order (``ends[side]``, int64, ``== times`` for points; a state without
        ``ends`` holds points only), the clock and the next subscription id. ``load_state`` rebuilds an equivalent engine; the
        indexes are not exported but built anew, since results depend only on subscriptions,
        tuples and the clock. Used by server checkpoints and scale-out snapshots
        (docs/reference/persistence.md). A kind whose index held more (``KindIndex.export_state``)
        would add it under ``kinds``; none does."""
        out: dict[str, Any] = {
            "seq": self._seq, "max_time": self._max_time, "next_sid": int(self.cols.n),
            "subs": self.subscription_columns(),
            "tuples": {side: t.live_columns() for side, t in self.tables.items()},
            "ends": {side: t.live_ends() for side, t in self.tables.items()}}
        kinds = {name: st for name, ix in self._kinds.items()
                 if (st := ix.export_state()) is not None}
        if kinds:
            out["kinds"] = kinds
        return out

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Load ``export_state``'s output into this empty engine (same lateness, retention and
        strategy as the exporter, or results may differ): bulk index builds, no matching."""
        if self.cols.n or self.subs or any(len(t) for t in self.tables.values()):
            raise ValueError("load_state needs an empty engine")
        self.restore_subscription_columns(state["subs"])
        ends = state.get("ends") or {}
        for side, (ids, keys, values, times, seqs, payloads) in state["tuples"].items():
            if ids:
                self.restore_event_columns(side, ids, keys, values, times, seqs,
                                           payloads if any(payloads) else None,
                                           ends=ends.get(side))
        self.cols.n = max(int(self.cols.n), int(state["next_sid"]))
        self.restore_clock(int(state["seq"]), state["max_time"])
        for name, st in state.get("kinds", {}).items():
            index = self._kinds.get(name)
            if index is not None:
                index.load_state(st)

    def restore_events(self, events: list[Event], seqs: list[int]) -> None:
        """Store tuples with their original sequence numbers, without matching (compacted logs).

        No watermark or retention is applied; call ``restore_clock`` afterwards.
        """
        by_side: dict[Side, tuple[list[Event], list[int]]] = {"R": ([], []), "S": ([], [])}
        for ev, seq in zip(events, seqs, strict=True):
            if not isinstance(ev, Event):
                raise ValueError(f"not an Event: {type(ev).__name__}")
            if ev.id in self.tables[ev.side]:
                raise DuplicateEventError(ev.side, ev.id)
            by_side[ev.side][0].append(ev)
            by_side[ev.side][1].append(int(seq))
        for side, (evs, sq) in by_side.items():
            if len({e.id for e in evs}) != len(evs):
                raise ValueError(f"duplicate ids among the restored {side} events")
            if evs:
                self.tables[side].bulk_load(evs, sq)

    def restore_event_columns(self, side: Side, ids: list[str], keys: np.ndarray,
                              values: np.ndarray, times: np.ndarray, seqs: np.ndarray,
                              payloads: list[bytes] | None = None, *,
                              ends: np.ndarray | None = None) -> None:
        """Store many new tuples of one side from columns, without matching (log replay).

        The columnar form of ``restore_events``: no ``Event`` object per tuple, one re-sort of
        the key order and one rebuild of the key index. Like ``restore_events`` it applies no
        watermark or retention (call ``restore_clock`` afterwards). Validated first, all or
        nothing: finite keys and values, non-empty ids unique among themselves and new on the
        side, ``ends`` (None: points) not before their times and within ±2^61 where they differ
        from them. O(n log n).
        """
        check_side(side)
        t = self.tables[side]
        n = len(ids)
        keys = np.asarray(keys, dtype=np.float64)
        values = np.asarray(values, dtype=np.float64)
        times = np.asarray(times, dtype=np.int64)
        seqs = np.asarray(seqs, dtype=np.int64)
        if not (keys.shape == values.shape == times.shape == seqs.shape == (n,)):
            raise ValueError("restore_event_columns: columns of different lengths")
        if ends is not None:
            ends = np.asarray(ends, dtype=np.int64)
            if ends.shape != (n,):
                raise ValueError("restore_event_columns: ends of a different length")
            if bool((ends < times).any()):
                raise ValueError("restore_event_columns: an event end lies before its time")
            if bool(((ends != times) & ((ends > END_MAX) | (ends < -END_MAX))).any()):
                raise ValueError("restore_event_columns: an event end is outside "
                                 "[-2**61, 2**61]")
        if payloads is not None and len(payloads) != n:
            raise ValueError("restore_event_columns: payloads of a different length")
        if n == 0:
            return
        if not (np.isfinite(keys).all() and np.isfinite(values).all()):
            raise ValueError("event keys and values must be finite")
        if not all(isinstance(i, str) and i for i in ids):
            raise ValueError("event ids must be non-empty strings")
        if len(set(ids)) != n:
            raise ValueError(f"duplicate ids among the restored {side} events")
        for i in ids:
            if i in t.slot_of:
                raise DuplicateEventError(side, i)
        t.load_columns(list(ids), keys, values, times, seqs,
                       None if payloads is None else list(payloads), ends)


def subscriptions_from_columns(cols: Mapping[str, np.ndarray]) -> list[Subscription]:
    """The ``Subscription`` objects of ``Engine.subscription_columns`` rows, in row order (±inf
    → unbounded), built per kind from the fields of its registered type (``kinds.KINDS``: a
    ``Range`` field ``x`` from ``x_lo``/``x_hi``, an int field from its own column).

    The rows passed the model's checks once already, so the frozen objects are filled directly
    (``object.__new__``): validating 500,000 specs again would cost seconds and cannot fail.
    ``contract.subscriptions_from_columns`` is the validating twin. O(n).

    >>> from hotjoin.matcher.model import BandJoin, WindowJoin
    >>> cols = {"kind": np.array([2, 1]), "a_lo": np.array([-np.inf, 0.0]),
    ...         "a_hi": np.array([np.inf, 1.0]), "b_lo": np.array([0.0, -2.0]),
    ...         "b_hi": np.array([0.0, 2.0]), "c_lo": np.array([3.0, -np.inf]),
    ...         "c_hi": np.array([np.inf, np.inf]), "w": np.array([7, 0])}
    >>> subscriptions_from_columns(cols) == [WindowJoin(c=Range(3.0, None), w=7),
    ...                                      BandJoin(b=Range(-2.0, 2.0), a=Range(0.0, 1.0))]
    True
    """
    kinds = np.asarray(cols["kind"]).astype(np.int64)
    out: list[Any] = [None] * kinds.shape[0]
    for code in np.unique(kinds).tolist():
        at = np.flatnonzero(kinds == code)
        built = _build(kind_of_code(code).subscription, cols, at)
        for i, sub in zip(at.tolist(), built, strict=True):
            out[i] = sub
    return out


def _build(cls: type, cols: Mapping[str, np.ndarray], at: np.ndarray) -> list[Any]:
    """The ``cls`` objects of rows ``at`` (see :func:`subscriptions_from_columns`)."""
    new, put, inf = object.__new__, object.__setattr__, math.inf

    def rng(lo: float, hi: float) -> Range:
        r = new(Range)
        put(r, "lo", None if lo == -inf else lo)
        put(r, "hi", None if hi == inf else hi)
        return r

    def irng(lo: float, hi: float) -> Range:  # an endpoint range: integer bounds
        r = new(Range)
        put(r, "lo", None if lo == -inf else int(lo))
        put(r, "hi", None if hi == inf else int(hi))
        return r

    names: list[str] = []
    values: list[list[Any]] = []
    for f in fields(cls):
        if f.name in ("kind", "preset"):  # the preset is a display name, not state
            names.append(f.name)
            values.append([f.default] * at.shape[0])
        elif cls is IntervalJoin and f.name in ENDPOINTS:
            if f.name + "_lo" not in cols:
                raise ValueError("interval subscriptions need the endpoint columns "
                                 "ss_lo … ee_hi")
            names.append(f.name)
            values.append([irng(lo, hi) for lo, hi in
                           zip(np.asarray(cols[f.name + "_lo"])[at].tolist(),
                               np.asarray(cols[f.name + "_hi"])[at].tolist(), strict=True)])
        elif f.type in ("Range", Range):
            names.append(f.name)
            values.append([rng(lo, hi) for lo, hi in
                           zip(np.asarray(cols[f.name + "_lo"])[at].tolist(),
                               np.asarray(cols[f.name + "_hi"])[at].tolist(), strict=True)])
        else:
            names.append(f.name)
            values.append([int(x) for x in np.asarray(cols[f.name])[at].tolist()])
    out: list[Any] = []
    for row in zip(*values, strict=True):
        sub = new(cls)
        for name, x in zip(names, row, strict=True):
            put(sub, name, x)
        out.append(sub)
    return out
