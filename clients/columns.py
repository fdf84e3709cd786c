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
            payloads: Any = None) -> pb.EventColumns:
    """A columnar batch (``PublishRequest.columns``) from numpy arrays, lists or Arrow arrays.

    ``sides``: ``"R"``/``"S"`` strings, or integers with 0 = R and 1 = S (any other value is sent
    as an invalid side, which the server rejects for that event only). ``ids``: strings, empty
    for a server-assigned id. ``times``: None = the server's clock for every event. ``payloads``:
    bytes per event or None. Built with C-level conversions, no Python object per event beyond
    the id strings. A column of another length than ``ids`` is sent as it is and rejected by the
    server (INVALID_ARGUMENT, nothing applied).
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
    return out


def columns_from_arrow(batch: Any) -> pb.EventColumns:
    """``columns`` of an Arrow record batch or table with columns side, id, key, value and
    optionally time and payload (a null time or id: server-assigned)."""
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
    return columns(batch.column("side").cast(pa.string()), ids, batch.column("key").cast(pa.float64()),
                   batch.column("value").cast(pa.float64()), times, payloads)




class MatchColumns:
    """Matches as columns: row i is subscription ``subscription_id[i]``'s message at ``seq[i]``
    with ``sign[i]`` and ``count[i]`` pairs, triggered by operation ``op[i]`` on event
    ``(event_side[i], event_id[i])`` received at ``received_unix_nanos[i]``. PAIRS rows carry
    their pairs: pair j belongs to row ``pair_row[j]`` and is ``(r_id[j], s_id[j])``."""

    __slots__ = ("subscription_id", "seq", "sign", "count", "op", "event_side", "event_id",
                 "received_unix_nanos", "pair_row", "r_id", "s_id")

    def __init__(self, subscription_id: np.ndarray, seq: np.ndarray, sign: np.ndarray, count: np.ndarray,
                 op: np.ndarray, event_side: np.ndarray, event_id: np.ndarray, received_unix_nanos: np.ndarray,
                 pair_row: np.ndarray, r_id: np.ndarray, s_id: np.ndarray) -> None:
        self.subscription_id, self.seq, self.sign, self.count = subscription_id, seq, sign, count
        self.op, self.event_side, self.event_id = op, event_side, event_id
        self.received_unix_nanos = received_unix_nanos
        self.pair_row, self.r_id, self.s_id = pair_row, r_id, s_id

    def __len__(self) -> int:
        return int(self.subscription_id.shape[0])

    @staticmethod
    def of_batch(mb: Any) -> MatchColumns:
        """Columns of a ``MatchBatch`` (typed or wire); the per-operation table is expanded with
        one take."""
        mb = getattr(mb, "wire", mb)
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

    def to_arrow(self) -> Any:
        """The rows as an Arrow record batch (pairs left out; see ``pairs_arrow``)."""
        import pyarrow as pa

        return pa.record_batch(
            [pa.array(self.subscription_id), pa.array(self.seq), pa.array(self.sign), pa.array(self.count),
             pa.array(self.op, pa.string()), pa.array(self.event_side, pa.string()),
             pa.array(self.event_id, pa.string()), pa.array(self.received_unix_nanos)],
            names=["subscription_id", "seq", "sign", "count", "op", "event_side", "event_id",
                   "received_unix_nanos"])

    def pairs_arrow(self) -> Any:
        """The pairs as an Arrow record batch (subscription_id, seq, sign, r_id, s_id)."""
        import pyarrow as pa

        r = self.pair_row
        return pa.record_batch(
            [pa.array(self.subscription_id[r]), pa.array(self.seq[r]), pa.array(self.sign[r]),
             pa.array(self.r_id, pa.string()), pa.array(self.s_id, pa.string())],
            names=["subscription_id", "seq", "sign", "r_id", "s_id"])


__all__ = ["MatchColumns", "columns", "columns_from_arrow"]
