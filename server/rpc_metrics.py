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

import time
from collections.abc import Callable, Iterator
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


def method_label(full_method: str) -> str:
    """``/hotjoin.v1.PublishService/Publish`` → ``PublishService/Publish``."""
    service, _, method = full_method.lstrip("/").rpartition("/")
    return f"{service.rpartition('.')[2]}/{method}"


class RpcMetricsInterceptor(grpc.ServerInterceptor):
    """Counts every RPC by method and status code and times the ones with a single response.

    Only methods the server registered have a handler, so the ``method`` label takes at most
    that many values; a call to anything else is counted as ``other`` / ``UNIMPLEMENTED``.
    """

    def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], Any],
                          handler_call_details: grpc.HandlerCallDetails) -> Any:
        handler = continuation(handler_call_details)
        if handler is None:
            RPC_REQUESTS.labels("other", "UNIMPLEMENTED").inc()
            return None
        return _wrap(handler, method_label(handler_call_details.method))


def _wrap(handler: grpc.RpcMethodHandler, label: str) -> grpc.RpcMethodHandler:
    deser, ser = handler.request_deserializer, handler.response_serializer
    if handler.response_streaming:
        inner = handler.stream_stream if handler.request_streaming else handler.unary_stream

        def streaming(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            RPC_STREAMS.labels(label).inc()
            failed, cancelled = True, False
            try:
                yield from inner(request, context)
                failed = False
            except GeneratorExit:  # gRPC closes the generator when the client cancels
                cancelled = True
                raise
            finally:
                RPC_STREAMS.labels(label).dec()
                RPC_REQUESTS.labels(label, _code_name(context, failed, cancelled)).inc()

        make = (grpc.stream_stream_rpc_method_handler if handler.request_streaming
                else grpc.unary_stream_rpc_method_handler)
        return make(streaming, deser, ser)

    inner1 = handler.stream_unary if handler.request_streaming else handler.unary_unary

    def unary(request: Any, context: grpc.ServicerContext) -> Any:
        t0 = time.perf_counter()
        failed = True
        try:
            out = inner1(request, context)
            failed = False
            return out
        finally:
            RPC_DURATION.labels(label).observe(time.perf_counter() - t0)
            RPC_REQUESTS.labels(label, _code_name(context, failed)).inc()

    make1 = (grpc.stream_unary_rpc_method_handler if handler.request_streaming
             else grpc.unary_unary_rpc_method_handler)
    return make1(unary, deser, ser)
