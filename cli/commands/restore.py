"""``hotjoin restore EXPORT_DIR NEW_TOPIC``: rebuild a topic from an export, into a new topic.

The escape hatch for a topic whose state an operator regrets (a wrong event, a damaged file cut
by ``hotjoin topic repair``): export it as it was at a sequence number
(``hotjoin export TOPIC --until-seq N --out DIR``), then publish that copy into a new topic of the
running server. The new topic gets the export's options (lateness, retention, strategy, max
advance; ``--lateness``/``--retention`` override them) and the export's operations in sequence
order: subscriptions (their ids are numbered anew; the JSON summary maps old ids to new),
publishes as columnar batches, deletes and unsubscribes. Every event was accepted in this order
once, so it is accepted again: the new topic ends with the same stored tuples, watermark and live
subscriptions, and with the same sequence numbers when the export starts at seq 1 (an export of a
compacted log starts with a snapshot instead, so its numbers differ). Listeners of the new topic
receive the matches again as the events are published. Progress on stderr; a summary on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from hotjoin.cli.commands.common import add_target, client, rpc_errors

BATCH = 5_000


def register(sub: Any) -> None:
    p = sub.add_parser("restore", help="rebuild a topic from an export (hotjoin export) into a new topic",
                       description="Create NEW_TOPIC on the server with the options of the export in "
                       "EXPORT_DIR and apply its operations in sequence order (subscriptions, "
                       "publishes, deletes, unsubscribes). With `hotjoin export TOPIC --until-seq N` "
                       "this restores a topic as it was at seq N.")
    add_target(p)
    p.add_argument("export_dir", type=Path, help="a directory written by hotjoin export")
    p.add_argument("topic", help="the new topic (must not exist)")
    p.add_argument("--lateness", type=int, default=None, help="override the export's lateness")
    p.add_argument("--retention", type=int, default=None, help="override the export's retention")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=rpc_errors(run))


def _spec(row: dict[str, Any]) -> Any:
    from hotjoin.clients.client import band, select, window

    kw = {"delivery": row["delivery"] or "pairs", "snapshot": bool(row["snapshot"]),
          "subscriber": row["subscriber"] or ""}
    a, c = (row["a_lo"], row["a_hi"]), (row["c_lo"], row["c_hi"])
    if row["kind"] == "band":
        return band((row["b_lo"], row["b_hi"]), a, c, **kw)
    if row["kind"] == "window":
        return window(a, c, int(row["w"] or 0), **kw)
    if row["kind"] == "select":
        return select(a, c, **kw)
    raise ValueError(f"subscription {row['subscription_id']}: unknown kind {row['kind']!r}")


def load(export_dir: Path) -> tuple[dict[str, Any], list[tuple[int, str, Any]]]:
    """The export's options and its operations in sequence order: ``(seq, kind, payload)`` with
    kind ``subscribe`` (row), ``unsubscribe`` (old id), ``publish`` / ``delete`` (event row)."""
    import pyarrow.parquet as pq

    from hotjoin.cli.main import CliError

    missing = [f for f in ("topic.json", "events.parquet", "subscriptions.parquet")
               if not (export_dir / f).is_file()]
    if missing:
        raise CliError(f"{export_dir} is not an export of hotjoin export (missing "
                       f"{', '.join(missing)})")
    opts = json.loads((export_dir / "topic.json").read_text())
    ops: list[tuple[int, str, Any]] = []
    for row in pq.read_table(export_dir / "subscriptions.parquet").to_pylist():
        ops.append((int(row["registered_seq"]), "subscribe", row))
        if row["unsubscribed_seq"] is not None:
            ops.append((int(row["unsubscribed_seq"]), "unsubscribe", int(row["subscription_id"])))
    for row in pq.read_table(export_dir / "events.parquet").to_pylist():
        ops.append((int(row["seq"]), str(row["op"]), row))
    ops.sort(key=lambda op: op[0])
    return opts, ops


def run(args: argparse.Namespace) -> int:
    from hotjoin.cli.main import CliError
    from hotjoin.clients.client import ref

    opts, ops = load(args.export_dir)
    lateness = opts.get("lateness", 0) if args.lateness is None else args.lateness
    retention = opts.get("retention") if args.retention is None else args.retention
    ids: dict[int, int] = {}
    done = {"subscriptions": 0, "unsubscribed": 0, "published": 0, "deleted": 0}
    t0 = last = time.monotonic()
    with client(args) as hj:
        hj.create_topic(args.topic, lateness, retention, opts.get("strategy") or {},
                        max_advance=opts.get("max_advance") or 0)
        i = 0
        while i < len(ops):
            kind = ops[i][1]
            j = i
            while j < len(ops) and ops[j][1] == kind and j - i < BATCH and kind != "unsubscribe":
                j += 1
            run_ = ops[i:max(j, i + 1)]
            if kind == "subscribe":
                new = hj.subscribe_many(args.topic, [_spec(r) for _, _, r in run_])
                ids.update(zip((int(r["subscription_id"]) for _, _, r in run_), new, strict=True))
                done["subscriptions"] += len(new)
            elif kind == "unsubscribe":
                hj.unsubscribe(args.topic, ids[run_[0][2]])
                done["unsubscribed"] += 1
            elif kind == "publish":
                rows = [r for _, _, r in run_]
                resp = hj.publish_columns(
                    args.topic, [r["side"] for r in rows], [r["id"] for r in rows],
                    [r["key"] for r in rows], [r["value"] for r in rows],
                    [r["time"] for r in rows], [r["payload"] or b"" for r in rows])
                if resp.rejected:
                    s = resp.statuses[0]
                    raise CliError(f"event {s.id!r} of seq {run_[s.index][0]} was rejected "
                                   f"({s.reason}); {done['published']} events were published before "
                                   "it", code=1)
                done["published"] += len(rows)
            elif kind == "delete":
                hj.delete_events(args.topic, [ref(r["side"], r["id"]) for _, _, r in run_])
                done["deleted"] += len(run_)
            else:
                raise CliError(f"{args.export_dir}: unknown operation {kind!r} at seq {ops[i][0]}")
            i += len(run_)
            now = time.monotonic()
            if not args.quiet and now - last > 1.0:
                print(f"\r{i} of {len(ops)} operations applied", end="", file=sys.stderr)
                last = now
        seq = hj.get_topic(args.topic).seq
    if not args.quiet and last != t0:
        print(file=sys.stderr)
    print(json.dumps({"topic": args.topic, "operations": len(ops), **done, "seq": seq,
                      "export_last_seq": opts.get("last_seq"),
                      "subscription_ids": {str(k): v for k, v in ids.items()},
                      "seconds": round(time.monotonic() - t0, 3)}))
    return 0
