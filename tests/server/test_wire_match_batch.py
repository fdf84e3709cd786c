"""The compiled MatchBatch column encoder against protobuf's own repeated-field building."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.convert import match_batch_columns

U64 = st.integers(0, 2**63 - 1)
edges = st.sampled_from([0, 1, 127, 128, 16383, 16384, 2**31 - 1, 2**32, 2**56, 2**63 - 1])


@settings(deadline=None)  # the first example compiles the encoder
@given(rows=st.lists(st.tuples(st.one_of(U64, edges), st.one_of(U64, edges),
                               st.sampled_from([1, -1]), st.one_of(U64, edges),
                               st.integers(0, 2**32 - 1)), max_size=40))
def test_columns_parse_back_to_the_same_message(rows: list[tuple[int, ...]]) -> None:
    cols = [np.array([r[k] for r in rows], dtype=np.int64) for k in range(5)]
    want = pb.MatchBatch()
    want.subscription_ids.extend(cols[0].tolist())
    want.seqs.extend(cols[1].tolist())
    want.signs.extend(cols[2].tolist())
    want.counts.extend(cols[3].tolist())
    want.op_index.extend(cols[4].tolist())
    got = match_batch_columns(*cols)
    assert got == want
    assert got.SerializeToString() == want.SerializeToString()
