"""``hotjoin export``: write a topic's event log and subscriptions as Parquet (server/EXPORT.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("export", help="export a topic's log and subscriptions as Parquet")
    p.add_argument("--data-dir", type=Path, default=Path("hotjoin-data"), help="the server's data directory")
    p.add_argument("--topic", required=True)
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hotjoin.clients.cli import CliError
    from hotjoin.server.export import main_json

    try:
        print(main_json(args.data_dir, args.topic, args.out))
    except FileNotFoundError as e:
        raise CliError(str(e)) from None
    return 0
