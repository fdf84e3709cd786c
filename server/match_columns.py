"""Delivery messages as flat columns: the in-memory form of pairs and operations, and the one
encoder of ``MatchBatchColumns`` that both the Listen stream (``Listen`` with ``columnar``) and
the durable match log (``server/match_log.py``) use.

Tuple ids are strings in the engine (object arrays); here they become Arrow string arrays (one
UTF-8 blob and int32 offsets) once, when a batch's output becomes a chunk, so that selecting a
listener's rows is a vectorised index plus one Arrow ``take`` (or a zero-copy slice), and
encoding a message is a copy of buffers: no Python object per message or per pair on the way
from the engine to the wire or the disk. ``MatchBatchColumns`` (``proto/hotjoin/v1/hotjoin.proto``)
stores every numeric column as little-endian fixed-width bytes and every string column in
Arrow's layout, so a reader maps each column onto the message bytes with ``np.frombuffer`` or
``pa.StringArray.from_buffers``.

>>> pc = PairColumns(np.array([0, 0, 2]), ids_array(["r1", "r2"]), ids_array(["s1", "s2"]))
>>> table = OpTable(np.array([0], np.uint8), np.array([1], np.uint8), np.array([7]), ids_array(["r9"]))
>>> c = encode_columns(np.array([4, 5]), np.array([3, 3]), np.array([1, 1], np.int8),
...                    np.array([1, 2]), np.array([0, 0]), table.arrays(np.array([0])), pc)
>>> sids, seqs, signs, counts, op_index, ops, pairs = decode_columns(c)
>>> sids.tolist(), counts.tolist(), ops[0], pairs.as_dict()[1][1].tolist()
([4, 5], [1, 2], ('publish', 'R', 'r9', 7), ['s1', 's2'])
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - loaded now: ``take`` would import it on first use (~0.1 s)

from hotjoin.matcher.config import kernel
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.convert import put_varint

KIND_CODE = {"publish": 0, "delete": 1, "snapshot": 2}
KIND_NAME = ("publish", "delete", "snapshot")
SIDE_CODE = {"": 0, "R": 1, "S": 2}  # the wire's Side values (0: no event)
SIDE_NAME = ("", "R", "S")


def ids_array(ids: Any) -> pa.Array:
    """Tuple ids as one Arrow string array (a UTF-8 blob and int32 offsets): one C-level pass
    over an object array of ``str``. Measured on 1,000,000 ids drawn from 50,000 tuples:
    ``pa.array`` 26 ns per id, ``"\\x00".join`` plus a scan for the separators 30 ns (and wrong
    for an id holding a NUL), ``np.char.encode`` 500 ns. Arrow arrays pass through."""
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    if isinstance(ids, pa.Array):
        return ids
    return pa.array(np.asarray(ids, dtype=object), pa.string())


class PairColumns(NamedTuple):
    """The pairs of a chunk's or block's rows without an object per message or pair: row i's
    pairs are entries ``offsets[i] .. offsets[i+1] - 1`` of ``r_ids``/``s_ids`` (Arrow string
    arrays); a row without pairs has an empty run."""

    offsets: np.ndarray
    r_ids: pa.Array
    s_ids: pa.Array

    def lengths(self) -> np.ndarray:
        """Pairs per row."""
        return np.diff(self.offsets)

    def take(self, rows: np.ndarray) -> PairColumns | None:
        """The pairs of ``rows`` (increasing), as a new ``PairColumns`` (None: none of them has
        pairs): a zero-copy slice when their runs are adjacent, else one vectorised index and
        one Arrow ``take``. O(rows + their pairs), no Python step per row.

        >>> pc = PairColumns(np.array([0, 2, 2, 3]), ids_array(["a", "b", "c"]),
        ...                  ids_array(["x", "y", "z"]))
        >>> t = pc.take(np.array([0, 2]))
        >>> t.offsets.tolist(), t.r_ids.to_pylist(), t.s_ids.to_pylist()
        ([0, 2, 3], ['a', 'b', 'c'], ['x', 'y', 'z'])
        >>> u = pc.take(np.array([2]))
        >>> u.offsets.tolist(), u.r_ids.to_pylist()
        ([0, 1], ['c'])
        >>> pc.take(np.array([1])) is None
        True
        """
        if rows.shape[0] == 0:
            return None
        off = self.offsets
        starts = off[rows]
        lens = off[rows + 1] - starts
        new = np.zeros(rows.shape[0] + 1, dtype=np.int64)
        np.cumsum(lens, out=new[1:])
        total = int(new[-1])
        if total == 0:
            return None
        first = int(starts[0])
        if int(off[rows[-1] + 1]) - first == total:  # the runs are adjacent: a slice
            return PairColumns(new, self.r_ids.slice(first, total), self.s_ids.slice(first, total))
        idx = pa.array(np.repeat(starts - new[:-1], lens) + np.arange(total, dtype=np.int64))
        return PairColumns(new, self.r_ids.take(idx), self.s_ids.take(idx))

    def as_dict(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """``row -> (r_ids, s_ids)`` (object arrays) of each row with pairs: the per-message form,
        built only when asked for (single ``Match`` answers, tests)."""
        r = self.r_ids.to_numpy(zero_copy_only=False)
        s = self.s_ids.to_numpy(zero_copy_only=False)
        off = self.offsets
        rows = np.flatnonzero(np.diff(off))
        return {row: (r[off[row]:off[row + 1]], s[off[row]:off[row + 1]]) for row in rows.tolist()}

    @staticmethod
    def of_flat(n: int, rows: np.ndarray, lens: np.ndarray, r_ids: Any, s_ids: Any) -> PairColumns:
        """Pairs of ``n`` rows from the runs of ``rows`` (increasing), ``lens[k]`` pairs each,
        laid end to end in ``r_ids``/``s_ids``."""
        per = np.zeros(n, dtype=np.int64)
        per[rows] = lens
        off = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(per, out=off[1:])
        return PairColumns(off, ids_array(r_ids), ids_array(s_ids))

    @staticmethod
    def of_dict(n: int, pairs: dict[int, tuple[Any, Any]]) -> PairColumns:
        """Pairs of ``n`` rows from the per-message form ``row -> (r_ids, s_ids)``."""
        rl = sorted(pairs)
        lens = np.fromiter((len(pairs[r][0]) for r in rl), dtype=np.int64, count=len(rl))
        r = np.concatenate([np.asarray(pairs[k][0], dtype=object) for k in rl]) if rl else []
        s = np.concatenate([np.asarray(pairs[k][1], dtype=object) for k in rl]) if rl else []
        return PairColumns.of_flat(n, np.array(rl, dtype=np.int64), lens, r, s)


def pair_columns(n: int, pairs: Any) -> PairColumns | None:
    """``PairColumns`` of a constructor argument: already columns, the per-message dict
    ``row -> (r_ids, s_ids)``, an ``(offsets, r_ids, s_ids)`` tuple, or None."""
    if pairs is None or isinstance(pairs, PairColumns):
        return pairs
    if isinstance(pairs, dict):
        return PairColumns.of_dict(n, pairs) if pairs else None
    return PairColumns(*pairs)


class OpTable:
    """An operation table as columns (what the match log stores): entry k is
    ``(op name, side, event id, received_ns)`` of ``kinds[k]`` (0 publish, 1 delete,
    2 snapshot), ``sides[k]`` (0 none, 1 R, 2 S), ``ids[k]`` (Arrow) and ``rns[k]``."""

    __slots__ = ("kinds", "sides", "rns", "ids", "_wire")

    def __init__(self, kinds: np.ndarray, sides: np.ndarray, rns: np.ndarray, ids: pa.Array) -> None:
        self.kinds, self.sides, self.rns, self.ids = kinds, sides, rns, ids
        self._wire: WireOps | None = None

    def wire(self) -> WireOps:
        """The whole table as ``WireOps`` (made once: every listener's drain of the chunk
        shares it)."""
        if self._wire is None:
            self._wire = wire_ops(self.kinds, self.sides, self.rns, self.ids)
        return self._wire

    def __len__(self) -> int:
        return int(self.kinds.shape[0])

    def __getitem__(self, k: int) -> tuple[str, str, str, int]:
        return (KIND_NAME[int(self.kinds[k])], SIDE_NAME[int(self.sides[k])],
                self.ids[k].as_py(), int(self.rns[k]))

    def __iter__(self) -> Iterator[tuple[str, str, str, int]]:
        return (self[k] for k in range(len(self)))

    def received(self, ops: np.ndarray) -> np.ndarray:
        """Receive times (Unix ns) of rows with operation indexes ``ops``."""
        return self.rns[ops]

    def arrays(self, used: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, pa.Array]:
        """Operations ``used`` as columns (``op_arrays``)."""
        return (self.kinds[used], self.sides[used], self.rns[used],
                self.ids.take(pa.array(np.asarray(used, dtype=np.int64))))


class WireOps(NamedTuple):
    """An operation table in the wire's layout, for the compiled encoder (``affected_wire``):
    kind and side codes (uint8), receive times (int64), event ids as Arrow's offsets (int32,
    from 0) and UTF-8 bytes (uint8)."""

    kinds: np.ndarray
    sides: np.ndarray
    rns: np.ndarray
    id_offsets: np.ndarray
    id_data: np.ndarray


def wire_ops(kinds: np.ndarray, sides: np.ndarray, rns: np.ndarray, ids: pa.Array) -> WireOps:
    """``WireOps`` of an operation table's columns (``OpTable``'s layout), as arrays of its own:
    a table read back from the match log is read-only views of the record, and the compiled
    encoder would need a variant of its own for those (a compile at the first catch-up)."""
    off, data = _str_buffers(ids_array(ids))
    return WireOps(_owned(kinds, np.uint8), _owned(sides, np.uint8), _owned(rns, np.int64),
                   _owned(np.frombuffer(off, dtype=np.int32), np.int32),
                   _owned(np.frombuffer(data, dtype=np.uint8), np.uint8))


def _owned(a: np.ndarray, dtype: Any) -> np.ndarray:
    """``a`` as a contiguous, writable array of ``dtype`` (itself when it already is)."""
    a = np.ascontiguousarray(a, dtype=dtype)
    return a if a.flags.writeable else a.copy()


def op_arrays(table: Any, used: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, pa.Array]:
    """The operations ``used`` (indexes into ``table``) as columns: kind codes (uint8: 0
    publish, 1 delete, 2 snapshot), side codes (uint8: 0 none, 1 R, 2 S), receive times (int64)
    and event ids (Arrow strings). Columnar tables (with an ``arrays`` method) answer vectorised;
    a list of ``(op, side, event_id, received_ns)`` tuples (per-operation batches) takes a step
    per operation, never one per message.

    >>> k, s, r, i = op_arrays([("publish", "R", "r1", 5), ("snapshot", "", "", 6)], np.array([1, 0]))
    >>> k.tolist(), s.tolist(), r.tolist(), i.to_pylist()
    ([2, 0], [0, 1], [6, 5], ['', 'r1'])
    """
    if hasattr(table, "arrays"):
        return table.arrays(used)  # type: ignore[no-any-return]
    rows = [table[k] for k in used.tolist()]
    k = len(rows)
    kinds = np.fromiter((KIND_CODE[o[0]] for o in rows), dtype=np.uint8, count=k)
    sides = np.fromiter((SIDE_CODE[o[1]] for o in rows), dtype=np.uint8, count=k)
    rns = np.fromiter((o[3] for o in rows), dtype=np.int64, count=k)
    return kinds, sides, rns, pa.array([o[2] for o in rows], pa.string())


def used_ops(ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(used, op_index)``: the distinct operation indexes of rows ``ops`` in order and each
    row's index into them. O(n) when ``ops`` is non-decreasing (rows in seq order, as every
    chunk and block is), else a sort.

    >>> [a.tolist() for a in used_ops(np.array([3, 3, 5, 9, 9]))]
    [[3, 5, 9], [0, 0, 1, 2, 2]]
    """
    n = ops.shape[0]
    if n == 0:
        return ops[:0].astype(np.int64), np.zeros(0, dtype=np.int64)
    step = ops[1:] != ops[:-1]
    if n < 2 or bool((ops[1:] >= ops[:-1]).all()):
        change = np.empty(n, dtype=bool)
        change[0] = True
        change[1:] = step
        return ops[change].astype(np.int64), np.cumsum(change) - 1
    used, op_index = np.unique(ops, return_inverse=True)
    return used.astype(np.int64), op_index.astype(np.int64)


