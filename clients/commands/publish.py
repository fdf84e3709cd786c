"""``hotjoin publish TOPIC FILE``: publish events from JSON lines, CSV or Parquet, with progress.

Columns/fields (README "File formats", ``examples/events.jsonl``): ``side`` (R or S), ``id``
(empty: assigned), ``key``, ``value``, ``time`` (empty: server clock) and optionally ``payload``
(text). ``-`` reads JSON lines from stdin. A bad line stops the command before it is sent,
naming the file and line; events already sent stay published (each batch is acknowledged as
durable). Any rejected event makes the exit code 1 unless ``--allow-rejections``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hotjoin.clients.commands.common import add_target, client, rpc_errors


def register(sub: Any) -> None:
    p = sub.add_parser("publish", help="publish events from JSON lines, CSV or Parquet",
                       description="Publish events. One event per JSON line (.jsonl/.json or - for "
                       "stdin), per CSV row (header side,id,key,value,time[,payload]) or per Parquet "
                       "row, e.g.\n  {\"side\": \"R\", \"id\": \"r1\", \"key\": 10.0, \"value\": 1.5, "
                       "\"time\": 1000}\nside is R or S; an empty id is assigned by the server; "
                       "a missing time is the server's clock (ms). See examples/events.jsonl.")
    add_target(p)
    p.add_argument("topic")
    p.add_argument("file", help="events file (.jsonl/.json, .csv, .parquet) or - for stdin")
    p.add_argument("--batch-size", type=int, default=1000, help="events per streamed batch")
    p.add_argument("--allow-rejections", action="store_true",
                   help="exit 0 even when the server rejects events (late, duplicate, invalid)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=rpc_errors(run))


def read_rows(path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Rows of an events file as ``(where, row)``: ``where`` names the file and line (or
    Parquet row) for error messages."""
    from hotjoin.clients.cli import CliError

    if path == "-" or not path.endswith((".csv", ".parquet")):
        name = "stdin" if path == "-" else path
        f = sys.stdin if path == "-" else open(path)  # noqa: SIM115 (closed below)
        try:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                where = f"{name}:{lineno}"
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    raise CliError(f"{where}: not valid JSON ({e.msg} at column {e.colno}); "
                                   "expected one JSON object per line") from None
                if not isinstance(row, dict):
                    hint = (" (a JSON array file? write one event object per line instead)"
                            if isinstance(row, list) else "")
                    raise CliError(f"{where}: expected a JSON object, got {type(row).__name__}{hint}")
                yield where, row
        finally:
            if f is not sys.stdin:
                f.close()
    elif path.endswith(".csv"):
        with open(path, newline="") as f:
            for i, row in enumerate(csv.DictReader(f), 2):
                yield f"{path}:{i}", row
    else:
        import pyarrow.parquet as pq

        i = 0
        for batch in pq.ParquetFile(path).iter_batches():
            for row in batch.to_pylist():
                i += 1
                yield f"{path}: row {i}", row


def _number(row: dict[str, Any], name: str) -> float:
    if name not in row or row[name] in (None, ""):
        raise ValueError(f"missing field {name!r}")
    try:
        x = float(row[name])
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {row[name]!r}") from None
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {row[name]!r}")
    return x


def row_to_event(row: dict[str, Any]) -> Any:
    """An ``Event`` from one row; ``ValueError`` says which field is wrong."""
    from hotjoin.clients.client import event

    side = row.get("side")
    if side not in ("R", "S"):
        raise ValueError("missing field 'side'" if side in (None, "") else
                         f"side must be R or S, got {side!r}")
    t = row.get("time")
    if t in (None, ""):
        t = None
    else:
        try:
            t = int(t)
        except (TypeError, ValueError):
            raise ValueError(f"time must be an integer, got {row['time']!r}") from None
    payload = row.get("payload") or b""
    return event(side, str(row.get("id") or ""), _number(row, "key"), _number(row, "value"), t,
                 payload.encode() if isinstance(payload, str) else bytes(payload))


def run(args: argparse.Namespace) -> int:
    from hotjoin.clients.cli import CliError

    if args.batch_size < 1:
        raise CliError(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.file != "-" and not Path(args.file).is_file():
        raise CliError(f"no such file: {args.file}")
    if not args.file.endswith((".jsonl", ".json", ".ndjson", ".csv", ".parquet")) and args.file != "-":
        raise CliError(f"{args.file}: unknown file type (use .jsonl/.json, .csv or .parquet)")
    sent, t0, shown = 0, time.monotonic(), False
    last = t0
    with client(args) as hj, hj.publisher(args.topic, batch_size=args.batch_size) as pub:
        for where, row in read_rows(args.file):
            try:
                ev = row_to_event(row)
            except ValueError as e:
                raise CliError(f"{where}: bad event: {e} ({sent} events before it were sent)") from None
            pub.publish(ev)
            sent += 1
            now = time.monotonic()
            if not args.quiet and now - last > 1.0:
                print(f"\r{sent} sent, {pub.accepted} acknowledged, {sent / (now - t0):.0f}/s",
                      end="", file=sys.stderr)
                last, shown = now, True
        pub.flush()
        out = {"sent": sent, "accepted": pub.accepted, "rejected": pub.rejected,
               "seconds": round(time.monotonic() - t0, 3),
               "rejections": [{"id": s.id, "reason": s.reason} for s in pub.rejections[:20]]}
    if shown:
        print(file=sys.stderr)
    print(json.dumps(out), flush=True)
    if pub.rejected and not args.allow_rejections:
        first = pub.rejections[0] if pub.rejections else None
        why = f" (first: {first.id!r}: {first.reason})" if first is not None else ""
        raise CliError(f"{pub.rejected} of {sent} events rejected{why}; --allow-rejections "
                       "accepts that", code=1)
    return 0
