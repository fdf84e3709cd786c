"""Inspect and repair a damaged topic offline: ``hotjoin topic inspect`` and ``hotjoin topic repair``.

A topic is set aside as damaged at start-up when one of its files does not verify
(``server/records.py``): a log frame, a match-log record or a cursor record whose checksum fails
though all its bytes are there, a log shorter than at its clean stop or than its checkpoint, or
options that do not read. The server never cuts such a file by itself: the records after the
damage may be acknowledged data. An operator decides, with these two functions (the model is
``kafka-dump-log`` and Kafka's log recovery):

- ``inspect_topic`` reads every file of the topic and reports, per file, its good records, the
  damage (offset and reason), what still verifies after it and the operations that a repair
  would drop. It only reads, so it also works while the server runs.
- ``repair_topic`` (the server stopped: it takes the data directory's lock) cuts each damaged
  file at its last good record and **moves everything it cuts into
  ``DATA_DIR/repairs/<topic>-<UTC time>/``**, then opens the topic once to check that it loads,
  putting the cut bytes back if it does not. Per file:

  - the log: cut at the damaged frame; the derived files that depend on the cut part (the
    checkpoint, match-log records of the dropped operations, committed cursors beyond the new
    end) are set aside or clipped too;
  - a match-log segment: that segment and every older one are moved (their messages become a
    Gap for listeners, as messages beyond the delivery retention are);
  - the cursors: cut at the damaged record (positions committed after it fall back);
  - ``topic.json``: rewritten from the options the operator gives (``options``).

Both return JSON-ready dicts; ``docs/reference/persistence.md`` ("Damage and repair") shows a session.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.convert import check_time_option
from hotjoin.server.cursors import CursorStore
from hotjoin.server.datadir import DataDirLock
from hotjoin.server.log import CLEAN_MARK, MAGIC, _fsync_dir
from hotjoin.server.records import HEADER, MAX_RECORD, DamagedFileError, RecordReader, read_file
from hotjoin.server.registry import check_topic_name, open_topic, read_options, write_options
from hotjoin.server.settings import DEFAULT_SETTINGS, DeliveryOptions

_MATCH_HEAD = struct.Struct("<IIqqq")  # the match log's record header (server/match_log.py)
_MATCH_COVERED = _MATCH_HEAD.size - HEADER.size


class RepairError(Exception):
    """The repair cannot be done as asked (nothing was changed); the message says why."""


@dataclass
class LogScan:
    """What reading a topic's log found: frames and operations that verify up to ``good``,
    the damage that stopped it, and what still verifies after the damage."""

    size: int
    good: int
    frames: int = 0
    ops: int = 0
    last_seq: int = 0
    snapshot_frames: int = 0  # a compacted log: frames of its snapshot (header frame excluded)
    torn_bytes: int = 0
    damage: dict[str, Any] | None = None
    after: dict[str, int] = field(default_factory=lambda: {"frames": 0, "ops": 0,
                                                            "first_seq": 0, "last_seq": 0})

    def report(self, path: Path) -> dict[str, Any]:
        out: dict[str, Any] = {"file": str(path), "bytes": self.size, "frames": self.frames,
                               "operations": self.ops, "last_seq": self.last_seq,
                               "torn_tail_bytes": self.torn_bytes, "damage": self.damage}
        if self.damage is not None:
            out["verifies_after_damage"] = dict(self.after)
        return out


def _ops_of(payload: bytes) -> tuple[int, int, int]:
    """``(operations, first seq, last seq)`` of one LogBatch frame."""
    batch = pb.LogBatch.FromString(payload)
    n, first, last = 0, 0, 0
    for op in batch.ops:
        k = len(op.publish_columns.ids) if op.WhichOneof("op") == "publish_columns" else 1
        first = first or op.seq
        last = op.seq + k - 1
        n += k
    return n, first, last


def scan_log(path: Path) -> LogScan:
    """Read the log at ``path`` like a restart would, and past its first damage (skipping each
    damaged frame by its declared length while that length is sane). O(file size)."""
    data = read_file(path) if path.exists() else b""
    pos = len(MAGIC) if data.startswith(MAGIC) else 0
    scan = LogScan(size=len(data), good=pos)
    reader = RecordReader(data, path, pos)
    header_next = pos > 0
    for body, end in reader:
        if header_next:  # a compacted log's snapshot header
            header_next = False
            try:
                scan.snapshot_frames = int(json.loads(data[body:end])["frames"])
            except (ValueError, KeyError, TypeError):
                scan.damage = {"offset": body - HEADER.size, "reason": "unreadable snapshot header"}
                return scan
            continue
        try:
            n, _, last = _ops_of(data[body:end])
        except Exception as e:  # noqa: BLE001 - a frame that verifies but does not decode
            scan.damage = {"offset": body - HEADER.size, "reason": f"undecodable frame ({e})"}
            return scan
        scan.frames += 1
        scan.ops += n
        scan.last_seq = max(scan.last_seq, last)
    scan.good, scan.torn_bytes = reader.good, reader.torn_bytes
    if reader.damage is None:
        return scan
    scan.damage = {"offset": reader.damage.offset, "reason": reader.damage.reason}
    at = reader.damage.offset
    while at + HEADER.size <= len(data):  # what verifies after the damage (skipped frame by frame)
        length, _ = HEADER.unpack_from(data, at)
        nxt = at + HEADER.size + length
        if length > MAX_RECORD or nxt > len(data):
            break
        more = RecordReader(data, path, nxt)
        for body, end in more:
            try:
                n, first, last = _ops_of(data[body:end])
            except Exception:  # noqa: BLE001
                continue
            a = scan.after
            a["frames"] += 1
            a["ops"] += n
            a["first_seq"] = a["first_seq"] or first
            a["last_seq"] = max(a["last_seq"], last)
        if more.damage is None:
            break
        at = more.damage.offset
    return scan


def _scan_records(path: Path, covered: int, check: Any = None) -> dict[str, Any]:
    data = read_file(path)
    reader = RecordReader(data, path, covered=covered, check=check)
    n = sum(1 for _ in reader)
    return {"file": str(path), "bytes": len(data), "records": n, "good_bytes": reader.good,
            "torn_tail_bytes": reader.torn_bytes,
            "damage": None if reader.damage is None else {"offset": reader.damage.offset,
                                                           "reason": reader.damage.reason}}


def _cursor_check(length: int) -> str | None:
    return None if length % 16 == 0 else f"record length {length} is not a whole number of pairs"


def inspect_topic(data_dir: Path, name: str) -> dict[str, Any]:
    """Report every file of topic ``name`` (read only; safe while the server runs)."""

    d = _topic_dir(data_dir, name)
    files: list[dict[str, Any]] = []
    try:
        options: dict[str, Any] | None = read_options(d)
        files.append({"file": str(d / "topic.json"), "damage": None})
    except DamagedFileError as e:
        options = None
        files.append({"file": str(d / "topic.json"),
                      "damage": {"offset": e.damage.offset, "reason": e.damage.reason}})
    scan = scan_log(d / "log")
    files.append(scan.report(d / "log"))
    if (d / "cursors").exists():
        files.append(_scan_records(d / "cursors", 0, _cursor_check))
    segs = sorted((d / "matches").glob("*.seg")) if (d / "matches").is_dir() else []
    for seg in segs:
        files.append(_scan_records(seg, _MATCH_COVERED))
    for ck in sorted(d.glob("checkpoint*")):
        files.append({"file": str(ck), "bytes": ck.stat().st_size, "damage": None,
                      "note": "derived from the log: a damaged one is set aside and the whole "
                              "log replayed"})
    damaged = [f for f in files if f.get("damage")]
    return {"topic": name, "directory": str(d), "options": options,
            "clean_stop_mark": (d / CLEAN_MARK).exists(), "damaged": bool(damaged),
            "files": files, "a_repair_would": _plan(scan, files)}


def _plan(scan: LogScan, files: list[dict[str, Any]]) -> list[str]:
    out = []
    for f in files:
        dmg = f.get("damage")
        if not dmg:
            continue
        name = Path(f["file"]).name
        if name == "log":
            a = scan.after
            out.append(f"cut the log at byte {dmg['offset']} (after seq {scan.last_seq}), dropping "
                       f"{scan.size - dmg['offset']} bytes: the damaged frame and {a['frames']} "
                       f"later frames holding {a['ops']} operations that verify"
                       + (f" (seqs {a['first_seq']}-{a['last_seq']})" if a["ops"] else ""))
        elif name == "topic.json":
            out.append("rewrite topic.json from the options you give (--lateness, --retention, "
                       "--max-advance)")
        elif name == "cursors":
            out.append(f"cut the cursors at byte {dmg['offset']} (positions committed after it "
                       "fall back to earlier ones)")
        elif name.endswith(".seg"):
            out.append(f"set aside match-log segment {name} and every older one (their "
                       "undelivered messages become a Gap for listeners)")
    return out


def _topic_dir(data_dir: Path, name: str) -> Path:

    check_topic_name(name)
    d = data_dir / "topics" / name
    if not d.is_dir():
        raise RepairError(f"no topic {name!r} in {data_dir}")
    return d


class _Backup:
    """The repair's backup directory: every byte the repair cuts or replaces goes here first."""

    def __init__(self, data_dir: Path, name: str) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        self.dir = data_dir / "repairs" / f"{name}-{stamp}"
        k = 1
        while self.dir.exists():
            k += 1
            self.dir = data_dir / "repairs" / f"{name}-{stamp}.{k}"
        self.dir.mkdir(parents=True)
        self.moved: list[tuple[Path, Path]] = []  # (original, backup): undone by moving back
        self.cut: list[tuple[Path, int, Path]] = []  # (file, offset, backup of its tail)

    def move(self, path: Path, as_name: str | None = None) -> None:
        dst = self.dir / (as_name or path.name)
        os.replace(path, dst) if path.stat().st_dev == self.dir.stat().st_dev else shutil.move(path, dst)
        self.moved.append((path, dst))

    def cut_at(self, path: Path, offset: int, as_name: str) -> int:
        """Move ``path``'s bytes from ``offset`` on into the backup, then truncate it there."""
        dst = self.dir / as_name
        with open(path, "rb") as f:
            f.seek(offset)
            tail = f.read()
        with open(dst, "wb") as f:
            f.write(tail)
            f.flush()
            os.fsync(f.fileno())
        with open(path, "r+b") as f:
            f.truncate(offset)
            os.fsync(f.fileno())
        self.cut.append((path, offset, dst))
        return len(tail)

    def undo(self) -> None:
        for path, offset, dst in reversed(self.cut):
            with open(path, "r+b") as f:
                f.truncate(offset)
                f.seek(offset)
                f.write(dst.read_bytes())
                os.fsync(f.fileno())
        for path, dst in reversed(self.moved):
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(dst, path)
        shutil.rmtree(self.dir, ignore_errors=True)


