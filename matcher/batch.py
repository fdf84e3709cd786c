"""The engine's batch API: per-event status codes, columnar output, and batch admission.

``Engine.publish_batch`` / ``Engine.delete_batch`` take a batch as columns and apply it exactly as
the one-at-a-time calls would (``matcher/apply.py``), but a rejected event gets a status instead
of an exception. This module holds what that API is made of and the part of it that needs no engine:

* :class:`EventStatus`, :class:`BatchOutput`, :class:`BatchResult` — the result types;
* :func:`publish_columns` — column checks: a length mismatch raises ``ValueError`` before
  anything changes; a malformed event (bad side, empty or non-string id, non-finite key or
  value, time outside :data:`TIME_MIN`..:data:`TIME_MAX`) is marked INVALID with a reason;
* :func:`admit_publish` — the admission of a whole batch in one numba pass: duplicates (against
  stored tuples and earlier events of the batch, *before* lateness, as one at a time), lateness
  against the running watermark, the topic's ``max_advance`` bound (an event more than that beyond the
  largest time seen is INVALID; the first event of a topic is not bounded), retention moving
  inside the batch (a stored id that retention has already dropped may be published again),
  sequence numbers.

Times are limited to ±2^61 (:data:`TIME_MAX`) so that every watermark and retention limit the
engine computes (``max_time − lateness − retention``, with lateness and retention clipped at
2^62, which changes no decision for such times) fits in int64. The one-at-a-time ``publish``
accepts any int64 time; the batch path reports times beyond ±2^61 as INVALID (documented
choice: no realistic clock reaches 2^61 ms ≈ 73 million years).

>>> from hotjoin import Engine, SelectJoin
>>> e = Engine()
>>> _ = e.subscribe(SelectJoin())
>>> res = e.publish_batch(["R", "S", "S"], ["r1", "s1", "s1"], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0],
...                       [1, 2, 3], output="pairs")
>>> res.status.tolist(), res.seq.tolist(), res.reasons
([0, 0, 2], [2, 3, 0], {2: 'event S/s1 already exists'})
>>> res.output.event.tolist(), res.output.r_id.tolist(), res.output.s_id.tolist()
([1], ['r1'], ['s1'])
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import numpy as np

from hotjoin.matcher.config import kernel
from hotjoin.matcher.errors import (
    DuplicateEventError,
    LateEventError,
    UnknownEventError,
    ahead_reason,
)

TIME_MAX = 2**61
"""Largest absolute event time the batch path accepts (see module docstring)."""
TIME_MIN = -(2**61)
_CLIP = 2**62
_I64_MAX = 2**63 - 1


class EventStatus(enum.IntEnum):
    """Per-event status codes of a batch (int8 in ``BatchResult.status``)."""

    OK = 0
    LATE = 1
    DUPLICATE = 2
    INVALID = 3
    NOT_FOUND = 4


@dataclass(frozen=True)
class BatchOutput:
    """Columnar deliveries of a batch, rows in sequence order (ascending event index).

    Row i: event ``event[i]`` of the input batch gave subscription ``subscription[i]``
    ``count[i]`` pairs with sign ``sign[i]``. PAIRS output has one row per pair (``count ==
    sign``) and the pair's ids in ``r_id``/``s_id``; AFFECTED output one row per (event,
    subscription) with the signed pair count and ``r_id``/``s_id`` None.
    """

    event: np.ndarray
    subscription: np.ndarray
    sign: np.ndarray
    count: np.ndarray
    r_id: np.ndarray | None = None
    s_id: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.event.shape[0])


@dataclass(frozen=True)
class BatchResult:
    """What ``publish_batch`` / ``delete_batch`` return: status and seq per event, and output."""

    status: np.ndarray
    seq: np.ndarray
    reasons: dict[int, str] = field(default_factory=dict)
    output: BatchOutput = field(default_factory=lambda: empty_output("affected"))

    def __len__(self) -> int:
        return int(self.status.shape[0])

    @property
    def accepted(self) -> int:
        """Number of events applied (status OK)."""
        return int(np.count_nonzero(self.status == EventStatus.OK))


OUTPUTS = ("pairs", "affected", "none")


def check_output(output: str) -> str:
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {', '.join(OUTPUTS)}, got {output!r}")
    return output


def empty_output(output: str) -> BatchOutput:
    """A batch output with no rows (``r_id``/``s_id`` present only for ``"pairs"``)."""
    i64 = np.empty(0, dtype=np.int64)
    ids = np.empty(0, dtype=object) if output == "pairs" else None
    return BatchOutput(i64, i64.copy(), np.empty(0, dtype=np.int8), i64.copy(), ids,
                       None if ids is None else ids.copy())


# -- column checks ------------------------------------------------------------------------------
@dataclass
class Columns:
    """A batch's columns after :func:`publish_columns` (``valid`` False where INVALID)."""

    side: np.ndarray      # int8[n], 0 = R, 1 = S (0 where invalid)
    ids: list[Any]        # the caller's ids (str where valid)
    keys: np.ndarray      # float64[n]
    values: np.ndarray    # float64[n]
    times: np.ndarray     # int64[n] (0 where invalid)
    payloads: list[bytes] | None
    valid: np.ndarray     # bool[n]
    reasons: dict[int, str]
    ends: np.ndarray | None = None  # int64[n], the intervals' ends (None: all points)


