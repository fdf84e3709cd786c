"""Disk faults: a failed write never loses or half-writes data, and writes resume by themselves.

docs/reference/persistence.md, "Disk faults". Two levels:

- **In process**, ``os.write`` is replaced to fail the event log or the match log mid-record
  (part of the bytes written, then ENOSPC / EDQUOT / EIO), for per-event and columnar publishes,
  deletes, subscribe batches and unsubscribes; the topic must answer RESOURCE_EXHAUSTED (a full
  disk) or UNAVAILABLE, cut both files back to their sizes before the batch and hold exactly the
  state a fresh restore of its files gives (seq, stored tuples, subscriptions, book), then take
  the next batch at the next seq. A hypothesis property test runs random operations with random
  faults against the brute-force ``OracleEngine`` fed only the acknowledged ones. Failed syncs,
  cursor commits, checkpoint and compaction writes are covered one by one.
- **Against a real filesystem** (not a mock): the server runs as a subprocess with its data
  directory on an 8 MiB tmpfs the test mounts itself, which a ballast file fills up.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from server_harness import engine_factory

from hotjoin.clients import CallError, PublishResult
from hotjoin.clients.client import HotjoinClient, band, event, ref, select
from hotjoin.matcher.model import Event as MEvent
from hotjoin.matcher.oracle import OracleEngine
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server import metrics, snapshot
from hotjoin.server.convert import EventBatch, decode_spec, encode_spec
from hotjoin.server.errors import ResourceExhausted, ServiceError, Unavailable
from hotjoin.server.settings import TopicSettings
from hotjoin.server.topic import Topic

ROOT = Path(__file__).resolve().parents[2]
LATENESS = 10**9


# ---- helpers ----------------------------------------------------------------------------------


class WriteFault:
    """``os.write`` that fails on one file descriptor: optionally writes the first half of the
    buffer (a short write, as a filling disk gives), then raises ``OSError(code)``."""

    def __init__(self, fd: int, code: int, partial: bool = True) -> None:
        self.fd, self.code, self.partial = fd, code, partial
        self.real = os.write
        self.fired = 0

    def __call__(self, fd: int, data: Any) -> int:
        if fd != self.fd:
            return self.real(fd, data)
        self.fired += 1
        if self.partial and self.fired == 1 and len(data) > 1:
            return self.real(fd, bytes(data[: len(data) // 2]))
        raise OSError(self.code, os.strerror(self.code))


@contextlib.contextmanager
def failing_write(fd: int, code: int = errno.ENOSPC, partial: bool = True) -> Iterator[WriteFault]:
    fault = WriteFault(fd, code, partial)
    os.write = fault  # type: ignore[assignment]
    try:
        yield fault
    finally:
        os.write = fault.real


def _topic(d: Path, retention: int | None = None, sync: bool = False, **kw: Any) -> Topic:
    d.mkdir(parents=True, exist_ok=True)
    return Topic(d.name, LATENESS, retention, {}, d,
                 TopicSettings(engine_factory=engine_factory(), sync=sync, **kw))


def _state(topic: Topic) -> dict[str, Any]:
    """Everything recovery rebuilds: seq, clock, next id, subscriptions with their metadata and
    owners, the stored tuples of both sides with their seqs, the book's derived fields."""
    with topic._lock:
        s = snapshot.capture(topic.engine, topic.book.meta, topic.lateness, topic.book.owners)
        wants_pairs = topic.book.wants_pairs
        next_sid = topic.book.next_sid
    tuples = {t.side: sorted(zip(t.ids, t.keys.tolist(), t.values.tolist(), t.times.tolist(),
                                 t.seqs.tolist(), [bytes(p) for p in t.payloads], strict=True))
              for t in s.tuples}
    subs = sorted((sid, encode_spec(sub, m).SerializeToString(deterministic=True), m.registered_seq)
                  for sid, sub, m in s.subs)
    return {"seq": s.seq, "max_time": s.max_time, "next_sid": (s.next_sid, next_sid), "subs": subs,
            "owners": s.owners, "tuples": tuples, "wants_pairs": wants_pairs}


def _fresh_state(d: Path, tmp: Path, retention: int | None = None) -> dict[str, Any]:
    """The state a restart reads from a copy of the topic's files as they are now."""
    copy = tmp / f"copy-{time.monotonic_ns()}" / d.name
    shutil.copytree(d, copy)
    t = _topic(copy, retention)
    try:
        return _state(t)
    finally:
        t.close()


