"""Checkpoints: a topic's state as columns in one file, so a restart replays only the log's tail.

Replaying a whole log rebuilds every operation one by one. A checkpoint holds, at a known
sequence number ``seq`` and log byte offset ``offset`` (the end of the frame holding ``seq``),
what the log up to there leaves behind: the live subscriptions with their server metadata and
owners, the stored tuples of both sides, and the clock. It does **not** hold the engine's
indexes: matching depends only on the subscriptions and the stored tuples (README, "Design
choices"), so a restart bulk-builds the indexes from the columns (``TopicEngine.load_state`` of
``hotjoin.matcher.contract``) instead of unpickling Python objects.

**Taking one.** Under the topic lock, ``capture`` copies numpy columns
(``TopicEngine.export_state``: the subscription columns, the tables' live rows) and two dicts
(metadata, owners): a few milliseconds for 100,000 subscriptions and 100,000 tuples with
``matcher.Engine``, whatever the strategy (the earlier pickle of the whole engine held the lock
0.4–0.6 s); a scale-out engine adds one round trip to its workers. A background thread then encodes
the columns (``encode``), makes the log durable up to ``offset`` (so a checkpoint never holds
an operation the log could lose), writes ``checkpoint.tmp``, fsyncs it, renames it to
``checkpoint`` and fsyncs the directory. A ``kill -9`` leaves at most a stale
``checkpoint.tmp``, deleted on open.

**Format** (version 3). ``MAGIC`` + ``[u64 seq][u64 offset][u64 length][u32 crc32]`` + payload;
the payload is ``[u32 n]`` + a JSON header of ``n`` bytes (clock, next subscription id, log
operation count) and three length-prefixed (``u64``) Arrow IPC streams: the subscriptions
(the state's ``SUBSCRIPTION_COLUMNS`` of ``hotjoin.matcher.contract`` and the interval joins'
``INTERVAL_COLUMNS`` of ``hotjoin.matcher.subscriptions``, then ``affected,
subscriber, preset, owner``; ``preset`` is an interval join's display name, "" otherwise), then the R and the S tuples (``id, key, value, time, seq, payload, end``;
``end == time`` for a point). Arrow because it is already a dependency, reads numeric columns
back as numpy without a copy and strings without a Python loop of ours. Version 2 files (the
same without ``end`` and without the interval joins' subscription columns) still load: their
tuples are points. Version 1 files (a pickled engine) and anything that fails its CRC or decode
are ignored: the topic then replays the whole log, which is always kept while checkpoints are in
use (compaction deletes the checkpoint before it rewrites the log; the two never run together).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import struct
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from hotjoin.matcher.contract import SUBSCRIPTION_COLUMNS, TopicEngine
from hotjoin.matcher.subscriptions import INTERVAL_COLUMNS
from hotjoin.server.convert import SubMeta
from hotjoin.server.snapshot import Tuples, load_state_input, tuples_of_state

MAGIC = b"HJCKPT\x00\x02"  # the file magic; the payload's header names the format version
FORMAT = 3
READABLE_FORMATS = (2, 3)
_HEAD = struct.Struct("<QQQI")
_LEN32 = struct.Struct("<I")
_LEN64 = struct.Struct("<Q")
WRITE_CHUNK = 1 << 20
SUB_NUMERIC = SUBSCRIPTION_COLUMNS
SUB_OPTIONAL = INTERVAL_COLUMNS  # written when the engine has them; absent in format 2


@dataclass
class Image:
    """A topic's state at ``seq``: subscription columns (``TopicEngine.export_state``), the
    server's metadata and owners by subscription id, and both sides' stored tuples."""

    seq: int
    max_time: int | None
    next_sid: int
    log_ops: int
    subs: dict[str, np.ndarray]
    meta: dict[int, SubMeta]
    owners: dict[int, str]
    tuples: list[Tuples]


def capture(engine: TopicEngine, meta: dict[int, SubMeta], owners: dict[int, str], next_sid: int,
            log_ops: int) -> Image:
    """Copy the state (call with the topic lock held): ``TopicEngine.export_state`` (numpy column
    copies) and two dict copies.

    Raises ``ValueError`` when the engine and the metadata disagree (the caller then disables
    checkpoints for the topic).
    """
    st = engine.export_state()
    subs = st["subs"]
    if subs["sid"].shape[0] != len(meta):
        raise ValueError(f"{subs['sid'].shape[0]} live subscriptions in the engine, {len(meta)} in the metadata")
    return Image(int(st["seq"]), st["max_time"], max(int(next_sid), int(st["next_sid"])), int(log_ops),
                 subs, dict(meta), dict(owners), [tuples_of_state(st, side) for side in st["tuples"]])


def engine_state(image: Image) -> dict[str, Any]:
    """``image`` as the ``TopicEngine.load_state`` input."""
    return load_state_input(image.seq, image.max_time, image.next_sid, image.subs, image.tuples)


def _ipc(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def encode(image: Image) -> bytes:
    """The payload of ``image`` (runs outside the lock; O(state), one Python step per
    subscription for its metadata strings)."""
    sids = image.subs["sid"].tolist()
    metas = [image.meta[s] for s in sids]
    owners = image.owners
    subs = pa.table({**{k: image.subs[k] for k in SUB_NUMERIC},
                     **{k: image.subs[k] for k in SUB_OPTIONAL if k in image.subs},
                     "affected": pa.array([m.affected for m in metas], pa.bool_()),
                     "subscriber": pa.array([m.subscriber for m in metas], pa.string()),
                     "preset": pa.array([m.preset for m in metas], pa.string()),
                     "owner": pa.array([owners.get(s, "") for s in sids], pa.string())})
    parts = [_ipc(subs)]
    for t in image.tuples:
        parts.append(_ipc(pa.table({"id": pa.array(t.ids, pa.string()), "key": t.keys,
                                    "value": t.values, "time": t.times, "seq": t.seqs,
                                    "payload": pa.array(t.payloads, pa.binary()),
                                    "end": t.times if t.ends is None else t.ends})))
    header = json.dumps({"format": FORMAT, "seq": image.seq, "max_time": image.max_time,
                         "next_subscription_id": image.next_sid, "log_ops": image.log_ops,
                         "sides": [t.side for t in image.tuples]}).encode()
    out = [_LEN32.pack(len(header)), header]
    for p in parts:
        out += [_LEN64.pack(len(p)), p]
    return b"".join(out)


def _table(buf: memoryview, pos: int) -> tuple[pa.Table, int]:
    (n,) = _LEN64.unpack_from(buf, pos)
    pos += _LEN64.size
    if pos + n > len(buf):
        raise ValueError("checkpoint payload truncated")
    return pa.ipc.open_stream(pa.py_buffer(buf[pos:pos + n])).read_all(), pos + n


def decode(payload: bytes | memoryview) -> Image:
    """The ``Image`` of a payload written by ``encode`` (numeric columns as numpy arrays)."""
    buf = memoryview(payload)
    (n,) = _LEN32.unpack_from(buf, 0)
    header = json.loads(bytes(buf[_LEN32.size:_LEN32.size + n]))
    if header.get("format") not in READABLE_FORMATS:
        raise ValueError(f"checkpoint format {header.get('format')!r} is not one of "
                         f"{READABLE_FORMATS}")
    pos = _LEN32.size + n
    subs_t, pos = _table(buf, pos)
    n_subs = subs_t.num_rows
    subs = {k: subs_t.column(k).to_numpy() for k in SUB_NUMERIC}
    subs.update({k: subs_t.column(k).to_numpy() for k in SUB_OPTIONAL
                 if k in subs_t.column_names})
    sids = subs["sid"].tolist()
    presets = (subs_t.column("preset").to_pylist() if "preset" in subs_t.column_names
               else [""] * n_subs)  # format 2: no interval joins
    meta = {sid: SubMeta(bool(a), bool(sn), sub, int(reg), p) for sid, a, sn, sub, reg, p in zip(
        sids, subs_t.column("affected").to_pylist(), subs["snap"].tolist(),
        subs_t.column("subscriber").to_pylist(), subs["reg"].tolist(), presets, strict=True)}
    owners = {sid: o for sid, o in zip(sids, subs_t.column("owner").to_pylist(), strict=True) if o}
    tuples = []
    for side in header["sides"]:
        t, pos = _table(buf, pos)
        ends = t.column("end").to_numpy() if "end" in t.column_names else None  # format 2: points
        tuples.append(Tuples(side, t.column("id").to_pylist(), t.column("key").to_numpy(),
                             t.column("value").to_numpy(), t.column("time").to_numpy(),
                             t.column("seq").to_numpy(), t.column("payload").to_pylist(), ends))
    return Image(int(header["seq"]), header["max_time"], int(header["next_subscription_id"]),
                 int(header["log_ops"]), subs, meta, owners, tuples)


def write(directory: Path, payload: bytes, seq: int, offset: int, log_path: Path) -> None:
    """Write ``directory/checkpoint`` atomically (the log is synced up to ``offset`` first).

    On a failure (a full disk: ENOSPC) the temp file is removed, so the attempt gives back the
    space it took, and the previous checkpoint stays; the ``OSError`` is raised."""
    fd = os.open(log_path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    tmp = directory / "checkpoint.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(MAGIC + _HEAD.pack(seq, offset, len(payload), zlib.crc32(payload)))
            view = memoryview(payload)
            for i in range(0, len(view), WRITE_CHUNK):
                # written and synced a chunk at a time, so the disk never has a long flush queued
                # in front of the log's group-commit fdatasync (publishers' acks wait for that one)
                f.write(view[i:i + WRITE_CHUNK])
                f.flush()
                os.fdatasync(f.fileno())
            os.fsync(f.fileno())
        os.replace(tmp, directory / "checkpoint")
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def read(directory: Path) -> tuple[int, int, Image] | None:
    """``(seq, offset, image)`` of the checkpoint, or None when there is none, it is of another
    format version or it does not verify (the caller then replays the whole log)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(directory / "checkpoint.tmp")
    try:
        with open(directory / "checkpoint", "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    n = len(MAGIC) + _HEAD.size
    if len(data) < n or not data.startswith(MAGIC):
        return None
    seq, offset, length, crc = _HEAD.unpack_from(data, len(MAGIC))
    payload = memoryview(data)[n : n + length]
    if len(payload) != length or zlib.crc32(payload) != crc:
        return None
    image = decode(payload)
    if image.seq != seq:
        return None
    return seq, offset, image


def set_aside(directory: Path) -> Path | None:
    """Rename an unusable checkpoint to ``checkpoint.unusable-<ns>`` for inspection (the topic
    replays its whole log instead, and the next checkpoint replaces it); returns the new path."""
    src = directory / "checkpoint"
    dst = directory / f"checkpoint.unusable-{time.time_ns()}"
    try:
        os.replace(src, dst)
    except FileNotFoundError:
        return None
    return dst


def remove(directory: Path) -> None:
    for name in ("checkpoint", "checkpoint.tmp"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(directory / name)
