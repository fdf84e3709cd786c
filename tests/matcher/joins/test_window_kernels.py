"""Window-join kernels (``matcher/joins/window_kernels.py``) called directly against a brute
force: ``count_within`` counts a sorted run's values inside a closed range, and
``window_count`` (IDENTIFY) counts a key's partners whose value lies in the subscription's other
range and whose time lies within ``w`` of the incoming tuple's, whichever of its two sorted
orders it walks."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.joins.protocol import B_HI
from hotjoin.matcher.joins.window_kernels import count_within, window_count

SMALL = st.integers(-6, 6).map(float)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(SMALL, max_size=25), pad=st.integers(0, 3), tail=st.integers(0, 3),
       lo=st.one_of(SMALL, st.just(-np.inf)), span=st.one_of(st.integers(0, 6).map(float),
                                                              st.just(np.inf)))
def test_count_within_equals_a_count_over_the_run(values: list[float], pad: int, tail: int,
                                                  lo: float, span: float) -> None:
    run = sorted(values)
    tv = np.array([-100.0] * pad + run + [100.0] * tail)
    hi = lo + span
    assert count_within(tv, pad, len(run), lo, hi) == sum(lo <= x <= hi for x in run)


@settings(max_examples=200, deadline=None)
@given(partners=st.lists(st.tuples(SMALL, st.integers(0, 12)), max_size=20),
       lo=SMALL, span=st.integers(0, 8), w=st.integers(0, 6), t=st.integers(0, 12),
       oth=st.sampled_from([2, 4]))
def test_window_count_identifies_the_partners_in_range_and_window(
        partners: list[tuple[float, int]], lo: float, span: int, w: int, t: int,
        oth: int) -> None:
    n = len(partners)
    dvals = np.array([v for v, _ in partners], dtype=np.float64)
    dtimes = np.array([tm for _, tm in partners], dtype=np.int64)
    dseqs = np.arange(1, n + 1, dtype=np.int64)
    ps = np.argsort(dvals, kind="stable").astype(np.int64)
    ts = np.argsort(dtimes, kind="stable").astype(np.int64)
    pv, tv = dvals[ps], dtimes[ts].astype(np.float64)
    rec = np.zeros((1, 8), dtype=np.float64)
    rec[0, 2:6] = -np.inf, np.inf, -np.inf, np.inf
    rec[0, B_HI] = float(w)
    rec[0, oth], rec[0, oth + 1] = lo, lo + span
    got = window_count(0, pv, ps, 0, n, tv, ts, 0, n, dtimes, dvals, dseqs, rec, oth, t,
                       n + 1, True)
    want = sum(lo <= v <= lo + span and abs(t - tm) <= w for v, tm in partners)
    assert got == want
