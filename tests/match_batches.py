"""Test helper: random ``MatchBatch`` messages in the repeated-field form, the same batch encoded
in the columnar form (``MatchBatchColumns``, written here from the proto's field comments), and the
``Match`` rows both must give (a brute-force expansion)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from hotjoin.clients.results import EventRef, Match
from hotjoin.proto import hotjoin_pb2 as pb

KINDS = ("publish", "delete", "snapshot")

ids = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=4)


@st.composite
def operations(draw: st.DrawFn) -> pb.Operation:
    """An operation: a snapshot has no event; a publish or delete names an R or S event."""
    op = draw(st.sampled_from(KINDS))
    side = 0 if op == "snapshot" else draw(st.sampled_from([1, 2]))
    eid = "" if op == "snapshot" else draw(ids)
    return pb.Operation(op=op, event=pb.EventRef(side=side, id=eid),
                        received_unix_nanos=draw(st.integers(0, 2**62)))


@st.composite
def match_batches(draw: st.DrawFn) -> pb.MatchBatch:
    """A batch of rows in seq order, with or without pairs (``batch_pairs``)."""
    ops = draw(st.lists(operations(), min_size=1, max_size=4))
    n = draw(st.integers(0, 8))
    with_pairs = draw(st.booleans())
    mb = pb.MatchBatch(ops=ops)
    for i in range(n):
        pc = draw(st.integers(0, 3)) if with_pairs else 0
        mb.subscription_ids.append(draw(st.integers(0, 2**40)))
        mb.seqs.append(i + 1)
        mb.signs.append(draw(st.sampled_from([1, -1])))
        mb.counts.append(pc or draw(st.integers(1, 9)))
        mb.op_index.append(draw(st.integers(0, len(ops) - 1)))
        if with_pairs:
            mb.pair_counts.append(pc)
            mb.r_ids.extend(draw(st.lists(ids, min_size=pc, max_size=pc)))
            mb.s_ids.extend(draw(st.lists(ids, min_size=pc, max_size=pc)))
    return mb


def _blob(strings: list[str]) -> tuple[bytes, bytes]:
    """(int32 offsets, UTF-8 data) of ``strings``."""
    data = [s.encode() for s in strings]
    off = np.zeros(len(data) + 1, dtype="<i4")
    np.cumsum([len(d) for d in data], out=off[1:])
    return off.tobytes(), b"".join(data)


def columnar(mb: pb.MatchBatch) -> pb.MatchBatch:
    """The columnar form of a repeated-field batch."""
    eid_off, eids = _blob([o.event.id for o in mb.ops])
    r_off, r = _blob(list(mb.r_ids))
    s_off, s = _blob(list(mb.s_ids))
    c = pb.MatchBatchColumns(
        subscription_ids=np.array(mb.subscription_ids, dtype="<u8").tobytes(),
        seqs=np.array(mb.seqs, dtype="<u8").tobytes(),
        signs=np.array(mb.signs, dtype="i1").tobytes(),
        counts=np.array(mb.counts, dtype="<u8").tobytes(),
        op_index=np.array(mb.op_index, dtype="<u4").tobytes(),
        op_kinds=bytes(KINDS.index(o.op) for o in mb.ops),
        op_sides=bytes(o.event.side for o in mb.ops),
        op_received_unix_nanos=np.array([o.received_unix_nanos for o in mb.ops], dtype="<i8").tobytes(),
        op_event_ids=eids, op_event_id_offsets=eid_off)
    if len(mb.pair_counts):
        off = np.zeros(len(mb.pair_counts) + 1, dtype="<u8")
        np.cumsum(list(mb.pair_counts), out=off[1:])
        c.pair_offsets = off.tobytes()
        c.r_ids, c.r_id_offsets, c.s_ids, c.s_id_offsets = r, r_off, s, s_off
    return pb.MatchBatch(columns=c)


def expected_rows(mb: pb.MatchBatch) -> list[Match]:
    """The ``Match`` of each row of a repeated-field batch, one row at a time."""
    at, out = 0, []
    for i in range(len(mb.subscription_ids)):
        o = mb.ops[mb.op_index[i]]
        pc = mb.pair_counts[i] if len(mb.pair_counts) else 0
        event = EventRef("RS"[o.event.side - 1], o.event.id) if o.event.side else None
        out.append(Match(mb.subscription_ids[i], mb.seqs[i], mb.signs[i], mb.counts[i],
                         tuple(zip(mb.r_ids[at:at + pc], mb.s_ids[at:at + pc], strict=True)),
                         o.op, event, o.received_unix_nanos))
        at += pc
    return out
