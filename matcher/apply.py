"""The batch apply path: accepted operations applied as runs of same-side events (paper 004 §3).

``Engine.publish_batch`` / ``delete_batch`` / ``publish_admitted`` / ``probe_batch``
(``matcher/engine.py``) give the same results as their one-at-a-time twins, but match a whole
run of consecutive same-side events with one call per kind (``KindIndex.match_many`` on one
:class:`~matcher.joins.interface.EventRun`), so the hot loops stay in each kind's compiled
``*_many`` kernels and no Python object is built per event or pair. Admission and the result
types are ``matcher/batch.py``'s; this module applies what admission accepted:

* a run of publishes is matched against the other side (whose content only retention can change
  inside a run: the run is cut into segments at the next expiry, each seeing exactly what its
  events would see one at a time), then stored with one ``BaseTable.insert_many``;
* a topic whose kinds are all equi-joins skips the events whose key has no stored partner, and
  hands the kinds the key groups it looked up (one compiled lookup for the run);
* each kind's rows ``(position, q, x)`` are merged stably by event (kinds in registry order
  within an event, as one at a time) into batch-output columns.

:class:`BatchApply` is mixed into ``Engine``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.batch import (
    BatchOutput,
    BatchResult,
    EventStatus,
    admit_publish,
    check_ids,
    check_lengths,
    check_output,
    empty_output,
    publish_columns,
    reason_for,
    rejection_reasons,
    side_codes,
)
from hotjoin.matcher.joins.interface import EventRun, KindIndex
from hotjoin.matcher.joins.protocol import COUNT, PAIRS, BatchRows, MatchBuffer
from hotjoin.matcher.kinds import KINDS
from hotjoin.matcher.model import Side
from hotjoin.matcher.subscriptions import SubscriptionColumns

OTHER: dict[Side, Side] = {"R": "S", "S": "R"}
SIDE_NAMES: tuple[Side, Side] = ("R", "S")
BATCH_MODES = {"pairs": PAIRS, "affected": COUNT, "none": -1}


class BatchApply:
    """The batch half of ``Engine``: runs of events through every kind's ``match_many``.
    Reads and writes the engine's own fields (declared below)."""

    tables: dict[Side, BaseTable]
    cols: SubscriptionColumns
    lateness: int
    retention: int | None
    max_advance: int | None
    _seq: int
    _max_time: int | None
    _buf: MatchBuffer
    _rows_buf: BatchRows

    def _active(self) -> list[KindIndex]:
        raise NotImplementedError  # the engine's (matcher/engine.py)

    def _match(self, side: Side, key: float, value: float, xseq: int, mode: int,
               time: int = 0, end: int | None = None) -> None:
        raise NotImplementedError  # the engine's (matcher/engine.py)

    def _publish_batch(self, sides: Any, ids: Any, keys: Any, values: Any, times: Any,
                       payloads: Any, output: str, ends: Any = None) -> BatchResult:
        """``Engine.publish_batch``: one compiled admission pass, then the accepted events."""
        mode = BATCH_MODES[check_output(output)]
        cols = publish_columns(sides, ids, keys, values, times, payloads, ends)
        adm = admit_publish(cols, (self.tables["R"], self.tables["S"]), self.lateness,
                            self.retention, self._max_time, self._seq, self.max_advance)
        status = adm.status
        reasons = rejection_reasons(cols, adm, self.lateness, self.max_advance)
        acc = np.flatnonzero(status == EventStatus.OK)
        parts: list[tuple[np.ndarray, ...]] = []
        if acc.shape[0]:
            self._apply_publishes(cols, adm.seqs, adm.maxes, acc, mode, parts)
        self._seq = adm.seq
        self._max_time = adm.max_time
        return BatchResult(status, adm.seqs, reasons, gather(parts, output, 1))

    def _publish_admitted(self, sides: Any, ids: Any, keys: Any, values: Any, times: Any,
                          payloads: Any, seqs: Any, maxes: Any, output: str,
                          ends: Any = None) -> BatchOutput:
        """``Engine.publish_admitted``: the columns checked, then applied as runs."""
        mode = BATCH_MODES[check_output(output)]
        cols = publish_columns(sides, ids, keys, values, times, payloads, ends)
        n = cols.times.shape[0]
        sq = np.asarray(seqs, dtype=np.int64).reshape(-1)
        mx = np.asarray(maxes, dtype=np.int64).reshape(-1)
        if sq.shape[0] != n or mx.shape[0] != n:
            raise ValueError(f"publish_admitted: {n} events but {sq.shape[0]} seqs and "
                             f"{mx.shape[0]} clocks")
        if n == 0:
            return gather([], output, 1)
        if not cols.valid.all():
            i = int(np.flatnonzero(~cols.valid)[0])
            raise ValueError(f"publish_admitted: event {i} is invalid: "
                             f"{cols.reasons.get(i, 'invalid event')}")
        if sq[0] <= self._seq or (n > 1 and bool((np.diff(sq) <= 0).any())):
            raise ValueError(f"publish_admitted: seqs must increase from after {self._seq}")
        if (n > 1 and bool((np.diff(mx) < 0).any())) or bool((mx < cols.times).any()) or (
                self._max_time is not None and int(mx[0]) < self._max_time):
            raise ValueError("publish_admitted: clocks must not go back nor lie below the "
                             "events' times")
        parts: list[tuple[np.ndarray, ...]] = []
        self._apply_publishes(cols, sq, mx, np.arange(n), mode, parts)
        self._seq = int(sq[-1])
        self._max_time = int(mx[-1])
        return gather(parts, output, 1)

    def _apply_publishes(self, cols: Any, seqs: np.ndarray, maxes: np.ndarray, acc: np.ndarray,
                         mode: int, parts: list[tuple[np.ndarray, ...]]) -> None:
        """Apply the accepted events ``acc`` (input indexes, ascending) run by run."""
        sd = cols.side[acc]
        cut = np.flatnonzero(sd[1:] != sd[:-1]) + 1
        starts = [0, *cut.tolist()]
        ends = [*cut.tolist(), acc.shape[0]]
        retention = self.retention
        for a, b in zip(starts, ends, strict=True):
            run = acc[a:b]
            if retention is not None:
                # an id published twice in one run (retention dropped the first): split there
                for piece in _split_repeats(run, cols.ids):
                    self._apply_run(cols, seqs, maxes, piece, mode, parts)
            else:
                self._apply_run(cols, seqs, maxes, run, mode, parts)

    def _apply_run(self, cols: Any, seqs: np.ndarray, maxes: np.ndarray, run: np.ndarray,
                   mode: int, parts: list[tuple[np.ndarray, ...]]) -> None:
        side = SIDE_NAMES[int(cols.side[run[0]])]
        own, other = self.tables[side], self.tables[OTHER[side]]
        lateness, retention = self.lateness, self.retention
        keys, values, times = cols.keys[run], cols.values[run], cols.times[run]
        ends = times if cols.ends is None else cols.ends[run]
        run_seqs, run_max = seqs[run], maxes[run]
        if mode >= 0:
            self._match_run(side, other, run, keys, values, times, run_seqs, run_max, mode,
                            cols, parts, ends)
        m = int(run_max[-1])
        self._max_time = m
        if retention is not None:
            limit = m - lateness - retention
            other.expire_before(limit)
            own.expire_before(limit)
        a, b = int(run[0]), int(run[-1]) + 1
        if b - a == run.shape[0]:  # contiguous (no rejected event inside): slices
            ids = cols.ids[a:b]
            pl = None if cols.payloads is None else cols.payloads[a:b]
        else:
            ids = [cols.ids[i] for i in run.tolist()]
            pl = None if cols.payloads is None else [cols.payloads[i] for i in run.tolist()]
        own.insert_many(ids, keys, values, times, run_seqs, pl, ends)
        if retention is not None:
            own.expire_before(m - lateness - retention)

    def _match_run(self, side: Side, other: BaseTable, run: np.ndarray, keys: np.ndarray,
                   values: np.ndarray, times: np.ndarray, run_seqs: np.ndarray,
                   run_max: np.ndarray, mode: int, cols: Any,
                   parts: list[tuple[np.ndarray, ...]], ends: np.ndarray | None = None) -> None:
        """Match a run of same-side events against ``other`` with one ``match_many`` call per
        kind and segment, rows appended to ``parts`` in event order.

        The other side changes inside a run only by retention; a segment is a stretch of
        events during which no stored tuple expires, found from the next expiry time
        (``BaseTable.next_expiry``) and the events' limits, so a segment sees exactly what each
        of its events would see one at a time. When every kind with subscriptions is an
        equi-join (``KindSpec.key_index``), the events whose key has no partner on the other
        side are skipped (a stale hit is harmless), and without retention the kinds are handed
        the key groups looked up here (nothing changes the table before they match). ``ends``:
        the events' ends (None: points), for interval joins."""
        active = self._active()
        if not active:
            return
        groups = None
        if all(KINDS[index.kind].key_index for index in active):
            ix = other.key_index
            assert ix is not None
            gs = ix.lookup_many(keys)
            todo = np.flatnonzero(gs >= 0)
            if self.retention is None:
                groups = gs[todo]
        else:
            todo = np.arange(run.shape[0])
        n = todo.shape[0]
        if n == 0:
            return
        retention, lateness = self.retention, self.lateness
        limits = None if retention is None else run_max[todo] - lateness - retention
        dirn = 1 if side == "R" else -1
        rows, buf = self._rows_buf, self._buf
        a = 0
        while a < n:
            b = n
            if limits is not None:
                other.expire_before(int(limits[a]))
                t = other.next_expiry()
                if t is not None:
                    b = max(a + 1, int(np.searchsorted(limits, t, side="right")))
            self._max_time = int(run_max[todo[b - 1]])
            if len(other):
                idx = todo[a:b]
                events = EventRun(dirn, keys[idx], values[idx], times[idx], run_seqs[idx],
                                 run_max[idx] - lateness, other, mode, buf, rows,
                                 None if groups is None else groups[a:b],
                                 ends=None if ends is None else ends[idx])
                got = []
                for index in active:
                    index.match_many(events)
                    got.append(rows.take())
                self._add_rows(got, run[idx], side, mode, other, cols, parts)
            a = b

    def _add_rows(self, got: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
                  events: np.ndarray, side: Side, mode: int, other: BaseTable, cols: Any,
                  parts: list[tuple[np.ndarray, ...]]) -> None:
        """Rows ``(position, q, x)`` of each kind, merged stably by event (kinds in band,
        select, window order within an event, as one at a time), as batch-output columns."""
        got = [g for g in got if g[0].shape[0]]
        if not got:
            return
        if len(got) == 1:
            e, q, x = got[0]
        else:
            e = np.concatenate([g[0] for g in got])
            order = np.argsort(e, kind="stable")
            e = e[order]
            q = np.concatenate([g[1] for g in got])[order]
            x = np.concatenate([g[2] for g in got])[order]
        # batch positions, written over the run positions (``e`` is this call's own column:
        # no fresh column of millions of rows on output-heavy batches; every index is valid,
        # so ``clip`` only spares numpy the buffered copy of its ``raise`` mode)
        ev = np.take(events, e, out=e, mode="clip")
        if mode == PAIRS:
            partner = other.ids_of(x)
            mine = np.empty(ev.shape[0], dtype=object)
            id_list = cols.ids
            mine[:] = [id_list[i] for i in ev.tolist()]
            parts.append((ev, q, None, (mine, partner) if side == "R" else (partner, mine)))
        else:
            parts.append((ev, q, x, None))

    def _rows(self, event: int, side: Side, x_id: str, mode: int,
              other: BaseTable) -> tuple[np.ndarray, ...]:
        """The current ``self._buf`` output of input event ``event`` as batch-output columns."""
        buf = self._buf
        n = buf.n
        q = buf.out_q[:n].copy()
        ev = np.full(n, event, dtype=np.int64)
        if mode == PAIRS:
            partner = other.ids_of(buf.out_s[:n])
            mine = np.empty(n, dtype=object)
            mine[:] = x_id
            return (ev, q, None, (mine, partner) if side == "R" else (partner, mine))
        return (ev, q, self.cols.acc[q], None)

    def _delete_batch(self, sides: Any, ids: Any, output: str) -> BatchResult:
        """``Engine.delete_batch``: each delete found or not, then the runs matched and removed."""
        mode = BATCH_MODES[check_output(output)]
        n = check_lengths(sides=sides, ids=ids)
        valid = np.ones(n, dtype=np.bool_)
        reasons: dict[int, str] = {}
        sd = side_codes(sides, n, valid, reasons)
        id_list = check_ids(ids, valid, reasons)
        status = np.full(n, int(EventStatus.INVALID), dtype=np.int8)
        seqs = np.zeros(n, dtype=np.int64)
        gone: set[tuple[int, str]] = set()
        slot_maps = (self.tables["R"].slot_of, self.tables["S"].slot_of)
        seq = self._seq
        sdl, vl = sd.tolist(), valid.tolist()
        for i in range(n):
            if not vl[i]:
                continue
            x = id_list[i]
            if x in slot_maps[sdl[i]] and (sdl[i], x) not in gone:
                gone.add((sdl[i], x))
                seq += 1
                seqs[i] = seq
                status[i] = EventStatus.OK
            else:
                status[i] = EventStatus.NOT_FOUND
                reasons[i] = reason_for(int(EventStatus.NOT_FOUND), SIDE_NAMES[sdl[i]], x)
        parts: list[tuple[np.ndarray, ...]] = []
        acc = np.flatnonzero(status == EventStatus.OK)
        if acc.shape[0] and mode >= 0 and self._max_time is not None:
            # runs of same-side deletes: deleting a tuple never changes the other side, and
            # the clock does not move, so a run is matched like a run of publishes (one
            # ``match_many`` per kind), then its tuples are removed
            sd_acc = sd[acc]
            cut = np.flatnonzero(sd_acc[1:] != sd_acc[:-1]) + 1
            by_id = _Ids(id_list)
            for run in np.split(acc, cut):
                side = SIDE_NAMES[int(sd[run[0]])]
                table = self.tables[side]
                slots = np.fromiter(map(table.slot_of.__getitem__, [id_list[i] for i in run]),
                                    dtype=np.int64, count=run.shape[0])
                self._match_run(side, self.tables[OTHER[side]], run, table.keys[slots],
                                table.values[slots], table.times[slots], table.seqs[slots],
                                np.full(run.shape[0], self._max_time, dtype=np.int64), mode,
                                by_id, parts, table.ends[slots])
                for i in run.tolist():
                    table.remove(id_list[i])
        else:
            for i in acc.tolist():
                side = SIDE_NAMES[sdl[i]]
                table = self.tables[side]
                if mode >= 0:
                    slot = table.slot_of[id_list[i]]
                    self._match(side, float(table.keys[slot]), float(table.values[slot]),
                                int(table.seqs[slot]), mode, int(table.times[slot]),
                                int(table.ends[slot]))
                    if self._buf.n:
                        parts.append(self._rows(i, side, id_list[i], mode,
                                                self.tables[OTHER[side]]))
                table.remove(id_list[i])
        self._seq = seq
        return BatchResult(status, seqs, reasons, gather(parts, output, -1))

    def _probe_batch(self, side: Side, ks: np.ndarray, vs: np.ndarray, ts: np.ndarray,
                     mode: int, es: np.ndarray | None = None) -> np.ndarray:
        """``Engine.probe_batch``: the rows each tuple would output, counted per tuple."""
        n = ks.shape[0]
        counts = np.zeros(n, dtype=np.int64)
        other = self.tables[OTHER[side]]
        active = self._active()
        if n == 0 or len(other) == 0 or not active:
            return counts
        rows = self._rows_buf
        w = None if self._max_time is None else self._max_time - self.lateness
        run = EventRun(1 if side == "R" else -1, ks, vs, ts,
                      np.full(n, self._seq + 1, dtype=np.int64),
                      ts if w is None else np.full(n, w, dtype=np.int64), other, mode,
                      self._buf, rows, ends=es)
        for index in active:
            index.match_many(run)
            counts += rows.count_by_event(n)
        return counts


