"""``hotjoin topic inspect|repair NAME --data-dir DIR`` (``cli/commands/topic_repair.py``), offline
on a topic whose log is written by hand: inspect exits 0 or 1 as ``fsck`` does and only reads;
repair cuts at the damage and says where the backup is; a running server's directory, a
missing directory or topic are one line (docs/reference/persistence.md, "Damage and repair")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hotjoin.cli.main import main
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.datadir import DataDirLock
from hotjoin.server.log import frame
from hotjoin.server.registry import TopicRegistry
from hotjoin.server.settings import DeliveryOptions, TopicSettings


def _frame(seq: int) -> bytes:
    op = pb.LogOp(seq=seq, publish=pb.Event(side=pb.SIDE_R, id=f"r{seq}", key=1.0, value=0.0,
                                            time=seq))
    return frame(pb.LogBatch(ops=[op]).SerializeToString())


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A stopped server's data directory holding topic ``t`` with three frames in its log."""
    registry = TopicRegistry(tmp_path, TopicSettings(sync=False,
                                                     delivery=DeliveryOptions(retention_bytes=0)))
    registry.create("t", lateness=100, retention=None, strategy={})
    registry.close()
    log = tmp_path / "topics" / "t" / "log"
    log.write_bytes(_frame(1) + _frame(2) + _frame(3))
    (log.parent / "log.clean").unlink(missing_ok=True)
    return tmp_path


def _damage(data_dir: Path) -> bytes:
    log = data_dir / "topics" / "t" / "log"
    data = bytearray(log.read_bytes())
    data[len(_frame(1)) + len(_frame(2)) - 1] ^= 0xFF  # the second frame's last byte
    log.write_bytes(bytes(data))
    return bytes(data)


def test_inspect_exits_0_then_1_and_only_reads(data_dir: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topic", "inspect", "t", "--data-dir", str(data_dir)]) == 0
    assert json.loads(capsys.readouterr().out)["damaged"] is False
    damaged = _damage(data_dir)
    assert main(["topic", "inspect", "t", "--data-dir", str(data_dir)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["damaged"] and len(report["a_repair_would"]) == 1
    assert (data_dir / "topics" / "t" / "log").read_bytes() == damaged


def test_repair_cuts_and_names_the_backup(data_dir: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    _damage(data_dir)
    assert main(["topic", "repair", "t", "--data-dir", str(data_dir)]) == 0
    out, err = capsys.readouterr()
    done = json.loads(out)
    assert done["repaired"] and done["log_ends_at_seq"] == 1
    assert err.startswith("hotjoin topic repair: t: cut ") and done["backup"] in err
    assert (data_dir / "topics" / "t" / "log").read_bytes() == _frame(1)
    assert main(["topic", "repair", "t", "--data-dir", str(data_dir)]) == 0  # nothing left
    assert json.loads(capsys.readouterr().out)["repaired"] is False


def test_refusals_are_one_line(data_dir: Path, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    damaged = _damage(data_dir)
    lock = DataDirLock(data_dir)
    try:
        assert main(["topic", "repair", "t", "--data-dir", str(data_dir)]) == 1
        err = capsys.readouterr().err
        assert "repair needs the server stopped" in err and err.count("\n") == 1
    finally:
        lock.release()
    assert (data_dir / "topics" / "t" / "log").read_bytes() == damaged
    assert main(["topic", "inspect", "t", "--data-dir", str(tmp_path / "none")]) == 2
    assert "no data directory" in capsys.readouterr().err
    assert main(["topic", "repair", "nope", "--data-dir", str(data_dir)]) == 2
    assert "no topic 'nope'" in capsys.readouterr().err
    (data_dir / "topics" / "t" / "topic.json").write_text("{")
    assert main(["topic", "repair", "t", "--data-dir", str(data_dir)]) == 2
    assert "give the topic's options" in capsys.readouterr().err
    assert main(["topic", "repair", "t", "--data-dir", str(data_dir), "--lateness", "100"]) == 0
    assert "rewrote topic.json" in capsys.readouterr().out