def _le(a: np.ndarray, dtype: str) -> memoryview:
    """``a`` as contiguous little-endian ``dtype`` bytes, a view when it already is."""
    return memoryview(np.ascontiguousarray(a, dtype=dtype)).cast("B")


def _str_buffers(arr: pa.Array) -> tuple[memoryview, memoryview]:
    """An Arrow string array's (offsets from 0, UTF-8 data) as byte views: of its own buffers,
    plus a rebase of the offsets when the array is a slice."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != pa.string():
        arr = arr.cast(pa.string())
    if arr.null_count:
        arr = arr.fill_null("")
    n = len(arr)
    bufs = arr.buffers()
    off = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4)
    lo, hi = int(off[0]), int(off[-1])
    if lo:
        off = off - np.int32(lo)
    data = memoryview(b"") if bufs[2] is None or hi == lo else memoryview(bufs[2].slice(lo, hi - lo))
    return _le(off, "<i4"), data


def column_fields(sids: np.ndarray, seqs: np.ndarray, signs: np.ndarray, counts: np.ndarray,
                  op_index: np.ndarray, ops: tuple[np.ndarray, np.ndarray, np.ndarray, pa.Array],
                  pairs: PairColumns | None) -> list[tuple[int, memoryview]]:
    """The ``MatchBatchColumns`` fields of these rows as ``(field number, bytes)``, in field
    order (``encode_columns`` says what they hold): views of the arrays where their layout
    already is the wire's, else one conversion each."""
    kinds, sides, rns, eids = ops
    e_off, e_data = _str_buffers(eids)
    out = [(1, _le(sids, "<i8")), (2, _le(seqs, "<i8")), (3, _le(signs, "i1")),
           (4, _le(counts, "<i8")), (5, _le(op_index, "<u4")), (6, _le(kinds, "u1")),
           (7, _le(sides, "u1")), (8, _le(rns, "<i8")), (9, e_data), (10, e_off)]
    if pairs is not None:
        r_off, r_data = _str_buffers(pairs.r_ids)
        s_off, s_data = _str_buffers(pairs.s_ids)
        out += [(11, _le(pairs.offsets - pairs.offsets[0], "<i8")), (12, r_data), (13, r_off),
                (14, s_data), (15, s_off)]
    return out


