"""Per-RPC metrics (``server/rpc_metrics.py``) as a unit, with gRPC test doubles: every call is
counted once by method and final status (set, aborted, raised, cancelled), single-response calls
are timed, streams are counted in flight while open, and unknown methods are ``other``
(docs/reference/metrics.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import grpc
import pytest
from grpc_doubles import Aborted, CallDetails, FakeContext, call, handler
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.server.metrics import RPC_DURATION, RPC_REQUESTS, RPC_STREAMS
from hotjoin.server.rpc_metrics import RpcMetricsInterceptor, _code_name, method_label

KINDS = ["unary_unary", "unary_stream", "stream_unary", "stream_stream"]


def _count(label: str, code: str) -> float:
    return RPC_REQUESTS.labels(label, code)._value.get()


def _observations(label: str) -> float:
    return next(s.value for m in RPC_DURATION.collect() for s in m.samples
                if s.name.endswith("_count") and s.labels.get("method") == label)


@given(st.text("abcXYZ._", min_size=1, max_size=8), st.text("abcXYZ", min_size=1, max_size=8),
       st.text("abc", max_size=6))
def test_method_label_keeps_the_service_s_last_name_and_the_method(package: str, service: str,
                                                                   method: str) -> None:
    full = f"/{package}.{service}/{method}"
    assert method_label(full) == f"{service}/{method}"
    assert method_label(full.lstrip("/")) == f"{service}/{method}"


def test_code_names() -> None:
    ctx = FakeContext()
    assert _code_name(ctx, failed=False) == "OK"
    assert _code_name(ctx, failed=True) == "UNKNOWN"
    assert _code_name(ctx, failed=True, cancelled=True) == "CANCELLED"
    ctx.set_code(grpc.StatusCode.NOT_FOUND)
    assert _code_name(ctx, failed=True, cancelled=True) == "NOT_FOUND"  # what was set wins
    assert _code_name(object(), failed=False) == "OK"  # a context without code()


def _behavior(kind: str, outcome: str, form: str = "sync") -> Any:
    """A handler behavior of ``kind`` ending with ``outcome``: ok, set (NOT_FOUND), abort
    (INVALID_ARGUMENT) or raise; a plain function (run in the server's pool) or, with ``form``
    "async", a coroutine (run on the event loop)."""
    def end(context: FakeContext) -> None:
        if outcome == "set":
            context.set_code(grpc.StatusCode.NOT_FOUND)
        elif outcome == "abort":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad")
        elif outcome == "raise":
            raise RuntimeError("bug")

    if form == "async":
        if kind.endswith("stream"):
            async def agen(request: Any, context: FakeContext) -> AsyncIterator[int]:
                yield 1
                await asyncio.sleep(0)
                end(context)
                yield 2
            return agen

        async def coro(request: Any, context: FakeContext) -> int:
            await asyncio.sleep(0)
            end(context)
            return 1
        return coro

    if kind.endswith("stream"):
        def gen(request: Any, context: FakeContext) -> Iterator[int]:
            yield 1
            end(context)
            yield 2
        return gen

    def one(request: Any, context: FakeContext) -> int:
        end(context)
        return 1
    return one


@pytest.mark.parametrize("form", ["sync", "async"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("outcome", "code"), [("ok", "OK"), ("set", "NOT_FOUND"),
                                               ("abort", "INVALID_ARGUMENT"),
                                               ("raise", "UNKNOWN")])
def test_each_call_is_counted_once_with_its_status(kind: str, outcome: str, code: str,
                                                   form: str) -> None:
    label = f"Svc{kind}{form}/{outcome}"
    wrapped = RpcMetricsInterceptor().measure(handler(kind, _behavior(kind, outcome, form)),
        CallDetails(f"/hotjoin.v1.Svc{kind}{form}/{outcome}"))
    before = _count(label, code)
    streaming = kind.endswith("stream")
    if outcome in ("abort", "raise"):
        with pytest.raises((Aborted, RuntimeError)):
            call(wrapped, iter([0]) if kind.startswith("stream") else 0, FakeContext())
    else:
        call(wrapped, 0, FakeContext())
    assert _count(label, code) == before + 1
    if streaming:
        assert RPC_STREAMS.labels(label)._value.get() == 0  # back to none in flight
    else:
        assert _observations(label) >= 1  # single-response calls are timed


def test_a_stream_is_in_flight_while_open_and_cancelled_when_closed() -> None:
    label = "Svc/Listen"
    wrapped = RpcMetricsInterceptor().measure(handler("unary_stream", _behavior("unary_stream", "ok")),
        CallDetails("/hotjoin.v1.Svc/Listen"))
    before = _count(label, "CANCELLED")
    stream = wrapped.unary_stream(0, FakeContext())
    assert next(stream) == 1
    assert RPC_STREAMS.labels(label)._value.get() == 1
    stream.close()  # gRPC closes the generator when the client cancels
    assert RPC_STREAMS.labels(label)._value.get() == 0
    assert _count(label, "CANCELLED") == before + 1


def test_a_coroutine_stream_cancelled_by_the_event_loop_counts_cancelled() -> None:
    """gRPC's asyncio server cancels a stream's task when its client goes away: the handler
    sees ``CancelledError``; the stream leaves the in-flight gauge, counted CANCELLED."""
    label = "Svc/ListenAsync"
    wrapped = RpcMetricsInterceptor().measure(
        handler("unary_stream", _behavior("unary_stream", "ok", "async")),
        CallDetails("/hotjoin.v1.Svc/ListenAsync"))
    before = _count(label, "CANCELLED")

    async def cancel_after_first() -> None:
        stream = wrapped.unary_stream(0, FakeContext())
        assert await stream.__anext__() == 1
        assert RPC_STREAMS.labels(label)._value.get() == 1
        with pytest.raises(asyncio.CancelledError):
            await stream.athrow(asyncio.CancelledError())

    asyncio.run(cancel_after_first())
    assert RPC_STREAMS.labels(label)._value.get() == 0
    assert _count(label, "CANCELLED") == before + 1


def test_an_unknown_method_is_other_unimplemented() -> None:
    before = _count("other", "UNIMPLEMENTED")
    assert RpcMetricsInterceptor().measure(None,
                                                     CallDetails("/x.Y/Probe")) is None
    assert _count("other", "UNIMPLEMENTED") == before + 1
