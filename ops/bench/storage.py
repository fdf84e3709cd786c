"""``hotjoin bench storage``: cost of one key insert into the candidate base-table key orders.

Measures, to choose between, sortedcontainers and numba-friendly sorted arrays:
a single sorted array (binary search + shift), ``SortedList.add``, and the chosen
:class:`~matcher.structures.sorted_runs.SortedRuns` (main run + √n delta), each at several table sizes.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from numba import njit
from sortedcontainers import SortedList

from hotjoin.matcher.structures.sorted_runs import SortedRuns, insert_sorted
from hotjoin.ops.bench.common import machine


@njit(cache=True)
def _single_array_insert(keys: np.ndarray, pays: np.ndarray, n: int, k: float, p: int) -> None:
    insert_sorted(keys, pays, n, k, p)


def run(sizes: tuple[int, ...] = (100_000, 1_000_000), inserts: int = 3000,
        seed: int = 1) -> dict[str, Any]:
    """µs per insert for each structure and size (the same random keys for all)."""
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"benchmark": "storage", "machine": machine(), "records": []}
    for n in sizes:
        base = np.sort(rng.random(n))
        new = rng.random(inserts)
        keys = np.concatenate([base, np.zeros(inserts + 1)])
        pays = np.arange(keys.shape[0], dtype=np.int64)
        _single_array_insert(keys, pays, n, 0.5, 0)  # compile outside the timing
        t = time.perf_counter()
        for i, k in enumerate(new.tolist()):
            _single_array_insert(keys, pays, n + 1 + i, k, i)
        single = (time.perf_counter() - t) / inserts * 1e6
        sl = SortedList(base.tolist())
        t = time.perf_counter()
        for k in new.tolist():
            sl.add(k)
        sorted_list = (time.perf_counter() - t) / inserts * 1e6
        runs = SortedRuns()
        runs.bulk_load(base, np.arange(n, dtype=np.int64))
        alive = np.ones(n + inserts, dtype=np.bool_)
        t = time.perf_counter()
        for i, k in enumerate(new.tolist()):
            runs.insert(k, n + i, alive)
        sorted_runs = (time.perf_counter() - t) / inserts * 1e6
        out["records"].append({"keys": n, "single_sorted_array_us": single,
                               "sortedlist_us": sorted_list, "sorted_runs_us": sorted_runs})
    return out
