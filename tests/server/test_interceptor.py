"""The guard interceptor (``server/interceptor.py``) as a unit, with gRPC test doubles: a
missing or bad token is UNAUTHENTICATED before the request is read; a request over the caller's
``message_bytes`` is RESOURCE_EXHAUSTED unparsed; a body that does not parse is
INVALID_ARGUMENT with the parser's reason; health checks are open; the servicer sees the
caller's session (docs/how-to/security.md). Through the wire: ``test_server_security*.py``."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_doubles import Aborted, CallDetails, FakeContext, call, handler

from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.auth import ANONYMOUS, Authenticator, Session, hash_token
from hotjoin.server.interceptor import (
    HEALTH_PREFIX,
    GuardInterceptor,
    SessionContext,
    peer_of,
    session_of,
)
from hotjoin.server.metrics import AUTH_FAILURES
from hotjoin.server.quotas import Limits, Quotas

KINDS = ["unary_unary", "unary_stream", "stream_unary", "stream_stream"]


def _message() -> Any:
    """A small protobuf message of the wire API."""
    return pb.LogBatch(ops=[pb.LogOp(seq=7)])


@pytest.fixture
def authenticator(tmp_path: Path) -> Authenticator:
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({"principals": {
        "alice": {"tokens": [hash_token("t1")], "limits": {"message_bytes": 64}}}}))
    return Authenticator(path)


def _echo(kind: str, seen: list, form: str = "sync") -> Any:
    """A behavior recording (request, session) and answering the request back: a plain function
    or, with ``form`` "async", a coroutine as the server's streams are."""
    if form == "async":
        return _echo_async(kind, seen)
    if kind.startswith("stream"):
        def behavior(requests: Any, context: Any) -> Any:
            reqs = list(requests)
            seen.append((reqs, session_of(context)))
            return iter(reqs) if kind.endswith("stream") else reqs
    else:
        def behavior(request: Any, context: Any) -> Any:
            seen.append((request, session_of(context)))
            return iter([request]) if kind.endswith("stream") else request
    return behavior


def _echo_async(kind: str, seen: list) -> Any:
    if kind == "stream_stream":
        async def each(requests: Any, context: Any) -> AsyncIterator[Any]:
            reqs = [r async for r in requests]
            seen.append((reqs, session_of(context)))
            for r in reqs:
                yield r
        return each
    if kind == "stream_unary":
        async def gathered(requests: Any, context: Any) -> Any:
            reqs = [r async for r in requests]
            seen.append((reqs, session_of(context)))
            return reqs
        return gathered
    if kind == "unary_stream":
        async def echoed(request: Any, context: Any) -> AsyncIterator[Any]:
            seen.append((request, session_of(context)))
            yield request
        return echoed

    async def one(request: Any, context: Any) -> Any:
        seen.append((request, session_of(context)))
        return request
    return one


async def _requests(parsed: list[Any]) -> AsyncIterator[Any]:
    for r in parsed:
        yield r


def _invoke(wrapped: grpc.RpcMethodHandler, kind: str, bodies: list[bytes], form: str = "sync") -> Any:
    """Deserialize ``bodies`` with the wrapped handler, as gRPC does, then call it."""
    parsed = [wrapped.request_deserializer(b) for b in bodies]
    if kind.startswith("stream"):
        request = _requests(parsed) if form == "async" else iter(parsed)
    else:
        request = parsed[0]
    return call(wrapped, request, FakeContext())


@pytest.mark.parametrize("form", ["sync", "async"])
@pytest.mark.parametrize("kind", KINDS)
def test_an_authenticated_caller_reaches_the_servicer_with_its_session(
        kind: str, authenticator: Authenticator, form: str) -> None:
    seen: list = []
    guard = GuardInterceptor(authenticator, Quotas())
    wrapped = guard.guard(handler(kind, _echo(kind, seen, form), pb.LogBatch.FromString),
        CallDetails("/hotjoin.v1.PublishService/Publish", (("authorization", "Bearer t1"),)))
    _invoke(wrapped, kind, [_message().SerializeToString()], form)
    request, session = seen[0]
    assert (request[0] if isinstance(request, list) else request) == _message()
    assert isinstance(session, Session) and session.current().name == "alice"


