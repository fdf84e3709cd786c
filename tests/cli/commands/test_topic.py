"""``hotjoin topic create|list|show|get|delete`` (``cli/commands/topic.py``) against a fake
client: what each action sends and prints, connection options after the action, and bad
options refused in one line before anything is sent. ``inspect``/``repair``:
``test_topic_repair.py``."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from hotjoin.cli.commands import topic
from hotjoin.cli.main import main
from hotjoin.proto import hotjoin_pb2 as pb


class FakeClient:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def create_topic(self, name: str, lateness: int, retention: int | None,
                     strategy: dict[str, str], **kw: Any) -> Any:
        self.calls.append(("create", name, lateness, retention, strategy, kw))
        return SimpleNamespace(wire=pb.Topic(name=name, lateness=lateness, retention=retention,
                                             strategy=strategy))

    def list_topics(self) -> list[Any]:
        self.calls.append(("list",))
        return [SimpleNamespace(wire=pb.Topic(name=n)) for n in ("a", "b")]

    def get_topic(self, name: str) -> Any:
        self.calls.append(("get", name))
        return SimpleNamespace(wire=pb.Topic(name=name, lateness=5))

    def delete_topic(self, name: str) -> None:
        self.calls.append(("delete", name))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    f = FakeClient()
    seen: list[Any] = []
    monkeypatch.setattr(topic, "client", lambda args: seen.append(args.target) or f)
    f.targets = seen  # type: ignore[attr-defined]
    return f


def test_create_sends_every_option(fake: FakeClient, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topic", "create", "t", "--lateness", "10", "--retention", "100",
                 "--strategy", "band=BJ-SSI", "--strategy", "select=SJ-Vanilla",
                 "--delivery-retention-bytes", "0", "--delivery-retention-ms", "-1",
                 "--max-advance", "0", "--target", "h:1"]) == 0
    assert fake.calls == [("create", "t", 10, 100, {"band": "BJ-SSI", "select": "SJ-Vanilla"},
                           {"delivery_retention_bytes": 0, "delivery_retention_ms": -1,
                            "max_advance": 0})]
    assert fake.targets == ["h:1"]  # type: ignore[attr-defined]
    out = json.loads(capsys.readouterr().out)
    assert out["name"] == "t" and out["lateness"] == 10 and out["retention"] == 100


def test_list_show_get_delete(fake: FakeClient, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topic", "list"]) == 0
    assert [t["name"] for t in json.loads(capsys.readouterr().out)] == ["a", "b"]
    for action in ("show", "get"):
        assert main(["topic", action, "t"]) == 0
        assert json.loads(capsys.readouterr().out)["lateness"] == 5
    assert main(["topic", "delete", "t"]) == 0
    assert json.loads(capsys.readouterr().out) == {"deleted": "t"}
    assert [c[0] for c in fake.calls] == ["list", "get", "get", "delete"]


@pytest.mark.parametrize(("argv", "words"), [
    (["--lateness", "-1"], "--lateness and --retention must be >= 0"),
    (["--retention", "-5"], "--lateness and --retention must be >= 0"),
    (["--max-advance", "-1"], "--max-advance must be >= 0"),
    (["--strategy", "band"], "--strategy must be KIND=NAME"),
    (["--strategy", "=BJ-SSI"], "--strategy must be KIND=NAME"),
])
def test_bad_create_options_send_nothing(fake: FakeClient, argv: list[str], words: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topic", "create", "t", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and fake.calls == []
