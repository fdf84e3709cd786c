"""The errors every client call raises: one class per gRPC status, rooted in ``HotjoinError``.

The root is the engine's own ``hotjoin.matcher.errors.HotjoinError`` (a light module), so one
``except HotjoinError`` catches what the engine raises in process and what a server answers over
the wire. Below it, ``CallError`` is any call the server (or the connection to it) answered with
a status other than OK; each status has its subclass, which carries ``.code`` (the status name,
e.g. ``"NOT_FOUND"``) and ``.message`` (the server's message; ``docs/reference/errors.md`` lists what
each RPC answers):

>>> e = from_status("NOT_FOUND", "topic 'x' does not exist")
>>> isinstance(e, NotFound), isinstance(e, CallError), isinstance(e, HotjoinError)
(True, True, True)
>>> e.code, e.message, str(e)
('NOT_FOUND', "topic 'x' does not exist", "NOT_FOUND: topic 'x' does not exist")

``DeadlineExceeded`` is also a ``TimeoutError``, ``Unavailable`` a ``ConnectionError`` and
``InvalidArgument`` a ``ValueError``, so code written against the standard exceptions catches
them too. Raw ``grpc.RpcError`` never reaches the
caller: the blocking client's channel translates every status (unary calls, streams, and the raw
stubs alike; ``hotjoin.clients.channel``), the asyncio client every call it makes.
"""

from __future__ import annotations

from typing import Any, ClassVar

from hotjoin.matcher.errors import HotjoinError


class CallError(HotjoinError):
    """A call answered with a gRPC status other than OK: ``.code`` is the status name, ``.message``
    the server's message (or the channel's, for a connection that failed)."""

    code: ClassVar[str] = "UNKNOWN"

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" if self.message else self.code

    def __reduce__(self) -> tuple[Any, ...]:  # picklable (e.g. across processes)
        return (type(self), (self.message,))


class Cancelled(CallError):
    """The call was cancelled (by the client, or a stream the server ended at shutdown)."""

    code = "CANCELLED"


class Unknown(CallError):
    """A status the server did not name (never sent by a hotjoin server; ``docs/reference/errors.md``)."""

    code = "UNKNOWN"


class InvalidArgument(CallError, ValueError):
    """The request is malformed (a bad range, an empty topic name, ...); nothing changed. Also
    raised before sending for an option the client can check itself (e.g. ``delivery``)."""

    code = "INVALID_ARGUMENT"


class DeadlineExceeded(CallError, TimeoutError):
    """The call's deadline (the client's ``timeout``) passed before the server answered."""

    code = "DEADLINE_EXCEEDED"


class NotFound(CallError):
    """The topic, subscription or subscriber does not exist."""

    code = "NOT_FOUND"


class AlreadyExists(CallError):
    """A topic of that name exists already."""

    code = "ALREADY_EXISTS"


class PermissionDenied(CallError):
    """The principal lacks the right for the topic (``docs/how-to/security.md``)."""

    code = "PERMISSION_DENIED"


class ResourceExhausted(CallError):
    """A quota was breached, a message is too large, or the server's disk is full."""

    code = "RESOURCE_EXHAUSTED"


class FailedPrecondition(CallError):
    """The topic is damaged (``docs/reference/persistence.md``) or the request does not fit its state."""

    code = "FAILED_PRECONDITION"


class Aborted(CallError):
    """The operation was aborted (a conflict); retrying it may succeed."""

    code = "ABORTED"


class OutOfRange(CallError):
    """A position beyond the topic's sequence (a cursor ahead of the newest operation)."""

    code = "OUT_OF_RANGE"


class Unimplemented(CallError):
    """The server does not offer this call (an older server)."""

    code = "UNIMPLEMENTED"


class Internal(CallError):
    """The server failed internally (never sent by a hotjoin server; ``docs/reference/errors.md``)."""

    code = "INTERNAL"


class Unavailable(CallError, ConnectionError):
    """No connection (server down, wrong address, TLS settings the server does not share) or
    the server is shutting down; safe to retry for reads and for publishes with event ids."""

    code = "UNAVAILABLE"


class DataLoss(CallError):
    """Unrecoverable loss of data (never sent by a hotjoin server)."""

    code = "DATA_LOSS"


class Unauthenticated(CallError):
    """No token, or a token the server does not know (``docs/how-to/security.md``)."""

    code = "UNAUTHENTICATED"


_BY_CODE: dict[str, type[CallError]] = {c.code: c for c in (
    Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists,
    PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted, OutOfRange, Unimplemented,
    Internal, Unavailable, DataLoss, Unauthenticated)}

RETRYABLE = frozenset({"UNAVAILABLE", "CANCELLED", "DEADLINE_EXCEEDED", "INTERNAL", "UNKNOWN"})
"""Statuses after which a listener reconnects (``MatchStream``)."""


def from_status(code: str, message: str = "") -> CallError:
    """The error of status ``code`` (a name such as ``"NOT_FOUND"``) with ``message``; an
    unknown name gives ``Unknown``."""
    return _BY_CODE.get(code, Unknown)(message)


def from_rpc_error(e: Any) -> CallError:
    """The typed error of a ``grpc.RpcError`` (its status code and details).

    An ``RpcError`` that is not a call (no ``code()``) becomes ``Unknown`` with its text.
    """
    try:
        code = e.code()
        details = e.details() or ""
    except (AttributeError, TypeError):
        return Unknown(str(e))
    name = getattr(code, "name", str(code))
    return from_status(name, str(details))


__all__ = [
    "Aborted", "AlreadyExists", "CallError", "Cancelled", "DataLoss", "DeadlineExceeded",
    "FailedPrecondition", "HotjoinError", "Internal", "InvalidArgument", "NotFound", "OutOfRange",
    "PermissionDenied", "RETRYABLE", "ResourceExhausted", "Unauthenticated", "Unavailable",
    "Unimplemented", "Unknown", "from_rpc_error", "from_status",
]
