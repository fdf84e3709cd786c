"""The blocking client against a live server: every call returns the frozen results of
``hotjoin.clients.results``, topics and subscriptions round-trip, large subscription sets
stream in chunks, listing pages through everything, published pairs reach the listener (with
sign -1 when deleted), and committed cursors survive a new listener."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hotjoin.clients import (
    BandJoin,
    CaughtUp,
    Client,
    Event,
    EventRef,
    Match,
    NotFound,
    Range,
)
from hotjoin.clients.client import DEFAULT_TARGET, TARGET_ENV, default_target
from hotjoin.server.app import HotjoinServer


@pytest.fixture
def hj(server: HotjoinServer) -> Iterator[Client]:
    with Client(server.target, timeout=30) as c:
        c.wait_ready(10)
        yield c


def _until_caught_up(stream: object) -> list[object]:
    got = []
    for item in stream:  # type: ignore[attr-defined]
        got.append(item)
        if isinstance(item, CaughtUp):
            break
    stream.cancel()  # type: ignore[attr-defined]
    return got


def test_the_target_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TARGET_ENV, raising=False)
    assert default_target() == DEFAULT_TARGET == "127.0.0.1:50051"
    monkeypatch.setenv(TARGET_ENV, "")
    assert default_target() == DEFAULT_TARGET
    monkeypatch.setenv(TARGET_ENV, "example:1234")
    with Client() as c:
        assert c.target == "example:1234" and repr(c) == "Client('example:1234')"
    with Client("other:1") as c:
        assert c.target == "other:1"


def test_topics_round_trip(hj: Client, topic: str) -> None:
    made = hj.create_topic(topic, lateness=5, retention=100, strategy={"band": "BJ-SSI"},
                           max_advance=1000)
    assert (made.name, made.lateness, made.retention, made.max_advance) == (topic, 5, 100, 1000)
    assert made.strategy["band"] == "BJ-SSI" and made.wire is not None
    got = hj.get_topic(topic)
    assert got == made and got.seq == 0 and got.damaged == ""
    assert topic in [t.name for t in hj.list_topics()]
    hj.delete_topic(topic)
    assert topic not in [t.name for t in hj.list_topics()]
    with pytest.raises(NotFound):
        hj.get_topic(topic)
    with pytest.raises(NotFound):
        hj.delete_topic(topic)


def test_subscriptions_in_chunks_and_pages(hj: Client, topic: str) -> None:
    hj.create_topic(topic)
    one = hj.subscribe(topic, BandJoin(b=Range(-1, 1)), subscriber="a", delivery="affected")
    specs = [BandJoin(b=Range(-i, i)) for i in range(1, 8)]
    streamed = hj.subscribe_many(topic, specs, subscriber="b", chunk=3)  # three messages
    at_once = hj.subscribe_many(topic, specs[:2], subscriber="b", snapshot=True)
    ids = [one, *streamed, *at_once]
    assert len(set(ids)) == 10 and streamed == sorted(streamed)
    listed = list(hj.list_subscriptions(topic, page_size=3))  # four pages
    assert [s.subscription_id for s in listed] == sorted(ids)
    by_id = {s.subscription_id: s for s in listed}
    assert (by_id[one].subscriber, by_id[one].delivery, by_id[one].kind) == ("a", "affected", "band")
    assert [by_id[i].spec for i in streamed] == specs
    assert by_id[at_once[0]].snapshot and not by_id[streamed[0]].snapshot
    assert {s.subscription_id for s in hj.list_subscriptions(topic, subscriber="a")} == {one}
    seq = hj.unsubscribe(topic, one)
    assert seq == hj.get_topic(topic).seq
    assert one not in {s.subscription_id for s in hj.list_subscriptions(topic)}
    with pytest.raises(NotFound):
        hj.unsubscribe(topic, one)


def test_published_pairs_reach_the_listener_and_deletes_take_them_back(hj: Client, topic: str) -> None:
    hj.create_topic(topic)
    sid = hj.subscribe(topic, BandJoin(b=Range(-1, 1)), subscriber="me")
    r = hj.publish(topic, [Event("S", "s1", 1.5, 0.0, time=1), Event("R", "r1", 1.0, 0.0, time=2),
                           Event("R", "r1", 1.0, 0.0, time=2)])
    assert [s.code for s in r.statuses] == ["OK", "OK", "DUPLICATE"]
    assert (r.accepted, r.rejected, [s.id for s in r.rejections]) == (2, 1, ["r1"])
    d = hj.delete_events(topic, [EventRef("S", "s1"), ("R", "nope")])
    assert d.deleted == 1 and [s.code for s in d.rejections] == ["NOT_FOUND"]
    items = _until_caught_up(hj.listen(topic, subscriber="me", reconnect=False))
    matches = [m for m in items if isinstance(m, Match)]
    assert [(m.subscription_id, m.sign, m.pairs, m.op) for m in matches] == [
        (sid, 1, (("r1", "s1"),), "publish"), (sid, -1, (("r1", "s1"),), "delete")]
    assert matches[0].event == EventRef("R", "r1") and matches[1].event == EventRef("S", "s1")
    assert matches[0].seq < matches[1].seq
    hj.unsubscribe(topic, sid)
    with pytest.raises(NotFound, match="no subscription"):
        _until_caught_up(hj.listen(topic, subscription_ids=[sid], reconnect=False))


def test_columns_take_consecutive_seqs_and_get_assigned_ids(hj: Client, topic: str) -> None:
    hj.create_topic(topic)
    r = hj.publish_columns(topic, ["R", "S", "R"], ["r1", "", "r1"], [1.0, 2.0, 3.0],
                           [0.0, 0.0, 0.0], times=[1, 2, 3])
    assert (r.accepted, r.rejected) == (2, 1)
    assert r.last_seq == r.first_seq + 1 == hj.get_topic(topic).seq
    assert [(s.index, s.code) for s in r.statuses] == [(2, "DUPLICATE")]
    assert list(r.assigned) == [1] and r.assigned[1]


def test_committed_cursors_and_stats(hj: Client, topic: str) -> None:
    hj.create_topic(topic)
    sid = hj.subscribe(topic, BandJoin(b=Range(-1, 1)), subscriber="me")
    hj.publish(topic, [Event("S", f"s{i}", 1.0, 0.0, time=i) for i in range(3)]
               + [Event("R", "r", 1.0, 0.0, time=3)])
    first = next(m for m in hj.listen(topic, subscriber="me", reconnect=False)
                 if isinstance(m, Match))
    assert hj.commit_cursors(topic, {sid: first.seq}) == 1
    cur = hj.get_cursors(topic, subscriber="me")
    assert len(cur) == 1 and cur.seq == hj.get_topic(topic).seq
    (c,) = cur
    assert (c.subscription_id, c.subscriber, c.committed_seq) == (sid, "me", first.seq)
    assert hj.get_cursors(topic, subscription_ids=[sid]).cursors == cur.cursors
    after = _until_caught_up(hj.listen(topic, subscriber="me", reconnect=False))
    assert all(m.seq > first.seq for m in after if isinstance(m, Match)), "resumes after the commit"
    st = hj.stats(topic)
    assert st.topic == topic and st.seq == cur.seq
    assert dict(st.tuples) == {"R": 1, "S": 3}
    assert st.subscriptions["band"] == 1


def test_a_closed_client_calls_nothing(server: HotjoinServer) -> None:
    c = Client(server.target, timeout=5)
    c.list_topics()
    c.close()
    c.close()
    with pytest.raises(ValueError):
        c.list_topics()