def repair_topic(data_dir: Path, name: str, options: Mapping[str, Any] | None = None,
                 open_check: bool = True) -> dict[str, Any]:
    """Repair topic ``name`` of a stopped server's ``data_dir`` (see the module docstring).

    ``options``: the topic's options (``lateness`` and optionally ``retention``,
    ``max_advance``) when its ``topic.json`` must be rewritten. Raises ``DataDirInUse`` when a
    server holds the directory and ``RepairError`` when the repair cannot be done (then nothing
    changed). Returns what was done: per file the bytes cut, the operations dropped, and where
    the backup is."""
    lock = DataDirLock(data_dir)
    try:
        return _repair(data_dir, name, options, open_check)
    finally:
        lock.release()


def _repair(data_dir: Path, name: str, options: Mapping[str, Any] | None,
            open_check: bool) -> dict[str, Any]:

    d = _topic_dir(data_dir, name)
    report = inspect_topic(data_dir, name)
    opts_damaged = report["options"] is None
    if opts_damaged and not options:
        reason = report["files"][0]["damage"]["reason"]
        raise RepairError(f"{d / 'topic.json'} cannot be read ({reason}): give the topic's options "
                          "to rewrite it (--lateness L, and --retention R / --max-advance A if it "
                          "had them)")
    if not report["damaged"]:
        return {"topic": name, "repaired": False, "message": f"topic {name!r} has no damage"}
    backup = _Backup(data_dir, name)
    done: list[str] = []
    try:
        if opts_damaged:
            backup.move(d / "topic.json")
            _write_options(d, name, options or {})
            done.append("rewrote topic.json from the given options")
        scan = scan_log(d / "log")
        new_end = scan.last_seq
        if scan.damage is not None:
            cut = backup.cut_at(d / "log", scan.damage["offset"], "log.cut")
            a = scan.after
            done.append(f"cut {cut} bytes off the log at byte {scan.damage['offset']}: the damaged "
                        f"frame and {a['frames']} later frames holding {a['ops']} operations"
                        + (f" (seqs {a['first_seq']}-{a['last_seq']})" if a["ops"] else "")
                        + f"; the log now ends at seq {new_end}")
            for ck in sorted(d.glob("checkpoint*")):
                backup.move(ck)
            done.append("set the checkpoint aside (the whole log is replayed)")
        for f in report["files"]:
            dmg = f.get("damage")
            if dmg and f["file"].endswith(".seg"):
                seg = Path(f["file"])
                for older in sorted(seg.parent.glob("*.seg")):
                    if older.name <= seg.name:
                        backup.move(older, f"matches-{older.name}")
                done.append(f"set aside match-log segments up to {seg.name}")
        _clip_match_log(d, new_end, backup, done)
        _repair_cursors(d, new_end, backup, done)
        if (d / CLEAN_MARK).exists():
            backup.move(d / CLEAN_MARK)
        _fsync_dir(d)
        if open_check:
            _open_check(d, read_options(d))
    except BaseException:
        backup.undo()
        raise
    return {"topic": name, "repaired": True, "backup": str(backup.dir), "done": done,
            "log_ends_at_seq": new_end}