_FIELD_NAMES = {f.number: f.name for f in pb.MatchBatchColumns.DESCRIPTOR.fields}


def encode_columns(sids: np.ndarray, seqs: np.ndarray, signs: np.ndarray, counts: np.ndarray,
                   op_index: np.ndarray, ops: tuple[np.ndarray, np.ndarray, np.ndarray, pa.Array],
                   pairs: PairColumns | None) -> pb.MatchBatchColumns:
    """One ``MatchBatchColumns`` of these rows: ``op_index[i]`` indexes the operation columns
    ``ops`` (``op_arrays``), ``pairs`` the rows' pairs (None: none). Every field is a buffer
    copy; O(rows + pairs + operations) in C."""
    return pb.MatchBatchColumns(**{_FIELD_NAMES[f]: bytes(v) for f, v in
                                   column_fields(sids, seqs, signs, counts, op_index, ops, pairs)})


def serialize_columns(sids: np.ndarray, seqs: np.ndarray, signs: np.ndarray, counts: np.ndarray,
                      op_index: np.ndarray,
                      ops: tuple[np.ndarray, np.ndarray, np.ndarray, pa.Array],
                      pairs: PairColumns | None, within: tuple[int, ...] = ()) -> bytes:
    """``encode_columns(...).SerializeToString()``, byte for byte, written directly: each
    non-empty field's tag, length and bytes, joined once. Building the message and serializing
    it copied every column three times, and on output-heavy batches the record is megabytes.

    ``within``: the field numbers of the messages that hold it, outermost first, each a length-
    delimited field (``(5, 10)``: the ``ListenResponse`` whose ``matches`` is a ``MatchBatch``
    whose ``columns`` are these), framed in the same single join.

    >>> cols = (np.array([7]), np.array([1]), np.array([1], np.int8), np.array([1]), np.array([0]),
    ...         op_arrays([("publish", "R", "r1", 5)], np.array([0])), None)
    >>> wire = serialize_columns(*cols, within=(5, 10))
    >>> wire == pb.ListenResponse(matches=pb.MatchBatch(columns=encode_columns(*cols))).SerializeToString()
    True
    """
    return b"".join(column_parts(sids, seqs, signs, counts, op_index, ops, pairs, within))


