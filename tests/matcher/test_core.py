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


def test_growing_appends_keep_every_row() -> None:
    q = np.empty(0, dtype=np.int64)
    s = np.empty(0, dtype=np.int64)
    n = 0
    for i in range(100):
        q, s, n = core.push(q, s, n, i, -i)
    assert n == 100 and q[:n].tolist() == list(range(100)) and s[:n].tolist() == [-i for i in
                                                                                   range(100)]
    q2, s2 = core.with_room(q, s, 1000)
    assert q2.shape[0] >= 1000 and q2[:n].tolist() == q[:n].tolist()
    assert s2[:n].tolist() == s[:n].tolist()
    e = core.rows_grown(np.arange(3), q2, 3)
    assert e.shape[0] == q2.shape[0] and e[:3].tolist() == [0, 1, 2]
    same = np.arange(5)
    assert core.rows_grown(same, np.arange(5), 2) is same


def test_record_outputs_once_per_stamp_and_sums_counts() -> None:
    mark = np.zeros(4, dtype=np.int64)
    acc = np.zeros(4, dtype=np.int64)
    q, s, n = np.empty(1, dtype=np.int64), np.empty(1, dtype=np.int64), 0
    for qq, cnt in [(2, 1), (3, 2), (2, 4), (1, 0)]:
        q, s, n = core.record(qq, cnt, core.COUNT, mark, 7, acc, q, s, n)
    assert q[:n].tolist() == [2, 3] and acc.tolist() == [0, 0, 5, 2]
    q, s, n = core.record(1, 3, core.PAIRS, mark, 7, acc, q, s, n)  # PAIRS: nothing
    assert n == 2
    q, s, n = core.emit_marked(0, 0, core.COUNT, acc, q, s, n)  # no pair: no row
    q, s, n = core.emit_marked(0, 6, core.IDENTIFY, acc, q, s, n)
    assert q[:n].tolist() == [2, 3, 0] and acc[0] == 6


def test_modes_and_record_columns_agree_with_the_join_protocol() -> None:
    from hotjoin.matcher.joins import protocol

    for name in ("IDENTIFY", "COUNT", "PAIRS", "OVERFLOW", "B_LO", "B_HI", "A_LO", "A_HI",
                 "C_LO", "C_HI", "REG", "SNAP"):
        assert getattr(core, name) == getattr(protocol, name), name


# -- the one numba configuration -------------------------------------------------------------------

def test_helpers_live_in_core_only() -> None:
    """The shared helpers are core's own objects wherever a kind's kernels use them."""
    from hotjoin.matcher.joins import band_kernels, select_kernels, window_kernels

    for mod in (band_kernels, select_kernels, window_kernels):
        for name in ("owed", "owed_rec", "push", "rows_of_event", "record", "lower_bound",
                     "upper_bound", "rows_grown"):
            if hasattr(mod, name) and not (mod is band_kernels and name == "lower_bound"):
                assert getattr(mod, name) is getattr(core, name), (mod.__name__, name)