def _sizes(d: Path) -> dict[str, int]:
    out = {"log": (d / "log").stat().st_size}
    for seg in sorted((d / "matches").glob("*.seg")):
        out[seg.name] = seg.stat().st_size
    return out


def _errors(topic: str, label: str) -> float:
    return metrics.REGISTRY.get_sample_value(
        "hotjoin_storage_write_errors_total", {"topic": topic, "error": label}) or 0.0


def _columns(events: list[tuple[str, str, float, float, int]]) -> EventBatch:
    ids = np.empty(len(events), dtype=object)
    ids[:] = [e[1] for e in events]
    return EventBatch(np.array([1 if e[0] == "R" else 2 for e in events], dtype=np.uint8), ids,
                      np.array([e[2] for e in events], dtype=np.float64),
                      np.array([e[3] for e in events], dtype=np.float64),
                      np.array([e[4] for e in events], dtype=np.int64), None)


SPECS = [select((0, 5), None, subscriber="sel", delivery="pairs"),
         band((-1, 1), subscriber="band", delivery="affected")]


def _loaded(d: Path, **kw: Any) -> Topic:
    """A topic with two subscriptions and a few stored events that match them."""
    t = _topic(d, **kw)
    t.subscribe(SPECS, time.time_ns())
    t.publish([event("R", "r1", 1.0, 1.0, 10), event("S", "s1", 1.5, 1.0, 11),
               event("S", "s2", 1.0, 9.0, 12)], time.time_ns())
    return t


def _checkpoint(t: Topic) -> None:
    """Take a checkpoint now and wait until its background write has ended."""
    assert t.checkpoint_now()
    deadline = time.monotonic() + 60
    while t.durability._ckpt_running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not t.durability._ckpt_running


# ---- one fault at a time, in process ---------------------------------------------------------

FAULTS = [("log", errno.ENOSPC, True), ("log", errno.EDQUOT, False), ("log", errno.EIO, True),
          ("matches", errno.ENOSPC, True), ("matches", errno.EIO, False)]


def _fd(t: Topic, target: str) -> int:
    f = t.durability.log if target == "log" else t.durability.match_log
    assert f is not None
    return f._fd


def _expect_refused(x: pytest.ExceptionInfo[ServiceError], code: int, topic: str) -> None:
    if code in (errno.ENOSPC, errno.EDQUOT):
        assert isinstance(x.value, ResourceExhausted)
        assert x.value.code == "RESOURCE_EXHAUSTED"
        assert "retry once there is space" in x.value.message
    else:
        assert isinstance(x.value, Unavailable)
        assert "a retry is safe" in x.value.message
    assert f"topic {topic!r}" in x.value.message
    assert os.strerror(code) in x.value.message
    assert "the batch was not applied" in x.value.message
    assert "\n" not in x.value.message


@pytest.mark.parametrize(("target", "code", "partial"), FAULTS)
@pytest.mark.parametrize("form", ["events", "columns", "subscribe"])
def test_failed_write_is_cut_back_and_the_state_rebuilt(tmp_path: Path, target: str, code: int,
                                                        partial: bool, form: str) -> None:
    d = tmp_path / f"t-{form}-{target}-{code}"
    t = _loaded(d)
    try:
        before, sizes, seq = _state(t), _sizes(d), t.engine.seq
        counted = _errors(d.name, metrics.storage_error_label(OSError(code, "")))
        now = time.time_ns()
        # every form touches both files: matching events, and a snapshot subscription
        apply: dict[str, Callable[[], Any]] = {
            "events": lambda: t.publish([event("R", "r2", 1.0, 2.0, 20), event("S", "s3", 1.0, 0.5, 21)], now),
            "columns": lambda: t.publish_columns(
                _columns([("R", "r2", 1.0, 2.0, 20), ("S", "s3", 1.0, 0.5, 21)]), now),
            "subscribe": lambda: t.subscribe([select((0, 9), None, subscriber="new", snapshot=True),
                                              band((-5, 5), subscriber="new", delivery="pairs")], now),
        }
        with failing_write(_fd(t, target), code, partial) as fault, \
                pytest.raises(ServiceError) as refused:
            apply[form]()
        assert fault.fired
        _expect_refused(refused, code, d.name)
        # nothing half-written stays, nothing of the batch is applied, and the in-memory state
        # is what a restart would read from the files
        assert _sizes(d) == sizes
        assert t.engine.seq == seq
        assert _state(t) == before == _fresh_state(d, tmp_path)
        assert _errors(d.name, metrics.storage_error_label(OSError(code, ""))) == counted + 1
        assert not t.durability.closed
        # the same batch simply works now, at the next seq
        out = apply[form]()
        first = out[0][1] if form == "subscribe" else (out.first_seq if form == "columns" else out[0].seq)
        assert first == seq + 1
        after = _state(t)
        assert after["seq"] == seq + 2
    finally:
        t.close()
    assert _state(reopened := _topic(d)) == after
    reopened.close()


