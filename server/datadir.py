"""One owner per data directory: an exclusive OS lock held for the server's lifetime.

Two servers on one data directory would both append to the same logs as the same sequence
numbers and corrupt them. ``DataDirLock`` takes ``flock(LOCK_EX | LOCK_NB)`` on
``DATA_DIR/LOCK`` (as Kafka locks its log directories with ``.lock``) and writes the holder's PID,
host and start time into it. The kernel releases an ``flock`` when its process dies, even by
``kill -9``, so a crash never leaves a stale lock behind; a second server, or an offline repair,
fails at once with ``DataDirInUse`` naming the holder. Locks of other hosts on a network
filesystem are only as good as that filesystem's ``flock`` (docs/reference/persistence.md).

>>> import tempfile
>>> d = Path(tempfile.mkdtemp())
>>> first = DataDirLock(d)
>>> try:
...     DataDirLock(d)
... except DataDirInUse as e:
...     e.pid == os.getpid()
True
>>> first.release(); DataDirLock(d).release()
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import time
from pathlib import Path

LOCK_FILE = "LOCK"


class DataDirInUse(Exception):
    """Another process holds the data directory's lock (``pid``: its PID, None if unknown)."""

    def __init__(self, directory: Path, pid: int | None, host: str = "") -> None:
        who = f"process {pid}" if pid is not None else "another process"
        if host and host != socket.gethostname():
            who += f" on {host}"
        super().__init__(f"data directory {directory} is in use by another hotjoin server "
                         f"({who}): stop it first, or use another --data-dir")
        self.directory = directory
        self.pid = pid


class DataDirLock:
    """The exclusive lock of ``directory`` (created if missing), held until ``release``."""

    def __init__(self, directory: Path) -> None:
        if directory.exists() and not directory.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(directory))
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.path = directory / LOCK_FILE
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = holder_of(self.path)
            os.close(fd)
            raise DataDirInUse(directory, *holder) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        info = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                           "since_unix": int(time.time())}).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, info + b"\n", 0)

    def release(self) -> None:
        """Give the lock up (also done by the kernel when the process ends)."""
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1


def holder_of(path: Path) -> tuple[int | None, str]:
    """``(pid, host)`` written in a lock file by its holder (``None, ""`` when unreadable)."""
    try:
        info = json.loads(path.read_text() or "{}")
        return int(info["pid"]), str(info.get("host", ""))
    except (OSError, ValueError, KeyError, TypeError):
        return None, ""


__all__ = ["DataDirInUse", "DataDirLock", "holder_of", "LOCK_FILE"]