def _length(name: str, col: Any) -> int:
    try:
        return len(col)
    except TypeError:
        raise ValueError(f"{name} must be a sequence or an array, got {type(col).__name__}") from None


def check_lengths(**cols: Any) -> int:
    """Common length of the named columns (None ones skipped); ValueError on a mismatch."""
    lens = {name: _length(name, c) for name, c in cols.items() if c is not None}
    if len(set(lens.values())) > 1:
        got = ", ".join(f"{k}={v}" for k, v in lens.items())
        raise ValueError(f"batch columns have different lengths: {got}")
    return next(iter(lens.values()), 0)


def side_codes(sides: Any, n: int, valid: np.ndarray, reasons: dict[int, str]) -> np.ndarray:
    """int8 side codes (0 = R, 1 = S) from "R"/"S" strings or 0/1 integers; others invalid."""
    arr = np.asarray(sides) if not isinstance(sides, np.ndarray) else sides
    out = np.zeros(n, dtype=np.int8)
    if n == 0:
        return out
    if arr.dtype.kind in "iu":
        ok = (arr == 0) | (arr == 1)
        out[ok] = arr[ok].astype(np.int8)
    elif arr.dtype.kind == "b":
        ok = np.zeros(n, dtype=np.bool_)
    else:
        isr = arr == "R"
        iss = arr == "S"
        if not isinstance(isr, np.ndarray):  # elementwise comparison not possible
            isr = np.array([s == "R" for s in sides], dtype=np.bool_)
            iss = np.array([s == "S" for s in sides], dtype=np.bool_)
        ok = isr | iss
        out[iss] = 1
    for i in np.flatnonzero(~ok).tolist():
        if valid[i]:
            x = arr[i].item() if isinstance(arr[i], np.generic) else arr[i]
            reasons[i] = f"side must be 'R' or 'S' (or 0/1), got {x!r}"
        valid[i] = False
    return out


def _float_column(name: str, col: Any, n: int, valid: np.ndarray,
                  reasons: dict[int, str]) -> np.ndarray:
    """float64 column; a non-number (str, bool, None) or a non-finite value is INVALID."""
    arr = col if isinstance(col, np.ndarray) else None
    if arr is None:
        try:
            arr = np.asarray(col)
        except (TypeError, ValueError, OverflowError):
            arr = np.asarray(list(col), dtype=object)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{name} must be a one-dimensional column of {n} numbers")
    if arr.dtype.kind in "fiu":
        arr = arr.astype(np.float64, copy=False)
    else:  # objects, strings, bools: one check per element, as ``Event`` does
        out = np.full(n, np.nan, dtype=np.float64)
        elems = col if isinstance(col, np.ndarray) else list(col)
        for i, x in enumerate(elems):
            if not isinstance(x, (bool, np.bool_)) and isinstance(
                    x, (int, float, np.integer, np.floating)):
                with contextlib.suppress(OverflowError):  # an int beyond float: stays NaN
                    out[i] = float(x)
        arr = out
    bad = ~np.isfinite(arr)
    if bad.any():
        for i in np.flatnonzero(bad).tolist():
            if valid[i]:
                x = col[i].item() if isinstance(col[i], np.generic) else col[i]
                reasons[i] = f"event {name[:-1]} must be a finite number, got {x!r}"
            valid[i] = False
        arr = np.where(bad, 0.0, arr)
    return np.ascontiguousarray(arr, dtype=np.float64)


