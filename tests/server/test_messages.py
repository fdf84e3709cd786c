"""The delivery chunk of a batch's PAIRS output: its flat pairs (what the match log stores) are
the per-message pairs, with AFFECTED subscriptions' rows left out (``MessageBuilder.of_batch``)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.batch import BatchOutput
from hotjoin.server.book import SubscriptionBook
from hotjoin.server.convert import SubMeta
from hotjoin.server.match_log import decode, encode
from hotjoin.server.messages import MessageBuilder


@settings(max_examples=150, deadline=None)
@given(affected=st.lists(st.booleans(), min_size=1, max_size=6),
       rows=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 5), st.integers(0, 9)),
                     min_size=1, max_size=40))
def test_flat_pairs_equal_the_messages_pairs(affected: list[bool],
                                             rows: list[tuple[int, int, int]]) -> None:
    book = SubscriptionBook("t")
    for sid, aff in enumerate(affected):
        book.register(sid, SubMeta(aff, False, "x", 1))
    rows = sorted(rows)  # event order, as the engine gives it
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
    want = {r: (list(p[0]), list(p[1])) for r, p in (chunk.pairs or {}).items()}
    got = decode(encode(chunk.columns()))[-1] or {}
    assert {r: (list(p[0]), list(p[1])) for r, p in got.items()} == want
    # the PAIRS messages are exactly the rows of PAIRS subscriptions, each with its count of pairs
    pairs_rows = [i for i, s in enumerate(chunk.sids.tolist()) if not affected[s]]
    assert sorted(want) == pairs_rows
    assert all(len(want[r][0]) == chunk.counts[r] for r in pairs_rows)
