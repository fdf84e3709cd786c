"""``hotjoin cursors TOPIC``: committed positions and lag of a topic's subscriptions.

Prints one line per subscription (``subscription subscriber committed lag``, ``-`` when nothing
was committed) and a total; ``--json`` prints the ``GetCursorsResponse`` instead. With
``--commit SEQ`` it first commits SEQ for every subscription of ``--subscriber`` (or for the
ids given with ``--id``), e.g. to skip a consumer group ahead after an outage.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from hotjoin.clients.commands.common import add_target, client, rpc_errors


def register(sub: Any) -> None:
    p = sub.add_parser("cursors", help="show committed cursors and lag of a topic's subscriptions")
    add_target(p)
    p.add_argument("topic")
    p.add_argument("--subscriber", default="", help="only this subscriber's subscriptions")
    p.add_argument("--id", type=int, action="append", default=[], dest="ids",
                   help="only this subscription (repeatable)")
    p.add_argument("--commit", type=int, metavar="SEQ",
                   help="commit SEQ for --subscriber's subscriptions (or the --id ones) first")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=rpc_errors(run))


def run(args: argparse.Namespace) -> int:
    from google.protobuf.json_format import MessageToDict

    from hotjoin.clients.cli import CliError

    with client(args) as hj:
        if args.commit is not None:
            if args.commit < 0:
                raise CliError("--commit needs a sequence number >= 0")
            if not args.subscriber and not args.ids:
                raise CliError("--commit needs --subscriber or --id")
            n = hj.commit_cursors(args.topic, {i: args.commit for i in args.ids},
                                  subscriber=args.subscriber,
                                  after_seq=args.commit if args.subscriber else None)
            print(f"committed seq {args.commit} for {n} subscriptions")
        resp = hj.get_cursors(args.topic, args.subscriber, args.ids)
    if args.json:
        print(json.dumps(MessageToDict(resp, always_print_fields_with_no_presence=True), indent=2))
        return 0
    print(f"{'subscription':>12}  {'subscriber':<20} {'committed':>10} {'lag':>10}")
    committed = lag = 0
    for c in resp.cursors:
        has = c.HasField("committed_seq")
        committed += has
        lag += c.lag if has else 0
        print(f"{c.subscription_id:>12}  {c.subscriber[:20]:<20} "
              f"{c.committed_seq if has else '-':>10} {c.lag if has else '-':>10}")
    print(f"topic seq {resp.seq}: {committed} of {len(resp.cursors)} subscriptions committed, "
          f"total lag {lag}")
    return 0
