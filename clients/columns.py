"""Columns in and out: publish batches built from numpy, lists or Arrow, matches as numpy columns.

``columns`` builds one columnar publish batch (``PublishRequest.columns``) with C-level
conversions, no Python object per event beyond the id strings; ``columns_from_arrow`` does the
same for an Arrow record batch or table (what ``hotjoin publish`` sends). ``MatchColumns`` is
what ``listen_columns`` yields: one row per match, numpy arrays, ``.to_arrow()`` for Arrow.

>>> cols = columns(["R", "S"], ["r1", ""], [1.0, 2.0], [0.0, 0.5], times=[5, 6])
>>> bytes(cols.sides), list(cols.ids), list(cols.times)
(b'\\x01\\x02', ['r1', ''], [5, 6])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hotjoin.proto import hotjoin_pb2 as pb

_SIDE_NAME = {pb.SIDE_R: "R", pb.SIDE_S: "S"}


def _np(col: Any, dtype: Any = None) -> np.ndarray:
    """A numpy view/copy of a numpy array, list or Arrow (Chunked)Array."""
    if hasattr(col, "to_numpy") and not isinstance(col, np.ndarray):
        col = col.to_numpy(zero_copy_only=False)
    return np.asarray(col, dtype=dtype)


def columns(sides: Any, ids: Any, keys: Any, values: Any, times: Any = None,
            payloads: Any = None, ends: Any = None) -> pb.EventColumns:
    """A columnar batch (``PublishRequest.columns``) from numpy arrays, lists or Arrow arrays.

    ``sides``: ``"R"``/``"S"`` strings, or integers with 0 = R and 1 = S (any other value is sent
    as an invalid side, which the server rejects for that event only). ``ids``: strings, empty
    for a server-assigned id. ``times``: None = the server's clock for every event. ``payloads``:
    bytes per event or None. ``ends``: interval ends (``Event.end``) per event, None = every
    event a point; a point in an ends column has ``end == time`` (or a null end, which needs
    ``times``). Built with C-level conversions, no Python object per event beyond
    the id strings. A column of another length than ``ids`` is sent as it is and rejected by the
    server (INVALID_ARGUMENT, nothing applied).

    >>> list(columns(["R"], ["r1"], [1.0], [2.0], [5], ends=[9]).ends)
    [9]
    """
    s = _np(sides)
    if s.dtype.kind in "iu":
        code = np.where((s == 0) | (s == 1), s + 1, 0).astype(np.uint8)
    else:
        code = np.zeros(len(s), dtype=np.uint8)
        code[s == "R"] = pb.SIDE_R
        code[s == "S"] = pb.SIDE_S
    id_col = _np(ids, object)
    id_col = np.where(np.equal(id_col, None), "", id_col)  # None: a server-assigned id
    out = pb.EventColumns(sides=code.tobytes(), ids=id_col.astype(str).tolist(),
                          keys=_np(keys, np.float64).tolist(), values=_np(values, np.float64).tolist())
    if times is not None:
        out.times.extend(_np(times, np.int64).tolist())
    if payloads is not None:
        pl = payloads.to_pylist() if hasattr(payloads, "to_pylist") else list(payloads)
        if any(pl):
            out.payloads.extend(b"" if p is None else bytes(p) for p in pl)
    if ends is not None:
        out.ends.extend(_ends(ends, times))
    return out


def _ends(ends: Any, times: Any) -> list[int]:
    """The ``ends`` column as integers: a null end is a point (its time; needs ``times``)."""
    e = _np(ends, object)
    null = np.equal(e, None)
    if null.any():
        if times is None:
            raise ValueError("column end: a null end (a point) needs the event's time")
        t = _np(times, np.int64)
        if len(t) == len(e):
            e = np.where(null, t, e)
    return np.asarray(e, dtype=np.int64).tolist()


def columns_from_arrow(batch: Any) -> pb.EventColumns:
    """``columns`` of an Arrow record batch or table with columns side, id, key, value and
    optionally time, payload and end (a null time or id: server-assigned; a null end: a
    point)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = set(batch.schema.names)
    missing = {"side", "key", "value"} - names
    if missing:
        raise ValueError(f"missing column(s): {', '.join(sorted(missing))}")
    n = batch.num_rows
    ids = (pc.fill_null(batch.column("id").cast(pa.string()), "") if "id" in names
           else pa.array([""] * n))
    times = None
    if "time" in names:
        t = batch.column("time")
        if t.null_count == n:
            times = None
        elif t.null_count:
            raise ValueError("column time: either every event has a time or none (server clock)")
        else:
            times = t.cast(pa.int64())
    payloads = None
    if "payload" in names:
        payloads = pc.fill_null(batch.column("payload").cast(pa.binary()), b"")
    ends = None
    if "end" in names and batch.column("end").null_count < n:
        if times is None:
            raise ValueError("column end: interval ends need a time column")
        ends = pc.coalesce(batch.column("end").cast(pa.int64()), times)  # null: a point
    return columns(batch.column("side").cast(pa.string()), ids, batch.column("key").cast(pa.float64()),
                   batch.column("value").cast(pa.float64()), times, payloads, ends)




