"""``BatchRows`` ordering (``protocol.order_by_event``): the batch path's rows of several members
are put in event order, stably, as a stable ``argsort`` by event would."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.joins.protocol import BatchRows, order_by_event


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