def _time_column(col: Any, n: int, valid: np.ndarray, reasons: dict[int, str]) -> np.ndarray:
    """int64 times; an element that is not an integer in [TIME_MIN, TIME_MAX] is INVALID."""
    arr = col if isinstance(col, np.ndarray) else None
    if arr is None:
        try:
            arr = np.asarray(col)
        except (TypeError, ValueError, OverflowError):
            arr = np.asarray(list(col), dtype=object)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"times must be a one-dimensional column of {n} integers")
    if arr.dtype.kind == "u":
        bad = arr > TIME_MAX
        arr = np.where(bad, 0, arr).astype(np.int64)
    elif arr.dtype.kind == "i":
        arr = arr.astype(np.int64, copy=False)
        bad = (arr < TIME_MIN) | (arr > TIME_MAX)
    else:  # floats, objects, strings (a time is an integer, as ``Event``'s): one check per element
        out = np.zeros(n, dtype=np.int64)
        bad = np.zeros(n, dtype=np.bool_)
        elems = col if isinstance(col, np.ndarray) else list(col)
        for i, x in enumerate(elems):
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)) \
                    or not TIME_MIN <= int(x) <= TIME_MAX:
                bad[i] = True
            else:
                out[i] = int(x)
        arr = out
    if bad.any():
        for i in np.flatnonzero(bad).tolist():
            if valid[i]:
                x = col[i].item() if isinstance(col[i], np.generic) else col[i]
                reasons[i] = f"event time must be an integer in [-2**61, 2**61], got {x!r}"
            valid[i] = False
        arr = np.where(bad, 0, arr)
    return np.ascontiguousarray(arr, dtype=np.int64)


def check_ids(ids: Sequence[Any], valid: np.ndarray, reasons: dict[int, str]) -> list[Any]:
    """The ids as a list; an empty or non-string id marks its event invalid."""
    lst = ids.tolist() if isinstance(ids, np.ndarray) else list(ids)
    # fast path, two C-level loops (~13 µs per 1,000 ids; a set of types and a scan of
    # lengths took ~27)
    if all(map(str.__instancecheck__, lst)) and "" not in lst:
        return lst
    for i, x in enumerate(lst):
        if not isinstance(x, str) or not x:
            if valid[i]:
                reasons[i] = f"event id must be a non-empty string, got {x!r}"
            valid[i] = False
    return lst


def _end_column(col: Any, times: np.ndarray, n: int, valid: np.ndarray,
                reasons: dict[int, str]) -> np.ndarray:
    """int64 ends (``Event.end``): an element that is not an integer in [TIME_MIN, TIME_MAX] or
    lies before its event's time is INVALID (with the reason ``Event`` gives)."""
    mine: dict[int, str] = {}
    ok = np.ones(n, dtype=np.bool_)
    arr = _time_column(col, n, ok, mine)
    for i in np.flatnonzero(~ok).tolist():
        if valid[i]:
            x = col[i].item() if isinstance(col[i], np.generic) else col[i]
            reasons[i] = f"event end must be an integer in [-2**61, 2**61], got {x!r}"
        valid[i] = False
    early = ok & (arr < times)
    for i in np.flatnonzero(early).tolist():
        if valid[i]:
            reasons[i] = f"event end {int(arr[i])} is before its time {int(times[i])}"
        valid[i] = False
    return np.where(ok & ~early, arr, times)


def publish_columns(sides: Any, ids: Sequence[Any], keys: Any, values: Any, times: Any,
                    payloads: Sequence[Any] | None, ends: Any = None) -> Columns:
    """Check a publish batch's columns; ValueError (nothing changed) when their lengths differ.
    ``ends`` (None: all points): each event's end, ``== time`` for a point."""
    n = check_lengths(sides=sides, ids=ids, keys=keys, values=values, times=times,
                      payloads=payloads, ends=ends)
    valid = np.ones(n, dtype=np.bool_)
    reasons: dict[int, str] = {}
    side = side_codes(sides, n, valid, reasons)
    id_list = check_ids(ids, valid, reasons)
    k = _float_column("keys", keys, n, valid, reasons)
    v = _float_column("values", values, n, valid, reasons)
    t = _time_column(times, n, valid, reasons)
    pl: list[bytes] | None = None
    if payloads is not None:
        pl = list(payloads)
        for i, p in enumerate(pl):
            if p is None:
                pl[i] = b""
            elif not isinstance(p, (bytes, bytearray, memoryview)):
                if valid[i]:
                    reasons[i] = f"event payload must be bytes, got {type(p).__name__}"
                valid[i] = False
    e = None if ends is None else _end_column(ends, t, n, valid, reasons)
    return Columns(side, id_list, k, v, t, pl, valid, reasons, e)


