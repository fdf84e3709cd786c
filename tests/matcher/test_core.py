"""``matcher.core``'s compiled primitives against plain-Python oracles (``bisect``, list
operations), on purpose at the boundaries: empty runs, sub-ranges, duplicates, ±inf keys,
hints outside the run."""

from __future__ import annotations

import bisect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher import core
from hotjoin.matcher.structures.sorted_runs import SAMPLE_EVERY

KEYS = st.lists(st.sampled_from([-np.inf, -3.0, -1.0, 0.0, 0.5, 1.0, 2.0, 7.0, np.inf]),
                max_size=40).map(sorted)
PROBES = st.sampled_from([-np.inf, -5.0, -3.0, -1.0, 0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 7.0, 9.0,
                          np.inf])


def _sub_range(data: st.DataObject, n: int) -> tuple[int, int]:
    lo = data.draw(st.integers(0, n))
    return lo, data.draw(st.integers(lo, n))


@settings(max_examples=400, deadline=None)
@given(KEYS, PROBES, st.data())
def test_bounds_equal_bisect_on_any_sub_range(keys: list[float], x: float,
                                              data: st.DataObject) -> None:
    a = np.array(keys, dtype=np.float64)
    lo, hi = _sub_range(data, len(keys))
    assert core.lower_bound(a, lo, hi, x) == bisect.bisect_left(keys, x, lo, hi)
    assert core.upper_bound(a, lo, hi, x) == bisect.bisect_right(keys, x, lo, hi)
    x1 = data.draw(PROBES)
    want = sum(1 for k in keys[lo:hi] if x <= k <= x1)
    assert core.count_between(a, lo, hi, x, x1) == want


@settings(max_examples=400, deadline=None)
@given(KEYS, PROBES, st.integers(-5, 50), st.data())
def test_galloping_searches_equal_the_plain_ones_from_any_hint(keys: list[float], x: float,
                                                               hint: int,
                                                               data: st.DataObject) -> None:
    """Hints below, inside and above the run (clamped), at the answer and far from it."""
    a = np.array(keys, dtype=np.float64)
    lo, hi = _sub_range(data, len(keys))
    assert core.gallop_lower(a, lo, hi, x, hint) == bisect.bisect_left(keys, x, lo, hi)
    assert core.gallop_upper(a, lo, hi, x, hint) == bisect.bisect_right(keys, x, lo, hi)


def test_searches_on_int_columns_and_empty_runs() -> None:
    a = np.array([1, 3, 3, 8], dtype=np.int64)
    assert core.lower_bound(a, 0, 4, 3) == 1 and core.upper_bound(a, 0, 4, 3) == 3
    assert core.lower_bound(a, 2, 2, 3) == 2 and core.upper_bound(a, 4, 4, 0) == 4
    assert core.gallop_lower(a, 0, 4, 8, 0) == 3 and core.gallop_upper(a, 0, 4, 0, 4) == 0
    assert core.count_between(a, 0, 0, 0, 9) == 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 3), st.integers(0, 99)), max_size=30),
       st.integers(0, 5))
def test_sorted_insert_is_stable_insertion_after_equal_keys(items: list[tuple[int, int]],
                                                            lo: int) -> None:
    """One at a time into ``keys[lo:…]`` (a run that starts inside the arrays): the same
    order as ``bisect.insort_right`` on the keys, equal keys in arrival order."""
    cap = lo + len(items) + 1
    keys = np.full(cap, 99.0)
    pays = np.full(cap, -1, dtype=np.int64)
    model: list[tuple[float, int]] = []
    for n, (k, p) in enumerate(items):
        pos = core.sorted_insert(keys, pays, lo, lo + n, float(k), p)
        at = bisect.bisect_right([m[0] for m in model], float(k))
        model.insert(at, (float(k), p))
        assert pos == lo + at
    assert list(zip(keys[lo:lo + len(items)].tolist(), pays[lo:lo + len(items)].tolist(),
                    strict=True)) == model
    assert keys[:lo].tolist() == [99.0] * lo  # nothing before the run was touched


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-3, 3), max_size=20), st.lists(st.integers(-3, 3), max_size=20))
def test_sorted_insert_many_equals_one_at_a_time(old: list[int], new: list[int]) -> None:
    old_k = np.array(sorted(old), dtype=np.float64)
    new_k = np.array(sorted(new), dtype=np.float64)
    n, m = len(old), len(new)
    one_k, one_p = np.zeros(n + m + 1), np.zeros(n + m + 1, dtype=np.int64)
    many_k, many_p = one_k.copy(), one_p.copy()
    one_k[:n] = many_k[:n] = old_k
    one_p[:n] = many_p[:n] = np.arange(n)
    for j in range(m):
        core.sorted_insert(one_k, one_p, 0, n + j, new_k[j], 100 + j)
    core.sorted_insert_many(many_k, many_p, n, new_k, 100 + np.arange(m))
    assert many_k[:n + m].tolist() == one_k[:n + m].tolist()
    assert many_p[:n + m].tolist() == one_p[:n + m].tolist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=20), st.data())
