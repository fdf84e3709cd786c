"""The structures' compiled stabbing queries against brute force: the interval tree's ``stab``
sized by ``stab_bound`` or run out of room on purpose (``OVERFLOW``, nothing written past the
buffer: ``matcher/core.py``'s protocol), its descent rule at the centres, and the box
forest's ``stab`` / ``stab_group``."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.core import OVERFLOW
from hotjoin.matcher.structures.interval_tree import IntervalTree, descend, stab, stab_bound
from hotjoin.matcher.structures.rect_index import BoxForest, forest_arrays, stab_group
from hotjoin.matcher.structures.rect_index import stab as stab_boxes

ENDS = st.sampled_from([-np.inf, -4.0, -1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 8.0, np.inf])
RANGE = st.tuples(ENDS, ENDS).map(sorted).filter(lambda r: r[0] < r[1] or np.isfinite(r[0]))
RANGES = st.lists(RANGE, max_size=60)  # each range holds a finite point, as a Range does
POINTS = st.sampled_from([-9.0, -4.0, -1.0, 0.0, 0.25, 0.5, 1.0, 2.0, 2.5, 3.0, 8.0, 9.0])


def _tree(ranges: list[list[float]], built: bool,
          dropped: int) -> tuple[IntervalTree, dict[int, tuple[float, float]]]:
    """A tree of ``ranges`` (built balanced or inserted one by one), minus the first
    ``dropped`` of them."""
    t = IntervalTree()
    model = {q: (lo, hi) for q, (lo, hi) in enumerate(ranges)}
    if built:
        t.build(list(model), [lo for lo, _ in model.values()], [hi for _, hi in model.values()])
    else:
        for q, (lo, hi) in model.items():
            t.insert(q, lo, hi)
    for q in range(min(dropped, len(ranges))):
        t.remove(q)
        del model[q]
    return t, model


@settings(max_examples=250, deadline=None)
@given(RANGES, POINTS, st.booleans(), st.integers(0, 30))
def test_interval_tree_query_equals_brute_force(ranges: list[list[float]], x: float,
                                                built: bool, dropped: int) -> None:
    t, model = _tree(ranges, built, dropped)
    want = sorted(q for q, (lo, hi) in model.items() if lo <= x <= hi)
    arrays = t.arrays()
    bound = stab_bound(arrays, x)
    assert bound >= len(want)
    assert sorted(t.stab(x)) == want  # the Python reference agrees
    out = np.full(bound + 1, -7, dtype=np.int64)
    n = stab(arrays, x, out)
    assert sorted(out[:n].tolist()) == want and out[bound] == -7
    if want:  # one slot short: out of room, nothing written past the buffer
        short = np.full(len(want) + 1, -7, dtype=np.int64)
        assert stab(arrays, x, short[: len(want) - 1]) == OVERFLOW
        assert short[len(want) - 1:].tolist() == [-7, -7]


@given(st.floats(-5, 5), st.sampled_from([-1.0, 0.0, 1.0]))
def test_descend_keeps_the_ranges_that_hold_x(x: float, c: float) -> None:
    """Left of the centre: the lo-sorted list and the left child; right: the −hi-sorted list
    and the right child; at the centre: the lo-sorted list (all hold it) and no child."""
    use_left, nxt = descend(c, 10, 20, x)
    assert use_left == (x <= c)
    assert nxt == (10 if x < c else 20 if x > c else -1)


def test_empty_tree_and_point_at_a_centre() -> None:
    t = IntervalTree()
    out = np.empty(0, dtype=np.int64)
    assert stab_bound(t.arrays(), 1.0) == 0 and stab(t.arrays(), 1.0, out) == 0
    t.build([4, 5, 6], [0.0, 1.0, 2.0], [2.0, 3.0, 2.0])
    c = float(t.center[t.root])
    out = np.empty(stab_bound(t.arrays(), c), dtype=np.int64)
    n = stab(t.arrays(), c, out)
    assert sorted(out[:n].tolist()) == sorted(q for q, (lo, hi) in t.bounds.items()
                                              if lo <= c <= hi)


BOXES = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 3),
                           st.integers(0, 3)), max_size=80)


@settings(max_examples=150, deadline=None)
@given(BOXES, st.tuples(st.integers(0, 9), st.integers(0, 9)), st.integers(0, 20))
def test_box_forest_queries_equal_brute_force(boxes: list[tuple[int, int, int, int]],
                                              pt: tuple[int, int], added: int) -> None:
    """Static members (packed) and delta members (added one by one), in one group."""
    lo = np.array([[b[0], b[1]] for b in boxes], dtype=np.float64).reshape(-1, 2)
    hi = lo + np.array([[b[2], b[3]] for b in boxes], dtype=np.float64).reshape(-1, 2)
    f = BoxForest(2)

    def coords(qs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return lo[qs], hi[qs]

    k = max(len(boxes) - added, 0)
    f.reset_groups({0: np.arange(k)}, coords)
    for q in range(k, len(boxes)):
        f.add(0, q, coords)
    p = np.array(pt, dtype=np.float64)
    want = sorted(q for q in range(len(boxes)) if np.all(lo[q] <= p) and np.all(p <= hi[q]))
    hits, n = stab_group(forest_arrays(f), 0, p, f.stack, np.empty(1, dtype=np.int64))
    assert sorted(hits[:n].tolist()) == want
    assert sorted(f.stab_py(0, list(pt))) == want
    if want:
        assert stab_boxes(forest_arrays(f), 0, p, f.stack,
                          np.empty(len(want) - 1, dtype=np.int64)) == OVERFLOW
