"""``hotjoin delete TOPIC SIDE:ID ...`` (``cli/commands/delete.py``) against a fake client:
events from arguments, a file or stdin, sent in batches of ``BATCH``; rejections reported and
exit code 1 unless ``--allow-rejections``; malformed events are one line naming where."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hotjoin.cli.commands import delete
from hotjoin.cli.main import main


@dataclass
class Rejection:
    id: str
    code: str = "NOT_FOUND"
    reason: str = "no such event"


@dataclass
class Response:
    deleted: int
    rejections: list[Rejection] = field(default_factory=list)


class FakeClient:
    """Holds events ``R:r0..r9``; records every batch it is sent."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[str, str]]] = []
        self.held = {("R", f"r{i}") for i in range(10)}

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def delete_events(self, topic: str, items: list[tuple[str, str]]) -> Response:
        self.batches.append(list(items))
        missing = [Rejection(f"{s}:{i}") for s, i in items if (s, i) not in self.held]
        self.held -= set(items)
        return Response(len(items) - len(missing), missing)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    f = FakeClient()
    monkeypatch.setattr(delete, "client", lambda args: f)
    return f


def test_arguments_file_and_stdin_in_batches(fake: FakeClient, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(delete, "BATCH", 2)
    f = tmp_path / "ids"
    f.write_text("R:r2\n\n  R:r3  \nR:r4\n")
    assert main(["delete", "t", "R:r0", "R:r1", "--file", str(f)]) == 0
    assert fake.batches == [[("R", "r0"), ("R", "r1")], [("R", "r2"), ("R", "r3")], [("R", "r4")]]
    assert json.loads(capsys.readouterr().out) == {"deleted": 5, "rejected": 0, "rejections": []}
    monkeypatch.setattr("sys.stdin", io.StringIO("R:r5\n"))
    assert main(["delete", "t", "--file", "-"]) == 0
    assert fake.batches[-1] == [("R", "r5")]


def test_rejections_exit_1_unless_allowed(fake: FakeClient,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["delete", "t", "R:r0", "S:nope"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["rejections"] == [{"id": "S:nope", "code": "NOT_FOUND",
                                              "reason": "no such event"}]
    assert "1 of 2 events not deleted (first: 'S:nope'" in err and "--allow-rejections" in err
    assert main(["delete", "t", "R:r0", "--allow-rejections"]) == 0  # r0 is gone by now
    assert json.loads(capsys.readouterr().out)["rejected"] == 1


@pytest.mark.parametrize(("argv", "words"), [
    (["r1"], "argument: an event is SIDE:ID"), (["X:r1"], "with side R or S"),
    (["R:"], "got 'R:'"), ([], "name the events to delete"),
])
def test_malformed_events_are_one_line(fake: FakeClient, argv: list[str], words: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["delete", "t", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and fake.batches == []


def test_a_bad_line_names_its_file_and_line(fake: FakeClient, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "ids"
    f.write_text("R:r1\nbroken\n")
    assert main(["delete", "t", "--file", str(f)]) == 2
    assert f"{f}:2: an event is SIDE:ID" in capsys.readouterr().err
    assert main(["delete", "t", "--file", str(tmp_path / "missing")]) == 2
    assert "cannot read --file" in capsys.readouterr().err and fake.batches == []
