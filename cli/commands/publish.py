"""``hotjoin publish TOPIC FILE``: publish events from JSON lines, CSV or Parquet, with progress.

Fields (README "File formats", ``examples/events.jsonl``), named exactly as in ``FIELDS``:
``side`` (R or S), ``id`` (empty or null: assigned by the server), ``key``, ``value``, ``time``
(an integer; required unless ``--server-time``) and optionally ``payload`` (text or binary) and
``end`` (an integer >= time: the event is the interval ``[time, end]``; empty or null: a point;
an end needs a time, docs/design.md "Interval events").
Any other field (a JSON key, a CSV header column, a Parquet column) is an error, with a hint for
a near miss (``tme``: did you mean ``time``?). ``-`` reads JSON lines from stdin.

The whole file is checked before anything is sent, so a bad file publishes nothing: exit code 2
and one line ``FILE:LINE: what is wrong``. The check reads the file with pyarrow into record
batches (Parquet and CSV as a stream, JSON lines with pyarrow's streaming JSON reader) and tests
each batch with vectorised compute functions; only when a batch fails does a row-by-row reader
go through the file to name the first bad line. The file is then read a second time and each
batch goes out as one columnar publish request (``PublishRequest.columns``): no Python object is
built per row beyond the id strings. With ``--server-time``, rows without a time are sent in
requests of their own (runs of rows with and without a time, in order), since a columnar batch
either carries a time for every event or takes the server's clock. (A file that the row reader
accepts but pyarrow does not, e.g. a JSON line longer than pyarrow's block, is published row by
row.)

Publishing again is safe: the server answers an event already stored with the same content as
an identical duplicate (``EventStatus.identical``), which is counted (``identical_duplicates``
in the summary) and otherwise ignored. So when publishing stops part-way (server unavailable,
a batch refused), the error line says how many events, through which line, were acknowledged,
and running the same command again publishes the rest. Events without an id are the exception:
each run assigns them new ids. Any other rejection (late, invalid, an id held by an event with
other content) makes the exit code 1 unless ``--allow-rejections``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import difflib
import json
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hotjoin.cli.commands.common import add_target, client, rpc_error_line, rpc_errors

# The fields of an event, in the order files usually list them. Every other name is an error.
FIELDS = ("side", "id", "key", "value", "time", "payload", "end")
REQUIRED = ("side", "key", "value")  # and time, unless --server-time
INT64 = 2**63
_TIME_HINT = "give every event a time, or pass --server-time to take the server's clock"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "publish", help="publish events from JSON lines, CSV or Parquet",
        description="Publish events. One event per JSON line (.jsonl/.json or - for stdin), per "
        "CSV row (header side,id,key,value,time[,payload][,end]) or per Parquet row, e.g.\n  "
        "{\"side\": \"R\", \"id\": \"r1\", \"key\": 10.0, \"value\": 1.5, \"time\": 1000}\n"
        f"The fields are {', '.join(FIELDS)}; any other field is an error. side is R or S; an "
        "empty id is assigned by the server; time (ms) is required unless --server-time; end "
        "(optional, >= time) makes the event the interval [time, end] for interval joins. The "
        "whole file is checked first: a bad line publishes nothing. Publishing a file again is "
        "safe: events already stored with the same content are counted as identical "
        "duplicates and skipped (events without an id get new ids each time). See "
        "examples/events.jsonl.")
    add_target(p)
    p.add_argument("topic")
    p.add_argument("file", help="events file (.jsonl/.json, .csv, .parquet) or - for stdin")
    p.add_argument("--batch-size", type=int, default=1000, help="events per streamed batch")
    p.add_argument("--server-time", action="store_true",
                   help="events without a time take the server's clock when they arrive (events "
                   "with one keep it). Off by default because a server-clock time moves the "
                   "topic's watermark to now, after which events with real, older times are late")
    p.add_argument("--allow-rejections", action="store_true",
                   help="exit 0 even when the server rejects events (late, duplicate with other "
                   "content, invalid); identical duplicates never fail the command")
    p.add_argument("--quiet", action="store_true", help="no progress or notes on stderr")
    p.set_defaults(func=rpc_errors(run))


# ---- checking a file -------------------------------------------------------------------------


def unknown_field(name: str) -> str:
    """The message for a field that is not one of ``FIELDS``, with a hint for a near miss.

    >>> unknown_field("tme")
    "unknown field 'tme' (did you mean 'time'?)"
    >>> unknown_field("colour")
    "unknown field 'colour' (the fields are side, id, key, value, time, payload, end)"
    """
    close = difflib.get_close_matches(name, FIELDS, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}?" if close else f"the fields are {', '.join(FIELDS)}"
    return f"unknown field {name!r} ({hint})"


def _kind(path: str) -> str:
    return "parquet" if path.endswith(".parquet") else "csv" if path.endswith(".csv") else "json"


def check_names(path: str, name: str) -> None:
    """Check the column names a CSV header (line 1) or a Parquet schema declares: each one of
    ``FIELDS``, none twice. JSON lines have no header: their keys are checked per line."""
    from hotjoin.cli.main import CliError

    kind = _kind(path)
    if kind == "csv":
        with open(path, newline="", encoding="utf-8-sig") as f:
            header = next(csv.reader(f), None) or []
        where = f"{name}:1"
    elif kind == "parquet":
        import pyarrow as pa

        try:
            header = _parquet_columns(path)
        except (pa.ArrowInvalid, OSError) as e:
            raise CliError(f"{name}: not a readable Parquet file ({e})") from None
        where = f"{name} (Parquet schema)"
    else:
        return
    seen: set[str] = set()
    for col in header:
        if col not in FIELDS:
            raise CliError(f"{where}: {unknown_field(col)}")
        if col in seen:
            raise CliError(f"{where}: field {col!r} appears twice")
        seen.add(col)


def _parquet_columns(path: str) -> list[str]:
    """The Parquet file's columns, without the index columns pandas stores beside the data
    (named in its ``pandas`` schema metadata; they are not event fields)."""
    import pyarrow.parquet as pq

    schema = pq.ParquetFile(path).schema_arrow
    index: list[Any] = []
    meta = (schema.metadata or {}).get(b"pandas")
    if meta:
        with contextlib.suppress(ValueError, AttributeError):
            index = [c for c in json.loads(meta).get("index_columns", []) if isinstance(c, str)]
    return [c for c in schema.names if c not in index]


def _types() -> dict[str, Any]:
    import pyarrow as pa

    return {"side": pa.string(), "id": pa.string(), "key": pa.float64(), "value": pa.float64(),
            "time": pa.int64(), "payload": pa.string(), "end": pa.int64()}


def read_batches(path: str, batch_size: int) -> Iterator[Any]:
    """Record batches of at most ``batch_size`` rows of an events file (a CSV header and a
    Parquet schema checked by ``check_names`` first)."""
    import pyarrow as pa

    types = _types()
    kind = _kind(path)
    if kind == "parquet":
        import pyarrow.parquet as pq

        reader: Any = pq.ParquetFile(path).iter_batches(batch_size=batch_size,
                                                        columns=_parquet_columns(path))
    elif kind == "csv":
        import pyarrow.csv as pcsv

        # only an empty cell is null: an id "NA" or "null" is an id
        opts = pcsv.ConvertOptions(column_types=types, strings_can_be_null=True,
                                   quoted_strings_can_be_null=False, null_values=[""])
        reader = pcsv.open_csv(path, convert_options=opts)
    else:
        import pyarrow.json as pj

        # fields not in the schema are kept (inferred) for check_batch to find
        reader = pj.open_json(path, parse_options=pj.ParseOptions(
            explicit_schema=pa.schema(list(types.items())), unexpected_field_behavior="infer"))
    for batch in reader:
        for start in range(0, batch.num_rows, batch_size):
            yield batch.slice(start, batch_size)


@dataclass
class FileSummary:
    """What the check of a file found: its events, those without an id (assigned anew by
    every run), and whether the fast (columnar) reader can publish it."""

    events: int = 0
    without_id: int = 0
    columnar: bool = True


def check_batch(batch: Any, server_time: bool) -> int:
    """Vectorised check of one record batch; ``ValueError`` when any row would be refused by
    ``row_to_event`` (or a column has a type the columnar path does not take). Returns the
    number of rows without an id. O(rows), in Arrow compute kernels."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = batch.schema.names
    bad = [n for n in names if n not in FIELDS]
    if bad:
        raise ValueError(unknown_field(bad[0]))
    for name in (*REQUIRED, *(() if server_time else ("time",))):
        if name not in names:
            raise ValueError(f"missing field {name!r}")
    if batch.num_rows == 0:
        return 0
    types = {f.name: f.type for f in batch.schema}
    text = (pa.types.is_string, pa.types.is_large_string)

    def of(name: str, kinds: tuple[Any, ...]) -> Any:
        if name in types and not any(k(types[name]) for k in kinds):
            raise ValueError(f"column {name} has type {types[name]}")
        return batch.column(name) if name in types else None

    side = of("side", text).cast(pa.string())
    if not pc.all(pc.is_in(pc.fill_null(side, ""), value_set=pa.array(["R", "S"]))).as_py():
        raise ValueError("a side other than R or S")
    for name in ("key", "value"):
        c = of(name, (pa.types.is_integer, pa.types.is_floating))
        if c.null_count or not pc.all(pc.is_finite(c.cast(pa.float64()))).as_py():
            raise ValueError(f"a missing or non-finite {name}")
    t = of("time", (pa.types.is_integer, pa.types.is_null))
    if t is not None and t.null_count and not server_time:
        raise ValueError("a missing time")
    end = of("end", (pa.types.is_integer, pa.types.is_null))
    if end is not None and end.null_count < batch.num_rows:
        if t is None or pa.types.is_null(t.type):
            raise ValueError("an end without a time")
        e64, t64 = end.cast(pa.int64()), t.cast(pa.int64())
        if pc.any(pc.and_(pc.is_valid(e64), pc.is_null(t64))).as_py():
            raise ValueError("an end without a time")
        if pc.any(pc.less(e64, t64)).as_py():
            raise ValueError("an end before its time")
    of("payload", (*text, pa.types.is_binary, pa.types.is_large_binary, pa.types.is_null))
    ids = of("id", (*text, pa.types.is_null))
    if ids is None or pa.types.is_null(ids.type):
        return batch.num_rows
    return int(pc.sum(pc.or_kleene(pc.is_null(ids), pc.equal(ids, ""))).as_py() or 0)


