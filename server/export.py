"""Export a topic's durable log as Parquet for bulk replay (schema in ``docs/reference/export-format.md``).

Reads ``DATA_DIR/topics/<topic>/log`` directly and writes ``events.parquet``,
``subscriptions.parquet`` and ``topic.json`` (lateness, retention, strategy, max advance) into the
output directory. Safe while the server runs, and consistent: the log file is read through one
open descriptor (a compaction replaces the file, never rewrites it in place), it is append-only,
and reading stops at a torn tail, so the export is exactly the topic's operations up to some
sequence number, which ``topic.json``'s ``last_seq`` names. A log frame that does not verify
stops the export with ``DamagedFileError`` (nothing is written). ``until_seq`` exports the
operations up to that sequence number only: a point-in-time copy, which ``hotjoin restore``
(``cli/commands/restore.py``) can publish into a new topic.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.convert import SIDE_FROM_PB, EventBatch, decode_columns
from hotjoin.server.log import read_log

EVENTS_SCHEMA = pa.schema([
    ("seq", pa.int64()), ("op", pa.string()), ("side", pa.string()), ("id", pa.string()),
    ("key", pa.float64()), ("value", pa.float64()), ("time", pa.int64()), ("payload", pa.binary()),
    ("received_unix_nanos", pa.int64()), ("end", pa.int64()),
])
SUBSCRIPTIONS_SCHEMA = pa.schema([
    ("subscription_id", pa.int64()), ("kind", pa.string()),
    ("a_lo", pa.float64()), ("a_hi", pa.float64()), ("b_lo", pa.float64()), ("b_hi", pa.float64()),
    ("c_lo", pa.float64()), ("c_hi", pa.float64()), ("w", pa.int64()), ("delivery", pa.string()),
    ("snapshot", pa.bool_()), ("subscriber", pa.string()), ("registered_seq", pa.int64()),
    ("unsubscribed_seq", pa.int64()),
    ("ss_lo", pa.int64()), ("ss_hi", pa.int64()), ("se_lo", pa.int64()), ("se_hi", pa.int64()),
    ("es_lo", pa.int64()), ("es_hi", pa.int64()), ("ee_lo", pa.int64()), ("ee_hi", pa.int64()),
    ("preset", pa.string()),
])
ENDPOINT_RANGES = ("ss", "se", "es", "ee")


def _ends(b: EventBatch, n: int) -> list[int | None]:
    """The ``end`` column of a columnar frame's first ``n`` events: None for a point."""
    if b.ends is None or b.times is None:
        return [None] * n
    return [None if e == t else e for e, t in zip(b.ends[:n].tolist(), b.times[:n].tolist(),
                                                   strict=True)]


def _bounds(r: pb.Range | pb.IntRange | None) -> tuple[float | None, float | None]:
    if r is None:
        return None, None
    return (r.lo if r.HasField("lo") else None, r.hi if r.HasField("hi") else None)


