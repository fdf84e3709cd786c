"""The delivery chunk of a batch's PAIRS output (``MessageBuilder.of_batch``): one message per
(event, PAIRS subscription) with exactly its pairs, AFFECTED subscriptions' pairs left out,
checked against a row-by-row oracle; the match log's records (columnar, and the former pickle
format an upgraded server still reads) give back the same columns."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.batch import BatchOutput
from hotjoin.server.book import SubscriptionBook
from hotjoin.server.convert import SubMeta
from hotjoin.server.match_log import decode, encode, encode_pickle
from hotjoin.server.messages import MessageBuilder


@settings(max_examples=150, deadline=None)
@given(affected=st.lists(st.booleans(), min_size=1, max_size=6),
       rows=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 5), st.integers(0, 9)),
                     min_size=1, max_size=40),
       shuffled=st.booleans())
def test_flat_pairs_equal_the_messages_pairs(affected: list[bool],
                                             rows: list[tuple[int, int, int]], shuffled: bool) -> None:
    book = SubscriptionBook("t")
    for sid, aff in enumerate(affected):
        book.register(sid, SubMeta(aff, False, "x", 1))
    rows = sorted(rows)  # event order, as the engine gives it ...
    if shuffled:  # ... or not: the chunk sorts them (stably, so the oracle's order holds)
        rows = sorted(rows, key=lambda r: (r[1], -r[0]))
    ev = np.array([e for e, _, _ in rows], dtype=np.int64)
    sub = np.array([q % len(affected) for _, q, _ in rows], dtype=np.int64)
    partner = np.array([f"s{p}" for _, _, p in rows], dtype=object)
    mine = np.array([f"r{e}" for e in ev.tolist()], dtype=object)
    out = BatchOutput(ev, sub, np.ones(len(rows), np.int8), np.ones(len(rows), np.int64), mine, partner)
    n = 5
    chunk = MessageBuilder("t", book).of_batch(out, np.arange(n), np.arange(1, n + 1),
                                               np.zeros(n, np.int8), np.array([f"r{i}" for i in range(n)],
                                                                              dtype=object), 0)
    assert chunk is not None
    # the oracle, row by row: one message per (event, PAIRS subscription) with its pairs in order
    oracle: dict[tuple[int, int], list[tuple[str, str]]] = {}
    for (e, _, _), q, r, s in zip(rows, sub.tolist(), mine.tolist(), partner.tolist(), strict=True):
        if not affected[q]:
            oracle.setdefault((e + 1, q), []).append((r, s))
    got = {(int(chunk.seqs[r]), int(chunk.sids[r])): list(zip(p[0], p[1], strict=True))
           for r, p in (chunk.pairs or {}).items()}
    assert got == oracle
    assert all(len(p[0]) == chunk.counts[r] for r, p in (chunk.pairs or {}).items())
    # the match log gives back the same pairs, in the columnar and in the former pickle format
    for codec in (encode, encode_pickle):
        back = decode(codec(chunk.columns()))
        assert back[1].tolist() == chunk.seqs.tolist() and back[0].tolist() == chunk.sids.tolist()
        pc = back[-1]
        again = {} if pc is None else pc.as_dict()
        assert {r: (list(a), list(b)) for r, (a, b) in again.items()} == \
            {r: (list(a), list(b)) for r, (a, b) in (chunk.pairs or {}).items()}
        assert [tuple(o) for o in back[5]] == [tuple(o) for o in chunk.op_table]
