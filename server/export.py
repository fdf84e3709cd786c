"""Export a topic's durable log as Parquet for bulk replay (SPEC §4–5; schema in ``server/EXPORT.md``).

Reads ``DATA_DIR/topics/<topic>/log`` directly (safe while the server runs: the log is append-only
and reading stops at a torn tail) and writes ``events.parquet``, ``subscriptions.parquet`` and
``topic.json`` (lateness, retention, strategy) into the output directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.convert import SIDE_FROM_PB, decode_columns
from hotjoin.server.log import read_log

EVENTS_SCHEMA = pa.schema([
    ("seq", pa.int64()), ("op", pa.string()), ("side", pa.string()), ("id", pa.string()),
    ("key", pa.float64()), ("value", pa.float64()), ("time", pa.int64()), ("payload", pa.binary()),
    ("received_unix_nanos", pa.int64()),
])
SUBSCRIPTIONS_SCHEMA = pa.schema([
    ("subscription_id", pa.int64()), ("kind", pa.string()),
    ("a_lo", pa.float64()), ("a_hi", pa.float64()), ("b_lo", pa.float64()), ("b_hi", pa.float64()),
    ("c_lo", pa.float64()), ("c_hi", pa.float64()), ("w", pa.int64()), ("delivery", pa.string()),
    ("snapshot", pa.bool_()), ("subscriber", pa.string()), ("registered_seq", pa.int64()),
    ("unsubscribed_seq", pa.int64()),
])


def _bounds(r: pb.Range | None) -> tuple[float | None, float | None]:
    if r is None:
        return None, None
    return (r.lo if r.HasField("lo") else None, r.hi if r.HasField("hi") else None)


def export_topic(data_dir: Path, topic: str, out_dir: Path) -> dict[str, Any]:
    """Write the Parquet files of ``topic``; returns counts."""
    tdir = data_dir / "topics" / topic
    if not (tdir / "topic.json").exists():
        raise FileNotFoundError(f"no topic {topic!r} in {data_dir}")
    out_dir.mkdir(parents=True, exist_ok=True)
    ev: dict[str, list[Any]] = {f.name: [] for f in EVENTS_SCHEMA}
    subs: dict[int, dict[str, Any]] = {}
    header, batches = read_log(tdir / "log")
    for batch in batches:
        for op in batch.ops:
            kind = op.WhichOneof("op")
            if kind == "publish":
                e = op.publish
                row = (op.seq, "publish", SIDE_FROM_PB[e.side], e.id, e.key, e.value, e.time, e.payload,
                       op.received_unix_nanos)
            elif kind == "publish_columns":  # a columnar batch: seqs op.seq, op.seq + 1, ...
                b = decode_columns(op.publish_columns)
                n = len(b)
                rows = (np.arange(op.seq, op.seq + n).tolist(), ["publish"] * n,
                        [SIDE_FROM_PB.get(x, "") for x in b.sides.tolist()], b.ids.tolist(), b.keys.tolist(),
                        b.values.tolist(), b.times.tolist() if b.times is not None else [None] * n,
                        b.payloads if b.payloads is not None else [b""] * n, [op.received_unix_nanos] * n)
                for name, col in zip(ev, rows, strict=True):
                    ev[name].extend(col)
                continue
            elif kind == "delete":
                d = op.delete
                row = (op.seq, "delete", SIDE_FROM_PB[d.side], d.id, None, None, None, None,
                       op.received_unix_nanos)
            elif kind == "subscribe":
                s = op.subscribe.spec
                which = s.WhichOneof("kind")
                body = getattr(s, which)
                a = _bounds(body.a)
                c = _bounds(body.c)
                b = _bounds(body.b) if which == "band" else (None, None)
                subs[op.subscribe.subscription_id] = dict(
                    subscription_id=op.subscribe.subscription_id, kind=which,
                    a_lo=a[0], a_hi=a[1], b_lo=b[0], b_hi=b[1], c_lo=c[0], c_hi=c[1],
                    w=body.w if which == "window" else None,
                    delivery="affected" if s.delivery == pb.AFFECTED else "pairs",
                    snapshot=s.snapshot, subscriber=s.subscriber, registered_seq=op.seq,
                    unsubscribed_seq=None,
                )
                continue
            else:
                subs[op.unsubscribe]["unsubscribed_seq"] = op.seq
                continue
            for name, v in zip(ev, row, strict=True):
                ev[name].append(v)
    pq.write_table(pa.table(ev, schema=EVENTS_SCHEMA), out_dir / "events.parquet")
    cols = {f.name: [s[f.name] for s in subs.values()] for f in SUBSCRIPTIONS_SCHEMA}
    pq.write_table(pa.table(cols, schema=SUBSCRIPTIONS_SCHEMA), out_dir / "subscriptions.parquet")
    opts = json.loads((tdir / "topic.json").read_text())
    # A compacted log starts with a snapshot: its rows (seq <= compacted_at_seq) are the stored
    # tuples and live subscriptions at their original seqs, not the full history before it.
    opts["compacted_at_seq"] = None if header is None else header["seq"]
    (out_dir / "topic.json").write_text(json.dumps(opts))
    return {"events": len(ev["seq"]), "subscriptions": len(subs), "out": str(out_dir)}


def main_json(data_dir: Path, topic: str, out_dir: Path) -> str:
    return json.dumps(export_topic(data_dir, topic, out_dir))
