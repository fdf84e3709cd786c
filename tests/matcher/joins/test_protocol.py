"""The join kernels' shared protocol (``joins/protocol.py``): ``BatchRows`` ordering
(``order_by_event`` is a stable argsort by event; rows before ``start`` are kept), growing,
``take`` and ``count_by_event``; ``MatchBuffer.run`` reruns an overflowing kernel on grown
buffers; ``each_event`` and ``run_kernel_many`` against a per-event reference; ``DenseIds``
against a Python set."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.joins import protocol as P
from hotjoin.matcher.joins.protocol import (
    COUNT,
    OVERFLOW,
    PAIRS,
    TAKE_FRESH,
    At,
    BatchRows,
    DenseIds,
    MatchBuffer,
    RowBuffers,
    each_event,
    order_by_event,
    run_kernel_many,
)


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 9), st.integers(-5, 50), st.integers(-5, 50)),
                     max_size=60))
def test_counting_sort_is_a_stable_argsort(rows: list[tuple[int, int, int]]) -> None:
    e = np.array([r[0] for r in rows], dtype=np.int64)
    q = np.array([r[1] for r in rows], dtype=np.int64)
    x = np.array([r[2] for r in rows], dtype=np.int64)
    o = np.argsort(e, kind="stable")
    want = (e[o].tolist(), q[o].tolist(), x[o].tolist())
    order_by_event(e, q, x)
    assert (e.tolist(), q.tolist(), x.tolist()) == want


@settings(max_examples=200, deadline=None)
@given(head=st.integers(0, 5), blocks=st.lists(st.lists(st.integers(0, 30), max_size=20),
                                                 max_size=12), shuffled=st.booleans())
def test_sort_by_event_is_stable_for_runs_in_order_or_not(head: int, blocks: list[list[int]],
                                                          shuffled: bool) -> None:
    """Rows written as runs in event order (one per router member) or in no order at all end,
    from ``start``, in stable event order; the rows before it and the buffer's capacity are
    kept."""
    rows = BatchRows()
    for i in range(head):
        rows.append(100 + i, np.array([i]), np.array([-i]))
    start = rows.n
    written = []
    for b, events in enumerate(blocks):
        for k, ev in enumerate(events if shuffled else sorted(events)):
            rows.append(ev, np.array([b * 1000 + k]), np.array([b]))
            written.append((ev, b * 1000 + k, b))
    cap = rows.e.shape[0]
    rows.sort_by_event(start)
    assert rows.e.shape[0] == rows.q.shape[0] == rows.x.shape[0] == cap
    assert rows.e[:start].tolist() == [100 + i for i in range(head)]
    assert rows.q[:start].tolist() == list(range(head))
    got = list(zip(rows.e[start:rows.n].tolist(), rows.q[start:rows.n].tolist(),
                   rows.x[start:rows.n].tolist(), strict=True))
    assert got == sorted(written, key=lambda r: r[0])


@settings(max_examples=100, deadline=None)
@given(head=st.integers(0, 5), blocks=st.lists(st.lists(st.integers(0, 30), max_size=20),
                                                 max_size=4))
def test_rows_after_start_are_ordered_and_rows_before_kept(head: int,
                                                           blocks: list[list[int]]) -> None:
    """Rows ``start …`` of a buffer holding earlier rows: each member's rows come sorted by
    event, one member after the other; only the rows from ``start`` are reordered."""
    rows = BatchRows()
    for i in range(head):
        rows.append(100 + i, np.array([i]), np.array([-i]))
    start = rows.n
    written = []
    for b, events in enumerate(blocks):
        for k, ev in enumerate(sorted(events)):
            rows.append(ev, np.array([b * 1000 + k]), np.array([b]))
            written.append((ev, b * 1000 + k, b))
    rows.sort_by_event(start)
    assert rows.e[:start].tolist() == [100 + i for i in range(head)]
    got = list(zip(rows.e[start:rows.n].tolist(), rows.q[start:rows.n].tolist(),
                   rows.x[start:rows.n].tolist(), strict=True))
    assert got == sorted(written, key=lambda r: r[0])  # sorted() is stable


@settings(max_examples=300, deadline=None)
@given(head=st.integers(0, 5), blocks=st.lists(st.lists(st.integers(0, 30), max_size=20),
                                                 max_size=6), again=st.booleans())
def test_merge_runs_is_a_stable_sort_of_runs_in_event_order(head: int, blocks: list[list[int]],
                                                             again: bool) -> None:
    """Runs in event order (a router's timed tuples, then each member, empty ones too) merged
    at their cuts equal a stable sort by event; rows before ``start`` stay; a second buffer
    reuses the first run's buffer once it has grown (``again``: two batches)."""
    rows = BatchRows()
    for _ in range(2 if again else 1):
        rows.n = 0
        for i in range(head):
            rows.append(100 + i, np.array([i]), np.array([-i]))
        start = rows.n
        written, cuts = [], []
        for b, events in enumerate(blocks):
            cuts.append(rows.n)
            for k, ev in enumerate(sorted(events)):
                rows.append(ev, np.array([b * 1000 + k]), np.array([b]))
                written.append((ev, b * 1000 + k, b))
        rows.merge_runs(start, cuts)
        assert rows.e[:start].tolist() == [100 + i for i in range(head)]
        assert rows.q[:start].tolist() == list(range(head))
        got = list(zip(rows.e[start:rows.n].tolist(), rows.q[start:rows.n].tolist(),
                       rows.x[start:rows.n].tolist(), strict=True))
        assert got == sorted(written, key=lambda r: r[0])


@pytest.mark.parametrize(("e", "cut"), [([0], 1), ([0, 0], 1), ([1, 0], 1), ([2, 2, 1, 1], 2),
                                        ([5], 0), ([3, 4], 0)])
def test_merge_two_runs_at_the_boundaries(e: list[int], cut: int) -> None:
    """One row, equal events across the cut (the first run's rows first), a run of nothing."""
    ea = np.array(e, dtype=np.int64)
    q = np.arange(len(e), dtype=np.int64)
    o = np.argsort(ea, kind="stable")
    want = (ea[o].tolist(), q[o].tolist())
    P.merge_two_runs(ea, q, q * 10, cut, np.empty((3, max(cut, 1)), dtype=np.int64))
    assert (ea.tolist(), q.tolist()) == want


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 99), max_size=300), max_size=8), st.integers(0, 12))
def test_rows_grow_and_take_hands_back_what_was_appended(blocks: list[list[int]],
                                                          n_events: int) -> None:
    rows = BatchRows()
    want_e: list[int] = []
    want_q: list[int] = []
    for j, qs in enumerate(blocks):
        q = np.array(qs, dtype=np.int64)
        rows.append(j, q, q * 2)
        want_e += [j] * len(qs)
        want_q += qs
    assert rows.n == len(want_e) and rows.e.shape[0] >= rows.n
    counts = np.bincount(np.array(want_e, dtype=np.int64), minlength=max(n_events, len(blocks)))
    e, q, x = rows.take()
    assert rows.n == 0  # emptied
    assert e.tolist() == want_e and q.tolist() == want_q and x.tolist() == [2 * v for v in want_q]
    for j, qs in enumerate(blocks):  # refill: count_by_event empties too, without copying
        rows.append(j, np.array(qs, dtype=np.int64), np.zeros(len(qs), dtype=np.int64))
    arrays = rows.e
    got = rows.count_by_event(max(n_events, len(blocks)))
    assert got.tolist() == counts.tolist() and rows.n == 0 and rows.e is arrays