def test_unsubscribe_and_delete_refused_then_applied(tmp_path: Path) -> None:
    d = tmp_path / "ud"
    t = _loaded(d)
    try:
        before = _state(t)
        with failing_write(_fd(t, "log"), errno.ENOSPC), pytest.raises(ResourceExhausted):
            t.unsubscribe(1)
        assert _state(t) == before and 1 in t.book  # the book is rebuilt too
        with failing_write(_fd(t, "matches"), errno.ENOSPC), pytest.raises(ResourceExhausted):
            t.delete([ref("R", "r1")], time.time_ns())
        assert _state(t) == before == _fresh_state(d, tmp_path)
        assert t.unsubscribe(1) == before["seq"] + 1
        assert [s.seq for s in t.delete([ref("R", "r1")], time.time_ns())] == [before["seq"] + 2]
    finally:
        t.close()


def test_frames_of_other_batches_written_before_the_failure_stay(tmp_path: Path) -> None:
    """A batch applied and written but not yet committed (a pipelined publish stream) is kept:
    it is in the files, so in the rebuilt state, and its commit acknowledges it afterwards."""
    d = tmp_path / "pipelined"
    t = _loaded(d)
    try:
        seq = t.engine.seq
        statuses, token = t.publish_begin([event("R", "r9", 1.0, 1.0, 30)], time.time_ns())
        assert statuses[0].seq == seq + 1
        with failing_write(_fd(t, "log"), errno.ENOSPC), pytest.raises(ResourceExhausted):
            t.publish([event("S", "s9", 1.0, 1.0, 31)], time.time_ns())
        assert t.engine.seq == seq + 1
        assert t.engine.get_event("R", "r9") is not None and t.engine.get_event("S", "s9") is None
        t.commit(token)  # acknowledged: its frame was never touched
        assert _state(t) == _fresh_state(d, tmp_path)
        assert t.publish([event("S", "s9", 1.0, 1.0, 31)], time.time_ns())[0].seq == seq + 2
    finally:
        t.close()


@pytest.mark.parametrize("kind", ["checkpoint", "compacted"])
def test_rebuild_reads_checkpoint_or_compacted_log(tmp_path: Path, kind: str) -> None:
    """The rebuild is start-up's recovery: a checkpoint plus the log's tail, or a compacted log's
    snapshot plus its appends."""
    d = tmp_path / kind
    retention = 10**12 if kind == "compacted" else None
    t = _loaded(d, retention=retention, checkpoint_min_ops=1000)  # only when asked for
    try:
        if kind == "checkpoint":
            _checkpoint(t)
            assert (d / "checkpoint").exists()
        else:
            assert t.compact()
        t.publish([event("R", "r5", 2.0, 2.0, 40)], time.time_ns())  # the tail after it
        before = _state(t)
        with failing_write(_fd(t, "log"), errno.ENOSPC), pytest.raises(ResourceExhausted):
            t.publish([event("S", "s5", 2.0, 2.0, 41)], time.time_ns())
        assert _state(t) == before == _fresh_state(d, tmp_path, retention)
        assert t.publish([event("S", "s5", 2.0, 2.0, 41)], time.time_ns())[0].seq == before["seq"] + 1
    finally:
        t.close()