class _RepeatedKey(Exception):
    pass


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _RepeatedKey(k)
        out[k] = v
    return out


def read_rows(path: str, name: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Rows of an events file as ``(where, row)``: ``where`` names the file (``name``) and line
    (or Parquet row) for error messages. JSON values keep their JSON types; CSV values are
    strings (None for a missing cell; extra cells under the key None)."""
    from hotjoin.cli.main import CliError

    kind = _kind(path)
    if kind == "json":
        with open(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                where = f"{name}:{lineno}"
                try:
                    row = json.loads(raw.decode("utf-8"), object_pairs_hook=_object)
                except UnicodeDecodeError:
                    raise CliError(f"{where}: not valid UTF-8 text") from None
                except json.JSONDecodeError as e:
                    raise CliError(f"{where}: not valid JSON ({e.msg} at column {e.colno}); "
                                   "expected one JSON object per line") from None
                except _RepeatedKey as e:
                    raise CliError(f"{where}: field {e.args[0]!r} appears twice") from None
                if not isinstance(row, dict):
                    hint = (" (a JSON array file? write one event object per line instead)"
                            if isinstance(row, list) else "")
                    got = type(row).__name__
                    raise CliError(f"{where}: expected a JSON object, got {got}{hint}")
                yield where, row
    elif kind == "csv":
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            try:
                for row in reader:
                    yield f"{name}:{reader.line_num}", row
            except (csv.Error, UnicodeDecodeError) as e:
                why = "not valid UTF-8 text" if isinstance(e, UnicodeDecodeError) else str(e)
                raise CliError(f"{name}:{reader.line_num + 1}: {why}") from None
    else:
        import pyarrow.parquet as pq

        i = 0
        for batch in pq.ParquetFile(path).iter_batches(columns=_parquet_columns(path)):
            for row in batch.to_pylist():
                i += 1
                yield f"{name}: row {i}", row


def _absent(row: dict[str, Any], field: str) -> bool:
    return row.get(field) in (None, "")


def _number(row: dict[str, Any], field: str, text: bool) -> float:
    if _absent(row, field):
        raise ValueError(f"missing field {field!r}")
    v = row[field]
    if text:
        try:
            x = float(v)
        except ValueError:
            raise ValueError(f"{field} must be a number, got {v!r}") from None
    elif isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{field} must be a number, got {v!r}")
    else:
        x = float(v)
    if not math.isfinite(x):
        raise ValueError(f"{field} must be finite, got {v!r}")
    return x


def row_to_event(row: dict[str, Any], text: bool = False, server_time: bool = False) -> Any:
    """The wire event of one row (``hotjoin.clients.event``: its id and time may be left to the
    server); ``ValueError`` says what is wrong with it.

    ``text``: a CSV row, whose values are strings to parse; otherwise JSON or Parquet values,
    which must have their types (a number, not the string of one). A missing time is an error
    unless ``server_time`` (then the event takes the server's clock).

    >>> row_to_event({"side": "R", "id": "r1", "key": 1, "value": 2.5, "time": 7}).time
    7
    >>> row_to_event({"side": "S", "id": "s1", "key": 1, "value": 2, "time": 7, "end": 9}).end
    9
    >>> row_to_event({"side": "R", "key": 1, "value": 2, "tme": 7})
    Traceback (most recent call last):
    ValueError: unknown field 'tme' (did you mean 'time'?)
    """
    from hotjoin.clients.client import event

    if None in row:  # csv.DictReader's key for cells beyond the header
        raise ValueError(f"more cells than the header's {len(row) - 1} columns")
    for k in row:
        if k not in FIELDS:
            raise ValueError(unknown_field(k))
    side = row.get("side")
    if side not in ("R", "S"):
        raise ValueError("missing field 'side'" if _absent(row, "side") else
                         f"side must be R or S, got {side!r}")
    eid = row.get("id") or ""
    if not isinstance(eid, str):
        raise ValueError(f"id must be a string, got {eid!r}")
    key, value = _number(row, "key", text), _number(row, "value", text)
    t = row.get("time")
    if _absent(row, "time"):
        if not server_time:
            raise ValueError(f"missing field 'time' ({_TIME_HINT})")
        t = None
    elif text:
        try:
            t = int(t)
        except ValueError:
            raise ValueError(f"time must be an integer, got {t!r}") from None
    elif isinstance(t, bool) or not isinstance(t, int):
        raise ValueError(f"time must be an integer, got {t!r}")
    if t is not None and not -INT64 <= t < INT64:
        raise ValueError(f"time {t} does not fit in 64 bits")
    end = row.get("end")
    if _absent(row, "end"):
        end = None
    else:
        if text:
            try:
                end = int(end)
            except ValueError:
                raise ValueError(f"end must be an integer, got {end!r}") from None
        elif isinstance(end, bool) or not isinstance(end, int):
            raise ValueError(f"end must be an integer, got {end!r}")
        if t is None:
            raise ValueError("end needs a time (an interval event is [time, end])")
        if not -INT64 <= end < INT64:
            raise ValueError(f"end {end} does not fit in 64 bits")
        if end < t:
            raise ValueError(f"end {end} is before time {t} (an interval needs end >= time)")
    payload = row.get("payload")
    if payload is None:
        payload = b""
    elif isinstance(payload, str):
        payload = payload.encode()
    elif not isinstance(payload, (bytes, bytearray)):
        raise ValueError(f"payload must be a string, got {payload!r}")
    return event(side, eid, key, value, t, bytes(payload), end)


def _first_bad_row(path: str, name: str, server_time: bool) -> FileSummary:
    """Check every row with the row reader; ``CliError`` names the first bad one. Returns the
    summary of a file that passes (to be published row by row)."""
    from hotjoin.cli.main import CliError

    out = FileSummary(columnar=False)
    text = _kind(path) == "csv"
    for where, row in read_rows(path, name):
        try:
            ev = row_to_event(row, text, server_time)
        except ValueError as e:
            raise CliError(f"{where}: {e}") from None
        out.events += 1
        out.without_id += not ev.id
    return out


def check_file(path: str, name: str, batch_size: int, server_time: bool) -> FileSummary:
    """Check a whole events file before anything is sent (``CliError``: ``FILE:LINE: ...``).

    The fast path tests pyarrow's record batches (``check_batch``); the first batch that fails
    (or a file pyarrow cannot read) hands over to the row reader, which names the first bad
    line. Memory: one record batch (or one row) at a time; time O(file).
    """
    import pyarrow as pa

    from hotjoin.cli.main import CliError

    try:
        check_names(path, name)
        out = FileSummary()
        try:
            for batch in read_batches(path, batch_size):
                out.without_id += check_batch(batch, server_time)
                out.events += batch.num_rows
        except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError, KeyError, UnicodeDecodeError):
            return _first_bad_row(path, name, server_time)
        return out
    except CliError as e:
        raise CliError(f"{e}; nothing was published") from None
    except OSError as e:
        why = e.strerror or e
        raise CliError(f"{name}: cannot read it ({why}); nothing was published") from None


def _columns_runs(batch: Any, server_time: bool) -> Iterator[Any]:
    """``EventColumns`` of a checked record batch: one, or with ``server_time`` one per run of
    rows with / without a time."""
    import numpy as np

    from hotjoin.clients.client import columns_from_arrow

    if batch.num_rows == 0:
        return
    if not server_time or "time" not in batch.schema.names or \
            batch.column("time").null_count in (0, batch.num_rows):
        yield columns_from_arrow(batch)
        return
    null = batch.column("time").is_null().to_numpy(zero_copy_only=False)
    edges = np.flatnonzero(np.diff(null.astype(np.int8))) + 1
    for lo, hi in zip(np.r_[0, edges].tolist(), np.r_[edges, len(null)].tolist(), strict=True):
        yield columns_from_arrow(batch.slice(lo, hi - lo))  # an all-null time: the server's clock


def _locate(path: str, name: str, n: int) -> str:
    """Where the ``n``-th event (1-based) of the file is, e.g. ``events.jsonl:1002``."""
    for i, (where, _) in enumerate(read_rows(path, name), 1):
        if i == n:
            return where
    return name


def _resume_hint(pub: Any, path: str, name: str, found: FileSummary) -> str:
    """What a failure part-way leaves: the events acknowledged (a prefix of the file) and how
    to publish the rest."""
    done = pub.acknowledged
    if done:
        head = (f"{_events(done)} (through {_locate(path, name, done)}) "
                f"{'was' if done == 1 else 'were'} acknowledged before the failure")
    else:
        head = "no event was acknowledged before the failure"
    tail = ("run the same command again to publish the rest (events already published come back "
            "as identical duplicates")
    if found.without_id:
        tail += f"; events without an id ({found.without_id} in this file) get new ids on every run"
    return f"{head}; {tail})"


# ---- the command -----------------------------------------------------------------------------


def _events(n: int) -> str:
    return f"{n} event" if n == 1 else f"{n} events"


def run(args: argparse.Namespace) -> int:
    """Check the file, publish it, print the JSON summary; the exit code (module docstring)."""
    from hotjoin.cli.main import CliError

    if args.batch_size < 1:
        raise CliError(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.file != "-" and not Path(args.file).is_file():
        raise CliError(f"no such file: {args.file}")
    suffixes = (".jsonl", ".json", ".ndjson", ".csv", ".parquet")
    if not args.file.endswith(suffixes) and args.file != "-":
        raise CliError(f"{args.file}: unknown file type (use .jsonl/.json, .csv or .parquet)")
    path, name = args.file, args.file
    if path == "-":  # read once: it is read twice (checked, then sent)
        import tempfile

        tmp = tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False)  # noqa: SIM115
        tmp.write(sys.stdin.buffer.read())
        tmp.close()
        path, name = tmp.name, "stdin"
    try:
        found = check_file(path, name, args.batch_size, args.server_time)
        return _publish(args, path, name, found)
    finally:
        if args.file == "-":
            Path(path).unlink(missing_ok=True)


def _publish(args: argparse.Namespace, path: str, name: str, found: FileSummary) -> int:
    """Send a checked file, then print the summary and decide the exit code."""
    from hotjoin.cli.main import CliError
    from hotjoin.clients.errors import HotjoinError

    sent, t0, shown = 0, time.monotonic(), False
    last = t0

    def progress() -> None:
        nonlocal last, shown
        now = time.monotonic()
        if not args.quiet and now - last > 1.0:
            print(f"\r{sent} sent, {pub.acknowledged} acknowledged, {sent / (now - t0):.0f}/s",
                  end="", file=sys.stderr)
            last, shown = now, True

    with client(args) as hj:
        pub = hj.publisher(args.topic, batch_size=args.batch_size)
        try:
            if found.columnar:
                for batch in read_batches(path, args.batch_size):
                    for cols in _columns_runs(batch, args.server_time):
                        pub.publish_request(cols)
                        sent += len(cols.ids)
                    progress()
            else:
                text = _kind(path) == "csv"
                for _, row in read_rows(path, name):
                    pub.publish(row_to_event(row, text, args.server_time))
                    sent += 1
                    if sent % args.batch_size == 0:
                        progress()
            pub.flush()
        except HotjoinError as e:
            line = rpc_error_line(e, args)
            if shown:
                print(file=sys.stderr)
            raise CliError(f"{line}; {_resume_hint(pub, path, name, found)}", code=1) from None
        except KeyboardInterrupt:
            print(f"\nhotjoin publish: interrupted; {_resume_hint(pub, path, name, found)}",
                  file=sys.stderr)
            raise
        finally:
            with contextlib.suppress(HotjoinError):
                pub.close()
    if shown:
        print(file=sys.stderr)
    same, others = pub.identical, pub.rejected - pub.identical
    out = {"sent": sent, "accepted": pub.accepted, "rejected": pub.rejected,
           "identical_duplicates": same, "seconds": round(time.monotonic() - t0, 3),
           "rejections": [{"id": s.id, "reason": s.reason} for s in pub.rejections[:20]]}
    print(json.dumps(out), flush=True)
    already = (f"{_events(same)} {'was' if same == 1 else 'were'} already published "
               "(identical duplicates)")
    if others and not args.allow_rejections:
        first = pub.rejections[0] if pub.rejections else None
        why = f" (first: {first.id!r}: {first.reason})" if first is not None else ""
        besides = f"; {already}" if same else ""
        raise CliError(f"{others} of {sent} events rejected{why}{besides}; --allow-rejections "
                        "accepts that", code=1)
    if same and not args.quiet:
        print(f"{already}, skipped", file=sys.stderr)
    return 0


__all__ = ["FIELDS", "check_file", "read_batches", "read_rows", "row_to_event", "unknown_field"]
