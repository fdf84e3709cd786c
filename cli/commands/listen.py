"""``hotjoin listen TOPIC``: print matches as JSON lines, resuming after reconnects (and, with
``--commit``, from the cursors committed on the server by an earlier run).

Each line is one ``ListenResponse`` in the CLI's JSON form (``common.message_dict``: snake_case,
zero values kept, integers as numbers), e.g. ``{"match": {"subscription_id": 0, "seq": 5,
"sign": 1, ...}}``; gaps, ``caught_up`` and ``unsubscribed`` notices are lines too. A subscriber
without subscriptions is an error (a typo would otherwise wait forever) unless ``--wait``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from hotjoin.cli.commands.common import add_target, client, message_dict, rpc_errors


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
    p.add_argument("--wait", action="store_true",
                   help="with --subscriber: wait for its first subscription instead of failing")
    p.set_defaults(func=rpc_errors(run))


def run(args: argparse.Namespace) -> int:
    from hotjoin.cli.main import CliError

    if not args.subscriber and not args.id:
        raise CliError("give --subscriber NAME or --id ID (hotjoin subscriptions TOPIC lists them)")
    if args.count < 0:
        raise CliError(f"--count must be >= 0, got {args.count}")
    n = 0
    with client(args) as hj:
        # A unary call first: an unknown topic, a refused connection or mismatched TLS settings
        # fail here with their status instead of the stream retrying forever.
        if args.subscriber:
            first = next(iter(hj.list_subscriptions(args.topic, args.subscriber, page_size=1)), None)
            if first is None and not args.wait:
                raise CliError(f"subscriber {args.subscriber!r} has no subscriptions on topic "
                               f"{args.topic!r} (hotjoin subscriptions {args.topic} lists them; "
                               "--wait waits for the first)", code=1)
        else:
            hj.get_topic(args.topic)
        cursors = {i: args.after for i in args.id} if args.after is not None else None
        stream = hj.listen(args.topic, args.subscriber, args.id, cursors, from_latest=args.from_latest,
                           auto_commit=1.0 if args.commit else None,
                           ignore_committed=args.ignore_committed)
        if args.after is not None:
            stream.request.default_after_seq = args.after
        try:
            for msg in stream:
                sys.stdout.write(json.dumps(message_dict(msg)) + "\n")
                sys.stdout.flush()
                if msg.WhichOneof("message") == "match":
                    n += 1
                    if args.count and n >= args.count:
                        if args.commit:  # printed = processed
                            stream.commit(include_last=True)
                        break
        finally:
            stream.cancel()
    return 0
