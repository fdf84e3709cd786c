"""Typed errors: every status maps to its class of one hierarchy, and no raw ``grpc.RpcError``
reaches the caller of either client — unary calls, client streams, server streams and iterators
alike (the raw stubs of the blocking client: ``tests/clients/test_channel.py``)."""

from __future__ import annotations

import pickle

import grpc
import pytest
from client_harness import Api
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.clients import (
    AlreadyExists,
    BandJoin,
    CallError,
    Client,
    DeadlineExceeded,
    Event,
    FailedPrecondition,
    HotjoinError,
    InvalidArgument,
    NotFound,
    OutOfRange,
    Range,
    ResourceExhausted,
    Unavailable,
)
from hotjoin.clients import errors as E
from hotjoin.matcher.errors import HotjoinError as EngineRoot
from hotjoin.server.app import HotjoinServer
from hotjoin.server.quotas import Limits

NAMED = {
    "NOT_FOUND": E.NotFound, "ALREADY_EXISTS": E.AlreadyExists,
    "INVALID_ARGUMENT": E.InvalidArgument, "PERMISSION_DENIED": E.PermissionDenied,
    "UNAUTHENTICATED": E.Unauthenticated, "RESOURCE_EXHAUSTED": E.ResourceExhausted,
    "UNAVAILABLE": E.Unavailable, "DEADLINE_EXCEEDED": E.DeadlineExceeded,
    "FAILED_PRECONDITION": E.FailedPrecondition, "OUT_OF_RANGE": E.OutOfRange,
    "UNIMPLEMENTED": E.Unimplemented, "CANCELLED": E.Cancelled,
}


class FakeRpcError(grpc.RpcError):
    """What grpc raises for a failed call: ``code()`` and ``details()``."""

    def __init__(self, code: grpc.StatusCode, details: str | None) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str | None:
        return self._details


@pytest.mark.parametrize("status", [s for s in grpc.StatusCode if s != grpc.StatusCode.OK],
                         ids=lambda s: s.name)
def test_every_status_has_its_class(status: grpc.StatusCode) -> None:
    e = E.from_rpc_error(FakeRpcError(status, "what went wrong"))
    assert isinstance(e, CallError) and isinstance(e, HotjoinError)
    assert e.code == status.name == type(e).code
    assert e.message == "what went wrong" and str(e) == f"{status.name}: what went wrong"
    if status.name in NAMED:
        assert type(e) is NAMED[status.name]
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is type(e) and back.message == e.message


def test_the_root_is_the_engines_own() -> None:
    assert HotjoinError is EngineRoot
    assert issubclass(DeadlineExceeded, TimeoutError) and issubclass(Unavailable, ConnectionError)
    assert issubclass(InvalidArgument, ValueError)
    assert E.from_rpc_error(FakeRpcError(grpc.StatusCode.NOT_FOUND, None)).message == ""
    assert isinstance(E.from_rpc_error(grpc.RpcError("not a call")), E.Unknown)


@given(st.text(min_size=1, max_size=20), st.text(max_size=50))
def test_from_status_never_fails(code: str, message: str) -> None:
    """Any name: its class when it names a status, else ``Unknown``; the message kept as sent."""
    e = E.from_status(code, message)
    assert isinstance(e, CallError) and e.message == message
    assert type(e) is (NAMED.get(code) or E._BY_CODE.get(code) or E.Unknown)


def _raises(exc: type[BaseException], fn: object) -> BaseException:
    with pytest.raises(exc) as info:
        fn()  # type: ignore[operator]
    assert not isinstance(info.value, grpc.RpcError), "a raw gRPC error reached the caller"
    return info.value


def test_unary_stream_and_iterator_errors_are_typed(api: Api, topic: str) -> None:
    api.call("create_topic", topic, lateness=0)
    e = _raises(AlreadyExists, lambda: api.call("create_topic", topic))
    assert "already exists" in e.message
    _raises(NotFound, lambda: api.call("get_topic", "nope"))
    _raises(NotFound, lambda: api.call("stats", "nope"))
    _raises(NotFound, lambda: api.call("unsubscribe", topic, 42))
    _raises(InvalidArgument, lambda: api.call("create_topic", "a/b"))
    _raises(InvalidArgument, lambda: api.call("subscribe", topic, BandJoin(b=Range(0, 1)),
                                              delivery="sometimes"))  # checked before sending
    _raises(NotFound, lambda: api.items("list_subscriptions", "nope"))
    _raises(NotFound, lambda: api.items("listen", "nope", subscriber="me"))  # a server stream
    _raises(NotFound, lambda: api.items("listen_columns", "nope", subscriber="me"))
    sid = api.call("subscribe", topic, BandJoin(b=Range(-1, 1)), subscriber="me")
    _raises(OutOfRange, lambda: api.items("listen", topic, subscription_ids=[sid], after_seq=99))
    _raises(InvalidArgument, lambda: api.call("commit_cursors", topic, {sid: 99}))
    _raises(NotFound, lambda: api.call("subscribe_many", "nope", [BandJoin()] * 3, chunk=1))
    assert api.call("get_topic", topic).seq == 1, "the refused requests changed nothing"


def test_publisher_and_publish_stream_errors_are_typed(api: Api) -> None:
    if api.kind == "sync":
        with pytest.raises(NotFound), api.client.publisher("nope") as pub:
            pub.publish(Event("R", "r1", 1.0, 0.0, 1))
        return

    async def batches():  # type: ignore[no-untyped-def]
        yield [Event("R", "r1", 1.0, 0.0, 1)]

    async def go() -> None:
        async for _ in api.client.publish_stream("nope", batches()):
            pass

    _raises(NotFound, lambda: api._run(go()))


def test_quota_and_connection_errors(tmp_path, topic: str) -> None:  # type: ignore[no-untyped-def]
    from server_harness import engine_factory

    srv = HotjoinServer(data_dir=tmp_path / "d", port=0, engine_factory=engine_factory(),
                        limits=Limits(batch_events=2)).start()
    try:
        with Client(srv.target, timeout=10) as c:
            c.create_topic(topic)
            e = _raises(ResourceExhausted, lambda: c.publish(topic, [
                Event("R", f"r{i}", 1.0, 0.0, 1) for i in range(3)]))
            assert "exceeds the limit of 2" in e.message
    finally:
        srv.stop(0)
    with Client("127.0.0.1:1", timeout=5) as c:
        e = _raises(Unavailable, c.list_topics)
        assert e.code == "UNAVAILABLE"
        _raises(Unavailable, lambda: c.wait_ready(0.2))
    _raises(FailedPrecondition, lambda: (_ for _ in ()).throw(E.from_status("FAILED_PRECONDITION")))
