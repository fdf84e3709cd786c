"""Typed listen: ``Match``, ``MatchBatch``, ``Gap``, ``CaughtUp`` and ``Unsubscribed`` with a
``kind`` each, never a protobuf oneof; batch rows, columns and single messages agree."""

from __future__ import annotations

from typing import Any

import numpy as np
from client_harness import Api
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.clients import (
    BandJoin,
    CaughtUp,
    Event,
    EventRef,
    Gap,
    Match,
    MatchBatch,
    MatchColumns,
    Range,
    Unsubscribed,
)
from hotjoin.clients.convert import batch_rows, listen_item_of
from hotjoin.clients.streams import MatchStream
from hotjoin.proto import hotjoin_pb2 as pb


def _until_caught_up(api: Api, *args: Any, **kw: Any) -> list[Any]:
    return api.items("listen", *args, stop=lambda x: isinstance(x, CaughtUp), **kw)


def test_listen_yields_typed_items(api: Api, topic: str) -> None:
    api.call("create_topic", topic, lateness=10)
    pairs = api.call("subscribe", topic, BandJoin(b=Range(-1, 1)), subscriber="me")
    counts = api.call("subscribe", topic, BandJoin(b=Range(-1, 1)), subscriber="me", delivery="affected")
    api.call("publish", topic, [Event("S", "s1", 10.0, 0.0, 1), Event("S", "s2", 10.4, 0.0, 1),
                                Event("R", "r1", 9.5, 0.0, 2)])
    api.call("delete_events", topic, [("S", "s2")])
    items = _until_caught_up(api, topic, subscriber="me")
    assert [x.kind for x in items] == ["match", "match", "match", "match", "caught_up"]
    m = items[0]
    assert isinstance(m, Match) and not hasattr(m, "WhichOneof")
    assert (m.subscription_id, m.seq, m.sign, m.count, m.op) == (pairs, 5, 1, 2, "publish")
    assert sorted(m.pairs) == [("r1", "s1"), ("r1", "s2")] and m.event == EventRef("R", "r1")
    assert m.received_unix_nanos > 0
    assert (items[1].subscription_id, items[1].count, items[1].pairs) == (counts, 2, ())
    gone = items[2]
    assert (gone.sign, gone.op, gone.pairs, gone.event) == (-1, "delete", (("r1", "s2"),), EventRef("S", "s2"))
    assert items[4] == CaughtUp(6)
    # a live listener is told of an unsubscription
    if api.kind == "sync":
        stream = api.client.listen(topic, subscription_ids=[counts], from_latest=True)
        it = iter(stream)
        assert isinstance(next(it), CaughtUp)
        seq = api.call("unsubscribe", topic, counts)
        assert next(it) == Unsubscribed(counts, seq)
        stream.cancel()
    else:
        async def live() -> tuple[Any, Any]:
            it = api.client.listen(topic, subscription_ids=[counts], from_latest=True)
            first = await it.__anext__()
            seq = await api.client.unsubscribe(topic, counts)
            second = await it.__anext__()
            await it.aclose()
            return first, (second, seq)

        first, (second, seq) = api._run(live())
        assert isinstance(first, CaughtUp) and second == Unsubscribed(counts, seq)


def test_batched_rows_equal_single_messages(api: Api, topic: str) -> None:
    api.call("create_topic", topic, lateness=10)
    api.call("subscribe_many", topic, [BandJoin(b=Range(-1, 1))] * 3, subscriber="me")
    api.call("subscribe", topic, BandJoin(b=Range(-2, 2)), subscriber="me", delivery="affected")
    api.call("publish", topic, [Event("S", f"s{i}", float(i), 0.0, 1) for i in range(5)])
    api.call("publish", topic, [Event("R", f"r{i}", i + 0.5, 0.0, 2) for i in range(4)])
    single = [x for x in _until_caught_up(api, topic, subscriber="me") if isinstance(x, Match)]
    batched = _until_caught_up(api, topic, subscriber="me", batch=True, batch_pairs=True)
    assert {x.kind for x in batched} == {"matches", "caught_up"}
    rows = [r for x in batched if isinstance(x, MatchBatch) for r in x.rows()]
    assert rows == single, "the wire field is left out: the rows equal the single messages"
    cols = [c for x in batched if isinstance(x, MatchBatch) for c in [x.columns()]]
    assert sum(len(c) for c in cols) == len(single)
    flat = [(int(c.subscription_id[k]), int(c.seq[k]), int(c.count[k])) for c in cols for k in range(len(c))]
    assert flat == [(m.subscription_id, m.seq, m.count) for m in single]
    by_column = api.items("listen_columns", topic, subscriber="me",
                          stop=lambda x: isinstance(x, CaughtUp))
    assert isinstance(by_column[-1], CaughtUp)
    assert all(isinstance(c, MatchColumns) for c in by_column[:-1])
    assert sum(len(c) for c in by_column[:-1]) == len(single)


