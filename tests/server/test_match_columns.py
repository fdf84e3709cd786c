"""Columnar delivery (``server/match_columns.py``): the ``MatchBatchColumns`` encoder against
the protobuf reference (the repeated-field ``MatchBatch`` every older client reads), the
selection of a listener's rows and pairs against a per-row oracle, the split of a block into
messages, and the match log's columnar and former (pickle) records side by side."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.clients.columns import MatchColumns
from hotjoin.clients.results import MatchBatch
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server import match_columns, service
from hotjoin.server.delivery import Chunk, DeliveryHub, GapItem, MatchBlock, OpMatches
from hotjoin.server.match_columns import (
    OpTable,
    PairColumns,
    affected_wire,
    decode_columns,
    encode_columns,
    ids_array,
    op_arrays,
    serialize_columns,
    used_ops,
    wire_ops,
)
from hotjoin.server.match_log import MatchLog, decode, encode, encode_pickle
from hotjoin.server.messages import OpColumns

ids = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)


@st.composite
def blocks(draw: st.DrawFn) -> MatchBlock:
    """A delivered block: rows in seq order, operations shared by consecutive rows, some rows
    with pairs (ids of any UTF-8, the empty id and NUL included)."""
    n = draw(st.integers(0, 12))
    n_ops = draw(st.integers(1, 4))
    ops = np.sort(np.array(draw(st.lists(st.integers(0, n_ops - 1), min_size=n, max_size=n)),
                           dtype=np.int32))
    table = [(draw(st.sampled_from(["publish", "delete", "snapshot"])),
              draw(st.sampled_from(["R", "S"])), draw(ids), draw(st.integers(0, 2**62)))
             for _ in range(n_ops)]
    table = [(op, "" if op == "snapshot" else side, "" if op == "snapshot" else eid, t)
             for op, side, eid, t in table]
    lens = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    pairs = {i: (np.array([draw(ids) for _ in range(k)], dtype=object),
                 np.array([draw(ids) for _ in range(k)], dtype=object))
             for i, k in enumerate(lens) if k}
    counts = np.array([max(k, 1) for k in lens], dtype=np.int64)
    sids = np.array(draw(st.lists(st.integers(0, 2**40), min_size=n, max_size=n)), dtype=np.int64)
    seqs = ops.astype(np.int64) + 1
    signs = np.array(draw(st.lists(st.sampled_from([-1, 1]), min_size=n, max_size=n)), dtype=np.int8)
    return MatchBlock(sids, seqs, signs, counts, ops, table, pairs or None)


def _rows(c: MatchColumns) -> list[tuple]:
    off = c.pair_offsets
    return [(int(c.subscription_id[i]), int(c.seq[i]), int(c.sign[i]), int(c.count[i]), c.op[i],
             c.event_side[i], c.event_id[i], int(c.received_unix_nanos[i]),
             list(zip(c.r_id[off[i]:off[i + 1]].tolist(), c.s_id[off[i]:off[i + 1]].tolist(),
                      strict=True)))
            for i in range(len(c))]


def _oracle(b: MatchBlock) -> list[tuple]:
    """Row by row, from the block's own per-message form."""
    pairs = b.pairs or {}
    out = []
    for i in range(len(b)):
        op, side, eid, rns = b.op_table[int(b.ops[i])]
        pr = pairs.get(i, ([], []))
        out.append((int(b.sids[i]), int(b.seqs[i]), int(b.signs[i]), int(b.counts[i]), op, side,
                    eid, rns, list(zip(list(pr[0]), list(pr[1]), strict=True))))
    return out


