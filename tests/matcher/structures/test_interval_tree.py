"""The interval tree against brute force: the Python ``stab`` under inserts, removals and
rebuilds (gapped and not, unbounded ends), the compiled ``stab`` sized by ``stab_bound`` or run
out of room on purpose (``OVERFLOW``, nothing written past the buffer: ``matcher/core.py``'s
protocol), and its descent rule at the centres."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.core import OVERFLOW
from hotjoin.matcher.structures.interval_tree import IntervalTree, descend, stab, stab_bound

keys = st.integers(-5, 5).map(float)
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


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.booleans(), keys, st.integers(0, 4)), max_size=200),
       st.lists(st.integers(-7, 7).map(lambda x: x / 2), min_size=1, max_size=10))
def test_interval_tree_stabbing_equals_brute_force(ops, probes) -> None:
    for gapped in (False, True):
        _tree_model_test(IntervalTree(gapped=gapped), ops, probes)


def _tree_model_test(tree: IntervalTree, ops, probes) -> None:
    model: dict[int, tuple[float, float]] = {}
    for i, (ins, lo, length) in enumerate(ops):
        if ins or not model:
            hi = lo + length
            tree.insert(i, lo, hi)
            model[i] = (lo, hi)
        else:
            q = sorted(model)[int(lo) % len(model)]
            tree.remove(q)
            del model[q]
    for x in probes:
        assert sorted(tree.stab(x)) == sorted(q for q, (lo, hi) in model.items() if lo <= x <= hi)


def test_interval_tree_infinite_ends_and_rebuild() -> None:
    tree = IntervalTree()
    tree.build([0, 1, 2], [-np.inf, 0.0, 5.0], [np.inf, 1.0, np.inf])
    for i in range(3, 400):  # sorted inserts force deep paths, hence rebuilds
        tree.insert(i, float(i), float(i))
    assert tree.rebuilds > 0
    assert tree.depth() <= 2 * np.log2(len(tree) + 1) + 9
    assert sorted(tree.stab(0.5)) == [0, 1]
    assert sorted(tree.stab(6.0)) == [0, 2, 6]