def column_parts(sids: np.ndarray, seqs: np.ndarray, signs: np.ndarray, counts: np.ndarray,
                 op_index: np.ndarray, ops: tuple[np.ndarray, np.ndarray, np.ndarray, pa.Array],
                 pairs: PairColumns | None,
                 within: tuple[int, ...] = ()) -> list[bytes | memoryview]:
    """``serialize_columns`` before its join: the tags and lengths as bytes and the columns as
    byte views of the arrays, in wire order. A file writes them as they are
    (``write_all_parts``, the match log), where joining would copy a record of megabytes once
    more.

    >>> cols = (np.array([7]), np.array([1]), np.array([1], np.int8), np.array([1]), np.array([0]),
    ...         op_arrays([("publish", "R", "r1", 5)], np.array([0])), None)
    >>> b"".join(column_parts(*cols)) == serialize_columns(*cols)
    True
    """
    parts: list[bytes | memoryview] = []
    size = 0
    for f, v in column_fields(sids, seqs, signs, counts, op_index, ops, pairs):
        if v.nbytes:
            head = _varint(f << 3 | 2) + _varint(v.nbytes)
            parts += [head, v]
            size += len(head) + v.nbytes
    heads = []
    for f in reversed(within):
        head = _varint(f << 3 | 2) + _varint(size)
        heads.append(head)
        size += len(head)
    return [*reversed(heads), *parts]