def test_failed_cut_back_closes_the_topic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "nocut"
    t = _loaded(d)
    try:
        def no_truncate(fd: int, size: int) -> None:
            raise OSError(errno.EIO, os.strerror(errno.EIO))

        monkeypatch.setattr(os, "ftruncate", no_truncate)
        with failing_write(_fd(t, "log"), errno.ENOSPC), pytest.raises(Unavailable) as x:
            t.publish([event("R", "r7", 1.0, 1.0, 50)], time.time_ns())
        assert "could not be removed" in x.value.message and "restarts" in x.value.message
        monkeypatch.undo()
        assert t.durability.closed
        with pytest.raises(Unavailable):
            t.publish([event("R", "r7", 1.0, 1.0, 50)], time.time_ns())
    finally:
        t.close()
    reopened = _topic(d)  # the torn tail is cut on open; nothing of the batch was acknowledged
    assert reopened.engine.get_event("R", "r7") is None
    reopened.close()


# ---- failed syncs: the topic closes (fsyncgate) -------------------------------------------------


@pytest.mark.parametrize("target", ["log", "matches"])
def test_failed_fsync_closes_the_topic_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    target: str) -> None:
    d = tmp_path / f"fsync-{target}"
    t = _loaded(d, sync=True)
    try:
        counted = _errors(d.name, "fsync_eio")
        seq = t.engine.seq
        real, failing = os.fdatasync, _fd(t, target)

        def eio(fd: int) -> None:
            if fd != failing:
                return real(fd)
            raise OSError(errno.EIO, os.strerror(errno.EIO))

        monkeypatch.setattr(os, "fdatasync", eio)
        with pytest.raises(Unavailable) as x:
            t.publish([event("R", "r8", 1.0, 1.0, 60)], time.time_ns())
        msg = x.value.message
        assert "syncing its log to disk failed (Input/output error)" in msg
        assert "closed until the server restarts" in msg and "may or may not be durable" in msg
        assert _errors(d.name, "fsync_eio") == counted + 1
        monkeypatch.undo()
        # latched: a later sync that "succeeds" is not trusted, and the topic stays closed
        with pytest.raises(Unavailable):
            t.durability.commit(t.durability.written())
        with pytest.raises(Unavailable):
            t.publish([event("R", "r9", 1.0, 1.0, 61)], time.time_ns())
        assert _errors(d.name, "fsync_eio") == counted + 1  # counted once
    finally:
        t.close()
    reopened = _topic(d)  # a restart reads the files back and serves again
    assert reopened.engine.seq in (seq, seq + 1)
    assert reopened.publish([event("R", "r9", 1.0, 1.0, 61)], time.time_ns())[0].code == "ok"
    reopened.close()


# ---- cursors, checkpoints, compaction ------------------------------------------------------------


def test_cursor_commit_on_a_full_disk_changes_nothing(tmp_path: Path) -> None:
    d = tmp_path / "cursors"
    t = _loaded(d)
    try:
        t.commit_cursors({0: 3})
        size = (d / "cursors").stat().st_size
        with failing_write(t.cursors._fd, errno.ENOSPC) as fault, \
                pytest.raises(ResourceExhausted) as x:
            t.commit_cursors({0: 4, 1: 4})
        assert fault.fired
        assert "writing its committed cursors" in x.value.message
        assert "nothing was committed" in x.value.message
        assert (d / "cursors").stat().st_size == size  # the half-written frame is cut back
        assert t.cursors.positions() == {0: 3}
        with failing_write(t.cursors._fd, errno.EIO, partial=False), pytest.raises(Unavailable):
            t.commit_cursors({0: 4})
        assert t.commit_cursors({0: 4, 1: 4}) == [(0, 4), (1, 4)]
    finally:
        t.close()
    reopened = _topic(d)
    assert reopened.cursors.positions() == {0: 4, 1: 4}
    reopened.close()


def test_forget_on_a_full_disk_does_not_fail_the_unsubscribe(tmp_path: Path) -> None:
    d = tmp_path / "forget"
    t = _loaded(d)
    try:
        t.commit_cursors({1: 2})
        size = (d / "cursors").stat().st_size
        with failing_write(t.cursors._fd, errno.ENOSPC):
            t.unsubscribe(1)  # durable; forgetting its cursor fails, quietly
        assert (d / "cursors").stat().st_size == size and t.cursors.positions() == {}
        t.commit_cursors({0: 2})  # carries the forgotten position along
    finally:
        t.close()
    reopened = _topic(d)
    assert reopened.cursors.positions() == {0: 2}
    reopened.close()


