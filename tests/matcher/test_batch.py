"""Batch columns and admission (``matcher/batch.py``): a batch's columns are checked entry by
entry (a bad entry is INVALID with a one-line reason, the others stay valid), lengths must agree,
output forms are named, and a rejected event's reason is the one-at-a-time call's message."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.matcher.batch import (
    OUTPUTS,
    TIME_MAX,
    BatchResult,
    EventStatus,
    check_lengths,
    check_output,
    empty_output,
    publish_columns,
    reason_for,
)
from hotjoin.matcher.errors import DuplicateEventError, LateEventError, UnknownEventError


def test_outputs_are_named_and_empty_outputs_have_no_rows() -> None:
    assert OUTPUTS == ("pairs", "affected", "none")
    for name in OUTPUTS:
        assert check_output(name) == name
        out = empty_output(name)
        assert len(out) == 0 and out.subscription.dtype == np.int64
        assert (out.r_id is not None) == (name == "pairs")
    with pytest.raises(ValueError, match="output must be one of pairs, affected, none"):
        check_output("rows")


def test_lengths_must_agree_and_none_columns_are_skipped() -> None:
    assert check_lengths(a=[1, 2], b=np.zeros(2), c=None) == 2
    assert check_lengths() == 0
    with pytest.raises(ValueError, match="different lengths: a=2, b=3"):
        check_lengths(a=[1, 2], b=[1, 2, 3])
    with pytest.raises(ValueError, match="keys must be a sequence or an array, got int"):
        check_lengths(keys=5)


def test_each_bad_entry_is_invalid_with_its_reason_and_the_rest_stay_valid() -> None:
    cols = publish_columns(
        ["R", "S", "X", "R", "S", "R", "S", "S"],
        ["a", "b", "c", "", "e", "f", "g", "h"],
        [1.0, 2.0, 3.0, 4.0, math.nan, 6.0, 7.0, 8.0],
        [0.0] * 8,
        [1, 2, 3, 4, 5, TIME_MAX + 1, 7, -TIME_MAX],
        [b"x", None, b"", b"", b"", b"", "text", b""])
    assert cols.valid.tolist() == [True, True, False, False, False, False, False, True]
    assert set(cols.reasons) == {2, 3, 4, 5, 6}
    assert all("\n" not in r for r in cols.reasons.values())
    assert "payload must be bytes" in cols.reasons[6]
    assert cols.side[[0, 1, 7]].tolist() == [0, 1, 1]
    assert set(cols.reasons) | {0, 1, 7} == set(range(8))
    assert cols.payloads is not None and cols.payloads[1] == b""  # None is an empty payload
    assert cols.times[7] == -TIME_MAX and cols.ends is None


def test_sides_are_strings_or_integer_codes() -> None:
    cols = publish_columns(np.array([0, 1, 2, -1]), ["a", "b", "c", "d"], [0.0] * 4, [0.0] * 4,
                           [1, 1, 1, 1], None)
    assert cols.valid.tolist() == [True, True, False, False]
    assert cols.side[:2].tolist() == [0, 1]
    assert cols.reasons[2] == "side must be 'R' or 'S' (or 0/1), got 2"
    cols = publish_columns(["R", "s"], ["a", "b"], [0.0] * 2, [0.0] * 2, [1, 1], None)
    assert cols.valid.tolist() == [True, False]  # sides are case-sensitive


def test_ends_default_to_the_times_and_may_not_precede_them() -> None:
    cols = publish_columns(["R", "R", "S"], ["a", "b", "c"], [0.0] * 3, [0.0] * 3, [5, 5, 5],
                           None, ends=[5, 9, 4])
    assert cols.valid.tolist() == [True, True, False]
    assert cols.reasons == {2: "event end 4 is before its time 5"}
    assert cols.ends is not None and cols.ends[:2].tolist() == [5, 9]


@given(times=st.lists(st.integers(-2**63, 2**63 - 1), max_size=20))
def test_times_beyond_the_batch_range_are_invalid(times: list[int]) -> None:
    n = len(times)
    cols = publish_columns(["R"] * n, [f"e{i}" for i in range(n)], [0.0] * n, [0.0] * n,
                           np.array(times, dtype=np.int64), None)
    assert cols.valid.tolist() == [abs(t) <= TIME_MAX for t in times]
    assert [cols.times[i] for i in range(n) if cols.valid[i]] == [t for t in times
                                                                 if abs(t) <= TIME_MAX]


def test_reasons_are_the_one_at_a_time_messages() -> None:
    assert reason_for(EventStatus.DUPLICATE, "R", "a") == str(DuplicateEventError("R", "a"))
    assert reason_for(EventStatus.LATE, "S", "b", 3, 7) == str(LateEventError("S", "b", 3, 7))
    assert reason_for(EventStatus.NOT_FOUND, "R", "c") == str(UnknownEventError("R", "c"))
    assert reason_for(EventStatus.INVALID, "R", "d") == "invalid event"


def test_a_result_counts_the_accepted_events() -> None:
    status = np.array([EventStatus.OK, EventStatus.LATE, EventStatus.OK, EventStatus.INVALID],
                      dtype=np.int8)
    res = BatchResult(status, np.array([1, -1, 2, -1]))
    assert len(res) == 4 and res.accepted == 2 and len(res.output) == 0
