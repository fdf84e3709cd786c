"""The set of topics of one server and their directories under ``--data-dir``.

Layout: ``DATA_DIR/topics/<name>/topic.json`` (options, written atomically before the topic is
visible) and ``DATA_DIR/topics/<name>/log`` (the operation log, ``server/log.py``). Without a
data directory topics live in memory only. Topic names are 1–128 characters of
``[A-Za-z0-9._-]`` so they are safe as directory names and metric labels.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hotjoin.matcher.model import KINDS as JOIN_KINDS
from hotjoin.server import metrics
from hotjoin.server.convert import check_time_option
from hotjoin.server.datadir import DataDirLock
from hotjoin.server.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, clip
from hotjoin.server.log import LogCorruptError, _fsync_dir
from hotjoin.server.records import DamagedFileError
from hotjoin.server.settings import DEFAULT_SETTINGS, TopicSettings
from hotjoin.server.topic import Topic

log = logging.getLogger("hotjoin.server")

_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")  # matched with fullmatch: "$" would allow "x\n"
KINDS = JOIN_KINDS  # the engine's subscription kinds, the keys of a topic's strategy map
DEFAULT_MAX_ADVANCE = 86_400_000
"""A new topic's ``max_advance`` when CreateTopic leaves it out: one day when event times are
milliseconds (the unit of the server's own clock). Topics created before the option existed have
no ``max_advance`` in their ``topic.json`` and stay unbounded (docs/reference/persistence.md)."""


def check_topic_name(name: str) -> str:
    if not name:
        raise InvalidArgument("topic name is required")
    if not _NAME.fullmatch(name) or name in (".", ".."):
        raise InvalidArgument(
            f"invalid topic name {clip(repr(name), 200)}: use 1-128 characters of letters, digits, '.', '_', '-'"
        )
    return name


def write_options(directory: Path, opts: Mapping[str, Any]) -> None:
    """Write ``directory/topic.json`` atomically: temp file, fsync, rename, fsync of the
    directory (a crash leaves the old file or the new one, never a mix)."""
    tmp = directory / "topic.json.tmp"
    with open(tmp, "w") as f:
        json.dump(dict(opts), f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / "topic.json")
    _fsync_dir(directory)


def read_options(directory: Path) -> dict[str, Any]:
    """A topic's options from ``directory/topic.json``; ``DamagedFileError`` when the file does
    not read as a topic's options (not JSON, a wrong type, no name or lateness, or a name that is
    not its directory's)."""
    path = directory / "topic.json"
    try:
        opts = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise DamagedFileError.at(path, 0, f"cannot be read as JSON ({e})") from None
    if not isinstance(opts, dict) or not isinstance(opts.get("name"), str):
        raise DamagedFileError.at(path, 0, "holds no topic name")
    if opts["name"] != directory.name:
        raise DamagedFileError.at(path, 0, f"names topic {opts['name']!r}, but lies in the "
                                  f"directory of {directory.name!r}")
    for key in ("lateness", "retention", "max_advance", "delivery_retention_bytes",
                "delivery_retention_ms"):
        v = opts.get(key)
        if (v is None and key != "lateness") or (isinstance(v, int) and not isinstance(v, bool)):
            continue
        raise DamagedFileError.at(path, 0, f"option {key!r} is {v!r}, not an integer")
    if not isinstance(opts.get("strategy") or {}, dict):
        raise DamagedFileError.at(path, 0, "option 'strategy' is not a mapping")
    return opts


def open_topic(opts: Mapping[str, Any], directory: Path | None, settings: TopicSettings) -> Topic:
    """Open the topic of options ``opts`` (its ``topic.json``) with the server's ``settings``,
    the topic's own delivery retention applied."""
    d = settings.delivery
    b, ms = opts.get("delivery_retention_bytes"), opts.get("delivery_retention_ms")
    delivery = dataclasses.replace(d, retention_bytes=d.retention_bytes if b is None else b,
                                   retention_ms=d.retention_ms if ms is None else ms)
    return Topic(opts["name"], opts["lateness"], opts.get("retention"), opts.get("strategy") or {},
                 directory, dataclasses.replace(settings, delivery=delivery),
                 max_advance=opts.get("max_advance") or 0)


@dataclasses.dataclass(frozen=True)
class DamagedTopic:
    """A topic that could not be opened at start-up: its name and directory, the file that did
    not read and why, and its options when ``topic.json`` itself was readable. Every RPC on it
    answers FAILED_PRECONDITION until an operator repairs it (docs/reference/persistence.md)."""

    name: str
    directory: Path
    file: str
    reason: str
    options: Mapping[str, Any] | None

    @staticmethod
    def of(directory: Path, options: Mapping[str, Any] | None, error: BaseException) -> DamagedTopic:
        name = str(options["name"]) if options else directory.name
        if isinstance(error, DamagedFileError):
            d = error.damage
            return DamagedTopic(name, directory, d.path, f"{d.reason} (byte {d.offset})", options)
        if isinstance(error, LogCorruptError):
            return DamagedTopic(name, directory, str(directory / "log"), str(error), options)
        return DamagedTopic(name, directory, str(directory),
                            f"cannot be opened ({type(error).__name__}: {error})", options)

    @property
    def message(self) -> str:
        """The one line every RPC on the topic answers with."""
        return (f"topic {self.name!r} is damaged: {self.file}: {self.reason}; it is set aside "
                f"until repaired (hotjoin topic repair {self.name} --data-dir DIR)")

    def error(self) -> FailedPrecondition:
        return FailedPrecondition(self.message)


class TopicRegistry:
    """Creates, finds, lists and deletes topics; loads existing ones from the data directory."""

    def __init__(self, data_dir: Path | None = None, settings: TopicSettings = DEFAULT_SETTINGS) -> None:
        self.data_dir = data_dir
        self.settings = settings
        self.engine_factory = settings.engine_factory
        self._lock = threading.Lock()
        self._topics: dict[str, Topic] = {}
        self._damaged: dict[str, DamagedTopic] = {}
        self._dir_lock: DataDirLock | None = None
        if data_dir is not None:
            self._dir_lock = DataDirLock(data_dir)  # DataDirInUse: another server holds it
            try:
                self._load(data_dir)
            except BaseException:
                self.close()
                raise

    def _load(self, data_dir: Path) -> None:
        """Open every topic of ``data_dir``; one that cannot be opened is set aside as damaged
        (``DamagedTopic``) and the others serve (docs/reference/persistence.md, "Damage and repair")."""
        (data_dir / "topics").mkdir(parents=True, exist_ok=True)
        for d in sorted((data_dir / "topics").iterdir()):
            if not d.is_dir() or d.name.startswith(".deleted-"):
                if d.name.startswith(".deleted-"):  # a delete that crashed before its rmtree
                    shutil.rmtree(d, ignore_errors=True)
                continue
            if not (d / "topic.json").exists():  # a create that crashed before its options
                shutil.rmtree(d, ignore_errors=True)
                continue
            opts: dict[str, Any] | None = None
            try:
                opts = read_options(d)
                self._topics[opts["name"]] = self._open(opts, d)
            except Exception as e:  # noqa: BLE001 - any failure stays local to this topic
                damaged = DamagedTopic.of(d, opts, e)
                self._damaged[damaged.name] = damaged
                metrics.TOPIC_DAMAGED.labels(damaged.name).set(1)
                if isinstance(e, (DamagedFileError, LogCorruptError)):
                    log.error("topic %r is damaged and set aside: %s; the other topics serve "
                              "(inspect and repair: hotjoin topic repair %s --data-dir %s)",
                              damaged.name, damaged.reason, damaged.name, data_dir)
                else:
                    log.exception("topic %r could not be opened and is set aside as damaged: %s",
                                  damaged.name, damaged.reason)

    def _open(self, opts: Mapping[str, Any], directory: Path | None) -> Topic:
        return open_topic(opts, directory, self.settings)

    def create(
        self, name: str, lateness: int, retention: int | None, strategy: Mapping[str, str],
        delivery_retention_bytes: int | None = None, delivery_retention_ms: int | None = None,
        max_advance: int | None = None,
    ) -> Topic:
        """Create a topic; the options are validated by building its engine first.

        ``max_advance``: how far one event may move the topic's clock (event-time units); None:
        ``DEFAULT_MAX_ADVANCE``, 0: no bound, 0..2^61 accepted (docs/reference/errors.md).
        """
        check_topic_name(name)
        if delivery_retention_bytes is not None and delivery_retention_bytes < 0:
            raise InvalidArgument(f"delivery_retention_bytes must be >= 0 (0: memory only), got {delivery_retention_bytes}")
        if delivery_retention_ms is not None and delivery_retention_ms < -1:
            raise InvalidArgument(f"delivery_retention_ms must be >= 0 or -1 (no limit), got {delivery_retention_ms}")
        try:
            check_time_option("lateness", lateness)
            if retention is not None:
                check_time_option("retention", retention)
            if max_advance is None:
                max_advance = DEFAULT_MAX_ADVANCE
            check_time_option("max_advance", max_advance)
        except ValueError as e:
            raise InvalidArgument(str(e)) from None
        for kind in strategy:
            if kind not in KINDS:
                raise InvalidArgument(f"unknown subscription kind {kind!r} in strategy; kinds are {', '.join(KINDS)}")
        try:
            self.engine_factory(lateness=lateness, retention=retention, strategy=dict(strategy) or "auto",
                                max_advance=max_advance or None)
        except ValueError as e:
            raise InvalidArgument(str(e)) from None
        opts = {"name": name, "lateness": lateness, "retention": retention, "strategy": dict(strategy),
                "max_advance": max_advance, "created_unix_nanos": time.time_ns()}
        if delivery_retention_bytes is not None:
            opts["delivery_retention_bytes"] = delivery_retention_bytes
        if delivery_retention_ms is not None:
            opts["delivery_retention_ms"] = delivery_retention_ms
        with self._lock:
            if name in self._topics:
                raise AlreadyExists(f"topic {name!r} already exists")
            if name in self._damaged:
                raise self._damaged[name].error()
            directory = None
            if self.data_dir is not None:
                directory = self.data_dir / "topics" / name
                directory.mkdir()
                write_options(directory, opts)
                _fsync_dir(directory.parent)
            topic = self._open(opts, directory)
            self._topics[name] = topic
        return topic

    def get(self, name: str) -> Topic:
        """The open topic ``name``: ``NotFound`` when there is none, ``FailedPrecondition`` (with
        the reason and the file) when it is damaged."""
        if not name:
            raise InvalidArgument("topic name is required")
        try:
            return self._topics[name]
        except KeyError:
            damaged = self._damaged.get(name)
            if damaged is not None:
                raise damaged.error() from None
            raise NotFound(f"unknown topic {name!r}") from None

    def list(self) -> list[Topic]:
        """The open topics, by name (the damaged ones are in ``damaged``)."""
        return sorted(self._topics.values(), key=lambda t: t.name)

    def damaged(self) -> list[DamagedTopic]:
        """The topics set aside at start-up because they could not be opened, by name."""
        return sorted(self._damaged.values(), key=lambda t: t.name)

    def delete(self, name: str) -> None:
        """Delete a topic, its log and its listeners (a damaged topic is refused: repair it, or
        remove its directory while the server is stopped)."""
        with self._lock:
            topic = self.get(name)
            del self._topics[name]
        topic.close(deleted=True)
        if topic.directory is not None:
            trash = topic.directory.with_name(f".deleted-{name}-{time.time_ns()}")
            os.replace(topic.directory, trash)
            _fsync_dir(trash.parent)
            shutil.rmtree(trash, ignore_errors=True)
        metrics.forget_topic(name)

    def owned(self, owner: str) -> int:
        """Live subscriptions of principal ``owner`` over every topic (the subscriptions quota)."""
        return sum(t.owned(owner) for t in list(self._topics.values()))

    def stats(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(name, stats)`` of every open topic (for the metrics collector)."""
        for topic in self.list():
            try:
                yield topic.name, topic.stats()
            except NotFound:
                continue

    def close(self) -> None:
        """Close every topic, then give up the data directory's lock."""
        try:
            for topic in list(self._topics.values()):
                topic.close()
        finally:
            for name in self._damaged:
                with contextlib.suppress(KeyError):
                    metrics.TOPIC_DAMAGED.remove(name)
            if self._dir_lock is not None:
                self._dir_lock.release()
                self._dir_lock = None
