"""Run ``hotjoin serve`` in a child process with the tests' engine choice (see conftest)."""

from __future__ import annotations

import sys

from server_harness import engine_factory

from hotjoin.cli.commands.serve import run
from hotjoin.cli.main import build_parser

if __name__ == "__main__":
    args = build_parser().parse_args(["serve", *sys.argv[1:]])
    sys.exit(run(args, engine_factory=engine_factory()))
