"""``hotjoin stats TOPIC``: sizes, τ, hotspots and router decisions of a topic as JSON."""

from __future__ import annotations

import argparse
import json
from typing import Any

from hotjoin.cli.commands.common import add_target, client, message_dict, rpc_errors


def register(sub: Any) -> None:
    p = sub.add_parser("stats", help="show a topic's statistics",
                       description="Print a topic's statistics as JSON: stored tuples per side, "
                       "subscriptions, stabbing number (tau), hotspots and router decisions per "
                       "kind, listeners, delivery buffers and match log, scale-out workers.")
    add_target(p)
    p.add_argument("topic")
    p.set_defaults(func=rpc_errors(run))


def run(args: argparse.Namespace) -> int:
    with client(args) as hj:
        print(json.dumps(message_dict(hj.stats(args.topic).wire), indent=2))
    return 0
