"""``hotjoin cursors TOPIC``: committed positions, lag and backlog of a topic's subscriptions,
like ``kafka-consumer-groups --describe``.

Prints one line per subscription (``subscription subscriber committed lag pending
pending_bytes``; ``-`` for committed and lag when nothing was committed), then one line per
subscriber (``subscriptions committed max_lag pending pending_bytes``) and a total. Lag is the
subscription's newest seq − its committed seq (0 when nothing newer was delivered to it);
pending counts the messages owed to it that no listener has been sent yet, and their estimated
bytes, since the server started (docs/reference/metrics.md). ``--by-subscriber`` prints only the
per-subscriber lines. ``--json`` prints the ``GetCursorsResponse`` (the wire form) instead (with
``--by-subscriber``: the per-subscriber lines as JSON). With ``--commit SEQ`` it first commits
SEQ for every subscription of ``--subscriber`` (or for the ids given with ``--id``), e.g. to
skip a consumer group ahead after an outage.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from hotjoin.cli.commands.common import add_target, client, rpc_errors


def register(sub: Any) -> None:
    p = sub.add_parser("cursors", help="show committed cursors, lag and backlog of a topic's "
                                       "subscriptions and subscribers")
    add_target(p)
    p.add_argument("topic")
    p.add_argument("--subscriber", default="", help="only this subscriber's subscriptions")
    p.add_argument("--id", type=int, action="append", default=[], dest="ids",
                   help="only this subscription (repeatable)")
    p.add_argument("--by-subscriber", action="store_true",
                   help="one line per subscriber instead of one per subscription")
    p.add_argument("--commit", type=int, metavar="SEQ",
                   help="commit SEQ for --subscriber's subscriptions (or the --id ones) first")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=rpc_errors(run))


def by_subscriber(cursors: Any) -> dict[str, dict[str, Any]]:
    """Per subscriber name, in first-seen order: ``subscriptions``, ``committed`` (how many have
    a committed cursor), ``max_lag`` (None when none committed), ``pending``, ``pending_bytes``.

    >>> from hotjoin.clients import CommittedCursor
    >>> rows = [CommittedCursor(subscription_id=1, subscriber="a", committed_seq=3, lag=2,
    ...                         pending_messages=4, pending_bytes=192),
    ...         CommittedCursor(subscription_id=2, subscriber="a", pending_messages=1,
    ...                         pending_bytes=48)]
    >>> by_subscriber(rows)["a"]
    {'subscriptions': 2, 'committed': 1, 'max_lag': 2, 'pending': 5, 'pending_bytes': 240}
    """
    out: dict[str, dict[str, Any]] = {}
    for c in cursors:
        s = out.setdefault(c.subscriber, {"subscriptions": 0, "committed": 0, "max_lag": None,
                                          "pending": 0, "pending_bytes": 0})
        s["subscriptions"] += 1
        s["pending"] += c.pending_messages
        s["pending_bytes"] += c.pending_bytes
        if c.committed_seq is not None:
            lag = c.lag or 0
            s["committed"] += 1
            s["max_lag"] = lag if s["max_lag"] is None else max(s["max_lag"], lag)
    return out


def _name(subscriber: str) -> str:
    return subscriber[:20] if subscriber else "-"


def run(args: argparse.Namespace) -> int:
    from google.protobuf.json_format import MessageToDict

    from hotjoin.cli.main import CliError

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
    groups = by_subscriber(resp.cursors)
    if args.json:
        if args.by_subscriber:
            print(json.dumps({"seq": resp.seq, "subscribers": [
                {"subscriber": name, **g} for name, g in groups.items()]}, indent=2))
        else:
            print(json.dumps(MessageToDict(resp.wire, always_print_fields_with_no_presence=True),
                             indent=2))
        return 0
    if not args.by_subscriber:
        print(f"{'subscription':>12}  {'subscriber':<20} {'committed':>10} {'lag':>10} "
              f"{'pending':>10} {'pending_bytes':>14}")
        for c in resp.cursors:
            has = c.committed_seq is not None
            print(f"{c.subscription_id:>12}  {_name(c.subscriber):<20} "
                  f"{c.committed_seq if has else '-':>10} {(c.lag or 0) if has else '-':>10} "
                  f"{c.pending_messages:>10} {c.pending_bytes:>14}")
        print()
    print(f"{'subscriber':<20} {'subscriptions':>13} {'committed':>10} {'max_lag':>10} "
          f"{'pending':>10} {'pending_bytes':>14}")
    for name, g in groups.items():
        lag = "-" if g["max_lag"] is None else g["max_lag"]
        print(f"{_name(name):<20} {g['subscriptions']:>13} {g['committed']:>10} {lag:>10} "
              f"{g['pending']:>10} {g['pending_bytes']:>14}")
    committed = sum(g["committed"] for g in groups.values())
    lag_total = sum(c.lag or 0 for c in resp.cursors if c.committed_seq is not None)
    print(f"topic seq {resp.seq}: {committed} of {len(resp.cursors)} subscriptions committed, "
          f"total lag {lag_total}, pending {sum(g['pending'] for g in groups.values())} messages "
          f"({sum(g['pending_bytes'] for g in groups.values())} bytes)")
    return 0
