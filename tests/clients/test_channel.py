"""The client's channel: the bearer token on every call (never printed), every failed call's
``grpc.RpcError`` typed (unary outcomes, futures, response streams, raw stubs), and the TLS
options checked before anything connects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest

from hotjoin.clients import Client, InvalidArgument, NotFound, Unavailable
from hotjoin.clients import errors as E
from hotjoin.clients.channel import (
    CHANNEL_OPTIONS,
    MAX_MESSAGE_BYTES,
    BearerToken,
    TypedErrors,
    credentials,
    make_channel,
    read_file,
)
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.app import HotjoinServer


class FakeRpcError(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    """A failed call as gRPC raises it: a status code and details."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class Details:
    """The call details an interceptor sees."""

    def __init__(self, metadata: Any = None) -> None:
        self.method, self.timeout, self.metadata = "/hotjoin.v1.TopicService/GetTopic", 2.5, metadata
        self.credentials, self.wait_for_ready, self.compression = None, True, None


class FailedCall:
    """A unary call's outcome that failed with ``error``."""

    def __init__(self, error: grpc.RpcError) -> None:
        self.error, self.cancelled = error, False

    def result(self, timeout: float | None = None) -> Any:
        raise self.error

    def exception(self, timeout: float | None = None) -> BaseException:
        return self.error

    def cancel(self) -> bool:
        self.cancelled = True
        return True


class BrokenStream:
    """A response stream that yields ``items``, then fails with ``error``."""

    def __init__(self, items: list[Any], error: grpc.RpcError) -> None:
        self.items, self.error = list(items), error

    def __next__(self) -> Any:
        if self.items:
            return self.items.pop(0)
        raise self.error

    def code(self) -> grpc.StatusCode:
        return self.error.code()


def _raises(exc: type[BaseException], fn: object) -> BaseException:
    with pytest.raises(exc) as info:
        fn()  # type: ignore[operator]
    assert not isinstance(info.value, grpc.RpcError), "a raw gRPC error reached the caller"
    return info.value


@pytest.mark.parametrize("kind", ["unary_unary", "unary_stream", "stream_unary", "stream_stream"])
def test_the_token_is_added_to_every_kind_of_call(kind: str) -> None:
    seen: list[tuple[Any, Any]] = []
    out = getattr(BearerToken("s3cret"), f"intercept_{kind}")(
        lambda d, r: seen.append((d, r)) or "response", Details([("x-trace", "1")]), "request")
    assert out == "response"
    (details, request), = seen
    assert request == "request"
    assert list(details.metadata) == [("x-trace", "1"), ("authorization", "Bearer s3cret")]
    assert (details.method, details.timeout, details.wait_for_ready) == (
        "/hotjoin.v1.TopicService/GetTopic", 2.5, True)


def test_the_token_is_added_to_a_call_without_metadata_and_never_printed() -> None:
    token = BearerToken("s3cret")
    details = token.intercept_unary_unary(lambda d, r: d, Details(None), None)
    assert list(details.metadata) == [("authorization", "Bearer s3cret")]
    assert "s3cret" not in repr(token) and "s3cret" not in str(token)
    assert repr(token) == "BearerToken(<redacted>)"


@pytest.mark.parametrize("kind", ["unary_unary", "stream_unary"])
def test_a_failed_unary_outcome_is_typed(kind: str) -> None:
    call = FailedCall(FakeRpcError(grpc.StatusCode.NOT_FOUND, "topic 'x' does not exist"))
    outcome = getattr(TypedErrors(), f"intercept_{kind}")(lambda d, r: call, Details(), None)
    e = _raises(NotFound, outcome.result)
    assert str(e) == "NOT_FOUND: topic 'x' does not exist"
    assert isinstance(outcome.exception(), NotFound)
    assert outcome.cancel() and call.cancelled, "the rest is the call's own"


def test_a_successful_unary_outcome_passes_through() -> None:
    class Done:
        def result(self, timeout: float | None = None) -> str:
            return "ok"

        def exception(self, timeout: float | None = None) -> None:
            return None

    outcome = TypedErrors().intercept_unary_unary(lambda d, r: Done(), Details(), None)
    assert outcome.result() == "ok" and outcome.exception() is None


