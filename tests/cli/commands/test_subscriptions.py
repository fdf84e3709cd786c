"""``hotjoin subscriptions``: the lag column from server-kept cursors (``GetCursors``), and the
fallback for a client or server without them. A fake client stands in for the server here; the
journey test runs the command against a real one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hotjoin.cli.commands import subscriptions
from hotjoin.cli.main import main
from hotjoin.clients import (
    BandJoin,
    CommittedCursor,
    Cursors,
    Range,
    SelectJoin,
    SubscriptionInfo,
    TopicStats,
    Unimplemented,
)
from hotjoin.clients.convert import spec_to_wire, stats_of, subscription_of
from hotjoin.proto import hotjoin_pb2 as pb


def Cursor(sid: int, committed: int | None, lag: int = 0) -> CommittedCursor:  # noqa: N802
    return CommittedCursor(sid, committed_seq=committed, lag=None if committed is None else lag)


class FakeClient:
    def __init__(self, cursors: Any = None) -> None:
        self._subs = [subscription_of(pb.Subscription(
            subscription_id=0, spec=spec_to_wire(BandJoin(b=Range(-1, 1)), subscriber="a"),
            registered_seq=1)), subscription_of(pb.Subscription(
                subscription_id=1, spec=spec_to_wire(SelectJoin(), subscriber="b"), registered_seq=2))]
        if cursors is not None:
            self.get_cursors = cursors

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def stats(self, topic: str) -> TopicStats:
        return stats_of(pb.TopicStats(topic=topic, seq=10))

    def list_subscriptions(self, topic: str, subscriber: str = "") -> list[SubscriptionInfo]:
        return [s for s in self._subs if not subscriber or s.subscriber == subscriber]


def _run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fake: FakeClient,
         *argv: str) -> str:
    monkeypatch.setattr(subscriptions, "client", lambda args: fake)
    assert main(["subscriptions", "t", *argv]) == 0
    return capsys.readouterr().out


def test_lag_from_committed_cursors(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    resp = Cursors(seq=12, cursors=(Cursor(0, 9, 3), Cursor(1, None)))
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
        raise Unimplemented("GetCursors")

    fake = FakeClient(None if kind == "no get_cursors" else unimplemented)
    rows = [json.loads(x) for x in _run(monkeypatch, capsys, fake, "--subscriber", "b").splitlines()]
    assert rows == [{"subscription_id": 1, "spec": json.loads(json.dumps(rows[0]["spec"])),
                     "registered_seq": 2, "topic_seq": 10}]
    assert "lag" not in rows[0] and rows[0]["spec"]["subscriber"] == "b"
