"""The operation log (``server/log.py``): frames written by ``OpLog`` read back in order; a
torn tail is cut on open and logged, a damaged frame stops reading without cutting anything;
group commit syncs once for every frame written before it and latches a failed sync; the
clean-stop mark; a compacted log's header (docs/reference/persistence.md)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server import log as log_module
from hotjoin.server.log import (
    CLEAN_MARK,
    MAGIC,
    OpLog,
    SyncError,
    clear_clean_mark,
    frame,
    iter_frames,
    read_batches,
    read_clean_mark,
    read_log,
    write_all,
    write_clean_mark,
)
from hotjoin.server.records import DamagedFileError


def _batch(seq: int) -> list[pb.LogOp]:
    return [pb.LogOp(seq=seq)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 10 ** 9), max_size=8), st.integers(0, 40))
def test_frames_read_back_and_a_torn_tail_is_cut(tmp_path_factory: pytest.TempPathFactory,
                                                 seqs: list[int], torn: int) -> None:
    path = tmp_path_factory.mktemp("log") / "log"
    oplog = OpLog(path, sync=False)
    for s in seqs:
        oplog.append(_batch(s))
    oplog.close()
    whole = path.stat().st_size
    extra = frame(pb.LogBatch(ops=_batch(7)).SerializeToString())
    torn = min(torn, len(extra) - 1)
    with open(path, "ab") as f:
        f.write(extra[:torn])  # the last write of a crash, cut short
    assert [b.ops[0].seq for b in read_batches(path)] == seqs  # reading ignores the tail
    reopened = OpLog(path, sync=False)  # opening cuts it
    assert path.stat().st_size == whole == reopened.size
    reopened.append(_batch(99))
    reopened.close()
    assert [b.ops[0].seq for b in read_batches(path)] == [*seqs, 99]
    ends = [end for end, _ in iter_frames(path)]
    assert ends == sorted(ends) and ends[-1] == path.stat().st_size
    middle = ends[len(ends) // 2 - 1] if len(ends) > 1 else None
    if middle is not None:  # from a frame boundary: the frames after it
        assert len(list(read_batches(path, middle))) == len(ends) - len(ends) // 2


def test_a_damaged_frame_is_refused_and_nothing_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "log"
    oplog = OpLog(path, sync=False)
    for s in (1, 2, 3):
        oplog.append(_batch(s))
    oplog.close()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(DamagedFileError):
        OpLog(path, sync=False)
    with pytest.raises(DamagedFileError):
        list(read_batches(path))
    assert path.read_bytes() == bytes(data)
    with pytest.raises(DamagedFileError, match="acknowledged frames are missing"):
        list(iter_frames(path, len(data) + 1))


def test_trusted_size_skips_the_scan(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"not a log at all")
    oplog = OpLog(path, sync=False, trusted_size=16)
    assert oplog.size == 16
    oplog.close()


def test_group_commit_syncs_once_for_every_frame_written_before(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(log_module.os, "fdatasync", lambda fd: calls.append(fd))
    oplog = OpLog(tmp_path / "log", sync=True)
    tokens = [oplog.write(frame(b"x" * i)) for i in range(1, 4)]
    assert tokens == sorted(tokens) and oplog.durable == 0
    oplog.sync_upto(tokens[0])  # covers all three: they were written before it started
    assert len(calls) == 1 and oplog.durable == tokens[-1]
    oplog.sync_upto(tokens[2])
    assert len(calls) == 1 and oplog.syncs == 1  # already durable: no second sync
    oplog.append_frame(frame(b"y"))
    assert len(calls) == 2
    oplog.truncate(tokens[0])  # tokens keep counting after a cut
    assert oplog.size == tokens[0] and oplog.written > tokens[-1]
    oplog.close()


def test_a_failed_sync_is_latched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    oplog = OpLog(tmp_path / "log", sync=True)
    monkeypatch.setattr(log_module.os, "fdatasync", failing)
    token = oplog.write(frame(b"a"))
    with pytest.raises(SyncError) as e:
        oplog.sync_upto(token)
    assert e.value.errno == errno.EIO
    monkeypatch.setattr(log_module.os, "fdatasync", lambda fd: None)  # the disk "recovers"
    with pytest.raises(SyncError):
        oplog.sync_upto(token)  # never trusted again until a restart reads it back
    with pytest.raises(SyncError):
        oplog.append_frame(frame(b"b"))
    oplog.close()


def test_reopen_switches_files_and_keeps_tokens(tmp_path: Path) -> None:
    oplog = OpLog(tmp_path / "log", sync=False)
    token = oplog.write(frame(b"a"))
    new = tmp_path / "log.new"
    new.write_bytes(frame(b"a") + frame(b"b"))
    oplog.reopen(new, new.stat().st_size)
    assert oplog.durable == oplog.written == token and oplog.path == new
    oplog.append_frame(frame(b"c"))
    oplog.close()
    assert [p for _, p in iter_frames(new)] == [b"a", b"b", b"c"]


def test_a_compacted_log_yields_its_header_then_its_batches(tmp_path: Path) -> None:
    path = tmp_path / "log"
    header = {"frames": 1, "seq": 5}
    path.write_bytes(MAGIC + frame(json.dumps(header).encode())
                     + frame(pb.LogBatch(ops=_batch(5)).SerializeToString()))
    got, batches = read_log(path)
    assert got == header and [b.ops[0].seq for b in batches] == [5]
    oplog = OpLog(path, sync=False)  # the magic is not a frame
    assert oplog.size == path.stat().st_size
    oplog.close()
    bare = tmp_path / "bare"
    bare.write_bytes(MAGIC)
    with pytest.raises(DamagedFileError, match="without its snapshot header"):
        read_log(bare)
    plain = tmp_path / "plain"
    plain.write_bytes(frame(pb.LogBatch(ops=_batch(1)).SerializeToString()))
    assert read_log(plain)[0] is None


def test_the_clean_mark(tmp_path: Path) -> None:
    assert read_clean_mark(tmp_path) is None  # after a crash: no mark
    write_clean_mark(tmp_path, 1234)
    assert read_clean_mark(tmp_path) == 1234
    assert not (tmp_path / (CLEAN_MARK + ".tmp")).exists()
    clear_clean_mark(tmp_path)
    assert read_clean_mark(tmp_path) is None
    clear_clean_mark(tmp_path)  # twice: fine
    (tmp_path / CLEAN_MARK).write_text("{broken")
    assert read_clean_mark(tmp_path) is None


def test_write_all_finishes_a_short_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.write
    monkeypatch.setattr(log_module.os, "write", lambda fd, data: real(fd, bytes(data[:3])))
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        write_all(fd, b"0123456789")
    finally:
        os.close(fd)
    assert (tmp_path / "f").read_bytes() == b"0123456789"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=12), st.integers(1, 17), st.integers(1, 30))
def test_parts_are_written_as_their_join_whatever_the_short_writes(
        tmp_path_factory: pytest.TempPathFactory, parts: list[bytes], most: int, join_below: int) -> None:
    """``write_all_parts`` writes the join of ``parts`` through ``os.write`` (so a fault in
    ``os.write`` reaches it), parts of ``JOIN_BELOW`` bytes or more from their own buffers and
    runs of smaller ones joined, and resumes after a short write (at most ``most`` bytes)."""
    path = tmp_path_factory.mktemp("parts") / "f"
    real = os.write
    writes: list[int] = []

    def short(fd: int, data: bytes | memoryview) -> int:
        writes.append(len(data))
        return real(fd, bytes(data)[:most])

    mp = pytest.MonkeyPatch()
    mp.setattr(log_module.os, "write", short)
    mp.setattr(log_module, "JOIN_BELOW", join_below)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        log_module.write_all_parts(fd, [memoryview(p) if i % 2 else p for i, p in enumerate(parts)])
    finally:
        os.close(fd)
        mp.undo()
    assert path.read_bytes() == b"".join(parts)
    whole = [len(p) for p in parts if len(p) >= join_below]
    assert sum(1 for n in writes if n > 0) >= -(-len(b"".join(parts)) // most)
    assert all(any(n == w for n in writes) for w in whole)  # each large part: a write of its own


def test_dropping_cached_pages_is_advice_that_changes_no_byte(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``drop_cached`` asks for ``POSIX_FADV_DONTNEED`` over the range (length 0: to the end),
    leaves the file as it was, and is silent where the kernel refuses or lacks the call."""
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10_000)
    fd = os.open(path, os.O_RDONLY)
    try:
        if hasattr(os, "posix_fadvise"):
            log_module.drop_cached(fd)
            log_module.drop_cached(fd, 4096, 8192)
            seen: list[tuple[int, int, int]] = []
            monkeypatch.setattr(log_module.os, "posix_fadvise",
                                lambda f, off, n, advice: seen.append((off, n, advice)))
            log_module.drop_cached(fd, 4096, 8192)
            log_module.drop_cached(fd)
            log_module.drop_cached(fd, 8192, 4096)  # an empty range asks for nothing
            assert seen == [(4096, 4096, os.POSIX_FADV_DONTNEED), (0, 0, os.POSIX_FADV_DONTNEED)]

            def refuse(*_: object) -> None:
                raise OSError(errno.ESPIPE, "Illegal seek")

            monkeypatch.setattr(log_module.os, "posix_fadvise", refuse)
            log_module.drop_cached(fd)
        monkeypatch.delattr(log_module.os, "posix_fadvise", raising=False)
        log_module.drop_cached(fd)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"x" * 10_000
