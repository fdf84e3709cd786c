"""``hotjoin listen TOPIC``: print matches as JSON lines, resuming after reconnects (and, with
``--commit``, from the cursors committed on the server by an earlier run)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from hotjoin.clients.commands.common import add_target, client, rpc_errors


def register(sub: Any) -> None:
    p = sub.add_parser("listen", help="stream matches of a subscriber or subscriptions")
    add_target(p)
    p.add_argument("topic")
    p.add_argument("--subscriber", default="", help="every subscription of this subscriber")
    p.add_argument("--id", type=int, action="append", default=[], help="a subscription id (repeatable)")
    p.add_argument("--after", type=int, default=None, help="resume after this seq (all subscriptions)")
    p.add_argument("--from-latest", action="store_true", help="skip buffered messages")
    p.add_argument("--count", type=int, default=0, help="stop after this many matches (0: never)")
    p.add_argument("--commit", action="store_true",
                   help="commit the position of every printed message on the server (every second "
                        "and at the end), so a later listen resumes after it (at-least-once)")
    p.add_argument("--ignore-committed", action="store_true",
                   help="start from --after / the first message even where a cursor was committed")
    p.set_defaults(func=rpc_errors(run))


def run(args: argparse.Namespace) -> int:
    from google.protobuf.json_format import MessageToDict

    n = 0
    with client(args) as hj:
        cursors = {i: args.after for i in args.id} if args.after is not None else None
        stream = hj.listen(args.topic, args.subscriber, args.id, cursors, from_latest=args.from_latest,
                           auto_commit=1.0 if args.commit else None,
                           ignore_committed=args.ignore_committed)
        if args.after is not None:
            stream.request.default_after_seq = args.after
        for msg in stream:
            print(json.dumps(MessageToDict(msg)), flush=True)
            if msg.WhichOneof("message") == "match":
                n += 1
                if args.count and n >= args.count:
                    if args.commit:  # printed = processed
                        stream.commit(include_last=True)
                    stream.cancel()
                    break
    return 0
