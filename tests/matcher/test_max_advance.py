"""The topic option ``max_advance``: an event more than ``max_advance`` beyond the largest event
time seen is refused (INVALID), after the duplicate and lateness checks, and changes nothing.

Random event sequences (small times with occasional huge jumps, duplicates, late events,
lateness, retention) go through ``Engine.publish_affected`` one at a time, through
``Engine.publish_batch`` cut into random batches, and through the brute-force ``OracleEngine``;
all three must give the same status per event, the same sequence numbers, the same deliveries
and the same watermark. The boundary values are also checked on purpose.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from engine_harness import harness_settings
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.matcher import (
    BandJoin,
    DuplicateEventError,
    Engine,
    Event,
    EventStatus,
    LateEventError,
    Range,
    SelectJoin,
    WindowJoin,
)
from hotjoin.matcher.batch import TIME_MAX
from hotjoin.matcher.errors import EventTooFarAheadError
from hotjoin.matcher.oracle import OracleEngine

OK, LATE, DUP, INVALID = (int(EventStatus.OK), int(EventStatus.LATE),
                          int(EventStatus.DUPLICATE), int(EventStatus.INVALID))
SUBS = [SelectJoin(), SelectJoin(Range(0.0, 3.0), Range(2.0, None)), BandJoin(Range(-1.0, 1.0)),
        BandJoin(Range(0.0, 2.0), Range(None, 4.0)), WindowJoin(w=3), WindowJoin(Range(1.0, 5.0), w=0)]
JUMPS = (40, 10**6, 1_800_000_000_000, TIME_MAX, -TIME_MAX)  # a wrong clock, both ways


@st.composite
def events(draw: Any) -> list[tuple[str, str, float, float, int]]:
    """Events over a small id pool (duplicates), keys 0..3 and times mostly 0..14 (late ones
    with lateness up to 5), with occasional huge jumps and times just past a small bound."""
    out = []
    for _ in range(draw(st.integers(1, 40))):
        side = draw(st.sampled_from("RS"))
        kind = draw(st.integers(0, 9))
        if kind == 0:
            t = draw(st.sampled_from(JUMPS))
        elif kind == 1:
            t = draw(st.integers(15, 30))  # a few units ahead: the small bounds' edge
        else:
            t = draw(st.integers(0, 14))
        out.append((side, side.lower() + str(draw(st.integers(0, 5))),
                    float(draw(st.integers(0, 3))), float(draw(st.integers(0, 6))), t))
    return out


def _oracle_outcome(o: OracleEngine, ev: Event) -> tuple[Any, ...]:
    """(status, seq, reason or None, affected counts) of one event on the oracle."""
    try:
        out = o.publish(ev)
    except DuplicateEventError as e:
        return DUP, 0, str(e), {}
    except LateEventError as e:
        return LATE, 0, str(e), {}
    except ValueError as e:
        return INVALID, 0, str(e), {}
    return OK, o.seq, None, dict(Counter(d.subscription_id for d in out))


def _engine_outcome(e: Engine, ev: Event) -> tuple[Any, ...]:
    """The same for ``Engine.publish_affected`` one at a time (raise -> status)."""
    try:
        aff = e.publish_affected(ev)
    except DuplicateEventError as x:
        return DUP, 0, str(x), {}
    except LateEventError as x:
        return LATE, 0, str(x), {}
    except ValueError as x:
        return INVALID, 0, str(x), {}
    return OK, e.seq, None, dict(zip(aff.subscription_ids.tolist(), aff.counts.tolist(),
                                     strict=True))


def _batch_outcomes(e: Engine, evs: list[tuple[str, str, float, float, int]],
                    output: str) -> list[tuple[Any, ...]]:
    """Per event of one ``publish_batch`` call: (status, seq, reason or None, affected counts)."""
    res = e.publish_batch(*(list(c) for c in zip(*evs, strict=True)), output=output)
    counts: list[Counter[int]] = [Counter() for _ in evs]
    o = res.output
    for ev, q, c in zip(o.event.tolist(), o.subscription.tolist(), o.count.tolist(), strict=True):
        counts[ev][q] += c
    return [(int(s), int(q), res.reasons.get(i), dict(counts[i]))
            for i, (s, q) in enumerate(zip(res.status.tolist(), res.seq.tolist(), strict=True))]


@harness_settings(150)
@given(evs=events(), lateness=st.integers(0, 5), retention=st.one_of(st.none(), st.integers(0, 6)),
       max_advance=st.sampled_from([None, 0, 1, 2, 5, 8, 20]),
       cuts=st.lists(st.integers(1, 40), max_size=8), pairs=st.booleans())
def test_engine_paths_equal_oracle(evs: list[tuple[str, str, float, float, int]], lateness: int,
                                   retention: int | None, max_advance: int | None,
                                   cuts: list[int], pairs: bool) -> None:
    oracle = OracleEngine(lateness, retention, max_advance)
    one = Engine(lateness=lateness, retention=retention, max_advance=max_advance)
    batch = Engine(lateness=lateness, retention=retention, max_advance=max_advance)
    for eng in (oracle, one, batch):
        for sub in SUBS:
            eng.subscribe(sub)
    want = [_oracle_outcome(oracle, Event(*ev)) for ev in evs]
    got_one = [_engine_outcome(one, Event(*ev)) for ev in evs]
    got_batch: list[tuple[Any, ...]] = []
    bounds = sorted({0, len(evs), *(c for c in cuts if c < len(evs))})
    for a, b in zip(bounds, bounds[1:], strict=False):
        got_batch += _batch_outcomes(batch, evs[a:b], "pairs" if pairs else "affected")
    for i, (w, g1, gb) in enumerate(zip(want, got_one, got_batch, strict=True)):
        assert g1 == w, f"event {i} {evs[i]}: one at a time {g1}, oracle {w}"
        assert gb == w, f"event {i} {evs[i]}: batch {gb}, oracle {w}"
    assert one.seq == batch.seq == oracle.seq
    assert one.watermark == batch.watermark == oracle.watermark
    if max_advance:  # the clock never moved by more than the bound at once
        accepted = [ev[4] for ev, w in zip(evs, want, strict=True) if w[0] == OK]
        assert all(b - max(accepted[:k]) <= max_advance
                   for k, b in enumerate(accepted) if k)


# ---- boundaries, on purpose ---------------------------------------------------------------------
def _engines(max_advance: int | None, lateness: int = 0) -> list[Any]:
    return [Engine(lateness=lateness, max_advance=max_advance),
            OracleEngine(lateness, None, max_advance)]


@pytest.mark.parametrize("path", ["one", "batch", "oracle"])
def test_bound_is_inclusive_and_a_rejected_event_moves_nothing(path: str) -> None:
    """time == max + max_advance is accepted, one more is INVALID with the reason; the event
    after a rejected one is checked against the unchanged clock (and is not late)."""
    e: Any = OracleEngine(2, None, 100) if path == "oracle" else Engine(lateness=2, max_advance=100)
    plan = [("R", "a", 5, OK), ("R", "b", 105, OK), ("S", "c", 206, INVALID),
            ("S", "d", 1_800_000_000_000, INVALID), ("S", "e", 104, OK), ("S", "f", 205, OK)]
    if path == "batch":
        res = e.publish_batch([p[0] for p in plan], [p[1] for p in plan], [1.0] * 6, [0.0] * 6,
                              [p[2] for p in plan])
        assert res.status.tolist() == [p[3] for p in plan]
        reasons = res.reasons
    else:
        reasons = {}
        for i, (side, eid, t, want) in enumerate(plan):
            try:
                e.publish(Event(side, eid, 1.0, 0.0, t))
                assert want == OK, (eid, t)
            except ValueError as x:
                assert want == INVALID and not isinstance(x, LateEventError), (eid, t)
                reasons[i] = str(x)
    assert reasons == {
        2: "event time 206 is more than 100 ahead of the topic's largest event time 105 "
           "(max_advance); nothing changed",
        3: "event time 1800000000000 is more than 100 ahead of the topic's largest event time "
           "105 (max_advance); nothing changed"}
    assert e.seq == 4 and e.watermark == 203


@pytest.mark.parametrize("max_advance", [1, 86_400_000])
def test_first_event_is_not_bounded(max_advance: int) -> None:
    for e in _engines(max_advance):
        e.publish(Event("R", "first", 1.0, 0.0, 1_800_000_000_000))
        assert e.watermark == 1_800_000_000_000
    e = Engine(max_advance=max_advance)
    res = e.publish_batch(["R", "R"], ["a", "b"], [0.0, 0.0], [0.0, 0.0], [-TIME_MAX, TIME_MAX])
    assert res.status.tolist() == [OK, INVALID] and e.watermark == -TIME_MAX


@pytest.mark.parametrize("max_advance", [2**62, 2**62 + 10, 2**63 - 1])
def test_batch_bound_is_exact_beyond_the_batch_time_range(max_advance: int) -> None:
    """A clock below -2^62 (reachable only one at a time, the batch path clips it): the batch's
    decisions and reasons use the exact clock, as one at a time does."""
    start = -(2**62) - 10
    e, f = Engine(max_advance=max_advance), Engine(max_advance=max_advance)
    for eng in (e, f):
        eng.publish(Event("R", "a", 0.0, 0.0, start))
    res = e.publish_batch(["R", "R"], ["b", "c"], [0.0, 0.0], [0.0, 0.0], [0, TIME_MAX])
    want = []
    for eid, t in (("b", 0), ("c", TIME_MAX)):
        try:
            f.publish(Event("R", eid, 0.0, 0.0, t))
            want.append((OK, None))
        except EventTooFarAheadError as x:
            want.append((INVALID, str(x)))
    assert [(s, res.reasons.get(i)) for i, s in enumerate(res.status.tolist())] == want
    assert e.watermark == f.watermark and e.seq == f.seq
    if max_advance == 2**62:
        assert want[0] == (INVALID, f"event time 0 is more than {2**62} ahead of the topic's "
                                    f"largest event time {start} (max_advance); nothing changed")


@pytest.mark.parametrize("max_advance", [None, 0])
def test_none_and_zero_mean_no_bound(max_advance: int | None) -> None:
    e = Engine(max_advance=max_advance)
    assert e.max_advance is None
    e.publish(Event("R", "a", 0.0, 0.0, 0))
    e.publish(Event("R", "b", 0.0, 0.0, TIME_MAX))
    res = e.publish_batch(["S"], ["c"], [0.0], [0.0], [TIME_MAX])
    assert res.status.tolist() == [OK] and e.watermark == TIME_MAX


def test_duplicate_and_far_is_duplicate() -> None:
    """The duplicate check comes first: an id already stored is DUPLICATE even when its time is
    also too far ahead (a retried batch answers ALREADY_EXISTS, not INVALID)."""
    for e in _engines(10):
        e.publish(Event("R", "a", 0.0, 0.0, 5))
        with pytest.raises(DuplicateEventError):
            e.publish(Event("R", "a", 0.0, 0.0, 10**12))
    e = Engine(max_advance=10)
    res = e.publish_batch(["R", "R", "R"], ["a", "a", "b"], [0.0] * 3, [0.0] * 3, [5, 10**12, 10**12])
    assert res.status.tolist() == [OK, DUP, INVALID]
    assert res.reasons[1] == "event R/a already exists"


def test_one_at_a_time_raises_a_value_error_with_fields() -> None:
    e = Engine(max_advance=86_400_000)
    e.publish(Event("S", "s", 0.0, 0.0, 5))
    with pytest.raises(EventTooFarAheadError) as err:
        e.publish_columnar(Event("S", "t", 0.0, 0.0, 1_800_000_000_000))
    assert isinstance(err.value, ValueError)
    assert (err.value.time, err.value.max_time, err.value.max_advance) == (
        1_800_000_000_000, 5, 86_400_000)
    assert str(err.value) == ("event time 1800000000000 is more than 86400000 ahead of the "
                              "topic's largest event time 5 (max_advance); nothing changed")
    assert e.seq == 1 and e.watermark == 5 and e.get_event("S", "t") is None
    with pytest.raises(Exception, match="#1 of the batch failed: event time") as bad:
        e.publish_many([Event("S", "u", 0.0, 0.0, 6), Event("S", "v", 0.0, 0.0, 10**12)])
    assert bad.value.index == 1 and e.seq == 2  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True])
def test_engine_refuses_a_bad_max_advance(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_advance must be an integer >= 0"):
        Engine(max_advance=bad)
    with pytest.raises(ValueError, match="max_advance must be an integer >= 0"):
        OracleEngine(0, None, bad)


def test_max_advance_survives_an_engine_state_round_trip() -> None:
    """The option is a constructor argument: an engine loaded from ``export_state`` with the same
    options refuses exactly what the exporter refuses."""
    e = Engine(lateness=1, max_advance=50)
    e.subscribe(SelectJoin())
    e.publish_batch(["R", "S"], ["r", "s"], [1.0, 1.0], [0.0, 0.0], [10, 40])
    f = Engine(lateness=1, max_advance=50)
    f.load_state(e.export_state())
    for eng in (e, f):
        res = eng.publish_batch(["S", "S"], ["x", "y"], [1.0, 1.0], [0.0, 0.0], [91, 90])
        assert res.status.tolist() == [INVALID, OK]
        assert res.output.count.tolist() == [1]
    assert np.array_equal(e.publish_identify(Event("R", "z", 1.0, 0.0, 140)),
                          f.publish_identify(Event("R", "z", 1.0, 0.0, 140)))
