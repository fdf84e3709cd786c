"""Run ``hotjoin serve`` in a child process with the tests' engine choice (see conftest)."""

from __future__ import annotations

import sys

from server_harness import engine_factory

from hotjoin.clients.cli import build_parser
from hotjoin.clients.commands.serve import run

if __name__ == "__main__":
    args = build_parser().parse_args(["serve", *sys.argv[1:]])
    sys.exit(run(args, engine_factory=engine_factory()))