def test_insert_at_and_remove_at_are_list_insert_and_delete(vals: list[int],
                                                             data: st.DataObject) -> None:
    a = np.array([*vals, -1], dtype=np.int64)
    hi = len(vals)
    pos = data.draw(st.integers(0, hi))
    core.insert_at(a, pos, hi, 42)
    model = list(vals)
    model.insert(pos, 42)
    assert a.tolist() == model
    pos = data.draw(st.integers(0, hi))
    core.remove_at(a, pos, hi + 1)
    del model[pos]
    assert a[:hi].tolist() == model


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 6)), max_size=25), st.data())
def test_find_entry_equals_a_linear_search(items: list[tuple[int, int]],
                                           data: st.DataObject) -> None:
    items = sorted(items, key=lambda t: t[0])
    keys = np.array([float(k) for k, _ in items])
    ids = np.array([i for _, i in items], dtype=np.int64)
    lo, hi = _sub_range(data, len(items))
    key, ident = float(data.draw(st.integers(-1, 5))), data.draw(st.integers(0, 6))
    want = next((j for j in range(lo, hi) if items[j] == (key, ident)), -1)
    assert core.find_entry(keys, ids, lo, hi, key, ident) == want


@pytest.mark.parametrize("reg, snap, xseq, dseq, owed", [
    (4, False, 5, 3, True),    # registered before the incoming tuple
    (5, False, 5, 3, False),   # registered at the pair's sequence number: not owed
    (5, False, 3, 6, True),    # the stored tuple is the later one
    (6, False, 3, 6, False),
    (9, True, 3, 6, True),     # snapshot: every pair
])
def test_owed_at_the_boundary(reg: int, snap: bool, xseq: int, dseq: int, owed: bool) -> None:
    dseqs = np.array([dseq], dtype=np.int64)
    assert core.owed(0, 0, xseq, dseqs, np.array([reg]), np.array([snap])) == owed
    rec = np.zeros((1, 8))
    rec[0, core.REG], rec[0, core.SNAP] = reg, float(snap)
    assert core.owed_rec(rec, 0, 0, xseq, dseqs) == owed


def test_rows_of_event_tags_only_its_rows_and_counts_only_in_count() -> None:
    out_q = np.array([3, 1, 2, 0], dtype=np.int64)
    acc = np.array([0, 10, 20, 30], dtype=np.int64)
    for mode in (core.IDENTIFY, core.COUNT, core.PAIRS):
        out_e = np.full(4, -1, dtype=np.int64)
        out_x = np.full(4, -1, dtype=np.int64)
        core.rows_of_event(5, 1, 3, mode, acc, out_e, out_q, out_x)
        assert out_e.tolist() == [-1, 5, 5, -1]
        assert out_x.tolist() == ([-1, 10, 20, -1] if mode == core.COUNT else [-1] * 4)


def test_put_writes_pairs_rows_until_full_then_says_overflow() -> None:
    q = np.full(3, -1, dtype=np.int64)
    s = np.full(3, -1, dtype=np.int64)
    n = 0
    for i in range(3):
        n = core.put(q, s, n, i, -i)
    assert n == 3 and q.tolist() == [0, 1, 2] and s.tolist() == [0, -1, -2]
    assert core.put(q, s, n, 9, 9) == core.OVERFLOW  # full: nothing written
    assert q.tolist() == [0, 1, 2] and s.tolist() == [0, -1, -2]
    assert core.put(np.empty(0, np.int64), np.empty(0, np.int64), 0, 1, 1) == core.OVERFLOW


def test_record_outputs_once_per_stamp_and_sums_counts() -> None:
    mark = np.zeros(4, dtype=np.int64)
    acc = np.zeros(4, dtype=np.int64)
    q, s, n = np.full(4, -1, dtype=np.int64), np.full(4, -1, dtype=np.int64), 0
    for qq, cnt in [(2, 1), (3, 2), (2, 4), (1, 0)]:
        n = core.record(qq, cnt, core.COUNT, mark, 7, acc, q, s, n)
    assert q[:n].tolist() == [2, 3] and acc.tolist() == [0, 0, 5, 2]
    assert s[:n].tolist() == [0, 0]
    n = core.record(1, 3, core.PAIRS, mark, 7, acc, q, s, n)  # PAIRS: nothing
    assert n == 2
    n = core.record(2, 1, core.COUNT, mark, 8, acc, q, s, n)  # a new stamp: output again
    assert q[:n].tolist() == [2, 3, 2] and acc[2] == 1
    n = core.emit_marked(0, 0, core.COUNT, acc, q, s, n)  # no pair: no row
    assert n == 3
    n = core.emit_marked(0, 6, core.IDENTIFY, acc, q, s, n)
    assert q[:n].tolist() == [2, 3, 2, 0] and acc[0] == 6


def test_modes_and_record_columns_agree_with_the_join_protocol() -> None:
    from hotjoin.matcher.joins import protocol

    for name in ("IDENTIFY", "COUNT", "PAIRS", "OVERFLOW", "B_LO", "B_HI", "A_LO", "A_HI",
                 "C_LO", "C_HI", "REG", "SNAP"):
        assert getattr(core, name) == getattr(protocol, name), name