def _write_options(d: Path, name: str, options: Mapping[str, Any]) -> None:

    opts: dict[str, Any] = {"name": name, "strategy": {}, "created_unix_nanos": time.time_ns()}
    try:
        opts["lateness"] = check_time_option("lateness", int(options.get("lateness", 0)))
        for key in ("retention", "max_advance"):
            if options.get(key) is not None:
                opts[key] = check_time_option(key, int(options[key]))
    except ValueError as e:
        raise RepairError(str(e)) from None
    write_options(d, opts)


def _clip_match_log(d: Path, new_end: int, backup: _Backup, done: list[str]) -> None:
    """Set aside the match-log records of operations after ``new_end`` (they belonged to the
    operations the log cut lost)."""
    mdir = d / "matches"
    if not mdir.is_dir():
        return
    dropped = 0
    for seg in sorted(mdir.glob("*.seg")):
        data = read_file(seg)
        pos = 0
        while pos + _MATCH_HEAD.size <= len(data):
            length, _, _, last, _ = _MATCH_HEAD.unpack_from(data, pos)
            if last > new_end:
                break
            pos += _MATCH_HEAD.size + length
        if pos == 0 and int(seg.stem) > new_end + 1:
            backup.move(seg, f"matches-{seg.name}")
            dropped += 1
        elif pos < len(data):
            backup.cut_at(seg, pos, f"matches-{seg.name}.cut")
            dropped += 1
    if dropped:
        done.append(f"set aside the delivery records of operations after seq {new_end} "
                    f"({dropped} match-log files)")


