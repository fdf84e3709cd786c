"""Framed record files: the one reader that tells a torn tail from damage.

Every durable file of a topic — the event log (``server/log.py``), the match log's segments
(``server/match_log.py``) and the committed cursors (``server/cursors.py``) — is a sequence of
records ``[u32 length][u32 crc32][covered header][body]``: ``length`` counts the body, the CRC
covers the header bytes after it (``covered``: 24 in the match log, 0 elsewhere) and the body.
Reading one classifies what follows the last good record (docs/reference/persistence.md, "Damage and
repair"):

- **a torn tail**: the file ends inside a record (its header, or its declared length runs past
  the end). A crash can leave exactly this, the last write cut short, so it is cut silently;
- **damage**: a *complete* record whose checksum fails, a declared length no record can have, or
  a record the format's own ``check`` refuses. That is not a crash artefact but a corrupted file,
  and the records after it may be acknowledged data: the reader stops and reports a ``Damage``
  (file, offset, reason), never dropping anything by itself. The topic is then set aside as
  damaged until an operator repairs it (``hotjoin topic repair``, ``server/repair.py``).

Reading is one sequential pass with one ``zlib.crc32`` per record: O(file size).

>>> import struct, zlib
>>> rec = lambda body: struct.pack("<II", len(body), zlib.crc32(body)) + body
>>> data = rec(b"one") + rec(b"two")
>>> r = RecordReader(data + rec(b"three")[:5], "f")
>>> [bytes(data[s:e]) for s, e in r], r.good, r.torn_bytes, r.damage
([b'one', b'two'], 22, 5, None)
>>> bad = bytearray(data); bad[9] ^= 0xFF          # flip a byte of the first body
>>> r = RecordReader(bytes(bad), "f"); list(r), r.good
([], 0)
>>> print(r.damage)
f at byte 0: checksum mismatch in a complete record of 11 bytes
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

HEADER = struct.Struct("<II")  # body length, crc32
MAX_RECORD = 1 << 30


@dataclass(frozen=True, slots=True)
class Damage:
    """Where a file stops being readable: its path, the byte offset of the record that does not
    verify, and why."""

    path: str
    offset: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path} at byte {self.offset}: {self.reason}"


class DamagedFileError(Exception):
    """A durable file holds a record that does not verify (``damage`` says where and why), or a
    file a topic needs cannot be read at all. Never raised for a torn tail."""

    def __init__(self, damage: Damage) -> None:
        super().__init__(str(damage))
        self.damage = damage

    @classmethod
    def at(cls, path: str | Path, offset: int, reason: str) -> DamagedFileError:
        return cls(Damage(str(path), offset, reason))


class RecordReader:
    """Iterate the good records of ``data`` as ``(body_start, end)`` offsets, from ``start``.

    After the iteration: ``good`` is the offset after the last good record, ``damage`` the
    ``Damage`` that stopped it (None when it reached the end or a torn tail) and ``torn_bytes``
    the length of a torn tail (0 when none). ``covered``: header bytes after the CRC that the CRC
    covers and ``length`` does not count; ``check(length) -> reason or None`` refuses a length the
    format cannot hold (e.g. cursor records are whole pairs of int64).
    """

    def __init__(self, data: bytes | memoryview, path: str | Path, start: int = 0,
                 covered: int = 0, max_length: int = MAX_RECORD,
                 check: Callable[[int], str | None] | None = None) -> None:
        self.data = data
        self.path = str(path)
        self.start = start
        self.covered = covered
        self.max_length = max_length
        self.check = check
        self.good = start
        self.damage: Damage | None = None
        self.torn_bytes = 0

    def __iter__(self) -> Iterator[tuple[int, int]]:
        data, n, pos = self.data, len(self.data), self.start
        head = HEADER.size + self.covered
        while pos < n:
            if pos + head > n:  # the header itself is cut short
                self.torn_bytes = n - pos
                return
            length, crc = HEADER.unpack_from(data, pos)
            why = (f"record length {length} exceeds the largest record ({self.max_length} bytes)"
                   if length > self.max_length else self.check(length) if self.check else None)
            if why is not None:
                self.damage = Damage(self.path, pos, why)
                return
            end = pos + head + length
            if end > n:  # the declared length runs past the end: the last write, cut short
                self.torn_bytes = n - pos
                return
            if zlib.crc32(data[pos + HEADER.size:end]) != crc:
                self.damage = Damage(self.path, pos,
                                     f"checksum mismatch in a complete record of {end - pos} bytes")
                return
            yield pos + head, end
            pos = self.good = end

    def raise_if_damaged(self) -> None:
        """Raise ``DamagedFileError`` when the iteration stopped at damage."""
        if self.damage is not None:
            raise DamagedFileError(self.damage)


def read_file(path: Path) -> bytes:
    """The whole file (``DamagedFileError`` when it cannot be read, e.g. EIO)."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise
    except OSError as e:
        raise DamagedFileError.at(path, 0, f"cannot be read ({e.strerror or e})") from None


__all__ = ["Damage", "DamagedFileError", "RecordReader", "read_file", "HEADER", "MAX_RECORD"]
