"""Columns in and out: ``columns`` and ``columns_from_arrow`` build a columnar publish batch
(side codes, server-assigned ids, times, payloads, interval ends), and ``MatchColumns`` reads a
batch of matches of either form as the same numpy and Arrow columns."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from match_batches import columnar, expected_rows, match_batches

from hotjoin.clients.columns import MatchColumns, columns, columns_from_arrow
from hotjoin.clients.results import EventRef, Match
from hotjoin.proto import hotjoin_pb2 as pb

# ---- publish batches ---------------------------------------------------------------------------


def test_sides_by_name_or_number_and_anything_else_invalid() -> None:
    assert bytes(columns(["R", "S", "x"], ["a", "b", "c"], [1, 2, 3], [0, 0, 0]).sides) == b"\x01\x02\x00"
    assert bytes(columns(np.array([0, 1, 2, -1]), ["a"] * 4, [0.0] * 4, [0.0] * 4).sides) == \
        b"\x01\x02\x00\x00"
    assert bytes(columns(pa.array(["S", "R"]), ["a", "b"], [1, 2], [3, 4]).sides) == b"\x02\x01"


def test_ids_keys_values_and_optional_columns() -> None:
    c = columns(["R", "S"], ["r1", None], np.array([1, 2], dtype=np.int32), [0.5, 1.5])
    assert list(c.ids) == ["r1", ""], "None asks the server for an id"
    assert list(c.keys) == [1.0, 2.0] and list(c.values) == [0.5, 1.5]
    assert list(c.times) == [] and list(c.payloads) == [] and list(c.ends) == []
    c = columns(["R", "S"], ["a", "b"], [1, 2], [3, 4], times=[7, 8], payloads=[b"x", None])
    assert list(c.times) == [7, 8] and list(c.payloads) == [b"x", b""]
    assert list(columns(["R"], ["a"], [1], [2], payloads=[None]).payloads) == [], \
        "a payload column without a payload is left out"


def test_a_null_end_is_a_point_at_its_time() -> None:
    c = columns(["R", "S", "R"], ["a", "b", "c"], [1, 2, 3], [0, 0, 0], times=[5, 6, 7],
                ends=[9, None, 7])
    assert list(c.ends) == [9, 6, 7]
    with pytest.raises(ValueError, match="a null end .* needs the event's time"):
        columns(["R"], ["a"], [1], [0], ends=[None])


def test_columns_of_an_arrow_table() -> None:
    t = pa.table({"side": ["R", "S"], "id": ["r1", None], "key": pa.array([1, 2], pa.int64()),
                  "value": [0.5, 1.5], "time": [3, 4], "payload": [b"p", None], "end": [9, None]})
    c = columns_from_arrow(t)
    assert bytes(c.sides) == b"\x01\x02" and list(c.ids) == ["r1", ""]
    assert list(c.keys) == [1.0, 2.0] and list(c.times) == [3, 4]
    assert list(c.payloads) == [b"p", b""] and list(c.ends) == [9, 4]
    c = columns_from_arrow(pa.record_batch({"side": ["S"], "key": [1.0], "value": [2.0]}))
    assert list(c.ids) == [""] and list(c.times) == [] and list(c.ends) == []


def test_arrow_time_and_end_columns() -> None:
    base = {"side": ["R", "S"], "key": [1.0, 2.0], "value": [0.0, 0.0]}
    assert list(columns_from_arrow(pa.table({**base, "time": pa.array([None, None], pa.int64())})
                                   ).times) == [], "no time at all: the server's clock"
    assert list(columns_from_arrow(pa.table({**base, "time": [1, 2],
                                             "end": pa.array([None, None], pa.int64())})).ends) == []
    with pytest.raises(ValueError, match="either every event has a time or none"):
        columns_from_arrow(pa.table({**base, "time": [1, None]}))
    with pytest.raises(ValueError, match="interval ends need a time column"):
        columns_from_arrow(pa.table({**base, "end": [1, 2]}))
    with pytest.raises(ValueError, match=r"missing column\(s\): key, value"):
        columns_from_arrow(pa.table({"side": ["R"]}))


# ---- matches as columns --------------------------------------------------------------------------


def _pairs_by_row(c: MatchColumns) -> list[tuple[tuple[str, str], ...]]:
    off = c.pair_offsets
    return [tuple(zip(c.r_id[off[i]:off[i + 1]], c.s_id[off[i]:off[i + 1]], strict=True))
            for i in range(len(c))]


def _check(c: MatchColumns, want: list[Match]) -> None:
    assert len(c) == len(want)
    assert c.subscription_id.tolist() == [m.subscription_id for m in want]
    assert c.seq.tolist() == [m.seq for m in want] and c.sign.tolist() == [m.sign for m in want]
    assert c.count.tolist() == [m.count for m in want]
    assert c.op.tolist() == [m.op for m in want]
    assert c.event_side.tolist() == [m.event.side if m.event else "" for m in want]
    assert c.event_id.tolist() == [m.event.id if m.event else "" for m in want]
    assert c.received_unix_nanos.tolist() == [m.received_unix_nanos for m in want]
    assert _pairs_by_row(c) == [m.pairs for m in want]
    assert c.pair_row.tolist() == [i for i, m in enumerate(want) for _ in m.pairs]
    rows = c.to_arrow().to_pydict()
    assert rows["seq"] == [m.seq for m in want] and rows["op"] == [m.op for m in want]
    assert rows["event_id"] == [m.event.id if m.event else "" for m in want]
    pairs = c.pairs_arrow().to_pydict()
    assert list(zip(pairs["seq"], pairs["r_id"], pairs["s_id"], strict=True)) == [
        (m.seq, r, s) for m in want for r, s in m.pairs]
    assert c.r_id_arrow.to_pylist() == [r for m in want for r, _ in m.pairs]


@settings(max_examples=150, deadline=None)
@given(match_batches(), st.data())
def test_both_forms_of_a_batch_give_the_same_columns(mb: pb.MatchBatch, data: st.DataObject) -> None:
    want = expected_rows(mb)
    for form in (mb, columnar(mb)):
        _check(MatchColumns.of_batch(form), want)
        keep = sorted(data.draw(st.sets(st.integers(0, max(len(want) - 1, 0)), max_size=len(want)))
                      if want else [])
        _check(MatchColumns.of_batch(form).take(np.array(keep, dtype=np.int64)),
               [want[i] for i in keep])


def test_columns_of_one_match_typed_or_wire() -> None:
    typed = Match(3, 7, -1, 2, (("r1", "s1"), ("r1", "s2")), "delete", EventRef("R", "r1"), 11)
    wire = pb.Match(subscription_id=3, seq=7, sign=-1, count=2, op="delete",
                    event=pb.EventRef(side=pb.SIDE_R, id="r1"), received_unix_nanos=11,
                    pairs=[pb.Pair(r_id="r1", s_id="s1"), pb.Pair(r_id="r1", s_id="s2")])
    for m in (typed, wire, Match(3, 7, -1, 2, typed.pairs, "delete", EventRef("R", "r1"), 11,
                                 wire=wire)):
        _check(MatchColumns.of_match(m), [typed])
    snapshot = Match(1, 2, 1, 1, (), "snapshot", None, 0)
    c = MatchColumns.of_match(snapshot)
    assert c.event_side.tolist() == [""] and c.event_id.tolist() == [""] and len(c.r_id) == 0
    assert repr(c) == "MatchColumns(1 rows, 0 pairs)"
