"""Committed cursors of one topic: how far each subscription's consumer has processed.

Like Kafka's consumer offsets: a listener commits ``(subscription id, seq)`` — "every message with
seq <= this one is processed" — and a later ``Listen`` without an explicit cursor for that
subscription starts after it. The server keeps one position per subscription (a subscription
belongs to one subscriber, so this is also the per-subscriber position); committing per
subscriber commits the same seq for each of its subscriptions.

**Durability.** ``DATA_DIR/topics/<name>/cursors`` is a sequence of frames
``[u32 length][u32 crc32][int64 pairs (sid, seq)...]``, one per commit, ``fdatasync``\\ ed before
the commit returns; a later pair overrides an earlier one, seq −1 forgets a subscription (it was
unsubscribed). A torn last frame (``kill -9`` during a commit, which was then never
acknowledged) is cut on open; a complete frame that does not verify is damage
(``server/records.py``): the topic is set aside until repaired. The file is rewritten (temp file, fsync, rename, fsync of the
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

import contextlib
import logging
import os
import struct
import threading
import zlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from hotjoin.server.log import SyncError, _fsync_dir, write_all
from hotjoin.server.records import RecordReader, read_file

_HEAD = struct.Struct("<II")


def _whole_pairs(length: int) -> str | None:
    return None if length % 16 == 0 else f"record length {length} is not a whole number of (sid, seq) pairs"


log = logging.getLogger("hotjoin.topic")


class CursorStore:
    """Committed positions of one topic's subscriptions, durable when ``directory`` is set."""

    _retry_rewrite_at = 0  # pairs in the file before the next rewrite after one failed
    _unwritten: tuple[tuple[int, int], ...] = ()  # forgets not written yet (a full disk)

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
            data = read_file(path)
            reader = RecordReader(data, path, check=_whole_pairs)
            for body, end in reader:
                arr = np.frombuffer(data, dtype="<i8", count=(end - body) // 8, offset=body)
                self._apply(arr.reshape(-1, 2).tolist())
                self._pairs_in_file += (end - body) // 16
            reader.raise_if_damaged()  # a complete record that does not verify: never cut
            good = reader.good
            if good < len(data):  # a torn tail: a commit cut short by a crash, never acknowledged
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
        """Append ``pairs`` as one frame and sync it. When the write or the sync fails (a full
        disk: ENOSPC) the file is cut back to its size before the frame (``ftruncate`` needs no
        free space), so nothing half-written stays, and the ``OSError`` is raised (``SyncError``
        for the sync, server/log.py)."""
        if self._fd < 0 or not pairs:
            return
        pairs = [*self._unwritten, *pairs]  # forgotten positions a failed write left behind
        payload = np.asarray(pairs, dtype="<i8").tobytes()
        size = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            write_all(self._fd, _HEAD.pack(len(payload), zlib.crc32(payload)) + payload)
            if self.sync:
                try:
                    os.fdatasync(self._fd)
                except OSError as x:
                    raise SyncError(x.errno, x.strerror) from x
        except OSError:
            with contextlib.suppress(OSError):  # a cut that fails leaves a torn tail: cut on open
                os.ftruncate(self._fd, size)
            raise
        self._pairs_in_file += len(pairs)
        self._unwritten = ()

    def _compact(self) -> None:
        """Rewrite the file once it holds 8× more pairs than live positions. Housekeeping after a
        durable commit: a failure (a full disk) removes the temp file, keeps the old file, logs
        one line and waits for 4,096 more pairs before the next try."""
        if self._pairs_in_file <= max(8 * len(self._pos) + 4096, self._retry_rewrite_at):
            return
        try:
            self._rewrite()
        except OSError as x:
            self._retry_rewrite_at = self._pairs_in_file + 4096
            log.warning("%s: not rewritten (%s); the old file stays in use",
                        self.directory, x.strerror or x)

    def _rewrite(self) -> None:
        assert self.directory is not None
        path, tmp = self.directory / "cursors", self.directory / "cursors.tmp"
        payload = np.asarray(sorted(self._pos.items()) or np.zeros((0, 2)), dtype="<i8").tobytes()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            try:
                write_all(fd, _HEAD.pack(len(payload), zlib.crc32(payload)) + payload)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # give the space back
            raise
        os.close(self._fd)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)  # never append to the old inode
        self._pairs_in_file = len(self._pos)
        self._unwritten = ()  # the new file holds only the live positions
        _fsync_dir(self.directory)

    def commit(self, pairs: list[tuple[int, int]]) -> None:
        """Record ``(sid, seq)`` positions; durable on return. When they cannot be written or
        synced (``OSError``, e.g. ENOSPC) nothing changes: not the file, not the positions."""
        with self._lock:
            self._write(pairs)
            self._apply(pairs)
            self._compact()

    def forget(self, sids: Iterable[int]) -> None:
        """Drop the positions of unsubscribed subscriptions. Never raises for the disk (the
        unsubscribe is durable already): a record that cannot be written now is written with the
        next commit; until then a restart would bring the positions back, which no listener can
        use (ids are never reused)."""
        with self._lock:
            gone = [(int(s), -1) for s in sids if int(s) in self._pos]
            self._apply(gone)
            try:
                self._write(gone)
            except OSError as x:
                self._unwritten = (*self._unwritten, *gone)
                log.warning("%s: forgetting %d positions not written yet (%s)", self.directory,
                            len(gone), x.strerror or x)
            self._compact()

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
