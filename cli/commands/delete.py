"""``hotjoin delete TOPIC SIDE:ID [...]``: delete stored events (each pair they formed is
delivered again with sign −1; docs/how-to/cli.md, "Walk-through").

Events are named ``R:r1`` / ``S:s7``, on the command line or one per line in ``--file`` (``-``
for stdin). An event the server does not hold is reported and makes the exit code 1 unless
``--allow-rejections``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from hotjoin.cli.commands.common import add_target, client, rpc_errors

BATCH = 10_000


def register(sub: Any) -> None:
    p = sub.add_parser("delete", help="delete stored events (SIDE:ID)")
    add_target(p)
    p.add_argument("topic")
    p.add_argument("events", nargs="*", metavar="SIDE:ID", help="an event, e.g. R:r1")
    p.add_argument("--file", help="one SIDE:ID per line (- for stdin)")
    p.add_argument("--allow-rejections", action="store_true",
                   help="exit 0 even when some events are not found")
    p.set_defaults(func=rpc_errors(run))


def _parse(text: str, where: str) -> tuple[str, str]:
    from hotjoin.cli.main import CliError

    side, sep, eid = text.strip().partition(":")
    if not sep or side not in ("R", "S") or not eid:
        raise CliError(f"{where}: an event is SIDE:ID with side R or S (e.g. R:r1), got {text.strip()!r}")
    return side, eid


def run(args: argparse.Namespace) -> int:
    from hotjoin.cli.main import CliError

    items = [_parse(t, "argument") for t in args.events]
    if args.file:
        name = "stdin" if args.file == "-" else args.file
        try:
            text = sys.stdin.read() if args.file == "-" else open(args.file).read()  # noqa: SIM115
        except OSError as e:
            raise CliError(f"cannot read --file {args.file}: {e.strerror}") from None
        items += [_parse(line, f"{name}:{i}") for i, line in enumerate(text.splitlines(), 1)
                  if line.strip()]
    if not items:
        raise CliError("name the events to delete (SIDE:ID arguments or --file)")
    deleted, rejections = 0, []
    with client(args) as hj:
        for i in range(0, len(items), BATCH):
            resp = hj.delete_events(args.topic, items[i: i + BATCH])
            deleted += resp.deleted
            rejections += [{"id": st.id, "code": st.code, "reason": st.reason}
                           for st in resp.rejections]
    print(json.dumps({"deleted": deleted, "rejected": len(rejections), "rejections": rejections[:20]}))
    if rejections and not args.allow_rejections:
        raise CliError(f"{len(rejections)} of {len(items)} events not deleted (first: "
                       f"{rejections[0]['id']!r}: {rejections[0]['reason']}); --allow-rejections "
                       "accepts that", code=1)
    return 0