@settings(max_examples=200, deadline=None)
@given(b=blocks())
def test_columnar_batch_round_trips_against_the_protobuf_reference(b: MatchBlock) -> None:
    ref = service._match_batch(b).matches  # the repeated fields, as every older client reads
    wire = pb.ListenResponse.FromString(service._columnar_batch(b, 0, len(b))).matches
    assert not wire.subscription_ids and not wire.r_ids  # the new form only
    got = MatchColumns.of_batch(wire)
    assert _rows(got) == _rows(MatchColumns.of_batch(ref)) == _oracle(b)
    # the typed object answers the same columns and rows either way
    assert [m for m in MatchBatch(wire).rows()] == MatchBatch(ref).rows()
    assert list(MatchBatch(wire).seqs) == list(ref.seqs)
    assert list(MatchBatch(wire).pair_counts) == list(ref.pair_counts)
    # the server-side decoder (the match log's) reads it back too
    sids, seqs, signs, counts, op_index, table, pcols = decode_columns(wire.columns)
    assert sids.tolist() == b.sids.tolist() and counts.tolist() == b.counts.tolist()
    assert [table[int(k)] for k in op_index] == [b.op_table[int(k)] for k in b.ops]


@settings(max_examples=200, deadline=None)
@given(b=blocks(), lo=st.integers(0, 12))
def test_a_record_is_written_byte_for_byte_as_protobuf_serializes_it(b: MatchBlock,
                                                                     lo: int) -> None:
    """``serialize_columns`` (the match log's record body, and a columnar Listen response)
    equals ``encode_columns``' ``SerializeToString()``: every field, empty ones left out, pairs
    or none, slices of a block (offsets rebased) included."""
    lo = min(lo, len(b))
    rows = np.arange(lo, len(b), dtype=np.int64)
    pc = None if b.pcols is None else b.pcols.take(rows)
    ops = b.ops[lo:]
    used, op_index = used_ops(ops)
    args = (b.sids[lo:], b.seqs[lo:], b.signs[lo:], b.counts[lo:], op_index,
            op_arrays(b.op_table, used), pc)
    want = encode_columns(*args).SerializeToString()
    got = serialize_columns(*args)
    assert got == want
    assert decode_columns(pb.MatchBatchColumns.FromString(got))[0].tolist() == b.sids[lo:].tolist()
    # framed as the Listen response that carries it, as the server sends a columnar batch
    framed = pb.ListenResponse(matches=pb.MatchBatch(columns=encode_columns(*args)))
    assert serialize_columns(*args, within=(5, 10)) == framed.SerializeToString()


@settings(max_examples=300, deadline=None)
@given(b=blocks(), data=st.data(), little=st.booleans())
def test_the_compiled_encoder_writes_what_serialize_columns_writes(
        b: MatchBlock, data: st.DataObject, little: bool) -> None:
    """``affected_wire`` (rows without pairs, a columnar operation table) against
    ``serialize_columns`` of the same rows: byte for byte, with the rows in operation order (one
    pass) or in any order (a mark per operation), none, one or all of them, on either byte
    order's path."""
    rows = np.array(data.draw(st.lists(st.integers(0, max(len(b) - 1, 0)), max_size=len(b)))
                    if len(b) else [], dtype=np.int64)
    if data.draw(st.booleans()):
        rows = np.sort(rows)
    kinds, sides, rns, eids = op_arrays(b.op_table, np.arange(len(b.op_table)))
    table = OpTable(kinds, sides, rns, eids)
    args = (b.sids[rows], b.seqs[rows], b.signs[rows], b.counts[rows])
    ops = b.ops[rows]
    used, op_index = used_ops(ops)
    want = serialize_columns(*args, op_index, op_arrays(table, used), None, within=(5, 10))
    old = match_columns._LITTLE
    match_columns._LITTLE = little
    try:
        got = affected_wire(*args, ops, table.wire(), (5, 10))
    finally:
        match_columns._LITTLE = old
    assert got == want
    back = pb.ListenResponse.FromString(got).matches.columns
    assert decode_columns(back)[1].tolist() == b.seqs[rows].tolist()


@settings(max_examples=100, deadline=None)
@given(sides=st.lists(st.sampled_from(["R", "S"]), min_size=1, max_size=8), data=st.data())
def test_a_batch_operation_table_in_wire_form_is_its_columns(sides: list[str],
                                                            data: st.DataObject) -> None:
    """``OpColumns.wire`` (a batch chunk's operations, made once per chunk) holds what
    ``op_arrays`` answers for every operation."""
    eids = np.array([data.draw(ids) for _ in sides], dtype=object)
    t = OpColumns(np.array(sides, dtype=object), eids, data.draw(st.integers(0, 2**62)))
    w = t.wire()
    every = np.arange(len(sides))
    kinds, sd, rns, got_ids = op_arrays(t, every)
    ref = wire_ops(kinds, sd, rns, got_ids)
    assert [a.tolist() for a in w] == [a.tolist() for a in ref]
    assert t.wire() is w


