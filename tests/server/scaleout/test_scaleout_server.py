"""The server with scale-out workers over real gRPC (docs/design.md#scale-out,
docs/how-to/scale-out.md).

The server's differential workload (``tests/server/test_server_e2e.py::run_workload``: random
subscribe / publish / delete / unsubscribe, every status and every delivered message compared with
the oracle the normal server is tested against) runs on a server whose topics match in 2 Ray
workers, once undisturbed and once with workers killed while it publishes. ``hotjoin serve
--workers 2`` is then run as a process, killed with SIGKILL and restarted on its data directory.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

ray = pytest.importorskip("ray")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "server"))

from test_server_e2e import run_workload  # noqa: E402

from hotjoin.clients.client import HotjoinClient, band, event  # noqa: E402
from hotjoin.proto import hotjoin_pb2 as pb  # noqa: E402
from hotjoin.server import metrics  # noqa: E402
from hotjoin.server.app import HotjoinServer  # noqa: E402
from hotjoin.server.scaleout.engine import ShardedEngine  # noqa: E402
from hotjoin.server.scaleout.factory import ShardedEngineFactory  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
CLI = "import sys; from hotjoin.cli.main import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.parametrize(("kind", "seed", "kill", "scheme"),
                         [("window", 2, False, "subscription"), ("band", 1, True, "subscription"),
                          ("select", 2, False, "key"), ("window", 3, True, "key"),
                          ("band", 4, True, "key"), ("select", 5, False, "key-replicated")])
def test_server_with_two_workers_equals_oracle(local_ray: Any, tmp_path: Path, kind: str, seed: int,
                                               kill: bool, scheme: str) -> None:
    srv = HotjoinServer(data_dir=tmp_path, port=0, buffer_capacity=100_000,
                        engine_factory=ShardedEngineFactory(2, scheme=scheme)).start()
    stop = threading.Event()
    kills: list[int] = []

    def killer() -> None:  # a worker crash every 2 s while the workload publishes
        while not stop.wait(2.0):
            try:
                eng = srv.registry.get("t").engine
            except Exception:
                continue
            if isinstance(eng, ShardedEngine) and eng.workers_info():
                eng.kill_worker(len(kills) % 2)
                kills.append(1)

    th = threading.Thread(target=killer, daemon=True)
    try:
        with HotjoinClient(srv.target) as c:
            if kill:
                th.start()
            run_workload(c, kind, seed)
            stop.set()
            if kill:
                th.join(10)
            st = c.stats("t")  # restarts a worker killed since the last call
            assert st.seq == c.get_topic("t").seq
            # the stats RPC and Prometheus show every worker's health, last seq and memory
            assert [w.worker for w in st.workers] == [0, 1] and all(w.healthy for w in st.workers)
            assert all(w.memory_bytes > 0 and w.seq <= st.seq for w in st.workers)
            held = [w.subscriptions for w in st.workers]  # key scheme: every worker holds all
            total = sum(st.subscriptions.values())
            assert (sum(held) == total) if scheme == "subscription" else (held == [total, total])
            assert st.scale_out_scheme == ("subscription-partitioned" if scheme == "subscription"
                                           else "key-partitioned")
            scrape = generate_latest(metrics.REGISTRY).decode()
            assert 'hotjoin_worker_healthy{topic="t",worker="1"} 1.0' in scrape
            assert 'hotjoin_worker_memory_bytes{topic="t",worker="0"}' in scrape
            # restarts are a counter, per worker the count the stats RPC gives
            assert "# TYPE hotjoin_worker_restarts_total counter" in scrape
            for w in st.workers:
                assert (f'hotjoin_worker_restarts_total{{topic="t",worker="{w.worker}"}} '
                        f"{float(w.restarts)}") in scrape
        eng = srv.registry.get("t").engine
        assert isinstance(eng, ShardedEngine)
        if kill:
            th.join(5)
            assert kills and eng.recoveries >= 1
    finally:
        stop.set()
        srv.stop(0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(data_dir: Path, port: int, scheme: str = "subscription") -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", CLI, "serve", "--data-dir", str(data_dir),
         "--port", str(port), "--metrics-port", "-1", "--workers", "2",
         "--scale-out-scheme", scheme],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _matches(c: HotjoinClient, sid: int) -> list[tuple[int, int, int]]:
    out = []
    for resp in c.listen("t", subscription_ids=[sid]):
        kind = resp.kind
        if kind == "match":
            out.append((resp.seq, resp.sign, resp.count))
        elif kind == "caught_up":
            break
    return out


@pytest.mark.parametrize("scheme", ["subscription", "key"])
def test_serve_workers_survives_front_end_kill(tmp_path: Path, scheme: str) -> None:
    """``hotjoin serve --workers 2``: statuses, seqs and deliveries as docs/design.md#semantics says, before and
    after a SIGKILL of the front end (its Ray workers go with it; the restart rebuilds them).
    With the key scheme the band join replicates S, and the restart does so again."""
    data, port = tmp_path / "data", _free_port()
    proc = _serve(data, port, scheme)
    try:
        with HotjoinClient(f"127.0.0.1:{port}") as c:
            c.wait_ready(60)
            c.create_topic("t", lateness=5)
            sid = c.subscribe("t", band((-1, 1)))  # seq 1
            st = c.publish("t", [event("R", "r0", 0.0, 0.0, time=10), event("S", "s0", 0.5, 0.0, time=11),
                                 event("S", "s0", 0.5, 0.0, time=11), event("S", "old", 0.5, 0.0, time=1)])
            assert [s.code for s in st.statuses] == ["OK", "OK", "DUPLICATE", "LATE"]
            assert [s.seq for s in st.statuses[:2]] == [2, 3]
            assert _matches(c, sid) == [(3, 1, 1)]
            stats = c.stats("t")
            assert stats.seq == 3 and stats.tuples["R"] == 1 and stats.tuples["S"] == 1
            assert [(w.worker, w.healthy) for w in stats.workers] == [(0, True), (1, True)]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        proc = _serve(data, port, scheme)
        with HotjoinClient(f"127.0.0.1:{port}") as c:
            c.wait_ready(60)
            st = c.publish("t", [event("S", "s1", -0.5, 0.0, time=12), event("R", "r0", 9.0, 0.0, time=12)])
            assert [(s.code, s.seq) for s in st.statuses] == [("OK", 4), ("DUPLICATE", 0)]
            assert c.delete_events("t", [pb.EventRef(side=pb.SIDE_R, id="r0")]).statuses[0].seq == 5
            # the -1 for 2 pairs shows the restarted workers rebuilt r0, s0 and s1 from the log
            # (messages from before the crash are the delivery hub's business, not checked here)
            assert [m for m in _matches(c, sid) if m[0] > 3] == [(4, 1, 1), (5, -1, 2)]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    time.sleep(0)


def test_compaction_and_restart_with_workers(local_ray: Any, tmp_path: Path) -> None:
    """A retention topic under --workers compacts its log (the facade gives the snapshot its
    tuples) and restarts from the compacted log to exactly the same state."""
    from test_server_compaction import _load, _state

    factory = ShardedEngineFactory(2)
    srv = HotjoinServer(data_dir=tmp_path, port=0, engine_factory=factory, compact_ratio=0).start()
    try:
        with HotjoinClient(srv.target) as c:
            _load(c)
        topic = srv.registry.get("t")
        before = _state(topic)
        assert topic.compact()
        assert _state(topic) == before
    finally:
        srv.stop(0)
    srv = HotjoinServer(data_dir=tmp_path, port=0, engine_factory=factory, compact_ratio=0).start()
    try:
        topic = srv.registry.get("t")
        assert isinstance(topic.engine, ShardedEngine) and _state(topic) == before
        with HotjoinClient(srv.target) as c:
            assert c.subscribe("t", band((0, 1))) == 6
            resp = c.publish("t", [event("R", "e9-9", 0.0, 0.0, time=200), event("R", "x", 0.0, 0.0, time=200)])
            assert [s.code for s in resp.statuses] == ["DUPLICATE", "OK"]
            assert resp.statuses[1].seq == before[0] + 2
    finally:
        srv.stop(0)


def test_key_scheme_restarts_from_its_log_and_from_a_compacted_log(local_ray: Any,
                                                                   tmp_path: Path) -> None:
    """A key-partitioned topic (select and window joins, retention, a band join subscribing
    mid-way, which replicates S) rebuilds exactly the same state from its log, then from its
    compacted log; duplicates are still found across keys."""
    from test_server_compaction import _state

    from hotjoin.clients.client import ref, select, window
    from hotjoin.server.scaleout.key_engine import KeyShardedEngine

    factory = ShardedEngineFactory(2, scheme="key")

    def server() -> HotjoinServer:
        return HotjoinServer(data_dir=tmp_path, port=0, engine_factory=factory,
                             compact_ratio=0).start()

    srv = server()
    try:
        with HotjoinClient(srv.target) as c:
            c.create_topic("t", lateness=3, retention=20)
            for i in range(4):
                c.subscribe("t", (select if i % 2 else window)(
                    (0, 5 + i), (None, None), *(() if i % 2 else (3,)), snapshot=i == 2,
                    delivery="affected" if i % 2 else "pairs", subscriber="a"))
            c.unsubscribe("t", 1)
            for k in range(10):
                if k == 6:  # S tuples stored so far are copied to both workers, then S goes to both
                    c.subscribe("t", band((-1, 1), delivery="affected", snapshot=True))
                c.publish("t", [event("R" if i % 2 else "S", f"e{k}-{i}", float(i % 5), float(i),
                                      time=k * 10 + i) for i in range(10)])
                c.delete_events("t", [ref("S", f"e{k}-0")])
        before = _state(srv.registry.get("t"))
        assert before[4], "tuples stored"
        assert srv.registry.get("t").engine._replicated is not None
    finally:
        srv.stop(0)
    for compact in (False, True):
        srv = server()
        try:
            topic = srv.registry.get("t")
            assert isinstance(topic.engine, KeyShardedEngine) and _state(topic) == before
            if compact:
                assert topic.compact()
        finally:
            srv.stop(0)
    srv = server()
    try:
        assert _state(srv.registry.get("t")) == before
        with HotjoinClient(srv.target) as c:
            resp = c.publish("t", [event("R", "e9-9", 3.0, 0.0, time=200),  # stored (key 4: worker 0)
                                   event("R", "x", 0.0, 0.0, time=200)])
            assert [s.code for s in resp.statuses] == ["DUPLICATE", "OK"]
            assert resp.statuses[1].seq == before[0] + 1
    finally:
        srv.stop(0)
