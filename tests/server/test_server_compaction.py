"""Log compaction: restart from a compacted log rebuilds exactly the same state; a crash during
compaction leaves either the old or the new log, never a broken one."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from server_harness import engine_factory

from hotjoin.clients.client import HotjoinClient, band, event, ref
from hotjoin.matcher.model import Event as MEvent
from hotjoin.server import snapshot
from hotjoin.server.app import HotjoinServer
from hotjoin.server.export import export_topic
from hotjoin.server.log import MAGIC
from hotjoin.server.topic import Topic

ROOT = Path(__file__).resolve().parents[2]


def _state(topic: Topic) -> tuple[Any, ...]:
    """Everything a restart must reproduce: clock, next id, subscriptions, tuples with seqs."""
    with topic._lock:
        st = snapshot.capture(topic.engine, topic.book.meta, topic.lateness)
    tuples = sorted(
        (t.side, i, k, v, tm, s, p)
        for t in st.tuples
        for i, k, v, tm, s, p in zip(t.ids, t.keys.tolist(), t.values.tolist(), t.times.tolist(),
                                     t.seqs.tolist(), t.payloads, strict=True)
    )
    subs = sorted((sid, repr(sub), meta) for sid, sub, meta in st.subs)
    return st.seq, st.max_time, st.next_sid, subs, tuples, topic.engine.watermark


def _server(data_dir: Path, **kw: Any) -> HotjoinServer:
    return HotjoinServer(data_dir=data_dir, port=0, engine_factory=engine_factory(), **kw).start()


def _load(c: HotjoinClient) -> None:
    c.create_topic("t", lateness=3, retention=20)
    for i in range(6):
        c.subscribe("t", band((-1, i), subscriber="a", snapshot=i == 2,
                              delivery="affected" if i % 2 else "pairs"))
    c.unsubscribe("t", 1)
    for k in range(10):
        c.publish("t", [event("R" if i % 2 else "S", f"e{k}-{i}", float(i % 5), float(i), time=k * 10 + i,
                              payload=b"p%d" % i) for i in range(10)])
        c.delete_events("t", [ref("S", f"e{k}-0")])
    c.unsubscribe("t", 5)  # the last id: a restart must not hand out id 5 again


def test_restart_from_compacted_log_rebuilds_exactly_the_same_state(data_dir: Path) -> None:
    srv = _server(data_dir, compact_ratio=0)
    with HotjoinClient(srv.target) as c:
        _load(c)
    topic = srv.registry.get("t")
    before = _state(topic)
    log_path = data_dir / "topics" / "t" / "log"
    size_before = log_path.stat().st_size
    assert topic.compact()
    assert log_path.read_bytes().startswith(MAGIC) and log_path.stat().st_size < size_before
    assert _state(topic) == before
    counts = export_topic(data_dir, "t", data_dir / "x")
    assert counts["subscriptions"] == 4 and counts["events"] == len(before[4])
    assert json.loads((data_dir / "x" / "topic.json").read_text())["compacted_at_seq"] == before[0]
    with HotjoinClient(srv.target) as c:  # appends after the snapshot
        c.publish("t", [event("S", "late1", 2.0, 0.0, time=105), event("R", "late2", 1.0, 0.0, time=106)])
        c.subscribe("t", band((0, 3), subscriber="b"))
        c.delete_events("t", [ref("R", "late2")])
    before = _state(topic)
    srv.stop(0)
    srv = _server(data_dir, compact_ratio=0)
    try:
        topic = srv.registry.get("t")
        assert _state(topic) == before
        with HotjoinClient(srv.target) as c:
            assert c.subscribe("t", band((0, 1))) == 7
            resp = c.publish("t", [event("R", "e9-9", 0.0, 0.0, time=200), event("R", "x", 0.0, 0.0, time=200)])
            assert [s.code for s in resp.statuses] == ["DUPLICATE", "OK"]
            assert resp.statuses[1].seq == before[0] + 2
    finally:
        srv.stop(0)


def test_compaction_triggers_on_ratio_and_at_clean_shutdown(data_dir: Path) -> None:
    srv = _server(data_dir, compact_min_bytes=500, compact_ratio=3.0)
    with HotjoinClient(srv.target) as c:
        c.create_topic("t", lateness=0, retention=5)
        c.subscribe("t", band((-1, 1), subscriber="a"))
        for k in range(40):
            c.publish("t", [event("R", f"r{k}", 1.0, 0.0, time=k)])
    topic = srv.registry.get("t")
    deadline = time.monotonic() + 10
    while topic.durability.compactions == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert topic.durability.compactions >= 1
    assert topic.durability.log_ops < 3.0 * (1 + 6) + 40
    with HotjoinClient(srv.target) as c:
        c.publish("t", [event("R", f"z{k}", 1.0, 0.0, time=100 + k) for k in range(20)])
    before = _state(topic)
    srv.stop(0)  # clean shutdown compacts: 20 ops appended, 6 tuples live
    assert topic.durability.compactions >= 2
    srv = _server(data_dir)
    try:
        assert _state(srv.registry.get("t")) == before
    finally:
        srv.stop(0)


def test_crash_before_the_rename_leaves_the_old_log(data_dir: Path) -> None:
    srv = _server(data_dir, compact_ratio=0)
    with HotjoinClient(srv.target) as c:
        _load(c)
    topic = srv.registry.get("t")
    before = _state(topic)
    with topic._lock:
        head = snapshot.snapshot_bytes(snapshot.capture(topic.engine, topic.book.meta, topic.lateness))
    srv.stop(0)
    tmp = data_dir / "topics" / "t" / "log.compact"
    tmp.write_bytes(head[: len(head) // 2])  # killed while writing the snapshot
    srv = _server(data_dir, compact_ratio=0)
    try:
        assert _state(srv.registry.get("t")) == before
        assert not tmp.exists()
    finally:
        srv.stop(0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("serve_proc.py")), "--data-dir", str(data_dir),
         "--port", str(port), "--metrics-port", "-1", "--compact-min-bytes", "0", "--compact-ratio", "1.5"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def _events(start: int, n: int) -> list[Any]:
    return [event("R" if i % 2 else "S", f"e{i}", float(i % 7), 0.0, time=i) for i in range(start, start + n)]


def test_kill9_during_compactions_restarts_to_a_consistent_prefix(data_dir: Path) -> None:
    """Publish with retention and constant compaction, kill -9 three times; after each restart the
    state equals the reference engine after exactly the operations the log holds."""
    port = _free_port()
    for _round in range(3):
        proc = _start(data_dir, port)
        try:
            with HotjoinClient(f"127.0.0.1:{port}", timeout=30) as c:
                c.wait_ready(30)
                if _round == 0:
                    c.create_topic("t", lateness=0, retention=30)
                    c.subscribe("t", band((-1, 1)))
                acked = threading.Event()
                stop = threading.Event()
                sent = c.get_topic("t").seq - 1  # resume right after the last durable event

                def publish(c: HotjoinClient = c, start: int = sent, stop: threading.Event = stop,
                            acked: threading.Event = acked) -> None:
                    try:
                        with c.publisher("t", batch_size=20, max_in_flight=2) as pub:
                            i = start
                            while not stop.is_set():
                                fut = pub.publish_batch(_events(i, 20))
                                i += 20
                                if i - start >= 600:
                                    fut.add_done_callback(lambda f, acked=acked: acked.set())
                    except Exception:
                        pass

                th = threading.Thread(target=publish, daemon=True)
                th.start()
                assert acked.wait(30)
                time.sleep(0.05 * _round)
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(10)
                stop.set()
                th.join(10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    log = (data_dir / "topics" / "t" / "log").read_bytes()
    assert log.startswith(MAGIC), "no compaction happened"
    srv = _server(data_dir, compact_ratio=0)
    try:
        topic = srv.registry.get("t")
        got = _state(topic)
        # Reference: the same operations in the same order, up to the durable seq.
        from hotjoin.matcher.model import BandJoin, Range

        ref_engine = engine_factory()(lateness=0, retention=30, strategy={"band": "BJ-SSI"})
        ref_engine.subscribe(BandJoin(b=Range(-1, 1)))
        i = 0
        while ref_engine.seq < got[0]:
            ref_engine.publish_many([MEvent("R" if i % 2 else "S", f"e{i}", float(i % 7), 0.0, i)],
                                    match=False)
            i += 1
        with topic._lock:
            ref_topic = type("T", (), {"engine": ref_engine, "book": topic.book, "lateness": 0,
                                        "_lock": threading.Lock()})
            want = _state(ref_topic)  # type: ignore[arg-type]
        assert got[:2] == want[:2] and got[4:] == want[4:] and got[0] > 1800
    finally:
        srv.stop(0)
