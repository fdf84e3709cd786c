"""Durability: restart rebuilds the same state; kill -9 loses no acknowledged event, applies none twice."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
from server_harness import engine_factory

from hotjoin.clients.client import HotjoinClient, band, event, ref
from hotjoin.matcher.model import BandJoin, Range
from hotjoin.matcher.model import Event as MEvent
from hotjoin.matcher.oracle import OracleEngine
from hotjoin.server.app import HotjoinServer
from hotjoin.server.export import export_topic

ROOT = Path(__file__).resolve().parents[2]


def test_restart_rebuilds_state_exactly(data_dir: Path) -> None:
    factory = engine_factory()
    # compact_ratio=0: the export below checks the full history (compaction: test_server_compaction)
    srv = HotjoinServer(data_dir=data_dir, port=0, engine_factory=factory, compact_ratio=0).start()
    oracle = OracleEngine(lateness=2, retention=10)
    with HotjoinClient(srv.target) as c:
        c.create_topic("t", lateness=2, retention=10)
        for i in range(4):
            c.subscribe("t", band((-1, i), subscriber="a", snapshot=i == 2, delivery="affected" if i % 2 else "pairs"))
            oracle.subscribe(BandJoin(Range(-1, i)), snapshot=i == 2)
        c.unsubscribe("t", 1)
        oracle.unsubscribe(1)
        evs = [("R" if i % 2 else "S", f"e{i}", float(i % 5), 0.0, i * 3) for i in range(20)]
        c.publish("t", [event(*e) for e in evs])
        for e in evs:
            oracle.publish(MEvent(*e))
        c.delete_events("t", [ref("R", "e19")])
        oracle.delete("R", "e19")
        before = (c.get_topic("t"), c.stats("t"), list(c.list_subscriptions("t")))
    srv.stop(0)
    srv = HotjoinServer(data_dir=data_dir, port=0, engine_factory=factory, compact_ratio=0).start()
    try:
        with HotjoinClient(srv.target) as c:
            after = (c.get_topic("t"), c.stats("t"), list(c.list_subscriptions("t")))
            assert after[0] == before[0]
            assert after[1].tuples == before[1].tuples
            assert dict(after[1].tuples) == {s: len(oracle.stored(s)) for s in "RS"}
            assert after[1].watermark == oracle.watermark
            assert after[2] == before[2]
            assert c.subscribe("t", band((0, 0))) == oracle.subscribe(BandJoin(Range(0, 0)))
            resp = c.publish("t", [event("S", "new", 17.0, 0.0, time=60)])
            out = oracle.publish(MEvent("S", "new", 17.0, 0.0, 60))
            assert resp.statuses[0].seq == oracle.seq
            late = c.publish("t", [event("S", "old", 0.0, 0.0, time=1)]).statuses[0]
            assert late.code == "LATE"
            expected = sorted((d.subscription_id, d.r_id, d.s_id) for d in out)
            got = []
            stream = c.listen("t", subscriber="a", from_latest=False)
            for m in stream:
                if m.kind == "caught_up":
                    break
                if m.kind == "match" and m.seq == oracle.seq:
                    got += [(m.subscription_id, r, s) for r, s in m.pairs]
                    if not m.pairs:
                        got += [(m.subscription_id, "?", "?")] * m.count
            stream.cancel()
            assert sorted(x for x in got if x[1] != "?") == [x for x in expected if x[0] != 3]
    finally:
        srv.stop(0)
    out_dir = data_dir / "export"
    counts = export_topic(data_dir, "t", out_dir)
    assert counts["events"] == 20 + 1 + 1 and counts["subscriptions"] == 5
    events = pq.read_table(out_dir / "events.parquet").to_pylist()
    assert [e["op"] for e in events].count("delete") == 1
    assert events[-1]["id"] == "new"
    subs = pq.read_table(out_dir / "subscriptions.parquet").to_pylist()
    assert subs[1]["unsubscribed_seq"] == 5 and subs[2]["snapshot"] is True
    assert subs[0]["b_lo"] == -1.0 and subs[0]["a_lo"] is None and subs[1]["delivery"] == "affected"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("serve_proc.py")), "--data-dir", str(data_dir), "--port", str(port),
         "--metrics-port", "-1"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    return proc


def test_kill9_during_streaming_publish(data_dir: Path) -> None:
    port = _free_port()
    proc = _start(data_dir, port)
    c = HotjoinClient(f"127.0.0.1:{port}")
    try:
        c.wait_ready(30)
        c.create_topic("t", lateness=10**9)
        c.subscribe("t", band((-1, 1)))
        acked: list[str] = []
        sent: list[str] = []
        stop = threading.Event()

        def publish() -> None:
            pub = c.publisher("t", batch_size=50, max_in_flight=4)
            i = 0
            try:
                while not stop.is_set():
                    batch = [event("R" if k % 2 else "S", f"e{i + k}", float(k % 7), 0.0, time=i + k)
                             for k in range(50)]
                    sent.extend(e.id for e in batch)
                    fut = pub.publish_batch(batch)
                    fut.add_done_callback(
                        lambda f, ids=[e.id for e in batch]: acked.extend(ids) if f.exception() is None else None
                    )
                    i += 50
            except Exception:
                pass

        th = threading.Thread(target=publish, daemon=True)
        th.start()
        deadline = time.monotonic() + 20
        while len(acked) < 2000 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        stop.set()
        th.join(10)
        n_acked = len(acked)
        assert n_acked >= 2000
    finally:
        c.close()
        if proc.poll() is None:
            proc.kill()
    proc = _start(data_dir, port)
    try:
        with HotjoinClient(f"127.0.0.1:{port}") as c2:
            c2.wait_ready(30)
            topic = c2.get_topic("t")
            st = c2.stats("t")
            stored = st.tuples["R"] + st.tuples["S"]
            assert stored >= n_acked, "an acknowledged event was lost"
            assert topic.seq == stored + 1, "an event was applied twice (or the sequence diverged)"
            # Every acknowledged event is stored: republishing it is a duplicate.
            ids = acked[:n_acked]
            for i in range(0, len(ids), 5000):
                chunk = [event("R" if int(x[1:]) % 2 else "S", x, 0.0, 0.0, time=10**6) for x in ids[i:i + 5000]]
                codes = {s.code for s in c2.publish("t", chunk).statuses}
                assert codes == {"DUPLICATE"}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