def affected_wire(sids: np.ndarray, seqs: np.ndarray, signs: np.ndarray, counts: np.ndarray,
                  ops: np.ndarray, table: WireOps, within: tuple[int, int]) -> bytes:
    """``serialize_columns`` of rows without pairs whose operations are entries ``ops`` of
    ``table``, byte for byte (the distinct operations in increasing order, as ``used_ops``), in
    one compiled pass: the used operations, each row's index into them, and every field with
    its tag and length written into one buffer. ``within``: two enclosing fields (the
    ``ListenResponse.matches`` → ``MatchBatch.columns`` of a Listen response).

    A listener of a fan-out topic is handed a hundred rows or so per batch, where a dozen NumPy
    and Arrow steps of fixed cost each and a join outweighed the rows.

    >>> t = wire_ops(np.array([0, 0], np.uint8), np.array([1, 2], np.uint8), np.array([5, 6]),
    ...              ids_array(["r1", "s22"]))
    >>> cols = (np.array([7, 9]), np.array([1, 2]), np.array([1, -1], np.int8), np.array([1, 3]))
    >>> wire = affected_wire(*cols, np.array([1, 1], np.int32), t, (5, 10))
    >>> old = serialize_columns(*cols, np.array([0, 0]), op_arrays(OpTable(t.kinds, t.sides,
    ...     t.rns, ids_array(["r1", "s22"])), np.array([1])), None, within=(5, 10))
    >>> wire == old
    True
    """
    if not _LITTLE:  # the kernel writes native words
        used, op_index = used_ops(ops)
        return serialize_columns(sids, seqs, signs, counts, op_index,
                                 (table.kinds[used], table.sides[used], table.rns[used],
                                  _strings_of(table, used)), None, within=within)
    # the columns as they are (the kernel casts each value as it writes it; a delivered
    # block's columns are int64, int8 and int32 or uint32 operation indexes, as warmed up)
    return _affected_wire_kernel(sids, seqs, signs, counts, ops, table.kinds, table.sides,
                                 table.rns, table.id_offsets, table.id_data, within[0],
                                 within[1]).tobytes()


