"""The gRPC channel of a client: TLS, the bearer token, and typed errors on every call.

``make_channel`` opens a channel to a server (``docs/how-to/security.md``): TLS when ``tls`` or any
``tls_*`` file is given (``tls_cert`` + ``tls_key`` for mutual TLS), the bearer ``token`` on
every call when set. Every channel it returns translates a failed call's ``grpc.RpcError``
into the typed errors of ``hotjoin.clients.errors`` (``TypedErrors``): unary calls, client
streams, server streams (at the ``next()`` that fails) and bidirectional streams alike, the raw
stubs included. That is the one place the translation happens for the blocking client.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import grpc

from hotjoin.clients.errors import from_rpc_error

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]


class _CallDetails(
    collections.namedtuple("_CallDetails", ("method", "timeout", "metadata", "credentials",
                                            "wait_for_ready", "compression")),
    grpc.ClientCallDetails,
):
    pass


class BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                  grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds ``authorization: Bearer <token>`` to every call (plaintext and TLS channels alike)."""

    def __init__(self, token: str) -> None:
        self._entry = ("authorization", f"Bearer {token}")

    def __repr__(self) -> str:  # never print the token
        return "BearerToken(<redacted>)"

    def _details(self, d: grpc.ClientCallDetails) -> _CallDetails:
        md = [*(d.metadata or ()), self._entry]
        return _CallDetails(d.method, d.timeout, md, d.credentials, getattr(d, "wait_for_ready", None),
                            getattr(d, "compression", None))

    def intercept_unary_unary(self, continuation: Callable[..., Any], details: grpc.ClientCallDetails,
                              request: Any) -> Any:
        """Call with the token added."""
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Callable[..., Any], details: grpc.ClientCallDetails,
                               request: Any) -> Any:
        """Call with the token added."""
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation: Callable[..., Any], details: grpc.ClientCallDetails,
                               request_iterator: Any) -> Any:
        """Call with the token added."""
        return continuation(self._details(details), request_iterator)

    def intercept_stream_stream(self, continuation: Callable[..., Any], details: grpc.ClientCallDetails,
                                request_iterator: Any) -> Any:
        """Call with the token added."""
        return continuation(self._details(details), request_iterator)


class _Outcome:
    """A unary call's outcome (a ``grpc.Call`` and ``grpc.Future``) whose ``result()`` and
    ``exception()`` give typed errors; everything else is the call's."""

    __slots__ = ("_call",)

    def __init__(self, call: Any) -> None:
        self._call = call

    def result(self, timeout: float | None = None) -> Any:
        """The response, or the call's typed error raised."""
        try:
            return self._call.result(timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The call's typed error, None when it succeeded."""
        e = self._call.exception(timeout)
        return from_rpc_error(e) if isinstance(e, grpc.RpcError) else e

    def __getattr__(self, name: str) -> Any:
        return getattr(self._call, name)


class _Stream:
    """A response stream whose iteration raises typed errors; ``cancel()``, ``code()`` and the
    rest are the call's."""

    __slots__ = ("_call",)

    def __init__(self, call: Any) -> None:
        self._call = call

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        try:
            return next(self._call)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._call, name)


class TypedErrors(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                  grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Turns every failed call's ``grpc.RpcError`` into a ``hotjoin.clients.errors.CallError``
    (``NotFound``, ``Unavailable``, ...). O(1) per call and per streamed message."""

    def intercept_unary_unary(self, continuation: Callable[..., Any], details: grpc.ClientCallDetails,
                              request: Any) -> Any:
        """The call, its outcome's errors typed."""
        return _Outcome(continuation(details, request))

    def intercept_stream_unary(self, continuation: Callable[..., Any], details: grpc.ClientCallDetails,
                               request_iterator: Any) -> Any:
        """The call, its outcome's errors typed."""
        return _Outcome(continuation(details, request_iterator))

    def intercept_unary_stream(self, continuation: Callable[..., Any], details: grpc.ClientCallDetails,
                               request: Any) -> Any:
        """The call, its stream's errors typed."""
        return _Stream(continuation(details, request))

    def intercept_stream_stream(self, continuation: Callable[..., Any], details: grpc.ClientCallDetails,
                                request_iterator: Any) -> Any:
        """The call, its stream's errors typed."""
        return _Stream(continuation(details, request_iterator))


def read_file(path: str | Path | None, what: str) -> bytes | None:
    """The bytes of ``path`` (None for None); ``ValueError`` naming ``what`` when unreadable."""
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read {what} {path}: {e.strerror}") from None


def credentials(tls: bool, tls_ca: str | Path | None, tls_cert: str | Path | None,
                tls_key: str | Path | None) -> grpc.ChannelCredentials | None:
    """The TLS credentials the options ask for, None for plaintext; ``ValueError`` for a
    certificate without its key (or the reverse) or an unreadable file."""
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("mutual TLS needs both a client certificate and its key (tls_cert and tls_key)")
    if not (tls or tls_ca is not None or tls_cert is not None):
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=read_file(tls_ca, "TLS CA file"),
        private_key=read_file(tls_key, "TLS client key"),
        certificate_chain=read_file(tls_cert, "TLS client certificate"),
    )


def make_channel(target: str, *, token: str | None = None, tls: bool = False,
                 tls_ca: str | Path | None = None, tls_cert: str | Path | None = None,
                 tls_key: str | Path | None = None, server_name: str | None = None,
                 options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
    """A channel to ``target`` with TLS and token as asked (module docstring) whose calls raise
    typed errors."""
    opts = [*CHANNEL_OPTIONS, *options]
    creds = credentials(tls, tls_ca, tls_cert, tls_key)
    if creds is not None:
        if server_name:
            opts.append(("grpc.ssl_target_name_override", server_name))
        channel = grpc.secure_channel(target, creds, options=opts)
    else:
        channel = grpc.insecure_channel(target, options=opts)
    interceptors: list[Any] = [TypedErrors()]
    if token:
        interceptors.append(BearerToken(token))
    return grpc.intercept_channel(channel, *interceptors)


__all__ = ["BearerToken", "CHANNEL_OPTIONS", "MAX_MESSAGE_BYTES", "TypedErrors", "credentials",
           "make_channel", "read_file"]
