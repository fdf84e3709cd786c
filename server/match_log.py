"""Durable match log of one topic: every delivery message, in segments, within a retention bound.

A listener that resumes after a ``kill -9`` must receive exactly the messages it had not
received, with their original sequence numbers, signs and pairs (``docs/reference/persistence.md``,
"Durable delivery").
The topic therefore writes each batch's messages (one ``Chunk``: columns of subscription ids,
seqs, signs, counts, the operation table and the pairs of PAIRS messages) to this log *before*
it writes the batch's frame to the event log, both under the topic lock, and a batch is
acknowledged and released to listeners only after both files are synced (the event log's group
commit, ``Topic.commit``, syncs this log first). ``kill -9`` keeps every completed ``write``
(the page cache survives the process), so on restart every operation of the event log has its
messages here; a record of a batch whose event frame never made it (killed in between) is
dropped on open (``last_seq > log_seq``).

**Format.** ``DATA_DIR/topics/<name>/matches/<start>.seg``, where ``<start>`` (20 digits) is the
first sequence number the segment covers; a segment holds records
``[u32 length][u32 crc32][u64 first_seq][u64 last_seq][i64 unix_ns][payload]`` (crc over
everything after it). The payload is ``b"HJMC\x01"`` and a serialized ``MatchBatchColumns``
(``server/match_columns.py``): the chunk's columns as little-endian arrays and its ids as Arrow
string buffers, the very form a columnar listener receives, so catching up from the log is a
buffer copy per column, no object per message or pair. Records written before this format
(a pickle of the columns, payload starting ``\x80``) are still read. The active segment rolls
at ``segment_bytes``.

**Retention** (like Kafka's ``retention.bytes`` / ``retention.ms``): whole segments, oldest first,
are deleted once the segments exceed ``retention_bytes`` or their newest record is older than
``retention_ms``; the active segment is never deleted. ``retained_from`` is the first seq still
covered; a listener asking for messages before it gets an explicit ``Gap`` ("beyond the topic's
delivery retention").

**Costs** (``docs/reference/persistence.md``): one buffer copy per column per batch under the topic
lock, 36 bytes of header per batch, 29 bytes per message and 8 + len(r_id) + len(s_id) bytes
per pair of a PAIRS message (plus 8 bytes per PAIRS row); one more ``fdatasync`` per group
commit.

>>> import tempfile, numpy as np
>>> d = Path(tempfile.mkdtemp())
>>> ml = MatchLog(d, log_seq=0, sync=False)
>>> cols = (np.array([0]), np.array([3]), np.array([1], dtype=np.int8), np.array([2]),
...         np.array([0], dtype=np.int32), [("publish", "R", "r1", 0)], None)
>>> ml.sync_upto(ml.append(3, 3, encode(cols)))
>>> [(f, l, c[1].tolist(), c[5][0]) for f, l, c in ml.read(after_seq=0, upto_seq=3)]
[(3, 3, [3], ('publish', 'R', 'r1', 0))]
>>> ml.close(); MatchLog(d, log_seq=2, sync=False).read(0, 10)   # the batch at seq 3 was never logged
[]
"""

from __future__ import annotations

import bisect
import contextlib
import os
import pickle
import struct
import threading
import time
import zlib
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.log import SyncError, _fsync_dir, drop_cached, write_all_parts
from hotjoin.server.match_columns import (
    PairColumns,
    column_parts,
    decode_columns,
    op_arrays,
    pair_columns,
)
from hotjoin.server.records import Damage, DamagedFileError, RecordReader, read_file

_HEAD = struct.Struct("<IIqqq")  # length, crc32, first_seq, last_seq, unix_ns
_SEQS = struct.Struct("<qqq")
RETENTION_BYTES = 1 << 30  # 1 GiB per topic
RETENTION_MS = 7 * 24 * 3600 * 1000  # 7 days, Kafka's default retention.ms
SEGMENT_BYTES = 64 << 20

