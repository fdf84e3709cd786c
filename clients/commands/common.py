"""Helpers shared by the client sub-commands: the connection options and error reporting.

Connection options (server/SECURITY.md): ``--target``; ``--token-file`` or the environment
variable ``HOTJOIN_TOKEN`` (``--token`` works too but shows the token in the process list);
``--tls`` / ``--tls-ca`` for a TLS server, ``--tls-cert`` + ``--tls-key`` for mutual TLS,
``--server-name`` when the certificate's name differs from the target's host.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_TARGET = "127.0.0.1:50051"
TOKEN_ENV = "HOTJOIN_TOKEN"


def add_target(p: argparse.ArgumentParser, hidden: bool = False) -> None:
    """``--target`` and the security options; ``hidden``: accepted (e.g. after a sub-action)
    but not listed, and leaving an earlier value alone when absent."""

    def add(*names: str, help: str, **kw: Any) -> None:
        if hidden:
            kw["default"] = argparse.SUPPRESS
        p.add_argument(*names, help=argparse.SUPPRESS if hidden else help, **kw)

    add("--target", default=DEFAULT_TARGET, help=f"server address (default {DEFAULT_TARGET})")
    add("--token-file", type=Path, default=None,
        help=f"file holding the bearer token (default: the environment variable {TOKEN_ENV})")
    add("--token", default=None, help="bearer token (visible to other local users in the process "
        f"list: prefer --token-file or {TOKEN_ENV})")
    add("--tls", action="store_true", default=False,
        help="connect with TLS, trusting the system's CA certificates")
    add("--tls-ca", type=Path, default=None, help="connect with TLS, trusting this CA certificate (PEM)")
    add("--tls-cert", type=Path, default=None, help="client certificate for mutual TLS (PEM)")
    add("--tls-key", type=Path, default=None, help="the client certificate's private key (PEM)")
    add("--server-name", default=None,
        help="name to verify the server's certificate against (default: the target's host)")


def rpc_errors(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Report a gRPC error as a one-line ``CliError`` (status code and message)."""

    def wrapper(args: argparse.Namespace) -> int:
        import grpc

        from hotjoin.clients.cli import CliError

        try:
            return fn(args)
        except grpc.RpcError as e:
            raise CliError(f"{e.code().name}: {e.details()}", code=1) from None

    return wrapper


def parse_range(text: str | None) -> tuple[float | None, float | None] | None:
    """``"lo:hi"`` with either side empty for unbounded; ``None`` stays unbounded."""
    if text is None:
        return None
    lo, sep, hi = text.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"range must be LO:HI, got {text!r}")
    return (float(lo) if lo.strip() else None, float(hi) if hi.strip() else None)


def token_of(args: argparse.Namespace) -> str | None:
    """The bearer token: ``--token``, else ``--token-file``, else ``$HOTJOIN_TOKEN``."""
    from hotjoin.clients.cli import CliError

    if getattr(args, "token", None):
        return str(args.token)
    path = getattr(args, "token_file", None)
    if path is not None:
        try:
            token = Path(path).read_text().strip()
        except OSError as e:
            raise CliError(f"cannot read --token-file {path}: {e.strerror}") from None
        if not token:
            raise CliError(f"--token-file {path} is empty")
        return token
    return os.environ.get(TOKEN_ENV) or None


def client(args: argparse.Namespace) -> Any:
    from hotjoin.clients.cli import CliError
    from hotjoin.clients.client import HotjoinClient

    try:
        return HotjoinClient(
            args.target, token=token_of(args), tls=bool(getattr(args, "tls", False)),
            tls_ca=getattr(args, "tls_ca", None), tls_cert=getattr(args, "tls_cert", None),
            tls_key=getattr(args, "tls_key", None), server_name=getattr(args, "server_name", None))
    except ValueError as e:
        raise CliError(str(e)) from None
