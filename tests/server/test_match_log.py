"""The match log: the delivery messages of each batch, appended as records to segment files,
read back by seq, cut at a torn tail or at the event log's end on restart, and dropped by whole
segments under the byte and time retention."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from hotjoin.server.match_log import MatchLog, decode, encode, encode_parts


def _cols(seq: int, sid: int = 0, n_pairs: int = 0) -> tuple:
    pairs = None
    if n_pairs:
        pairs = {0: (np.array([f"r{seq}.{i}" for i in range(n_pairs)], dtype=object),
                     np.array([f"s{seq}"] * n_pairs, dtype=object))}
    return (np.array([sid]), np.array([seq]), np.array([1], dtype=np.int8), np.array([max(n_pairs, 1)]),
            np.array([0], dtype=np.int32), [("publish", "S", f"s{seq}", 0)], pairs)


def test_match_log_recovery_drops_torn_tail_and_unlogged_batches(tmp_path: Path) -> None:
    ml = MatchLog(tmp_path, log_seq=0, sync=False)
    for seq in range(1, 11):
        ml.append(seq, seq, encode(_cols(seq, n_pairs=2)))
    ml.close()
    seg = sorted(tmp_path.glob("*.seg"))[-1]
    with open(seg, "ab") as f:
        f.write(b"\x10\x00\x00\x00torn")  # kill -9 in the middle of a record
    ml = MatchLog(tmp_path, log_seq=10, sync=False)
    got = ml.read(0, 10)
    assert [r[0] for r in got] == list(range(1, 11))
    assert [tuple(r[2][6].as_dict()[0][0]) for r in got][3] == ("r4.0", "r4.1")
    ml.close()
    # the event log ends at seq 7: the batches 8..10 never made it, their messages must go
    ml = MatchLog(tmp_path, log_seq=7, sync=False)
    assert [r[1] for r in ml.read(0, 100)] == list(range(1, 8))
    ml.append(8, 8, encode(_cols(8, sid=3)))
    assert [(r[0], r[2][0].tolist()) for r in ml.read(7, 100)] == [(8, [3])]
    ml.close()


def test_match_log_retention_by_bytes_and_time(tmp_path: Path) -> None:
    ml = MatchLog(tmp_path, log_seq=0, retention_bytes=4096, segment_bytes=1024, sync=False)
    drops: list[int] = []
    ml.on_drop = lambda upto, sids: drops.append(upto)
    for seq in range(1, 201):
        ml.append(seq, seq, encode(_cols(seq)))
    assert ml.bytes <= 4096 + 1024 + 512  # whole segments go; the active one always stays
    first = ml.retained_from
    assert first > 1 and drops and drops[-1] == first - 1
    got = ml.read(0, 200)
    assert got[0][0] == first and [r[0] for r in got] == list(range(first, 201))
    ml.retention_ms = 1000
    assert ml.enforce_retention(now_ns=2**62) > 0  # all but the active one
    assert len(ml.segments) == 1 and ml.retained_from == ml.segments[0].start
    ml.close()
    reopened = MatchLog(tmp_path, log_seq=200, retention_bytes=4096, segment_bytes=1024, sync=False)
    assert reopened.retained_from == ml.segments[0].start
    reopened.close()


def test_read_returns_the_records_in_the_seq_range(tmp_path: Path) -> None:
    ml = MatchLog(tmp_path, log_seq=0, sync=False)
    for seq in range(1, 21):
        ml.append(seq, seq, encode(_cols(seq, sid=seq % 4)))
    assert [r[0] for r in ml.read(5, 9)] == [6, 7, 8, 9]
    assert ml.read(20, 30) == [] and ml.read(0, 0) == []
    rec = ml.read(11, 12)
    assert [(r[0], r[1], r[2][0].tolist(), r[2][1].tolist()) for r in rec] == [(12, 12, [0], [12])]
    assert ml.retained_from == 1
    ml.close()
    again = MatchLog(tmp_path, log_seq=20, sync=False)
    assert [r[0] for r in again.read(0, 100)] == list(range(1, 21))
    again.close()


def test_a_batch_cut_back_after_a_failed_write_leaves_no_record(tmp_path: Path) -> None:
    ml = MatchLog(tmp_path, log_seq=0, sync=False)
    ml.append(1, 1, encode(_cols(1)))
    size = ml.bytes
    mark = ml.mark()
    ml.append(2, 2, encode(_cols(2)))
    assert ml.bytes > size
    ml.truncate(mark)
    assert ml.bytes == size and [r[0] for r in ml.read(0, 10)] == [1]
    ml.append(2, 2, encode(_cols(2, sid=9)))
    assert [(r[0], r[2][0].tolist()) for r in ml.read(0, 10)] == [(1, [0]), (2, [9])]
    ml.close()


def test_a_record_decodes_to_the_columns_it_was_encoded_from() -> None:
    cols = _cols(7, sid=2, n_pairs=3)
    back = decode(encode(cols))
    for a, b in zip(back[:5], cols[:5], strict=True):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    assert list(back[5]) == cols[5]
    assert {k: tuple(map(list, v)) for k, v in back[6].as_dict().items()} == {
        0: (["r7.0", "r7.1", "r7.2"], ["s7", "s7", "s7"])}


def test_a_record_written_in_parts_is_the_record_written_whole(tmp_path: Path) -> None:
    """``append`` of ``encode_parts`` (written with one ``writev``, no join) leaves the same bytes
    as ``append`` of ``encode``, apart from each record's write time, and reads back the same."""
    whole, parts = MatchLog(tmp_path / "a", log_seq=0, sync=False), MatchLog(tmp_path / "b", log_seq=0, sync=False)
    for seq in range(1, 6):
        cols = _cols(seq, sid=seq, n_pairs=seq % 3)
        whole.append(seq, seq, encode(cols))
        parts.append(seq, seq, encode_parts(cols))
    assert b"".join(encode_parts(_cols(9, n_pairs=2))) == encode(_cols(9, n_pairs=2))
    a, b = whole.read(0, 5), parts.read(0, 5)
    assert [r[:2] for r in a] == [r[:2] for r in b] == [(s, s) for s in range(1, 6)]
    for ra, rb in zip(a, b, strict=True):
        assert [np.asarray(x).tolist() for x in ra[2][:5]] == [np.asarray(x).tolist() for x in rb[2][:5]]
    assert [s.size for s in whole.segments] == [s.size for s in parts.segments]
    whole.close()
    parts.close()


def test_a_rolled_segment_leaves_the_page_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a full segment is synced at a roll, its pages are dropped from the page cache (they
    are read again only by a listener far behind); the active segment's stay."""
    if not hasattr(os, "posix_fadvise"):
        pytest.skip("no posix_fadvise here")
    dropped: list[int] = []
    real = os.posix_fadvise

    def seen(fd: int, offset: int, length: int, advice: int) -> None:
        if advice == os.POSIX_FADV_DONTNEED:
            dropped.append(os.fstat(fd).st_size)
        real(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", seen)
    ml = MatchLog(tmp_path, log_seq=0, segment_bytes=1024, sync=True)
    for seq in range(1, 4):
        ml.append(seq, seq, encode(_cols(seq, n_pairs=200)))  # > 1 KiB each
    assert len(ml.segments) == 3 and len(dropped) == 2
    assert dropped == [s.size for s in ml.segments[:2]]  # each whole segment, once synced
    assert [r[0] for r in ml.read(0, 3)] == [1, 2, 3]
    ml.close()
