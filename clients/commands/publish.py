"""``hotjoin publish TOPIC FILE``: publish events from JSON lines, CSV or Parquet, with progress.

Columns/fields (README "File formats", ``examples/events.jsonl``): ``side`` (R or S), ``id``
(empty or null: assigned), ``key``, ``value``, ``time`` (empty or null: server clock) and
optionally ``payload`` (text or binary). ``-`` reads JSON lines from stdin.

The file is read with pyarrow into record batches (Parquet and CSV as a stream, JSON lines with
pyarrow's streaming JSON reader) and each batch goes out as one columnar publish request
(``PublishRequest.columns``): no Python object is built per row beyond the id strings. Rows
without a time are sent in their own requests (runs of rows with and without time, in order),
since a columnar batch either carries a time for every event or takes the server's clock.

A batch that does not parse or holds a bad row (a bad number, a side other than R or S, a missing
column) switches to a row-by-row reader from the first row not yet sent: the good rows before the
bad one are published, and the command stops at the bad one with one line naming the file and
line. Events already sent stay published (each batch is acknowledged as durable). Any rejected
event makes the exit code 1 unless ``--allow-rejections``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hotjoin.clients.commands.common import add_target, client, rpc_errors

REQUIRED = ("side", "key", "value")


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


def _types() -> dict[str, Any]:
    import pyarrow as pa

    return {"side": pa.string(), "id": pa.string(), "key": pa.float64(), "value": pa.float64(),
            "time": pa.int64(), "payload": pa.string()}


def read_batches(path: str, batch_size: int) -> Iterator[Any]:
    """Record batches of at most ``batch_size`` rows of an events file (or stdin for ``-``)."""
    import pyarrow as pa

    types = _types()
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        reader: Any = pq.ParquetFile(path).iter_batches(batch_size=batch_size)
    elif path.endswith(".csv"):
        import pyarrow.csv as pcsv

        opts = pcsv.ConvertOptions(column_types=types, strings_can_be_null=True,
                                   quoted_strings_can_be_null=False)
        reader = pcsv.open_csv(path, convert_options=opts)
    else:
        import pyarrow.json as pj

        source: Any = io.BytesIO(sys.stdin.buffer.read()) if path == "-" else path
        # the schema of the fields that are present; others stay absent (unexpected fields kept)
        reader = pj.open_json(source, parse_options=pj.ParseOptions(
            explicit_schema=pa.schema([(k, v) for k, v in types.items()]),
            unexpected_field_behavior="infer"))
    for batch in reader:
        for start in range(0, batch.num_rows, batch_size):
            yield batch.slice(start, batch_size)


def _columns_runs(batch: Any) -> Iterator[Any]:
    """``EventColumns`` of a record batch: one per run of rows with / without a time."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from hotjoin.clients.client import columns_from_arrow

    missing = [c for c in REQUIRED if c not in batch.schema.names]
    if missing:
        raise ValueError(f"missing column(s): {', '.join(missing)}")
    if batch.num_rows == 0:
        return
    # rows the row reader would refuse go there for a message naming the line
    if not pc.all(pc.is_in(batch.column("side").cast(pa.string()), pa.array(["R", "S"]))).as_py():
        raise ValueError("a side other than R or S")
    for name in ("key", "value"):
        c = batch.column(name)
        if c.null_count or not pc.all(pc.is_finite(c.cast(pa.float64()))).as_py():
            raise ValueError(f"a missing or non-finite {name}")
    if "time" not in batch.schema.names or batch.column("time").null_count in (0, batch.num_rows):
        yield columns_from_arrow(batch)
        return
    null = batch.column("time").is_null().to_numpy(zero_copy_only=False)
    edges = np.flatnonzero(np.diff(null.astype(np.int8))) + 1
    for lo, hi in zip(np.r_[0, edges].tolist(), np.r_[edges, len(null)].tolist(), strict=True):
        yield columns_from_arrow(batch.slice(lo, hi - lo))  # an all-null time: the server's clock


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


def _publish_rows(path: str, pub: Any, skip: int, sent: int) -> int:
    """The slow path after a batch failed: publish row by row from data row ``skip`` on, stop
    with one line at the first bad row. Returns the number of events sent in all."""
    from hotjoin.clients.cli import CliError

    for i, (where, row) in enumerate(read_rows(path)):
        if i < skip:
            continue
        try:
            ev = row_to_event(row)
        except ValueError as e:
            raise CliError(f"{where}: bad event: {e} ({sent} events before it were sent)") from None
        pub.publish(ev)
        sent += 1
    return sent


def run(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from hotjoin.clients.cli import CliError

    if args.batch_size < 1:
        raise CliError(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.file != "-" and not Path(args.file).is_file():
        raise CliError(f"no such file: {args.file}")
    if not args.file.endswith((".jsonl", ".json", ".ndjson", ".csv", ".parquet")) and args.file != "-":
        raise CliError(f"{args.file}: unknown file type (use .jsonl/.json, .csv or .parquet)")
    path = args.file
    if path == "-":  # read once: both readers may need it
        import tempfile

        tmp = tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False)  # noqa: SIM115
        tmp.write(sys.stdin.buffer.read())
        tmp.close()
        path = tmp.name
    sent, t0, shown = 0, time.monotonic(), False
    last = t0
    try:
        with client(args) as hj, hj.publisher(args.topic, batch_size=args.batch_size) as pub:
            try:
                for batch in read_batches(path, args.batch_size):
                    for cols in _columns_runs(batch):
                        pub.publish_request(cols)
                        sent += len(cols.ids)
                    now = time.monotonic()
                    if not args.quiet and now - last > 1.0:
                        print(f"\r{sent} sent, {pub.accepted} acknowledged, {sent / (now - t0):.0f}/s",
                              end="", file=sys.stderr)
                        last, shown = now, True
            except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, KeyError, UnicodeDecodeError):
                sent = _publish_rows(path, pub, sent, sent)
            pub.flush()
            out = {"sent": sent, "accepted": pub.accepted, "rejected": pub.rejected,
                   "seconds": round(time.monotonic() - t0, 3),
                   "rejections": [{"id": s.id, "reason": s.reason} for s in pub.rejections[:20]]}
    except CliError as e:
        if args.file == "-":
            e.args = (str(e).replace(path, "stdin"),) + e.args[1:]
        raise
    finally:
        if args.file == "-":
            Path(path).unlink(missing_ok=True)
    if shown:
        print(file=sys.stderr)
    print(json.dumps(out), flush=True)
    if pub.rejected and not args.allow_rejections:
        first = pub.rejections[0] if pub.rejections else None
        why = f" (first: {first.id!r}: {first.reason})" if first is not None else ""
        raise CliError(f"{pub.rejected} of {sent} events rejected{why}; --allow-rejections "
                       "accepts that", code=1)
    return 0
