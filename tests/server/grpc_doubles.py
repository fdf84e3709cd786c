"""Test doubles of gRPC's server-side objects, for unit tests of the interceptors
(``tests/server/test_interceptor.py``, ``test_rpc_metrics.py``) without a server."""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass, field
from typing import Any

import grpc


class Aborted(Exception):
    """What ``FakeContext.abort`` raises (gRPC raises an exception of its own there)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details


class FakeContext:
    """A servicer context: ``set_code``/``code`` and ``abort`` as gRPC's, a fixed peer."""

    def __init__(self) -> None:
        self._code: grpc.StatusCode | None = None

    def set_code(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode | None:
        return self._code

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self._code = code
        raise Aborted(code, details)

    def peer(self) -> str:
        return "ipv4:127.0.0.1:5555"


@dataclass
class CallDetails:
    """``grpc.HandlerCallDetails``: the method and the call's metadata."""

    method: str
    invocation_metadata: tuple[tuple[str, str], ...] = field(default_factory=tuple)


def handler(kind: str, behavior: Any, deserializer: Any = None) -> grpc.RpcMethodHandler:
    """A method handler of ``kind`` (``unary_unary``, ``unary_stream``, ``stream_unary``,
    ``stream_stream``) running ``behavior``."""
    make = getattr(grpc, f"{kind}_rpc_method_handler")
    return make(behavior, deserializer, None)


def call(h: grpc.RpcMethodHandler, request: Any, context: Any) -> Any:
    """Invoke the handler's behavior as gRPC would (a streaming response is read to its end)."""
    fn = (h.stream_stream if h.request_streaming and h.response_streaming else
          h.stream_unary if h.request_streaming else
          h.unary_stream if h.response_streaming else h.unary_unary)
    out = fn(request, context)
    if inspect.isasyncgen(out):  # a coroutine handler, as gRPC's asyncio server runs it
        return asyncio.run(_collect(out))
    if inspect.iscoroutine(out):
        return asyncio.run(out)
    return list(out) if h.response_streaming else out


async def _collect(stream: Any) -> list[Any]:
    return [x async for x in stream]
