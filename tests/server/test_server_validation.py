"""Every validation path answers with the right gRPC status and message, and changes nothing."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from hotjoin.clients import CallError
from hotjoin.clients.client import HotjoinClient, band, event, ref, select, window
from hotjoin.proto import hotjoin_pb2 as pb

INVALID, NOT_FOUND, EXISTS = "INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS"
EXHAUSTED = "RESOURCE_EXHAUSTED"  # the batch_events quota (server/quotas.py)


@pytest.fixture
def topic(client: HotjoinClient) -> HotjoinClient:
    client.create_topic("t", lateness=5)
    client.subscribe("t", band((-1, 1), subscriber="me"))
    client.publish("t", [event("R", "r1", 1.0, 1.0, time=100)])
    return client


def _listen_first(c: HotjoinClient, **kw: Any) -> None:
    stream = c.listen("t", reconnect=False, **kw)
    next(iter(stream))


CASES: list[tuple[str, Callable[[HotjoinClient], Any], str, str]] = [
    ("create: empty name", lambda c: c.create_topic(""), INVALID, "topic name is required"),
    ("create: bad name", lambda c: c.create_topic("a/b"), INVALID, "invalid topic name"),
    ("create: lateness < 0", lambda c: c.create_topic("u", lateness=-1), INVALID, "lateness must be >= 0"),
    ("create: retention < 0", lambda c: c.create_topic("u", retention=-1), INVALID, "retention must be >= 0"),
    ("create: max_advance < 0", lambda c: c.create_topic("u", max_advance=-1), INVALID,
     "max_advance must be >= 0 and <= 2^61, got -1"),
    ("create: strategy kind", lambda c: c.create_topic("u", strategy={"nope": "x"}), INVALID, "unknown subscription kind"),
    ("create: exists", lambda c: c.create_topic("t"), EXISTS, "already exists"),
    ("get: unknown topic", lambda c: c.get_topic("nope"), NOT_FOUND, "unknown topic 'nope'"),
    ("delete: unknown topic", lambda c: c.delete_topic("nope"), NOT_FOUND, "unknown topic"),
    ("subscribe: unknown topic", lambda c: c.subscribe("nope", band((0, 1))), NOT_FOUND, "unknown topic"),
    ("subscribe: no topic", lambda c: c.subscribe("", band((0, 1))), INVALID, "topic name is required"),
    ("subscribe: no kind", lambda c: c.subscribe("t", pb.SubscriptionSpec()), INVALID, "subscription kind is required"),
    ("subscribe: no spec", lambda c: c.subscriptions.Subscribe(pb.SubscribeRequest(topic="t")), INVALID, "spec is required"),
    ("subscribe: empty range", lambda c: c.subscribe("t", band((2, 1))), INVALID, "empty range"),
    ("subscribe: nan bound", lambda c: c.subscribe("t", select((math.nan, 1))), INVALID, "must be finite"),
    ("subscribe: inf bound", lambda c: c.subscribe("t", band((0, 1), c=(0, math.inf))), INVALID, "must be finite"),
    ("subscribe: w < 0", lambda c: c.subscribe("t", window((0, 1), (0, 1), -1)), INVALID, "w must be >= 0"),
    ("subscribe many: one bad", lambda c: c.subscribe_many("t", [band((0, 1)), band((3, 2))]), INVALID,
     "subscription #1: range B: empty range"),
    ("subscribe stream: one bad", lambda c: c.subscribe_many("t", [band((0, 1))] * 5 + [band((3, 2))], chunk=2),
     INVALID, "subscription #5"),
    ("unsubscribe: unknown id", lambda c: c.unsubscribe("t", 99), NOT_FOUND, "no subscription 99"),
    ("list subscriptions: unknown topic", lambda c: list(c.list_subscriptions("nope")), NOT_FOUND, "unknown topic"),
    ("publish: unknown topic", lambda c: c.publish("nope", [event("R", "x", 0, 0, 0)]), NOT_FOUND, "unknown topic"),
    ("publish: oversized batch", lambda c: c.publish("t", [event("R", f"x{i}", 0, 0, 200) for i in range(10_001)]),
     EXHAUSTED, "batch of 10001 events exceeds the limit of 10000"),
    ("publish stream: topic switch", lambda c: list(c.publishing.PublishStream(iter([
        pb.PublishRequest(topic="t", events=[]),
        pb.PublishRequest(topic="other", events=[event("R", "y2", 0, 0, 200)])]))), INVALID, "one stream, one topic"),
    ("delete: unknown topic", lambda c: c.delete_events("nope", [ref("R", "r1")]), NOT_FOUND, "unknown topic"),
    ("delete: oversized batch", lambda c: c.delete_events("t", [ref("R", "r1")] * 10_001), EXHAUSTED, "exceeds the limit"),
    ("listen: unknown topic", lambda c: c.listen("nope", subscriber="me", reconnect=False).__iter__().__next__(),
     NOT_FOUND, "unknown topic"),
    ("listen: nothing to listen to", lambda c: _listen_first(c), INVALID, "needs a subscriber or at least one"),
    ("listen: unknown id", lambda c: _listen_first(c, subscription_ids=[42]), NOT_FOUND, "no subscription 42"),
    ("stats: unknown topic", lambda c: c.stats("nope"), NOT_FOUND, "unknown topic"),
]


@pytest.mark.parametrize("name,call,code,message", CASES, ids=[c[0] for c in CASES])
def test_rpc_errors(topic: HotjoinClient, name: str, call: Callable[[HotjoinClient], Any],
                    code: str, message: str) -> None:
    before = topic.get_topic("t")
    with pytest.raises(CallError) as err:
        call(topic)
    assert err.value.code == code, err.value.message
    assert isinstance(err.value, CallError) and type(err.value).code == code  # the typed class
    assert message in err.value.message
    after = topic.get_topic("t")
    assert after == before, "a rejected request changed the topic"
    assert [t.name for t in topic.list_topics()] == ["t"]
    assert len(list(topic.list_subscriptions("t"))) == 1


def test_per_event_statuses(topic: HotjoinClient) -> None:
    """A batch: each event gets ok / late / duplicate / invalid with the reason; bad ones change nothing."""
    seq0 = topic.get_topic("t").seq
    resp = topic.publish("t", [
        event("S", "s1", 1.5, 0.0, time=101),       # ok (pairs with r1)
        event("R", "r1", 1.0, 1.0, time=102),       # duplicate
        event("S", "late", 1.0, 0.0, time=10),      # late: 10 < 101 - 5
        event("S", "nan", math.nan, 0.0, time=103),  # invalid
        event("S", "inf", 0.0, math.inf, time=103),  # invalid
        pb.Event(id="noside", key=1.0, value=1.0, time=103),  # invalid: no side
        event("S", "x" * 2000, 0.0, 0.0, time=103),  # invalid: id too long
    ])
    codes = [s.code for s in resp.statuses]
    assert codes == ["OK", "DUPLICATE", "LATE", "INVALID", "INVALID", "INVALID", "INVALID"]
    reasons = [s.reason for s in resp.statuses]
    assert "already exists" in reasons[1]
    assert "late" in reasons[2] and "watermark 96" in reasons[2]
    assert "key must be finite" in reasons[3]
    assert "value must be finite" in reasons[4]
    assert "side must be R or S" in reasons[5]
    assert "longer than" in reasons[6]
    assert (resp.accepted, resp.rejected) == (1, 6)
    assert topic.get_topic("t").seq == seq0 + 1
    st = topic.stats("t")
    assert (st.tuples["R"], st.tuples["S"]) == (1, 1)
    dels = topic.delete_events("t", [ref("S", "nope"), pb.EventRef(id="s1"), ref("R", "")]).statuses
    assert [d.code for d in dels] == ["NOT_FOUND", "INVALID", "INVALID"]
    assert "no stored event S/nope" in dels[0].reason
    assert topic.get_topic("t").seq == seq0 + 1


def test_server_assigns_id_and_time(topic: HotjoinClient) -> None:
    # "t" holds time 100: the server's clock is more than max_advance (default one day) ahead
    seq0 = topic.get_topic("t").seq
    resp = topic.publish("t", [pb.Event(side=pb.SIDE_S, key=5.0, value=0.0)])
    st = resp.statuses[0]
    assert st.code == "INVALID" and "(max_advance); nothing changed" in st.reason
    assert topic.get_topic("t").seq == seq0 and topic.stats("t").watermark == 95
    topic.create_topic("now", max_advance=0)
    topic.publish("now", [event("R", "r1", 1.0, 1.0, time=100)])
    resp = topic.publish("now", [pb.Event(side=pb.SIDE_S, key=5.0, value=0.0)])
    st = resp.statuses[0]
    assert st.code == "OK" and st.id.startswith("auto-")
    assert topic.stats("now").watermark > 1_600_000_000_000  # server clock in milliseconds
