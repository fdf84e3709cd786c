"""Smoke run of ``hotjoin bench storage`` (small sizes)."""

from __future__ import annotations

from hotjoin.ops.bench import storage


def test_storage_bench_small() -> None:
    res = storage.run(sizes=(2000,), inserts=50)
    (r,) = res["records"]
    assert r["keys"] == 2000
    assert all(r[k] > 0 for k in ("single_sorted_array_us", "sortedlist_us", "sorted_runs_us"))
