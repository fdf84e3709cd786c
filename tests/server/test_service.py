"""The gRPC servicers (``server/service.py``): every validation path of every RPC answers with
the right gRPC status and message and changes nothing; Listen refuses cursors beyond the topic's
sequence and over-long subscriber names; and the servicers' request decoding and answer encoding
(statuses, columnar answers, damaged topics) map each outcome to its wire form."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hotjoin.clients import CallError
from hotjoin.clients.client import HotjoinClient, band, event, ref, select, window
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server import service
from hotjoin.server.batch_apply import EventStatus
from hotjoin.server.errors import InvalidArgument, OutOfRange
from hotjoin.server.registry import DamagedTopic
from hotjoin.server.topic import ColumnsOutcome, Status

INVALID, NOT_FOUND, EXISTS = "INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS"
EXHAUSTED = "RESOURCE_EXHAUSTED"  # the batch_events quota (server/quotas.py)
OUT_OF_RANGE = "OUT_OF_RANGE"


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


def refused(call: Callable[[], Any], code: str, text: str) -> str:
    """Run ``call``, which must fail with ``code`` and a message containing ``text``; returns it."""
    with pytest.raises(CallError) as err:
        call()
    assert err.value.code == code, (err.value.code, err.value.message)
    details = err.value.message
    assert text in details, details
    return details


# ---- Listen: cursors and subscriber names ---------------------------------------------------

def test_huge_resume_cursor_is_out_of_range(client: HotjoinClient) -> None:
    """Cursors of 2^64-1 (UNKNOWN before) and any cursor beyond the sequence."""
    client.create_topic("t")
    sid = client.subscribe("t", band((-1, 1), subscriber="me"))
    seq = client.get_topic("t").seq
    for req in (pb.ListenRequest(topic="t", subscriber="me", default_after_seq=2**64 - 1),
                pb.ListenRequest(topic="t", subscriber="me", cursors=[pb.Cursor(subscription_id=sid, after_seq=2**64 - 1)]),
                pb.ListenRequest(topic="t", subscriber="me", default_after_seq=seq + 1)):
        details = refused(lambda req=req: next(iter(client.listening.Listen(req, timeout=10))), OUT_OF_RANGE,
                          "beyond the topic's sequence")
        assert str(seq) in details
    # a cursor at the sequence is fine, and a later match is delivered
    it = iter(client.listening.Listen(pb.ListenRequest(topic="t", subscriber="me", default_after_seq=seq), timeout=10))
    assert next(it).HasField("caught_up")
    client.publish("t", [event("R", "r", 0.0, 0.0, time=1), event("S", "s", 0.5, 0.0, time=1)])
    got = next(it)
    assert got.match.subscription_id == sid and got.match.sign == 1
    it.cancel()  # type: ignore[attr-defined]


def test_listen_subscriber_name_limit(client: HotjoinClient) -> None:
    """Listen took a 1 MiB subscriber name while Subscribe refused names over 256."""
    client.create_topic("t")
    refused(lambda: next(iter(client.listening.Listen(
        pb.ListenRequest(topic="t", subscriber="x" * (1 << 20)), timeout=10))), INVALID,
        "subscriber name longer than 256")


@pytest.mark.parametrize(("default_after_seq", "cursor", "ok"), [
    (0, None, True), (7, None, True), (8, None, False), (2**64 - 1, None, False),
    (0, 7, True), (0, 8, False), (7, 8, False),
])
def test_check_listen_bounds_cursors_by_the_sequence(default_after_seq: int, cursor: int | None,
                                                     ok: bool) -> None:
    """A default or explicit cursor equal to the topic's sequence is accepted; one past it is
    OUT_OF_RANGE, naming the offending value and the sequence."""
    req = pb.ListenRequest(topic="t", subscriber="me", default_after_seq=default_after_seq)
    if cursor is not None:
        req.cursors.add(subscription_id=3, after_seq=cursor)
    if ok:
        service.check_listen(req, 7)
        return
    with pytest.raises(OutOfRange) as err:
        service.check_listen(req, 7)
    assert "beyond the topic's sequence 7" in err.value.message
    assert str(cursor if cursor is not None and cursor > 7 else default_after_seq) in err.value.message


@pytest.mark.parametrize(("length", "ok"), [(0, True), (256, True), (257, False)])
def test_check_listen_subscriber_name_limit(length: int, ok: bool) -> None:
    """Listen takes subscriber names of up to 256 characters, as Subscribe does."""
    req = pb.ListenRequest(topic="t", subscriber="x" * length)
    if ok:
        service.check_listen(req, 0)
    else:
        with pytest.raises(InvalidArgument, match="subscriber name longer than 256 characters"):
            service.check_listen(req, 0)


# ---- request decoding -------------------------------------------------------------------------

def test_events_of_a_request_are_counted_in_either_form() -> None:
    assert service._n_events(pb.PublishRequest(topic="t")) == 0
    assert service._n_events(pb.PublishRequest(topic="t", events=[event("R", "a", 0, 0, 1)] * 3)) == 3
    cols = pb.EventColumns(sides=b"RS", ids=["a", "b"], keys=[0.0, 1.0], values=[0.0, 1.0])
    assert service._n_events(pb.PublishRequest(topic="t", columns=cols)) == 2


def test_a_columnar_request_is_decoded_or_refused() -> None:
    assert service._columns_of(pb.PublishRequest(topic="t", events=[event("R", "a", 0, 0, 1)])) is None
    cols = pb.EventColumns(sides=b"RS", ids=["a", "b"], keys=[0.0, 1.0], values=[2.0, 3.0])
    batch = service._columns_of(pb.PublishRequest(topic="t", columns=cols))
    assert batch is not None and len(batch) == 2 and list(batch.ids) == ["a", "b"]
    both = pb.PublishRequest(topic="t", columns=cols, events=[event("R", "c", 0, 0, 1)])
    with pytest.raises(InvalidArgument, match="events or columns, not both"):
        service._columns_of(both)
    short = pb.EventColumns(sides=b"RS", ids=["a", "b"], keys=[0.0], values=[2.0, 3.0])
    with pytest.raises(InvalidArgument, match="keys has 1"):
        service._columns_of(pb.PublishRequest(topic="t", columns=short))


def test_the_topic_of_a_request() -> None:
    assert service._topic_of(pb.PublishRequest(topic="a")) == "a"
    assert service._topic_of(pb.GetTopicRequest(name="b")) == "b"
    assert service._topic_of(pb.ListTopicsRequest()) is None


# ---- answer encoding --------------------------------------------------------------------------

def test_per_event_statuses_map_to_their_wire_codes() -> None:
    statuses = [Status("ok", "a", 5), Status("late", "b", 0, "late"),
                Status("duplicate", "c", 0, "same", identical=True), Status("invalid", "d", 0, "bad"),
                Status("not_found", "e", 0, "gone")]
    resp = service._response(statuses)
    assert [s.code for s in resp.statuses] == [pb.OK, pb.LATE, pb.DUPLICATE, pb.INVALID, pb.NOT_FOUND]
    assert [s.id for s in resp.statuses] == ["a", "b", "c", "d", "e"]
    assert [s.identical for s in resp.statuses] == [False, False, True, False, False]
    assert resp.statuses[0].seq == 5 and resp.statuses[3].reason == "bad"
    assert (resp.accepted, resp.rejected) == (1, 4)
    assert (service._response([]).accepted, service._response([]).rejected) == (0, 0)


def test_a_columnar_answer_lists_only_the_rejected_events() -> None:
    status = np.array([EventStatus.OK, EventStatus.DUPLICATE, EventStatus.OK, EventStatus.LATE],
                      dtype=np.int8)
    out = ColumnsOutcome(status, np.array([11, 0, 12, 0]), np.array(["a", "b", "auto-12", "d"], dtype=object),
                         {1: "exists", 3: "late"}, {2: "auto-12"}, 11, 12, frozenset({1}))
    assert out.accepted == 2
    resp = service._columns_response(out)
    assert (resp.accepted, resp.rejected, resp.first_seq, resp.last_seq) == (2, 2, 11, 12)
    assert [(s.index, s.code, s.id, s.reason, s.identical) for s in resp.statuses] == [
        (1, pb.DUPLICATE, "b", "exists", True), (3, pb.LATE, "d", "late", False)]
    assert [(a.index, a.id) for a in resp.assigned] == [(2, "auto-12")]


def test_a_columnar_answer_with_nothing_accepted() -> None:
    status = np.full(3, EventStatus.INVALID, dtype=np.int8)
    out = ColumnsOutcome(status, np.zeros(3, dtype=np.int64), np.array(["a", "b", "c"], dtype=object),
                         {}, {}, 0, 0)
    assert out.accepted == 0
    resp = service._columns_response(out)
    assert (resp.accepted, resp.rejected, resp.first_seq, resp.last_seq) == (0, 3, 0, 0)
    assert [s.index for s in resp.statuses] == [0, 1, 2] and all(s.reason == "" for s in resp.statuses)


def test_a_damaged_topic_is_listed_with_its_reason_and_readable_options(tmp_path: Path) -> None:
    d = DamagedTopic("t", tmp_path / "t", "log", "bad frame (byte 12)",
                     {"lateness": 5, "retention": 30, "strategy": "x"})
    out = service.encode_damaged(d)
    assert out.name == "t" and out.damaged == d.message and "is damaged" in out.damaged
    assert out.lateness == 5 and out.HasField("retention") and out.retention == 30
    bare = service.encode_damaged(DamagedTopic("u", tmp_path / "u", "topic.json", "unreadable", None))
    assert bare.lateness == 0 and not bare.HasField("retention")
    odd = service.encode_damaged(DamagedTopic("v", tmp_path / "v", "log", "x", {"lateness": "5"}))
    assert odd.lateness == 0


def test_subscribed_ids_and_their_seq_range() -> None:
    assert service._subscribed([]) == pb.SubscribeManyResponse()
    resp = service._subscribed([(4, 10), (5, 11), (9, 12)])
    assert list(resp.subscription_ids) == [4, 5, 9] and (resp.first_seq, resp.last_seq) == (10, 12)


def test_every_rpc_has_an_audit_action() -> None:
    """Each RPC of every service is audited under a named action; the changes among them are
    audited whatever their outcome."""
    rpcs = {m.name for s in pb.DESCRIPTOR.services_by_name.values() for m in s.methods}
    assert rpcs == set(service.ACTIONS)
    assert rpcs >= service.CHANGES
