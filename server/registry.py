"""The set of topics of one server and their directories under ``--data-dir``.

Layout: ``DATA_DIR/topics/<name>/topic.json`` (options, written atomically before the topic is
visible) and ``DATA_DIR/topics/<name>/log`` (the operation log, ``server/log.py``). Without a
data directory topics live in memory only. Topic names are 1–128 characters of
``[A-Za-z0-9._-]`` so they are safe as directory names and metric labels.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hotjoin.server import metrics
from hotjoin.server.convert import check_time_option
from hotjoin.server.errors import AlreadyExists, InvalidArgument, NotFound, clip
from hotjoin.server.log import _fsync_dir
from hotjoin.server.settings import DEFAULT_SETTINGS, DeliveryOptions, TopicSettings
from hotjoin.server.topic import Topic

_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")  # matched with fullmatch: "$" would allow "x\n"
KINDS = ("select", "band", "window")


def check_topic_name(name: str) -> str:
    if not name:
        raise InvalidArgument("topic name is required")
    if not _NAME.fullmatch(name) or name in (".", ".."):
        raise InvalidArgument(
            f"invalid topic name {clip(repr(name), 200)}: use 1-128 characters of letters, digits, '.', '_', '-'"
        )
    return name


class TopicRegistry:
    """Creates, finds, lists and deletes topics; loads existing ones from the data directory."""

    def __init__(self, data_dir: Path | None = None, settings: TopicSettings = DEFAULT_SETTINGS) -> None:
        self.data_dir = data_dir
        self.settings = settings
        self.engine_factory = settings.engine_factory
        self._lock = threading.Lock()
        self._topics: dict[str, Topic] = {}
        if data_dir is not None:
            (data_dir / "topics").mkdir(parents=True, exist_ok=True)
            for d in sorted((data_dir / "topics").iterdir()):
                if (d / "topic.json").exists():
                    opts = json.loads((d / "topic.json").read_text())
                    self._topics[opts["name"]] = self._open(opts, d)
                elif d.is_dir():  # a create that crashed before its options were written
                    shutil.rmtree(d, ignore_errors=True)

    def _open(self, opts: Mapping[str, Any], directory: Path | None) -> Topic:
        settings = dataclasses.replace(self.settings, delivery=self._delivery_of(opts))
        return Topic(opts["name"], opts["lateness"], opts.get("retention"), opts.get("strategy") or {},
                     directory, settings)

    def _delivery_of(self, opts: Mapping[str, Any]) -> DeliveryOptions:
        """The server's delivery defaults with the topic's own retention options applied."""
        d = self.settings.delivery
        b, ms = opts.get("delivery_retention_bytes"), opts.get("delivery_retention_ms")
        return DeliveryOptions(d.retention_bytes if b is None else b, d.retention_ms if ms is None else ms,
                               d.segment_bytes, d.buffer_bytes, d.listener_bytes)

    def create(
        self, name: str, lateness: int, retention: int | None, strategy: Mapping[str, str],
        delivery_retention_bytes: int | None = None, delivery_retention_ms: int | None = None,
    ) -> Topic:
        """Create a topic; the options are validated by building its engine first."""
        check_topic_name(name)
        if delivery_retention_bytes is not None and delivery_retention_bytes < 0:
            raise InvalidArgument(f"delivery_retention_bytes must be >= 0 (0: memory only), got {delivery_retention_bytes}")
        if delivery_retention_ms is not None and delivery_retention_ms < -1:
            raise InvalidArgument(f"delivery_retention_ms must be >= 0 or -1 (no limit), got {delivery_retention_ms}")
        try:
            check_time_option("lateness", lateness)
            if retention is not None:
                check_time_option("retention", retention)
        except ValueError as e:
            raise InvalidArgument(str(e)) from None
        for kind in strategy:
            if kind not in KINDS:
                raise InvalidArgument(f"unknown subscription kind {kind!r} in strategy; kinds are {', '.join(KINDS)}")
        try:
            self.engine_factory(lateness=lateness, retention=retention, strategy=dict(strategy) or "auto")
        except ValueError as e:
            raise InvalidArgument(str(e)) from None
        opts = {"name": name, "lateness": lateness, "retention": retention, "strategy": dict(strategy),
                "created_unix_nanos": time.time_ns()}
        if delivery_retention_bytes is not None:
            opts["delivery_retention_bytes"] = delivery_retention_bytes
        if delivery_retention_ms is not None:
            opts["delivery_retention_ms"] = delivery_retention_ms
        with self._lock:
            if name in self._topics:
                raise AlreadyExists(f"topic {name!r} already exists")
            directory = None
            if self.data_dir is not None:
                directory = self.data_dir / "topics" / name
                directory.mkdir()
                tmp = directory / "topic.json.tmp"
                with open(tmp, "w") as f:
                    json.dump(opts, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, directory / "topic.json")
                _fsync_dir(directory)
                _fsync_dir(directory.parent)
            topic = self._open(opts, directory)
            self._topics[name] = topic
        return topic

    def get(self, name: str) -> Topic:
        if not name:
            raise InvalidArgument("topic name is required")
        try:
            return self._topics[name]
        except KeyError:
            raise NotFound(f"unknown topic {name!r}") from None

    def list(self) -> list[Topic]:
        return sorted(self._topics.values(), key=lambda t: t.name)

    def delete(self, name: str) -> None:
        """Delete a topic, its log and its listeners."""
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
        for topic in list(self._topics.values()):
            topic.close()
