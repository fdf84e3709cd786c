"""``hotjoin subscriptions``: the lag column from server-kept cursors (``GetCursors``), and the
fallback for a client or server without them. A fake client stands in for the server here; the
journey test runs the command against a real one."""

from __future__ import annotations

import json
from typing import Any

import grpc
import pytest

from hotjoin.cli.commands import subscriptions
from hotjoin.cli.main import main
from hotjoin.clients.client import band, select
from hotjoin.proto import hotjoin_pb2 as pb


class Cursor:
    def __init__(self, sid: int, committed: int | None, lag: int = 0) -> None:
        self.subscription_id, self.committed_seq, self.lag = sid, committed or 0, lag
        self._has = committed is not None

    def HasField(self, name: str) -> bool:  # noqa: N802 (the protobuf method's name)
        return name == "committed_seq" and self._has


class Unimplemented(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNIMPLEMENTED


class FakeClient:
    def __init__(self, cursors: Any = None) -> None:
        self._subs = [pb.Subscription(subscription_id=0, spec=band((-1, 1), subscriber="a"), registered_seq=1),
                      pb.Subscription(subscription_id=1, spec=select(subscriber="b"), registered_seq=2)]
        if cursors is not None:
            self.get_cursors = cursors

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def stats(self, topic: str) -> pb.TopicStats:
        return pb.TopicStats(topic=topic, seq=10)

    def list_subscriptions(self, topic: str, subscriber: str = "") -> list[pb.Subscription]:
        return [s for s in self._subs if not subscriber or s.spec.subscriber == subscriber]


def _run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fake: FakeClient,
         *argv: str) -> str:
    monkeypatch.setattr(subscriptions, "client", lambda args: fake)
    assert main(["subscriptions", "t", *argv]) == 0
    return capsys.readouterr().out


def test_lag_from_committed_cursors(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    resp = type("R", (), {"seq": 12, "cursors": [Cursor(0, 9, 3), Cursor(1, None)]})()
    fake = FakeClient(lambda topic, subscriber="": resp)
    rows = [json.loads(x) for x in _run(monkeypatch, capsys, fake).splitlines()]
    assert [(r["subscription_id"], r["topic_seq"], r.get("committed_seq"), r.get("lag")) for r in rows] == [
        (0, 12, 9, 3), (1, 12, None, None)]
    table = _run(monkeypatch, capsys, fake, "--table").splitlines()
    assert table[0].split()[:6] == ["ID", "SUBSCRIBER", "DELIVERY", "REGISTERED_SEQ", "TOPIC_SEQ", "LAG"]
    assert table[1].split()[:6] == ["0", "a", "PAIRS", "1", "12", "3"]
    assert table[2].split()[:6] == ["1", "b", "PAIRS", "2", "12", "-"]
    assert table[1].endswith("band b=[-1:1] a=[:] c=[:]")


@pytest.mark.parametrize("kind", ["no get_cursors", "UNIMPLEMENTED"])
def test_without_server_cursors(kind: str, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    def unimplemented(topic: str, subscriber: str = "") -> Any:
        raise Unimplemented()

    fake = FakeClient(None if kind == "no get_cursors" else unimplemented)
    rows = [json.loads(x) for x in _run(monkeypatch, capsys, fake, "--subscriber", "b").splitlines()]
    assert rows == [{"subscription_id": 1, "spec": json.loads(json.dumps(rows[0]["spec"])),
                     "registered_seq": 2, "topic_seq": 10}]
    assert "lag" not in rows[0] and rows[0]["spec"]["subscriber"] == "b"
