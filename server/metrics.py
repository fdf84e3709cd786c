"""Every Prometheus metric of the server, declared once (docs/reference/metrics.md,
Prometheus naming conventions).

Counters and histograms are updated by the domain layer as operations happen; the per-topic
engine gauges (stored tuples, subscriptions, τ, hotspots, router decisions) are read from
``Engine.stats()`` at scrape time by ``EngineCollector``, so the hot path pays nothing for them.
Names are ``hotjoin_<what>_<unit>``, counters end in ``_total``, times are in seconds.
docs/reference/metrics.md lists every metric with its meaning and the values its labels take.

The registry also carries the process collector (``process_*``: RSS, CPU seconds, open file
descriptors, start time; Linux) and the platform collector (``python_info``), plus
``hotjoin_build_info``. ``_created`` series are turned off (``disable_created_metrics``): they
double the series count and no dashboard here uses them.
"""

from __future__ import annotations

import bisect
import contextlib
import errno as errno_module
import json
import math
import os
import platform
import threading
from collections.abc import Callable, Iterable, Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from hotjoin.matcher.model import KINDS as JOIN_KINDS

disable_created_metrics()
REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)

# 0.5 ms to 2 min: the load test observed publish-to-delivery latencies past 10 s under overload,
# and a restart replaying a large log delays the first deliveries by tens of seconds.
_LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    20.0, 30.0, 60.0, 120.0,
)


def _version() -> str:
    try:
        return version("hotjoin")
    except PackageNotFoundError:
        return "unknown"


BUILD_INFO = Gauge(
    "hotjoin_build_info",
    "Always 1; the labels say which hotjoin, Python and gRPC this server runs.",
    ["version", "python_version", "grpc_version"],
    registry=REGISTRY,
)


def _grpc_version() -> str:
    return str(getattr(grpc, "__version__", "unknown"))


BUILD_INFO.labels(_version(), platform.python_version(), _grpc_version()).set(1)

