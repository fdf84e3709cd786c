"""Unit and property tests of the engine's storage structures against plain-Python models."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.model import Event
from hotjoin.matcher.structures.gapped_pool import GappedGroupPool
from hotjoin.matcher.structures.group_pool import GroupedSortedPool
from hotjoin.matcher.structures.interval_tree import IntervalTree
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
@given(st.lists(st.tuples(st.integers(0, 4), st.booleans(), keys), max_size=300))
def test_group_pools_match_per_group_sorted_lists(ops: list[tuple[int, bool, float]]) -> None:
    _pool_model_test(GroupedSortedPool, ops)
    _pool_model_test(GappedGroupPool, ops)


def _pool_model_test(pool_class: type, ops: list[tuple[int, bool, float]]) -> None:
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


def test_base_table_insert_remove_expire_and_slot_reuse() -> None:
    t = BaseTable("S", capacity=4)
    for i in range(2000):
        t.insert(Event("S", f"s{i}", float(i % 13), 1.0, i), i + 1)
    assert len(t) == 2000
    for i in range(0, 2000, 2):
        t.remove(f"s{i}")
    dropped = t.expire_before(1000)  # odd ids below time 1000
    assert len(dropped) == 500 and len(t) == 500
    assert all(int(t.times[s]) >= 1000 for s in t.live_slots())
    assert t.event("s1") is None and t.event("s1001") == Event("S", "s1001", 1001 % 13, 1.0, 1001)
    for i in range(3000, 4000):  # reuses slots freed by merges, never a referenced one
        t.insert(Event("S", f"s{i}", 0.5, 2.0, i), i + 1)
    order = t.order.items(t.alive)
    assert len(order) == len(t) == 1500
    assert sorted(s for _, s in order) == sorted(t.live_slots().tolist())
    assert all(t.keys[s] == k for k, s in order)


def test_key_order_enabled_late_never_holds_a_reused_slot() -> None:
    """A table without a key order (no band join yet) frees slots at once; once the order is
    enabled (the first band join), freed slots again wait for a merge, so no slot the order
    still holds (dead) is handed to a new tuple. Batches and single inserts, before and
    after."""
    t = BaseTable("S", capacity=4, key_order=False)
    for i in range(300):
        t.insert(Event("S", f"s{i}", float(i % 7), 1.0, i), i + 1)
    for i in range(0, 300, 3):
        t.remove(f"s{i}")
    t.insert_many([f"b{i}" for i in range(50)], np.full(50, 2.5), np.zeros(50),
                  np.arange(50, dtype=np.int64), np.arange(400, 450, dtype=np.int64))
    t.enable_key_order()
    for step in range(400):
        if step % 3 == 0:
            live = sorted(t.slot_of)
            t.remove(live[(7 * step) % len(live)])
        else:
            t.insert(Event("S", f"n{step}", float(step % 5), 0.0, step), 1000 + step)
        order = t.order.items(t.alive)
        assert sorted(s for _, s in order) == sorted(t.live_slots().tolist()), step
        assert all(t.keys[s] == k for k, s in order), step


def test_group_pool_flushes_tombstones_and_relocations_keep_order() -> None:
    rng = np.random.default_rng(3)
    pool = GappedGroupPool(capacity=8, groups=1)
    model: dict[int, list[tuple[float, int]]] = {0: [], 1: [], 2: []}
    for g in model:
        pool.add_group(g)
    for i in range(6000):
        g = int(rng.integers(0, 3))
        if rng.random() < 0.6 or not model[g]:
            k = float(rng.integers(0, 50))
            pool.insert(g, k, i, extra=k / 2)
            model[g].append((k, i))
        else:
            victim = model[g].pop(int(rng.integers(0, len(model[g]))))
            pool.remove(g, *victim)
        if i % 500 == 0:
            pool.compact()
        if i % 97 == 0:
            for gg, items in model.items():
                got = pool.members(gg, with_aux=True)
                assert [k for k, _, _ in got] == sorted(k for k, _ in items)
                assert sorted((k, q) for k, q, _ in got) == sorted(items)
                assert all(a == k / 2 for k, _, a in got)
    assert any(pool.dead[: 3] > 0) or any(pool.dsize[: 3] > 0)