def test_take_hands_over_a_full_buffer_and_copies_a_small_one() -> None:
    rows = BatchRows()
    rows.append(0, np.arange(10), np.arange(10))
    before = rows.e
    e, _, _ = rows.take()
    assert rows.e is before and not np.shares_memory(e, before)  # few rows: copied out
    big = np.arange(TAKE_FRESH)
    rows.append(1, big, big)
    before = rows.e
    e, q, _ = rows.take()
    assert np.shares_memory(e, before) and rows.e is not before  # handed over, fresh arrays
    assert rows.e.shape[0] == before.shape[0] and q.tolist() == big.tolist()


def test_reserve_keeps_the_rows_and_grow_doubles() -> None:
    rows = BatchRows()
    rows.append(3, np.array([7, 8]), np.array([1, 2]))
    cap = rows.e.shape[0]
    rows.grow()
    assert rows.e.shape[0] == 2 * cap
    rows.reserve(5 * cap)
    assert rows.e.shape[0] >= 2 + 5 * cap
    assert rows.e[:2].tolist() == [3, 3] and rows.q[:2].tolist() == [7, 8]


def test_grow_doubles_an_empty_buffer() -> None:
    rows = BatchRows()
    cap = rows.e.shape[0]
    rows.grow()
    assert rows.e.shape[0] == 2 * cap


def test_order_by_event_of_nothing_and_of_one_event() -> None:
    e = np.empty(0, dtype=np.int64)
    order_by_event(e, e.copy(), e.copy())
    e, q, x = np.zeros(3, dtype=np.int64), np.array([3, 1, 2]), np.array([9, 8, 7])
    order_by_event(e, q, x)
    assert q.tolist() == [3, 1, 2] and x.tolist() == [9, 8, 7]  # stable


def _pairs_kernel(want: int) -> Any:
    """A PAIRS kernel writing ``want`` pairs ``(i, 10 i)``, or ``OVERFLOW`` if they do not fit
    (as a real PAIRS kernel: nothing but its output, so a rerun is exact)."""
    def kernel(out_q: np.ndarray, out_s: np.ndarray, n: int) -> int:
        if n + want > out_q.shape[0]:
            return OVERFLOW
        out_q[n: n + want] = np.arange(want)
        out_s[n: n + want] = np.arange(want) * 10
        return n + want
    return kernel


