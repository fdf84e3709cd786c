"""``SortedRuns`` (a sorted main run plus a sorted delta, tombstones by the caller's ``alive``
column) against a sorted Python list: one at a time, in batches (``insert_many``) after a
``bulk_load``, and its merge policy."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.structures.sorted_runs import SortedRuns

keys = st.integers(-5, 5).map(float)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.booleans(), keys), max_size=400))
def test_sorted_runs_match_a_sorted_list(ops: list[tuple[bool, float]]) -> None:
    runs = SortedRuns()
    alive = np.zeros(len(ops) + 1, dtype=np.bool_)
    model: dict[int, float] = {}
    for i, (ins, k) in enumerate(ops):
        if ins or not model:
            alive[i] = True
            model[i] = k
            runs.insert(k, i, alive)
        else:
            p = sorted(model)[int(k) % len(model)]
            del model[p]
            alive[p] = False
            runs.mark_dead(alive)
        got = runs.items(alive)
        assert [k for k, _ in got] == sorted(model.values())
        assert sorted(p for _, p in got) == sorted(model)
        mk, _, dk, _ = runs.runs()
        assert np.all(np.diff(mk) >= 0) and np.all(np.diff(dk) >= 0)


def test_sorted_runs_merge_keeps_only_live_and_bounds_delta() -> None:
    runs = SortedRuns()
    alive = np.ones(5000, dtype=np.bool_)
    for i in range(5000):
        runs.insert(float(i % 97), i, alive)
    assert runs.merges > 0
    assert runs.n_delta <= runs.delta_limit()
    alive[::2] = False
    runs.merge(alive)
    assert len(runs) == 2500


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(keys, max_size=40), max_size=12), st.lists(keys, max_size=30))
def test_insert_many_and_bulk_load_match_a_sorted_list(batches: list[list[float]],
                                                       loaded: list[float]) -> None:
    runs = SortedRuns()
    n = len(loaded) + sum(map(len, batches))
    alive = np.ones(n + 1, dtype=np.bool_)
    runs.bulk_load(np.array(loaded, dtype=np.float64), np.arange(len(loaded), dtype=np.int64))
    model = list(zip(loaded, range(len(loaded)), strict=True))
    nxt = len(loaded)
    for b in batches:
        pays = np.arange(nxt, nxt + len(b), dtype=np.int64)
        runs.insert_many(np.array(b, dtype=np.float64), pays, alive)
        model += list(zip(b, pays.tolist(), strict=True))
        nxt += len(b)
        got = runs.items(alive)
        assert [k for k, _ in got] == sorted(k for k, _ in model)
        assert sorted(p for _, p in got) == sorted(p for _, p in model)
        mk, _, dk, _ = runs.runs()
        assert np.all(np.diff(mk) >= 0) and np.all(np.diff(dk) >= 0)
