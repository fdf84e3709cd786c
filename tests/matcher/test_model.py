"""The engine's data model (``matcher/model.py``): events, ranges and the four subscription kinds
validate their fields with one-line errors; interval joins' Allen and ISEQL presets are their
tables, display-only, and Allen's thirteen relations partition every pair of intervals."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.matcher.model import (
    ALLEN_RELATIONS,
    BandJoin,
    Event,
    IntervalJoin,
    Range,
    WindowJoin,
)
from hotjoin.matcher.oracle import interval_holds


def ev(side: str, id: str, key: float, value: float = 0.0, time: int = 0) -> Event:
    return Event(side=side, id=id, key=key, value=value, time=time)  # type: ignore[arg-type]

INF = None
# the contract's table: preset -> (SS, SE, ES, EE), None = unbounded
TABLE: dict[str, tuple[Any, Any, Any, Any]] = {
    "before": (None, (1, INF), None, None),
    "after": (None, None, (INF, -1), None),
    "meets": (None, (0, 0), None, None),
    "met_by": (None, None, (0, 0), None),
    "overlaps": ((1, INF), (INF, -1), None, (1, INF)),
    "overlapped_by": ((INF, -1), None, (1, INF), (INF, -1)),
    "starts": ((0, 0), None, None, (1, INF)),
    "started_by": ((0, 0), None, None, (INF, -1)),
    "during": ((INF, -1), None, None, (1, INF)),
    "contains": ((1, INF), None, None, (INF, -1)),
    "finishes": ((INF, -1), None, None, (0, 0)),
    "finished_by": ((1, INF), None, None, (0, 0)),
    "equals": ((0, 0), None, None, (0, 0)),
}


def _r(x: Any) -> Range:
    return Range() if x is None else Range(*x)


def _iseql_table(name: str, d: int, e: int) -> tuple[Range, Range, Range, Range]:
    u = Range()
    table = {
        "start_preceding": lambda: (Range(0, d), Range(None, 0), u, u),
        "end_following": lambda: (u, u, Range(0, None), Range(-e, 0)),
        "before": lambda: (u, Range(1, d), u, u),
        "left_overlap": lambda: (Range(0, d), Range(None, 0), u, Range(0, e)),
        "during": lambda: (Range(-d, 0), u, u, Range(0, e)),
    }
    return table[name]()


@pytest.mark.parametrize("name", ALLEN_RELATIONS)
def test_allen_presets_are_the_table(name: str) -> None:
    j = IntervalJoin.allen(name, b=Range(0, 0), a=Range(1, 2), c=Range(3, None))
    assert (j.ss, j.se, j.es, j.ee) == tuple(_r(x) for x in TABLE[name])
    assert j.preset == f"allen:{name}" and j.a == Range(1, 2) and j.c == Range(3, None)
    for r in (j.ss, j.se, j.es, j.ee):  # integer bounds, never lo > hi
        assert all(x is None or type(x) is int for x in (r.lo, r.hi))


@pytest.mark.parametrize(("name", "d", "e", "label"), [
    ("start_preceding", 0, None, "(0)"), ("start_preceding", 7, None, "(7)"),
    ("end_following", None, 0, "(0)"), ("end_following", None, 4, "(4)"),
    ("before", 1, None, "(1)"), ("before", 9, None, "(9)"),
    ("left_overlap", 0, 0, "(0,0)"), ("left_overlap", 5, 3, "(5,3)"),
    ("during", 0, 0, "(0,0)"), ("during", 2, 6, "(2,6)")])
def test_iseql_presets_are_the_table(name: str, d: int | None, e: int | None,
                                     label: str) -> None:
    j = IntervalJoin.iseql(name, delta=d, eps=e, b=Range(-1, 1))
    assert (j.ss, j.se, j.es, j.ee) == _iseql_table(name, d or 0, e or 0)
    assert j.preset == f"iseql:{name}{label}"


def test_preset_is_display_only() -> None:
    raw = IntervalJoin(Range(0, 0), se=Range(1, None))
    assert raw.preset is None and raw == IntervalJoin.allen("before", b=Range(0, 0))
    assert hash(raw) == hash(IntervalJoin.allen("before", b=Range(0, 0)))


@pytest.mark.parametrize(("call", "message"), [
    (lambda: IntervalJoin.allen("near", b=Range()), "unknown Allen relation 'near'"),
    (lambda: IntervalJoin.iseql("meets", delta=1, b=Range()), "unknown ISEQL join 'meets'"),
    (lambda: IntervalJoin.iseql("start_preceding", b=Range()), "needs delta"),
    (lambda: IntervalJoin.iseql("end_following", delta=3, b=Range()), "needs eps"),
    (lambda: IntervalJoin.iseql("left_overlap", delta=-1, eps=0, b=Range()),
     "delta must be >= 0"),
    (lambda: IntervalJoin.iseql("during", delta=1, eps=-2, b=Range()), "eps must be >= 0"),
    (lambda: IntervalJoin.iseql("before", delta=0, b=Range()), "delta must be >= 1"),
    (lambda: IntervalJoin.iseql("before", delta=1.5, b=Range()), "must be an integer"),
    (lambda: IntervalJoin(Range(), ss=Range(0.5, 2)), "range SS lo bound must be an integer"),
    (lambda: IntervalJoin(Range(), ee=Range(3, 1)), "empty range"),
    (lambda: IntervalJoin(Range(), es=Range(0, float("inf"))), "must be finite"),
    (lambda: IntervalJoin(None), "needs range B"),
    (lambda: IntervalJoin(Range(), se=(0, 1)), "range SE must be a Range"),
])
def test_bad_interval_joins_are_one_line_errors(call: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        call()
    assert "\n" not in str(info.value)


def test_event_end() -> None:
    assert Event("R", "a", 0.0, 0.0, 5).end == 5
    assert Event("R", "a", 0.0, 0.0, 5, end=5) == Event("R", "a", 0.0, 0.0, 5)
    assert Event("R", "a", 0.0, 0.0, -3, end=2**61).end == 2**61
    for end, message in [(4, "before its time 5"), (5.0, "must be an integer"),
                         (True, "must be an integer"), (2**61 + 1, "outside"),
                         ("7", "must be an integer")]:
        with pytest.raises(ValueError, match=message):
            Event("R", "a", 0.0, 0.0, 5, end=end)
    # a point beyond ±2^61 stays valid (its end is its time)
    assert Event("R", "a", 0.0, 0.0, 2**62).end == 2**62


def test_exactly_one_allen_relation_holds() -> None:
    """For intervals with time < end, exactly one of Allen's thirteen relations holds."""
    rng = np.random.default_rng(7)
    presets = [IntervalJoin.allen(n, b=Range()) for n in ALLEN_RELATIONS]
    for _ in range(3000):
        a, b = sorted(rng.choice(12, 2, replace=False).tolist())
        c, d = sorted(rng.choice(12, 2, replace=False).tolist())
        r, s = Event("R", "r", 0.0, 0.0, a, end=b), Event("S", "s", 0.0, 0.0, c, end=d)
        held = [p.preset for p in presets if interval_holds(p, r, s)]
        assert len(held) == 1, (a, b, c, d, held)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ev("R", "r", math.nan),
        lambda: ev("R", "r", 1, value=math.inf),
        lambda: ev("R", "r", -math.inf),
        lambda: ev("X", "r", 1),
        lambda: ev("R", "", 1),
        lambda: Event("R", "r", 1.0, 1.0, 1.5),  # type: ignore[arg-type]
        lambda: Range(2, 1),
        lambda: Range(math.nan, 1),
        lambda: WindowJoin(w=-1),
        lambda: BandJoin(b=(0, 1)),  # type: ignore[arg-type]
    ],
)
def test_model_validation_errors(make: object) -> None:
    with pytest.raises(ValueError):
        make()  # type: ignore[operator]


def test_range_bounds_as_floats_and_unbounded_ends() -> None:
    assert (Range().lo_f, Range().hi_f, Range().unbounded) == (-math.inf, math.inf, True)
    r = Range(-1, 2.5)
    assert (r.lo_f, r.hi_f, r.unbounded) == (-1.0, 2.5, False)
    assert not Range(None, 0).unbounded and not Range(0, None).unbounded
    assert Range(3, 3) == Range(3.0, 3.0)  # a point range is valid
    assert BandJoin(b=Range(0, 1)).kind == "band" and WindowJoin(w=0).w == 0
    with pytest.raises(ValueError):
        WindowJoin(w=1.5)  # type: ignore[arg-type]


@given(lo=st.one_of(st.none(), st.floats(-10, 10)), hi=st.one_of(st.none(), st.floats(-10, 10)),
       x=st.floats(allow_nan=False))
def test_range_contains_its_closed_interval(lo: float | None, hi: float | None, x: float) -> None:
    if lo is not None and hi is not None and lo > hi:
        with pytest.raises(ValueError, match="empty range"):
            Range(lo, hi)
        return
    want = (lo is None or lo <= x) and (hi is None or x <= hi)
    assert Range(lo, hi).contains(x) == want