def export_topic(data_dir: Path, topic: str, out_dir: Path, until_seq: int | None = None) -> dict[str, Any]:
    """Write the Parquet files of ``topic`` (the operations with seq <= ``until_seq`` when set);
    returns counts. ``ValueError`` for an ``until_seq`` the log cannot give (before the snapshot
    of a compacted log)."""
    tdir = data_dir / "topics" / topic
    if not (tdir / "topic.json").exists():
        raise FileNotFoundError(f"no topic {topic!r} in {data_dir}")
    if until_seq is not None and until_seq < 0:
        raise ValueError(f"--until-seq must be >= 0, got {until_seq}")
    opts = json.loads((tdir / "topic.json").read_text())
    ev: dict[str, list[Any]] = {f.name: [] for f in EVENTS_SCHEMA}
    subs: dict[int, dict[str, Any]] = {}
    header, batches = read_log(tdir / "log")
    if header is not None and until_seq is not None and until_seq < int(header["seq"]):
        raise ValueError(f"the log of {topic!r} was compacted at seq {header['seq']}: it holds a "
                         f"snapshot, not the history before it, so --until-seq must be >= "
                         f"{header['seq']}")
    limit = until_seq if until_seq is not None else np.iinfo(np.int64).max
    last = 0
    for batch in batches:  # stops before reading past ``limit`` (a damage after it is not read)
        if batch.ops and batch.ops[0].seq > limit:
            break
        for op in batch.ops:
            if op.seq > limit:
                break
            kind = op.WhichOneof("op")
            last = op.seq
            if kind == "publish":
                e = op.publish
                row = (op.seq, "publish", SIDE_FROM_PB[e.side], e.id, e.key, e.value, e.time, e.payload,
                       op.received_unix_nanos,
                       e.end if e.HasField("end") and e.end != e.time else None)
            elif kind == "publish_columns":  # a columnar batch: seqs op.seq, op.seq + 1, ...
                b = decode_columns(op.publish_columns)
                n = min(len(b), limit - op.seq + 1)
                last = op.seq + n - 1
                rows = (np.arange(op.seq, op.seq + n).tolist(), ["publish"] * n,
                        [SIDE_FROM_PB.get(x, "") for x in b.sides[:n].tolist()], b.ids[:n].tolist(),
                        b.keys[:n].tolist(), b.values[:n].tolist(),
                        b.times[:n].tolist() if b.times is not None else [None] * n,
                        b.payloads[:n] if b.payloads is not None else [b""] * n,
                        [op.received_unix_nanos] * n, _ends(b, n))
                for name, col in zip(ev, rows, strict=True):
                    ev[name].extend(col)
                continue
            elif kind == "delete":
                d = op.delete
                row = (op.seq, "delete", SIDE_FROM_PB[d.side], d.id, None, None, None, None,
                       op.received_unix_nanos, None)
            elif kind == "subscribe":
                s = op.subscribe.spec
                which = s.WhichOneof("kind")
                body = getattr(s, which)
                a = _bounds(body.a)
                c = _bounds(body.c)
                b = _bounds(body.b) if which in ("band", "interval") else (None, None)
                ends = {f: _bounds(getattr(body, f)) if which == "interval" else (None, None)
                        for f in ENDPOINT_RANGES}
                subs[op.subscribe.subscription_id] = dict(
                    subscription_id=op.subscribe.subscription_id, kind=which,
                    a_lo=a[0], a_hi=a[1], b_lo=b[0], b_hi=b[1], c_lo=c[0], c_hi=c[1],
                    w=body.w if which == "window" else None,
                    delivery="affected" if s.delivery == pb.AFFECTED else "pairs",
                    snapshot=s.snapshot, subscriber=s.subscriber, registered_seq=op.seq,
                    unsubscribed_seq=None,
                    **{f"{f}_{x}": ends[f][i] for f in ENDPOINT_RANGES for i, x in enumerate(("lo", "hi"))},
                    preset=(body.preset or None) if which == "interval" else None,
                )
                continue
            else:
                subs[op.unsubscribe]["unsubscribed_seq"] = op.seq
                continue
            for name, v in zip(ev, row, strict=True):
                ev[name].append(v)
        if last >= limit:
            break
    if header is not None:
        last = max(last, int(header["seq"]))
    out_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(ev, schema=EVENTS_SCHEMA), out_dir / "events.parquet")
    cols = {f.name: [s[f.name] for s in subs.values()] for f in SUBSCRIPTIONS_SCHEMA}
    pq.write_table(pa.table(cols, schema=SUBSCRIPTIONS_SCHEMA), out_dir / "subscriptions.parquet")
    # A compacted log starts with a snapshot: its rows (seq <= compacted_at_seq) are the stored
    # tuples and live subscriptions at their original seqs, not the full history before it.
    opts["compacted_at_seq"] = None if header is None else header["seq"]
    opts["last_seq"] = last
    (out_dir / "topic.json").write_text(json.dumps(opts))
    return {"events": len(ev["seq"]), "subscriptions": len(subs), "last_seq": last, "out": str(out_dir)}


def main_json(data_dir: Path, topic: str, out_dir: Path, until_seq: int | None = None) -> str:
    return json.dumps(export_topic(data_dir, topic, out_dir, until_seq))