def affected_wire_blocks(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                           np.ndarray, WireOps]],
                         within: tuple[int, int]) -> bytes:
    """``affected_wire`` of several blocks' rows as one message: ``parts`` are each block's
    ``(sids, seqs, signs, counts, ops, table)``; the rows go end to end and the tables joined
    (a table shared by several parts once). What a listener takes from several chunks in one
    drain then costs one response, not one per chunk.

    >>> t1 = wire_ops(np.zeros(2, np.uint8), np.array([1, 2], np.uint8), np.array([5, 6]),
    ...               ids_array(["a", "bb"]))
    >>> t2 = wire_ops(np.zeros(1, np.uint8), np.array([1], np.uint8), np.array([7]), ids_array(["c"]))
    >>> one = lambda q, o: (np.array([q]), np.array([q]), np.array([1], np.int8), np.array([1]),
    ...                     np.array([o], np.int32))
    >>> wire = affected_wire_blocks([(*one(4, 1), t1), (*one(5, 0), t2)], (5, 10))
    >>> joined = wire_ops(np.zeros(3, np.uint8), np.array([1, 2, 1], np.uint8), np.array([5, 6, 7]),
    ...                   ids_array(["a", "bb", "c"]))
    >>> wire == affected_wire(np.array([4, 5]), np.array([4, 5]), np.array([1, 1], np.int8),
    ...                       np.array([1, 1]), np.array([1, 2]), joined, (5, 10))
    True
    """
    if len(parts) == 1:
        return affected_wire(*parts[0], within)
    base: dict[int, int] = {}
    tables: list[WireOps] = []
    bases = []
    at = 0
    for p in parts:
        t = p[5]
        b = base.get(id(t))
        if b is None:
            b = base[id(t)] = at
            tables.append(t)
            at += t.kinds.shape[0]
        bases.append(b)
    ops = np.concatenate([p[4] for p in parts]).astype(np.int64, copy=False)
    if len(tables) > 1:  # rows of a later table: shift their entries
        ops += np.repeat(np.array(bases, dtype=np.int64), [p[0].shape[0] for p in parts])
    return affected_wire(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                         np.concatenate([p[2] for p in parts]), np.concatenate([p[3] for p in parts]),
                         ops, join_wire_ops(tables), within)


_JOINED: dict[tuple[int, ...], tuple[tuple[WireOps, ...], WireOps]] = {}
_JOINED_KEEP = 8  # the joins of the last few drains' chunk ranges
_joined_lock = threading.Lock()


def join_wire_ops(tables: list[WireOps]) -> WireOps:
    """The operation tables ``tables`` end to end as one ``WireOps`` (entry k of the second
    is entry len(first) + k of the result). The last few joins are kept: the listeners of a
    fan-out topic drain the same chunks at about the same time (one push wakes them all), and
    each would join the same tables again.

    >>> t = [wire_ops(np.zeros(1, np.uint8), np.ones(1, np.uint8), np.array([k]),
    ...               ids_array([f"e{k}"])) for k in range(2)]
    >>> j = join_wire_ops(t)
    >>> j.rns.tolist(), bytes(j.id_data), j.id_offsets.tolist(), join_wire_ops(list(t)) is j
    ([0, 1], b'e0e1', [0, 2, 4], True)
    """
    if len(tables) == 1:
        return tables[0]
    key = tuple(id(t) for t in tables)
    with _joined_lock:
        hit = _JOINED.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], tables, strict=True)):
        return hit[1]  # (the kept tables stay alive with it: an id is not reused meanwhile)
    joined = _join(tables)
    with _joined_lock:
        _JOINED[key] = (tuple(tables), joined)
        while len(_JOINED) > _JOINED_KEEP:
            del _JOINED[next(iter(_JOINED))]
    return joined