class _Ids(NamedTuple):
    """The ``ids`` column ``BatchApply._match_run`` reads for PAIRS rows (a delete batch's ids)."""

    ids: list[Any]


def _split_repeats(run: np.ndarray, ids: list[Any]) -> list[np.ndarray]:
    """Cut a run of same-side events before each id already seen in the current piece."""
    pieces: list[np.ndarray] = []
    seen: set[str] = set()
    a = 0
    for j, i in enumerate(run.tolist()):
        if ids[i] in seen:
            pieces.append(run[a:j])
            seen = set()
            a = j
        seen.add(ids[i])
    pieces.append(run[a:])
    return pieces


def gather(parts: list[tuple[np.ndarray, ...]], output: str, sign: int) -> BatchOutput:
    """Concatenate per-event output columns into one ``BatchOutput`` (rows in event order)."""
    if not parts or output == "none":
        return empty_output(output)
    def cat(i: int) -> np.ndarray:  # a batch of one run: its columns as they are, no copy
        return parts[0][i] if len(parts) == 1 else np.concatenate([p[i] for p in parts])

    ev, q = cat(0), cat(1)
    signs = np.full(ev.shape[0], sign, dtype=np.int8)
    if output == "pairs":
        r_id = np.concatenate([p[3][0] for p in parts])
        s_id = np.concatenate([p[3][1] for p in parts])
        return BatchOutput(ev, q, signs, np.full(ev.shape[0], sign, dtype=np.int64), r_id, s_id)
    counts = cat(2).astype(np.int64, copy=False)
    return BatchOutput(ev, q, signs, counts if sign == 1 else counts * sign, None, None)

