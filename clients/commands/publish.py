"""``hotjoin publish TOPIC FILE``: publish events from JSON lines, CSV or Parquet, with progress.

Columns/fields: ``side`` (R or S), ``id`` (empty or null: assigned), ``key``, ``value``, ``time``
(empty or null: server clock) and optionally ``payload`` (text or binary). ``-`` reads JSON lines
from stdin.

The file is read with pyarrow into record batches (Parquet and CSV as a stream, JSON lines with
pyarrow's streaming JSON reader) and each batch goes out as one columnar publish request
(``PublishRequest.columns``): no Python object is built per row beyond the id strings. Rows
without a time are sent in their own requests (runs of rows with and without time, in order),
since a columnar batch either carries a time for every event or takes the server's clock.
A file that cannot be parsed (a bad number, a missing column) is an error naming the problem.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hotjoin.clients.commands.common import add_target, client, rpc_errors

REQUIRED = ("side", "key", "value")


def register(sub: Any) -> None:
    p = sub.add_parser("publish", help="publish events from JSON lines, CSV or Parquet")
    add_target(p)
    p.add_argument("topic")
    p.add_argument("file", help="events file (.jsonl/.json, .csv, .parquet) or - for stdin")
    p.add_argument("--batch-size", type=int, default=1000)
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

    from hotjoin.clients.client import columns_from_arrow

    missing = [c for c in REQUIRED if c not in batch.schema.names]
    if missing:
        raise ValueError(f"missing column(s): {', '.join(missing)}")
    if batch.num_rows == 0:
        return
    if "time" not in batch.schema.names or batch.column("time").null_count in (0, batch.num_rows):
        yield columns_from_arrow(batch)
        return
    null = batch.column("time").is_null().to_numpy(zero_copy_only=False)
    edges = np.flatnonzero(np.diff(null.astype(np.int8))) + 1
    for lo, hi in zip(np.r_[0, edges].tolist(), np.r_[edges, len(null)].tolist(), strict=True):
        yield columns_from_arrow(batch.slice(lo, hi - lo))  # an all-null time: the server's clock


def run(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from hotjoin.clients.cli import CliError

    if args.file != "-" and not Path(args.file).exists():
        raise CliError(f"no such file: {args.file}")
    if args.batch_size < 1:
        raise CliError("--batch-size must be >= 1")
    sent, t0, last = 0, time.monotonic(), 0.0
    with client(args) as hj, hj.publisher(args.topic, batch_size=args.batch_size) as pub:
        try:
            for batch in read_batches(args.file, args.batch_size):
                for cols in _columns_runs(batch):
                    pub.publish_request(cols)
                    sent += len(cols.ids)
                now = time.monotonic()
                if not args.quiet and now - last > 1.0:
                    print(f"\r{sent} sent, {pub.accepted} acknowledged, {sent / (now - t0):.0f}/s",
                          end="", file=sys.stderr)
                    last = now
        except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, KeyError) as e:
            raise CliError(f"bad events file {args.file} (after {sent} events): "
                           f"{str(e).splitlines()[0]}") from None
        pub.flush()
        out = {"sent": sent, "accepted": pub.accepted, "rejected": pub.rejected,
               "seconds": round(time.monotonic() - t0, 3),
               "rejections": [{"id": s.id, "reason": s.reason} for s in pub.rejections[:20]]}
    if not args.quiet:
        print(file=sys.stderr)
    print(json.dumps(out))
    return 0