def test_checkpoint_write_on_a_full_disk_frees_its_temp_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "ckpt"
    t = _loaded(d, checkpoint_min_ops=1000)  # only when asked for
    try:
        _checkpoint(t)
        old = (d / "checkpoint").read_bytes()
        t.publish([event("R", "r6", 3.0, 3.0, 70)], time.time_ns())
        counted = _errors(d.name, "enospc")

        def full(fd: int) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(os, "fdatasync", full)  # the checkpoint's chunked write-and-sync
        with caplog.at_level(logging.WARNING, "hotjoin.topic"):
            _checkpoint(t)
        monkeypatch.undo()
        assert not (d / "checkpoint.tmp").exists()
        assert (d / "checkpoint").read_bytes() == old
        lines = [r for r in caplog.records if "checkpoint not written" in r.getMessage()]
        assert len(lines) == 1 and lines[0].exc_info is None
        assert "No space left on device" in lines[0].getMessage()
        assert _errors(d.name, "enospc") == counted + 1
        assert t.publish([event("S", "s6", 3.0, 3.0, 71)], time.time_ns())[0].code == "ok"
    finally:
        t.close()


def test_compaction_on_a_full_disk_keeps_the_old_log(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "compact"
    t = _loaded(d, retention=10**12)
    try:
        log_bytes = (d / "log").read_bytes()
        allowed = {_fd(t, "log"), _fd(t, "matches")}
        real = os.write

        def full(fd: int, data: Any) -> int:  # every new file (log.compact) is out of space
            if fd in allowed:
                return real(fd, data)
            real(fd, bytes(data[:7]))
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        os.write = full  # type: ignore[assignment]
        try:
            with caplog.at_level(logging.WARNING, "hotjoin.topic"), pytest.raises(OSError):
                t.compact()
            t.durability._compact_failed(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        finally:
            os.write = real
        assert not (d / "log.compact").exists()
        assert (d / "log").read_bytes() == log_bytes
        assert t.durability._compact_after > time.monotonic()  # no retry on every append
        assert any("compaction not written" in r.getMessage() and r.exc_info is None
                   for r in caplog.records)
        assert t.publish([event("S", "s4", 1.0, 1.0, 80)], time.time_ns())[0].code == "ok"
        assert t.compact()
    finally:
        t.close()


# ---- property: random operations and faults against the brute-force oracle --------------------

EVENT = st.tuples(st.sampled_from("RS"), st.integers(0, 5), st.integers(0, 2), st.integers(0, 3))
FAULT = st.one_of(st.none(), st.none(), st.tuples(
    st.sampled_from(["log", "matches"]), st.sampled_from([errno.ENOSPC, errno.EDQUOT, errno.EIO]),
    st.booleans()))
OP = st.one_of(
    st.tuples(st.just("publish"), st.lists(EVENT, min_size=1, max_size=4)),
    st.tuples(st.just("columns"), st.lists(EVENT, min_size=1, max_size=4,
                                            unique_by=lambda e: (e[0], e[1]))),
    st.tuples(st.just("delete"), st.sampled_from("RS"), st.integers(0, 5)),
    st.tuples(st.just("subscribe"), st.lists(st.tuples(st.sampled_from(["select", "band"]),
                                                       st.integers(0, 3), st.booleans()),
                                             min_size=1, max_size=3)),
    st.tuples(st.just("unsubscribe"), st.integers(0, 10)),
)


def _spec_of(kind: str, lo: int, affected: bool) -> pb.SubscriptionSpec:
    delivery = "affected" if affected else "pairs"
    if kind == "select":
        return select((lo, lo + 2), None, delivery=delivery)
    return band((-lo, lo), delivery=delivery)


class Model:
    """The oracle fed only the acknowledged operations, with the messages each one owes."""

    def __init__(self) -> None:
        self.oracle = OracleEngine(lateness=LATENESS)
        self.messages: set[tuple[int, int, int]] = set()  # (sid, seq, sign)
        self.clock = 0

    def publish(self, side: str, eid: str, key: float, value: float, t: int) -> str:
        if eid in self.oracle.stored(side):
            return "duplicate"
        out = self.oracle.publish(MEvent(side, eid, key, value, t))
        self.messages |= {(d.subscription_id, self.oracle.seq, 1) for d in out}
        return "ok"

    def delete(self, side: str, eid: str) -> str:
        if eid not in self.oracle.stored(side):
            return "not_found"
        out = self.oracle.delete(side, eid)
        self.messages |= {(d.subscription_id, self.oracle.seq, -1) for d in out}
        return "ok"


def _run(t: Topic, model: Model, op: tuple[Any, ...]) -> None:
    """Apply ``op`` to the topic and, when acknowledged, to the model; check the statuses."""
    now = time.time_ns()
    kind = op[0]
    if kind in ("publish", "columns"):
        evs = []
        for side, k, key, value in op[1]:
            model.clock += 1
            evs.append((side, f"{side.lower()}{k}", float(key), float(value), model.clock))
        if kind == "publish":
            got = [s.code for s in t.publish([event(*e) for e in evs], now)]
        else:
            out = t.publish_columns(_columns(evs), now)
            got = ["ok" if s == 0 else "duplicate" if s == 2 else str(int(s)) for s in out.status]
        assert got == [model.publish(*e) for e in evs]
    elif kind == "delete":
        eid = f"{op[1].lower()}{op[2]}"
        assert [s.code for s in t.delete([ref(op[1], eid)], now)] == [model.delete(op[1], eid)]
    elif kind == "subscribe":
        specs = [_spec_of(*s) for s in op[1]]
        ids = [sid for sid, _ in t.subscribe(specs, now)]
        assert ids == [model.oracle.subscribe(decode_spec(s)[0]) for s in specs]
    else:
        live = sorted(model.oracle.subscriptions())
        if live:
            sid = live[op[1] % len(live)]
            t.unsubscribe(sid)
            model.oracle.unsubscribe(sid)


def _check(t: Topic, model: Model) -> None:
    o = model.oracle
    assert t.engine.seq == o.seq
    with t._lock:
        for side in "RS":
            assert sorted(snapshot.tuples_of(t.engine, side).ids) == sorted(o.stored(side))
        assert sorted(t.book.meta) == sorted(o.subscriptions())
    ml = t.durability.match_log
    assert ml is not None
    got: set[tuple[int, int, int]] = set()
    for _, _, cols in ml.read(0, t.engine.seq, max_bytes=1 << 30):
        got |= set(zip(cols[0].tolist(), cols[1].tolist(), cols[2].tolist(), strict=True))
    assert got == model.messages  # no record of a refused batch, none missing


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(OP, FAULT), min_size=1, max_size=12))
def test_random_faults_match_the_oracle(tmp_path: Path, ops: list[tuple[Any, Any]]) -> None:
    """Random operations, some with a write fault on the event log or the match log: a faulted
    operation that writes there is refused and changes nothing; after every step the topic's
    seq, stored tuples, subscriptions and match-log messages are exactly the oracle's, fed only
    the acknowledged operations; a restart reads the same state back."""
    d = tmp_path / f"prop-{time.monotonic_ns()}"
    t = _topic(d)
    model = Model()
    try:  # subscriptions from the start, so that most publishes and deletes owe messages
        _run(t, model, ("subscribe", [("select", 0, False), ("band", 1, True)]))
        for op, fault in ops:
            if fault is None:
                _run(t, model, op)
            else:
                # the model changes only after the topic acknowledged the op (see ``_run``)
                target, code, partial = fault
                seq = t.engine.seq
                with failing_write(_fd(t, target), code, partial) as f:
                    try:
                        _run(t, model, op)
                    except ServiceError as x:
                        assert f.fired, x
                        assert x.code == ("UNAVAILABLE" if code == errno.EIO else "RESOURCE_EXHAUSTED")
                        assert t.engine.seq == seq
                    else:
                        assert not f.fired  # the op wrote nothing to that file
            _check(t, model)
        _check(t, model)
        before = _state(t)
    finally:
        t.close()
    reopened = _topic(d)
    try:
        assert _state(reopened) == before
        _check(reopened, model)
    finally:
        reopened.close()


