"""Committed cursors of one topic: how far each subscription's consumer has processed (SPEC §4).

Like Kafka's consumer offsets: a listener commits ``(subscription id, seq)`` — "every message with
seq <= this one is processed" — and a later ``Listen`` without an explicit cursor for that
subscription starts after it. The server keeps one position per subscription (a subscription
belongs to one subscriber, so this is also the per-subscriber position); committing per
subscriber commits the same seq for each of its subscriptions.

**Durability.** ``DATA_DIR/topics/<name>/cursors`` is a sequence of frames
``[u32 length][u32 crc32][int64 pairs (sid, seq)...]``, one per commit, ``fdatasync``\\ ed before
the commit returns; a later pair overrides an earlier one, seq −1 forgets a subscription (it was
unsubscribed). A torn last frame (``kill -9`` during a commit, which was then never
acknowledged) is ignored. The file is rewritten (temp file, fsync, rename, fsync of the
directory) once it holds 8× more pairs than live positions. Without a data directory cursors
live in memory.

>>> import tempfile
>>> d = Path(tempfile.mkdtemp())
>>> cs = CursorStore(d, sync=False)
>>> cs.commit([(0, 5), (1, 7)]); cs.commit([(0, 6)]); cs.forget([1]); cs.close()
>>> CursorStore(d, sync=False).positions()
{0: 6}
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from hotjoin.server.log import _fsync_dir, write_all

_HEAD = struct.Struct("<II")


class CursorStore:
    """Committed positions of one topic's subscriptions, durable when ``directory`` is set."""

    def __init__(self, directory: Path | None, sync: bool = True) -> None:
        self.directory = directory
        self.sync = sync
        self._lock = threading.Lock()
        self._pos: dict[int, int] = {}
        self._pairs_in_file = 0
        self._fd = -1
        if directory is None:
            return
        path = directory / "cursors"
        good = 0
        if path.exists():
            data = path.read_bytes()
            pos = 0
            while pos + _HEAD.size <= len(data):
                length, crc = _HEAD.unpack_from(data, pos)
                end = pos + _HEAD.size + length
                if end > len(data) or length % 16 or zlib.crc32(data[pos + _HEAD.size:end]) != crc:
                    break
                arr = np.frombuffer(data, dtype="<i8", count=length // 8, offset=pos + _HEAD.size)
                self._apply(arr.reshape(-1, 2).tolist())
                self._pairs_in_file += length // 16
                pos = good = end
            if good < len(data):
                with open(path, "r+b") as f:
                    f.truncate(good)
                    os.fsync(f.fileno())
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if good == 0:
            _fsync_dir(directory)

    def _apply(self, pairs: Iterable[list[int] | tuple[int, int]]) -> None:
        pos = self._pos
        for sid, seq in pairs:
            if seq < 0:
                pos.pop(int(sid), None)
            else:
                pos[int(sid)] = int(seq)

    def _write(self, pairs: list[tuple[int, int]]) -> None:
        if self._fd < 0 or not pairs:
            return
        payload = np.asarray(pairs, dtype="<i8").tobytes()
        write_all(self._fd, _HEAD.pack(len(payload), zlib.crc32(payload)) + payload)
        if self.sync:
            os.fdatasync(self._fd)
        self._pairs_in_file += len(pairs)
        if self._pairs_in_file > 8 * len(self._pos) + 4096:
            self._rewrite()

    def _rewrite(self) -> None:
        assert self.directory is not None
        path, tmp = self.directory / "cursors", self.directory / "cursors.tmp"
        payload = np.asarray(sorted(self._pos.items()) or np.zeros((0, 2)), dtype="<i8").tobytes()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, _HEAD.pack(len(payload), zlib.crc32(payload)) + payload)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        _fsync_dir(self.directory)
        os.close(self._fd)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        self._pairs_in_file = len(self._pos)

    def commit(self, pairs: list[tuple[int, int]]) -> None:
        """Record ``(sid, seq)`` positions; durable on return."""
        with self._lock:
            self._apply(pairs)
            self._write(pairs)

    def forget(self, sids: Iterable[int]) -> None:
        """Drop the positions of unsubscribed subscriptions."""
        with self._lock:
            gone = [(int(s), -1) for s in sids if int(s) in self._pos]
            self._apply(gone)
            self._write(gone)

    def get(self, sid: int) -> int | None:
        return self._pos.get(sid)

    def positions(self) -> dict[int, int]:
        with self._lock:
            return dict(self._pos)

    def summary(self, seq: int) -> tuple[int, int, int]:
        """``(committed subscriptions, sum of lags, max lag)`` with lag = ``seq`` − committed."""
        with self._lock:
            if not self._pos:
                return 0, 0, 0
            arr = np.fromiter(self._pos.values(), dtype=np.int64, count=len(self._pos))
        lag = np.maximum(seq - arr, 0)
        return int(arr.shape[0]), int(lag.sum()), int(lag.max())

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


__all__ = ["CursorStore"]