def _repair_cursors(d: Path, new_end: int, backup: _Backup, done: list[str]) -> None:
    """Cut a damaged cursor file at its last good record and clip positions beyond the log."""

    path = d / "cursors"
    if not path.exists():
        return
    data = read_file(path)
    reader = RecordReader(data, path, check=_cursor_check)
    for _ in reader:
        pass
    if reader.damage is not None:
        n = backup.cut_at(path, reader.damage.offset, "cursors.cut")
        done.append(f"cut {n} bytes off the cursors at byte {reader.damage.offset}")
    store = CursorStore(d)
    try:
        beyond = [(sid, new_end) for sid, at in store.positions().items() if at > new_end]
        if beyond:
            shutil.copy2(path, backup.dir / "cursors.before-clip")
            store.commit(beyond)
            done.append(f"clipped {len(beyond)} committed cursors to seq {new_end}")
    finally:
        store.close()


def _open_check(d: Path, opts: Mapping[str, Any]) -> None:
    """Open the repaired topic once, as the server will (``RepairError`` when it does not)."""

    settings = DEFAULT_SETTINGS
    if not (d / "matches").is_dir():  # a memory-only topic: do not create a match log for it
        settings = dataclasses.replace(settings, delivery=DeliveryOptions(retention_bytes=0))
    try:
        topic = open_topic(opts, d, settings)
    except Exception as e:
        raise RepairError(f"the topic would still not open after the repair ({e}); nothing was "
                          "changed") from None
    topic.close()


__all__ = ["RepairError", "inspect_topic", "repair_topic", "scan_log"]