@pytest.mark.parametrize("want", [0, 1, 4095, 4096, 4097, 20_000])
def test_match_buffer_reruns_an_overflowing_kernel_on_grown_buffers(want: int) -> None:
    buf = MatchBuffer()
    buf.start()
    buf.run(_pairs_kernel(3))
    buf.run(_pairs_kernel(want))
    assert buf.n == 3 + want
    assert buf.out_q[:3].tolist() == [0, 1, 2]  # what was there survives the growth
    assert buf.out_q[3: 3 + want].tolist() == list(range(want))
    assert buf.out_s[3: 3 + want].tolist() == [10 * i for i in range(want)]


def test_match_buffer_start_takes_a_fresh_stamp_and_reserve_keeps_the_output() -> None:
    buf = MatchBuffer()
    buf.start()
    stamp = buf.stamp
    buf.run(_pairs_kernel(5))
    buf.reserve(100_000)
    assert buf.out_q.shape[0] >= 5 + 100_000 + 16 and buf.out_q[:5].tolist() == list(range(5))
    buf.start()
    assert buf.stamp == stamp + 1 and buf.n == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 30), max_size=6), max_size=6), st.booleans(),
       st.booleans())
def test_each_event_appends_each_event_s_output_as_its_rows(per_event: list[list[int]],
                                                            pairs: bool, moved: bool) -> None:
    buf, rows = MatchBuffer(), BatchRows()
    acc = np.arange(31, dtype=np.int64) * 100  # COUNT reads each q's count here
    pos = np.arange(len(per_event), dtype=np.int64)[::-1].copy() if moved else None

    def match_one(j: int) -> None:
        qs = per_event[j]
        buf.out_q[buf.n: buf.n + len(qs)] = qs
        buf.out_s[buf.n: buf.n + len(qs)] = [q + 1 for q in qs]
        buf.n += len(qs)

    each_event(match_one, len(per_event), buf, rows, PAIRS if pairs else COUNT, acc, pos)
    want = [(j if pos is None else int(pos[j]), q, q + 1 if pairs else 100 * q)
            for j, qs in enumerate(per_event) for q in qs]
    n = rows.n
    assert list(zip(rows.e[:n].tolist(), rows.q[:n].tolist(), rows.x[:n].tolist(),
                    strict=True)) == want
    assert buf.stamp == len(per_event)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=12), st.integers(40, 100))
def test_run_kernel_many_grows_the_rows_until_every_event_is_done(per_event: list[int],
                                                                  room: int) -> None:
    """A ``*_many`` kernel that writes ``per_event[e]`` (at most ``room``) rows for event e,
    stopping before an event when fewer than ``room`` rows are free, as the IDENTIFY/COUNT
    kernels do (``band_kernels``); the stamp advances once per event."""
    def kernel(tag: int, n_events: int, out: tuple[np.ndarray, ...],
               at: tuple[int, int, int, int]) -> tuple[int, int, int]:
        e, q, x = RowBuffers(*out)
        ev, n, stamp, room_ = At(*at)
        while ev < n_events:
            k = per_event[ev]
            if n + room_ > e.shape[0]:
                break
            e[n: n + k] = ev
            q[n: n + k] = np.arange(k)
            x[n: n + k] = tag
            n += k
            ev += 1
            stamp += 1
        return ev, n, stamp

    buf, rows = MatchBuffer(), BatchRows()
    rows.e, rows.q, rows.x = (np.empty(room + 16, dtype=np.int64) for _ in range(3))  # tight
    assert run_kernel_many(kernel, (7, len(per_event)), len(per_event), buf, rows, room) == ()
    want_e = [ev for ev, k in enumerate(per_event) for _ in range(k)]
    assert rows.e[: rows.n].tolist() == want_e
    assert rows.q[: rows.n].tolist() == [i for k in per_event for i in range(k)]
    assert set(rows.x[: rows.n].tolist()) <= {7}
    assert buf.stamp == len(per_event)
    if sum(per_event[:-1]) > 16:  # a later event found fewer than room rows free
        assert rows.e.shape[0] > room + 16  # it had to grow


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "add_many", "remove"]),
                          st.lists(st.integers(0, 300), max_size=20)), max_size=40))
def test_dense_ids_match_a_set(ops: list[tuple[str, list[int]]]) -> None:
    ids, model = DenseIds(), set()
    for op, qs in ops:
        if op == "add" and qs and qs[0] not in model:
            ids.add(qs[0])
            model.add(qs[0])
        elif op == "add_many":
            new = np.array(sorted(set(qs) - model), dtype=np.int64)
            ids.add_many(new)
            model |= set(new.tolist())
        elif op == "remove" and model:
            q = sorted(model)[qs[0] % len(model)] if qs else min(model)
            ids.remove(q)
            model.discard(q)
        view = ids.view()
        assert len(ids) == len(model) and sorted(view.tolist()) == sorted(model)
        assert all(int(ids.pos[q]) == i for i, q in enumerate(view.tolist()))
        assert ids.memory_bytes() == ids.arr.nbytes >= 8 * len(model)


def test_the_module_exports_what_it_lists() -> None:
    assert all(hasattr(P, name) for name in P.__all__)