def test_gap_is_typed(tmp_path: Any, topic: str) -> None:
    """A listener beyond the memory-only buffer (64 messages) gets one ``Gap``."""
    from server_harness import engine_factory

    from hotjoin.clients import Client
    from hotjoin.server.app import HotjoinServer
    from hotjoin.server.settings import DeliveryOptions

    srv = HotjoinServer(data_dir=tmp_path / "d", port=0, buffer_capacity=64, engine_factory=engine_factory(),
                        delivery=DeliveryOptions(retention_bytes=0)).start()
    try:
        with Client(srv.target, timeout=30) as c:
            c.create_topic(topic, lateness=10**6)
            sid = c.subscribe(topic, BandJoin(b=Range(-1, 1)), subscriber="me")
            c.publish(topic, [Event("R", "r0", 0.0, 0.0, 0)])
            c.publish(topic, [Event("S", f"s{i}", 0.5, 0.0, i) for i in range(100)])
            stream = c.listen(topic, subscriber="me")
            items = []
            for x in stream:
                items.append(x)
                if isinstance(x, CaughtUp):
                    break
            stream.cancel()
    finally:
        srv.stop(0)
    gap = items[0]
    assert isinstance(gap, Gap) and gap.kind == "gap" and gap.subscription_id == sid
    assert (gap.from_seq, gap.to_seq) == (1, 38) and gap.reason
    assert [x.seq for x in items[1:-1]] == list(range(39, 103))


# ---- the conversion, against a brute-force expansion of random batches ------------------------

_op = st.builds(lambda op, side, eid: pb.Operation(op=op, event=pb.EventRef(side=side, id=eid),
                                                     received_unix_nanos=7),
                st.sampled_from(["publish", "delete", "snapshot"]), st.sampled_from([0, 1, 2]),
                st.sampled_from(["", "a", "b"]))


@st.composite
def batches(draw: st.DrawFn) -> pb.MatchBatch:
    ops = draw(st.lists(_op, min_size=1, max_size=3))
    n = draw(st.integers(0, 6))
    with_pairs = draw(st.booleans())
    mb = pb.MatchBatch(ops=ops)
    for i in range(n):
        k = draw(st.integers(0, len(ops) - 1))
        pc = draw(st.integers(0, 3)) if with_pairs else 0
        mb.subscription_ids.append(draw(st.integers(0, 5)))
        mb.seqs.append(i + 1)
        mb.signs.append(draw(st.sampled_from([1, -1])))
        mb.counts.append(pc or draw(st.integers(1, 9)))
        mb.op_index.append(k)
        if with_pairs:
            mb.pair_counts.append(pc)
            mb.r_ids.extend(f"r{i}.{j}" for j in range(pc))
            mb.s_ids.extend(f"s{i}.{j}" for j in range(pc))
    return mb


@given(batches())
def test_batch_rows_and_columns_agree_with_the_brute_force(mb: pb.MatchBatch) -> None:
    rows = batch_rows(listen_item_of(pb.ListenResponse(matches=mb)))
    at, want = 0, []
    for i in range(len(mb.subscription_ids)):
        o = mb.ops[mb.op_index[i]]
        pc = mb.pair_counts[i] if len(mb.pair_counts) else 0
        ev = None if o.event.side == 0 and not o.event.id else EventRef({1: "R", 2: "S"}.get(o.event.side, ""),
                                                                         o.event.id)
        want.append(Match(mb.subscription_ids[i], mb.seqs[i], mb.signs[i], mb.counts[i],
                          tuple(zip(mb.r_ids[at:at + pc], mb.s_ids[at:at + pc], strict=True)), o.op, ev, 7))
        at += pc
    assert rows == want
    cols = MatchBatch(mb).columns()
    assert cols.subscription_id.tolist() == [m.subscription_id for m in rows]
    assert cols.op.tolist() == [m.op for m in rows]
    assert [tuple(zip(cols.r_id[cols.pair_row == k], cols.s_id[cols.pair_row == k], strict=True))
            for k in range(len(rows))] == [m.pairs for m in rows]


@given(batches(), st.dictionaries(st.integers(0, 5), st.integers(0, 7), max_size=6))
def test_dedupe_keeps_each_rows_pairs(mb: pb.MatchBatch, cursors: dict[int, int]) -> None:
    """Rows at or below their cursor are dropped with their pairs; the others keep theirs."""
    ms = MatchStream(None, pb.ListenRequest(), dict(cursors), reconnect=False,  # type: ignore[arg-type]
                     retry_delay=0.0)
    rows = list(zip(mb.subscription_ids, mb.seqs, strict=True))
    resp, kept = ms._dedupe(mb, rows)
    want = [m for m in batch_rows(mb) if m.seq > cursors.get(m.subscription_id, -1)]
    assert batch_rows(resp.matches) == want and kept == [(m.subscription_id, m.seq) for m in want]
    assert ms.duplicates == len(rows) - len(want)
    assert np.array_equal(MatchBatch(resp.matches).columns().seq, np.array([m.seq for m in want], dtype=np.int64))