# ---- a real filesystem that fills up ------------------------------------------------------------


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs mounted for the test: a real filesystem whose writes fail with ENOSPC once
    it is full (not a mock). Skipped, with the reason, where mounting is not permitted."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as x:
        pytest.skip(f"cannot mount a tmpfs: {x}")
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip() or f'mount exited {r.returncode}'}")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True, timeout=30).returncode:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(data: Path, port: int, metrics_port: int, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as err:
        return subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("serve_proc.py")), "--data-dir", str(data),
             "--port", str(port), "--metrics-port", str(metrics_port)],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)


def _fill(path: Path) -> int:
    """Write a ballast file until the filesystem refuses (ENOSPC); returns its size."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    total = 0
    try:
        for block in (1 << 20, 1 << 12, 1):
            data = b"\xa5" * block
            while True:
                try:
                    total += os.write(fd, data)
                except OSError as x:
                    assert x.errno == errno.ENOSPC, x
                    break
    finally:
        os.close(fd)
    return total


Owed = dict[tuple[int, int], tuple[int, frozenset[tuple[str, str]]]]  # (sid, seq) -> (sign, pairs)


def _listened(c: HotjoinClient, topic: str, sid: int) -> Owed:
    """Every message of subscription ``sid`` from the start, read until the stream is caught up."""
    out: Owed = {}
    stream = c.listen(topic, subscription_ids=[sid], cursors={sid: 0}, reconnect=False)
    try:
        for resp in stream:
            kind = resp.kind
            if kind == "match":
                m = resp
                out[(m.subscription_id, m.seq)] = (m.sign, frozenset(m.pairs))
            elif kind == "caught_up":
                break
            else:
                raise AssertionError(f"unexpected {kind}: {resp}")
    finally:
        stream.cancel()
    return out


def _metric(text: str, name: str, **labels: str) -> float | None:
    """The value of sample ``name`` with exactly ``labels`` in a Prometheus text exposition."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


