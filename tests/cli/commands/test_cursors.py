"""``hotjoin cursors TOPIC`` (``cli/commands/cursors.py``) against a fake client: the
per-subscriber summary against a brute-force grouping, the table and JSON forms, and
``--commit`` committing for a subscriber or ids, refusing what it cannot do in one line."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.cli.commands import cursors
from hotjoin.cli.commands.cursors import by_subscriber
from hotjoin.cli.main import main
from hotjoin.clients import CommittedCursor, Cursors
from hotjoin.proto import hotjoin_pb2 as pb

CURSOR = st.builds(
    lambda sid, sub, committed, lag, pend, nbytes: CommittedCursor(
        sid, sub, committed, None if committed is None else lag, pend, nbytes),
    st.integers(0, 100), st.sampled_from(["", "a", "b"]), st.none() | st.integers(0, 50),
    st.none() | st.integers(0, 9), st.integers(0, 5), st.integers(0, 500))


@given(st.lists(CURSOR, max_size=12))
def test_by_subscriber_is_a_grouping(rows: list[CommittedCursor]) -> None:
    got = by_subscriber(rows)
    assert list(got) == list(dict.fromkeys(c.subscriber for c in rows))  # first-seen order
    for name, g in got.items():
        mine = [c for c in rows if c.subscriber == name]
        lags = [c.lag or 0 for c in mine if c.committed_seq is not None]
        assert g == {"subscriptions": len(mine), "committed": len(lags),
                     "max_lag": max(lags) if lags else None,
                     "pending": sum(c.pending_messages for c in mine),
                     "pending_bytes": sum(c.pending_bytes for c in mine)}


ROWS = (CommittedCursor(0, "a", 7, 2, 3, 90), CommittedCursor(1, "a", None, None, 1, 30),
        CommittedCursor(2, "", 9, 0, 0, 0))


class FakeClient:
    def __init__(self) -> None:
        self.commits: list[tuple[Any, ...]] = []

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def commit_cursors(self, topic: str, positions: dict[int, int], subscriber: str = "",
                       after_seq: int | None = None) -> int:
        self.commits.append((topic, positions, subscriber, after_seq))
        return len(positions) or 2

    def get_cursors(self, topic: str, subscriber: str = "", ids: Any = ()) -> Cursors:
        rows = tuple(c for c in ROWS if (not subscriber or c.subscriber == subscriber)
                     and (not ids or c.subscription_id in ids))
        wire = pb.GetCursorsResponse(seq=12, cursors=[pb.CommittedCursor(
            subscription_id=c.subscription_id) for c in rows])
        return Cursors(12, rows, wire)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    f = FakeClient()
    monkeypatch.setattr(cursors, "client", lambda args: f)
    return f


def test_the_table(fake: FakeClient, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cursors", "t"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["subscription", "subscriber", "committed", "lag", "pending",
                                "pending_bytes"]
    assert lines[1].split() == ["0", "a", "7", "2", "3", "90"]
    assert lines[2].split() == ["1", "a", "-", "-", "1", "30"]
    assert lines[3].split() == ["2", "-", "9", "0", "0", "0"]
    assert lines[-1] == ("topic seq 12: 2 of 3 subscriptions committed, total lag 2, pending 4 "
                         "messages (120 bytes)")
    assert main(["cursors", "t", "--by-subscriber"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[0] == "subscriber" and lines[1].split() == ["a", "2", "1", "2", "4",
                                                                       "120"]


def test_json_forms(fake: FakeClient, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cursors", "t", "--json", "--subscriber", "a"]) == 0
    wire = json.loads(capsys.readouterr().out)
    assert wire["seq"] == "12" and [c["subscriptionId"] for c in wire["cursors"]] == ["0", "1"]
    assert main(["cursors", "t", "--json", "--by-subscriber"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["seq"] == 12 and [s["subscriber"] for s in out["subscribers"]] == ["a", ""]


def test_commit(fake: FakeClient, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cursors", "t", "--subscriber", "a", "--commit", "10"]) == 0
    assert fake.commits == [("t", {}, "a", 10)]
    assert capsys.readouterr().out.startswith("committed seq 10 for 2 subscriptions")
    assert main(["cursors", "t", "--id", "0", "--id", "2", "--commit", "0"]) == 0
    assert fake.commits[-1] == ("t", {0: 0, 2: 0}, "", None)


@pytest.mark.parametrize(("argv", "words"), [(["--commit", "-1", "--subscriber", "a"], ">= 0"),
                                             (["--commit", "5"], "needs --subscriber or --id")])
def test_commit_refusals(fake: FakeClient, argv: list[str], words: str,
                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cursors", "t", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and fake.commits == []