Columns = tuple[Any, ...]  # (sids, seqs, signs, counts, ops, op_table, pairs)


MAGIC = b"HJMC\x01"  # a columnar record (MatchBatchColumns); a legacy pickle starts with 0x80


def encode(columns: Columns) -> bytes:
    """The record payload of one chunk's columns ``(sids, seqs, signs, counts, ops, op_table,
    pairs)``: ``MAGIC`` and a ``MatchBatchColumns`` holding every operation of the table (rows
    index it with ``ops``) and the pairs (``PairColumns``, or the per-message dict). Buffer
    copies, no step per message or pair."""
    return b"".join(encode_parts(columns))


def encode_parts(columns: Columns) -> list[bytes | memoryview]:
    """``encode`` before its join: ``MAGIC``, then each field's tag and length and a byte view of
    its column (``column_parts``), for ``MatchLog.append`` to write as they are."""
    sids, seqs, signs, counts, ops, table, pairs = columns
    pcols = pair_columns(int(len(sids)), pairs)
    arrays = op_arrays(table, np.arange(len(table), dtype=np.int64))
    return [MAGIC, *column_parts(sids, seqs, signs, counts, ops, arrays, pcols)]


def decode(payload: bytes | memoryview) -> Columns:
    """The columns ``encode`` wrote: numpy and Arrow views of the record, the operation table as
    an ``OpTable`` and the pairs as ``PairColumns`` (None without). A legacy record (a pickle of
    the columns with the pairs as ``(rows, lengths, r_ids, s_ids)``) decodes to the same form.
    ``payload`` may be a view into the record as read (no copy of it is made before parsing)."""
    view = memoryview(payload)
    if view[:len(MAGIC)] == MAGIC:
        c = pb.MatchBatchColumns.FromString(view[len(MAGIC):])
        sids, seqs, signs, counts, op_index, table, pcols = decode_columns(c)
        return (sids, seqs, signs, counts, op_index.astype(np.int32), table, pcols)
    return _decode_pickle(view)


def _decode_pickle(payload: bytes | memoryview) -> Columns:
    """A record of the former format: a pickle (protocol 5) of the numeric columns, the
    operation table (a list of tuples) and the pairs as ``(rows, lengths, r_ids, s_ids)``."""
    *head, flat = pickle.loads(payload)  # noqa: S301 - the server's own files, crc-checked
    pairs = None
    if flat is not None:
        rows, lens, r_all, s_all = flat
        pairs = PairColumns.of_flat(len(head[0]), np.asarray(rows, dtype=np.int64),
                                    np.asarray(lens, dtype=np.int64),
                                    np.asarray(r_all, dtype=object), np.asarray(s_all, dtype=object))
    return (*head, pairs)


def encode_pickle(columns: Columns) -> bytes:
    """A record payload in the former (pickle) format, for the upgrade tests only."""
    *head, pairs = columns
    flat = None
    pcols = pair_columns(int(len(head[0])), pairs)
    if pcols is not None:
        lens = pcols.lengths()
        rows = np.flatnonzero(lens)
        flat = (rows, lens[rows], pcols.r_ids.to_numpy(zero_copy_only=False),
                pcols.s_ids.to_numpy(zero_copy_only=False))
    table = list(head[5])
    return pickle.dumps((*head[:5], table, flat), protocol=5)


class _Segment:
    """One segment file and the index of its records (first/last seq, offset, length)."""

    __slots__ = ("start", "path", "size", "firsts", "lasts", "offsets", "lengths", "newest_ns")

    def __init__(self, start: int, path: Path) -> None:
        self.start = start
        self.path = path
        self.size = 0
        self.firsts, self.lasts = array("q"), array("q")
        self.offsets, self.lengths = array("q"), array("q")
        self.newest_ns = 0

    def add(self, first: int, last: int, offset: int, length: int, ns: int) -> None:
        self.firsts.append(first)
        self.lasts.append(last)
        self.offsets.append(offset)
        self.lengths.append(length)
        self.newest_ns = max(self.newest_ns, ns)


