"""``hotjoin subscribe TOPIC``: register one subscription from flags or many from a JSON-lines file.

File lines look like ``{"kind": "band", "b": [-1, 1], "a": [0, null], "delivery": "affected",
"snapshot": false, "subscriber": "me"}`` (``kind`` select/band/window; ranges ``[lo, hi]`` with
``null`` for unbounded; ``w`` for window joins).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hotjoin.clients.commands.common import add_target, client, parse_range, rpc_errors


def register(sub: Any) -> None:
    p = sub.add_parser("subscribe", help="register subscriptions (flags or a JSON-lines file)")
    add_target(p)
    p.add_argument("topic")
    p.add_argument("--file", type=Path, help="JSON lines, one subscription per line")
    p.add_argument("--kind", choices=("select", "band", "window"), default="band")
    p.add_argument("--a", help="range A as LO:HI (either side may be empty)")
    p.add_argument("--b", help="range B (band joins)")
    p.add_argument("--c", help="range C")
    p.add_argument("--w", type=int, default=0, help="window w (window joins)")
    p.add_argument("--delivery", choices=("pairs", "affected"), default="pairs")
    p.add_argument("--snapshot", action="store_true", help="deliver the current result first")
    p.add_argument("--subscriber", default="", help="subscriber name")
    p.set_defaults(func=rpc_errors(run))


def spec_from_dict(d: dict[str, Any], defaults: argparse.Namespace | None = None) -> Any:
    """A ``SubscriptionSpec`` from one JSON object."""
    from hotjoin.clients.client import band, select, window

    def r(name: str) -> Any:
        v = d.get(name)
        return None if v is None else (v[0], v[1])

    common = dict(delivery=d.get("delivery", "pairs"), snapshot=bool(d.get("snapshot", False)),
                  subscriber=d.get("subscriber", ""))
    kind = d.get("kind", "band")
    if kind == "select":
        return select(r("a"), r("c"), **common)
    if kind == "window":
        return window(r("a"), r("c"), int(d.get("w", 0)), **common)
    if kind == "band":
        return band(r("b"), r("a"), r("c"), **common)
    raise ValueError(f"unknown kind {kind!r}")


def run(args: argparse.Namespace) -> int:
    from hotjoin.clients.cli import CliError

    if args.file:
        lines = (sys.stdin.read() if str(args.file) == "-" else args.file.read_text()).splitlines()
        try:
            specs = [spec_from_dict(json.loads(line)) for line in lines if line.strip()]
        except (ValueError, KeyError, TypeError, IndexError) as e:
            raise CliError(f"bad subscription file: {e}") from None
    else:
        specs = [spec_from_dict({"kind": args.kind, "a": parse_range(args.a), "b": parse_range(args.b),
                                 "c": parse_range(args.c), "w": args.w, "delivery": args.delivery,
                                 "snapshot": args.snapshot, "subscriber": args.subscriber})]
    with client(args) as hj:
        ids = hj.subscribe_many(args.topic, specs)
    print(json.dumps({"subscription_ids": ids} if len(ids) > 1 else {"subscription_id": ids[0]}))
    return 0
