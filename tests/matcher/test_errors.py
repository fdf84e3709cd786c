"""The engine's errors (``matcher/errors.py``): one ``HotjoinError`` base, the fields each error
carries, one-line messages, and the built-in types they also are (``KeyError`` for unknown ids,
printed without quotes; ``ValueError`` for an event too far ahead)."""

from __future__ import annotations

import pytest

from hotjoin.matcher.engine import Engine
from hotjoin.matcher.errors import (
    BatchError,
    DuplicateEventError,
    EventTooFarAheadError,
    HotjoinError,
    LateEventError,
    UnknownEventError,
    UnknownSubscriptionError,
    ahead_reason,
)
from hotjoin.matcher.model import Event, SelectJoin


def test_each_error_carries_its_fields_and_a_one_line_message() -> None:
    late = LateEventError("R", "r1", 3, 10)
    assert (late.side, late.event_id, late.time, late.watermark) == ("R", "r1", 3, 10)
    assert str(late) == "event R/r1 is late: time 3 < watermark 10"
    dup = DuplicateEventError("S", "s1")
    assert (dup.side, dup.event_id, str(dup)) == ("S", "s1", "event S/s1 already exists")
    ahead = EventTooFarAheadError(100, 5, 10)
    assert (ahead.time, ahead.max_time, ahead.max_advance) == (100, 5, 10)
    assert str(ahead) == ahead_reason(100, 5, 10)
    assert "100" in str(ahead) and "max_advance" in str(ahead)
    cause = ValueError("bad key")
    batch = BatchError(4, cause)
    assert batch.index == 4 and batch.cause is cause
    assert str(batch) == "event #4 of the batch failed: bad key"
    for err in (late, dup, ahead, batch, UnknownEventError("R", "x"), UnknownSubscriptionError(7)):
        assert isinstance(err, HotjoinError) and "\n" not in str(err)


def test_unknown_ids_are_key_errors_printed_without_quotes() -> None:
    ev, sub = UnknownEventError("R", "x"), UnknownSubscriptionError(7)
    assert isinstance(ev, KeyError) and isinstance(sub, KeyError)
    assert (ev.side, ev.event_id, sub.subscription_id) == ("R", "x", 7)
    assert str(ev) == "no stored event R/x" and str(sub) == "no subscription 7"
    assert isinstance(EventTooFarAheadError(1, 0, 0), ValueError)
    assert not isinstance(LateEventError("R", "r", 0, 1), ValueError)


def test_the_engine_raises_them_and_keeps_its_state() -> None:
    e = Engine(lateness=0)
    e.subscribe(SelectJoin())
    e.publish(Event("R", "r", 1.0, 1.0, 10))
    seq = e.seq
    with pytest.raises(LateEventError) as late:
        e.publish(Event("S", "s", 1.0, 1.0, 9))
    assert late.value.watermark == 10 and late.value.time == 9
    with pytest.raises(DuplicateEventError):
        e.publish(Event("R", "r", 2.0, 1.0, 11))
    with pytest.raises(UnknownEventError):
        e.delete("S", "nope")
    with pytest.raises(UnknownSubscriptionError):
        e.unsubscribe(99)
    assert e.seq == seq and e.get_event("S", "s") is None