_KIND_NAMES = np.array(["publish", "delete", "snapshot"], dtype=object)
_SIDE_NAMES = np.array(["", "R", "S"], dtype=object)


def _strings(offsets: bytes, data: bytes) -> Any:
    """An Arrow string array over the message's bytes (int32 offsets, UTF-8 data): no copy."""
    import pyarrow as pa

    n = len(offsets) // 4 - 1
    if n <= 0:
        return pa.array([], pa.string())
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))


def _objects(col: Any) -> np.ndarray:
    """A numpy object array of an Arrow array (built on access) or the array itself."""
    if isinstance(col, np.ndarray):
        return col
    return col.to_numpy(zero_copy_only=False)  # type: ignore[no-any-return]


class MatchColumns:
    """Matches as columns: row i is subscription ``subscription_id[i]``'s message at ``seq[i]``
    with ``sign[i]`` and ``count[i]`` pairs, triggered by operation ``op[i]`` on event
    ``(event_side[i], event_id[i])`` received at ``received_unix_nanos[i]``. PAIRS rows carry
    their pairs: pair j belongs to row ``pair_row[j]`` and is ``(r_id[j], s_id[j])``.

    From a columnar ``MatchBatch`` (``Listen`` with ``columnar``, what ``listen_columns`` asks
    for) the numeric columns are numpy views of the message's bytes and the ids Arrow arrays
    over them (``r_id_arrow``, ``s_id_arrow``): nothing is built per row or pair. The object
    columns ``op``, ``event_side``, ``event_id``, ``r_id`` and ``s_id`` are numpy object arrays
    built on first access; ``to_arrow()``/``pairs_arrow()`` stay in Arrow.
    """

    __slots__ = ("subscription_id", "seq", "sign", "count", "received_unix_nanos", "pair_row",
                 "_op", "_event_side", "_event_id", "_r", "_s", "_opcols", "_pair_offsets")

    def __init__(self, subscription_id: np.ndarray, seq: np.ndarray, sign: np.ndarray, count: np.ndarray,
                 op: np.ndarray | None, event_side: np.ndarray | None, event_id: np.ndarray | None,
                 received_unix_nanos: np.ndarray, pair_row: np.ndarray, r_id: Any, s_id: Any) -> None:
        self.subscription_id, self.seq, self.sign, self.count = subscription_id, seq, sign, count
        self._op, self._event_side, self._event_id = op, event_side, event_id
        self.received_unix_nanos = received_unix_nanos
        self.pair_row, self._r, self._s = pair_row, r_id, s_id
        self._opcols: tuple[np.ndarray, np.ndarray, np.ndarray, Any] | None = None
        self._pair_offsets: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.subscription_id.shape[0])

    def __repr__(self) -> str:
        return f"MatchColumns({len(self)} rows, {len(self._r)} pairs)"

    @property
    def op(self) -> np.ndarray:
        """Row i's operation name (publish, delete, snapshot)."""
        if self._op is None:
            idx, kinds, _, _ = self._opcols  # type: ignore[misc]
            self._op = _KIND_NAMES[kinds][idx]
        return self._op

    @property
    def event_side(self) -> np.ndarray:
        """Row i's event side, "R" or "S" ("" for a snapshot)."""
        if self._event_side is None:
            idx, _, sides, _ = self._opcols  # type: ignore[misc]
            self._event_side = _SIDE_NAMES[np.minimum(sides, 2)][idx]
        return self._event_side

    @property
    def event_id(self) -> np.ndarray:
        """Row i's event id ("" for a snapshot)."""
        if self._event_id is None:
            idx, _, _, eids = self._opcols  # type: ignore[misc]
            self._event_id = _objects(eids)[idx]
        return self._event_id

    @property
    def r_id(self) -> np.ndarray:
        """Pair j's R id (an object array, built on first access)."""
        self._r = _objects(self._r)
        return self._r

    @property
    def s_id(self) -> np.ndarray:
        """Pair j's S id (an object array, built on first access)."""
        self._s = _objects(self._s)
        return self._s

    @property
    def r_id_arrow(self) -> Any:
        """The pairs' R ids as an Arrow string array (no copy from a columnar batch)."""
        import pyarrow as pa

        return self._r if not isinstance(self._r, np.ndarray) else pa.array(self._r, pa.string())

    @property
    def s_id_arrow(self) -> Any:
        """The pairs' S ids as an Arrow string array (no copy from a columnar batch)."""
        import pyarrow as pa

        return self._s if not isinstance(self._s, np.ndarray) else pa.array(self._s, pa.string())

    @property
    def pair_offsets(self) -> np.ndarray:
        """Row i's pairs are ``pair_offsets[i] .. pair_offsets[i+1] - 1`` (rows + 1 entries)."""
        if self._pair_offsets is None:
            per = np.bincount(self.pair_row, minlength=len(self)) if len(self.pair_row) else \
                np.zeros(len(self), dtype=np.int64)
            off = np.zeros(len(self) + 1, dtype=np.int64)
            np.cumsum(per, out=off[1:])
            self._pair_offsets = off
        return self._pair_offsets

    @staticmethod
    def of_columns(c: Any) -> MatchColumns:
        """Columns of a ``MatchBatchColumns`` (``MatchBatch.columns``): numpy views of its bytes,
        ids as Arrow arrays over them; O(1) per column plus ``pair_row`` (one ``np.repeat``)."""
        sids = np.frombuffer(c.subscription_ids, dtype="<i8")
        n = sids.shape[0]
        idx = np.frombuffer(c.op_index, dtype="<u4").astype(np.intp)
        kinds = np.frombuffer(c.op_kinds, dtype="u1")
        sides = np.frombuffer(c.op_sides, dtype="u1")
        rns = np.frombuffer(c.op_received_unix_nanos, dtype="<i8")
        eids = _strings(c.op_event_id_offsets, c.op_event_ids)
        if c.pair_offsets:
            off = np.frombuffer(c.pair_offsets, dtype="<i8")
            pair_row = np.repeat(np.arange(n, dtype=np.int64), np.diff(off))
            r, s = _strings(c.r_id_offsets, c.r_ids), _strings(c.s_id_offsets, c.s_ids)
        else:
            off = np.zeros(n + 1, dtype=np.int64)
            pair_row = np.zeros(0, dtype=np.int64)
            r = s = _strings(b"", b"")
        out = MatchColumns(sids, np.frombuffer(c.seqs, dtype="<i8"), np.frombuffer(c.signs, dtype="i1"),
                           np.frombuffer(c.counts, dtype="<i8"), None, None, None, rns[idx],
                           pair_row, r, s)
        out._opcols = (idx, kinds, sides, eids)
        out._pair_offsets = off
        return out

    def take(self, rows: np.ndarray) -> MatchColumns:
        """The rows ``rows`` (increasing) with their pairs, as new columns."""
        rows = np.asarray(rows, dtype=np.int64)
        off = self.pair_offsets
        lens = off[rows + 1] - off[rows]
        new = np.zeros(rows.shape[0] + 1, dtype=np.int64)
        np.cumsum(lens, out=new[1:])
        pidx = np.repeat(off[rows] - new[:-1], lens) + np.arange(int(new[-1]), dtype=np.int64)
        out = MatchColumns(self.subscription_id[rows], self.seq[rows], self.sign[rows],
                           self.count[rows], self.op[rows], self.event_side[rows],
                           self.event_id[rows], self.received_unix_nanos[rows],
                           np.repeat(np.arange(rows.shape[0], dtype=np.int64), lens),
                           self.r_id[pidx], self.s_id[pidx])
        out._pair_offsets = new
        return out

    @staticmethod
    def of_batch(mb: Any) -> MatchColumns:
        """Columns of a ``MatchBatch`` (typed or wire), of either form: the columnar one
        (``of_columns``) or the repeated fields, whose per-operation table is expanded with one
        take."""
        mb = getattr(mb, "wire", mb)
        if mb.HasField("columns"):
            return MatchColumns.of_columns(mb.columns)
        idx = np.array(mb.op_index, dtype=np.int64)
        ops = list(mb.ops)
        side = np.array([_SIDE_NAME.get(o.event.side, "") for o in ops], dtype=object)
        eid = np.array([o.event.id for o in ops], dtype=object)
        name = np.array([o.op for o in ops], dtype=object)
        rns = np.array([o.received_unix_nanos for o in ops], dtype=np.int64)
        n = len(idx)
        pair_row = (np.repeat(np.arange(n, dtype=np.int64), np.array(mb.pair_counts, dtype=np.int64))
                    if len(mb.pair_counts) else np.zeros(0, dtype=np.int64))
        r_id = np.empty(len(mb.r_ids), dtype=object)
        r_id[:] = list(mb.r_ids)
        s_id = np.empty(len(mb.s_ids), dtype=object)
        s_id[:] = list(mb.s_ids)
        return MatchColumns(np.array(mb.subscription_ids, dtype=np.int64), np.array(mb.seqs, dtype=np.int64),
                            np.array(mb.signs, dtype=np.int8), np.array(mb.counts, dtype=np.int64),
                            name[idx], side[idx], eid[idx], rns[idx], pair_row, r_id, s_id)

    @staticmethod
    def of_match(m: Any) -> MatchColumns:
        """One row of a single ``Match`` (typed or wire, with its pairs)."""
        if getattr(m, "wire", None) is None and hasattr(m, "wire"):  # typed, built by hand
            side, eid = (m.event.side, m.event.id) if m.event is not None else ("", "")
            return MatchColumns(
                np.array([m.subscription_id], dtype=np.int64), np.array([m.seq], dtype=np.int64),
                np.array([m.sign], dtype=np.int8), np.array([m.count], dtype=np.int64),
                np.array([m.op], dtype=object), np.array([side], dtype=object),
                np.array([eid], dtype=object), np.array([m.received_unix_nanos], dtype=np.int64),
                np.zeros(len(m.pairs), dtype=np.int64),
                np.array([r for r, _ in m.pairs], dtype=object),
                np.array([s for _, s in m.pairs], dtype=object))
        m = getattr(m, "wire", m)
        n = len(m.pairs)
        return MatchColumns(
            np.array([m.subscription_id], dtype=np.int64), np.array([m.seq], dtype=np.int64),
            np.array([m.sign], dtype=np.int8), np.array([m.count], dtype=np.int64),
            np.array([m.op], dtype=object), np.array([_SIDE_NAME.get(m.event.side, "")], dtype=object),
            np.array([m.event.id], dtype=object), np.array([m.received_unix_nanos], dtype=np.int64),
            np.zeros(n, dtype=np.int64), np.array([p.r_id for p in m.pairs], dtype=object),
            np.array([p.s_id for p in m.pairs], dtype=object))

    def _op_arrow(self) -> tuple[Any, Any, Any]:
        """(op, event_side, event_id) as Arrow arrays: a take on the operation table when the
        columns came from a columnar batch, else from the object columns."""
        import pyarrow as pa

        if self._opcols is not None:
            idx, kinds, sides, eids = self._opcols
            take = pa.array(idx.astype(np.int64))
            return (pa.array(_KIND_NAMES[kinds], pa.string()).take(take),
                    pa.array(_SIDE_NAMES[np.minimum(sides, 2)], pa.string()).take(take),
                    eids.take(take))
        return (pa.array(self.op, pa.string()), pa.array(self.event_side, pa.string()),
                pa.array(self.event_id, pa.string()))

    def to_arrow(self) -> Any:
        """The rows as an Arrow record batch (pairs left out; see ``pairs_arrow``)."""
        import pyarrow as pa

        op, side, eid = self._op_arrow()
        return pa.record_batch(
            [pa.array(self.subscription_id), pa.array(self.seq), pa.array(self.sign), pa.array(self.count),
             op, side, eid, pa.array(self.received_unix_nanos)],
            names=["subscription_id", "seq", "sign", "count", "op", "event_side", "event_id",
                   "received_unix_nanos"])

    def pairs_arrow(self) -> Any:
        """The pairs as an Arrow record batch (subscription_id, seq, sign, r_id, s_id)."""
        import pyarrow as pa

        r = self.pair_row
        return pa.record_batch(
            [pa.array(self.subscription_id[r]), pa.array(self.seq[r]), pa.array(self.sign[r]),
             self.r_id_arrow, self.s_id_arrow],
            names=["subscription_id", "seq", "sign", "r_id", "s_id"])


__all__ = ["MatchColumns", "columns", "columns_from_arrow"]