class Acked:
    """What the server acknowledged on one topic, fed to the brute-force oracle."""

    def __init__(self, spec: pb.SubscriptionSpec) -> None:
        self.oracle = OracleEngine(lateness=LATENESS)
        self.sid = self.oracle.subscribe(decode_spec(spec)[0])
        self.owed: Owed = {}

    def stored(self) -> dict[str, int]:
        return {side: len(self.oracle.stored(side)) for side in "RS"}

    def took(self, events: list[pb.Event], resp: PublishResult, columnar: bool = False) -> None:
        """Every event of the batch was acknowledged at the seq the oracle gives it."""
        if columnar:  # only rejected events are listed; the accepted took first_seq..last_seq
            assert not resp.statuses, resp
            seqs = list(range(resp.first_seq, resp.last_seq + 1))
        else:
            assert [s.code for s in resp.statuses] == ["OK"] * len(events), resp
            seqs = [s.seq for s in resp.statuses]
        for e, seq in zip(events, seqs, strict=True):
            side = "R" if e.side == pb.SIDE_R else "S"
            out = self.oracle.publish(MEvent(side, e.id, e.key, e.value, e.time, e.payload))
            assert seq == self.oracle.seq
            if out:
                self.owed[(self.sid, seq)] = (1, frozenset((d.r_id, d.s_id) for d in out))