RPC_REQUESTS = Counter(
    "hotjoin_rpc_requests_total",
    "Finished RPCs by method (Service/Method) and gRPC status code.",
    ["method", "code"],
    registry=REGISTRY,
)
RPC_DURATION = Histogram(
    "hotjoin_rpc_duration_seconds",
    "Handling time of RPCs with one response (unary and client-streaming), by method.",
    ["method"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
RPC_STREAMS = Gauge(
    "hotjoin_rpc_streams_in_flight",
    "Open server-streaming RPCs (Listen, PublishStream, ...) by method.",
    ["method"],
    registry=REGISTRY,
)

EVENTS_PUBLISHED = Counter(
    "hotjoin_events_published_total", "Events accepted and stored.", ["topic"], registry=REGISTRY
)
EVENTS_DELETED = Counter(
    "hotjoin_events_deleted_total", "Events deleted by request.", ["topic"], registry=REGISTRY
)
EVENTS_REJECTED = Counter(
    "hotjoin_events_rejected_total",
    "Events rejected, by reason (late, duplicate, duplicate_identical, invalid, not_found).",
    ["topic", "reason"],
    registry=REGISTRY,
)
MATCHES = Counter(
    "hotjoin_matches_total",
    "Result pairs gained or lost (absolute count) over all subscriptions.",
    ["topic"],
    registry=REGISTRY,
)
MESSAGES = Counter(
    "hotjoin_messages_total",
    "Messages (one per subscription and operation) appended to subscription buffers.",
    ["topic"],
    registry=REGISTRY,
)
DELIVERIES = Counter(
    "hotjoin_deliveries_total", "Messages handed to Listen streams.", ["topic"], registry=REGISTRY
)
GAPS = Counter(
    "hotjoin_listener_gaps_total",
    "Gap messages sent to listeners (asked-for messages no longer buffered).",
    ["topic"],
    registry=REGISTRY,
)
TOPIC_DAMAGED = Gauge(
    "hotjoin_topic_damaged",
    "1 for each topic set aside at start-up because a file of it does not verify (the log names "
    "the file and the reason; docs/reference/persistence.md, 'Damage and repair').",
    ["topic"],
    registry=REGISTRY,
)
SUBSCRIBE_OPS = Counter(
    "hotjoin_subscribe_operations_total",
    "Subscribe and unsubscribe operations, by op.",
    ["topic", "op"],
    registry=REGISTRY,
)
class BatchHistogram(Collector):
    """A labelled histogram observed a whole numpy array at a time: one ``searchsorted`` and
    one ``bincount`` per batch instead of a Python call per value (a columnar batch's events
    all get a publish→match time). Exposed through prometheus-client's public custom-collector
    API (``HistogramMetricFamily``), with the same series a ``Histogram`` would have.

    >>> reg = CollectorRegistry()
    >>> h = BatchHistogram("x_seconds", "Doc.", ["topic"], (0.1, 1.0), reg)
    >>> h.labels("t").observe_many(np.array([0.05, 0.1, 0.5, 3.0]))
    >>> reg.get_sample_value("x_seconds_bucket", {"topic": "t", "le": "0.1"})
    2.0
    >>> reg.get_sample_value("x_seconds_count", {"topic": "t"})
    4.0
    """

    def __init__(self, name: str, documentation: str, labelnames: list[str],
                 buckets: tuple[float, ...], registry: CollectorRegistry) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, list(labelnames)
        self.bounds = np.array([*buckets, math.inf], dtype=np.float64)
        self._les = [floatToGoString(b) for b in self.bounds.tolist()]
        self._children: dict[tuple[str, ...], _BatchHistogramChild] = {}
        self._lock = threading.Lock()
        registry.register(self)

    def labels(self, *values: str) -> _BatchHistogramChild:
        key = tuple(str(v) for v in values)
        with self._lock:
            child = self._children.get(key)
            if child is None:
                child = self._children[key] = _BatchHistogramChild(self.bounds)
            return child

    def remove(self, *values: str) -> None:
        """Drop a label set's series (KeyError when there is none, as ``Histogram.remove``)."""
        with self._lock:
            del self._children[tuple(str(v) for v in values)]

    def describe(self) -> Iterable[HistogramMetricFamily]:
        yield HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterable[HistogramMetricFamily]:
        fam = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        with self._lock:
            children = list(self._children.items())
        for key, child in children:
            counts, total = child.snapshot()
            cum = np.cumsum(counts).tolist()
            fam.add_metric(list(key), list(zip(self._les, cum, strict=True)), total)
        yield fam


class _BatchHistogramChild:
    """One label set's bucket counts and sum."""

    def __init__(self, bounds: np.ndarray) -> None:
        self.bounds = bounds
        self._bounds = bounds.tolist()
        self.counts = np.zeros(bounds.shape[0], dtype=np.float64)
        self.sum = 0.0
        self._lock = threading.Lock()

    def observe_many(self, values: np.ndarray) -> None:
        """Observe every value of ``values`` (seconds): a value goes to the first bucket whose
        upper bound is at least the value, as Prometheus ``le`` says."""
        if values.size == 0:
            return
        idx = np.searchsorted(self.bounds, values, side="left")
        add = np.bincount(idx, minlength=self.bounds.shape[0])
        with self._lock:
            self.counts += add
            self.sum += float(values.sum())

    def observe(self, value: float, times: int = 1) -> None:
        """Observe ``value`` (seconds) ``times`` times: one bucket found, no array."""
        k = bisect.bisect_left(self._bounds, value)
        with self._lock:
            self.counts[k] += times
            self.sum += value * times

    def snapshot(self) -> tuple[np.ndarray, float]:
        with self._lock:
            return self.counts.copy(), self.sum


PUBLISH_TO_MATCH = BatchHistogram(
    "hotjoin_publish_to_match_seconds",
    "From receiving an event to the engine having matched it.",
    ["topic"], _LATENCY_BUCKETS, REGISTRY,
)
PUBLISH_TO_DELIVERY = BatchHistogram(
    "hotjoin_publish_to_delivery_seconds",
    "From receiving an event to a message it caused being handed to a Listen stream.",
    ["topic"], _LATENCY_BUCKETS, REGISTRY,
)
PUBLISH_DURATION = Histogram(
    "hotjoin_publish_duration_seconds",
    "From receiving a publish batch to acknowledging it as durable.",
    ["topic"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
LOG_SYNC = Histogram(
    "hotjoin_log_sync_duration_seconds",
    "Time to append and fsync one frame of a topic's log.",
    ["topic"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
COMPACTIONS = Counter(
    "hotjoin_log_compactions_total", "Log compactions completed.", ["topic"], registry=REGISTRY
)
CHECKPOINTS = Counter(
    "hotjoin_checkpoints_total", "Topic checkpoints written.", ["topic"], registry=REGISTRY
)
CHECKPOINT_DURATION = Histogram(
    "hotjoin_checkpoint_duration_seconds",
    "Time to write a topic checkpoint (fork to file renamed, in the background).",
    ["topic"],
    buckets=(0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0),
    registry=REGISTRY,
)
COMPACTION_DURATION = Histogram(
    "hotjoin_log_compaction_duration_seconds",
    "Time to compact a topic's log (snapshot, copy of the tail, rename).",
    ["topic"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0),
    registry=REGISTRY,
)
STORAGE_WRITE_ERRORS = Counter(
    "hotjoin_storage_write_errors_total",
    "Failed writes to a topic's files (event log, match log, cursors, checkpoint, compaction), "
    "by errno name in lower case (enospc, edquot, eio, ...); failed syncs as fsync_<errno>.",
    ["topic", "error"],
    registry=REGISTRY,
)


def storage_error_label(error: OSError, sync: bool = False) -> str:
    """The ``error`` label of ``hotjoin_storage_write_errors_total`` for ``error``: its errno's
    name in lower case, prefixed ``fsync_`` for a failed sync (a bounded set: Linux's errnos).

    >>> import errno
    >>> storage_error_label(OSError(errno.ENOSPC, "No space left on device"))
    'enospc'
    >>> storage_error_label(OSError(errno.EIO, "Input/output error"), sync=True)
    'fsync_eio'
    >>> storage_error_label(OSError("no errno"))
    'unknown'
    """
    name = errno_module.errorcode.get(error.errno or -1, "unknown").lower()
    return f"fsync_{name}" if sync else name


# ---- security (docs/how-to/security.md): never labelled with token material ----------------------
AUTH_FAILURES = Counter(
    "hotjoin_auth_failures_total",
    "RPCs refused as UNAUTHENTICATED, by reason (missing, malformed, invalid, revoked).",
    ["reason"],
    registry=REGISTRY,
)
AUTH_DENIALS = Counter(
    "hotjoin_auth_denials_total",
    "RPCs refused as PERMISSION_DENIED, by the right that was missing (admin, publish, "
    "subscribe, any; another principal's subscription counts as admin).",
    ["right"],
    registry=REGISTRY,
)
AUTH_RELOADS = Counter(
    "hotjoin_auth_reloads_total",
    "Reloads of the auth file (SIGHUP), by outcome (ok, error).",
    ["outcome"],
    registry=REGISTRY,
)
QUOTA_REJECTIONS = Counter(
    "hotjoin_quota_rejections_total",
    "Requests refused as RESOURCE_EXHAUSTED, by quota and principal (name from the auth file; "
    "'anonymous' without one).",
    ["quota", "principal"],
    registry=REGISTRY,
)


class EngineCollector(Collector):
    """Per-topic engine gauges, computed from ``stats()`` of every topic at scrape time, and
    (with ``data_dir``) the topics' bytes on disk (``StorageCollector``)."""

    def __init__(self, topics: Callable[[], Iterable[tuple[str, dict[str, Any]]]],
                 data_dir: Path | None = None) -> None:
        self._topics = topics
        self._storage = StorageCollector(data_dir) if data_dir is not None else None

    def collect(self) -> Iterator[Any]:
        tuples = GaugeMetricFamily("hotjoin_stored_tuples", "Stored tuples per side.", labels=["topic", "side"])
        subs = GaugeMetricFamily(
            "hotjoin_subscriptions", "Live subscriptions per join kind.", labels=["topic", "kind"]
        )
        tau = GaugeMetricFamily(
            "hotjoin_stabbing_number", "Stabbing number tau per join kind.", labels=["topic", "kind"]
        )
        hot = GaugeMetricFamily("hotjoin_hotspots", "Hotspots per join kind.", labels=["topic", "kind"])
        seq = GaugeMetricFamily("hotjoin_topic_sequence", "Last applied sequence number.", labels=["topic"])
        listeners = GaugeMetricFamily("hotjoin_listeners", "Attached Listen streams.", labels=["topic"])
        decisions = CounterMetricFamily(
            "hotjoin_router_decisions",
            "Router decisions per strategy (cumulative).",
            labels=["topic", "strategy"],
        )
        corrections = GaugeMetricFamily(
            "hotjoin_router_correction",
            "The router's online calibration: measured / modelled cost per strategy and incoming "
            "side (1 = the cost profile is right on this workload).",
            labels=["topic", "strategy", "side"],
        )
        # durable delivery (docs/reference/persistence.md), per topic: no per-subscription label
        delivery = [(GaugeMetricFamily(f"hotjoin_{m}", h, labels=["topic"]), key) for m, h, key in (
            ("delivery_buffer_bytes", "Estimated bytes of undelivered messages held in memory.",
             "buffer_bytes"),
            ("delivery_buffer_fill_ratio", "Delivery buffer bytes / its limit.", "fill"),
            ("match_log_bytes", "Bytes of the durable match log (delivery retention).",
             "match_log_bytes"),
            ("committed_cursors", "Subscriptions with a committed cursor.", "committed_cursors"),
            ("cursor_lag_max", "Largest lag (newest seq of the subscription - committed seq) of "
             "a committed cursor.", "cursor_lag_max"),
            ("committed_cursors_lag", "Lag of all committed cursors together (sum of newest seq "
             "of the subscription - committed seq).", "cursor_lag_sum"),
        )]
        # per subscriber name (names operators choose: one series each, never per subscription)
        backlog = [(GaugeMetricFamily(f"hotjoin_subscriber_{m}", h, labels=["topic", "subscriber"]),
                    i) for m, h, i in (
            ("backlog_messages", "Messages owed to a subscriber's live subscriptions that no "
             "listener has been sent yet (counted since the server started).", 0),
            ("backlog_bytes", "Estimated bytes of those messages.", 1),
            ("committed_lag", "Largest lag (newest seq - committed seq) of a subscriber's "
             "subscriptions with a committed cursor; absent when none committed.", 2),
        )]
        workers: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
            k: GaugeMetricFamily(f"hotjoin_worker_{k}", h, labels=["topic", "worker"]) for k, h in (
                ("healthy", "Scale-out worker answering (1) or being restarted (0); "
                 "docs/how-to/scale-out.md."),
                ("sequence", "Last sequence number a scale-out worker applied."),
                ("memory_bytes", "Bytes of numpy arrays held by a scale-out worker's engine."))}
        # a count of events only goes up: a counter (hotjoin_worker_restarts_total), so that
        # increase() and rate() work on it and a server restart reads as a counter reset
        workers["restarts"] = CounterMetricFamily(
            "hotjoin_worker_restarts",
            "Times a scale-out worker was re-created from its snapshot (cumulative).",
            labels=["topic", "worker"],
        )
        for name, st in self._topics():
            for w in st.get("workers", ()):
                for k, key in (("healthy", "healthy"), ("sequence", "seq"),
                               ("memory_bytes", "memory_bytes"), ("restarts", "restarts")):
                    workers[k].add_metric([name, str(w["worker"])], float(w[key]))
            for side, n in st.get("tuples", {}).items():
                tuples.add_metric([name, side], n)
            for kind, n in st.get("subscriptions", {}).items():
                subs.add_metric([name, kind], n)
            for kind, n in st.get("tau", {}).items():
                tau.add_metric([name, kind], n)
            for kind, n in st.get("hotspots", {}).items():
                hot.add_metric([name, kind], n)
            for strategy, n in st.get("decisions", {}).items():
                decisions.add_metric([name, strategy], n)
            for kind in JOIN_KINDS:  # every kind of the engine, interval joins included
                for side, per in (st.get(kind) or {}).get("corrections", {}).items():
                    for strategy, x in per.items():
                        corrections.add_metric([name, strategy, side], x)
            seq.add_metric([name], st.get("seq", 0))
            listeners.add_metric([name], st.get("listeners", 0))
            d = st.get("delivery")
            if d:
                for fam, v in delivery:
                    fam.add_metric([name], d[v] if v != "fill" else
                                   d["buffer_bytes"] / max(d["buffer_limit_bytes"], 1))
            for who, values in st.get("subscribers", {}).items():
                for fam, i in backlog:
                    if values[i] is not None:
                        fam.add_metric([name, who], values[i])
        yield from (tuples, subs, tau, hot, decisions, corrections, seq, listeners, *workers.values())
        yield from (fam for fam, _ in delivery)
        yield from (fam for fam, _ in backlog)
        if self._storage is not None:
            yield from self._storage.collect()


class StorageCollector(Collector):
    """Bytes on disk per topic and file kind (log, checkpoint, matches, other), read at scrape time from
    the data directory (``DIR/topics/<dir>/``, the topic's name from its ``topic.json``): a
    stat per file, no lock on the topic (docs/reference/persistence.md describes the files)."""

    def __init__(self, data_dir: Path | None) -> None:
        self._data_dir = data_dir
        self._names: dict[str, str] = {}

    def _name(self, d: Path) -> str:
        name = self._names.get(d.name)
        if name is None:
            try:
                name = str(json.loads((d / "topic.json").read_text())["name"])
            except (OSError, ValueError, KeyError, TypeError):
                return d.name
            self._names[d.name] = name
        return name

    def collect(self) -> Iterator[Any]:
        fam = GaugeMetricFamily("hotjoin_storage_bytes",
                                "Bytes on disk per topic and file kind (log, checkpoint, matches, other).",
                                labels=["topic", "kind"])
        root = None if self._data_dir is None else self._data_dir / "topics"
        if root is not None and root.is_dir():
            for d in sorted(root.iterdir()):
                sizes = {"log": 0, "checkpoint": 0, "matches": 0, "other": 0}
                try:
                    with os.scandir(d) as it:
                        for f in it:
                            if f.name == "matches" and f.is_dir(follow_symlinks=False):
                                with os.scandir(f.path) as segs:  # the durable match log
                                    sizes["matches"] += sum(
                                        g.stat(follow_symlinks=False).st_size for g in segs
                                        if g.is_file(follow_symlinks=False))
                                continue
                            if not f.is_file(follow_symlinks=False):
                                continue
                            kind = ("log" if f.name.startswith("log") else
                                    "checkpoint" if f.name.startswith("checkpoint") else "other")
                            sizes[kind] += f.stat(follow_symlinks=False).st_size
                except OSError:  # deleted meanwhile
                    continue
                name = self._name(d)
                for kind, n in sizes.items():
                    fam.add_metric([name, kind], n)
        yield fam
        yield from self._filesystem()

    def _filesystem(self) -> Iterator[GaugeMetricFamily]:
        """Free and total bytes of the data directory's filesystem (``os.statvfs``): free is what
        the server may use (``f_bavail``, without the blocks reserved for root), so an alert on
        it fires before writes fail with ENOSPC (docs/reference/persistence.md, "Disk faults")."""
        if self._data_dir is None:
            return
        try:
            st = os.statvfs(self._data_dir)
        except OSError:  # the directory is gone or unreadable: no sample rather than a wrong one
            return
        free = GaugeMetricFamily("hotjoin_data_dir_free_bytes",
                                 "Bytes of the data directory's filesystem available to the server.")
        free.add_metric([], st.f_bavail * st.f_frsize)
        capacity = GaugeMetricFamily("hotjoin_data_dir_capacity_bytes",
                                     "Size in bytes of the data directory's filesystem.")
        capacity.add_metric([], st.f_blocks * st.f_frsize)
        yield from (free, capacity)


def serve_metrics(port: int, addr: str = "127.0.0.1") -> Any:
    """Serve ``/metrics`` over HTTP on ``addr:port``; returns the server (``shutdown()`` stops it)."""
    server, _thread = start_http_server(port, addr=addr, registry=REGISTRY)
    return server


def forget_topic(topic: str) -> None:
    """Drop the labelled children of a deleted topic."""
    for metric in (EVENTS_PUBLISHED, EVENTS_DELETED, MATCHES, MESSAGES, DELIVERIES, GAPS,
                   PUBLISH_TO_MATCH, PUBLISH_TO_DELIVERY, PUBLISH_DURATION, LOG_SYNC, COMPACTIONS,
                   COMPACTION_DURATION, CHECKPOINTS, CHECKPOINT_DURATION):
        with contextlib.suppress(KeyError):
            metric.remove(topic)
    rejected = ("late", "duplicate", "duplicate_identical", "invalid", "not_found")
    for metric2, labels in ((EVENTS_REJECTED, rejected),
                            (SUBSCRIBE_OPS, ("subscribe", "unsubscribe"))):
        for label in labels:
            with contextlib.suppress(KeyError):
                metric2.remove(topic, label)
    for sample in list(STORAGE_WRITE_ERRORS.collect()[0].samples):
        if sample.labels.get("topic") == topic and sample.name.endswith("_total"):
            with contextlib.suppress(KeyError):
                STORAGE_WRITE_ERRORS.remove(topic, sample.labels["error"])
