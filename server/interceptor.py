"""The gRPC side of authentication and message-size limits: one server interceptor.

For every RPC but standard health checking it (1) authenticates the ``authorization: Bearer``
metadata when the server has an auth file — a missing, malformed or unknown token is answered
UNAUTHENTICATED before the request is even parsed, counted in ``hotjoin_auth_failures_total``
and audited — and (2) wraps the method handler so that each request message's size *as received*
is checked against the caller's ``message_bytes`` quota before it is parsed (a body that does not
parse is answered INVALID_ARGUMENT with the parser's reason, not gRPC's INTERNAL "Exception
deserializing request!"), and the servicer sees
a context carrying the caller's ``Session`` (``session_of``). Authorization needs the request's
topic, so it happens in the servicers (``server/service.py``).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import grpc

from hotjoin.server import audit, metrics
from hotjoin.server.auth import ANONYMOUS, Authenticator, AuthFailure, Session
from hotjoin.server.errors import InvalidArgument, ResourceExhausted
from hotjoin.server.quotas import Quotas

HEALTH_PREFIX = "/grpc.health.v1.Health/"


class SessionContext:
    """A servicer context with the caller's ``session`` attached; everything else is delegated."""

    __slots__ = ("_ctx", "session")

    def __init__(self, ctx: grpc.ServicerContext, session: Session) -> None:
        self._ctx = ctx
        self.session = session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


_UNRESTRICTED = Session(ANONYMOUS)


def session_of(context: Any) -> Session:
    """The caller of the RPC (an unrestricted anonymous session when no interceptor ran)."""
    s = getattr(context, "session", None)
    return s if isinstance(s, Session) else _UNRESTRICTED


def peer_of(context: Any) -> str | None:
    try:
        return str(context.peer())
    except Exception:  # a test double without peer()
        return None


def _same_kind(handler: grpc.RpcMethodHandler, behavior: Callable[..., Any],
               deserializer: Callable[[bytes], Any] | None) -> grpc.RpcMethodHandler:
    """A handler of ``handler``'s cardinality running ``behavior``."""
    ser = handler.response_serializer
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(behavior, deserializer, ser)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(behavior, deserializer, ser)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(behavior, deserializer, ser)
    return grpc.unary_unary_rpc_method_handler(behavior, deserializer, ser)


_UNREAD = object()  # stands for a request that is refused unread (None means "parse failed")