def _scan(seg: _Segment, log_seq: int, verify: bool, newest: bool) -> int:
    """Index the records of ``seg`` with ``last_seq <= log_seq``; returns the good size. With
    ``verify`` every record's checksum is checked (the two newest segments; older ones were
    synced when they rolled, so only their headers are read). Only the ``newest`` segment can end
    in a torn tail (the write a crash cut short); anything else that does not verify raises
    ``DamagedFileError`` (``server/records.py``)."""
    size = seg.path.stat().st_size
    pos = 0
    if verify:
        data = read_file(seg.path)
        reader = RecordReader(data, seg.path, covered=_SEQS.size)
        for body, end in reader:
            start = body - _HEAD.size
            _, _, first, last, ns = _HEAD.unpack_from(data, start)
            if last > log_seq:  # a batch whose event-log frame a crash never wrote
                return start
            seg.add(first, last, start, end - start, ns)
            pos = end
        reader.raise_if_damaged()
        torn = reader.torn_bytes
    else:
        with open(seg.path, "rb") as f:
            while pos + _HEAD.size <= size:
                length, _, first, last, ns = _HEAD.unpack(os.pread(f.fileno(), _HEAD.size, pos))
                end = pos + _HEAD.size + length
                if end > size:
                    break
                if last > log_seq:
                    return pos
                seg.add(first, last, pos, end - pos, ns)
                pos = end
        torn = size - pos
    if torn and not newest:
        raise DamagedFileError.at(seg.path, pos, f"a record of a rolled segment runs past its end "
                                  f"({torn} bytes left): it was synced whole when it rolled")
    if not seg.firsts:
        seg.newest_ns = int(seg.path.stat().st_mtime_ns)
    return pos


class DamagedRecordError(DamagedFileError):
    """A record of the match log that does not verify when read; ``last_seq`` is the last seq
    its index entry covers, so a reader can report a Gap for it alone and read on after it."""

    def __init__(self, path: Path, offset: int, length: int, last_seq: int) -> None:
        super().__init__(Damage(str(path), offset,
                                f"checksum mismatch in a complete record of {length} bytes"))
        self.last_seq = last_seq


