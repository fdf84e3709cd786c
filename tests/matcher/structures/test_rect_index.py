"""The box forest (``rect_index``): its compiled ``stab`` / ``stab_group`` and the Python
``stab_py`` against brute force, for packed members and members added one by one, and
``OVERFLOW`` when the output buffer is one slot short (``matcher/core.py``'s protocol), and
under churn over several groups (members joining and leaving, re-packs, ``settle``, dropped
groups)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.core import OVERFLOW
from hotjoin.matcher.structures.rect_index import BoxForest, forest_arrays, stab_group
from hotjoin.matcher.structures.rect_index import stab as stab_boxes

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


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "remove", "repack", "settle", "drop"]),
                          st.integers(0, 3), st.integers(0, 59)), max_size=120),
       st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=6))
def test_churn_over_groups_equals_brute_force(ops: list[tuple[str, int, int]],
                                              points: list[tuple[int, int]]) -> None:
    """Members join and leave groups (delta and static members), groups are re-packed,
    settled and dropped; every group's stab answers a filter over its members."""
    rng = np.random.default_rng(len(ops))
    lo = rng.integers(0, 8, (60, 2)).astype(np.float64)
    hi = lo + rng.integers(0, 4, (60, 2))

    def coords(qs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return lo[qs], hi[qs]

    f = BoxForest(2)
    f.reset_groups({0: np.arange(10), 1: np.arange(10, 20)}, coords)
    model: dict[int, set[int]] = {0: set(range(10)), 1: set(range(10, 20))}
    free = set(range(20, 60))
    for op, g, q in ops:
        if op == "add" and free:
            q = min(free, key=lambda x: (x - q) % 60)
            if g not in model:
                f.add_group(g)
                model[g] = set()
            f.add(g, q, coords)
            model[g].add(q)
            free.discard(q)
        elif op == "remove" and model.get(g):
            q = sorted(model[g])[q % len(model[g])]
            f.remove(g, q)
            model[g].discard(q)
            free.add(q)
        elif op == "repack" and g in model:
            f.repack(g)
        elif op == "settle":
            f.settle()
        elif op == "drop" and g in model and not model[g]:
            f.drop_group(g)
            del model[g]
    for g, members in model.items():
        for pt in points:
            p = np.array(pt, dtype=np.float64)
            want = sorted(q for q in members if np.all(lo[q] <= p) and np.all(p <= hi[q]))
            assert sorted(f.stab_py(g, list(p))) == want
    assert f.memory_bytes() > 0
