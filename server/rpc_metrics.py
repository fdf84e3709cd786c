"""Per-RPC metrics from a server interceptor: requests by method and status code, latency by
method, streams in flight (docs/reference/metrics.md).

The interceptor is the outermost one (``server/app.py``), so it also counts what the guard
refuses (UNAUTHENTICATED, RESOURCE_EXHAUSTED). Label values are bounded: ``method`` is one of
the methods the server registered (``Service/Method``, e.g. ``PublishService/Publish``; anything
else, such as an unknown method a client probes, is ``other``), ``code`` one of gRPC's 17
status codes. A call's latency is the time from the handler being invoked until its response
(or its last streamed response) was produced; for streaming-response RPCs such as ``Listen``
that is the stream's lifetime, so they are measured by ``hotjoin_rpc_streams_in_flight``
instead and left out of the latency histogram.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import grpc

from hotjoin.server.metrics import RPC_DURATION, RPC_REQUESTS, RPC_STREAMS


def _code_name(context: Any, failed: bool, cancelled: bool = False) -> str:
    """The status the call ended with: what the handler set or aborted with, else OK (or
    UNKNOWN when it raised without setting one, which is what gRPC sends then; CANCELLED when
    the client went away in the middle of a stream)."""
    code = None
    try:
        code = context.code()
    except Exception:  # noqa: BLE001 (a context without code(): report what we know)
        code = None
    if isinstance(code, grpc.StatusCode):
        return code.name
    if cancelled:
        return "CANCELLED"
    return "UNKNOWN" if failed else "OK"


class _Recorded:
    """A servicer context that remembers the status code a handler set or aborted with (gRPC's
    asyncio server does not report it back to the pool-run handlers' context); everything
    else is delegated."""

    __slots__ = ("_ctx", "_code")

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self._code: grpc.StatusCode | None = None

    def abort(self, code: grpc.StatusCode, details: str = "", *rest: Any) -> Any:
        self._code = code
        return self._ctx.abort(code, details, *rest)

    def set_code(self, code: grpc.StatusCode) -> None:
        self._code = code
        self._ctx.set_code(code)

    def code(self) -> grpc.StatusCode | None:
        return self._code

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


def method_label(full_method: str) -> str:
    """``/hotjoin.v1.PublishService/Publish`` → ``PublishService/Publish``."""
    service, _, method = full_method.lstrip("/").rpartition("/")
    return f"{service.rpartition('.')[2]}/{method}"


class RpcMetricsInterceptor(grpc.aio.ServerInterceptor):
    """Counts every RPC by method and status code and times the ones with a single response.

    Only methods the server registered have a handler, so the ``method`` label takes at most
    that many values; a call to anything else is counted as ``other`` / ``UNIMPLEMENTED``.
    """

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        return self.measure(await continuation(handler_call_details), handler_call_details)

    def measure(self, handler: grpc.RpcMethodHandler | None,
                handler_call_details: grpc.HandlerCallDetails) -> Any:
        """``handler`` wrapped to be counted (coroutines stay coroutines)."""
        if handler is None:
            RPC_REQUESTS.labels("other", "UNIMPLEMENTED").inc()
            return None
        return _wrap(handler, method_label(handler_call_details.method))


class _Counted:
    """One call, counted: in flight while open (streams) or timed (single responses), then
    counted once with the status it ended with (cancelled when the client went away: gRPC
    closes a generator, or cancels a coroutine)."""

    __slots__ = ("_label", "_context", "_stream", "_t0")

    def __init__(self, label: str, context: _Recorded, stream: bool) -> None:
        self._label, self._context, self._stream = label, context, stream
        self._t0 = 0.0

    def __enter__(self) -> None:
        if self._stream:
            RPC_STREAMS.labels(self._label).inc()
        self._t0 = time.perf_counter()

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if self._stream:
            RPC_STREAMS.labels(self._label).dec()
        else:
            RPC_DURATION.labels(self._label).observe(time.perf_counter() - self._t0)
        cancelled = kind is not None and issubclass(kind, (asyncio.CancelledError, GeneratorExit))
        RPC_REQUESTS.labels(self._label, _code_name(self._context, kind is not None, cancelled)).inc()


def _wrap(handler: grpc.RpcMethodHandler, label: str) -> grpc.RpcMethodHandler:
    """``handler`` counted; a coroutine stays a coroutine (it runs on the event loop)."""
    deser, ser = handler.request_deserializer, handler.response_serializer
    if handler.response_streaming:
        inner = handler.stream_stream if handler.request_streaming else handler.unary_stream
        make = (grpc.stream_stream_rpc_method_handler if handler.request_streaming
                else grpc.unary_stream_rpc_method_handler)
        if inspect.isasyncgenfunction(inner):
            async def streaming_async(request: Any, context: Any) -> AsyncIterator[Any]:
                context = _Recorded(context)
                with _Counted(label, context, stream=True):
                    async for out in inner(request, context):
                        yield out

            return make(streaming_async, deser, ser)

        def streaming(request: Any, context: Any) -> Iterator[Any]:
            context = _Recorded(context)
            with _Counted(label, context, stream=True):
                yield from inner(request, context)

        return make(streaming, deser, ser)

    inner1 = handler.stream_unary if handler.request_streaming else handler.unary_unary
    make1 = (grpc.stream_unary_rpc_method_handler if handler.request_streaming
             else grpc.unary_unary_rpc_method_handler)
    if inspect.iscoroutinefunction(inner1):
        async def unary_async(request: Any, context: Any) -> Any:
            context = _Recorded(context)
            with _Counted(label, context, stream=False):
                return await inner1(request, context)

        return make1(unary_async, deser, ser)

    def unary(request: Any, context: Any) -> Any:
        context = _Recorded(context)
        with _Counted(label, context, stream=False):
            return inner1(request, context)

    return make1(unary, deser, ser)
