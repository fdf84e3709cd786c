"""``GroupedSortedPool`` (per-group sorted runs in one flat pool) against per-group sorted
Python lists: inserts and removals with groups added and dropped, bulk loads (``load_group``,
``load_groups``) followed by inserts, and compaction."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.structures.group_pool import GroupedSortedPool

keys = st.integers(-5, 5).map(float)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.booleans(), keys), max_size=300))
def test_group_pool_matches_per_group_sorted_lists(ops: list[tuple[int, bool, float]]) -> None:
    pool_model_test(GroupedSortedPool, ops)


def pool_model_test(pool_class: type, ops: list[tuple[int, bool, float]]) -> None:
    """Drive ``pool_class`` and a dict of per-group lists with ``ops``; compare after each."""
    pool = pool_class(capacity=8, groups=2)
    model: dict[int, list[tuple[float, int]]] = {}
    for i, (g, ins, k) in enumerate(ops):
        if g not in model:
            pool.add_group(g)
            model[g] = []
        if ins or not model[g]:
            pool.insert(g, k, i)
            model[g].append((k, i))
        else:
            victim = model[g][int(k) % len(model[g])]
            model[g].remove(victim)
            pool.remove(g, *victim)
        if i % 50 == 49 and len(model) > 1:
            drop = min(model)
            pool.drop_group(drop)
            del model[drop]
        for gg, items in model.items():
            assert [k for k, _ in pool.members(gg)] == sorted(k for k, _ in items)
            assert sorted(pool.members(gg)) == sorted(items)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.integers(0, 20), st.lists(keys, max_size=12), max_size=6),
       st.lists(st.tuples(st.integers(0, 20), keys), max_size=30))
def test_bulk_loads_then_inserts_and_compaction_keep_each_group(
        groups: dict[int, list[float]], later: list[tuple[int, float]]) -> None:
    pool = GroupedSortedPool(capacity=4, groups=2)
    model: dict[int, list[tuple[float, int]]] = {}
    ident = 0
    gids = sorted(groups)
    runs = [sorted(groups[g]) for g in gids]
    ids = []
    for g, run in zip(gids, runs, strict=True):
        model[g] = [(k, ident + i) for i, k in enumerate(run)]
        ids += [ident + i for i in range(len(run))]
        ident += len(run)
    half = len(gids) // 2  # half by load_groups (one reservation), half group by group
    first = sum(len(r) for r in runs[:half])
    pool.load_groups(np.array(gids[:half], dtype=np.int64),
                     np.array([len(r) for r in runs[:half]], dtype=np.int64),
                     np.array([k for r in runs[:half] for k in r], dtype=np.float64),
                     np.array(ids[:first], dtype=np.int64))
    for g, run in zip(gids[half:], runs[half:], strict=True):
        pool.add_group(g)
        pool.load_group(g, np.array(run, dtype=np.float64),
                        np.array([i for _, i in model[g]], dtype=np.int64))
    for g, k in later:
        if g not in model:
            pool.add_group(g)
            model[g] = []
        pool.insert(g, k, ident)
        model[g].append((k, ident))
        ident += 1
    for step in range(2):
        if step:
            pool.compact()
        for g, items in model.items():
            assert [k for k, _ in pool.members(g)] == sorted(k for k, _ in items)
            assert sorted(pool.members(g)) == sorted(items)
    for g in model:  # removing what a group does not hold is a KeyError; nothing changes
        with pytest.raises(KeyError):
            pool.remove(g, 99.0, -5)
        assert sorted(pool.members(g)) == sorted(model[g])
    assert pool.memory_bytes() > 0