def test_disk_full_on_a_real_filesystem(small_fs: Path, tmp_path: Path) -> None:
    """Against a real, full filesystem (an 8 MiB tmpfs, no mock): publishing is refused with
    RESOURCE_EXHAUSTED and the reason, reads of both topics keep working, writes resume by
    themselves once space returns with no hole in the sequence, and after kill -9 every
    acknowledged event is there and nothing of the refused batches."""
    data, ballast = small_fs / "data", small_fs / "ballast"
    port, metrics_port = _free_port(), _free_port()
    server_log = tmp_path / "server.log"  # not on the small filesystem
    proc = _serve(data, port, metrics_port, server_log)
    c = HotjoinClient(f"127.0.0.1:{port}", timeout=30)
    spec = select(None, None, subscriber="sel", delivery="pairs")  # every pair with r.key == s.key
    acked = {name: Acked(spec) for name in ("a", "b")}
    payload = b"p" * 120
    n = [0]

    def batch(k: int = 40) -> list[pb.Event]:
        out = []
        for _ in range(k):
            n[0] += 1
            out.append(event("RS"[n[0] % 2], f"e{n[0]}", float(n[0] % 5), 1.0, n[0], payload))
        return out

    def columns(topic: str, events: list[pb.Event]) -> pb.PublishResponse:
        return c.publish_columns(topic, ["R" if e.side == pb.SIDE_R else "S" for e in events],
                                 [e.id for e in events], [e.key for e in events],
                                 [e.value for e in events], [e.time for e in events],
                                 [e.payload for e in events])

    live: Owed = {}
    stream = None
    try:
        c.wait_ready(60)
        for name, a in acked.items():
            c.create_topic(name, lateness=LATENESS)
            assert c.subscribe(name, spec) == a.sid
            for _ in range(3):
                events = batch()
                a.took(events, c.publish(name, events))
        stream = c.listen("a", subscription_ids=[0], cursors={0: 0}, reconnect=False)

        def follow() -> None:
            with contextlib.suppress(CallError):
                for resp in stream:
                    if resp.kind == "match":
                        m = resp
                        live[(m.subscription_id, m.seq)] = (
                            m.sign, frozenset(m.pairs))

        follower = threading.Thread(target=follow, daemon=True)
        follower.start()

        # the disk fills up: both publish forms are refused with the reason, nothing applied
        _fill(ballast)
        seq_a = c.get_topic("a").seq
        assert seq_a == acked["a"].oracle.seq
        for attempt in (lambda: c.publish("a", batch()), lambda: columns("a", batch())):
            with pytest.raises(CallError) as x:
                attempt()
            assert x.value.code == "RESOURCE_EXHAUSTED"
            why = x.value.message
            assert "topic 'a': the disk is full (No space left on device)" in why, why
            assert "the batch was not applied; retry once there is space" in why
        # reads keep working: this topic's and the other's
        assert c.get_topic("a").seq == seq_a
        assert [s.subscription_id for s in c.list_subscriptions("a")] == [0]
        assert dict(c.stats("a").tuples) == acked["a"].stored()
        assert _listened(c, "a", 0) == acked["a"].owed
        assert c.get_topic("b").seq == acked["b"].oracle.seq
        assert _listened(c, "b", 0) == acked["b"].owed
        assert c.stats("b").seq == acked["b"].oracle.seq
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30).read().decode()
        assert (_metric(text, "hotjoin_storage_write_errors_total", topic="a", error="enospc") or 0) >= 2
        assert _metric(text, "hotjoin_data_dir_capacity_bytes") == 8 << 20
        assert (_metric(text, "hotjoin_data_dir_free_bytes") or 0) < 64 << 10

        # space returns: the next batches simply work, continuing the sequence without a hole
        ballast.unlink()
        events = batch()
        resp = c.publish("a", events)
        assert resp.statuses[0].seq == seq_a + 1
        acked["a"].took(events, resp)
        events = batch()
        acked["a"].took(events, columns("a", events), columnar=True)
        events = batch()
        acked["b"].took(events, c.publish("b", events))
        deadline = time.monotonic() + 30
        while live != acked["a"].owed and time.monotonic() < deadline:
            time.sleep(0.05)
        assert live == acked["a"].owed  # the live listener saw nothing of the refused batches
        stream.cancel()
        stream = None

        # kill -9 and restart on the same filesystem: every acknowledged event, nothing more
        proc.kill()
        proc.wait(30)
        proc = _serve(data, port, metrics_port, server_log)
        c.close()
        c = HotjoinClient(f"127.0.0.1:{port}", timeout=30)
        c.wait_ready(60)
        for name, a in acked.items():
            assert c.get_topic(name).seq == a.oracle.seq
            assert dict(c.stats(name).tuples) == a.stored()
            assert _listened(c, name, a.sid) == a.owed
        assert c.publish("a", batch()).statuses[0].seq == acked["a"].oracle.seq + 1
    finally:
        if stream is not None:
            stream.cancel()
        c.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        with contextlib.suppress(FileNotFoundError):
            ballast.unlink()


def test_a_checkpoint_whose_write_ends_at_once_is_reported_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``checkpoint_now`` answers whether it started one, even when the background write has
    already ended by the time it returns (a small topic on a busy machine)."""
    import hotjoin.server.durability as durability

    class AtOnce(threading.Thread):
        def start(self) -> None:  # the write runs to its end before checkpoint_now returns
            self.run()

    t = _loaded(tmp_path / "d")
    n0 = t.durability.checkpoints
    monkeypatch.setattr(durability.threading, "Thread", AtOnce)
    assert t.checkpoint_now()
    assert t.durability.checkpoints == n0 + 1
