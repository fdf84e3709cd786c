"""Committed cursors (``server/cursors.py``) against a dict: commits, forgets, reopen after
close, a torn last frame cut on open, a damaged frame refused, the rewrite once the file holds
8× more pairs than live positions, a failed write changing nothing, and the lag summary
(docs/reference/persistence.md)."""

from __future__ import annotations

import errno
import os
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.server import cursors as cursors_module
from hotjoin.server.cursors import CursorStore
from hotjoin.server.records import DamagedFileError

OPS = st.lists(st.one_of(
    st.tuples(st.just("commit"), st.lists(st.tuples(st.integers(0, 6), st.integers(0, 99)),
                                          max_size=4)),
    st.tuples(st.just("forget"), st.lists(st.integers(0, 8), max_size=3)),
    st.tuples(st.just("reopen"), st.just([]))), max_size=30)


def _apply(model: dict[int, int], op: str, arg: list) -> None:
    if op == "commit":
        for sid, seq in arg:
            model[sid] = seq
    elif op == "forget":
        for sid in arg:
            model.pop(sid, None)


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_positions_match_a_dict_across_reopens(tmp_path_factory: pytest.TempPathFactory,
                                               ops: list[tuple[str, list]]) -> None:
    d = tmp_path_factory.mktemp("cursors")
    cs, model = CursorStore(d, sync=False), {}
    for op, arg in ops:
        if op == "reopen":
            cs.close()
            cs = CursorStore(d, sync=False)
        elif op == "commit":
            cs.commit(arg)
        else:
            cs.forget(arg)
        _apply(model, op, arg)
        assert cs.positions() == model
        assert all(cs.get(s) == model.get(s) for s in range(9))
    cs.close()
    assert CursorStore(d, sync=False).positions() == model


def test_in_memory_without_a_directory() -> None:
    cs = CursorStore(None)
    cs.commit([(1, 5), (2, 9)])
    cs.forget([1, 77])
    assert cs.positions() == {2: 9}
    cs.close()


def test_a_torn_last_frame_is_cut_and_the_rest_kept(tmp_path: Path) -> None:
    cs = CursorStore(tmp_path, sync=False)
    cs.commit([(0, 5)])
    cs.commit([(1, 7)])
    cs.close()
    path = tmp_path / "cursors"
    whole = path.stat().st_size
    with open(path, "ab") as f:  # a commit cut short by a crash
        payload = np.array([[2, 9]], dtype="<i8").tobytes()
        f.write((struct.pack("<II", len(payload), zlib.crc32(payload)) + payload)[:13])
    assert CursorStore(tmp_path, sync=False).positions() == {0: 5, 1: 7}
    assert path.stat().st_size == whole  # cut on open


@pytest.mark.parametrize("what", ["flip", "odd_length"])
def test_a_damaged_frame_is_refused_not_cut(tmp_path: Path, what: str) -> None:
    cs = CursorStore(tmp_path, sync=False)
    cs.commit([(0, 5)])
    cs.commit([(1, 7)])
    cs.close()
    path = tmp_path / "cursors"
    data = bytearray(path.read_bytes())
    if what == "flip":
        data[-1] ^= 0x01  # the last frame is complete: not a torn tail
    else:
        body = b"x" * 8  # a complete, verified frame of half a pair
        data += struct.pack("<II", len(body), zlib.crc32(body)) + body
    path.write_bytes(bytes(data))
    with pytest.raises(DamagedFileError) as e:
        CursorStore(tmp_path, sync=False)
    assert e.value.damage.offset == 24 if what == "flip" else 48
    assert path.read_bytes() == bytes(data)  # nothing cut


def test_the_file_is_rewritten_once_it_holds_many_times_the_live_positions(
        tmp_path: Path) -> None:
    cs = CursorStore(tmp_path, sync=False)
    for i in range(5000):
        cs.commit([(i % 3, i)])
    path = tmp_path / "cursors"
    assert path.stat().st_size < 4096 * 16 + 4096  # rewritten at least once
    assert cs.positions() == {0: 4998, 1: 4999, 2: 4997}
    cs.close()
    assert CursorStore(tmp_path, sync=False).positions() == {0: 4998, 1: 4999, 2: 4997}
    assert not (tmp_path / "cursors.tmp").exists()


def test_a_failed_write_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cs = CursorStore(tmp_path, sync=False)
    cs.commit([(0, 5)])
    size = (tmp_path / "cursors").stat().st_size

    def full(fd: int, data: bytes) -> None:
        os.write(fd, data[:5])  # part of the frame, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cursors_module, "write_all", full)
    with pytest.raises(OSError):
        cs.commit([(0, 6), (1, 1)])
    assert cs.positions() == {0: 5}
    assert (tmp_path / "cursors").stat().st_size == size  # the partial frame was cut back
    cs.forget([0])  # never raises for the disk; written with the next commit
    assert cs.positions() == {}
    monkeypatch.undo()
    cs.commit([(3, 3)])
    cs.close()
    assert CursorStore(tmp_path, sync=False).positions() == {3: 3}  # the forget was written too


@given(st.dictionaries(st.integers(0, 50), st.integers(0, 1000), max_size=20),
       st.integers(0, 1200))
def test_summary_is_count_sum_and_max_of_the_lags(positions: dict[int, int], seq: int) -> None:
    cs = CursorStore(None)
    cs.commit(list(positions.items()))
    lags = [max(seq - p, 0) for p in positions.values()]
    assert cs.summary(seq) == (len(lags), sum(lags), max(lags, default=0))
