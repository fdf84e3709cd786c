"""Inspecting and repairing a damaged topic offline (``server/repair.py``), on topics whose log
is written by hand: ``scan_log`` against what was written (frames, operations, seqs, the damage
and what verifies after it); ``inspect_topic`` only reads; ``repair_topic`` cuts at the damage,
keeps every cut byte in ``repairs/``, checks the topic opens, and refuses what it cannot do
without changing anything (docs/reference/persistence.md, "Damage and repair"). With a server:
``test_server_damage.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.datadir import DataDirInUse, DataDirLock
from hotjoin.server.errors import InvalidArgument
from hotjoin.server.log import MAGIC, frame
from hotjoin.server.registry import TopicRegistry
from hotjoin.server.repair import RepairError, inspect_topic, repair_topic, scan_log
from hotjoin.server.settings import DeliveryOptions, TopicSettings

SETTINGS = TopicSettings(sync=False, delivery=DeliveryOptions(retention_bytes=0))


def _frames(sizes: list[int], first_seq: int = 1) -> list[bytes]:
    """One log frame per size: that many point events (publish ops) with consecutive seqs."""
    out, seq = [], first_seq
    for n in sizes:
        ops = [pb.LogOp(seq=seq + i, publish=pb.Event(side=pb.SIDE_S, id=f"e{seq + i}",
                                                       key=float(i), value=0.0, time=seq + i))
               for i in range(n)]
        seq += n
        out.append(frame(pb.LogBatch(ops=ops).SerializeToString()))
    return out


def _damage(frames: list[bytes], j: int) -> bytes:
    """The frames with the last byte of frame ``j`` flipped (a complete frame that does not
    verify)."""
    bad = bytearray(frames[j])
    bad[-1] ^= 0xFF
    return b"".join(frames[:j]) + bytes(bad) + b"".join(frames[j + 1:])


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=6), st.data(), st.booleans())
def test_scan_log_reports_what_was_written(tmp_path_factory: pytest.TempPathFactory,
                                           sizes: list[int], data: st.DataObject,
                                           damaged: bool) -> None:
    path = tmp_path_factory.mktemp("scan") / "log"
    frames = _frames(sizes)
    j = data.draw(st.integers(0, len(sizes) - 1)) if damaged else len(sizes)
    path.write_bytes(_damage(frames, j) if damaged else b"".join(frames))
    scan = scan_log(path)
    assert scan.size == sum(map(len, frames))
    assert (scan.frames, scan.ops, scan.last_seq) == (j, sum(sizes[:j]), sum(sizes[:j]))
    assert scan.good == sum(map(len, frames[:j]))
    if not damaged:
        assert scan.damage is None and scan.torn_bytes == 0
        return
    assert scan.damage is not None and scan.damage["offset"] == scan.good
    after = sizes[j + 1:]
    assert scan.after["frames"] == len(after) and scan.after["ops"] == sum(after)
    if after:
        assert (scan.after["first_seq"], scan.after["last_seq"]) == (sum(sizes[:j + 1]) + 1,
                                                                      sum(sizes))
    report = scan.report(path)
    assert report["damage"] == scan.damage and report["verifies_after_damage"] == scan.after


def test_scan_of_a_missing_log_a_torn_tail_and_a_compacted_header(tmp_path: Path) -> None:
    assert scan_log(tmp_path / "missing").frames == 0
    frames = _frames([2, 3])
    torn = tmp_path / "torn"
    torn.write_bytes(frames[0] + frames[1][:7])
    scan = scan_log(torn)
    assert (scan.frames, scan.torn_bytes, scan.damage) == (1, 7, None)
    compacted = tmp_path / "compacted"
    compacted.write_bytes(MAGIC + frame(b'{"frames": 1}') + frames[0])
    scan = scan_log(compacted)
    assert (scan.snapshot_frames, scan.frames, scan.ops) == (1, 1, 2)
    compacted.write_bytes(MAGIC + frame(b"not json") + frames[0])
    assert scan_log(compacted).damage["reason"] == "unreadable snapshot header"  # type: ignore


@pytest.fixture
def topic_dir(tmp_path: Path) -> Path:
    """A topic ``t`` created by a registry, closed, with four frames of events in its log."""
    registry = TopicRegistry(tmp_path, SETTINGS)
    registry.create("t", lateness=1000, retention=None, strategy={})
    registry.close()
    d = tmp_path / "topics" / "t"
    (d / "log").write_bytes(b"".join(_frames([2, 1, 3, 2])))
    (d / "log.clean").unlink(missing_ok=True)
    return d


def test_an_undamaged_topic_is_left_alone(topic_dir: Path) -> None:
    data_dir = topic_dir.parent.parent
    report = inspect_topic(data_dir, "t")
    assert not report["damaged"] and report["a_repair_would"] == []
    assert report["options"]["lateness"] == 1000
    assert repair_topic(data_dir, "t") == {"topic": "t", "repaired": False,
                                           "message": "topic 't' has no damage"}


def test_repair_cuts_at_the_damage_and_keeps_the_cut_bytes(topic_dir: Path) -> None:
    data_dir = topic_dir.parent.parent
    frames = _frames([2, 1, 3, 2])
    damaged = _damage(frames, 1)
    (topic_dir / "log").write_bytes(damaged)
    report = inspect_topic(data_dir, "t")  # only reads
    assert report["damaged"] and (topic_dir / "log").read_bytes() == damaged
    plan = report["a_repair_would"]
    assert len(plan) == 1 and f"cut the log at byte {len(frames[0])}" in plan[0]
    assert "2 later frames holding 5 operations" in plan[0] and "(seqs 4-8)" in plan[0]
    done = repair_topic(data_dir, "t")
    assert done["repaired"] and done["log_ends_at_seq"] == 2
    assert (topic_dir / "log").read_bytes() == frames[0]
    backup = Path(done["backup"])
    assert backup.parent == data_dir / "repairs"
    assert (backup / "log.cut").read_bytes() == damaged[len(frames[0]):]  # nothing lost
    assert not inspect_topic(data_dir, "t")["damaged"]
    registry = TopicRegistry(data_dir, SETTINGS)  # the topic opens at the new end
    try:
        assert registry.get("t").engine.seq == 2
    finally:
        registry.close()


def test_refusals_change_nothing(topic_dir: Path) -> None:
    data_dir = topic_dir.parent.parent
    with pytest.raises(RepairError, match="no topic 'nope'"):
        repair_topic(data_dir, "nope")
    with pytest.raises(InvalidArgument, match="invalid topic name"):
        inspect_topic(data_dir, "../t")
    (topic_dir / "topic.json").write_text("{broken")
    with pytest.raises(RepairError, match="give the topic's options"):
        repair_topic(data_dir, "t")
    assert (topic_dir / "topic.json").read_text() == "{broken"
    assert not (data_dir / "repairs").exists()
    lock = DataDirLock(data_dir)  # a running server holds the directory
    try:
        with pytest.raises(DataDirInUse):
            repair_topic(data_dir, "t", {"lateness": 1000})
    finally:
        lock.release()
    done = repair_topic(data_dir, "t", {"lateness": 1000})
    assert done["repaired"] and "rewrote topic.json from the given options" in done["done"]
    assert inspect_topic(data_dir, "t")["options"]["lateness"] == 1000
