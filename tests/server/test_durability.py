"""A topic's durability (``server/durability.py``) as a unit, on a controlled ``fdatasync``:
refusals by errno, group commit releasing queued actions only once their frame is durable and
strictly in order, a failed sync closing the topic for good, a failed write cut back
(``rollback``), the clean-stop mark written at close and checked at the next start
(docs/reference/persistence.md, "Disk faults", "Damage and repair"). With topics and a server:
``test_server_durable*.py``, ``test_server_disk_full.py``."""

from __future__ import annotations

import errno
import threading
from pathlib import Path

import pytest

from hotjoin.matcher import Engine
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server import log as log_module
from hotjoin.server.book import SubscriptionBook
from hotjoin.server.durability import DISK_FULL, Durability, WriteMark, refusal
from hotjoin.server.errors import ResourceExhausted, Unavailable
from hotjoin.server.log import SyncError, read_clean_mark
from hotjoin.server.records import DamagedFileError
from hotjoin.server.settings import DeliveryOptions, TopicSettings

NO_MATCH_LOG = DeliveryOptions(retention_bytes=0)


@pytest.mark.parametrize(("code", "kind", "words"), [
    (errno.ENOSPC, ResourceExhausted, "the disk is full"),
    (errno.EDQUOT, ResourceExhausted, "the disk quota is exhausted"),
    (errno.EIO, Unavailable, "writing its log failed"),
    (errno.EROFS, Unavailable, "writing its log failed"),
    (None, Unavailable, "writing its log failed"),
])
def test_refusal_by_errno(code: int | None, kind: type, words: str) -> None:
    err = refusal("orders", OSError(code, "why") if code else OSError("plain"))
    assert type(err) is kind and words in str(err) and "'orders'" in str(err)
    assert "\n" not in str(err)
    if kind is ResourceExhausted:
        assert err.quota == "disk" and "retry once there is space" in str(err)  # type: ignore
    else:
        assert "a retry is safe" in str(err)
    assert set(DISK_FULL) == {errno.ENOSPC, errno.EDQUOT}


def _durability(directory: Path | None, sync: bool = True) -> Durability:
    settings = TopicSettings(sync=sync, delivery=NO_MATCH_LOG, checkpoint_min_ops=0)
    d = Durability("t", directory, settings, lateness=0, retention=None, lock=threading.Lock(),
                   book=SubscriptionBook("t"))
    d.restore(Engine)
    return d


def _ops(seq: int) -> list[pb.LogOp]:
    return [pb.LogOp(seq=seq)]


@pytest.fixture
def syncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every ``fdatasync`` of the event log, recorded instead of run."""
    calls: list[int] = []
    monkeypatch.setattr(log_module.os, "fdatasync", lambda fd: calls.append(fd))
    return calls


def test_without_a_directory_append_only_queues_and_commit_releases() -> None:
    d = _durability(None)
    done: list[int] = []
    assert d.append(_ops(1), lambda: done.append(1)) == 0
    assert d.append(_ops(2), lambda: done.append(2)) == 0
    assert d.mark() == WriteMark(0, None) and d.written() == 0
    d.commit(0)
    assert done == [1, 2]
    assert d.rebuild() is d._current()  # nothing to read back: the same engine
    d.sync(0)


def test_actions_wait_for_their_frame_and_run_in_order(tmp_path: Path,
                                                       syncs: list[int]) -> None:
    d = _durability(tmp_path)
    done: list[int] = []
    tokens = [d.append(_ops(i), lambda i=i: done.append(i)) for i in range(1, 4)]
    assert tokens == sorted(tokens) and tokens[0] > 0
    d.release()
    assert done == []  # nothing durable yet
    d.commit(tokens[0])  # one sync covers every frame written before it
    assert done == [1, 2, 3] and len(syncs) == 1
    d.commit(tokens[2])
    assert len(syncs) == 1  # already durable
    d.stop()
    d.close()


def test_a_failed_sync_closes_the_topic_for_good(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    d = _durability(tmp_path)

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(log_module.os, "fdatasync", failing)
    done: list[int] = []
    token = d.append(_ops(1), lambda: done.append(1))
    with pytest.raises(Unavailable, match="syncing its log to disk failed") as e:
        d.commit(token)
    assert "\n" not in str(e.value) and d.closed and d.log_failed is not None
    assert done == []  # never acknowledged
    monkeypatch.setattr(log_module.os, "fdatasync", lambda fd: None)
    with pytest.raises(Unavailable):
        d.commit(token)  # latched: a later sync proves nothing
    with pytest.raises(Unavailable):
        d.sync(token)
    d.abandon()


@pytest.mark.parametrize(("code", "kind"), [(errno.ENOSPC, ResourceExhausted),
                                            (errno.EIO, Unavailable)])
def test_rollback_cuts_a_failed_batch_back(tmp_path: Path, syncs: list[int], code: int,
                                           kind: type) -> None:
    d = _durability(tmp_path)
    d.commit(d.append(_ops(1), lambda: None))
    mark = d.mark()
    d.append(_ops(2), lambda: None)  # written, then (say) its match records failed
    assert d.log is not None and d.log.size > mark.log_size
    err = d.rollback(mark, OSError(code, "why"))
    assert type(err) is kind and d.log.size == mark.log_size and not d.closed
    with pytest.raises(Unavailable):
        d.rollback(d.mark(), SyncError(errno.EIO, "sync"))  # a failed sync: nothing to undo
    assert d.closed
    d.abandon()


def test_close_writes_the_clean_mark_and_the_next_start_checks_it(tmp_path: Path,
                                                                   syncs: list[int]) -> None:
    d = _durability(tmp_path)
    d.commit(d.append(_ops(1), lambda: None))
    d.stop()
    d.close()
    size = (tmp_path / "log").stat().st_size
    assert read_clean_mark(tmp_path) == size > 0
    with open(tmp_path / "log", "r+b") as f:  # truncated since the clean stop: damage
        f.truncate(size - 1)
    with pytest.raises(DamagedFileError, match="clean shutdown"):
        _durability(tmp_path)
    assert (tmp_path / "log").stat().st_size == size - 1  # nothing cut


def test_an_empty_topic_restores_and_clears_its_mark(tmp_path: Path, syncs: list[int]) -> None:
    d = _durability(tmp_path)
    d.stop()
    d.close()
    assert read_clean_mark(tmp_path) == 0
    again = _durability(tmp_path)
    assert read_clean_mark(tmp_path) is None  # a crash from here on is not a clean stop
    assert again._current().seq == 0
    again.stop()
    again.close()


def test_used_before_restore_is_a_clear_error() -> None:
    d = Durability("t", None, TopicSettings(), 0, None, threading.Lock(), SubscriptionBook("t"))
    with pytest.raises(RuntimeError, match="before restore"):
        d._current()


def test_a_torn_tail_after_a_clean_stop_is_damage(tmp_path: Path, syncs: list[int]) -> None:
    d = _durability(tmp_path)
    for seq in (1, 2, 3):
        d.commit(d.append(_ops(seq), lambda: None))
    d.stop()
    d.close()
    path = tmp_path / "log"
    data = bytearray(path.read_bytes())
    assert read_clean_mark(tmp_path) == len(data)
    data[2] ^= 0x01  # the first frame's length grows by 65,536 bytes: past the end of the file
    path.write_bytes(bytes(data))
    with pytest.raises(DamagedFileError):
        _durability(tmp_path)
    assert path.read_bytes() == bytes(data)  # nothing cut
