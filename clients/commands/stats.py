"""``hotjoin stats TOPIC``: sizes, τ, hotspots and router decisions of a topic as JSON."""

from __future__ import annotations

import argparse
import json
from typing import Any

from hotjoin.clients.commands.common import add_target, client, rpc_errors


def register(sub: Any) -> None:
    p = sub.add_parser("stats", help="show a topic's statistics")
    add_target(p)
    p.add_argument("topic")
    p.set_defaults(func=rpc_errors(run))


def run(args: argparse.Namespace) -> int:
    from google.protobuf.json_format import MessageToDict

    with client(args) as hj:
        print(json.dumps(MessageToDict(hj.stats(args.topic), always_print_fields_with_no_presence=True), indent=2))
    return 0
