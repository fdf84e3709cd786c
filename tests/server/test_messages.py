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
from hotjoin.server.metrics import REGISTRY


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


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 9),
                               st.integers(-3, 3).filter(bool)), max_size=40),
       in_order=st.booleans(), n_events=st.integers(7, 10))
def test_affected_rows_equal_a_row_by_row_oracle(rows: list[tuple[int, int, int]], in_order: bool,
                                                 n_events: int) -> None:
    """AFFECTED output (one row per (event, subscription), a signed count each) becomes one
    message per row: its batch event's seq and operation, the subscription, the sign and the
    pair count, in the engine's row order. Rows in event order take the compiled pass; rows out
    of it (``in_order`` False) the NumPy one; both against the same oracle, and both counted in
    the topic's ``matches`` and ``messages`` metrics."""
    rows = sorted(rows) if in_order else rows
    book = SubscriptionBook("t-affected")
    for sid in range(10):
        book.register(sid, SubMeta(True, False, "x", 1))
    take = np.arange(0, 2 * n_events, 2)[:7]  # the engine saw every other batch event
    seq = np.arange(100, 100 + 2 * n_events)
    side_code = np.arange(2 * n_events, dtype=np.int8) % 2
    ids = np.array([f"e{i}" for i in range(2 * n_events)], dtype=object)
    ev = np.array([e for e, _, _ in rows], dtype=np.int64)
    sub = np.array([q for _, q, _ in rows], dtype=np.int64)
    count = np.array([c for _, _, c in rows], dtype=np.int64)
    out = BatchOutput(ev, sub, np.sign(count).astype(np.int8), count)
    before = (_sample("hotjoin_matches_total", "t-affected"), _sample("hotjoin_messages_total", "t-affected"))
    chunk = MessageBuilder("t-affected", book).of_batch(out, take, seq, side_code, ids, 7)
    if not rows:
        assert chunk is None
        return
    assert chunk is not None
    want = [(int(seq[take[e]]), q, 1 if c > 0 else -1, abs(c), ("publish", "RS"[take[e] % 2], f"e{take[e]}", 7))
            for e, q, c in rows]
    got = [(int(chunk.seqs[i]), int(chunk.sids[i]), int(chunk.signs[i]), int(chunk.counts[i]),
            tuple(chunk.op_table[int(chunk.ops[i])])) for i in range(len(chunk.sids))]
    assert got == want
    assert chunk.pcols is None
    assert (_sample("hotjoin_matches_total", "t-affected") - before[0],
            _sample("hotjoin_messages_total", "t-affected") - before[1]) == \
        (sum(abs(c) for _, _, c in rows), len(rows))


def _sample(name: str, topic: str) -> float:
    return REGISTRY.get_sample_value(name, {"topic": topic}) or 0.0
