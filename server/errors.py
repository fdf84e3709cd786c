"""Errors of the server's domain layer, each naming the gRPC status code it maps to.

The domain modules raise these without importing grpc; ``server/service.py`` turns ``code`` into
``grpc.StatusCode[code]`` and the message into the status details.
"""

from __future__ import annotations


class ServiceError(Exception):
    """A request failed; ``code`` is the name of a ``grpc.StatusCode`` member."""

    code = "INTERNAL"

    def __init__(self, message: str) -> None:
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
