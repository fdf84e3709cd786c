"""``hotjoin unsubscribe TOPIC ID [ID ...]``: cancel subscriptions by id."""

from __future__ import annotations

import argparse
import json
from typing import Any

from hotjoin.cli.commands.common import add_target, client, rpc_errors


def register(sub: Any) -> None:
    p = sub.add_parser("unsubscribe", help="cancel subscriptions by id",
                       description="Cancel subscriptions (ids as printed by `hotjoin subscribe` and "
                       "`hotjoin subscriptions`). Their listeners get an `unsubscribed` notice. "
                       "Stops at the first id the server refuses (e.g. NOT_FOUND).")
    add_target(p)
    p.add_argument("topic")
    p.add_argument("ids", type=int, nargs="+", metavar="ID", help="subscription id")
    p.set_defaults(func=rpc_errors(run))


def run(args: argparse.Namespace) -> int:
    from hotjoin.cli.main import CliError

    if any(i < 0 for i in args.ids):
        raise CliError("subscription ids are >= 0")
    done = []
    with client(args) as hj:
        for sid in args.ids:
            seq = hj.unsubscribe(args.topic, sid)
            done.append({"subscription_id": sid, "seq": seq})
    print(json.dumps({"unsubscribed": done}))
    return 0