@pytest.mark.parametrize("kind", ["unary_stream", "stream_stream"])
def test_a_stream_fails_typed_at_the_next_that_fails(kind: str) -> None:
    call = BrokenStream([1, 2], FakeRpcError(grpc.StatusCode.UNAVAILABLE, "gone"))
    stream = getattr(TypedErrors(), f"intercept_{kind}")(lambda d, r: call, Details(), None)
    assert iter(stream) is stream
    assert next(stream) == 1 and next(stream) == 2
    e = _raises(Unavailable, lambda: next(stream))
    assert e.message == "gone" and isinstance(e, ConnectionError)
    assert stream.code() == grpc.StatusCode.UNAVAILABLE


def test_an_error_that_is_not_a_call_is_unknown() -> None:
    stream = TypedErrors().intercept_unary_stream(
        lambda d, r: BrokenStream([], grpc.RpcError("no status")), Details(), None)
    assert isinstance(_raises(E.Unknown, lambda: next(stream)), E.CallError)


def test_read_file(tmp_path: Path) -> None:
    f = tmp_path / "ca.pem"
    f.write_bytes(b"PEM")
    assert read_file(f, "TLS CA file") == b"PEM" and read_file(str(f), "x") == b"PEM"
    assert read_file(None, "TLS CA file") is None
    with pytest.raises(ValueError, match=r"^cannot read TLS CA file .*nope\.pem: No such file"):
        read_file(tmp_path / "nope.pem", "TLS CA file")


def test_credentials_only_when_tls_is_asked_for(tmp_path: Path) -> None:
    assert credentials(False, None, None, None) is None
    assert isinstance(credentials(True, None, None, None), grpc.ChannelCredentials)
    with pytest.raises(ValueError, match="both a client certificate and its key"):
        credentials(True, None, tmp_path / "c.crt", None)
    with pytest.raises(ValueError, match="both a client certificate and its key"):
        credentials(False, None, None, tmp_path / "c.key")
    with pytest.raises(ValueError, match="cannot read TLS CA file"):
        credentials(False, tmp_path / "missing-ca.pem", None, None)  # a CA alone means TLS
    with pytest.raises(ValueError, match="cannot read TLS client key"):
        credentials(False, None, tmp_path / "c.crt", tmp_path / "c.key")


def test_message_limits() -> None:
    assert MAX_MESSAGE_BYTES == 256 * 1024 * 1024
    assert dict(CHANNEL_OPTIONS) == {"grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
                                     "grpc.max_send_message_length": MAX_MESSAGE_BYTES}


def test_make_channel_refuses_a_certificate_without_its_key(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="both a client certificate and its key"):
        make_channel("127.0.0.1:1", tls_cert=tmp_path / "c.crt")


def test_a_channel_to_nowhere_fails_typed() -> None:
    channel = make_channel("127.0.0.1:1", token="t")
    try:
        get_topic = channel.unary_unary("/hotjoin.v1.TopicService/GetTopic",
                                        request_serializer=pb.GetTopicRequest.SerializeToString,
                                        response_deserializer=pb.Topic.FromString)
        _raises(Unavailable, lambda: get_topic(pb.GetTopicRequest(name="x"), timeout=5))
    finally:
        channel.close()


def test_raw_stubs_of_the_blocking_client_raise_typed_errors(server: HotjoinServer) -> None:
    with Client(server.target, timeout=10) as c:
        _raises(NotFound, lambda: c.topics.GetTopic(pb.GetTopicRequest(name="nope")))
        _raises(NotFound, lambda: next(iter(c.listening.Listen(pb.ListenRequest(topic="nope",
                                                                                 subscriber="x")))))
        _raises(InvalidArgument, lambda: c.subscriptions.SubscribeStream(
            iter([pb.SubscribeManyRequest(topic="")])))
        _raises(NotFound, lambda: list(c.publishing.PublishStream(
            iter([pb.PublishRequest(topic="nope")]))))
        future = c.topics.GetTopic.future(pb.GetTopicRequest(name="nope"))
        assert isinstance(future.exception(), NotFound)
        _raises(NotFound, future.result)