# -- admission ----------------------------------------------------------------------------------
OK, LATE, DUPLICATE, INVALID, NOT_FOUND = (int(s) for s in EventStatus)


@kernel
def _admit_publish(valid: np.ndarray, code: np.ndarray, times: np.ndarray, ends: np.ndarray,
                   stored: np.ndarray, stored_time: np.ndarray, has_max: bool, max_time: int, lateness: int,
                   has_ret: bool, retention: int, max_advance: int, bound: int, seq0: int,
                   status: np.ndarray, seqs: np.ndarray,
                   maxes: np.ndarray) -> tuple[bool, int, int]:
    """Admission of n events in order, as one at a time (arrays of length n; ``code`` indexes
    ``stored``).

    ``stored[c]``/``stored_time[c]``: whether (side, id) code c is stored and its end (its time
    for a point; ``ends[i]`` event i's); a stored tuple with ``end + retention < W`` has been
    dropped by retention. ``bound``: the largest
    time the next event may have (the clock + ``max_advance``, int64 max when unbounded); it
    moves with the clock to ``max_time + max_advance`` (``max_advance`` int64 max: no bound).
    Checks in order: INVALID column, DUPLICATE, LATE, then INVALID beyond ``bound`` — so a
    kernel INVALID on a ``valid`` event means "too far ahead". Writes ``status``, ``seqs`` (0
    where rejected) and ``maxes`` (largest time after event i if it was accepted, before it if
    rejected); returns the final (has_max, max_time, seq). O(n).
    """
    s = seq0
    for i in range(times.shape[0]):
        maxes[i] = max_time
        if not valid[i]:
            status[i] = INVALID
            continue
        c = code[i]
        t = times[i]
        if stored[c]:
            gone = has_ret and has_max and stored_time[c] + retention < max_time - lateness
            if not gone:
                status[i] = DUPLICATE
                continue
        if has_max and t < max_time - lateness:
            status[i] = LATE
            continue
        if t > bound:
            status[i] = INVALID
            continue
        status[i] = OK
        s += 1
        seqs[i] = s
        if not has_max or t > max_time:
            max_time = t
            has_max = True
            # t + max_advance clipped at int64 max, without overflow (|t| <= 2^61)
            bound = t + max_advance if t < 0 or max_advance <= _I64_MAX - t else _I64_MAX
        maxes[i] = max_time
        stored[c] = True
        stored_time[c] = ends[i]
    return has_max, max_time, s


@dataclass
class Admission:
    """Outcome of :func:`admit_publish`: per-event status/seq/running max, and the new clock."""

    status: np.ndarray
    seqs: np.ndarray
    maxes: np.ndarray
    max_time: int | None
    seq: int
    ahead: np.ndarray | None = None
    """Mask of the events rejected as more than ``max_advance`` ahead (INVALID with a reason
    :func:`rejection_reasons` builds); None when no event was."""
    before: int | None = None
    """The clock before the batch, exact (``maxes`` holds it clipped to ±2^62)."""


