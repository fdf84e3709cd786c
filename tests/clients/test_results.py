"""What the client returns: frozen results whose derived fields (``ok``, ``rejections``,
``deleted``, a subscription's ``kind``) follow their statuses, and ``MatchBatch``, which answers
the same rows, columns and operations from a repeated-field message and from a columnar one."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from match_batches import KINDS, columnar, expected_rows, match_batches

from hotjoin.clients.results import (
    CaughtUp,
    CommittedCursor,
    Cursors,
    DeleteResult,
    EventRef,
    EventResult,
    Gap,
    Match,
    MatchBatch,
    Operation,
    PublishResult,
    SubscriptionInfo,
    Topic,
    TopicStats,
    Unsubscribed,
)
from hotjoin.matcher.model import BandJoin, Range, SelectJoin, WindowJoin
from hotjoin.proto import hotjoin_pb2 as pb

CODES = ["OK", "LATE", "DUPLICATE", "INVALID", "NOT_FOUND"]


@given(st.lists(st.sampled_from(CODES), max_size=12))
def test_rejections_are_the_statuses_not_ok(codes: list[str]) -> None:
    statuses = tuple(EventResult(c, f"e{i}", index=i) for i, c in enumerate(codes))
    pub, dele = PublishResult(statuses=statuses), DeleteResult(statuses=statuses)
    want = [s for s in statuses if s.code != "OK"]
    assert pub.rejections == dele.rejections == want
    assert dele.deleted == codes.count("OK") == sum(s.ok for s in statuses)


def test_results_are_frozen_and_compare_without_their_message() -> None:
    a = Topic("t", seq=3, wire=pb.Topic(name="t", seq=3))
    b = Topic("t", seq=3)
    assert a == b and "wire" not in repr(a)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.seq = 4  # type: ignore[misc]
    assert Topic("u").strategy == {} and Topic("u").strategy is not Topic("v").strategy
    assert TopicStats("t").delivery.buffer_bytes == 0 and TopicStats("t").workers == ()


@pytest.mark.parametrize(("spec", "kind"), [(SelectJoin(), "select"),
                                            (BandJoin(b=Range(-1, 1)), "band"),
                                            (WindowJoin(), "window")])
def test_a_subscription_names_its_join_kind(spec: object, kind: str) -> None:
    assert SubscriptionInfo(1, spec).kind == kind  # type: ignore[arg-type]


def test_cursors_iterate_their_subscriptions() -> None:
    cs = Cursors(seq=9, cursors=(CommittedCursor(1, committed_seq=4, lag=5), CommittedCursor(2)))
    assert len(cs) == 2 and [c.subscription_id for c in cs] == [1, 2]
    assert [c.committed_seq for c in cs] == [4, None]
    assert len(Cursors(seq=0)) == 0 and list(Cursors(seq=0)) == []


def test_every_listen_item_names_its_kind() -> None:
    assert Match(1, 2).kind == "match" and MatchBatch(pb.MatchBatch()).kind == "matches"
    assert Gap(1, 2, 3).kind == "gap" and CaughtUp(4).kind == "caught_up"
    assert Unsubscribed(1, 5).kind == "unsubscribed"


@settings(max_examples=150, deadline=None)
@given(match_batches())
def test_a_batch_gives_the_same_rows_in_either_form(mb: pb.MatchBatch) -> None:
    want = expected_rows(mb)
    for batch in (MatchBatch(mb), MatchBatch(columnar(mb))):
        # a columnar batch without a single pair has no pair counts (as one without batch_pairs)
        pair_counts = list(mb.pair_counts) if batch.wire is mb or any(mb.pair_counts) else []
        assert len(batch) == len(want)
        assert batch.rows() == want and list(batch) == want
        assert list(batch.subscription_ids) == [m.subscription_id for m in want]
        assert list(batch.seqs) == [m.seq for m in want]
        assert list(batch.signs) == [m.sign for m in want]
        assert list(batch.counts) == [m.count for m in want]
        assert list(batch.op_index) == list(mb.op_index)
        assert list(batch.pair_counts) == pair_counts
        assert list(batch.r_ids) == [r for m in want for r, _ in m.pairs]
        assert list(batch.s_ids) == [s for m in want for _, s in m.pairs]
        assert batch.ops == tuple(
            Operation(o.op, EventRef("RS"[o.event.side - 1], o.event.id) if o.event.side else None,
                      o.received_unix_nanos) for o in mb.ops)
        cols = batch.columns()
        assert cols.seq.tolist() == [m.seq for m in want]
        assert cols.op.tolist() == [m.op for m in want]


def test_an_empty_batch_in_either_form() -> None:
    for batch in (MatchBatch(pb.MatchBatch()), MatchBatch(columnar(pb.MatchBatch()))):
        assert len(batch) == 0 and batch.rows() == [] and list(batch.op_index) == []
        assert list(batch.pair_counts) == [] and list(batch.r_ids) == []


def test_batches_compare_by_message_and_are_not_hashable() -> None:
    mb = pb.MatchBatch(subscription_ids=[1], seqs=[2], signs=[1], counts=[1], op_index=[0],
                       ops=[pb.Operation(op=KINDS[0], event=pb.EventRef(side=1, id="r"))])
    assert MatchBatch(mb) == MatchBatch(pb.MatchBatch.FromString(mb.SerializeToString()))
    assert MatchBatch(mb) != MatchBatch(pb.MatchBatch()) and MatchBatch(mb) != mb
    assert repr(MatchBatch(mb)) == "MatchBatch(1 rows)"
    with pytest.raises(TypeError):
        hash(MatchBatch(mb))
    assert isinstance(MatchBatch(columnar(mb)).signs, np.ndarray)
