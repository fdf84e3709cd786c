"""``hotjoin unsubscribe TOPIC ID [ID ...]`` (``cli/commands/unsubscribe.py``) against a fake
client: ids cancelled in order and printed with their sequence numbers as JSON; a negative id is
a one-line usage error (exit 2) before anything is sent; the first id the server refuses stops
the command with a one-line error."""

from __future__ import annotations

import json

import pytest

from hotjoin.cli.commands import unsubscribe
from hotjoin.cli.main import main
from hotjoin.clients.errors import NotFound


class FakeClient:
    """Holds subscriptions 0..4; each unsubscribe takes the next sequence number."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.held = set(range(5))
        self.seq = 10

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def unsubscribe(self, topic: str, sid: int) -> int:
        self.calls.append((topic, sid))
        if sid not in self.held:
            raise NotFound(f"no subscription {sid}")
        self.held.discard(sid)
        self.seq += 1
        return self.seq


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    f = FakeClient()
    monkeypatch.setattr(unsubscribe, "client", lambda args: f)
    return f


def test_ids_are_cancelled_in_order_and_printed(fake: FakeClient,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["unsubscribe", "t", "3", "1"]) == 0
    assert fake.calls == [("t", 3), ("t", 1)]
    assert json.loads(capsys.readouterr().out) == {"unsubscribed": [
        {"subscription_id": 3, "seq": 11}, {"subscription_id": 1, "seq": 12}]}


def test_negative_id_is_refused_before_anything_is_sent(fake: FakeClient,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["unsubscribe", "t", "2", "--", "-1"]) == 2
    err = capsys.readouterr().err
    assert "subscription ids are >= 0" in err and err.count("\n") == 1
    assert fake.calls == []


def test_the_first_refused_id_stops_the_command(fake: FakeClient,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["unsubscribe", "t", "0", "9", "4"])
    assert code == 1
    assert fake.calls == [("t", 0), ("t", 9)]  # 4 is never sent
    out, err = capsys.readouterr()
    assert out == "" and "no subscription 9" in err and err.count("\n") == 1