class MatchLog:
    """The match log of one topic (see the module docstring). Thread-safe: ``append`` is called
    under the topic lock, ``sync_upto`` from committing threads, ``read`` from listeners."""

    def __init__(self, directory: Path, log_seq: int, retention_bytes: int = RETENTION_BYTES,
                 retention_ms: int = RETENTION_MS, segment_bytes: int = SEGMENT_BYTES,
                 sync: bool = True) -> None:
        self.directory = directory
        self.retention_bytes = retention_bytes
        self.retention_ms = retention_ms
        self.segment_bytes = max(1 << 10, min(segment_bytes, max(retention_bytes // 4, 1 << 10)))
        self.sync = sync
        self._lock = threading.Lock()  # the segment list
        self.sync_lock = threading.Lock()
        directory.mkdir(parents=True, exist_ok=True)
        self.segments: list[_Segment] = []
        for p in sorted(directory.glob("*.seg")):
            self.segments.append(_Segment(int(p.stem), p))
        keep: list[_Segment] = []
        for k, seg in enumerate(self.segments):
            good = _scan(seg, log_seq, verify=k >= len(self.segments) - 2,
                         newest=k == len(self.segments) - 1)
            if good < seg.path.stat().st_size:  # a torn tail, or batches the event log lacks
                with open(seg.path, "r+b") as f:
                    f.truncate(good)
                    os.fsync(f.fileno())
            if seg.start > log_seq + 1 and not seg.firsts:  # rolled for batches never logged
                seg.path.unlink()
                continue
            seg.size = good
            keep.append(seg)
        self.segments = keep
        if not self.segments:  # a new topic, or one logged before match logs existed
            self.segments.append(self._new_segment(log_seq + 1))
        self._fd = os.open(self.segments[-1].path, os.O_WRONLY | os.O_APPEND)
        self.written = 0  # tokens: bytes written through this object
        self.durable = 0
        self.syncs = 0
        self.appended_seq = max(log_seq, self.segments[-1].start - 1)
        # called as on_drop(upto_seq, None) when retention deleted every message up to upto_seq
        self.on_drop: Callable[[int, None], None] | None = None

    def _new_segment(self, start: int) -> _Segment:
        path = self.directory / f"{start:020d}.seg"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.close(fd)
        _fsync_dir(self.directory)
        seg = _Segment(start, path)
        seg.newest_ns = time.time_ns()
        return seg

    @property
    def retained_from(self) -> int:
        """The first sequence number whose messages are still in the log."""
        with self._lock:
            return self.segments[0].start

    @property
    def bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self.segments)

    def append(self, first_seq: int, last_seq: int,
               payload: bytes | Sequence[bytes | memoryview]) -> int:
        """Write one record (no sync; callers serialise appends in seq order); returns the token
        for ``sync_upto``. ``payload``: the record's bytes, or its parts in order
        (``encode_parts``), written from their own buffers (``write_all_parts``): no copy of a
        record of megabytes. Rolls to a new segment once the active one is full."""
        seg = self.segments[-1]
        if seg.size >= self.segment_bytes and seg.firsts:
            self._roll(first_seq)
            seg = self.segments[-1]
        parts = [payload] if isinstance(payload, bytes | bytearray | memoryview) else payload
        ns = time.time_ns()
        seqs = _SEQS.pack(first_seq, last_seq, ns)
        crc = zlib.crc32(seqs)
        length = 0
        for part in parts:
            crc = zlib.crc32(part, crc)
            length += memoryview(part).nbytes
        head = struct.pack("<II", length, crc) + seqs
        # a crash inside the write leaves a torn tail, which the next open truncates like any other
        write_all_parts(self._fd, [head, *parts])
        size = len(head) + length
        with self._lock:
            seg.add(first_seq, last_seq, seg.size, size, ns)
            seg.size += size
        self.written += size
        self.appended_seq = last_seq
        return self.written

    def _roll(self, start: int) -> None:
        """Continue in a new segment from seq ``start``. The file is created first, so a failed
        create (a full disk) changes nothing; then everything written to the old segment becomes
        durable, and a failed sync there raises ``SyncError`` (server/log.py)."""
        seg = self._new_segment(start)
        fd = os.open(seg.path, os.O_WRONLY | os.O_APPEND)
        with self.sync_lock:
            if self.sync:
                try:
                    os.fdatasync(self._fd)
                except OSError as x:
                    os.close(fd)
                    raise SyncError(x.errno, x.strerror) from x
                self.syncs += 1
                drop_cached(self._fd)  # synced: its pages leave the page cache for reuse
            self.durable = self.written
            os.close(self._fd)
            self._fd = fd
        with self._lock:
            self.segments.append(seg)
        self.enforce_retention()

    def mark(self) -> tuple[_Segment, int, int, int]:
        """Where the next ``append`` writes: for ``truncate`` to cut a failed batch back to."""
        seg = self.segments[-1]
        return seg, seg.size, len(seg.firsts), self.appended_seq

    def truncate(self, mark: tuple[_Segment, int, int, int]) -> None:
        """Remove every record appended since ``mark`` (``mark()``), from the index and the files:
        a batch whose event-log frame was not written, and whatever a failed ``write`` left of a
        record. A segment rolled since stays, empty (the next batch starts at the same seq).
        ``ftruncate`` needs no free space. Call with appends stopped (the topic lock); raises
        ``OSError`` when a cut fails. O(segments)."""
        at, size, n, appended = mark
        with self._lock:
            segs = list(self.segments)
        for seg in segs:
            if seg is at:
                keep, keep_n = size, n
            elif seg.start > appended:  # rolled by the batch being undone
                keep, keep_n = 0, 0
            else:
                continue
            if seg is segs[-1]:
                os.ftruncate(self._fd, keep)
            elif seg.path.stat().st_size != keep:
                os.truncate(seg.path, keep)
            with self._lock:
                for column in (seg.firsts, seg.lasts, seg.offsets, seg.lengths):
                    del column[keep_n:]
                seg.size = keep
        self.appended_seq = appended

    def sync_upto(self, token: int) -> None:
        """Return once every record up to ``token`` is durable (group commit, as ``OpLog``)."""
        if self.durable >= token:
            return
        with self.sync_lock:
            if self.durable >= token:
                return
            target = self.written
            if self.sync and self._fd >= 0:
                os.fdatasync(self._fd)
                self.syncs += 1
            self.durable = target

    def enforce_retention(self, now_ns: int | None = None) -> int:
        """Delete the oldest segments beyond ``retention_bytes`` / ``retention_ms``; returns how
        many were deleted. The active segment always stays."""
        now = time.time_ns() if now_ns is None else now_ns
        dropped: list[_Segment] = []
        with self._lock:
            total = sum(s.size for s in self.segments)
            while len(self.segments) > 1:
                old = self.segments[0]
                expired = self.retention_ms >= 0 and old.newest_ns < now - self.retention_ms * 1_000_000
                if total <= self.retention_bytes and not expired:
                    break
                dropped.append(self.segments.pop(0))
                total -= old.size
            upto = self.segments[0].start - 1
        if dropped and self.on_drop is not None:
            self.on_drop(upto, None)
        for seg in dropped:
            with contextlib.suppress(FileNotFoundError):
                seg.path.unlink()
        return len(dropped)

    def read(self, after_seq: int, upto_seq: int, max_bytes: int = 8 << 20
             ) -> list[tuple[int, int, Columns]]:
        """Records with ``after_seq < last_seq <= upto_seq`` in seq order, about ``max_bytes``
        of them (at least one): ``(first_seq, last_seq, columns)``."""
        out: list[tuple[int, int, Columns]] = []
        with self._lock:
            segs = list(self.segments)
        starts = [s.start for s in segs]
        i = max(bisect.bisect_right(starts, after_seq) - 1, 0)
        budget = max_bytes
        for seg in segs[i:]:
            with self._lock:
                lasts = seg.lasts
                k = bisect.bisect_right(lasts, after_seq)
                n = len(lasts)
                if k >= n:
                    continue
                j = bisect.bisect_right(lasts, upto_seq, lo=k)
                if j <= k:
                    return out
                offsets, lengths = seg.offsets[k:j], seg.lengths[k:j]
            try:
                fd = os.open(seg.path, os.O_RDONLY)
            except FileNotFoundError:  # deleted by retention meanwhile: the caller sees the gap
                continue
            try:
                for off, ln in zip(offsets, lengths, strict=True):
                    rec = os.pread(fd, ln, off)
                    _, crc, first, last, _ = _HEAD.unpack_from(rec, 0)
                    if len(rec) != ln or zlib.crc32(memoryview(rec)[8:]) != crc:
                        # older segments are verified here, as they are read: the listener is
                        # told with a Gap (``DeliveryHub``) instead of receiving corrupt data
                        if out:
                            return out  # the good records first; the next read starts here
                        raise DamagedRecordError(seg.path, off, ln, last)
                    out.append((first, last, decode(memoryview(rec)[_HEAD.size:])))
                    budget -= ln
                    if budget <= 0:
                        return out
            finally:
                os.close(fd)
            if j < n:
                return out
        return out

    def close(self) -> None:
        with self.sync_lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


__all__ = ["DamagedRecordError", "MatchLog", "encode", "decode", "RETENTION_BYTES", "RETENTION_MS", "SEGMENT_BYTES"]
