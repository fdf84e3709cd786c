"""``hotjoin subscriptions TOPIC``: list subscriptions, like ``kafka-consumer-groups --describe``.

One JSON line per subscription (``common.message_dict`` of the server's ``Subscription``: id,
spec with kind, ranges and subscriber, ``registered_seq``, and whatever progress fields the
server reports), each with the topic's current sequence number ``topic_seq``; ``--table`` prints
aligned columns instead. The ``lag`` column is ``topic_seq`` minus the subscription's committed
cursor when the server reports one (server-kept cursors, SPEC §4), else ``-``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from hotjoin.clients.commands.common import add_target, client, message_dict, rpc_errors

# Field names a server with committed cursors may report on a Subscription (first one wins).
COMMITTED_FIELDS = ("committed_seq", "cursor", "committed")


def register(sub: Any) -> None:
    p = sub.add_parser("subscriptions", help="list a topic's subscriptions (with lag when known)")
    add_target(p)
    p.add_argument("topic")
    p.add_argument("--subscriber", default="", help="only this subscriber's subscriptions")
    p.add_argument("--table", action="store_true", help="aligned columns instead of JSON lines")
    p.set_defaults(func=rpc_errors(run))


def _describe(d: dict[str, Any]) -> str:
    spec = d.get("spec", {})
    kind = next((k for k in ("select", "band", "window") if k in spec), "?")

    def rng(r: dict[str, Any] | None) -> str:
        r = r or {}
        lo, hi = r.get("lo"), r.get("hi")
        return f"[{'' if lo is None else f'{lo:g}'}:{'' if hi is None else f'{hi:g}'}]"

    p = spec.get(kind, {})
    parts = [f"{k}={rng(p.get(k))}" for k in ("b", "a", "c") if k in p]
    if kind == "window":
        parts.append(f"w={p.get('w', 0)}")
    return f"{kind} " + " ".join(parts)


def run(args: argparse.Namespace) -> int:
    with client(args) as hj:
        topic_seq = hj.stats(args.topic).seq
        rows = []
        for s in hj.list_subscriptions(args.topic, args.subscriber):
            d = message_dict(s)
            d["topic_seq"] = topic_seq
            committed = next((d[f] for f in COMMITTED_FIELDS if f in d), None)
            if committed is not None and "lag" not in d:
                d["lag"] = max(0, topic_seq - int(committed))
            if args.table:
                rows.append(d)
            else:
                sys.stdout.write(json.dumps(d) + "\n")
    if args.table:
        head = ("ID", "SUBSCRIBER", "DELIVERY", "REGISTERED_SEQ", "TOPIC_SEQ", "LAG", "JOIN")
        table = [head] + [(str(d["subscription_id"]), d["spec"].get("subscriber", ""),
                           str(d["spec"].get("delivery", "")), str(d.get("registered_seq", "")),
                           str(topic_seq), str(d.get("lag", "-")), _describe(d)) for d in rows]
        widths = [max(len(r[i]) for r in table) for i in range(len(head) - 1)]
        for r in table:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])
    return 0
