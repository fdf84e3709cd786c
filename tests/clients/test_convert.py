"""One vocabulary: the client sends the engine's own ``SelectJoin``/``BandJoin``/``WindowJoin``,
``Range`` and ``Event``, with subscription options as keyword arguments, and answers with frozen
dataclasses. The wire helpers (``band(...)``, ``event(...)``) stay as thin conveniences that build
the same messages."""

from __future__ import annotations

import dataclasses
import math

import pytest
from client_harness import Api
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.clients import (
    BandJoin,
    CommittedCursor,
    Cursors,
    DeleteResult,
    Event,
    EventRef,
    EventResult,
    IntervalJoin,
    InvalidArgument,
    PublishResult,
    Range,
    SelectJoin,
    SubscriptionInfo,
    Topic,
    TopicStats,
    WindowJoin,
    band,
    event,
    ref,
    select,
    window,
)
from hotjoin.clients.convert import (
    JOIN_KINDS,
    event_to_wire,
    range_of,
    ref_to_wire,
    rng,
    spec_of,
    spec_to_wire,
)
from hotjoin.matcher.model import ALLEN_RELATIONS
from hotjoin.proto import hotjoin_pb2 as pb

finite = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False)
bound = st.none() | finite


@st.composite
def ranges(draw: st.DrawFn) -> Range:
    lo, hi = draw(bound), draw(bound)
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    return Range(lo, hi)


joins = st.one_of(
    st.builds(SelectJoin, ranges(), ranges()),
    st.builds(BandJoin, ranges(), ranges(), ranges()),
    st.builds(WindowJoin, ranges(), ranges(), st.integers(0, 2**61)),
)
options = st.fixed_dictionaries({}, optional={
    "subscriber": st.text(max_size=8), "delivery": st.sampled_from(["pairs", "affected", "AFFECTED"]),
    "snapshot": st.booleans()})


def _legacy(spec: SelectJoin | BandJoin | WindowJoin, **kw: object) -> pb.SubscriptionSpec:
    """The same subscription built with the wire helpers (the oracle of the conversion)."""
    t = lambda r: (r.lo, r.hi)  # noqa: E731
    if isinstance(spec, SelectJoin):
        return select(t(spec.a), t(spec.c), **kw)  # type: ignore[arg-type]
    if isinstance(spec, BandJoin):
        return band(t(spec.b), t(spec.a), t(spec.c), **kw)  # type: ignore[arg-type]
    return window(t(spec.a), t(spec.c), spec.w, **kw)  # type: ignore[arg-type]


@given(joins, options)
def test_engine_types_and_helpers_build_the_same_spec(spec: object, opts: dict[str, object]) -> None:
    wire = spec_to_wire(spec, **opts)  # type: ignore[arg-type]
    defaults = {"subscriber": "", "delivery": "pairs", "snapshot": False}
    assert wire == _legacy(spec, **{**defaults, **opts})  # type: ignore[arg-type]
    assert spec_of(wire) == spec, "wire -> engine type is the inverse"
    assert wire.WhichOneof("kind") == spec.kind  # type: ignore[attr-defined]
    again = spec_to_wire(wire, subscriber="other")  # a prebuilt spec: options given replace its own
    assert again.subscriber == "other" and again.delivery == wire.delivery and wire.subscriber != "other" \
        or opts.get("subscriber") == "other"


@given(ranges())
def test_range_round_trip(r: Range) -> None:
    w = rng(r)
    assert w.HasField("lo") == (r.lo is not None) and w.HasField("hi") == (r.hi is not None)
    assert range_of(w) == r and rng((r.lo, r.hi)) == w


def test_every_join_kind_is_one_table_row() -> None:
    """A new kind (e.g. an interval join) is one more ``JoinKind``: the table covers the
    ``SubscriptionSpec`` oneof and every engine class's parameters."""
    oneof = {f.name for f in pb.SubscriptionSpec.DESCRIPTOR.oneofs_by_name["kind"].fields}
    assert {k.field for k in JOIN_KINDS} == oneof
    for k in JOIN_KINDS:
        params = {f.name for f in dataclasses.fields(k.cls) if f.init}
        mine = set(k.ranges) | set(k.ints) | set(k.int_ranges) | set(k.texts)
        assert mine == params, k
        assert mine == {f.name for f in getattr(pb, k.cls.__name__).DESCRIPTOR.fields}


@given(st.sampled_from(ALLEN_RELATIONS), ranges(), ranges())
def test_interval_join_round_trip(name: str, a: Range, c: Range) -> None:
    j = IntervalJoin.allen(name, b=Range(0, 0), a=a, c=c)
    back = spec_of(spec_to_wire(j))
    assert back == j and back.preset == j.preset
    raw = IntervalJoin(Range(None, 1), ss=Range(-3, None), ee=Range(0, 0))
    assert spec_of(spec_to_wire(raw)) == raw and spec_of(spec_to_wire(raw)).preset is None


