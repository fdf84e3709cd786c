"""Read a ``hotjoin export`` (``docs/reference/export-format.md``) into one seq-ordered table of operations.

The replay needs the topic's full total order (docs/design.md, "The sequence"): the publishes and deletes of
``events.parquet`` plus the subscribes (at ``registered_seq``) and unsubscribes (at
``unsubscribed_seq``) of ``subscriptions.parquet``, merged and sorted by seq. Two columns are
derived here, once, over the whole log, because a shard sees only part of it:

- ``clock``: the largest event time published *before* each operation (a prefix max over seq),
  so every shard moves its watermark and expires retention exactly as the topic did;
- ``key`` of a delete: the export leaves it null, but the delete must reach the shard(s) of the
  tuple it removes, so it is the key of the latest earlier publish of the same (side, id).

A compacted export (``compacted_at_seq`` set) has rows with ``seq <= compacted_at_seq`` that are
state, not operations; they become ``RESTORE_PUBLISH`` / ``RESTORE_SUBSCRIBE`` rows, loaded
without deliveries. The largest event time at the compaction is not exported; the largest time
among the restored tuples stands in for it, which is exact for every later delivery (see
``docs/how-to/replay.md``).

Everything is columnar (numpy / pyarrow): reading and ordering 1,000,000 operations takes about a
second. Subscriptions are decoded into ``matcher`` objects by ``decode_subscriptions``, which the
shards call on the broadcast Arrow table.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hotjoin.matcher.model import (
    BandJoin,
    IntervalJoin,
    Range,
    SelectJoin,
    Subscription,
    WindowJoin,
)

PUBLISH, DELETE, SUBSCRIBE, UNSUBSCRIBE, RESTORE_PUBLISH, RESTORE_SUBSCRIBE = range(6)
OP_NAMES = ("publish", "delete", "subscribe", "unsubscribe", "restore-publish", "restore-subscribe")
SIDE_R, SIDE_S, NO_SIDE = 0, 1, -1
SIDE_NAMES = ("R", "S")

EVENT_COLUMNS = ("seq", "op", "side", "id", "key", "value", "time")
SUBSCRIPTION_COLUMNS = ("subscription_id", "kind", "a_lo", "a_hi", "b_lo", "b_hi", "c_lo", "c_hi",
                        "w", "delivery", "snapshot", "subscriber", "registered_seq",
                        "unsubscribed_seq")
INTERVAL_COLUMNS = ("ss_lo", "ss_hi", "se_lo", "se_hi", "es_lo", "es_hi", "ee_lo", "ee_hi",
                    "preset")
"""Columns of interval joins; an export written before interval joins existed has none (and
no ``end`` column in events.parquet: every event a point)."""


class LogError(ValueError):
    """The export is missing, malformed or not a log the server could have written."""


@dataclass(frozen=True)
class TopicOptions:
    """``topic.json`` of an export: what the engine of every shard is built with."""

    name: str = "topic"
    lateness: int = 0
    retention: int | None = None
    strategy: dict[str, str] = field(default_factory=dict)
    compacted_at_seq: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "lateness": self.lateness, "retention": self.retention,
                "strategy": dict(self.strategy), "compacted_at_seq": self.compacted_at_seq}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TopicOptions:
        def opt_int(name: str) -> int | None:
            v = d.get(name)
            if v is None:
                return None
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise LogError(f"topic.json: {name} must be an integer >= 0 or null, got {v!r}")
            return v

        lateness = opt_int("lateness")
        strategy = d.get("strategy") or {}
        if not isinstance(strategy, dict):
            raise LogError(f"topic.json: strategy must be an object, got {strategy!r}")
        return cls(str(d.get("name", "topic")), 0 if lateness is None else lateness,
                   opt_int("retention"), {str(k): str(v) for k, v in strategy.items()},
                   opt_int("compacted_at_seq"))


@dataclass
class Ops:
    """Operations as columns, one row each, sorted by seq (what a shard applies in order).

    ``kind``: PUBLISH … RESTORE_SUBSCRIBE; ``side``: SIDE_R / SIDE_S (NO_SIDE for subscription
    ops); ``sid``: subscription id (−1 for events); ``clock``/``has_clock``: the largest event
    time published before the row (none before the first publish); ``end``: an interval event's
    end (``== time`` for a point and for the other rows).
    """

    seq: np.ndarray
    kind: np.ndarray
    side: np.ndarray
    id: np.ndarray
    key: np.ndarray
    value: np.ndarray
    time: np.ndarray
    sid: np.ndarray
    clock: np.ndarray
    has_clock: np.ndarray
    end: np.ndarray = None  # type: ignore[assignment]  # None: points (end = time)

    COLUMNS = ("seq", "kind", "side", "id", "key", "value", "time", "sid", "clock", "has_clock",
               "end")

    def __post_init__(self) -> None:
        if self.end is None:
            self.end = np.asarray(self.time, dtype=np.int64).copy()

    def __len__(self) -> int:
        return int(self.seq.shape[0])

    def take(self, rows: np.ndarray) -> Ops:
        return Ops(*(getattr(self, c)[rows] for c in self.COLUMNS))

    def to_arrow(self) -> pa.RecordBatch:
        """One Arrow record batch (how a shard's operations travel to its Spark task)."""
        arrays = [pa.array(getattr(self, c)) if c != "id" else pa.array(self.id, type=pa.string())
                  for c in self.COLUMNS]
        return pa.RecordBatch.from_arrays(arrays, names=list(self.COLUMNS))

    @classmethod
    def from_arrow(cls, batch: pa.RecordBatch | pa.Table) -> Ops:
        cols = {}
        for c in cls.COLUMNS:
            col = batch.column(c)
            if c == "id":
                cols[c] = np.array(col.to_pylist(), dtype=object)
            else:
                cols[c] = col.to_numpy(zero_copy_only=False)
        return cls(**cols)


@dataclass
class ReplayLog:
    """A whole export: topic options, the ordered operations and the subscriptions table."""

    options: TopicOptions
    ops: Ops
    subscriptions: pa.Table
    n_events: int
    n_restored: int = 0


# ---- subscriptions ----------------------------------------------------------------------------


def _range(lo: Any, hi: Any) -> Range:
    return Range(None if lo is None or (isinstance(lo, float) and math.isnan(lo)) else lo,
                 None if hi is None or (isinstance(hi, float) and math.isnan(hi)) else hi)


def decode_subscriptions(table: pa.Table) -> dict[int, tuple[Subscription, bool]]:
    """``subscription_id -> (subscription, snapshot)`` from the export's subscriptions table."""
    cols = {c: table.column(c).to_pylist() for c in (*SUBSCRIPTION_COLUMNS, *INTERVAL_COLUMNS)
            if c in table.column_names}
    out: dict[int, tuple[Subscription, bool]] = {}
    for i, sid in enumerate(cols["subscription_id"]):
        kind = cols["kind"][i]
        try:
            a = _range(cols["a_lo"][i], cols["a_hi"][i])
            c = _range(cols["c_lo"][i], cols["c_hi"][i])
            sub: Subscription
            if kind == "select":
                sub = SelectJoin(a=a, c=c)
            elif kind == "band":
                sub = BandJoin(b=_range(cols["b_lo"][i], cols["b_hi"][i]), a=a, c=c)
            elif kind == "window":
                w = cols["w"][i]
                if w is None:
                    raise ValueError("window join without w")
                sub = WindowJoin(a=a, c=c, w=int(w))
            elif kind == "interval":
                if "ss_lo" not in cols:
                    raise ValueError("an interval join, but no endpoint columns (ss_lo ... ee_hi)")
                ends = {e: _range(cols[f"{e}_lo"][i], cols[f"{e}_hi"][i])
                        for e in ("ss", "se", "es", "ee")}
                preset = cols["preset"][i] if "preset" in cols else None
                sub = IntervalJoin(_range(cols["b_lo"][i], cols["b_hi"][i]), a, c, **ends,
                                   preset=preset or None)
            else:
                raise ValueError(f"unknown kind {kind!r} (select, band, window or interval)")
        except ValueError as e:
            raise LogError(f"subscriptions.parquet: subscription {sid}: {e}") from None
        out[int(sid)] = (sub, bool(cols["snapshot"][i]))
    return out


def band_hull(table: pa.Table) -> tuple[float, float] | None:
    """The widest band: (min b_lo, max b_hi) over every band join and every interval join whose
    key range B is not [0, 0] (±inf for unbounded ends).

    None when the log has no such join: interval joins on equal keys (B = [0, 0]) are sharded
    by key like select and window joins. Covers every band ever registered, so replicating S
    tuples by it is enough at every point of the log.
    """
    kinds = table.column("kind").to_numpy(zero_copy_only=False)
    lo = table.column("b_lo").to_numpy(zero_copy_only=False).astype(np.float64)
    hi = table.column("b_hi").to_numpy(zero_copy_only=False).astype(np.float64)
    band = (kinds == "band") | ((kinds == "interval") & ~((lo == 0.0) & (hi == 0.0)))
    if not band.any():
        return None
    lo, hi = lo[band], hi[band]
    # to_numpy turns nulls into NaN: an absent bound is unbounded
    bmin = -math.inf if np.isnan(lo).any() else float(lo.min())
    bmax = math.inf if np.isnan(hi).any() else float(hi.max())
    return bmin, bmax


# ---- reading ----------------------------------------------------------------------------------


def _read_parquet(path: Path | str, columns: tuple[str, ...], what: str,
                  optional: tuple[str, ...] = ()) -> pa.Table:
    try:
        schema = pq.read_schema(path)
    except FileNotFoundError:
        raise LogError(f"{what}: no such file {path}") from None
    except (OSError, pa.ArrowInvalid) as e:
        raise LogError(f"{what}: not a Parquet file ({path}): {e}") from None
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise LogError(f"{what}: missing column(s) {', '.join(missing)} (format: "
                       "docs/reference/export-format.md)")
    return pq.read_table(path, columns=[*columns, *(c for c in optional if c in schema.names)])


def read_topic_options(path: Path | str) -> TopicOptions:
    try:
        d = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise LogError(f"no topic.json at {path} (written by `hotjoin export` beside the "
                       "Parquet files; it gives lateness and retention)") from None
    except json.JSONDecodeError as e:
        raise LogError(f"topic.json: not JSON ({path}): {e}") from None
    if not isinstance(d, dict):
        raise LogError(f"topic.json: expected an object ({path})")
    return TopicOptions.from_json(d)


def read_export(events: Path | str, subscriptions: Path | str,
                topic: Path | str | TopicOptions | None = None) -> ReplayLog:
    """Read an export into a ``ReplayLog``; ``topic`` defaults to ``topic.json`` beside events."""
    if topic is None:
        topic = Path(events).parent / "topic.json"
    options = topic if isinstance(topic, TopicOptions) else read_topic_options(topic)
    ev = _read_parquet(events, EVENT_COLUMNS, "events.parquet", ("end",))
    subs = _read_parquet(subscriptions, SUBSCRIPTION_COLUMNS, "subscriptions.parquet",
                         INTERVAL_COLUMNS)
    return build_log(options, ev, subs)


def _int_column(table: pa.Table, name: str, what: str) -> np.ndarray:
    col = table.column(name)
    if col.null_count:
        raise LogError(f"{what}: column {name} has nulls")
    return col.to_numpy(zero_copy_only=False).astype(np.int64)


def build_log(options: TopicOptions, events: pa.Table, subscriptions: pa.Table) -> ReplayLog:
    """Merge events and subscription changes into seq order and derive ``clock`` and delete keys."""
    n = events.num_rows
    seq = _int_column(events, "seq", "events.parquet")
    op = events.column("op").to_numpy(zero_copy_only=False)
    is_pub = op == "publish"
    is_del = op == "delete"
    if not (is_pub | is_del).all():
        bad = op[~(is_pub | is_del)][0]
        raise LogError(f"events.parquet: unknown op {bad!r} (publish or delete)")
    side_s = events.column("side").to_numpy(zero_copy_only=False)
    side = np.where(side_s == "R", SIDE_R, np.where(side_s == "S", SIDE_S, NO_SIDE)).astype(np.int8)
    if (side == NO_SIDE).any():
        raise LogError(f"events.parquet: side must be R or S, got {side_s[side == NO_SIDE][0]!r}")
    ids = np.array(events.column("id").to_pylist(), dtype=object)
    if any(not isinstance(i, str) or not i for i in ids):
        raise LogError("events.parquet: every row needs a non-empty id")
    key = events.column("key").to_numpy(zero_copy_only=False).astype(np.float64)
    value = events.column("value").to_numpy(zero_copy_only=False).astype(np.float64)
    tcol = events.column("time")
    time = pc.fill_null(tcol, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    if "end" in events.column_names:  # null: a point (and every row of an older export)
        end = pc.coalesce(events.column("end"), pc.fill_null(tcol, 0)).to_numpy(
            zero_copy_only=False).astype(np.int64)
    else:
        end = time.copy()
    t_null = pc.is_null(tcol).to_numpy(zero_copy_only=False)
    pub_null = (np.isnan(key) | np.isnan(value) | t_null) & is_pub
    if pub_null.any():
        raise LogError("events.parquet: a publish needs key, value and time "
                       f"(seq {int(seq[pub_null][0])})")
    if not np.isfinite(key[is_pub]).all() or not np.isfinite(value[is_pub]).all():
        raise LogError("events.parquet: publish keys and values must be finite")

    kind = np.where(is_pub, PUBLISH, DELETE).astype(np.int8)
    cut = options.compacted_at_seq
    n_restored = 0
    if cut is not None:
        early = seq <= cut
        if (early & is_del).any():
            raise LogError(f"events.parquet: a delete at seq <= compacted_at_seq {cut}")
        kind[early] = RESTORE_PUBLISH
        n_restored = int(early.sum())

    # subscription changes as rows of the same table
    sub_id = _int_column(subscriptions, "subscription_id", "subscriptions.parquet")
    reg = _int_column(subscriptions, "registered_seq", "subscriptions.parquet")
    unsub_col = subscriptions.column("unsubscribed_seq")
    unsub = pc.fill_null(unsub_col, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    has_unsub = unsub >= 0
    if (has_unsub & (unsub <= reg)).any():
        raise LogError("subscriptions.parquet: an unsubscribed_seq is not after its registered_seq")
    sub_kind = np.full(len(sub_id), SUBSCRIBE, dtype=np.int8)
    if cut is not None:
        sub_kind[reg <= cut] = RESTORE_SUBSCRIBE
        if (has_unsub & (unsub <= cut)).any():
            raise LogError(f"subscriptions.parquet: an unsubscribe at seq <= compacted_at_seq {cut}")
    m = len(sub_id)
    k = int(has_unsub.sum())

    def cat(ev_col: np.ndarray, sub_col: np.ndarray, unsub_col_: np.ndarray) -> np.ndarray:
        return np.concatenate([ev_col, sub_col, unsub_col_])

    all_seq = cat(seq, reg, unsub[has_unsub])
    all_kind = cat(kind, sub_kind, np.full(k, UNSUBSCRIBE, dtype=np.int8))
    all_side = cat(side, np.full(m + k, NO_SIDE, dtype=np.int8), np.empty(0, dtype=np.int8))
    all_id = cat(ids, np.full(m + k, None, dtype=object), np.empty(0, dtype=object))
    all_key = cat(key, np.full(m + k, np.nan), np.empty(0))
    all_value = cat(value, np.full(m + k, np.nan), np.empty(0))
    all_time = cat(time, np.zeros(m + k, dtype=np.int64), np.empty(0, dtype=np.int64))
    all_end = cat(end, np.zeros(m + k, dtype=np.int64), np.empty(0, dtype=np.int64))
    all_sid = cat(np.full(n, -1, dtype=np.int64), sub_id, sub_id[has_unsub])

    order = np.argsort(all_seq, kind="stable")
    s_seq = all_seq[order]
    if s_seq.shape[0] and s_seq[0] < 1:
        raise LogError(f"sequence numbers start at 1, found {int(s_seq[0])}")
    dup = np.flatnonzero(np.diff(s_seq) == 0)
    if dup.shape[0]:
        raise LogError(f"seq {int(s_seq[dup[0]])} is used by two operations")
    ops = Ops(s_seq, all_kind[order], all_side[order], all_id[order], all_key[order],
              all_value[order], all_time[order], all_sid[order],
              np.zeros(len(order), dtype=np.int64), np.zeros(len(order), dtype=bool),
              all_end[order])
    _resolve_delete_keys(ops)
    _fill_clock(ops)
    return ReplayLog(options, ops, subscriptions, n_events=n, n_restored=n_restored)


def _resolve_delete_keys(ops: Ops) -> None:
    """A delete's key := the key of the latest earlier publish of the same (side, id)."""
    is_del = ops.kind == DELETE
    if not is_del.any():
        return
    ev = np.flatnonzero(ops.side != NO_SIDE)
    t = pa.table({"side": ops.side[ev], "id": pa.array(ops.id[ev], type=pa.string()),
                  "seq": ops.seq[ev]})
    order = pc.sort_indices(t, sort_keys=[("side", "ascending"), ("id", "ascending"),
                                          ("seq", "ascending")]).to_numpy()
    rows = ev[order]
    sides, idv = ops.side[rows], ops.id[rows]
    n = rows.shape[0]
    pos = np.arange(n)
    new_group = np.ones(n, dtype=bool)
    new_group[1:] = (sides[1:] != sides[:-1]) | (idv[1:] != idv[:-1])
    group_start = np.maximum.accumulate(np.where(new_group, pos, 0))
    kinds = ops.kind[rows]
    pub = (kinds == PUBLISH) | (kinds == RESTORE_PUBLISH)
    last_pub = np.maximum.accumulate(np.where(pub, pos, -1))
    dels = np.flatnonzero(kinds == DELETE)
    orphan = last_pub[dels] < group_start[dels]
    if orphan.any():
        r = rows[dels[orphan][0]]
        raise LogError(f"events.parquet: delete of {SIDE_NAMES[ops.side[r]]} {ops.id[r]!r} at seq "
                       f"{int(ops.seq[r])} has no earlier publish of that id")
    ops.key[rows[dels]] = ops.key[rows[last_pub[dels]]]


def _fill_clock(ops: Ops) -> None:
    """``clock[i]`` := the largest time published before row i (restored tuples included)."""
    pub = (ops.kind == PUBLISH) | (ops.kind == RESTORE_PUBLISH)
    if not pub.any():
        return
    lowest = np.iinfo(np.int64).min
    run = np.maximum.accumulate(np.where(pub, ops.time, lowest))
    ops.clock[1:] = run[:-1]
    seen = np.logical_or.accumulate(pub)
    ops.has_clock[1:] = seen[:-1]
    ops.clock[~ops.has_clock] = 0


# ---- writing (tests, benchmarks) ----------------------------------------------------------------


def write_export(out_dir: Path | str, options: TopicOptions, events: dict[str, Any],
                 subscriptions: dict[str, Any]) -> Path:
    """Write an export directory (events.parquet, subscriptions.parquet, topic.json).

    ``events`` / ``subscriptions`` map column names of ``docs/reference/export-format.md`` to lists
    or arrays; ``payload``, ``received_unix_nanos``, ``end`` and the interval joins' columns may
    be left out. For tests and the benchmark, which
    build logs without a server; the schemas are the server's own (``server.export``).
    """
    from hotjoin.server.export import EVENTS_SCHEMA, SUBSCRIPTIONS_SCHEMA

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    n = len(events["seq"])
    ev = dict(events)
    ev.setdefault("payload", [None if o == "delete" else b"" for o in ev["op"]])
    ev.setdefault("received_unix_nanos", np.zeros(n, dtype=np.int64))
    ev.setdefault("end", [None] * n)  # every event a point
    subs = dict(subscriptions)
    m = len(subs["subscription_id"])
    for c in INTERVAL_COLUMNS:  # no interval joins
        subs.setdefault(c, [None] * m)
    pq.write_table(pa.table({f.name: ev[f.name] for f in EVENTS_SCHEMA}, schema=EVENTS_SCHEMA),
                   out / "events.parquet")
    pq.write_table(pa.table({f.name: subs[f.name] for f in SUBSCRIPTIONS_SCHEMA},
                            schema=SUBSCRIPTIONS_SCHEMA), out / "subscriptions.parquet")
    opts = options.to_json()
    opts.setdefault("created_unix_nanos", 0)
    (out / "topic.json").write_text(json.dumps(opts))
    return out
