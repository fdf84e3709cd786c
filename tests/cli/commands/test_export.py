"""``hotjoin export TOPIC --out DIR`` (``cli/commands/export.py``) with the export itself
replaced by a recorder: the topic given positionally or by the deprecated ``--topic`` (with a
warning; two different topics are refused), ``--until-seq`` passed on, and every failure of the
export (no data directory, a damaged log, a missing topic, an existing output) one line on
stderr with its exit code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hotjoin.cli.main import main
from hotjoin.server import export
from hotjoin.server.records import DamagedFileError


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    seen: list[tuple[Any, ...]] = []

    def main_json(data_dir: Path, topic: str, out: Path, until_seq: int | None) -> str:
        seen.append((data_dir, topic, out, until_seq))
        if topic == "damaged":
            raise DamagedFileError("record 7 fails its checksum")
        if topic == "missing":
            raise FileNotFoundError("no topic 'missing'")
        if topic == "exists":
            raise FileExistsError(f"{out} exists")
        return json.dumps({"topic": topic})

    monkeypatch.setattr(export, "main_json", main_json)
    return seen


def test_topic_positional_or_deprecated_option(calls: list[tuple[Any, ...]], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    data, out = str(tmp_path), str(tmp_path / "out")
    assert main(["export", "t", "--data-dir", data, "--out", out, "--until-seq", "5"]) == 0
    assert calls[-1] == (tmp_path, "t", tmp_path / "out", 5)
    assert json.loads(capsys.readouterr().out) == {"topic": "t"}
    assert main(["export", "--topic", "u", "--data-dir", data, "--out", out]) == 0
    assert calls[-1] == (tmp_path, "u", tmp_path / "out", None)
    assert "--topic is deprecated" in capsys.readouterr().err
    assert main(["export", "t", "--topic", "t", "--data-dir", data, "--out", out]) == 0


@pytest.mark.parametrize(("argv", "message"), [
    (["export", "--out", "o"], "name the topic"),
    (["export", "a", "--topic", "b", "--out", "o"], "two topics given: 'a' and --topic 'b'"),
])
def test_topic_errors_are_usage_errors(calls: list[tuple[Any, ...]], tmp_path: Path,
                                       argv: list[str], message: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and calls == []


def test_failures_are_one_line_with_their_exit_codes(calls: list[tuple[Any, ...]],
                                                     tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "out")
    assert main(["export", "t", "--data-dir", str(tmp_path / "none"), "--out", out]) == 2
    assert "no data directory" in capsys.readouterr().err and calls == []
    assert main(["export", "damaged", "--data-dir", str(tmp_path), "--out", out]) == 1
    err = capsys.readouterr().err
    assert "is damaged" in err and "hotjoin topic inspect damaged" in err and "--until-seq" in err
    assert err.count("\n") == 1
    for topic, message in (("missing", "no topic 'missing'"), ("exists", "exists")):
        assert main(["export", topic, "--data-dir", str(tmp_path), "--out", out]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