class _Undecodable:
    """Stands for a request body that did not parse; ``reason`` says why."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _discard(_data: bytes) -> object:
    return _UNREAD


class GuardInterceptor(grpc.aio.ServerInterceptor):
    """Authentication (when ``authenticator`` is set) and message-size quotas for every RPC but
    health checking; request bodies that do not parse answer INVALID_ARGUMENT for every RPC.

    Handlers may be coroutines (the streams) or plain functions (run in the server's thread
    pool); each keeps its kind when wrapped."""

    def __init__(self, authenticator: Authenticator | None, quotas: Quotas) -> None:
        self.authenticator = authenticator
        self.quotas = quotas

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Any]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        return self.guard(await continuation(handler_call_details), handler_call_details)

    def guard(self, handler: grpc.RpcMethodHandler | None,
              handler_call_details: grpc.HandlerCallDetails) -> Any:
        """``handler`` wrapped for the call ``handler_call_details``: authenticated, refused, or
        ``None`` when there is no such method."""
        method = handler_call_details.method
        if handler is None:
            return handler
        if method.startswith(HEALTH_PREFIX):  # open to all, no quotas; bad bodies still answered
            return self._wrap(handler, _UNRESTRICTED, quotas=False)
        if self.authenticator is None:
            session = _UNRESTRICTED
        else:
            try:
                principal, digest = self.authenticator.authenticate(
                    handler_call_details.invocation_metadata)
            except AuthFailure as e:
                return _refusal(handler, e, method)
            session = Session(principal, self.authenticator, digest)
        return self._wrap(handler, session)

    def _wrap(self, handler: grpc.RpcMethodHandler, session: Session,
              quotas: bool = True) -> grpc.RpcMethodHandler:
        principal = session.principal
        limit = self.quotas.message_limit(principal) if quotas else 0
        quotas_ = self.quotas
        parse = handler.request_deserializer or (lambda b: b)

        def measured(data: bytes) -> tuple[int, Any]:
            n = len(data)
            if limit and n > limit:
                return n, _UNREAD
            try:
                return n, parse(data)
            except Exception as e:  # noqa: BLE001 - DecodeError and friends: the body is bad
                return n, _Undecodable(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)

        def checked(pair: tuple[int, Any]) -> Any:
            n, req = pair
            if limit and n > limit:
                quotas_.check_message(principal, n)  # raises ResourceExhausted, counted
            if isinstance(req, _Undecodable):
                raise InvalidArgument(f"request body of {n} bytes is not a valid protobuf message "
                                      f"of this RPC ({req.reason})")
            return req

        if handler.request_streaming:
            inner = handler.stream_stream if handler.response_streaming else handler.stream_unary
            if _is_async(inner):
                async def each(it: AsyncIterator[tuple[int, Any]]) -> AsyncIterator[Any]:
                    async for p in it:
                        yield checked(p)

                def streaming_async(it: AsyncIterator[tuple[int, Any]], context: Any) -> Any:
                    return inner(each(it), SessionContext(context, session))

                return _same_kind(handler, _like(inner, streaming_async), measured)

            def streaming(it: Iterator[tuple[int, Any]], context: grpc.ServicerContext) -> Any:
                return inner((checked(p) for p in it), SessionContext(context, session))

            return _same_kind(handler, streaming, measured)
        inner = handler.unary_stream if handler.response_streaming else handler.unary_unary

        async def checked_or_abort(pair: tuple[int, Any], context: Any) -> Any:
            try:
                return checked(pair)
            except (ResourceExhausted, InvalidArgument) as e:
                await context.abort(grpc.StatusCode[e.code], e.message)

        if inspect.isasyncgenfunction(inner):
            async def unary_stream(pair: tuple[int, Any], context: Any) -> AsyncIterator[Any]:
                req = await checked_or_abort(pair, context)
                async for out in inner(req, SessionContext(context, session)):
                    yield out

            return _same_kind(handler, unary_stream, measured)
        if inspect.iscoroutinefunction(inner):
            async def unary_async(pair: tuple[int, Any], context: Any) -> Any:
                return await inner(await checked_or_abort(pair, context), SessionContext(context, session))

            return _same_kind(handler, unary_async, measured)

        def unary(pair: tuple[int, Any], context: grpc.ServicerContext) -> Any:
            try:
                req = checked(pair)
            except (ResourceExhausted, InvalidArgument) as e:
                context.abort(grpc.StatusCode[e.code], e.message)
            return inner(req, SessionContext(context, session))

        return _same_kind(handler, unary, measured)


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn)


def _like(inner: Callable[..., Any], outer: Callable[..., Any]) -> Callable[..., Any]:
    """``outer`` (which returns what ``inner`` returns) as the same kind of function as
    ``inner``, so that gRPC runs it on the event loop like ``inner``."""
    if inspect.isasyncgenfunction(inner):
        async def agen(request: Any, context: Any) -> AsyncIterator[Any]:
            async for out in outer(request, context):
                yield out

        return agen

    async def coro(request: Any, context: Any) -> Any:
        return await outer(request, context)

    return coro


def _refusal(handler: grpc.RpcMethodHandler, err: AuthFailure, method: str) -> grpc.RpcMethodHandler:
    """A handler that answers UNAUTHENTICATED without reading the request (a coroutine of the
    handler's kind: it runs on the event loop, whatever the refused handler is)."""

    async def refuse(_request: Any, context: Any) -> Any:
        metrics.AUTH_FAILURES.labels(err.reason).inc()
        audit.record("authenticate", None, "unauthenticated", method=method, reason=err.reason,
                     peer=peer_of(context))
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, err.message)

    async def refuse_stream(request: Any, context: Any) -> AsyncIterator[Any]:
        await refuse(request, context)
        yield None  # not reached: abort raises

    return _same_kind(handler, refuse_stream if handler.response_streaming else refuse, _discard)
