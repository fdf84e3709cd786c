"""The ``hotjoin`` command line: one console command with sub-commands (SPEC §1).

Each sub-command lives in its own module under ``clients/commands`` and exposes
``register(subparsers) -> None``; the module is imported lazily only to build its parser, so a
sub-command's heavy imports (grpc, numba, pyspark) are paid only by the command that needs them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Sub-command modules, in the order `hotjoin --help` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "hotjoin.clients.commands.demo",
    "hotjoin.clients.commands.bench",
    "hotjoin.clients.commands.serve",
    "hotjoin.clients.commands.auth",
    "hotjoin.clients.commands.topic",
    "hotjoin.clients.commands.subscribe",
    "hotjoin.clients.commands.publish",
    "hotjoin.clients.commands.listen",
    "hotjoin.clients.commands.stats",
    "hotjoin.clients.commands.cursors",
    "hotjoin.clients.commands.export",
    "hotjoin.clients.commands.replay",
    "hotjoin.clients.commands.calibrate",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hotjoin",
        description="hotjoin: continuous-join pub/sub server (stabbing-set index with hotspots)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen sub-command; returns the process exit code.

    A sub-command raising ``CliError`` exits with its code and a one-line message on stderr.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except CliError as e:
        print(f"hotjoin {args.command}: error: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        return 130
    return int(rc or 0)


class CliError(Exception):
    """A user-facing failure: printed as one line, exits with ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


if __name__ == "__main__":
    sys.exit(main())
