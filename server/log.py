"""Append-only, checksummed, fsynced operation log of one topic (the durability layer).

Why a log and not SQLite: a topic's state is a deterministic function of its sequence of
operations (docs/reference/persistence.md), so the sequence itself is the natural durable form. One append
is one frame ``[u32 length][u32 crc32][LogBatch protobuf]`` followed by one ``fdatasync``; a batch
of events therefore costs one sequential write and one sync, and recovery is a single sequential
read. ``kill -9`` can leave at most one torn frame at the end, which ``OpLog`` cuts on open, so
every acknowledged (synced) frame survives and no half-written one is ever applied. A complete
frame that fails its checksum is damage, not a torn tail: reading stops there with
``DamagedFileError`` and nothing is cut (``server/records.py``; repair: ``server/repair.py``).
See ``docs/reference/persistence.md`` for the measurements behind the choice.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.records import HEADER as _HEADER
from hotjoin.server.records import DamagedFileError, RecordReader, read_file

JOIN_BELOW = 64 << 10  # write_all_parts: smaller parts are joined, larger written as they are
log = logging.getLogger("hotjoin.topic")
# A compacted log starts with MAGIC, then one frame holding the snapshot header (JSON), then
# ``header["frames"]`` LogBatch frames of the snapshot, then ordinary appended frames.
MAGIC = b"HJLOG\x00S1"


class LogCorruptError(Exception):
    """The log's frames verify but do not replay: a sequence number out of order, or an
    operation the state cannot take (recovery, ``server/recovery.py``)."""


def _read(path: Path) -> tuple[bytes, int]:
    data = read_file(path)
    return data, len(MAGIC) if data.startswith(MAGIC) else 0


def iter_frames(path: Path, start: int | None = None) -> Iterator[tuple[int, bytes]]:
    """Yield ``(end_offset, payload)`` for every intact frame, stopping quietly at a torn tail
    and with ``DamagedFileError`` at a frame that does not verify (``server/records.py``).

    The snapshot header of a compacted log is yielded too (it is the first frame after MAGIC).
    ``start``: begin at this byte offset (a frame boundary) instead of the first frame.
    """
    data, pos = _read(path)
    if start is not None:
        if start > len(data):
            raise DamagedFileError.at(path, len(data), f"the log ends at byte {len(data)}, before "
                                      f"its checkpoint's offset {start}: acknowledged frames are "
                                      "missing")
        pos = start
    reader = RecordReader(data, path, pos)
    for body, end in reader:
        yield end, data[body:end]
    reader.raise_if_damaged()


def read_log(path: Path) -> tuple[dict[str, Any] | None, Iterator[pb.LogBatch]]:
    """The snapshot header (None for a log never compacted) and every ``LogBatch`` after it.

    For a compacted log the first ``header["frames"]`` batches are the snapshot: subscribe ops
    of the live subscriptions and publish ops of the stored tuples, each with its original seq.
    """
    with open(path, "rb") as f:
        compacted = f.read(len(MAGIC)) == MAGIC
    frames = iter_frames(path)
    header: dict[str, Any] | None = None
    if compacted:
        first = next(frames, None)
        if first is None:
            raise DamagedFileError.at(path, len(MAGIC), "compacted log without its snapshot header")
        header = json.loads(first[1])

    def batches() -> Iterator[pb.LogBatch]:
        for _, payload in frames:
            batch = pb.LogBatch()
            batch.ParseFromString(payload)
            yield batch

    return header, batches()


def read_batches(path: Path, start: int | None = None) -> Iterator[pb.LogBatch]:
    """Decode every intact ``LogBatch`` of the log at ``path`` (a snapshot's ops included), or
    only those from byte offset ``start`` on."""
    if start is None:
        return read_log(path)[1]

    def batches() -> Iterator[pb.LogBatch]:
        for _, payload in iter_frames(path, start):
            batch = pb.LogBatch()
            batch.ParseFromString(payload)
            yield batch

    return batches()


def frame(payload: bytes) -> bytes:
    """One log frame: ``[u32 length][u32 crc32][payload]``."""
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


class SyncError(OSError):
    """An ``fsync``/``fdatasync`` of a topic's file failed. Unlike a failed ``write`` this cannot
    be undone: after a failed sync Linux may have dropped the dirty pages and marked them clean,
    so a later sync can succeed without the data ever reaching the disk (PostgreSQL's
    "fsyncgate"). The file is no longer trusted until a restart reads it back
    (docs/reference/persistence.md, "Disk faults")."""


class OpLog:
    """The log file of one topic, opened for appending after truncating any torn tail.

    **Group commit.** ``write`` appends a frame without syncing and returns a *token* (bytes
    written so far, counted across reopenings); ``sync_upto(token)`` returns once that frame is on
    disk. The first caller to arrive runs one ``fdatasync`` that covers every frame written before
    it started, so concurrent publish streams share syncs: a caller whose frame was covered by
    someone else's sync returns at once. ``append`` = ``write`` + ``sync_upto`` (one frame, durable
    on return), which is what lets the server acknowledge a batch as durable.
    """

    def __init__(self, path: Path, sync: bool = True, trusted_size: int | None = None,
                 clean: bool = False) -> None:
        """Open ``path``; ``clean`` says the topic was stopped cleanly, so the log cannot end in
        a torn tail: an incomplete last frame is then damage (``DamagedFileError``, nothing cut),
        not an unfinished write."""
        self.path = path
        self.sync = sync
        good = 0
        if trusted_size is not None:
            good = trusted_size
        elif path.exists():
            data, start = _read(path)
            reader = RecordReader(data, path, start)
            for _ in reader:
                pass
            reader.raise_if_damaged()  # a complete frame that does not verify: never cut here
            good = reader.good
            if good != len(data) and clean:
                raise DamagedFileError.at(
                    path, good, f"the log ends inside a frame at byte {good} ({len(data) - good} "
                    "bytes), but the topic was stopped cleanly: a frame's length is damaged")
            if good != len(data):  # a torn tail: the last write of a crash, never acknowledged
                log.warning("%s: cut a torn tail of %d bytes at byte %d (an unfinished write)",
                            path, len(data) - good, good)
                with open(path, "r+b") as f:
                    f.truncate(good)
                    os.fsync(f.fileno())
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = good
        self.written = 0  # bytes written through this object (tokens), durable or not
        self.durable = 0  # bytes known to be on disk
        self.syncs = 0
        self.sync_lock = threading.Lock()
        self.failed: SyncError | None = None  # a failed sync, latched (``sync_upto``)
        if good == 0:
            _fsync_dir(path.parent)

    def append(self, ops: list[pb.LogOp]) -> None:
        """Write ``ops`` as one frame and sync it; O(size of the frame)."""
        self.append_frame(frame(pb.LogBatch(ops=ops).SerializeToString()))

    def append_frame(self, data: bytes) -> None:
        """Write already framed bytes and sync them."""
        self.sync_upto(self.write(data))

    def write(self, data: bytes) -> int:
        """Append framed bytes without syncing (callers serialise writes); returns the token."""
        write_all(self._fd, data)
        self.size += len(data)
        self.written += len(data)
        return self.written

    def sync_upto(self, token: int) -> None:
        """Return once every byte up to ``token`` is durable (group commit, see the class).

        A failed ``fdatasync`` raises ``SyncError`` and so does every later call: the failure is
        latched under ``sync_lock``, so no caller waiting behind it can take a later, apparently
        successful sync for proof that its frame is on disk."""
        if self.failed is not None:
            raise SyncError(self.failed.errno, self.failed.strerror)
        if self.durable >= token:
            return
        with self.sync_lock:
            if self.failed is not None:
                raise SyncError(self.failed.errno, self.failed.strerror)
            if self.durable >= token:
                return
            target = self.written
            if self.sync:
                try:
                    os.fdatasync(self._fd)
                except OSError as x:
                    if self._fd < 0:  # closed by a shutdown meanwhile: not a disk fault
                        raise
                    self.failed = SyncError(x.errno, x.strerror)
                    raise self.failed from x
                self.syncs += 1
            self.durable = target

    def truncate(self, size: int) -> None:
        """Cut the file back to ``size`` bytes: remove what a failed ``write`` left of a frame
        (a partial write before ENOSPC or EIO), or a frame written but never acknowledged.

        ``ftruncate`` frees blocks and needs none, so it works on a full disk. Tokens keep
        counting (``written`` only grows: a token handed out stays comparable with ``durable``).
        Call with writes stopped (the topic lock); raises ``OSError`` when the cut fails."""
        os.ftruncate(self._fd, size)
        self.size = size

    def reopen(self, path: Path, size: int) -> None:
        """Switch to a replacement file already synced with everything written (compaction).

        Call with ``sync_lock`` held and writes stopped; tokens keep counting across the switch.
        """
        os.close(self._fd)
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        self.size = size
        if self.failed is None:  # a failed sync of the switch leaves nothing durable by it
            self.durable = self.written

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


CLEAN_MARK = "log.clean"


def write_clean_mark(directory: Path, log_bytes: int) -> None:
    """Record that the topic stopped cleanly with a log of ``log_bytes`` bytes (as Kafka's
    ``.kafka_cleanshutdown``): the next start then knows that any other size, or a torn tail,
    is damage and not the last write of a crash. Written atomically and synced."""
    tmp = directory / (CLEAN_MARK + ".tmp")
    with open(tmp, "w") as f:
        json.dump({"log_bytes": int(log_bytes)}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / CLEAN_MARK)
    _fsync_dir(directory)


def read_clean_mark(directory: Path) -> int | None:
    """The log's size at the topic's last clean stop, or None after a crash (no mark, or one
    that does not read)."""
    try:
        return int(json.loads((directory / CLEAN_MARK).read_text())["log_bytes"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def clear_clean_mark(directory: Path) -> None:
    """Remove the clean-stop mark once the topic is open (a crash from then on leaves none)."""
    for name in (CLEAN_MARK, CLEAN_MARK + ".tmp"):
        try:
            os.unlink(directory / name)
        except FileNotFoundError:
            continue
    _fsync_dir(directory)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def write_all_parts(fd: int, parts: Sequence[bytes | memoryview]) -> None:
    """Write ``parts`` one after another: what ``write_all(fd, b"".join(parts))`` writes, without
    copying the large parts (``JOIN_BELOW`` bytes or more, a record's columns), each written
    from its own buffer; runs of smaller ones (tags, lengths, headers) are joined into one
    ``write``."""
    small: list[memoryview] = []
    for part in parts:
        view = memoryview(part).cast("B")
        if view.nbytes < JOIN_BELOW:
            small.append(view)
            continue
        if small:
            write_all(fd, b"".join(small))
            small = []
        write_all(fd, view)
    if small:
        write_all(fd, b"".join(small))


def drop_cached(fd: int, start: int = 0, end: int = 0) -> None:
    """Tell the kernel that bytes ``[start, end)`` of ``fd`` (``end`` 0: to the end of the file),
    already synced, will not be read soon, so their page-cache pages are freed
    (``POSIX_FADV_DONTNEED``) and the next writes reuse them.

    A log only ever grows at its tail; left alone, every page it writes is a page the kernel has
    not held before, and writing into new pages cost about 8 times the CPU of writing into freed
    ones (docs/explanation/choices.md, "The match log writes a record's columns as they are").
    Advice only: a platform without ``posix_fadvise`` or a file system that refuses it changes
    nothing.
    """
    if not hasattr(os, "posix_fadvise") or 0 < end <= start:
        return
    with contextlib.suppress(OSError):
        os.posix_fadvise(fd, start, end - start if end else 0, os.POSIX_FADV_DONTNEED)


def _fsync_dir(path: Path) -> None:
    """Make a newly created directory entry durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
