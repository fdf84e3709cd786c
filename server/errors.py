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
