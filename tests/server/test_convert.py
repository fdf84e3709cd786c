"""Wire ↔ engine conversions: events, subscription specs and event columns round-trip through
their wire form, and every bound is checked at its edge with a message naming what is wrong."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.matcher import BandJoin, Event, Range, SelectJoin, WindowJoin
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.convert import (
    MAX_ID_LEN,
    MAX_NAME_LEN,
    MAX_PAYLOAD,
    MAX_TIME,
    SubMeta,
    check_event_end,
    check_event_time,
    check_subscriber,
    check_time_option,
    decode_columns,
    decode_event,
    decode_id,
    decode_side,
    decode_spec,
    encode_columns,
    encode_event,
    encode_spec,
)

FLOATS = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False)
TIMES = st.integers(min_value=-MAX_TIME, max_value=MAX_TIME)
IDS = st.text(min_size=1, max_size=40)


@st.composite
def events(draw: st.DrawFn) -> Event:
    time = draw(TIMES)
    ev = dict(side=draw(st.sampled_from("RS")), event_id=draw(IDS), key=draw(FLOATS),
              value=draw(FLOATS), time=time, payload=draw(st.binary(max_size=20)))
    if draw(st.booleans()):
        end = draw(st.integers(min_value=time + 1, max_value=MAX_TIME)) if time < MAX_TIME else time
        return Event(ev["side"], ev["event_id"], ev["key"], ev["value"], time, ev["payload"],
                     end=end)
    return Event(ev["side"], ev["event_id"], ev["key"], ev["value"], time, ev["payload"])


@st.composite
def ranges(draw: st.DrawFn) -> Range:
    lo, hi = sorted((draw(FLOATS), draw(FLOATS)))
    return Range(draw(st.sampled_from([None, lo])), draw(st.sampled_from([None, hi])))


SUBS = st.one_of(
    st.builds(SelectJoin, a=ranges(), c=ranges()),
    st.builds(BandJoin, b=ranges(), a=ranges(), c=ranges()),
    st.builds(WindowJoin, a=ranges(), c=ranges(), w=st.integers(min_value=0, max_value=MAX_TIME)),
)


@given(events())
def test_an_event_round_trips_through_its_wire_form(ev: Event) -> None:
    wire = encode_event(ev)
    assert wire.HasField("end") == (ev.end != ev.time)
    back = decode_event(wire, default_time=-1)
    assert back == ev
    assert (back.side, back.id, back.key, back.value, back.time, back.payload, back.end) == (
        ev.side, ev.id, ev.key, ev.value, ev.time, ev.payload, ev.end)


@given(SUBS, st.booleans(), st.booleans(), st.text(max_size=MAX_NAME_LEN))
def test_a_subscription_round_trips_through_its_spec(sub: object, affected: bool, snapshot: bool,
                                                     subscriber: str) -> None:
    spec = encode_spec(sub, SubMeta(affected, snapshot, subscriber, 5))  # type: ignore[arg-type]
    assert decode_spec(pb.SubscriptionSpec.FromString(spec.SerializeToString())) == (
        sub, affected, snapshot, subscriber)


@given(st.lists(events(), max_size=8), st.booleans())
def test_event_columns_round_trip(evs: list[Event], with_times: bool) -> None:
    sides = np.array([1 if e.side == "R" else 2 for e in evs], dtype=np.uint8)
    ids = np.array([e.id for e in evs] + [None], dtype=object)[:-1]
    times = np.array([e.time for e in evs], dtype=np.int64) if with_times else None
    ends = np.array([e.end for e in evs], dtype=np.int64) if with_times else None
    wire = encode_columns(sides, ids, [e.key for e in evs], [e.value for e in evs], times,
                          [e.payload for e in evs], ends)
    back = decode_columns(pb.EventColumns.FromString(wire.SerializeToString()))
    assert back.sides.tolist() == sides.tolist() and back.ids.tolist() == ids.tolist()
    assert back.keys.tolist() == [e.key for e in evs] and back.values.tolist() == [e.value for e in evs]
    if with_times and evs:
        assert back.times.tolist() == times.tolist()
        has_interval = any(e.end != e.time for e in evs)
        assert (back.ends is not None) == has_interval  # a batch of points carries no ends
        if has_interval:
            assert back.ends.tolist() == ends.tolist()
    else:
        assert back.times is None
    if any(e.payload for e in evs):
        assert back.payloads == [e.payload for e in evs]
    else:
        assert back.payloads is None


def test_columns_of_different_lengths_are_refused_naming_them() -> None:
    wire = pb.EventColumns(sides=bytes([1, 2]), ids=["a", "b"], keys=[1.0], values=[1.0, 2.0],
                           times=[1, 2, 3])
    with pytest.raises(ValueError, match=r"ids has 2 entries, keys has 1, times has 3"):
        decode_columns(wire)


def test_an_event_without_a_time_takes_the_default_and_without_an_id_a_new_one() -> None:
    ev = decode_event(pb.Event(side=pb.SIDE_S, key=1.0, value=2.0), 42, new_id=lambda s: f"{s}-1")
    assert (ev.side, ev.id, ev.time, ev.end) == ("S", "S-1", 42, 42)


@pytest.mark.parametrize(("wire", "message"), [
    (pb.Event(id="x", time=1), "side must be R or S"),
    (pb.Event(side=pb.SIDE_R, time=1), "event id is required"),
    (pb.Event(side=pb.SIDE_R, id="x" * (MAX_ID_LEN + 1), time=1),
     f"event id longer than {MAX_ID_LEN} characters"),
    (pb.Event(side=pb.SIDE_R, id="x", time=1, payload=b"\0" * (MAX_PAYLOAD + 1)),
     f"payload larger than {MAX_PAYLOAD} bytes"),
    (pb.Event(side=pb.SIDE_R, id="x", time=MAX_TIME + 1), "outside the supported range"),
    (pb.Event(side=pb.SIDE_R, id="x", time=5, end=4), "event end 4 is before its time 5"),
])
def test_bad_events_are_refused_with_the_reason(wire: pb.Event, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_event(wire, 0)


def test_the_bounds_hold_exactly_at_their_edges() -> None:
    assert check_event_time(MAX_TIME) == MAX_TIME and check_event_time(-MAX_TIME) == -MAX_TIME
    for t in (MAX_TIME + 1, -MAX_TIME - 1):
        with pytest.raises(ValueError, match=rf"event time {t} is outside"):
            check_event_time(t)
    assert check_event_end(MAX_TIME, MAX_TIME) == MAX_TIME
    with pytest.raises(ValueError, match="event end"):
        check_event_end(MAX_TIME + 1, 0)
    assert check_time_option("lateness", 0) == 0 and check_time_option("retention", MAX_TIME)
    for x in (-1, MAX_TIME + 1):
        with pytest.raises(ValueError, match=rf"lateness must be >= 0 and <= 2\^61, got {x}"):
            check_time_option("lateness", x)
    assert check_subscriber("n" * MAX_NAME_LEN) == "n" * MAX_NAME_LEN
    with pytest.raises(ValueError, match=rf"longer than {MAX_NAME_LEN} characters \(257\)"):
        check_subscriber("n" * (MAX_NAME_LEN + 1))
    assert decode_id("x" * MAX_ID_LEN, allow_empty=False) == "x" * MAX_ID_LEN
    assert decode_id("", allow_empty=True) == ""
    assert decode_side(pb.SIDE_R) == "R" and decode_side(pb.SIDE_S) == "S"


@pytest.mark.parametrize(("spec", "message"), [
    (pb.SubscriptionSpec(), "subscription kind is required"),
    (pb.SubscriptionSpec(window=pb.WindowJoin(w=-1)), "window w must be >= 0"),
    (pb.SubscriptionSpec(window=pb.WindowJoin(w=MAX_TIME + 1)), "window w must be >= 0"),
    (pb.SubscriptionSpec(select=pb.SelectJoin(), delivery=99), "unknown delivery mode 99"),
    (pb.SubscriptionSpec(select=pb.SelectJoin(), subscriber="s" * (MAX_NAME_LEN + 1)),
     "subscriber name longer"),
])
def test_bad_specs_are_refused_with_the_reason(spec: pb.SubscriptionSpec, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_spec(spec)