def id_codes(side: np.ndarray, ids: list[Any], valid: np.ndarray,
             tables: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dense code per distinct (side, id) of the valid events (R ids first, then S ids), and per
    code whether ``tables[side]`` stores that id now and its end (``ends``, or ``times`` for a
    table that keeps no ends: all points). C-level loops only."""
    n = len(ids)
    code = np.zeros(n, dtype=np.int64)
    stored: list[np.ndarray] = []
    stored_time: list[np.ndarray] = []
    m = 0
    for sd in (0, 1):
        mine = valid & (side == sd)
        if not mine.any():
            continue
        if mine.all():
            sub = ids
        else:
            sel = np.flatnonzero(mine)
            sub = [ids[i] for i in sel.tolist()]
        first = dict.fromkeys(sub)  # distinct ids in order of first appearance
        if len(first) == len(sub):  # the common case, no id twice: codes in order
            c = np.arange(m, m + len(sub), dtype=np.int64)
        else:
            index = dict(zip(first, range(m, m + len(first)), strict=True))
            c = np.fromiter(map(index.__getitem__, sub), dtype=np.int64, count=len(sub))
        if sub is ids:
            code = c
        else:
            code[sel] = c
        m += len(first)
        slot_of = tables[sd].slot_of
        if slot_of.keys().isdisjoint(first):  # the common case, no id stored: one C-level pass
            stored.append(np.zeros(len(first), dtype=np.bool_))
            stored_time.append(np.zeros(len(first), dtype=np.int64))
            continue
        slots = np.fromiter(map(slot_of.get, first, repeat(-1, len(first))),
                            dtype=np.int64, count=len(first))
        hit = slots >= 0
        stored.append(hit)
        col = getattr(tables[sd], "ends", None)
        col = tables[sd].times if col is None else col
        stored_time.append(np.where(hit, col[np.where(hit, slots, 0)], 0))
    if not stored:
        return code, np.zeros(1, dtype=np.bool_), np.zeros(1, dtype=np.int64)
    return code, np.concatenate(stored), np.concatenate(stored_time).astype(np.int64)


def admit_publish(cols: Columns, tables: Sequence[Any], lateness: int, retention: int | None,
                  max_time: int | None, seq: int, max_advance: int | None = None) -> Admission:
    """Admit a publish batch against the stored tuples of ``tables`` (R, S) and the clock.

    ``max_advance`` (None or 0: no bound): an event whose time exceeds the largest time seen so
    far by more than this is INVALID (``Admission.ahead``); the first event of a topic is not
    bounded. Changes nothing; the engine applies the accepted events afterwards. O(n) dict
    lookups plus one compiled pass.
    """
    n = cols.times.shape[0]
    code, stored, stored_time = id_codes(cols.side, cols.ids, cols.valid, tables)
    status = np.zeros(n, dtype=np.int8)
    seqs = np.zeros(n, dtype=np.int64)
    maxes = np.zeros(n, dtype=np.int64)
    adv = _I64_MAX if not max_advance else min(int(max_advance), _I64_MAX)
    # the first bound from the exact clock (Python ints), clipped: batch times lie in ±2^61
    bound = (_I64_MAX if max_time is None or not max_advance
             else max(min(int(max_time) + int(max_advance), _I64_MAX), -_I64_MAX))
    has_max, mt, s = _admit_publish(
        cols.valid, code, cols.times, cols.times if cols.ends is None else cols.ends, stored, stored_time, max_time is not None,
        0 if max_time is None else _clip_time(max_time), min(lateness, _CLIP),
        retention is not None, 0 if retention is None else min(retention, _CLIP), adv, bound,
        int(seq), status, seqs, maxes)
    ok = status == OK
    moved = bool(ok.any()) and (max_time is None or int(cols.times[ok].max()) > max_time)
    ahead = (status == INVALID) & cols.valid
    return Admission(status, seqs, maxes, int(mt) if moved else max_time, int(s),
                     ahead if ahead.any() else None, max_time)


def rejection_reasons(cols: Columns, adm: Admission, lateness: int,
                      max_advance: int | None = None) -> dict[int, str]:
    """Per rejected event of an admitted batch, its one-line reason (invalid ones keep theirs;
    one beyond ``max_advance`` gets :func:`~hotjoin.matcher.errors.ahead_reason`, the message the
    one-at-a-time publish raises)."""
    reasons = dict(cols.reasons)
    status = adm.status
    for i in np.flatnonzero((status != OK) & (status != INVALID)).tolist():
        side = "S" if int(cols.side[i]) else "R"
        reasons[i] = reason_for(int(status[i]), side, cols.ids[i], int(cols.times[i]),
                                int(adm.maxes[i]) - lateness)
    if adm.ahead is not None:
        for i in np.flatnonzero(adm.ahead).tolist():
            m = int(adm.maxes[i])
            if abs(m) == _CLIP and adm.before is not None:  # batch times never reach ±2^62
                m = adm.before
            reasons[i] = ahead_reason(int(cols.times[i]), m, int(max_advance or 0))
    return reasons


def _clip_time(t: int) -> int:
    """A stored clock beyond ±2^61 (from the one-at-a-time path) as an int64 the kernel can use."""
    return max(min(int(t), _CLIP), -_CLIP)


def reason_for(status: int, side: str, event_id: str, time: int = 0,
               watermark: int | None = None) -> str:
    """One-line reason of a rejected event: the message the one-at-a-time call's exception
    (``matcher.errors``) carries, so both paths tell a client the same thing."""
    if status == DUPLICATE:
        return str(DuplicateEventError(side, event_id).args[0])
    if status == LATE:
        return str(LateEventError(side, event_id, time, watermark).args[0])
    if status == NOT_FOUND:
        return str(UnknownEventError(side, event_id).args[0])
    return "invalid event"
