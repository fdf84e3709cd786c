"""``hotjoin topic create|list|get|delete``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from hotjoin.clients.commands.common import add_target, client, rpc_errors


def register(sub: Any) -> None:
    p = sub.add_parser("topic", help="create, list, show or delete topics")
    add_target(p)
    tsub = p.add_subparsers(dest="action", required=True)
    c = tsub.add_parser("create", help="create a topic")
    c.add_argument("name")
    c.add_argument("--lateness", type=int, default=0, help="allowed disorder L (event-time units)")
    c.add_argument("--retention", type=int, default=None, help="drop tuples older than W - retention")
    c.add_argument("--strategy", action="append", default=[], metavar="KIND=NAME",
                   help="engine strategy for a join kind, e.g. band=BJ-SSI (repeatable)")
    c.add_argument("--delivery-retention-bytes", type=int, default=None,
                   help="keep undelivered messages on disk up to this many bytes (default: the "
                        "server's --delivery-retention-bytes; 0: memory only)")
    c.add_argument("--delivery-retention-ms", type=int, default=None,
                   help="... and for this long (default: the server's; -1: no time limit)")
    ls = tsub.add_parser("list", help="list topics")
    g = tsub.add_parser("get", help="show one topic")
    g.add_argument("name")
    d = tsub.add_parser("delete", help="delete a topic and its data")
    d.add_argument("name")
    for action in (c, ls, g, d):  # --target and the security options are accepted after the action too
        add_target(action, hidden=True)
    p.set_defaults(func=rpc_errors(run))


def run(args: argparse.Namespace) -> int:
    from google.protobuf.json_format import MessageToDict

    with client(args) as hj:
        if args.action == "create":
            strategy = dict(s.split("=", 1) for s in args.strategy)
            out: Any = MessageToDict(hj.create_topic(
                args.name, args.lateness, args.retention, strategy,
                delivery_retention_bytes=args.delivery_retention_bytes,
                delivery_retention_ms=args.delivery_retention_ms))
        elif args.action == "list":
            out = [MessageToDict(t) for t in hj.list_topics()]
        elif args.action == "get":
            out = MessageToDict(hj.get_topic(args.name))
        else:
            hj.delete_topic(args.name)
            out = {"deleted": args.name}
    print(json.dumps(out, indent=2))
    return 0
