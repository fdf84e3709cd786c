"""``hotjoin listen TOPIC`` (``cli/commands/listen.py``) against a fake client: the JSON lines
of each message kind, ``--matches-only`` and ``--count``, ``--commit`` at the end (the printed
positions, else ``--after``, else nothing), the stream cancelled however the run ends, and
refusals in one line before anything is listened to."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hotjoin.cli.commands import listen
from hotjoin.cli.main import main
from hotjoin.clients.results import CaughtUp, Gap, Match, Unsubscribed
from hotjoin.proto import hotjoin_pb2 as pb

ITEMS = [
    Gap(0, 1, 2, "retention", wire=pb.Gap(subscription_id=0, from_seq=1, to_seq=2,
                                          reason="retention")),
    Match(0, 3, wire=pb.Match(subscription_id=0, seq=3, sign=1, count=1)),
    CaughtUp(3, wire=pb.CaughtUp(seq=3)),
    Match(1, 4, sign=-1, wire=pb.Match(subscription_id=1, seq=4, sign=-1, count=1)),
    Unsubscribed(1, 5, wire=pb.Unsubscribed(subscription_id=1, seq=5)),
]


class Stream:
    def __init__(self, items: list[Any], fail: BaseException | None = None) -> None:
        self.items, self.fail = items, fail
        self.cursors: dict[int, int] = {}
        self.cancelled = False
        self.committed: list[bool] = []

    def __iter__(self) -> Any:
        for item in self.items:
            if isinstance(item, Match):
                self.cursors[item.subscription_id] = item.seq
            yield item
        if self.fail is not None:
            raise self.fail

    def cancel(self) -> None:
        self.cancelled = True

    def commit(self, include_last: bool = False) -> None:
        self.committed.append(include_last)


class FakeClient:
    def __init__(self, stream: Stream, subscriptions: int = 1) -> None:
        self.stream = stream
        self.subscriptions = subscriptions
        self.listened: list[tuple[Any, ...]] = []
        self.commits: list[tuple[Any, ...]] = []

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def list_subscriptions(self, topic: str, subscriber: str, page_size: int = 0) -> list[int]:
        return list(range(self.subscriptions))

    def get_topic(self, topic: str) -> None:
        pass

    def listen(self, topic: str, subscriber: str, ids: list[int], cursors: Any,
               **kw: Any) -> Stream:
        self.listened.append((topic, subscriber, ids, cursors, kw))
        return self.stream

    def commit_cursors(self, topic: str, positions: dict[int, int], subscriber: str = "",
                       after_seq: int | None = None) -> int:
        self.commits.append((topic, positions, subscriber, after_seq))
        return 2


def _run(monkeypatch: pytest.MonkeyPatch, fake: FakeClient, *argv: str) -> int:
    monkeypatch.setattr(listen, "client", lambda args: fake)
    return main(["listen", "t", *argv])


def test_every_kind_is_one_json_line(monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeClient(Stream(ITEMS))
    assert _run(monkeypatch, fake, "--subscriber", "a") == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [next(iter(x)) for x in lines] == ["gap", "match", "caught_up", "match",
                                              "unsubscribed"]
    assert lines[1]["match"]["seq"] == 3 and lines[3]["match"]["sign"] == -1
    assert lines[0]["gap"] == {"subscription_id": 0, "from_seq": 1, "to_seq": 2,
                               "reason": "retention"}
    assert fake.stream.cancelled and fake.listened[0][4]["auto_commit"] is None


def test_matches_only_and_count(monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeClient(Stream(ITEMS))
    assert _run(monkeypatch, fake, "--id", "0", "--matches-only", "--count", "1") == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines == [{"match": lines[0]["match"]}] and lines[0]["match"]["seq"] == 3
    assert fake.stream.cancelled


def test_commit_at_the_end(monkeypatch: pytest.MonkeyPatch,
                           capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeClient(Stream(ITEMS))
    assert _run(monkeypatch, fake, "--subscriber", "a", "--commit") == 0
    assert fake.stream.committed == [True] and fake.listened[0][4]["auto_commit"] == 1.0
    empty = FakeClient(Stream([]))
    assert _run(monkeypatch, empty, "--subscriber", "a", "--commit", "--after", "7") == 0
    assert empty.commits == [("t", {}, "a", 7)]
    assert "committed seq 7 (--after) for 2 subscription(s)" in capsys.readouterr().err
    empty = FakeClient(Stream([]))
    assert _run(monkeypatch, empty, "--id", "4", "--commit") == 0
    assert empty.commits == [] and "nothing to commit" in capsys.readouterr().err


def test_ctrl_c_still_commits_and_cancels(monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeClient(Stream(ITEMS[:2], fail=KeyboardInterrupt()))
    assert _run(monkeypatch, fake, "--id", "0", "--commit", "--after", "1") == 130
    assert fake.stream.committed == [True] and fake.stream.cancelled
    assert fake.listened[0][3] == {0: 1}  # --after with --id: the resume cursors


@pytest.mark.parametrize(("argv", "subs", "code", "words"), [
    ([], 1, 2, "give --subscriber NAME or --id ID"),
    (["--id", "0", "--count", "-1"], 1, 2, "--count must be >= 0"),
    (["--id", "0", "--after", "-1"], 1, 2, "--after must be >= 0"),
    (["--subscriber", "typo"], 0, 1, "subscriber 'typo' has no subscriptions on topic 't'"),
])
def test_refusals(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                  argv: list[str], subs: int, code: int, words: str) -> None:
    fake = FakeClient(Stream(ITEMS), subscriptions=subs)
    assert _run(monkeypatch, fake, *argv) == code
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and fake.listened == []


def test_wait_listens_for_a_subscriber_without_subscriptions_yet(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeClient(Stream([]), subscriptions=0)
    assert _run(monkeypatch, fake, "--subscriber", "later", "--wait") == 0
    assert fake.listened and capsys.readouterr().out == ""
