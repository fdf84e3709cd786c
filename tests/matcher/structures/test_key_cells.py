"""``key_cells``: the occupancy bitmap BJ-SSI reads before searching a group's neighbours never
hides a key that passes the kernels' exact test ``key − b ∈ [lo, hi]`` (or ``b − key`` for
S tuples), whatever the rounding of ``b + lo``; and it does answer "no key" where there is
none, so the skip it allows is real."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.structures.key_cells import NO_CELLS, build_key_cells, may_hold

# values whose differences round (as the engine's IEEE tests use), large magnitudes where one
# addition loses whole units, and ordinary ones
EDGY = st.sampled_from([0.1, 0.2, 0.3, 0.7, 1 / 3, 2 / 3, 1.1, 2.2, 3.3, 1e16, 1e16 + 2.0,
                        -1e16, 2.0 ** 53, 2.0 ** 53 + 2.0, 5e-324, -0.0, 123.456])
VALUES = st.one_of(EDGY, st.floats(-1e6, 1e6, allow_nan=False, allow_subnormal=True),
                   st.floats(-1e18, 1e18, allow_nan=False))


def _query(b: float, lo: float, hi: float, dirn: int) -> tuple[float, float, float]:
    """The key-space interval ``ssi_many`` asks the bitmap for (same expressions)."""
    klo, khi = (b + lo, b + hi) if dirn > 0 else (b - hi, b - lo)
    return klo, khi, abs(b) + abs(lo) + abs(hi)


@settings(max_examples=600, deadline=None)
@given(st.lists(VALUES, min_size=1, max_size=40), VALUES, VALUES, VALUES,
       st.sampled_from([1, -1]))
def test_a_key_passing_the_exact_test_is_never_hidden(keys: list[float], b: float, x: float,
                                                      y: float, dirn: int) -> None:
    k = np.sort(np.array(keys, dtype=np.float64))
    lo, hi = min(x, y), max(x, y)
    words, params = build_key_cells(k)
    d = k - b if dirn > 0 else b - k
    if ((d >= lo) & (d <= hi)).any():
        assert may_hold(words, params, *_query(b, lo, hi, dirn))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0, 1000, allow_nan=False), min_size=2, max_size=200),
       st.floats(-100, 1100), st.floats(0, 0.05), st.sampled_from([1, -1]))
def test_an_empty_stretch_is_answered_when_far_from_every_key(keys: list[float], at: float,
                                                              width: float, dirn: int) -> None:
    """Narrow queries a few cells away from every key come back False (the filter filters),
    and a query that holds a key comes back True."""
    k = np.sort(np.array(keys, dtype=np.float64))
    words, params = build_key_cells(k)
    if words.shape[0] == 0:  # one key value, or a span too small for cells: every query
        assert may_hold(words, params, at, at + width, abs(at))  # is answered "maybe"
        return
    cell = 1.0 / params[1]
    lo, hi = at, at + width
    gap = np.min(np.abs(np.clip(k, lo, hi) - k))  # distance of the nearest key to [lo, hi]
    if gap > 3 * cell + width:
        assert not may_hold(words, params, lo, hi, abs(lo) + abs(hi))
    if ((k >= lo) & (k <= hi)).any():
        assert may_hold(words, params, lo, hi, abs(lo) + abs(hi))


def test_unusable_runs_and_queries_are_not_answered() -> None:
    """No bitmap (empty, one distinct key, non-finite keys) and unbounded, NaN or wide
    queries all fall back to the search (True)."""
    for keys in ([], [3.0, 3.0], [1.0, np.inf], [-np.inf, 1.0]):
        words, params = build_key_cells(np.array(keys, dtype=np.float64))
        assert words.shape[0] == 0 and may_hold(words, params, 7.0, 8.0, 8.0)
    assert NO_CELLS[0].shape[0] == 0
    words, params = build_key_cells(np.arange(1000, dtype=np.float64))
    assert not may_hold(words, params, 10.3, 10.6, 10.6)
    assert not may_hold(words, params, -5.0, -4.0, 5.0) and not may_hold(words, params, 2e3,
                                                                          3e3, 3e3)
    for lo, hi in ((-np.inf, 10.6), (10.3, np.inf), (np.nan, 10.6), (10.6, 10.3)):
        assert may_hold(words, params, lo, hi, 11.0)
    assert may_hold(words, params, 10.3, 500.6, 500.6)  # over MAX_QUERY_CELLS: the search
    assert may_hold(words, params, 999.0, 999.0, 999.0) and may_hold(words, params, 0.0, 0.0,
                                                                     0.0)


def test_a_key_in_the_last_cell_of_a_word() -> None:
    """The masks at both ends of a query (cell 0 and cell 63 of a 64-bit word, and a query
    within one cell) keep the key's own bit."""
    keys = np.arange(1000, dtype=np.float64)
    words, params = build_key_cells(keys)
    base, scale = params[0], params[1]
    cells = np.floor((keys - base) * scale).astype(np.int64)
    for end in (0, 63):
        k = float(keys[np.flatnonzero(cells % 64 == end)[0]])
        assert may_hold(words, params, k, k, k)
        assert may_hold(words, params, k - 0.01, k, k)
        assert may_hold(words, params, k, k + 0.01, k)
