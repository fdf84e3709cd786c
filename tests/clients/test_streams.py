"""MatchStream's per-batch duplicate screen (``_fresh``) against the per-row rule."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hotjoin.clients.streams import MatchStream
from hotjoin.proto import hotjoin_pb2 as pb


def _stream(cursors: dict[int, int]) -> MatchStream:
    return MatchStream(None, pb.ListenRequest(), dict(cursors), reconnect=False,  # type: ignore[arg-type]
                       retry_delay=0.0)


@given(cursors=st.dictionaries(st.integers(0, 5), st.integers(0, 9), max_size=6),
       rows=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 12)), min_size=1, max_size=12),
       ordered=st.booleans())
def test_fresh_never_passes_a_duplicate(cursors: dict[int, int], rows: list[tuple[int, int]],
                                        ordered: bool) -> None:
    """A batch the screen lets through has no row at or below its cursor; a batch of rows in
    seq order all above the top cursor, or meeting it only with other subscriptions, passes."""
    if ordered:
        rows = sorted(rows, key=lambda r: r[1])
    ms = _stream(cursors)
    sids, seqs = [s for s, _ in rows], [q for _, q in rows]
    dup = any(q <= cursors.get(s, -1) for s, q in rows)
    fresh = ms._fresh(sids, seqs)
    if dup:
        assert not fresh
    top = max(cursors.values(), default=-1)
    if ordered and not dup and min(seqs) >= top:
        assert fresh


def test_an_operation_split_across_batches_takes_the_fast_path() -> None:
    ms = _stream({1: 7, 2: 7, 3: 4})
    assert ms._fresh([4, 5, 1], [7, 7, 8])      # op 7 continues for other subscriptions
    assert not ms._fresh([4, 2, 1], [7, 7, 8])  # subscription 2 already has seq 7
    assert not ms._fresh([3], [4])
    assert ms._fresh([3, 1], [8, 9])