# -- searches on a key difference ------------------------------------------------------------------


def _plain_diff_lower_bound(keys: np.ndarray, b: float, dirn: int, x: float) -> int:
    n = keys.shape[0]
    d = [(keys[j] - b) if dirn > 0 else (b - keys[n - 1 - j]) for j in range(n)]
    return next((j for j in range(n) if d[j] >= x), n)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-40, 40), min_size=0, max_size=300), st.integers(-50, 50),
       st.sampled_from([-1, 1]), st.integers(-90, 90).map(lambda x: x / 2))
def test_diff_lower_bound_with_and_without_sample_equals_a_linear_scan(
        keys: list[int], b: int, dirn: int, x: float) -> None:
    k = np.sort(np.array(keys, dtype=np.float64)) / 4
    samp = np.ascontiguousarray(k[::SAMPLE_EVERY])
    want = _plain_diff_lower_bound(k, float(b) / 3, dirn, x)
    assert core.diff_lower_bound(k, samp, SAMPLE_EVERY, float(b) / 3, dirn, x) == want
    assert core.diff_lower_bound(k, np.empty(0), SAMPLE_EVERY, float(b) / 3, dirn, x) == want
    n = k.shape[0]
    for j in range(n):  # the difference and slot of position j, read backwards for S tuples
        kj = k[j] if dirn > 0 else k[n - 1 - j]
        assert core.diff_at(k, n, j, float(b), dirn) == (kj - b if dirn > 0 else b - kj)
        assert core.slot_at(np.arange(n), n, j, dirn) == (j if dirn > 0 else n - 1 - j)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-20, 20), max_size=60), st.integers(-25, 25),
       st.sampled_from([1, -1]), st.floats(-30, 30), st.integers(-2, 70))
def test_diff_gallop_equals_diff_lower_bound(keys: list[int], b: int, dirn: int, x: float,
                                   start: int) -> None:
    k = np.sort(np.array(keys, dtype=np.float64))
    samp = np.empty(0)
    want = core.diff_lower_bound(k, samp, 16, float(b), dirn, x)
    assert core.diff_gallop(k, samp, 16, float(b), dirn, x, start) == want


@settings(max_examples=400, deadline=None)
@given(st.lists(st.integers(-20, 20), max_size=90), st.integers(-25, 25),
       st.sampled_from([1, -1]), st.floats(-50, 50), st.integers(-1, 12),
       st.sampled_from([1, 2, 4, 16]))
def test_diff_locate_equals_diff_lower_bound_from_any_hint(keys: list[int], b: int, dirn: int, x: float,
                                                 hint: int, step: int) -> None:
    """The sampled search (BJ-SSI's per-group search) lands where the plain search does, from
    a hint below, at or above the answer, and past the sample's end."""
    k = np.sort(np.array(keys, dtype=np.float64))
    samp = np.ascontiguousarray(k[::step])
    want = core.diff_lower_bound(k, np.empty(0), step, float(b), dirn, x)
    if samp.shape[0] > 1:
        pos, h = core.diff_locate(k, samp, step, float(b), dirn, x, hint)
        assert pos == want
        # the returned hint is the exact sample rank: searching from it again costs no step
        assert core.diff_locate(k, samp, step, float(b), dirn, x, h) == (want, h)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-20, 20), min_size=1, max_size=60), st.integers(-25, 25),
       st.sampled_from([1, -1]), st.floats(-30, 30), st.data())
def test_diff_gallop_back_equals_diff_lower_bound(keys: list[int], b: int, dirn: int, x: float,
                                        data: st.DataObject) -> None:
    """The backward search (BJ-SSI's fast COUNT of a band's lower end) from any position whose
    ``d`` reaches ``x``."""
    k = np.sort(np.array(keys, dtype=np.float64))
    want = core.diff_lower_bound(k, np.empty(0), 16, float(b), dirn, x)
    if want < k.shape[0]:
        start = data.draw(st.integers(want, k.shape[0] - 1))
        assert core.diff_gallop_back(k, float(b), dirn, x, start) == want


# -- the one numba configuration -------------------------------------------------------------------

def test_helpers_live_in_core_only() -> None:
    """The shared helpers are core's own objects wherever a kind's kernels use them, and no
    kind's kernel module defines a search or an output append of its own under core's name."""
    from hotjoin.matcher.joins import (
        band_kernels,
        interval_kernels,
        select_kernels,
        window_kernels,
    )

    names = ("owed", "owed_rec", "put", "rows_of_event", "record", "emit_marked",
             "lower_bound", "upper_bound", "diff_at", "slot_at", "diff_lower_bound",
             "diff_gallop", "diff_gallop_back", "diff_locate", "sample_rank")
    used = 0
    for mod in (band_kernels, interval_kernels, select_kernels, window_kernels):
        for name in names:
            if hasattr(mod, name):
                used += 1
                assert getattr(mod, name) is getattr(core, name), (mod.__name__, name)
        for gone in ("gallop", "locate", "gallop_back", "_d", "_pay", "push", "with_room",
                     "rows_grown", "grown"):
            assert not hasattr(mod, gone), (mod.__name__, gone)
    assert used >= 10