@settings(max_examples=200, deadline=None)
@given(lens=st.lists(st.integers(0, 4), min_size=1, max_size=20), data=st.data())
def test_pair_selection_matches_a_per_row_oracle(lens: list[int], data: st.DataObject) -> None:
    n = len(lens)
    off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=off[1:])
    r = [f"r{i}" for i in range(int(off[-1]))]
    s = [f"s{i}\x00" for i in range(int(off[-1]))]
    pc = PairColumns(off, ids_array(r), ids_array(s))
    # from a slice as well: the selection must honour an Arrow array's offset
    if data.draw(st.booleans()) and n > 1:
        pc = pc.take(np.arange(1, n, dtype=np.int64)) or PairColumns(
            np.zeros(n, dtype=np.int64), ids_array([]), ids_array([]))
        lens, r, s = lens[1:], r[lens[0]:], s[lens[0]:]
        n -= 1
    rows = sorted(data.draw(st.sets(st.integers(0, n - 1))))
    got = pc.take(np.array(rows, dtype=np.int64))
    want, at = [], np.r_[0, np.cumsum(lens)].tolist()
    for i in rows:
        want.append(list(zip(r[at[i]:at[i + 1]], s[at[i]:at[i + 1]], strict=True)))
    if all(not w for w in want):
        assert got is None
        return
    assert got is not None
    d = got.as_dict()
    assert [list(zip(*d[k], strict=True)) if k in d else [] for k in range(len(rows))] == want


def test_used_ops_falls_back_when_rows_are_not_in_operation_order() -> None:
    used, idx = used_ops(np.array([2, 0, 2, 1]))
    assert used.tolist() == [0, 1, 2] and idx.tolist() == [2, 0, 2, 1]


@pytest.mark.parametrize("lens", [[0, 3, 12, 1, 0, 5, 5, 5, 40, 2], [1] * 30, [0] * 7])
def test_a_block_splits_into_bounded_messages_that_add_up(monkeypatch: pytest.MonkeyPatch,
                                                          lens: list[int]) -> None:
    monkeypatch.setattr(service, "COLUMNAR_ROWS", 4)
    monkeypatch.setattr(service, "COLUMNAR_PAIRS", 8)
    monkeypatch.setattr(service, "PAIRS_PER_MESSAGE", 10)
    n = len(lens)
    pairs = {i: (np.array([f"r{i}.{j}" for j in range(k)], dtype=object),
                 np.array([f"s{j}" for j in range(k)], dtype=object)) for i, k in enumerate(lens) if k}
    b = MatchBlock(np.arange(n, dtype=np.int64), np.arange(1, n + 1, dtype=np.int64),
                   np.ones(n, np.int8), np.array([max(k, 1) for k in lens]),
                   np.arange(n, dtype=np.int32), [("publish", "R", f"e{i}", i) for i in range(n)],
                   pairs or None)
    got: list[tuple] = []
    part: list | None = None
    for out in service.columnar_messages(b):
        resp = pb.ListenResponse.FromString(out) if isinstance(out, bytes) else out
        if resp.WhichOneof("message") == "matches":
            assert part is None
            c = MatchColumns.of_batch(resp.matches)
            assert len(c) <= 4 and len(c.pair_row) <= 8
            got += _rows(c)
            continue
        m = resp.match  # a row of more than PAIRS_PER_MESSAGE pairs: split Match parts
        assert len(m.pairs) <= 10
        if part is None:
            part = [m.subscription_id, m.seq, m.sign, m.count, m.op, "RS"[m.event.side - 1],
                    m.event.id, m.received_unix_nanos, []]
        part[-1] += [(p.r_id, p.s_id) for p in m.pairs]
        if not m.more:
            got.append(tuple(part))
            part = None
    assert part is None
    assert [tuple(g) for g in got] == [tuple(o) for o in _oracle(b)]


