"""``hotjoin topic create|list|show|delete`` (over gRPC) and ``inspect|repair`` (offline, on the
server's data directory: ``cli/commands/topic_repair.py``). ``get`` is accepted for ``show``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from hotjoin.cli.commands import topic_repair
from hotjoin.cli.commands.common import add_target, client, message_dict, rpc_errors


def register(sub: Any) -> None:
    p = sub.add_parser("topic", help="create, list, show or delete topics; inspect or repair one "
                       "offline", description="Topics of a running server: create, list, show, "
                       "delete; of a stopped server's data directory: inspect, repair "
                       "(docs/reference/persistence.md). `hotjoin topic ACTION --help` lists an action's "
                       "options.")
    add_target(p)
    tsub = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    c = tsub.add_parser("create", help="create a topic")
    c.add_argument("name")
    c.add_argument("--lateness", type=int, default=0, help="allowed disorder L (event-time units)")
    c.add_argument("--retention", type=int, default=None,
                   help="drop tuples older than W - retention (default: keep until deleted)")
    c.add_argument("--strategy", action="append", default=[], metavar="KIND=NAME",
                   help="engine strategy for a join kind, e.g. band=BJ-SSI (repeatable)")
    c.add_argument("--delivery-retention-bytes", type=int, default=None,
                   help="keep undelivered messages on disk up to this many bytes (default: the "
                        "server's --delivery-retention-bytes; 0: memory only)")
    c.add_argument("--delivery-retention-ms", type=int, default=None,
                   help="... and for this long (default: the server's; -1: no time limit)")
    c.add_argument("--max-advance", type=int, default=None, metavar="N",
                   help="reject (INVALID) an event more than N event-time units ahead of the "
                        "largest event time seen, so one wrong clock cannot make every later "
                        "event late (default 86400000, one day in ms; 0: no bound)")
    ls = tsub.add_parser("list", help="list topics")
    g = tsub.add_parser("show", help="show one topic")
    g.add_argument("name")
    g_old = tsub.add_parser("get", description="Show one topic (the former name of show).")
    g_old.add_argument("name")
    d = tsub.add_parser("delete", help="delete a topic and its data")
    d.add_argument("name")
    for action in (c, ls, g, g_old, d):  # the connection options work after the action too
        add_target(action, after_action=True)
    topic_repair.register_actions(tsub)  # offline: inspect, repair (--data-dir)
    p.set_defaults(func=rpc_errors(run))


def run(args: argparse.Namespace) -> int:
    from hotjoin.cli.main import CliError

    if args.action in topic_repair.OFFLINE:
        return topic_repair.run(args)

    with client(args) as hj:
        if args.action == "create":
            if args.lateness < 0 or (args.retention is not None and args.retention < 0):
                raise CliError("--lateness and --retention must be >= 0")
            if args.max_advance is not None and args.max_advance < 0:
                raise CliError(f"--max-advance must be >= 0 (0: no bound), got {args.max_advance}")
            strategy = {}
            for s in args.strategy:
                kind, sep, name = s.partition("=")
                if not sep or not kind or not name:
                    raise CliError(f"--strategy must be KIND=NAME (e.g. band=BJ-SSI), got {s!r}")
                strategy[kind] = name
            out: Any = message_dict(hj.create_topic(
                args.name, args.lateness, args.retention, strategy,
                delivery_retention_bytes=args.delivery_retention_bytes,
                delivery_retention_ms=args.delivery_retention_ms, max_advance=args.max_advance).wire)
        elif args.action == "list":
            out = [message_dict(t.wire) for t in hj.list_topics()]
        elif args.action in ("show", "get"):
            out = message_dict(hj.get_topic(args.name).wire)
        else:
            hj.delete_topic(args.name)
            out = {"deleted": args.name}
    print(json.dumps(out, indent=2))
    return 0
