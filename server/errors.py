"""Errors of the server's domain layer, each naming the gRPC status code it maps to.

The domain modules raise these without importing grpc; ``server/service.py`` turns ``code`` into
``grpc.StatusCode[code]`` and the message into the status details. Every message is cut to
``MAX_MESSAGE_BYTES`` of UTF-8 (``clip``): a status message travels in a gRPC header, and one that
echoed a 20,000-character name in full was replaced by the transport with RESOURCE_EXHAUSTED
"Stream removed". Which RPC answers which status: ``docs/reference/errors.md``.
"""

from __future__ import annotations

MAX_MESSAGE_BYTES = 1024
ELLIPSIS = "…"


def clip(text: str, limit: int = MAX_MESSAGE_BYTES) -> str:
    """``text`` cut to at most ``limit`` bytes of UTF-8, ending in an ellipsis when cut."""
    raw = text.encode("utf-8", "replace")
    if len(raw) <= limit:
        return text
    keep = limit - len(ELLIPSIS.encode())
    return raw[:keep].decode("utf-8", "ignore") + ELLIPSIS


class ServiceError(Exception):
    """A request failed; ``code`` is the name of a ``grpc.StatusCode`` member."""

    code = "INTERNAL"

    def __init__(self, message: str) -> None:
        message = clip(message)
        super().__init__(message)
        self.message = message


class InvalidArgument(ServiceError):
    code = "INVALID_ARGUMENT"


class NotFound(ServiceError):
    code = "NOT_FOUND"


class AlreadyExists(ServiceError):
    code = "ALREADY_EXISTS"


class FailedPrecondition(ServiceError):
    code = "FAILED_PRECONDITION"


class Unimplemented(ServiceError):
    code = "UNIMPLEMENTED"


class Unavailable(ServiceError):
    code = "UNAVAILABLE"


class OutOfRange(ServiceError):
    """A cursor or position beyond what exists (a Listen cursor past the topic's sequence)."""

    code = "OUT_OF_RANGE"


class Unauthenticated(ServiceError):
    """No valid credentials (missing, malformed or unknown token); never says which exist."""

    code = "UNAUTHENTICATED"


class PermissionDenied(ServiceError):
    """Valid credentials without the right the request needs; ``right`` names it."""

    code = "PERMISSION_DENIED"

    def __init__(self, message: str, right: str = "") -> None:
        super().__init__(message)
        self.right = right


class ResourceExhausted(ServiceError):
    """A quota or limit was exceeded; ``quota`` names it (``server/quotas.py``)."""

    code = "RESOURCE_EXHAUSTED"

    def __init__(self, message: str, quota: str = "") -> None:
        super().__init__(message)
        self.quota = quota
