"""Damage stays local: one owner per data directory, and a topic whose files do not verify is set
aside as damaged while the server and its other topics serve (docs/reference/persistence.md, "Damage and
repair"). A torn tail (the last write of a crash) is still cut silently; a complete record that
fails its checksum never is.

Every test starts a real in-process server on a temporary data directory, stops it, damages one
file of one topic as an operator's disk or hands might, and starts it again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_harness import engine_factory

from hotjoin.clients import CallError
from hotjoin.clients.client import HotjoinClient, band, event
from hotjoin.server.app import HotjoinServer
from hotjoin.server.datadir import DataDirInUse
from hotjoin.server.settings import DeliveryOptions

ROOT = Path(__file__).resolve().parents[2]
TOPICS = ("t1", "t2", "t3")


def start(data_dir: Path, **kw: object) -> HotjoinServer:
    kw.setdefault("engine_factory", engine_factory())
    return HotjoinServer(data_dir=data_dir, port=0, metrics_port=0, **kw).start()  # type: ignore[arg-type]


def fill(srv: HotjoinServer, n: int = 200) -> dict[str, int]:
    """Three topics, each with a subscription, ``n`` events in one batch and a listener's commit;
    returns each topic's seq."""
    seqs = {}
    with HotjoinClient(srv.target, timeout=30) as c:
        for t in TOPICS:
            c.create_topic(t, lateness=10)
            c.subscribe(t, band((-1, 1), subscriber="a", delivery="affected"))
            resp = c.publish(t, [event("R" if i % 2 else "S", f"e{i}", float(i % 7), 0.0, time=i)
                                 for i in range(n)])
            assert resp.accepted == n
            c.commit_cursors(t, subscriber="a", after_seq=2)
            seqs[t] = c.get_topic(t).seq
    return seqs


@pytest.fixture
def filled(data_dir: Path) -> Iterator[tuple[Path, dict[str, int]]]:
    srv = start(data_dir)
    try:
        seqs = fill(srv)
    finally:
        srv.stop(0)
    yield data_dir, seqs


def tdir(data_dir: Path, topic: str) -> Path:
    return data_dir / "topics" / topic