@settings(max_examples=150, deadline=None)
@given(bs=st.lists(blocks(), max_size=5), limit=st.integers(1, 20), shared=st.booleans(),
       gap_at=st.integers(0, 5))
def test_consecutive_blocks_go_out_as_few_messages_that_add_up(
        bs: list[MatchBlock], limit: int, shared: bool, gap_at: int) -> None:
    """A drain's items as columnar Listen messages: consecutive blocks without pairs joined into
    messages of at most ``COLUMNAR_ROWS`` rows (a block above it alone, split), their operation
    tables joined (or one table shared by several blocks), other items in place between them;
    every row once, in order, with its own operation."""
    items: list = []
    for k, b in enumerate(bs):
        table = OpTable(*op_arrays(b.op_table, np.arange(len(b.op_table))))
        if shared and items and isinstance(items[-1], MatchBlock):
            prev = items[-1]  # a drain that took several windows of one chunk: one table
            table, ops = prev.op_table, np.minimum(b.ops, len(prev.op_table) - 1)
        else:
            ops = b.ops
        items.append(MatchBlock(b.sids, b.seqs, b.signs, b.counts, ops, table, None))
        if k == gap_at:
            items.append(GapItem(7, 1, 2, "retention"))
    want = [_oracle(it) if isinstance(it, MatchBlock) else [("gap", 7)] for it in items]
    got: list = []
    messages = 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(service, "COLUMNAR_ROWS", limit)
        outs = list(service.encode_items(items, columnar=True))
    for out in outs:
        resp = pb.ListenResponse.FromString(out) if isinstance(out, bytes) else out
        if resp.WhichOneof("message") == "gap":
            got.append([("gap", resp.gap.subscription_id)])
            continue
        c = MatchColumns.of_batch(resp.matches)
        assert 0 < len(c) <= limit
        messages += 1
        got.append(_rows(c))
    flat = lambda xs: [r for x in xs for r in x]  # noqa: E731
    assert [tuple(r) for r in flat(got)] == [tuple(r) for r in flat(want)]
    rows = [len(it) for it in items if isinstance(it, MatchBlock)]
    # no more messages than the blocks (each split by the limit) would take on their own
    assert messages <= sum(-(-n // limit) for n in rows)


# ---- the hub: a listener's rows and pairs -------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_listener_receives_exactly_its_rows_and_pairs(data: st.DataObject) -> None:
    n_subs = data.draw(st.integers(1, 6))
    hub = DeliveryHub(boot_seq=0, capacity=10**6, max_pairs=10**9)
    hub.add_subscriptions([(q, "a" if q % 2 else "b", 1) for q in range(n_subs)])
    pushed: list[tuple[int, int, list[tuple[str, str]]]] = []
    for seq in range(2, 2 + data.draw(st.integers(1, 5))):
        hit = sorted(data.draw(st.sets(st.integers(0, n_subs - 1), min_size=1)))
        k = [data.draw(st.integers(0, 3)) for _ in hit]
        rows = [i for i, x in enumerate(k) if x]
        flat = None
        if rows:
            r = np.array([f"r{seq}.{q}.{j}" for q, x in zip(hit, k, strict=True) for j in range(x)], dtype=object)
            s = np.array([f"s{j}" for x in k for j in range(x)], dtype=object)
            flat = (np.array(rows), r, s)
        counts = np.array([max(x, 1) for x in k])
        hub.push(Chunk.build([OpMatches(seq, 1, "publish", "R", f"e{seq}", 0,
                                        np.array(hit), counts, None, flat)]))
        for q, x in zip(hit, k, strict=True):
            pushed.append((q, seq, [(f"r{seq}.{q}.{j}", f"s{j}") for j in range(x)]))
    wanted = sorted(data.draw(st.sets(st.integers(0, n_subs - 1), min_size=1)))
    after = {q: data.draw(st.integers(0, 4)) for q in wanted}
    lis = hub.listen("", wanted, after, 0, False, current_seq=10)
    got = []
    for it in lis.next_batch(0):
        if isinstance(it, MatchBlock):
            d = it.pairs or {}
            for i in range(len(it)):
                pr = d.get(i, ([], []))
                got.append((int(it.sids[i]), int(it.seqs[i]), list(zip(pr[0], pr[1], strict=True))))
    want = [(q, seq, p) for q, seq, p in pushed if q in after and seq > after[q]]
    assert sorted(got) == sorted(want)


# ---- the match log: both record formats ---------------------------------------------------------

def _cols(seq: int, pairs: int) -> tuple:
    pc = None
    if pairs:
        pc = {0: (np.array([f"r{seq}.{j}" for j in range(pairs)], dtype=object),
                  np.array(["s"] * pairs, dtype=object))}
    return (np.array([seq % 3]), np.array([seq]), np.array([1], np.int8), np.array([max(pairs, 1)]),
            np.array([0], np.int32), [("publish", "S", f"s{seq}", seq)], pc)


def test_old_pickle_records_still_read_after_an_upgrade(tmp_path: Path) -> None:
    ml = MatchLog(tmp_path, log_seq=0, sync=False)
    for seq in range(1, 5):  # written by the former version
        ml.append(seq, seq, encode_pickle(_cols(seq, seq % 2 * 2)))
    ml.close()
    ml = MatchLog(tmp_path, log_seq=4, sync=False)  # the upgraded server appends columns
    for seq in range(5, 9):
        ml.append(seq, seq, encode(_cols(seq, seq % 2 * 2)))
    got = ml.read(0, 8)
    ml.close()
    assert [f for f, _, _ in got] == list(range(1, 9))
    for first, _, cols in got:
        want = _cols(first, first % 2 * 2)
        assert cols[1].tolist() == [first] and cols[0].tolist() == want[0].tolist()
        assert list(cols[5]) == want[5]
        pairs = {} if cols[6] is None else {k: (list(a), list(b)) for k, (a, b) in cols[6].as_dict().items()}
        assert pairs == {k: (list(a), list(b)) for k, (a, b) in (want[6] or {}).items()}


def test_columnar_records_are_smaller_than_pickled_ones() -> None:
    cols = _cols(7, 200)
    assert len(encode(cols)) < len(encode_pickle(cols))
    assert decode(encode(cols))[3].tolist() == [200]


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_a_listener_by_subscriber_visits_only_its_rows(tmp_path_factory: pytest.TempPathFactory,
                                                        data: st.DataObject) -> None:
    """With a match log, a listener by subscriber name selects its rows through the chunk's
    index by subscriber (chunks of more than 256 rows); the oracle: every pushed row of that
    subscriber's subscriptions, once, in seq order per subscription."""
    n_subs, n_names = 1000, data.draw(st.integers(1, 6))
    ml = MatchLog(tmp_path_factory.mktemp("ml"), log_seq=0, sync=False)
    hub = DeliveryHub(boot_seq=0, store=ml)
    owner = [data.draw(st.integers(0, n_names - 1)) for _ in range(n_subs)]
    hub.add_subscriptions([(q, f"n{owner[q]}", 1) for q in range(n_subs)])
    name = data.draw(st.integers(0, n_names - 1))
    lis = hub.listen(f"n{name}", [], {}, 0, False, current_seq=1)
    pushed = []
    got = []
    for seq in range(2, 2 + data.draw(st.integers(1, 4))):
        hit = np.flatnonzero(np.array(data.draw(st.lists(st.booleans(), min_size=n_subs,
                                                          max_size=n_subs))))
        if hit.size == 0:
            continue
        hub.push(Chunk.build([OpMatches(seq, 1, "publish", "R", f"e{seq}", 0, hit,
                                        np.ones(hit.size, dtype=np.int64))]))
        pushed += [(int(q), seq) for q in hit.tolist() if owner[q] == name]
        if data.draw(st.booleans()):  # drain now or later
            got += [(int(q), int(s)) for it in lis.next_batch(0) if isinstance(it, MatchBlock)
                    for q, s in zip(it.sids.tolist(), it.seqs.tolist(), strict=True)]
    got += [(int(q), int(s)) for it in lis.next_batch(0) if isinstance(it, MatchBlock)
            for q, s in zip(it.sids.tolist(), it.seqs.tolist(), strict=True)]
    ml.close()
    assert sorted(got) == sorted(pushed) and len(got) == len(set(got))
