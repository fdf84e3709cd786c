"""Subscription columns (``matcher/subscriptions.py``): what ``add`` stores row by row equals what
``add_many`` stores vectorised, across growth; ``live_columns`` round-trips through
``restore_columns``; a deactivated id leaves the live columns; interval endpoint bounds are kept
clipped at ``ENDPOINT_CLIP`` and come back unbounded."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from engine_harness import harness_settings, subscriptions
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.matcher.model import IntervalJoin, Range, SelectJoin, WindowJoin
from hotjoin.matcher.subscriptions import (
    ENDPOINT_CLIP,
    INTERVAL_COLUMNS,
    KIND_CODE,
    SubscriptionColumns,
    bounds_of,
    endpoint_rows,
    interval_columns,
)

_ENDPOINT = st.one_of(st.none(), st.integers(-2**63, 2**63 - 1))


@st.composite
def _endpoint_ranges(draw: st.DrawFn) -> Range:
    lo, hi = draw(_ENDPOINT), draw(_ENDPOINT)
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    return Range(lo, hi)


INTERVALS = st.builds(IntervalJoin, b=st.just(Range(-1.0, 1.0)), ss=_endpoint_ranges(),
                      se=_endpoint_ranges(), es=_endpoint_ranges(), ee=_endpoint_ranges())
ANY_SUBSCRIPTION = st.one_of(subscriptions("band"), subscriptions("select"),
                             subscriptions("window", window_w=st.integers(0, 2**40)), INTERVALS)
_ROW_COLUMNS = ("a_lo", "a_hi", "b_lo", "b_hi", "c_lo", "c_hi", "w", "reg", "snap", "active",
                "selective", "kind", "rec")


def _rows(cols: SubscriptionColumns) -> dict[str, Any]:
    out = {name: getattr(cols, name)[: cols.n].tolist() for name in _ROW_COLUMNS}
    out["irec"] = cols.irec[: cols.n].tolist() if cols.irec.shape[0] else None
    return out


@harness_settings(80)
@given(subs=st.lists(ANY_SUBSCRIPTION, max_size=12), first_reg=st.integers(0, 100),
       snap=st.booleans(), capacity=st.integers(1, 4))
def test_add_many_stores_what_add_stores_one_at_a_time(
        subs: list[Any], first_reg: int, snap: bool, capacity: int) -> None:
    one, many = SubscriptionColumns(capacity), SubscriptionColumns(capacity)
    sids = [one.add(sub, first_reg + i, snap) for i, sub in enumerate(subs)]
    assert sids == list(range(len(subs)))
    assert many.add_many(subs, first_reg, snap).tolist() == sids
    assert one.n == many.n == len(subs)
    assert one.capacity >= len(subs) and many.capacity >= len(subs)
    a, b = _rows(one), _rows(many)
    if any(isinstance(s, IntervalJoin) for s in subs):
        assert a == b
    else:  # no interval join: neither keeps endpoint rows
        assert a.pop("irec") is None and b.pop("irec") is None and a == b
    for i, sub in enumerate(subs):
        assert one.kind[i] == KIND_CODE[sub.kind]
        assert one.selective[i] == (not (sub.a.unbounded and sub.c.unbounded))
        assert one.is_active(i)
    assert not one.is_active(len(subs)) and not one.is_active(-1)


@harness_settings(60)
@given(subs=st.lists(ANY_SUBSCRIPTION, min_size=1, max_size=12), data=st.data())
def test_live_columns_round_trip_and_skip_deactivated_ids(subs: list[Any],
                                                          data: st.DataObject) -> None:
    cols = SubscriptionColumns(2)
    cols.add_many(subs, 1, False)
    gone = data.draw(st.sets(st.integers(0, len(subs) - 1)))
    for sid in gone:
        cols.deactivate(sid)
    live = cols.live_columns()
    assert live["sid"].tolist() == [i for i in range(len(subs)) if i not in gone]
    assert set(INTERVAL_COLUMNS) <= set(live)
    for j, sid in enumerate(live["sid"].tolist()):
        sub = subs[sid]
        assert (live["a_lo"][j], live["a_hi"][j]) == (sub.a.lo_f, sub.a.hi_f)
        assert live["reg"][j] == 1 + sid
        for e in INTERVAL_COLUMNS:
            name, end = e.split("_")
            if isinstance(sub, IntervalJoin):
                r = getattr(sub, name)
                want = r.lo_f if end == "lo" else r.hi_f
                if abs(want) >= ENDPOINT_CLIP:  # kept clipped: comes back as unbounded
                    want = np.sign(want) * np.inf
                assert live[e][j] == want
            else:
                assert live[e][j] == 0.0
    if live["sid"].shape[0] == 0:
        return
    back = SubscriptionColumns(1)
    back.restore_columns(live)
    assert back.n == int(live["sid"][-1]) + 1
    for k in range(back.n):
        assert back.is_active(k) == (k in set(live["sid"].tolist()))
    restored = back.live_columns()
    assert restored.keys() == live.keys()
    for name in live:
        assert restored[name].tolist() == live[name].tolist(), name


def test_restoring_interval_rows_without_endpoint_columns_is_refused() -> None:
    cols = SubscriptionColumns()
    cols.add(IntervalJoin(Range(0, 0), se=Range(1, None)), 1, False)
    live = cols.live_columns()
    for name in INTERVAL_COLUMNS:
        del live[name]
    with pytest.raises(ValueError, match="endpoint columns"):
        SubscriptionColumns().restore_columns(live)


def test_bounds_and_endpoint_rows_at_the_boundaries() -> None:
    lo, hi = bounds_of([Range(), Range(1.5, None), Range(None, -2.0), Range(3.0, 3.0)])
    assert lo.tolist() == [-np.inf, 1.5, -np.inf, 3.0]
    assert hi.tolist() == [np.inf, np.inf, -2.0, 3.0]
    cols = interval_columns([SelectJoin(), IntervalJoin(Range(0, 0), ss=Range(-2**63, 2**62),
                                                       ee=Range(5, 2**62 + 2**40))])
    rows = endpoint_rows(cols, 2)
    assert rows.dtype == np.int64 and rows.shape == (2, 8)
    assert rows[0].tolist() == [0] * 8
    by_name = dict(zip(INTERVAL_COLUMNS, rows[1].tolist(), strict=True))
    assert by_name["ss_lo"] == -ENDPOINT_CLIP and by_name["ss_hi"] == ENDPOINT_CLIP
    assert by_name["ee_lo"] == 5 and by_name["ee_hi"] == ENDPOINT_CLIP
    assert by_name["se_lo"] == -ENDPOINT_CLIP and by_name["se_hi"] == ENDPOINT_CLIP  # unbounded
    assert endpoint_rows({}, 3).tolist() == [[0] * 8] * 3  # a state without the columns


def test_growth_keeps_rows_and_memory_grows_with_capacity() -> None:
    cols = SubscriptionColumns(1)
    before = cols.memory_bytes()
    for i in range(9):
        cols.add(WindowJoin(w=i), i, i % 2 == 0)
    assert cols.capacity >= 9 and cols.memory_bytes() > before
    assert cols.w[:9].tolist() == list(range(9))
    assert cols.snap[:9].tolist() == [i % 2 == 0 for i in range(9)]
    assert cols.irec.shape[0] == 0  # no interval join yet
    cols.add(IntervalJoin(Range(0, 0)), 9, False)
    assert cols.irec.shape[0] == cols.capacity