def _join(tables: list[WireOps]) -> WireOps:
    """``join_wire_ops`` without the kept joins."""
    offs = [tables[0].id_offsets[:1]]
    data_at = 0
    for t in tables:
        offs.append(t.id_offsets[1:] + np.int32(data_at))
        data_at += int(t.id_offsets[-1])
    return WireOps(np.concatenate([t.kinds for t in tables]), np.concatenate([t.sides for t in tables]),
                   np.concatenate([t.rns for t in tables]), np.concatenate(offs),
                   np.concatenate([t.id_data for t in tables]))


@kernel
def _varint_len(x: int) -> int:
    n = 1
    while x > 0x7F:
        x >>= 7
        n += 1
    return n


@kernel
def _put_head(out: np.ndarray, p: int, field: int, size: int) -> int:
    return put_varint(out, put_varint(out, p, np.uint64(field << 3 | 2)), np.uint64(size))


@kernel(nogil=True)  # reads its arguments, writes a buffer of its own: no lock needed
def _affected_wire_kernel(sids: np.ndarray, seqs: np.ndarray, signs: np.ndarray,
                          counts: np.ndarray, ops: np.ndarray, kinds: np.ndarray,
                          sides: np.ndarray, rns: np.ndarray, id_off: np.ndarray,
                          id_data: np.ndarray, outer: int, inner: int) -> np.ndarray:
    """``affected_wire``'s pass: index the used operations (one pass over the rows when their
    operations do not decrease, as in every chunk; else a mark per operation), size every field,
    write them (fixed-width columns as native little-endian words)."""
    n = sids.shape[0]
    used = np.empty(n, dtype=np.int64)
    op_index = np.empty(n, dtype=np.uint32)
    k = 0
    ordered = True
    for i in range(n):
        o = ops[i]
        if k == 0 or o != used[k - 1]:
            if k and o < used[k - 1]:
                ordered = False
                break
            used[k] = o
            k += 1
        op_index[i] = k - 1
    if not ordered:
        index = np.full(kinds.shape[0], -1, dtype=np.int64)
        for i in range(n):
            index[ops[i]] = 0
        k = 0
        for j in range(index.shape[0]):  # the used operations in increasing order
            if index[j] >= 0:
                index[j] = k
                used[k] = j
                k += 1
        for i in range(n):
            op_index[i] = index[ops[i]]
    id_bytes = 0
    for u in range(k):
        id_bytes += id_off[used[u] + 1] - id_off[used[u]]
    sizes = (8 * n, 8 * n, n, 8 * n, 4 * n, k, k, 8 * k, id_bytes, 4 * (k + 1))
    body = 0
    for f in range(10):
        if sizes[f]:
            body += _varint_len((f + 1) << 3 | 2) + _varint_len(sizes[f]) + sizes[f]
    mid = body + _varint_len(inner << 3 | 2) + _varint_len(body)
    total = mid + _varint_len(outer << 3 | 2) + _varint_len(mid)
    out = np.empty(total, dtype=np.uint8)
    p = _put_head(out, 0, outer, mid)
    p = _put_head(out, p, inner, body)
    if n:
        p = _put_head(out, p, 1, 8 * n)
        out[p:p + 8 * n].view(np.int64)[:] = sids
        p = _put_head(out, p + 8 * n, 2, 8 * n)
        out[p:p + 8 * n].view(np.int64)[:] = seqs
        p = _put_head(out, p + 8 * n, 3, n)
        out[p:p + n].view(np.int8)[:] = signs
        p = _put_head(out, p + n, 4, 8 * n)
        out[p:p + 8 * n].view(np.int64)[:] = counts
        p = _put_head(out, p + 8 * n, 5, 4 * n)
        out[p:p + 4 * n].view(np.uint32)[:] = op_index
        p += 4 * n
    if k:
        p = _put_head(out, p, 6, k)
        for u in range(k):
            out[p + u] = kinds[used[u]]
        p = _put_head(out, p + k, 7, k)
        for u in range(k):
            out[p + u] = sides[used[u]]
        p = _put_head(out, p + k, 8, 8 * k)
        w = out[p:p + 8 * k].view(np.int64)
        for u in range(k):
            w[u] = rns[used[u]]
        p += 8 * k
    if id_bytes:
        p = _put_head(out, p, 9, id_bytes)
        for u in range(k):
            a, b = id_off[used[u]], id_off[used[u] + 1]
            out[p:p + b - a] = id_data[a:b]
            p += b - a
    p = _put_head(out, p, 10, 4 * (k + 1))
    w4 = out[p:p + 4 * (k + 1)].view(np.int32)
    w4[0] = 0
    run = 0
    for u in range(k):
        run += id_off[used[u] + 1] - id_off[used[u]]
        w4[u + 1] = run
    return out


