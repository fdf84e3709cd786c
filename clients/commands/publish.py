"""``hotjoin publish TOPIC FILE``: publish events from JSON lines, CSV or Parquet, with progress.

Columns/fields: ``side`` (R or S), ``id`` (empty: assigned), ``key``, ``value``, ``time``
(empty: server clock) and optionally ``payload`` (text). ``-`` reads JSON lines from stdin.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hotjoin.clients.commands.common import add_target, client, rpc_errors


def register(sub: Any) -> None:
    p = sub.add_parser("publish", help="publish events from JSON lines, CSV or Parquet")
    add_target(p)
    p.add_argument("topic")
    p.add_argument("file", help="events file (.jsonl/.json, .csv, .parquet) or - for stdin")
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=rpc_errors(run))


def read_rows(path: str) -> Iterator[dict[str, Any]]:
    """Rows of an events file as dicts."""
    if path == "-":
        for line in sys.stdin:
            if line.strip():
                yield json.loads(line)
    elif path.endswith(".csv"):
        with open(path, newline="") as f:
            yield from csv.DictReader(f)
    elif path.endswith(".parquet"):
        import pyarrow.parquet as pq

        for batch in pq.ParquetFile(path).iter_batches():
            yield from batch.to_pylist()
    else:
        with open(path) as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)


def row_to_event(row: dict[str, Any]) -> Any:
    from hotjoin.clients.client import event

    t = row.get("time")
    payload = row.get("payload") or b""
    return event(
        str(row["side"]), str(row.get("id") or ""), float(row["key"]), float(row["value"]),
        None if t in (None, "") else int(t),
        payload.encode() if isinstance(payload, str) else bytes(payload),
    )


def run(args: argparse.Namespace) -> int:
    from hotjoin.clients.cli import CliError

    if args.file != "-" and not Path(args.file).exists():
        raise CliError(f"no such file: {args.file}")
    sent, t0, last = 0, time.monotonic(), 0.0
    with client(args) as hj, hj.publisher(args.topic, batch_size=args.batch_size) as pub:
        for row in read_rows(args.file):
            try:
                pub.publish(row_to_event(row))
            except (KeyError, ValueError, TypeError) as e:
                raise CliError(f"bad event row {sent + 1}: {e}") from None
            sent += 1
            now = time.monotonic()
            if not args.quiet and now - last > 1.0:
                print(f"\r{sent} sent, {pub.accepted} acknowledged, {sent / (now - t0):.0f}/s",
                      end="", file=sys.stderr)
                last = now
        pub.flush()
        out = {"sent": sent, "accepted": pub.accepted, "rejected": pub.rejected,
               "seconds": round(time.monotonic() - t0, 3),
               "rejections": [{"id": s.id, "reason": s.reason} for s in pub.rejections[:20]]}
    if not args.quiet:
        print(file=sys.stderr)
    print(json.dumps(out))
    return 0
