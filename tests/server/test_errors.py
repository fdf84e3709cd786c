"""The domain errors: each names a real gRPC status code, and every message is clipped to a
bounded number of UTF-8 bytes without splitting a character."""

from __future__ import annotations

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.server import errors
from hotjoin.server.errors import (
    ELLIPSIS,
    MAX_MESSAGE_BYTES,
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    ServiceError,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    clip,
)

EXPECTED_CODES = {
    ServiceError: grpc.StatusCode.INTERNAL,
    InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    NotFound: grpc.StatusCode.NOT_FOUND,
    AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    Unimplemented: grpc.StatusCode.UNIMPLEMENTED,
    Unavailable: grpc.StatusCode.UNAVAILABLE,
    OutOfRange: grpc.StatusCode.OUT_OF_RANGE,
    Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
}

# Text without lone surrogates (those cannot be encoded; ``clip`` replaces them).
TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=400)


def _all_error_classes() -> set[type[ServiceError]]:
    return {v for v in vars(errors).values()
            if isinstance(v, type) and issubclass(v, ServiceError)}


@pytest.mark.parametrize("cls", list(EXPECTED_CODES), ids=lambda c: c.__name__)
def test_each_error_maps_to_its_grpc_status(cls: type[ServiceError]) -> None:
    assert grpc.StatusCode[cls.code] is EXPECTED_CODES[cls]
    assert cls("boom").code == cls.code


def test_every_error_class_is_mapped_and_codes_are_distinct() -> None:
    assert _all_error_classes() == set(EXPECTED_CODES)
    codes = [cls.code for cls in EXPECTED_CODES]
    assert len(codes) == len(set(codes))


def test_errors_keep_their_message_right_and_quota() -> None:
    e = PermissionDenied("no publish right on t", right="publish")
    assert (e.message, str(e), e.right, e.code) == (
        "no publish right on t", "no publish right on t", "publish", "PERMISSION_DENIED")
    assert PermissionDenied("x").right == ""
    q = ResourceExhausted("too many subscriptions", quota="subscriptions")
    assert (q.message, q.quota) == ("too many subscriptions", "subscriptions")
    assert ResourceExhausted("x").quota == ""
    assert isinstance(q, ServiceError)


def test_a_long_message_is_clipped_on_construction() -> None:
    e = NotFound("topic " + "x" * 20_000 + " not found")
    assert len(e.message.encode()) <= MAX_MESSAGE_BYTES
    assert e.message.endswith(ELLIPSIS) and e.message.startswith("topic xxx")
    assert str(e) == e.message


@pytest.mark.parametrize("n", [MAX_MESSAGE_BYTES - 1, MAX_MESSAGE_BYTES])
def test_a_message_of_at_most_the_limit_is_kept_whole(n: int) -> None:
    text = "a" * n
    assert clip(text) == text


def test_one_byte_over_the_limit_is_cut_with_an_ellipsis() -> None:
    out = clip("a" * (MAX_MESSAGE_BYTES + 1))
    assert out == "a" * (MAX_MESSAGE_BYTES - len(ELLIPSIS.encode())) + ELLIPSIS
    assert len(out.encode()) == MAX_MESSAGE_BYTES


def test_a_multibyte_character_is_never_split() -> None:
    # "ü" is two bytes: 1021 bytes remain for the text, so 510 whole characters fit.
    out = clip("ü" * 2000)
    assert out == "ü" * 510 + ELLIPSIS
    assert len(out.encode()) == 510 * 2 + 3


@given(TEXT, st.integers(min_value=len(ELLIPSIS.encode()), max_value=300))
def test_clip_bounds_bytes_and_keeps_a_prefix(text: str, limit: int) -> None:
    out = clip(text, limit)
    raw = text.encode()
    assert len(out.encode()) <= limit
    if len(raw) <= limit:
        assert out == text
    else:
        assert out.endswith(ELLIPSIS)
        kept = out[: -len(ELLIPSIS)]
        assert text.startswith(kept)
        room = limit - len(ELLIPSIS.encode())
        # Only the bytes of one partial character (at most 3) are dropped.
        assert room - 3 <= len(kept.encode()) <= room