def warm_up() -> None:
    """Load the compiled encoder (``affected_wire``)."""
    z = np.zeros(1, dtype=np.int64)
    table = wire_ops(z.astype(np.uint8), z.astype(np.uint8), z, ids_array([""]))
    for ops in (z.astype(np.int32), z.astype(np.uint32), z):
        affected_wire(z, z, z.astype(np.int8), z, ops, table, (5, 10))


_LITTLE = sys.byteorder == "little"


def _strings_of(table: WireOps, used: np.ndarray) -> pa.Array:
    ids = pa.StringArray.from_buffers(table.kinds.shape[0], pa.py_buffer(table.id_offsets),
                                      pa.py_buffer(table.id_data))
    return ids.take(pa.array(used))


def _varint(x: int) -> bytes:
    """``x`` ≥ 0 as a protobuf varint.

    >>> _varint(1), _varint(300)
    (b'\\x01', b'\\xac\\x02')
    """
    out = bytearray()
    while x > 0x7F:
        out.append(x & 0x7F | 0x80)
        x >>= 7
    out.append(x)
    return bytes(out)


def _strings(offsets: bytes, data: bytes) -> pa.Array:
    n = len(offsets) // 4 - 1
    if n <= 0:
        return pa.array([], pa.string())
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))


def decode_columns(c: pb.MatchBatchColumns) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                     np.ndarray, np.ndarray, OpTable,
                                                     PairColumns | None]:
    """``(sids, seqs, signs, counts, op_index, OpTable, PairColumns or None)`` of ``c``: numpy
    and Arrow views of its bytes, no step per row. ``ValueError`` when the columns disagree."""
    sids = np.frombuffer(c.subscription_ids, dtype="<i8")
    n = sids.shape[0]
    seqs = np.frombuffer(c.seqs, dtype="<i8")
    signs = np.frombuffer(c.signs, dtype="i1")
    counts = np.frombuffer(c.counts, dtype="<i8")
    op_index = np.frombuffer(c.op_index, dtype="<u4")
    if not seqs.shape[0] == signs.shape[0] == counts.shape[0] == op_index.shape[0] == n:
        raise ValueError("match columns differ in length")
    kinds = np.frombuffer(c.op_kinds, dtype="u1")
    table = OpTable(kinds, np.frombuffer(c.op_sides, dtype="u1"),
                    np.frombuffer(c.op_received_unix_nanos, dtype="<i8"),
                    _strings(c.op_event_id_offsets, c.op_event_ids))
    if n and int(op_index.max()) >= kinds.shape[0]:
        raise ValueError("match columns refer to a missing operation")
    pairs = None
    if c.pair_offsets:
        off = np.frombuffer(c.pair_offsets, dtype="<i8")
        r = _strings(c.r_id_offsets, c.r_ids)
        s = _strings(c.s_id_offsets, c.s_ids)
        if off.shape[0] != n + 1 or len(r) != len(s) or int(off[-1]) != len(r):
            raise ValueError("match columns' pairs differ in length")
        pairs = PairColumns(off, r, s)
    return sids, seqs, signs, counts, op_index, table, pairs
