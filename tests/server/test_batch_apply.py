"""``server/batch_apply.py``: the server's call into ``publish_batch`` gives the one-at-a-time results."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from server_harness import engine_factory

from hotjoin.matcher.model import BandJoin, Event, Range
from hotjoin.server.batch_apply import BatchResult, EventStatus, apply_publish_batch


def _cols() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    sides = np.array([1, 0, 0, 1, 0, 7], dtype=np.int8)
    ids = np.array(["s1", "r1", "r1", "s2", "r9", "z"], dtype=object)
    keys = np.array([1.0, 1.5, 1.5, np.nan, 0.0, 0.0])
    return sides, ids, keys, np.zeros(6), np.array([10, 10, 11, 12, 1, 12], dtype=np.int64)


@pytest.mark.parametrize("output", ["affected", "pairs", "none"])
def test_batch_equals_one_at_a_time(output: str) -> None:
    factory = engine_factory()
    batch, ref = factory(lateness=2), factory(lateness=2)
    for e in (batch, ref):
        e.subscribe(BandJoin(b=Range(-1, 1)))
        e.subscribe(BandJoin(b=Range(0, 2)))
    res = apply_publish_batch(batch, *_cols(), None, output)
    expect_status, expect_seq, rows = [], [], []
    sides, ids, keys, values, times = _cols()
    for i in range(6):
        try:
            out = ref.publish_columnar(Event("RS"[sides[i]] if sides[i] in (0, 1) else "?", ids[i], keys[i],
                                             values[i], int(times[i])))
        except Exception as x:  # noqa: BLE001 - the kind of rejection is checked below
            expect_status.append(type(x).__name__)
            expect_seq.append(0)
            continue
        expect_status.append("OK")
        expect_seq.append(ref.seq)
        rows += [(i, int(q), r, s) for q, r, s in zip(out.subscription_ids, out.r_ids, out.s_ids, strict=True)]
    names = {"OK": EventStatus.OK, "DuplicateEventError": EventStatus.DUPLICATE,
             "LateEventError": EventStatus.LATE, "ValueError": EventStatus.INVALID}
    assert res.status.tolist() == [names[n] for n in expect_status]
    assert res.status.tolist() == [EventStatus.OK, EventStatus.OK, EventStatus.DUPLICATE, EventStatus.INVALID,
                                   EventStatus.LATE, EventStatus.INVALID]
    assert res.seq.tolist() == expect_seq and set(res.reasons) == {2, 3, 4, 5}
    assert batch.seq == ref.seq and batch.watermark == ref.watermark
    o = res.output
    if output == "none":
        assert len(o.event) == 0
    elif output == "pairs":
        assert sorted(zip(o.event.tolist(), o.subscription.tolist(), o.r_id.tolist(), o.s_id.tolist(),
                          strict=True)) == sorted(rows)
        assert o.count.tolist() == [1] * len(rows) and o.sign.tolist() == [1] * len(rows)
    else:
        assert o.r_id is None
        got = sorted(zip(o.event.tolist(), o.subscription.tolist(), o.count.tolist(), strict=True))
        want: dict[tuple[int, int], int] = {}
        for i, q, _, _ in rows:
            want[(i, q)] = want.get((i, q), 0) + 1
        assert got == sorted((i, q, c) for (i, q), c in want.items()) and got


def test_forwards_to_the_engines_publish_batch() -> None:
    calls: list[tuple[Any, ...]] = []

    class WithBatch:
        def publish_batch(self, *args: Any, output: str) -> BatchResult:
            calls.append((*args, output))
            return "sentinel"  # type: ignore[return-value]

    assert apply_publish_batch(WithBatch(), *_cols(), None, "pairs") == "sentinel"
    assert len(calls) == 1 and calls[0][-1] == "pairs" and calls[0][1].tolist()[0] == "s1"


def test_length_mismatch_raises_before_anything_changes() -> None:
    e = engine_factory()(lateness=0)
    sides, ids, keys, values, times = _cols()
    with pytest.raises(ValueError, match="different lengths.*keys=5"):
        apply_publish_batch(e, sides, ids, keys[:5], values, times, None, "affected")
    with pytest.raises(ValueError, match="output must be"):
        apply_publish_batch(e, sides, ids, keys, values, times, None, "all")
    assert e.seq == 0
