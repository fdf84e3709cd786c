"""The delivery ring's memory estimate (``delivery.row_bytes``) against what a chunk really
holds (tracemalloc, plus Arrow's allocator for the pairs' ids): the ring's byte bound is only a bound if the estimate does not undercount."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pyarrow as pa
import pytest

from hotjoin.matcher.batch import BatchOutput
from hotjoin.server.book import SubscriptionBook
from hotjoin.server.convert import SubMeta
from hotjoin.server.delivery import row_bytes
from hotjoin.server.messages import MessageBuilder


@pytest.mark.parametrize(("affected", "pairs_per_message"), [(False, 1), (False, 10), (True, 1)])
def test_the_estimate_covers_what_a_chunk_holds(affected: bool, pairs_per_message: int) -> None:
    book = SubscriptionBook("t")
    for sid in range(64):
        book.register(sid, SubMeta(affected, False, "x", 1))
    n_ev, per = 100, 13  # 13 messages per event, as the band load test
    ev = np.repeat(np.arange(n_ev), per * pairs_per_message)
    sub = np.tile(np.repeat(np.arange(per), pairs_per_message), n_ev) + 7
    r_id = np.array([f"r{e}" for e in ev.tolist()], dtype=object)
    s_id = np.array([f"s{i % 997}" for i in range(ev.size)], dtype=object)
    ones = np.ones(ev.size, np.int64)
    if affected:  # AFFECTED output: one row per (event, subscription) with its count
        out = BatchOutput(np.repeat(np.arange(n_ev), per), np.tile(np.arange(per), n_ev) + 7,
                          np.ones(n_ev * per, np.int8), np.full(n_ev * per, pairs_per_message))
    else:
        out = BatchOutput(ev, sub, ones.astype(np.int8), ones, r_id, s_id)
    builder = MessageBuilder("t", book)
    ids = np.array([f"r{i}" for i in range(n_ev)], dtype=object)
    arrow0 = pa.total_allocated_bytes()
    tracemalloc.start()
    try:
        chunks = [builder.of_batch(out, np.arange(n_ev), np.arange(1, n_ev + 1),
                                   np.zeros(n_ev, np.int8), ids, 0) for _ in range(20)]
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    held += pa.total_allocated_bytes() - arrow0  # the pairs' ids live in Arrow's allocator
    estimate = sum(int(row_bytes(c).sum()) for c in chunks if c is not None)
    assert estimate >= 0.8 * held, (estimate, held)  # never far below what is really held
    assert estimate <= 3.0 * held, (estimate, held)  # nor so high that the ring holds little
