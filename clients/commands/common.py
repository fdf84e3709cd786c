"""Helpers shared by the client sub-commands: the --target option and error reporting."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

DEFAULT_TARGET = "127.0.0.1:50051"


def add_target(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default=DEFAULT_TARGET, help=f"server address (default {DEFAULT_TARGET})")


def rpc_errors(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Report a gRPC error as a one-line ``CliError`` (status code and message)."""

    def wrapper(args: argparse.Namespace) -> int:
        import grpc

        from clients.cli import CliError

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


def client(args: argparse.Namespace) -> Any:
    from clients.client import HotjoinClient

    return HotjoinClient(args.target)
