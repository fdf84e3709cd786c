"""Append-only, checksummed, fsynced operation log of one topic (the durability layer).

Why a log and not SQLite: a topic's state is a deterministic function of its sequence of
operations (SPEC §3), so the sequence itself is the natural durable form. One append is one
frame ``[u32 length][u32 crc32][LogBatch protobuf]`` followed by one ``fdatasync``; a batch of
events therefore costs one sequential write and one sync, and recovery is a single sequential
read. ``kill -9`` can leave at most one torn frame at the end: ``read_all`` stops at the first
frame whose length or checksum does not verify and ``open`` truncates the file there, so every
acknowledged (synced) frame survives and no half-written one is ever applied. See
``server/PERSISTENCE.md`` for the measurements behind the choice.
"""

from __future__ import annotations

import json
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hotjoin.proto import hotjoin_pb2 as pb

_HEADER = struct.Struct("<II")  # payload length, crc32 of the payload
MAX_FRAME = 1 << 30
# A compacted log starts with MAGIC, then one frame holding the snapshot header (JSON), then
# ``header["frames"]`` LogBatch frames of the snapshot, then ordinary appended frames.
MAGIC = b"HJLOG\x00S1"


class LogCorruptError(Exception):
    """A frame in the middle of the log does not verify (not a torn tail)."""


def _read(path: Path) -> tuple[bytes, int]:
    with open(path, "rb") as f:
        data = f.read()
    return data, len(MAGIC) if data.startswith(MAGIC) else 0


def iter_frames(path: Path, start: int | None = None) -> Iterator[tuple[int, bytes]]:
    """Yield ``(end_offset, payload)`` for every intact frame, stopping at the first bad one.

    The snapshot header of a compacted log is yielded too (it is the first frame after MAGIC).
    ``start``: begin at this byte offset (a frame boundary) instead of the first frame.
    """
    data, pos = _read(path)
    if start is not None:
        pos = start
    n = len(data)
    while pos + _HEADER.size <= n:
        length, crc = _HEADER.unpack_from(data, pos)
        start = pos + _HEADER.size
        end = start + length
        if length > MAX_FRAME or end > n:
            return
        payload = data[start:end]
        if zlib.crc32(payload) != crc:
            return
        yield end, payload
        pos = end


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
            raise LogCorruptError(f"{path}: compacted log without a snapshot header")
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


class OpLog:
    """The log file of one topic, opened for appending after truncating any torn tail.

    **Group commit.** ``write`` appends a frame without syncing and returns a *token* (bytes
    written so far, counted across reopenings); ``sync_upto(token)`` returns once that frame is on
    disk. The first caller to arrive runs one ``fdatasync`` that covers every frame written before
    it started, so concurrent publish streams share syncs: a caller whose frame was covered by
    someone else's sync returns at once. ``append`` = ``write`` + ``sync_upto`` (one frame, durable
    on return), which is what lets the server acknowledge a batch as durable.
    """

    def __init__(self, path: Path, sync: bool = True, trusted_size: int | None = None) -> None:
        self.path = path
        self.sync = sync
        good = 0
        if trusted_size is not None:
            good = trusted_size
        elif path.exists():
            with open(path, "rb") as f:
                good = len(MAGIC) if f.read(len(MAGIC)) == MAGIC else 0
            for end, _ in iter_frames(path):
                good = end
            if good != path.stat().st_size:
                with open(path, "r+b") as f:
                    f.truncate(good)
                    os.fsync(f.fileno())
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = good
        self.written = 0  # bytes written through this object (tokens), durable or not
        self.durable = 0  # bytes known to be on disk
        self.syncs = 0
        self.sync_lock = threading.Lock()
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
        """Return once every byte up to ``token`` is durable (group commit, see the class)."""
        if self.durable >= token:
            return
        with self.sync_lock:
            if self.durable >= token:
                return
            target = self.written
            if self.sync:
                os.fdatasync(self._fd)
                self.syncs += 1
            self.durable = target

    def reopen(self, path: Path, size: int) -> None:
        """Switch to a replacement file already synced with everything written (compaction).

        Call with ``sync_lock`` held and writes stopped; tokens keep counting across the switch.
        """
        os.close(self._fd)
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        self.size = size
        self.durable = self.written

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(path: Path) -> None:
    """Make a newly created directory entry durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
