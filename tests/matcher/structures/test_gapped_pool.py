"""``GappedGroupPool`` (per-group sorted runs with gaps, tombstones and relocations) against
per-group sorted Python lists: churn, dropped groups, compaction and the auxiliary column."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.structures.gapped_pool import GappedGroupPool

keys = st.integers(-5, 5).map(float)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.booleans(), keys), max_size=300))
def test_gapped_pool_matches_per_group_sorted_lists(ops: list[tuple[int, bool, float]]) -> None:
    model: dict[int, list[tuple[float, int]]] = {}
    pool = GappedGroupPool(capacity=8, groups=2)
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