def overwrite(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def code_of(fn: object) -> tuple[str, str]:
    try:
        fn()  # type: ignore[operator]
    except CallError as e:
        return e.code, e.message
    raise AssertionError("the call succeeded")


def assert_serves(c: HotjoinClient, topic: str, seq: int) -> None:
    """``topic`` is intact (its seq) and takes a publish."""
    assert c.get_topic(topic).seq == seq
    resp = c.publish(topic, [event("S", f"more-{topic}", 1.0, 0.0, time=1000)])
    assert resp.accepted == 1 and resp.statuses[0].seq == seq + 1


def assert_damaged(srv: HotjoinServer, c: HotjoinClient, topic: str, file: str) -> str:
    """Every RPC on ``topic`` answers FAILED_PRECONDITION naming ``file``; ListTopics and
    /metrics name it. Returns the message."""
    calls = [lambda: c.get_topic(topic), lambda: c.stats(topic),
             lambda: c.publish(topic, [event("S", "x", 1.0, 0.0, time=5)]),
             lambda: c.subscribe(topic, band((0, 0))), lambda: c.delete_topic(topic),
             lambda: c.get_cursors(topic), lambda: list(c.list_subscriptions(topic)),
             lambda: next(iter(c.listen(topic, subscriber="a"))),
             lambda: c.create_topic(topic)]
    message = ""
    for call in calls:
        code, message = code_of(call)
        assert code == "FAILED_PRECONDITION", (code, message)
        assert "damaged" in message and file in message, message
    listed = {t.name: t for t in c.list_topics()}
    assert listed[topic].damaged and file in listed[topic].damaged
    assert all(not t.damaged for name, t in listed.items() if name != topic)
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    assert f'hotjoin_topic_damaged{{topic="{topic}"}} 1.0' in text
    return message


# ---- one owner per data directory ---------------------------------------------------------------

def test_a_second_server_on_the_data_directory_is_refused(data_dir: Path) -> None:
    srv = start(data_dir)
    try:
        with pytest.raises(DataDirInUse, match=f"process {os.getpid()}"):
            start(data_dir)
        with HotjoinClient(srv.target, timeout=30) as c:  # the first one is untouched
            c.create_topic("t")
            assert c.publish("t", [event("S", "s", 1.0, 0.0, time=1)]).accepted == 1
    finally:
        srv.stop(0)
    srv = start(data_dir)  # released by a clean stop
    srv.stop(0)


def test_hotjoin_serve_on_a_directory_in_use_exits_2_naming_the_holder(tmp_path: Path) -> None:
    data = tmp_path / "d"
    args = [str(Path(sys.executable).parent / "hotjoin"), "serve", "--data-dir", str(data),
            "--metrics-port", "-1"]
    first = subprocess.Popen([*args, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, cwd=tmp_path)
    try:
        line = first.stdout.readline()  # type: ignore[union-attr]
        assert "serving on" in line, line + first.stderr.read()  # type: ignore[union-attr]
        second = subprocess.run([*args, "--port", "0"], capture_output=True, text=True, timeout=60,
                                cwd=tmp_path)
        assert second.returncode == 2
        err = second.stderr.strip().splitlines()
        assert err and err[-1].startswith("hotjoin serve: error: data directory")
        assert f"process {first.pid}" in err[-1] and "Traceback" not in second.stderr
        first.kill()  # kill -9: the kernel frees the lock with the process
        first.wait(10)
        third = subprocess.Popen([*args, "--port", "0"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        try:
            assert "serving on" in third.stdout.readline()  # type: ignore[union-attr]
        finally:
            third.terminate()
            third.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(10)


# ---- damage stays local -------------------------------------------------------------------------

def test_a_checksum_failure_in_the_middle_of_a_log_sets_the_topic_aside(filled: tuple[Path, dict[str, int]]) -> None:
    data_dir, seqs = filled
    log = tdir(data_dir, "t1") / "log"
    size = log.stat().st_size
    overwrite(log, size // 2, b"\xa5" * 64)
    before = log.read_bytes()
    srv = start(data_dir)
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            message = assert_damaged(srv, c, "t1", str(log))
            assert "checksum mismatch" in message
            for t in ("t2", "t3"):
                assert_serves(c, t, seqs[t])
    finally:
        srv.stop(0)
    assert log.read_bytes() == before  # nothing was cut: the acknowledged records after it stay


def test_a_torn_tail_after_a_crash_is_cut_silently(filled: tuple[Path, dict[str, int]]) -> None:
    data_dir, seqs = filled
    d = tdir(data_dir, "t1")
    (d / "log.clean").unlink()  # as a kill -9 leaves it: no clean-stop mark
    size = (d / "log").stat().st_size
    with open(d / "log", "ab") as f:  # the first bytes of a frame that was never acknowledged
        f.write(b"\x40\x00\x00\x00\x12\x34\x56\x78partial")
    srv = start(data_dir)
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            for t in TOPICS:
                assert_serves(c, t, seqs[t])
    finally:
        srv.stop(0)
    assert (d / "log").stat().st_size > size  # cut back to `size`, then the new frame appended


def test_a_log_truncated_after_a_clean_stop_is_damage_not_a_torn_tail(filled: tuple[Path, dict[str, int]]) -> None:
    data_dir, seqs = filled
    log = tdir(data_dir, "t2") / "log"
    os.truncate(log, log.stat().st_size - 10)
    srv = start(data_dir)
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            message = assert_damaged(srv, c, "t2", str(log))
            assert "clean shutdown" in message
            assert_serves(c, "t1", seqs["t1"])
    finally:
        srv.stop(0)


def test_a_log_missing_committed_operations_is_damage(filled: tuple[Path, dict[str, int]]) -> None:
    """After a crash (no clean mark) a log cut back to before a committed cursor lost
    acknowledged operations: the cursor says so."""
    data_dir, seqs = filled
    d = tdir(data_dir, "t3")
    (d / "log.clean").unlink()
    os.truncate(d / "log", 0)
    srv = start(data_dir)
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            message = assert_damaged(srv, c, "t3", str(d / "log"))
            assert "committed cursor" in message
            assert_serves(c, "t2", seqs["t2"])
    finally:
        srv.stop(0)


@pytest.mark.parametrize("what", ["topic.json", "cursors", "matches"])
def test_damaged_metadata_cursors_or_match_log_set_the_topic_aside(
        filled: tuple[Path, dict[str, int]], what: str) -> None:
    data_dir, seqs = filled
    d = tdir(data_dir, "t2")
    if what == "topic.json":
        path = d / "topic.json"
        path.write_text('{"name": "t2", "lateness": ')
    elif what == "cursors":
        path = d / "cursors"
        overwrite(path, 12, b"\xff\xff")
    else:
        [path] = sorted((d / "matches").glob("*.seg"))
        overwrite(path, path.stat().st_size // 2, b"\x00" * 16)
    srv = start(data_dir)
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            assert_damaged(srv, c, "t2", str(path))
            for t in ("t1", "t3"):
                assert_serves(c, t, seqs[t])
    finally:
        srv.stop(0)


def test_an_unusable_checkpoint_is_set_aside_and_the_whole_log_replayed(data_dir: Path) -> None:
    """A checkpoint is derived data (the whole log is kept beside it): a damaged one loses
    nothing, so the topic serves from its log and the checkpoint is kept for inspection."""
    srv = start(data_dir, checkpoint_min_ops=1)
    with HotjoinClient(srv.target, timeout=30) as c:
        c.create_topic("t")
        c.subscribe("t", band((-1, 1), subscriber="a"))
        c.publish("t", [event("S", f"s{i}", float(i), 0.0, time=i) for i in range(50)])
        topic = srv.registry.get("t")
        deadline = time.monotonic() + 30
        while topic.durability.checkpoints < 1:  # the first one starts on the busy path
            assert time.monotonic() < deadline
            topic.checkpoint_now()
            time.sleep(0.05)
        c.publish("t", [event("R", "r", 3.0, 0.0, time=60)])
        seq = c.get_topic("t").seq
    srv.stop(0)
    ck = tdir(data_dir, "t") / "checkpoint"
    overwrite(ck, ck.stat().st_size - 20, b"\xee" * 8)
    srv = start(data_dir, checkpoint_min_ops=1)
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            assert_serves(c, "t", seq)
            assert dict(c.stats("t").tuples) == {"R": 1, "S": 51}
        assert list(ck.parent.glob("checkpoint.unusable-*"))  # kept for inspection
    finally:
        srv.stop(0)


def test_a_damaged_match_log_record_read_later_becomes_a_gap(data_dir: Path) -> None:
    """Older match-log segments are verified as they are read: a listener is told with a Gap,
    never handed corrupt data."""
    opts = DeliveryOptions(segment_bytes=1 << 10, retention_bytes=1 << 30)
    srv = start(data_dir, delivery=opts)
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            c.create_topic("t")
            c.subscribe("t", band((None, None), subscriber="a", delivery="affected"))
            c.publish("t", [event("S", "s", 0.0, 0.0, time=0)])
            for i in range(60):
                c.publish("t", [event("R", f"r{i}", 0.0, 0.0, time=i)])
    finally:
        srv.stop(0)
    segs = sorted((tdir(data_dir, "t") / "matches").glob("*.seg"))
    assert len(segs) >= 4
    overwrite(segs[0], 40, b"\xee" * 8)  # the oldest segment: only its headers are read at start
    srv = start(data_dir, delivery=opts)
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            got: list[str] = []
            for m in c.listen("t", subscriber="a", ignore_committed=True):
                kind = m.kind
                got.append(kind)
                if kind == "caught_up":
                    break
            assert got[0] == "gap" and got.count("match") + got.count("matches") > 0
    finally:
        srv.stop(0)


def test_unreadable_options_name_the_topic_by_its_directory(filled: tuple[Path, dict[str, int]]) -> None:
    data_dir, seqs = filled
    path = tdir(data_dir, "t3") / "topic.json"
    overwrite(path, 0, b"\x00\x01")
    srv = start(data_dir)
    try:
        [d] = srv.registry.damaged()
        assert d.name == "t3" and d.file == str(path) and d.options is None
        with HotjoinClient(srv.target, timeout=30) as c:
            assert_damaged(srv, c, "t3", str(path))
            assert_serves(c, "t1", seqs["t1"])
    finally:
        srv.stop(0)


# ---- inspect and repair -------------------------------------------------------------------------

def hotjoin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "hotjoin"), *args],
                          capture_output=True, text=True, timeout=120)


def test_inspect_and_repair_cut_a_damaged_log_and_keep_what_they_cut(
        filled: tuple[Path, dict[str, int]]) -> None:
    data_dir, seqs = filled
    srv = start(data_dir)  # add frames after the one that will be damaged
    with HotjoinClient(srv.target, timeout=30) as c:
        for i in range(3):
            c.publish("t1", [event("S", f"late-{i}", 1.0, 0.0, time=500 + i)])
    srv.stop(0)
    log = tdir(data_dir, "t1") / "log"
    original = log.read_bytes()
    damaged_at = original.index(b"e100")  # inside the 200-event frame
    overwrite(log, damaged_at, b"X")

    p = hotjoin("topic", "inspect", "t1", "--data-dir", str(data_dir))
    assert p.returncode == 1, p.stderr
    report = json.loads(p.stdout)
    [log_file] = [f for f in report["files"] if f["file"] == str(log)]
    assert log_file["damage"]["reason"].startswith("checksum mismatch")
    assert log_file["verifies_after_damage"]["ops"] == 3  # the three single publishes
    assert any("cut the log" in line for line in report["a_repair_would"])

    srv = start(data_dir)  # a repair needs the server stopped
    try:
        p = hotjoin("topic", "repair", "t1", "--data-dir", str(data_dir))
        assert p.returncode == 1 and f"process {os.getpid()}" in p.stderr and "Traceback" not in p.stderr
    finally:
        srv.stop(0)
    assert log.read_bytes()[:damaged_at] == original[:damaged_at]

    p = hotjoin("topic", "repair", "t1", "--data-dir", str(data_dir))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["repaired"] and "3 operations" in " ".join(out["done"])
    backup = Path(out["backup"])
    cut = (backup / "log.cut").read_bytes()
    assert log.read_bytes() + cut == original[:damaged_at] + b"X" + original[damaged_at + 1:]
    assert hotjoin("topic", "inspect", "t1", "--data-dir", str(data_dir)).returncode == 0

    srv = start(data_dir)
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            assert not any(t.damaged for t in c.list_topics())
            assert_serves(c, "t1", out["log_ends_at_seq"])
            assert out["log_ends_at_seq"] == 1  # the subscription; its cursor was clipped
            assert c.get_cursors("t1").cursors[0].committed_seq == 1
            for t in ("t2", "t3"):
                assert c.get_topic(t).seq == seqs[t]
    finally:
        srv.stop(0)


def test_repair_rewrites_unreadable_options_only_from_what_the_operator_gives(
        filled: tuple[Path, dict[str, int]]) -> None:
    data_dir, seqs = filled
    (tdir(data_dir, "t2") / "topic.json").write_text("{")
    p = hotjoin("topic", "repair", "t2", "--data-dir", str(data_dir))
    assert p.returncode == 2 and "--lateness" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    p = hotjoin("topic", "repair", "t2", "--data-dir", str(data_dir), "--lateness", "10")
    assert p.returncode == 0, p.stderr
    assert (Path(json.loads(p.stdout)["backup"]) / "topic.json").read_text() == "{"
    srv = start(data_dir)
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            assert c.get_topic("t2").lateness == 10
            assert_serves(c, "t2", seqs["t2"])
    finally:
        srv.stop(0)


@pytest.mark.parametrize("what", ["cursors", "matches"])
def test_repair_of_cursors_and_match_log(filled: tuple[Path, dict[str, int]], what: str) -> None:
    data_dir, seqs = filled
    d = tdir(data_dir, "t3")
    if what == "cursors":
        overwrite(d / "cursors", 12, b"\xff\xff")
    else:
        [seg] = sorted((d / "matches").glob("*.seg"))
        overwrite(seg, seg.stat().st_size // 2, b"\x00" * 16)
    p = hotjoin("topic", "repair", "t3", "--data-dir", str(data_dir))
    assert p.returncode == 0, p.stderr
    srv = start(data_dir)
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            assert_serves(c, "t3", seqs["t3"])
            first = next(iter(c.listen("t3", subscriber="a", ignore_committed=True)))
            if what == "matches":  # its messages were set aside: the listener is told
                assert first.kind == "gap"
            else:  # the only commit's record was cut: no committed position is left
                assert c.get_cursors("t3").cursors[0].committed_seq is None
    finally:
        srv.stop(0)


def test_repair_of_an_undamaged_topic_changes_nothing(filled: tuple[Path, dict[str, int]]) -> None:
    data_dir, _ = filled
    before = {p: p.read_bytes() for p in tdir(data_dir, "t1").rglob("*") if p.is_file()}
    p = hotjoin("topic", "repair", "t1", "--data-dir", str(data_dir))
    assert p.returncode == 0 and not json.loads(p.stdout)["repaired"]
    assert {p: p.read_bytes() for p in tdir(data_dir, "t1").rglob("*") if p.is_file()} == before
    assert hotjoin("topic", "repair", "nope", "--data-dir", str(data_dir)).returncode == 2
