"""``hotjoin export TOPIC``: write a topic's event log and subscriptions as Parquet (docs/reference/export-format.md).

Reads the server's data directory directly, so it works while the server runs and exports a
consistent copy (the operations up to one sequence number, named in the output's
``topic.json``); ``--until-seq N`` stops at N (a point-in-time copy for ``hotjoin restore``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("export", help="export a topic's log and subscriptions as Parquet")
    p.add_argument("topic", nargs="?", default=None, help="the topic to export")
    p.add_argument("--data-dir", type=Path, default=Path("hotjoin-data"), help="the server's data directory")
    p.add_argument("--topic", dest="topic_option", default=None,
                   help="deprecated spelling of the positional TOPIC")
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.add_argument("--until-seq", type=int, default=None, metavar="N",
                   help="export the operations up to sequence number N only: a point-in-time "
                        "copy (hotjoin restore publishes it into a new topic)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hotjoin.cli.main import CliError
    from hotjoin.server.export import main_json
    from hotjoin.server.records import DamagedFileError

    topic = args.topic
    if args.topic_option is not None:
        if topic is not None and topic != args.topic_option:
            raise CliError(f"two topics given: {topic!r} and --topic {args.topic_option!r}")
        print("hotjoin export: warning: --topic is deprecated; give the topic positionally "
              "(hotjoin export TOPIC --out DIR)", file=sys.stderr)
        topic = args.topic_option
    if topic is None:
        raise CliError("name the topic: hotjoin export TOPIC --out DIR")
    if not args.data_dir.is_dir():
        raise CliError(f"no data directory {args.data_dir} (--data-dir is the server's)")
    try:
        print(main_json(args.data_dir, topic, args.out, args.until_seq))
    except DamagedFileError as e:
        raise CliError(f"the log of {topic!r} is damaged ({e}); `hotjoin topic inspect {topic}` "
                       "tells what verifies, and --until-seq exports what lies before the damage",
                       code=1) from None
    except FileNotFoundError as e:
        raise CliError(str(e)) from None
    except (ValueError, FileExistsError, NotADirectoryError) as e:
        raise CliError(str(e)) from None
    return 0
