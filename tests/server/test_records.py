"""Framed record files (``server/records.py``): ``RecordReader`` against a brute-force frame
parser on every prefix and every single-byte corruption of random files. A torn tail (the file
ends inside a record) is cut silently; a complete record that does not verify, or a length no
record can have, is ``Damage`` and nothing after it is read (docs/reference/persistence.md, "Damage
and repair")."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.server.records import (
    HEADER,
    MAX_RECORD,
    Damage,
    DamagedFileError,
    RecordReader,
    read_file,
)

BODIES = st.lists(st.binary(max_size=24), max_size=6)


def frame(body: bytes, covered: bytes = b"") -> bytes:
    """One record: ``[u32 length][u32 crc32 of covered+body][covered][body]``."""
    return struct.pack("<II", len(body), zlib.crc32(covered + body)) + covered + body


def brute(data: bytes, covered: int = 0, max_length: int = MAX_RECORD
          ) -> tuple[list[tuple[int, int]], int, int, int | None]:
    """(records, good, torn bytes, damage offset) by reading the frames one by one."""
    out, pos = [], 0
    while pos < len(data):
        if len(data) - pos < 8 + covered:
            return out, pos, len(data) - pos, None
        length, crc = struct.unpack("<II", data[pos:pos + 8])
        if length > max_length:
            return out, pos, 0, pos
        end = pos + 8 + covered + length
        if end > len(data):
            return out, pos, len(data) - pos, None
        if zlib.crc32(data[pos + 8:end]) != crc:
            return out, pos, 0, pos
        out.append((pos + 8 + covered, end))
        pos = end
    return out, pos, 0, None


def _read(data: bytes, **kw: int) -> tuple[list[tuple[int, int]], int, int, int | None]:
    r = RecordReader(data, "f", **kw)
    got = list(r)
    return got, r.good, r.torn_bytes, None if r.damage is None else r.damage.offset


@settings(max_examples=150, deadline=None)
@given(BODIES, st.sampled_from([0, 24]))
def test_every_prefix_reads_as_the_brute_force_does(bodies: list[bytes], covered: int) -> None:
    data = b"".join(frame(b, bytes(range(covered))) for b in bodies)
    for cut in range(len(data) + 1):
        prefix = data[:cut]
        assert _read(prefix, covered=covered) == brute(prefix, covered)
        assert brute(prefix, covered)[3] is None  # a prefix is never damage


@settings(max_examples=150, deadline=None)
@given(BODIES.filter(bool), st.data())
def test_every_flipped_byte_is_found_by_the_brute_force_s_rule(bodies: list[bytes],
                                                                data: st.DataObject) -> None:
    good = b"".join(frame(b) for b in bodies)
    i = data.draw(st.integers(0, len(good) - 1))
    bad = bytearray(good)
    bad[i] ^= data.draw(st.integers(1, 255))
    got = _read(bytes(bad), max_length=64)
    assert got == brute(bytes(bad), max_length=64)
    assert got[1] <= i  # the record holding the flipped byte is never read as good


def test_check_refuses_a_length_the_format_cannot_hold() -> None:
    data = frame(b"x" * 16) + frame(b"y" * 5) + frame(b"z" * 16)
    r = RecordReader(data, "cursors", check=lambda n: None if n % 16 == 0 else "not pairs")
    assert [data[s:e] for s, e in r] == [b"x" * 16]
    assert r.damage == Damage("cursors", 24, "not pairs") and r.good == 24
    with pytest.raises(DamagedFileError) as e:
        r.raise_if_damaged()
    assert e.value.damage.offset == 24 and str(e.value) == "cursors at byte 24: not pairs"


def test_a_start_offset_and_an_oversized_length() -> None:
    data = frame(b"a") + frame(b"b")
    r = RecordReader(data, "f", start=9)
    assert [data[s:e] for s, e in r] == [b"b"] and r.good == len(data)
    huge = struct.pack("<II", MAX_RECORD + 1, 0) + b"x" * 10
    r = RecordReader(huge, "f")
    assert list(r) == [] and r.damage is not None and "exceeds the largest" in r.damage.reason
    empty = RecordReader(b"", "f")
    assert list(empty) == [] and (empty.good, empty.torn_bytes, empty.damage) == (0, 0, None)
    empty.raise_if_damaged()  # nothing to raise


def test_header_layout() -> None:
    assert HEADER.size == 8 and HEADER.format == "<II"


def test_read_file(tmp_path: Path) -> None:
    p = tmp_path / "log"
    p.write_bytes(b"abc")
    assert read_file(p) == b"abc"
    with pytest.raises(FileNotFoundError):
        read_file(tmp_path / "missing")
    with pytest.raises(DamagedFileError, match="cannot be read") as e:
        read_file(tmp_path)  # a directory: EISDIR
    assert e.value.damage.offset == 0 and "\n" not in str(e.value)
