"""``hotjoin stats TOPIC`` (``cli/commands/stats.py``) against a fake client: the topic's
statistics message printed as indented JSON with the ``.proto``'s snake_case field names and zero
values kept; a server error is one line."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from hotjoin.cli.commands import stats
from hotjoin.cli.main import main
from hotjoin.clients.errors import NotFound
from hotjoin.proto import hotjoin_pb2 as pb


class FakeClient:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def stats(self, topic: str) -> SimpleNamespace:
        self.asked.append(topic)
        if topic != "t":
            raise NotFound(f"no topic {topic!r}")
        return SimpleNamespace(wire=pb.TopicStats())


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    f = FakeClient()
    monkeypatch.setattr(stats, "client", lambda args: f)
    return f


def test_statistics_print_as_indented_json_with_zero_values(
        fake: FakeClient, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", "t"]) == 0
    out = capsys.readouterr().out
    got = json.loads(out)
    assert fake.asked == ["t"]
    want = [f.name for f in pb.TopicStats.DESCRIPTOR.fields]
    assert list(got)[: len(want)] == [n for n in want if n in got]  # the .proto's order
    assert len(got) > 0 and all(name == name.lower() for name in got)  # snake_case
    assert out.startswith("{\n  ")  # indented


def test_a_server_error_is_one_line(fake: FakeClient, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", "nope"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "no topic 'nope'" in err and err.count("\n") == 1
