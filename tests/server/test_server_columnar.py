"""The columnar publish form (PublishRequest.columns) against the per-event form, end to end.

- A random workload (select, band and window subscriptions in PAIRS and AFFECTED mode; lateness,
  retention, out-of-order times, duplicates, late and invalid events) published as columns gives
  exactly the statuses, sequence numbers and deliveries of the same events published one message
  per event, through a real server (hypothesis).
- A batch mixing good and bad events: one status per bad event, nothing else changes.
- kill -9 of a server whose log holds columnar frames: the restart rebuilds the same state.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_harness import engine_factory

from hotjoin.clients import CallError
from hotjoin.clients.client import HotjoinClient, MatchColumns, band, event, select, window
from hotjoin.matcher.errors import LateEventError
from hotjoin.matcher.model import BandJoin, Range, SelectJoin
from hotjoin.matcher.model import Event as MEvent
from hotjoin.matcher.oracle import OracleEngine
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.app import HotjoinServer
from hotjoin.server.export import export_topic

ROOT = Path(__file__).resolve().parents[2]
SIDE = {"R": pb.SIDE_R, "S": pb.SIDE_S}


def _specs() -> list[pb.SubscriptionSpec]:
    out = []
    for i, d in enumerate(("pairs", "affected")):
        out.append(select((0, 5), (2, 9), delivery=d, subscriber="x"))
        out.append(band((-1.5, 1.0 + i), delivery=d, subscriber="x"))
        out.append(window((None, None), (1, 8), w=3, delivery=d, subscriber="x"))
    return out


Row = tuple[str, str, float, float, int]  # side, id, key, value, time

_row = st.tuples(
    st.sampled_from(["R", "S", "R", "S", "?"]),
    st.integers(0, 30).map(lambda k: f"e{k}"),
    st.one_of(st.integers(0, 4).map(float), st.just(math.nan)),
    st.integers(0, 10).map(float),
    st.integers(0, 40),
)


def _per_event(c: HotjoinClient, topic: str, batch: list[Row]) -> list[tuple[str, int, str]]:
    evs = [pb.Event(side=SIDE.get(s, 7), id=i, key=k, value=v, time=t) for s, i, k, v, t in batch]  # type: ignore[arg-type]
    resp = c.publish(topic, evs)
    return [(st_.code, st_.seq, st_.id) for st_ in resp.statuses]


def _columnar(c: HotjoinClient, topic: str, batch: list[Row]) -> list[tuple[str, int, str]]:
    sides = np.array([{"R": 0, "S": 1}.get(r[0], 5) for r in batch])
    resp = c.publish_columns(topic, sides, [r[1] for r in batch], [r[2] for r in batch],
                             [r[3] for r in batch], np.array([r[4] for r in batch], dtype=np.int64))
    bad = {s.index: s for s in resp.statuses}
    assert len(bad) == resp.rejected and resp.accepted + resp.rejected == len(batch)
    out, seq = [], resp.first_seq
    for i, r in enumerate(batch):
        if i in bad:
            out.append((bad[i].code, 0, bad[i].id))
        else:
            out.append(("OK", seq, r[1]))
            seq += 1
    assert resp.accepted == 0 or seq - 1 == resp.last_seq
    return out


def _deliveries(c: HotjoinClient, topic: str, columnar: bool) -> list[tuple[Any, ...]]:
    """Every message buffered for subscriber x, normalised (both listen forms)."""
    out: list[tuple[Any, ...]] = []
    if columnar:
        stream = c.listen_columns(topic, subscriber="x")
        for m in stream:
            if isinstance(m, MatchColumns):
                for k in range(len(m)):
                    pairs = sorted(zip(m.r_id[m.pair_row == k].tolist(), m.s_id[m.pair_row == k].tolist(),
                                       strict=True))
                    out.append((int(m.subscription_id[k]), int(m.seq[k]), int(m.sign[k]), int(m.count[k]),
                                m.event_side[k], m.event_id[k], tuple(pairs)))
            elif m.kind == "caught_up":
                break
            else:
                out.append((m.kind,))
        return sorted(out)
    for resp in c.listen(topic, subscriber="x"):
        kind = resp.kind
        if kind == "caught_up":
            break
        assert kind == "match", kind
        m = resp
        out.append((m.subscription_id, m.seq, m.sign, m.count, m.event.side, m.event.id,
                    tuple(sorted(m.pairs))))
    return sorted(out)


def _compare(srv: HotjoinServer, name: str, batches: list[list[Row]], lateness: int,
             retention: int | None) -> int:
    """Publish ``batches`` to two fresh topics, per event and as columns; statuses, seqs, state
    and every delivery must be equal. Returns the number of delivered messages."""
    a, b = f"ev-{name}", f"col-{name}"
    with HotjoinClient(srv.target, timeout=30) as c:
        for t in (a, b):
            c.create_topic(t, lateness=lateness, retention=retention)
            c.subscribe_many(t, _specs())
        for batch in batches:
            assert _columnar(c, b, batch) == _per_event(c, a, batch)
        assert c.get_topic(a).seq == c.get_topic(b).seq
        sa, sb = c.stats(a), c.stats(b)
        assert dict(sa.tuples) == dict(sb.tuples) and sa.watermark == sb.watermark
        got = _deliveries(c, b, True)
        assert got == _deliveries(c, a, False)
        for t in (a, b):
            c.delete_topic(t)
    return len(got)


def test_columnar_equals_per_event(data_dir: Path) -> None:
    """Hypothesis over random workloads, then one larger seeded workload, on one server."""
    srv = HotjoinServer(data_dir=data_dir, port=0, buffer_capacity=100_000, engine_factory=engine_factory(),
                        compact_ratio=0).start()
    counter = iter(range(10**9))

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(batches=st.lists(st.lists(_row, min_size=1, max_size=16), min_size=1, max_size=5),
           lateness=st.integers(0, 20), retention=st.one_of(st.none(), st.integers(0, 30)))
    def check(batches: list[list[Row]], lateness: int, retention: int | None) -> None:
        _compare(srv, str(next(counter)), batches, lateness, retention)

    try:
        check()
        rng = np.random.default_rng(11)
        rows: list[Row] = []
        for i in range(600):
            side = "RS"[int(rng.integers(0, 2))] if i % 97 else "?"
            eid = f"e{int(rng.integers(0, 400))}"  # some duplicates, within and across batches
            key = float(rng.integers(0, 8)) if i % 89 else math.nan
            rows.append((side, eid, key, float(rng.integers(0, 10)), i // 3 + int(rng.integers(-6, 6))))
        n = _compare(srv, "seeded", [rows[i:i + 50] for i in range(0, 600, 50)], lateness=4, retention=40)
        assert n > 500  # a workload with real output
    finally:
        srv.stop(0)


def test_columnar_matches_the_oracle(client: HotjoinClient) -> None:
    """Both forms agree with each other above; here the columnar one agrees with the oracle."""
    client.create_topic("t", lateness=3)
    client.subscribe_many("t", [band((-1, 1), subscriber="x"), select((0, 9), (0, 9), subscriber="x")])
    oracle = OracleEngine(lateness=3)
    oracle.subscribe_many([BandJoin(b=Range(-1, 1)), SelectJoin(a=Range(0, 9), c=Range(0, 9))])
    rng = np.random.default_rng(3)
    n = 200
    sides = rng.integers(0, 2, n)
    keys = rng.integers(0, 6, n).astype(float)
    values = rng.integers(0, 10, n).astype(float)
    times = rng.integers(0, 60, n)
    ids = [f"e{i}" for i in range(n)]
    resp = client.publish_columns("t", sides, ids, keys, values, times)
    expected = []
    seqs = []
    for i in range(n):
        try:
            expected += oracle.publish(MEvent("RS"[sides[i]], ids[i], keys[i], values[i], int(times[i])))
            seqs.append(oracle.seq)
        except Exception:  # noqa: BLE001 - late: rejected by both
            pass
    assert resp.accepted == len(seqs) and (resp.first_seq, resp.last_seq) == (seqs[0], seqs[-1])
    assert {s.code for s in resp.statuses} <= {"LATE"}
    got = _pairs_until_caught_up(client)
    assert sorted(got) == sorted((d.subscription_id, d.r_id, d.s_id) for d in expected)


def _pairs_until_caught_up(c: HotjoinClient) -> list[tuple[int, str, str]]:
    got: list[tuple[int, str, str]] = []
    for m in c.listen_columns("t", subscriber="x"):
        if not isinstance(m, MatchColumns):
            assert m.kind == "caught_up"
            return got
        for j in range(len(m.r_id)):
            got.append((int(m.subscription_id[m.pair_row[j]]), m.r_id[j], m.s_id[j]))
    return got


def test_mixed_batch_rejects_only_the_bad_events(client: HotjoinClient) -> None:
    client.create_topic("t", lateness=0)
    client.subscribe("t", band((-1, 1), subscriber="x", delivery="affected"))
    client.publish("t", [event("S", "s0", 1.0, 0.0, time=10)])
    before = (client.get_topic("t").seq, dict(client.stats("t").tuples))
    sides = np.array(["R", "R", "Q", "S", "R", "R", "S"], dtype=object)
    ids = ["r1", "r2", "r3", "s0", "r4", "r1", "x" * 2000]
    keys = [1.0, math.inf, 1.0, 1.0, 1.0, 1.0, 1.0]
    times = [10, 10, 10, 11, 5, 12, 12]
    resp = client.publish_columns("t", sides, ids, keys, [0.0] * 7, times)
    bad = {s.index: (s.code, s.id) for s in resp.statuses}
    assert bad == {1: ("INVALID", "r2"), 2: ("INVALID", "r3"), 3: ("DUPLICATE", "s0"),
                   4: ("LATE", "r4"), 5: ("DUPLICATE", "r1"), 6: ("INVALID", "x" * 2000)}
    assert all(s.reason for s in resp.statuses)
    assert (resp.accepted, resp.rejected) == (1, 6)
    assert resp.first_seq == resp.last_seq == before[0] + 1
    after = client.stats("t")
    assert client.get_topic("t").seq == before[0] + 1
    assert after.tuples["R"] == before[1].get("R", 0) + 1 and after.tuples["S"] == before[1]["S"]
    # the one accepted event (r1) formed its pair; nothing else reached the listener
    assert _rows(client) == [(0, before[0] + 1, 1, 1, "R", "r1")]


def _rows(c: HotjoinClient) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for m in c.listen_columns("t", subscriber="x"):
        if not isinstance(m, MatchColumns):
            return out
        out += list(zip(m.subscription_id.tolist(), m.seq.tolist(), m.sign.tolist(), m.count.tolist(),
                        m.event_side.tolist(), m.event_id.tolist(), strict=True))
    return out


def test_bad_requests_change_nothing(client: HotjoinClient) -> None:
    client.create_topic("t")
    cols = pb.EventColumns(sides=bytes([1, 2]), ids=["a", "b"], keys=[1.0], values=[0.0, 0.0])
    with pytest.raises(CallError) as e:
        client.publishing.Publish(pb.PublishRequest(topic="t", columns=cols))
    assert e.value.code == "INVALID_ARGUMENT" and "keys has 1" in e.value.message
    both = pb.PublishRequest(topic="t", events=[event("R", "r", 0.0, 0.0, time=1)],
                             columns=pb.EventColumns(sides=bytes([1]), ids=["a"], keys=[1.0], values=[0.0]))
    with pytest.raises(CallError) as e:
        client.publishing.Publish(both)
    assert e.value.code == "INVALID_ARGUMENT" and "not both" in e.value.message
    assert client.get_topic("t").seq == 0


def test_server_assigned_ids_and_clock(client: HotjoinClient) -> None:
    client.create_topic("t")
    t0 = time.time_ns() // 1_000_000
    resp = client.publish_columns("t", ["R", "S"], ["", "s"], [1.0, 1.0], [0.0, 0.0])
    assert resp.accepted == 2 and list(resp.assigned.items()) == [(0, "auto-1")]
    again = client.publish_columns("t", ["R"], ["auto-1"], [1.0], [0.0], [t0 + 10**6])
    assert [s.code for s in again.statuses] == ["DUPLICATE"]
    assert client.stats("t").watermark >= t0


def test_stream_publisher_columns_and_export(data_dir: Path) -> None:
    srv = HotjoinServer(data_dir=data_dir, port=0, engine_factory=engine_factory(), compact_ratio=0).start()
    try:
        with HotjoinClient(srv.target) as c:
            c.create_topic("t", lateness=5)
            with c.publisher("t", max_in_flight=2) as pub:
                futs = [pub.publish_columns(["R", "S"] * 50, [f"e{k}-{i}" for i in range(100)],
                                            np.arange(100) % 7, np.zeros(100), np.arange(100) + 100 * k)
                        for k in range(5)]
                pub.publish(event("R", "single", 0.0, 0.0, time=1000))
            assert [f.result().accepted for f in futs] == [100] * 5
            assert pub.accepted == 501 and pub.rejected == 0
    finally:
        srv.stop(0)
    counts = export_topic(data_dir, "t", data_dir / "export")
    assert counts["events"] == 501
    import pyarrow.parquet as pq

    ev = pq.read_table(data_dir / "export" / "events.parquet").to_pydict()
    assert ev["seq"] == list(range(1, 502)) and ev["id"][:2] == ["e0-0", "e0-1"] and ev["side"][:2] == ["R", "S"]


# ---- kill -9 -------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("serve_proc.py")), "--data-dir", str(data_dir),
         "--port", str(port), "--metrics-port", "-1"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.parametrize("retention", [50, None])
def test_kill9_with_columnar_frames_restarts_exactly(data_dir: Path, retention: int | None) -> None:
    """Columnar batches (with late events in them) streamed until kill -9. A batch is one frame, so
    the restarted topic holds exactly a prefix of the sent batches, covering every acknowledged
    one: the oracle replays that prefix and the restarted state (seq, tuples, watermark, the
    pairs of the next event, duplicates on republishing) must be exactly the oracle's. With
    retention the frames replay through ``publish_batch``; without, they are loaded as columns
    at once."""
    port = _free_port()
    proc = _start(data_dir, port)
    oracle = OracleEngine(lateness=5, retention=retention)
    sent: list[list[tuple[str, str, float, float, int]]] = []
    n_acked = [0]
    c = HotjoinClient(f"127.0.0.1:{port}")
    try:
        c.wait_ready(30)
        c.create_topic("t", lateness=5, retention=retention)
        c.subscribe("t", band((-1, 1), subscriber="x"))
        oracle.subscribe(BandJoin(b=Range(-1, 1)))
        stop = threading.Event()
        rng = np.random.default_rng(7)

        def publish() -> None:
            pub = c.publisher("t", max_in_flight=4)
            k = 0
            try:
                while not stop.is_set():
                    n = 40
                    sides = rng.integers(0, 2, n)
                    rows = [("RS"[sides[i]], f"e{k}-{i}", float(rng.integers(0, 9)), 0.0,
                             k * 10 + int(rng.integers(-8, 8))) for i in range(n)]  # out of order: some late
                    sent.append(rows)
                    fut = pub.publish_columns(sides, [r[1] for r in rows], [r[2] for r in rows],
                                              [r[3] for r in rows], [r[4] for r in rows])

                    def done(f: Any, k: int = k) -> None:
                        if f.exception() is None:
                            n_acked[0] = max(n_acked[0], k + 1)

                    fut.add_done_callback(done)
                    k += 1
            except Exception:  # noqa: BLE001 - the server is killed under it
                pass

        th = threading.Thread(target=publish, daemon=True)
        th.start()
        deadline = time.monotonic() + 30
        while n_acked[0] < 50 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        stop.set()
        th.join(10)
        assert n_acked[0] >= 50
    finally:
        c.close()
        if proc.poll() is None:
            proc.kill()
    proc = _start(data_dir, port)
    try:
        with HotjoinClient(f"127.0.0.1:{port}") as c2:
            c2.wait_ready(30)
            seq = c2.get_topic("t").seq
            replayed = 0
            for rows in sent:
                if oracle.seq >= seq:
                    break
                for r in rows:
                    with contextlib.suppress(LateEventError):  # late, as the server said
                        oracle.publish(MEvent(*r))
                replayed += 1
            assert oracle.seq == seq, "the restarted log is not a prefix of whole batches"
            assert replayed >= n_acked[0], "an acknowledged batch was lost"
            st_ = c2.stats("t")
            assert dict(st_.tuples) == {s: len(oracle.stored(s)) for s in "RS"}
            assert st_.watermark == oracle.watermark
            t = oracle.watermark + 5  # the max time so far: moves nothing
            resp = c2.publish_columns("t", ["S"], ["probe"], [4.0], [0.0], [t])
            out = oracle.publish(MEvent("S", "probe", 4.0, 0.0, t))
            assert resp.first_seq == oracle.seq and out
            got = []
            for m in c2.listen_columns("t", subscriber="x", from_latest=False):
                if not isinstance(m, MatchColumns):
                    if m.kind == "caught_up":
                        break
                    continue
                sel = m.seq[m.pair_row] == oracle.seq
                got += list(zip(m.r_id[sel].tolist(), m.s_id[sel].tolist(), strict=True))
            assert sorted(got) == sorted((d.r_id, d.s_id) for d in out)
            stored = [(s, i) for s in "RS" for i in oracle.stored(s)]
            resp = c2.publish_columns("t", [s for s, _ in stored], [i for _, i in stored], [0.0] * len(stored),
                                      [0.0] * len(stored), [t] * len(stored))
            assert {s.code for s in resp.statuses} == {"DUPLICATE"} and resp.accepted == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


def test_compaction_and_restart_with_columnar_frames(data_dir: Path) -> None:
    """Columnar frames before and after a compaction; a clean restart (log replay, no checkpoint)
    rebuilds the same clock, tuples (with seqs and payloads) and subscriptions."""
    from test_server_compaction import _state

    def start() -> HotjoinServer:
        return HotjoinServer(data_dir=data_dir, port=0, engine_factory=engine_factory(), compact_ratio=0,
                             checkpoint_min_ops=0).start()

    srv = start()
    with HotjoinClient(srv.target) as c:
        c.create_topic("t", lateness=3, retention=20)
        c.subscribe_many("t", [band((-1, 1), subscriber="a"), window((0, 9), (0, 9), w=5, subscriber="a")])
        for k in range(6):
            n = 12
            c.publish_columns("t", np.arange(n) % 2, [f"e{k}-{i}" for i in range(n)], (np.arange(n) % 4) * 1.0,
                              np.arange(n) % 10, k * 10 + np.arange(n) % 7, [b"p%d" % i for i in range(n)])
    topic = srv.registry.get("t")
    assert topic.compact()
    with HotjoinClient(srv.target) as c:  # columnar frames after the snapshot, one with a late event
        resp = c.publish_columns("t", ["R", "S", "R"], ["a1", "a2", "a3"], [1.0, 1.0, 2.0], [0.0, 0.0, 0.0],
                                 [70, 71, 1])
        assert [s.code for s in resp.statuses] == ["LATE"] and resp.accepted == 2
    before = _state(topic)
    srv.stop(0)
    srv = start()
    try:
        assert _state(srv.registry.get("t")) == before
    finally:
        srv.stop(0)
