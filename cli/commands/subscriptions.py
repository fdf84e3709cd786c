"""``hotjoin subscriptions TOPIC``: list subscriptions, like ``kafka-consumer-groups --describe``.

One JSON line per subscription (``common.message_dict`` of the server's ``Subscription``: id,
spec with kind, ranges (an interval join's endpoint ranges and its ``preset`` name, e.g.
``allen:overlaps``; the table shows the preset instead of the ranges) and subscriber, ``registered_seq``, and whatever progress fields the
server reports), each with the topic's current sequence number ``topic_seq``; ``--table`` prints
aligned columns instead. With server-kept cursors (docs/reference/persistence.md, "Durable delivery";
the client's ``get_cursors``, the ``GetCursors`` RPC), each line also carries ``committed_seq`` and ``lag`` (topic seq minus
committed seq); a subscription that never committed shows ``-`` in the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from hotjoin.cli.commands.common import add_target, client, message_dict, rpc_errors


def register(sub: Any) -> None:
    p = sub.add_parser("subscriptions", help="list a topic's subscriptions (with lag when known)")
    add_target(p)
    p.add_argument("topic")
    p.add_argument("--subscriber", default="", help="only this subscriber's subscriptions")
    p.add_argument("--table", action="store_true", help="aligned columns instead of JSON lines")
    p.set_defaults(func=rpc_errors(run))


def _describe(d: dict[str, Any]) -> str:
    spec = d.get("spec", {})
    kind = next((k for k in ("select", "band", "window", "interval") if k in spec), "?")

    def rng(r: dict[str, Any] | None) -> str:
        r = r or {}
        lo, hi = r.get("lo"), r.get("hi")
        return f"[{'' if lo is None else f'{lo:g}'}:{'' if hi is None else f'{hi:g}'}]"

    p = spec.get(kind, {})
    parts = [f"{k}={rng(p.get(k))}" for k in ("b", "a", "c") if k in p]
    if kind == "window":
        parts.append(f"w={p.get('w', 0)}")
    if kind == "interval":  # the preset's name (docs/design.md), else the raw endpoint ranges
        if p.get("preset"):
            parts.insert(0, p["preset"])
        else:
            parts += [f"{k}={rng(p.get(k))}" for k in ("ss", "se", "es", "ee")
                      if (p.get(k) or {}).get("lo") is not None
                      or (p.get(k) or {}).get("hi") is not None]
    return f"{kind} " + " ".join(parts)


def committed_positions(hj: Any, topic: str, subscriber: str) -> tuple[int | None, dict[int, Any]]:
    """``(topic seq, {subscription id: cursor})`` from the ``GetCursors`` RPC, or ``(None, {})``
    from a client or server without server-kept cursors."""
    from hotjoin.clients.errors import Unimplemented

    get = getattr(hj, "get_cursors", None)
    if get is None:
        return None, {}
    try:
        resp = get(topic, subscriber=subscriber)
    except Unimplemented:  # an older server
        return None, {}
    return int(resp.seq), {int(c.subscription_id): c for c in resp.cursors}


def with_lag(d: dict[str, Any], cursor: Any) -> dict[str, Any]:
    """``d`` plus ``committed_seq`` and ``lag`` of a ``CommittedCursor`` (when it has them)."""
    if cursor is not None and cursor.committed_seq is not None:
        d["committed_seq"] = int(cursor.committed_seq)
        d["lag"] = int(cursor.lag or 0)
    return d


def run(args: argparse.Namespace) -> int:
    with client(args) as hj:
        seq, cursors = committed_positions(hj, args.topic, args.subscriber)
        topic_seq = seq if seq is not None else hj.stats(args.topic).seq
        rows = []
        for s in hj.list_subscriptions(args.topic, args.subscriber):
            d = message_dict(s.wire)
            d["topic_seq"] = topic_seq
            with_lag(d, cursors.get(int(s.subscription_id)))
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
