"""One topic (``server/topic.py``): the total order of its operations and how each is applied.

Through a served topic: a batch's events each get ok / late / duplicate / invalid with the
reason, rejected ones change nothing, and the server assigns ids and times. On a ``Topic``
itself: every accepted operation takes the next sequence number and a rejected one none, batch
limits, server-assigned ids that avoid stored ones, cursor commits bounded by the sequence, a
duplicate told apart from a re-sent identical event, and what a closed or deleted topic answers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from server_harness import OracleAdapter

from hotjoin.clients.client import HotjoinClient, band, event, ref
from hotjoin.matcher.errors import DuplicateEventError, LateEventError
from hotjoin.matcher.model import Event
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.errors import InvalidArgument, NotFound, Unavailable
from hotjoin.server.topic import MAX_BATCH_EVENTS, Topic, _same_event


@pytest.fixture
def mem() -> Iterator[Topic]:
    """A topic without files (lateness 5), closed afterwards."""
    t = Topic("t", 5, None, {}, None)
    yield t
    t.close()


def _now() -> int:
    return time.time_ns()


# ---- through a served topic -------------------------------------------------------------------

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


# ---- one Topic: sequence, limits, ids, cursors, closing -------------------------------------

def test_each_accepted_operation_takes_the_next_seq(mem: Topic) -> None:
    """Subscribe, publish, delete and unsubscribe share one sequence; rejected events take none."""
    (sid, reg), = mem.subscribe([band((-1, 1))], _now())
    assert reg == 1
    st_ = mem.publish([event("R", "a", 0.0, 0.0, time=10), event("R", "a", 0.0, 0.0, time=10),
                       event("S", "b", 0.5, 0.0, time=11), event("S", "old", 0.5, 0.0, time=1)], _now())
    assert [(s.code, s.seq) for s in st_] == [("ok", 2), ("duplicate", 0), ("ok", 3), ("late", 0)]
    dels = mem.delete([ref("R", "a"), ref("R", "a")], _now())
    assert [(s.code, s.seq) for s in dels] == [("ok", 4), ("not_found", 0)]
    assert mem.unsubscribe(sid) == 5
    assert mem.engine.seq == 5 and mem.info()["seq"] == 5


def test_batch_limit_boundary(mem: Topic) -> None:
    """A batch of exactly the limit is applied; one more event refuses the whole batch."""
    over = [ref("R", f"x{i}") for i in range(MAX_BATCH_EVENTS + 1)]
    with pytest.raises(InvalidArgument, match=f"batch of {MAX_BATCH_EVENTS + 1} events exceeds"):
        mem.delete(over, _now())
    with pytest.raises(InvalidArgument, match="exceeds the limit"):
        mem.publish([event("R", f"x{i}", 0.0, 0.0, time=1) for i in range(MAX_BATCH_EVENTS + 1)], _now())
    assert mem.engine.seq == 0
    full = mem.publish([event("R", f"x{i}", 0.0, 0.0, time=1) for i in range(MAX_BATCH_EVENTS)], _now())
    assert all(s.code == "ok" for s in full) and mem.engine.seq == MAX_BATCH_EVENTS


def test_server_assigned_ids_skip_stored_ones(mem: Topic) -> None:
    """An event without id gets ``auto-<its seq>``, suffixed ``.1``, ``.2``... when taken."""
    mem.publish([event("R", "auto-3", 0.0, 0.0, time=1), event("R", "auto-3.1", 0.0, 0.0, time=1)], _now())
    st_ = mem.publish([pb.Event(side=pb.SIDE_R, key=0.0, value=0.0, time=1),
                       pb.Event(side=pb.SIDE_S, key=0.0, value=0.0, time=1)], _now())
    assert [(s.code, s.id, s.seq) for s in st_] == [("ok", "auto-3.2", 3), ("ok", "auto-4", 4)]
    mem2 = mem.publish([event("R", "auto-6", 0.0, 0.0, time=1)], _now())
    assert mem2[0].seq == 5
    st_ = mem.publish([pb.Event(side=pb.SIDE_R, key=0.0, value=0.0, time=1)], _now())
    assert st_[0].id == "auto-6.1"
    assert mem.engine.get_event("R", "auto-6.1") is not None


def test_cursor_commits_are_bounded_by_the_sequence(mem: Topic) -> None:
    (sid, _), = mem.subscribe([band((-1, 1), subscriber="me")], _now())
    mem.publish([event("R", "a", 0.0, 0.0, time=1)], _now())
    assert mem.commit_cursors({sid: 2}) == [(sid, 2)]
    with pytest.raises(InvalidArgument, match="cursor 3 of subscription .* beyond the topic's sequence 2"):
        mem.commit_cursors({sid: 3})
    with pytest.raises(NotFound, match="no subscription 99"):
        mem.commit_cursors({99: 0})
    with pytest.raises(InvalidArgument, match="needs cursors, or a subscriber"):
        mem.commit_cursors({})
    assert mem.commit_cursors({}, subscriber="me", after_seq=1) == [(sid, 1)]
    seq, rows = mem.committed()
    assert seq == 2 and [(r[0], r[1], r[2]) for r in rows] == [(sid, "me", 1)]


def test_listen_needs_something_to_listen_to(mem: Topic) -> None:
    with pytest.raises(InvalidArgument, match="needs a subscriber or at least one subscription id"):
        mem.listen("", [], {}, 0, False)
    with pytest.raises(NotFound, match="no subscription 7"):
        mem.listen("", [7], {}, 0, False)


def test_a_closed_topic_is_unavailable_and_a_deleted_one_not_found() -> None:
    t = Topic("t", 0, None, {}, None)
    t.close()
    with pytest.raises(Unavailable, match="not available"):
        t.publish([event("R", "a", 0.0, 0.0, time=1)], _now())
    d = Topic("d", 0, None, {}, None)
    d.close(deleted=True)
    for call in (lambda: d.publish([], _now()), lambda: d.delete([], _now()),
                 lambda: d.subscribe([band((0, 1))], _now()), lambda: d.stats()):
        with pytest.raises(NotFound, match="'d' was deleted"):
            call()


@pytest.mark.parametrize(("time_", "payload", "end", "same"), [
    (10, b"p", None, True),     # equal
    (None, b"p", None, True),   # sent without a time: any stored time
    (11, b"p", None, False),    # another time
    (10, b"q", None, False),    # another payload
    (10, b"p", 12, False),      # an interval against a stored point
])
def test_identical_duplicate(time_: int | None, payload: bytes, end: int | None, same: bool) -> None:
    stored = Event("R", "a", 1.0, 2.0, 10, payload=b"p")
    assert _same_event(stored, 1.0, 2.0, time_, payload, end) is same
    assert _same_event(stored, 1.5, 2.0, time_, payload, end) is False
    assert _same_event(None, 1.0, 2.0, time_, payload, end) is False


_ops = st.lists(st.tuples(st.sampled_from("RS"), st.sampled_from(["a", "b", "c", "d"]),
                          st.integers(0, 30), st.sampled_from([0.0, 1.0])),
                min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(st.lists(_ops, min_size=1, max_size=4))
def test_statuses_and_seqs_follow_the_oracle(batches: list[list[tuple[str, str, int, float]]]) -> None:
    """Batch after batch, each event's status is what the reference engine says (ok, duplicate
    or late), identical duplicates are flagged, and the accepted events take consecutive seqs."""
    t = Topic("t", 5, None, {}, None)
    oracle = OracleAdapter(lateness=5)
    try:
        for batch in batches:
            seq0 = t.engine.seq
            got = t.publish([event(s, i, k, 0.0, time=tm) for s, i, tm, k in batch], _now())
            want = []
            for s, i, tm, k in batch:
                prior = oracle.get_event(s, i)
                try:
                    oracle.publish(Event(s, i, k, 0.0, tm))
                    want.append(("ok", False))
                except DuplicateEventError:
                    want.append(("duplicate", prior is not None and prior.key == k and prior.time == tm))
                except LateEventError:
                    want.append(("late", False))
            assert [(s.code, s.identical) for s in got] == want
            oks = [s.seq for s in got if s.code == "ok"]
            assert oks == list(range(seq0 + 1, seq0 + 1 + len(oks)))
            assert all(s.seq == 0 for s in got if s.code != "ok")
            assert t.engine.seq == oracle.seq == seq0 + len(oks)
            assert t.engine.watermark == oracle.watermark
    finally:
        t.close()


def test_nan_is_invalid_and_changes_nothing(mem: Topic) -> None:
    st_ = mem.publish([event("R", "n", math.nan, 0.0, time=1)], _now())
    assert st_[0].code == "invalid" and "key must be finite" in st_[0].reason and mem.engine.seq == 0
