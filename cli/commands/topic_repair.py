"""``hotjoin topic inspect|repair NAME --data-dir DIR``: a damaged topic, offline.

``inspect`` reads every file of the topic and prints a JSON report (per file: good records, the
damage and its reason, what still verifies after it) and what a repair would do; it only reads,
so it also works while the server runs. It exits 0 for an undamaged topic and 1 for a damaged
one (as ``fsck`` does). ``repair`` needs the server stopped (it takes the data directory's
lock), cuts each damaged file at its last good record, moves every byte it cuts into
``DIR/repairs/NAME-<time>/`` and prints what it did (``server/repair.py``;
``docs/reference/persistence.md``, "Damage and repair").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register_actions(tsub: Any) -> None:
    """Add ``inspect`` and ``repair`` to the ``hotjoin topic`` sub-parsers."""
    i = tsub.add_parser("inspect", help="report a topic's files and any damage (offline, read only)",
                        description="Read every file of topic NAME in the server's data directory "
                        "and report, as JSON, what verifies, any damage and what a repair would "
                        "do. Read only: safe while the server runs. Exit code 1 when damaged.")
    i.add_argument("name")
    i.add_argument("--data-dir", type=Path, default=Path("hotjoin-data"),
                   help="the server's data directory")
    r = tsub.add_parser("repair", help="cut a damaged topic's files at their last good record "
                        "(server stopped; keeps a backup)",
                        description="Repair topic NAME of a stopped server: cut each damaged file "
                        "at its last good record, moving everything cut into "
                        "DATA_DIR/repairs/NAME-<time>/, and say how many operations were "
                        "dropped. Run `hotjoin topic inspect` first to see what it will do.")
    r.add_argument("name")
    r.add_argument("--data-dir", type=Path, default=Path("hotjoin-data"),
                   help="the server's data directory")
    r.add_argument("--lateness", type=int, default=None,
                   help="with a damaged topic.json: the topic's lateness, to rewrite it")
    r.add_argument("--retention", type=int, default=None,
                   help="with a damaged topic.json: the topic's retention, if it had one")
    r.add_argument("--max-advance", type=int, default=None,
                   help="with a damaged topic.json: the topic's max advance, if it had one")


OFFLINE = frozenset({"inspect", "repair"})


def run(args: argparse.Namespace) -> int:
    """Run ``inspect`` or ``repair`` (no server connection)."""
    from hotjoin.cli.main import CliError
    from hotjoin.server.datadir import DataDirInUse
    from hotjoin.server.errors import ServiceError
    from hotjoin.server.repair import RepairError, inspect_topic, repair_topic

    if not args.data_dir.is_dir():
        raise CliError(f"no data directory {args.data_dir} (--data-dir is the server's)")
    try:
        if args.action == "inspect":
            report = inspect_topic(args.data_dir, args.name)
            print(json.dumps(report, indent=2))
            return 1 if report["damaged"] else 0
        options: dict[str, Any] | None = None
        if args.lateness is not None:
            options = {"lateness": args.lateness, "retention": args.retention,
                       "max_advance": args.max_advance}
        out = repair_topic(args.data_dir, args.name, options)
    except DataDirInUse as e:
        raise CliError(f"{e} (repair needs the server stopped; `hotjoin topic inspect` works "
                       "while it runs)", code=1) from None
    except (RepairError, ServiceError) as e:
        raise CliError(str(e)) from None
    print(json.dumps(out, indent=2))
    if out.get("repaired"):
        print(f"hotjoin topic repair: {args.name}: " + "; ".join(out["done"])
              + f"; backup in {out['backup']}", file=sys.stderr)
    return 0
