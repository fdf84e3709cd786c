"""``hotjoin replay``'s command line without Spark (``--in-process``): the summary line or JSON,
the deliveries written, and every input checked before a JVM would start, each a one-line error;
Spark's own log quiet unless asked, and a failed Spark task reduced to its useful line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hotjoin.cli.main import CliError, main
from hotjoin.ops.replay import command
from ops.replay.test_log import as_rows, random_log


@pytest.fixture
def export(tmp_path: Path) -> tuple[Path, object]:
    g = random_log(9, n_ops=120, retention=5, hot=0.5)
    return g.write(tmp_path / "export"), g


def _argv(export: Path, out: Path, *more: str) -> list[str]:
    return ["replay", "--events", str(export / "events.parquet"), "--subscriptions",
            str(export / "subscriptions.parquet"), "--out", str(out), "--in-process", "--quiet",
            *more]


def test_an_in_process_replay_writes_every_delivery(export: tuple[Path, object], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path, g = export
    assert main(_argv(path, tmp_path / "out", "--shards", "2", "--skew", "0.3")) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("replayed ") and f"{len(g.expected):,} deliveries" in line  # type: ignore[attr-defined]
    assert "shard(s)" in line and "events/s" in line and len(line.splitlines()) == 1
    assert as_rows(pq.read_table(tmp_path / "out")) == g.expected_after()  # type: ignore[attr-defined]
    assert main(_argv(path, tmp_path / "out", "--overwrite", "--json")) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["deliveries"] == len(g.expected) and summary["seconds"]["wall"] > 0  # type: ignore[attr-defined]


@pytest.mark.parametrize(("more", "message"), [
    (["--shards", "0"], "--shards must be >= 1, got 0"),
    (["--skew", "0"], "--skew must be > 0, got 0.0"),
    (["--conf", "novalue"], "--conf must be KEY=VALUE, got 'novalue'"),
    (["--conf", "=v"], "--conf must be KEY=VALUE"),
])
def test_bad_options_are_one_line(export: tuple[Path, object], tmp_path: Path, more: list[str],
                                  message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_argv(export[0], tmp_path / "o", *more)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hotjoin replay: error: ") and message in err and "\n" not in err


def _args(path: Path, out: Path, **kw: object) -> argparse.Namespace:
    base = {"events": path / "events.parquet", "subscriptions": path / "subscriptions.parquet",
            "topic": None, "out": str(out), "overwrite": False}
    return argparse.Namespace(**{**base, **kw})


def test_inputs_are_checked_first(export: tuple[Path, object], tmp_path: Path) -> None:
    path = export[0]
    command.check_inputs(_args(path, tmp_path / "new"))
    command.check_inputs(_args(path, "s3://bucket/out"))  # a remote URI: the job checks it
    with pytest.raises(CliError, match=r"--events .*nope\.parquet: no such file"):
        command.check_inputs(_args(path, tmp_path / "o", events=tmp_path / "nope.parquet"))
    with pytest.raises(CliError, match=r"--subscriptions .*: no such file"):
        command.check_inputs(_args(path, tmp_path / "o", subscriptions=tmp_path / "s.parquet"))
    with pytest.raises(CliError, match="no topic file .*--topic names another"):
        command.check_inputs(_args(path, tmp_path / "o", topic=tmp_path / "t.json"))
    (tmp_path / "afile").write_text("x")
    with pytest.raises(CliError, match="is a file, not a directory"):
        command.check_inputs(_args(path, tmp_path / "afile"))
    full = tmp_path / "full"
    full.mkdir()
    (full / "part-0.parquet").write_text("x")
    for out in (full, f"file://{full}"):
        with pytest.raises(CliError, match=r"is not empty \(use --overwrite"):
            command.check_inputs(_args(path, out))
    command.check_inputs(_args(path, full, overwrite=True))


def test_spark_is_an_optional_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(CliError, match=r"needs pyspark.*hotjoin\[replay\].*--in-process"):
        command.require_pyspark()


def test_a_failed_spark_task_is_reduced_to_its_useful_line() -> None:
    wrapped = RuntimeError("An error occurred while calling o42.collect.\n"
                           "  File worker.py, line 9\n"
                           "hotjoin.ops.replay.worker.ReplayError: seq 12: publish of R r1 twice\n"
                           "\tat org.apache.spark...")
    assert command._spark_message(wrapped) == "seq 12: publish of R r1 twice"
    assert command._spark_message(RuntimeError("first line\nsecond")) == "first line"
    assert command._spark_message(RuntimeError("")) == "RuntimeError"
    assert len(command._spark_message(RuntimeError("x" * 900))) == 500


def test_spark_log_is_quiet_unless_configured() -> None:
    conf: dict[str, str] = {}
    command._quiet_spark(conf)
    opt = conf["spark.driver.extraJavaOptions"]
    assert opt.startswith("-Dlog4j2.configurationFile=file:")
    assert conf["spark.executor.extraJavaOptions"] == opt
    assert Path(opt.split("file:", 1)[1]).read_text() == command.QUIET_LOG4J2
    own = {"spark.driver.extraJavaOptions": "-Dmine"}
    command._quiet_spark(own)
    assert own == {"spark.driver.extraJavaOptions": "-Dmine"}


def test_the_summary_line() -> None:
    s = {"events": 1234, "operations": 1300, "restored": 0, "mode": "local[2]",
         "plan": {"cells": 3, "hot_keys": [1.0]}, "deliveries": 5678, "out": "o",
         "seconds": {"wall": 2.25, "total": 1.5}, "events_per_s": 822.7}
    assert command._line(s) == (
        "replayed 1,234 events (1,300 operations) on local[2]: 3 shard(s), 1 hot key(s) split, "
        "5,678 deliveries -> o in 2.2 s wall time, Spark start-up included "
        "(replay 1.5 s, 823 events/s)")
    s.update(restored=7, plan={"cells": 1, "hot_keys": []}, events_per_s=None)
    assert "(1,300 operations, 7 restored) on local[2]: 1 shard(s), 5,678" in command._line(s)
    assert command._line(s).endswith("0 events/s)")