@pytest.mark.parametrize("form", ["sync", "async"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("metadata", "reason"), [((), "missing"),
                                                  ((("authorization", "Bearer no"),), "invalid"),
                                                  ((("authorization", "Basic x"),), "malformed")])
def test_a_bad_token_is_unauthenticated_unread(kind: str, metadata: tuple, reason: str,
                                               authenticator: Authenticator, form: str) -> None:
    seen: list = []
    guard = GuardInterceptor(authenticator, Quotas())
    wrapped = guard.guard(handler(kind, _echo(kind, seen, form), pb.LogBatch.FromString),
        CallDetails("/hotjoin.v1.PublishService/Publish", metadata))
    before = AUTH_FAILURES.labels(reason)._value.get()
    with pytest.raises(Aborted) as e:
        _invoke(wrapped, kind, [b"\xff not protobuf"], form)  # refused unread: no parse error
    assert e.value.code == grpc.StatusCode.UNAUTHENTICATED and not seen
    assert AUTH_FAILURES.labels(reason)._value.get() == before + 1


@pytest.mark.parametrize("form", ["sync", "async"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_message_over_the_caller_s_limit_is_resource_exhausted(
        kind: str, authenticator: Authenticator, form: str) -> None:
    seen: list = []
    guard = GuardInterceptor(authenticator, Quotas())
    wrapped = guard.guard(handler(kind, _echo(kind, seen, form), pb.LogBatch.FromString),
        CallDetails("/hotjoin.v1.PublishService/Publish", (("authorization", "Bearer t1"),)))
    big = pb.LogBatch(ops=[pb.LogOp(seq=i) for i in range(40)]).SerializeToString()
    assert len(big) > 64
    exact = pb.LogBatch(ops=[pb.LogOp(seq=1)] * 16).SerializeToString()[:64]
    with pytest.raises(Exception) as e:  # noqa: PT011 - unary: aborted; streams: raised
        _invoke(wrapped, kind, [big], form)
    err = e.value
    code = err.code if isinstance(err, Aborted) else grpc.StatusCode[err.code]  # type: ignore
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "64 bytes" in str(err)
    assert len(exact) == 64 and wrapped.request_deserializer(exact)[0] == 64  # at the limit: read


@pytest.mark.parametrize("form", ["sync", "async"])
@pytest.mark.parametrize("kind", KINDS)
def test_an_undecodable_body_is_invalid_argument_with_the_reason(kind: str, form: str) -> None:
    seen: list = []
    guard = GuardInterceptor(None, Quotas(Limits()))
    wrapped = guard.guard(handler(kind, _echo(kind, seen, form), pb.LogBatch.FromString),
        CallDetails("/hotjoin.v1.PublishService/Publish"))
    with pytest.raises(Exception) as e:  # noqa: PT011 - unary: aborted; streams: raised
        _invoke(wrapped, kind, [b"\xff\xff\xff"], form)
    err = e.value
    code = err.code if isinstance(err, Aborted) else grpc.StatusCode[err.code]  # type: ignore
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "is not a valid protobuf message of this RPC" in str(err) and not seen


def test_health_checks_are_open_and_without_a_guard_everyone_is_anonymous(
        authenticator: Authenticator) -> None:
    seen: list = []
    guard = GuardInterceptor(authenticator, Quotas(Limits(message_bytes=1)))
    wrapped = guard.guard(handler("unary_unary", _echo("unary_unary", seen), pb.LogBatch.FromString),
        CallDetails(HEALTH_PREFIX + "Check"))  # no token, and over the 1-byte limit
    _invoke(wrapped, "unary_unary", [_message().SerializeToString()])
    assert seen[0][1].current() is ANONYMOUS
    assert GuardInterceptor(None, Quotas()).guard(None,
                                                              CallDetails("/x/y")) is None


def test_session_context_delegates_and_helpers() -> None:
    ctx = FakeContext()
    s = Session(ANONYMOUS)
    wrapped = SessionContext(ctx, s)  # type: ignore[arg-type]
    assert session_of(wrapped) is s and wrapped.peer() == ctx.peer()
    assert session_of(ctx).current() is ANONYMOUS  # no interceptor ran
    assert peer_of(ctx) == "ipv4:127.0.0.1:5555" and peer_of(object()) is None