def test_bad_specs_and_options_fail_before_sending() -> None:
    with pytest.raises(TypeError, match="SelectJoin, BandJoin, WindowJoin, IntervalJoin"):
        spec_to_wire({"kind": "band"})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="delivery must be 'pairs' or 'affected'"):
        spec_to_wire(BandJoin(), delivery="both")
    with pytest.raises(TypeError, match="subscriber must be a string"):
        spec_to_wire(BandJoin(), subscriber=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty range"):
        Range(2, 1)
    with pytest.raises(ValueError, match="must be finite"):
        Range(0, math.inf)


def test_events_and_refs() -> None:
    e = Event("R", "r1", 1.5, -2.0, 7, b"p")
    assert event_to_wire(e) == event("R", "r1", 1.5, -2.0, 7, b"p")
    assert event_to_wire(event("S", "", 1.0, 0.0)).HasField("time") is False  # left to the server
    with pytest.raises(TypeError, match="an event is a hotjoin Event"):
        event_to_wire(("R", "r1", 1.0, 0.0, 1))  # type: ignore[arg-type]
    assert ref_to_wire(("S", "s1")) == ref_to_wire(EventRef("S", "s1")) == ref("S", "s1") == \
        ref_to_wire(Event("S", "s1", 0.0, 0.0, 0))
    with pytest.raises(ValueError, match="side must be 'R' or 'S'"):
        ref_to_wire(("Q", "x"))
    with pytest.raises(TypeError, match="EventRef"):
        ref_to_wire("R:r1")  # type: ignore[arg-type]


def test_results_are_frozen_dataclasses() -> None:
    for cls in (Topic, SubscriptionInfo, EventResult, PublishResult, DeleteResult, CommittedCursor,
                Cursors, TopicStats):
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Topic("t").seq = 3  # type: ignore[misc]
    assert Topic("t", wire=object()) == Topic("t"), "the wire message is left out of comparisons"


def test_the_documented_example_works_end_to_end(api: Api, topic: str) -> None:
    """``subscribe(topic, BandJoin(b=Range(-1, 1)), subscriber=..., delivery=..., snapshot=...)``
    and events as ``Event``: the same matches as the wire helpers give."""
    t = api.call("create_topic", topic, lateness=10)
    assert isinstance(t, Topic) and (t.name, t.lateness, t.retention, t.seq) == (topic, 10, None, 0)
    a = api.call("subscribe", topic, BandJoin(b=Range(-1, 1)), subscriber="me", delivery="affected",
                 snapshot=False)
    b = api.call("subscribe", topic, band((-1, 1)), subscriber="me")  # the helper, options as kwargs
    c = api.call("subscribe", topic, band((-1, 1), subscriber="me"))  # the helper's own options
    w = api.call("subscribe_many", topic, [WindowJoin(w=5), SelectJoin(a=Range(0, None))],
                 subscriber="you")
    assert [a, b, c] == [0, 1, 2] and w == [3, 4]
    subs = {s.subscription_id: s for s in api.items("list_subscriptions", topic)}
    assert subs[a] == SubscriptionInfo(a, BandJoin(b=Range(-1, 1)), "me", "affected", False, 1)
    assert subs[b].spec == subs[c].spec == BandJoin(b=Range(-1, 1)) and subs[b].delivery == "pairs"
    assert subs[3].spec == WindowJoin(w=5) and subs[4].kind == "select" and subs[4].subscriber == "you"
    r = api.call("publish", topic, [Event("S", "s1", 10.0, 0.0, 1), Event("R", "r1", 9.5, 0.0, 2),
                                    event("R", "", 9.0, 0.0, 3), Event("R", "r0", 9.0, 0.0, -50)])
    assert isinstance(r, PublishResult) and (r.accepted, r.rejected) == (3, 1)
    assert [s.code for s in r.statuses] == ["OK", "OK", "OK", "LATE"] and r.statuses[2].id.startswith("auto-")
    assert [s.id for s in r.rejections] == ["r0"] and "late" in r.rejections[0].reason
    d = api.call("delete_events", topic, [("R", "r1"), EventRef("S", "nope")])
    assert isinstance(d, DeleteResult) and d.deleted == 1 and [x.code for x in d.rejections] == ["NOT_FOUND"]
    cur = api.call("get_cursors", topic, subscriber="me")
    assert isinstance(cur, Cursors) and [x.subscription_id for x in cur] == [0, 1, 2]
    assert all(x.committed_seq is None and x.lag is None for x in cur.cursors)
    assert api.call("commit_cursors", topic, {a: 7}) == 1
    assert api.call("get_cursors", topic, subscription_ids=[a]).cursors[0].committed_seq == 7
    st_ = api.call("stats", topic)
    assert isinstance(st_, TopicStats) and st_.tuples == {"R": 1, "S": 1} and st_.subscriptions["band"] == 3
    assert st_.watermark == 3 - 10 and st_.delivery.buffer_limit_bytes > 0
    assert [x.name for x in api.call("list_topics")] == [topic]
    api.call("delete_topic", topic)
    assert api.call("list_topics") == []
