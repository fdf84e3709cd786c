"""``hotjoin listen TOPIC``: print matches as JSON lines, resuming after reconnects (and, with
``--commit``, from the cursors committed on the server by an earlier run).

Each line is one message of the Listen stream in the CLI's JSON form (``common.message_dict``:
snake_case, zero values kept, integers as numbers), keyed by its kind:

- ``{"match": {"subscription_id": 0, "seq": 5, "sign": 1, "count": 1, "pairs": [...], ...}}``
  what one operation changed in one subscription's result;
- ``{"gap": {"subscription_id": 0, "from_seq": 3, "to_seq": 9, "reason": "..."}}`` messages no
  longer retained (docs/reference/persistence.md);
- ``{"caught_up": {"seq": 12}}`` everything retained up to seq 12 has been printed; live matches
  follow (once per connection);
- ``{"unsubscribed": {"subscription_id": 0, "seq": 14}}`` the subscription was cancelled.

``--matches-only`` prints the ``match`` lines alone. A subscriber without subscriptions is an
error (a typo would otherwise wait forever) unless ``--wait``. With ``--commit`` the position
of every printed message is committed (every second and at the end); a run that printed no
message commits the position it was told to resume from (``--after``), or says it had nothing
to commit (on stderr).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from hotjoin.cli.commands.common import add_target, client, message_dict, rpc_errors

CONTROL_LINES = ("gap", "caught_up", "unsubscribed")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "listen", help="stream matches of a subscriber or subscriptions",
        description="Print the matches of a subscriber's subscriptions (or of --id ones) as JSON "
        "lines, e.g.\n"
        '  {"match": {"subscription_id": 0, "seq": 5, "sign": 1, "count": 1, "pairs": '
        '[{"r_id": "r1", "s_id": "s1"}], ...}}\n'
        "Control lines, left out by --matches-only:\n"
        '  {"caught_up": {"seq": N}}       everything retained up to seq N was printed; live '
        "matches follow\n"
        '  {"gap": {"subscription_id": ..., "from_seq": ..., "to_seq": ..., "reason": ...}}  '
        "messages no longer retained\n"
        '  {"unsubscribed": {"subscription_id": ..., "seq": ...}}  the subscription was '
        "cancelled\n"
        "Reconnects and resumes by itself; --commit keeps the position on the server for the "
        "next run (docs/reference/persistence.md).")
    add_target(p)
    p.add_argument("topic")
    p.add_argument("--subscriber", default="",
                   help="every subscription of this subscriber (or give --id)")
    p.add_argument("--id", type=int, action="append", default=[],
                   help="a subscription id (repeatable)")
    p.add_argument("--after", type=int, default=None, metavar="SEQ",
                   help="start after this seq where no cursor was committed (default: the first "
                        "retained message)")
    p.add_argument("--from-latest", action="store_true",
                   help="skip retained messages: start with the next operation")
    p.add_argument("--count", type=int, default=0, help="stop after this many matches (0: never)")
    p.add_argument("--matches-only", action="store_true",
                   help="print match lines only, no caught_up, gap or unsubscribed lines")
    p.add_argument("--commit", action="store_true",
                   help="commit the position of every printed message on the server (every second "
                        "and at the end), so a later listen resumes after it (at-least-once)")
    p.add_argument("--ignore-committed", action="store_true",
                   help="start from --after / the first message even where a cursor was committed")
    p.add_argument("--wait", action="store_true",
                   help="with --subscriber: wait for its first subscription instead of failing")
    p.set_defaults(func=rpc_errors(run))


def line_of(item: Any) -> str:
    """The JSON line of one listen item (``{kind: message}``; module docstring)."""
    return json.dumps({item.kind: message_dict(item.wire)})


def _commit_at_end(hj: Any, args: argparse.Namespace, stream: Any) -> None:
    """What ``--commit`` does when the listen ends: commit the position of every message it
    received (printed, or skipped by ``--matches-only``) and, for ``--id`` with ``--after``,
    where it resumed from; with nothing received, the ``--after`` position of the subscriber's
    subscriptions, or say there was nothing to commit."""
    if stream.cursors:
        stream.commit(include_last=True)
        return
    if args.after is not None:
        n = hj.commit_cursors(args.topic, {i: args.after for i in args.id},
                              subscriber=args.subscriber,
                              after_seq=args.after if args.subscriber else None)
        print(f"hotjoin listen: no message was received; committed seq {args.after} (--after) "
              f"for {n} subscription(s)", file=sys.stderr)
    else:
        print("hotjoin listen: no message was received: nothing to commit (the committed cursors "
              "stay where they were)", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from hotjoin.cli.main import CliError
    from hotjoin.clients.results import Match

    if not args.subscriber and not args.id:
        raise CliError("give --subscriber NAME or --id ID (hotjoin subscriptions TOPIC lists them)")
    if args.count < 0:
        raise CliError(f"--count must be >= 0, got {args.count}")
    if args.after is not None and args.after < 0:
        raise CliError(f"--after must be >= 0, got {args.after}")
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
                           ignore_committed=args.ignore_committed, after_seq=args.after)
        try:
            for item in stream:
                is_match = isinstance(item, Match)
                if is_match or not args.matches_only:
                    sys.stdout.write(line_of(item) + "\n")
                    sys.stdout.flush()
                if is_match:
                    n += 1
                    if args.count and n >= args.count:
                        break
        except KeyboardInterrupt:
            if args.commit:
                _commit_at_end(hj, args, stream)
            raise
        finally:
            stream.cancel()
        if args.commit:  # printed = processed
            _commit_at_end(hj, args, stream)
    return 0
