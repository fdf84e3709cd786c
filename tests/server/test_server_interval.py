"""Interval events and interval joins through the server, against the brute-force oracle.

Every Allen relation and ISEQL join, raw endpoint ranges, point and interval events, mixed with
band, select and window subscriptions on one topic; published one at a time and as columns,
with deletes and rejected events; compared with ``OracleEngine`` after a clean restart, after
compaction (the log's snapshot) and a checkpoint, and after a kill -9 (docs/design.md,
"Interval joins"; docs/reference/persistence.md).
"""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from server_harness import engine_factory

from hotjoin.clients.client import HotjoinClient, event, ref
from hotjoin.clients.errors import InvalidArgument
from hotjoin.matcher.model import (
    ALLEN_RELATIONS,
    BandJoin,
    Event,
    IntervalJoin,
    Range,
    SelectJoin,
    WindowJoin,
)
from hotjoin.matcher.oracle import OracleEngine
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.app import HotjoinServer

LATENESS = 6
ISEQL = (("start_preceding", ("delta",)), ("end_following", ("eps",)), ("before", ("delta",)),
         ("left_overlap", ("delta", "eps")), ("during", ("delta", "eps")))


def _subscriptions(rng: random.Random) -> list[Any]:
    """Every preset (on equal keys and on a key band), raw ranges, and the other kinds."""
    subs: list[Any] = []
    for name in ALLEN_RELATIONS:
        subs.append(IntervalJoin.allen(name, b=Range(0, 0)))
    for name, params in ISEQL:
        least = 1 if name == "before" else 0
        args = {p: rng.choice([least, least + 1, 3, 7]) for p in params}
        subs.append(IntervalJoin.iseql(name, b=Range(0, 0), **args))
    subs.append(IntervalJoin.allen("overlaps", b=Range(-1, 1), a=Range(0, 1)))
    subs.append(IntervalJoin.iseql("during", delta=0, eps=0, b=Range(0, 1)))  # boundaries
    subs.append(IntervalJoin(Range(0, 0), ss=Range(-2, 2), ee=Range(None, 0)))  # raw
    subs.append(IntervalJoin(Range(None, None), se=Range(0, 0)))  # raw: r ends where s starts
    subs += [BandJoin(b=Range(-1, 1)), SelectJoin(c=Range(0, 1)), WindowJoin(w=3)]
    return subs


class Feed:
    """Random point and interval events in time order (within the lateness), ids unique."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.now = 0
        self.n = 0

    def next(self) -> Event:
        rng = self.rng
        self.now += rng.randint(0, 3)
        self.n += 1
        t = self.now - rng.randint(0, LATENESS)
        length = rng.choice([None, None, 0, 1, 2, 3, 5, 20])
        end = None if length is None else t + length
        return Event(rng.choice("RS"), f"e{self.n}", float(rng.randint(0, 2)),
                     float(rng.randint(0, 2)), t, b"", end)


def _wire(ev: Event) -> pb.Event:
    return event(ev.side, ev.id, ev.key, ev.value, ev.time, end=None if ev.end == ev.time else ev.end)


def _drive(c: HotjoinClient, oracle: OracleEngine, feed: Feed, rng: random.Random, n: int,
           got: Counter[tuple[int, int, str, str]]) -> None:
    """Publish ``n`` events (per event and as columns), a few deletes and rejected events;
    every oracle delivery is added to ``got``."""
    sent = 0
    while sent < n:
        batch = [feed.next() for _ in range(rng.randint(1, 12))]
        sent += len(batch)
        if rng.random() < 0.5:
            res = c.publish("t", [_wire(e) for e in batch])
            assert [s.code for s in res.statuses] == ["OK"] * len(batch)
        else:
            res = c.publish_columns("t", [e.side for e in batch], [e.id for e in batch],
                                    [e.key for e in batch], [e.value for e in batch],
                                    [e.time for e in batch], ends=[e.end for e in batch])
            assert res.rejected == 0 and res.accepted == len(batch)
        for e in batch:
            for d in oracle.publish(e):
                got[(d.subscription_id, d.sign, d.r_id, d.s_id)] += 1
        if rng.random() < 0.3:
            side = rng.choice("RS")
            stored = sorted(oracle.stored(side))
            if stored:
                victim = rng.choice(stored)
                assert c.delete_events("t", [ref(side, victim)]).statuses[0].code == "OK"
                for d in oracle.delete(side, victim):
                    got[(d.subscription_id, d.sign, d.r_id, d.s_id)] += 1
    # end < time is INVALID with the reason, per event and in a column; nothing changes
    seq = c.stats("t").seq
    bad = c.publish("t", [event("R", "bad", 0.0, 0.0, feed.now, end=feed.now - 1)]).statuses[0]
    assert bad.code == "INVALID" and "before its time" in bad.reason
    cols = c.publish_columns("t", ["S"], ["bad"], [0.0], [0.0], [feed.now], ends=[feed.now - 2])
    assert cols.rejected == 1 and "before its time" in cols.statuses[0].reason
    assert c.stats("t").seq == seq


def _delivered(c: HotjoinClient) -> Counter[tuple[int, int, str, str]]:
    out: Counter[tuple[int, int, str, str]] = Counter()
    stream = c.listen("t", subscriber="a", from_latest=False)
    for m in stream:
        if m.kind == "caught_up":
            break
        if m.kind == "match":
            for r, s in m.pairs:
                out[(m.subscription_id, m.sign, r, s)] += 1
    stream.cancel()
    return out


def _restart(srv: HotjoinServer, data_dir: Path) -> HotjoinServer:
    srv.stop(0)
    return HotjoinServer(data_dir=data_dir, port=0, engine_factory=engine_factory(),
                         compact_ratio=0).start()


@pytest.mark.parametrize("seed,retention", [(1, None), (2, 25)])
def test_interval_joins_match_the_oracle_across_restarts(data_dir: Path, seed: int,
                                                          retention: int | None) -> None:
    rng = random.Random(seed)
    oracle = OracleEngine(lateness=LATENESS, retention=retention)
    feed = Feed(rng)
    want: Counter[tuple[int, int, str, str]] = Counter()
    srv = HotjoinServer(data_dir=data_dir, port=0, engine_factory=engine_factory(),
                        compact_ratio=0).start()
    try:
        with HotjoinClient(srv.target, timeout=60) as c:
            c.create_topic("t", lateness=LATENESS, retention=retention)
            subs = _subscriptions(rng)
            assert c.subscribe_many("t", subs, subscriber="a") == oracle.subscribe_many(subs)
            listed = [s.spec for s in c.list_subscriptions("t")]
            assert listed == subs
            assert [getattr(s, "preset", None) for s in listed] == \
                [getattr(s, "preset", None) for s in subs]
            _drive(c, oracle, feed, rng, 120, want)
        srv = _restart(srv, data_dir)  # the log replayed
        with HotjoinClient(srv.target, timeout=60) as c:
            _drive(c, oracle, feed, rng, 120, want)
            assert srv.registry.get("t").compact()
        srv = _restart(srv, data_dir)  # the compacted log's snapshot, then its tail
        with HotjoinClient(srv.target, timeout=60) as c:
            assert [s.spec.preset if isinstance(s.spec, IntervalJoin) else None
                    for s in c.list_subscriptions("t")] == \
                [s.preset if isinstance(s, IntervalJoin) else None for s in subs]
            _drive(c, oracle, feed, rng, 120, want)
            if retention is None:  # a topic with retention compacts instead of checkpoints
                assert srv.registry.get("t").checkpoint_now()
                deadline = time.monotonic() + 60
                while not list((data_dir / "topics").rglob("checkpoint")):
                    assert time.monotonic() < deadline, "no checkpoint written"
                    time.sleep(0.05)
                _drive(c, oracle, feed, rng, 30, want)  # the log's tail after the checkpoint
        srv = _restart(srv, data_dir)  # the checkpoint (or snapshot), then the log's tail
        with HotjoinClient(srv.target, timeout=60) as c:
            _drive(c, oracle, feed, rng, 60, want)
            st = c.stats("t")
            assert dict(st.tuples) == {side: len(oracle.stored(side)) for side in "RS"}
            assert st.subscriptions["interval"] == sum(isinstance(s, IntervalJoin) for s in subs)
            assert _delivered(c) == want
            assert any(k[0] < 13 for k in want)  # the presets did match something
            # a stored interval event re-sent is an identical duplicate; another end conflicts
            stored = next(e for e in oracle.stored("R").values() if e.end != e.time)
            same = c.publish("t", [_wire(stored)]).statuses[0]
            assert same.code == "DUPLICATE" and same.identical
            other = Event(stored.side, stored.id, stored.key, stored.value, stored.time, b"",
                          stored.end + 1)
            conflict = c.publish("t", [_wire(other)]).statuses[0]
            assert conflict.code == "DUPLICATE" and not conflict.identical
    finally:
        srv.stop(0)


def test_interval_spec_validation(client: HotjoinClient) -> None:
    client.create_topic("t")
    spec = pb.SubscriptionSpec(subscriber="a")
    spec.interval.ss.lo = 1
    with pytest.raises(InvalidArgument, match="range B is required"):
        client.subscribe("t", spec)
    spec.interval.b.lo, spec.interval.b.hi = 0.0, 0.0
    spec.interval.ss.lo, spec.interval.ss.hi = 3, 1
    with pytest.raises(InvalidArgument, match="range SS"):
        client.subscribe("t", spec)
    spec.interval.ClearField("ss")
    spec.interval.preset = "allen:overlaps"  # the preset's ranges, filled in by the server
    sid = client.subscribe("t", spec)
    got = next(s.spec for s in client.list_subscriptions("t") if s.subscription_id == sid)
    assert got == IntervalJoin.allen("overlaps", b=Range(0, 0)) and got.preset == "allen:overlaps"
    spec.interval.ee.lo = 5  # ranges that are not the preset's
    with pytest.raises(InvalidArgument, match="not those of preset"):
        client.subscribe("t", spec)
    spec.interval.ClearField("ee")
    for preset in ("allen:sideways", "iseql:left_overlap(5)", "iseql:before(0)", "nope"):
        spec.interval.preset = preset
        with pytest.raises(InvalidArgument):
            client.subscribe("t", spec)
    assert len(list(client.list_subscriptions("t"))) == 1  # a rejected request changes nothing


def test_end_before_time_is_invalid_and_points_stay_points(client: HotjoinClient) -> None:
    client.create_topic("t", lateness=100)
    res = client.publish("t", [event("R", "r1", 0.0, 0.0, 10, end=9),
                               event("R", "r2", 0.0, 0.0, 10, end=10),
                               event("R", "r3", 0.0, 0.0, 10, end=2**62)])
    assert [s.code for s in res.statuses] == ["INVALID", "OK", "INVALID"]
    assert "event end 9 is before its time 10" in res.statuses[0].reason
    assert "outside the supported range" in res.statuses[2].reason
    cols = client.publish_columns("t", ["S", "S"], ["s1", "s2"], [0.0, 0.0], [0.0, 0.0],
                                  [10, 10], ends=[10, 3])
    assert cols.accepted == 1 and cols.statuses[0].index == 1
    assert cols.statuses[0].code == "INVALID"
    # an end equal to the time is a point: a re-sent point without an end is identical
    again = client.publish("t", [event("R", "r2", 0.0, 0.0, 10)]).statuses[0]
    assert again.code == "DUPLICATE" and again.identical
    assert client.stats("t").seq == 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("serve_proc.py")), "--data-dir",
         str(data_dir), "--port", str(port), "--metrics-port", "-1"],
        cwd=Path(__file__).resolve().parents[2], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)


def test_interval_state_survives_kill9(data_dir: Path) -> None:
    rng = random.Random(7)
    oracle = OracleEngine(lateness=LATENESS, retention=None)
    feed = Feed(rng)
    port = _free_port()
    proc = _start(data_dir, port)
    try:
        with HotjoinClient(f"127.0.0.1:{port}", timeout=60) as c:
            c.wait_ready(60)
            c.create_topic("t", lateness=LATENESS)
            subs = _subscriptions(rng)
            c.subscribe_many("t", subs, subscriber="a")
            oracle.subscribe_many(subs)
            _drive(c, oracle, feed, rng, 150, Counter())
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc = _start(data_dir, port)
        with HotjoinClient(f"127.0.0.1:{port}", timeout=60) as c:
            c.wait_ready(60)
            # a snapshot subscription of each join is owed its current result: the oracle's
            first = c.subscribe_many("t", subs, subscriber="snap", snapshot=True)[0]
            sids = oracle.subscribe_many(subs)
            assert sids[0] == first
            want = Counter((d.subscription_id, r_s) for sid in sids
                           for d in oracle.result(sid) for r_s in [(d.r_id, d.s_id)])
            got: Counter[tuple[int, tuple[str, str]]] = Counter()
            stream = c.listen("t", subscriber="snap", from_latest=False)
            for m in stream:
                if m.kind == "caught_up":
                    break
                if m.kind == "match":
                    assert m.op == "snapshot" and m.sign == 1
                    got.update((m.subscription_id, p) for p in m.pairs)
            stream.cancel()
            assert got == want and want
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)


def test_export_and_replay_equal_the_server_deliveries(data_dir: Path, tmp_path: Path) -> None:
    """The export carries ends and interval specs (preset and ranges); the replay of it,
    sharded by key with band-style replication for interval joins across keys, delivers what
    the server delivered (a pinned strategy on both, so the replay's cells route alike)."""
    import pyarrow.parquet as pq

    from hotjoin.ops.replay.job import replay_in_process
    from hotjoin.ops.replay.log import read_export
    from hotjoin.server.export import export_topic

    rng = random.Random(11)
    feed = Feed(rng)
    want: Counter[tuple[int, int, str, str]] = Counter()
    oracle = OracleEngine(lateness=LATENESS)
    srv = HotjoinServer(data_dir=data_dir, port=0, engine_factory=engine_factory(),
                        compact_ratio=0).start()
    try:
        with HotjoinClient(srv.target, timeout=60) as c:
            c.create_topic("t", lateness=LATENESS, strategy={"interval": "IJ-NestedLoop"})
            subs = _subscriptions(rng)
            c.subscribe_many("t", subs, subscriber="a")
            oracle.subscribe_many(subs)
            _drive(c, oracle, feed, rng, 150, want)
            live = _delivered(c)
    finally:
        srv.stop(0)
    out = tmp_path / "export"
    export_topic(data_dir, "t", out)
    events = pq.read_table(out / "events.parquet").to_pylist()
    stored = {(e.side, e.id): e for side in "RS" for e in oracle.stored(side).values()}
    for row in events:
        ev = stored.get((row["side"], row["id"]))
        if row["op"] == "publish" and ev is not None and ev.time == row["time"]:
            assert row["end"] == (None if ev.end == ev.time else ev.end)
    assert any(r["end"] is not None for r in events)
    rows = pq.read_table(out / "subscriptions.parquet").to_pylist()
    assert rows[0]["kind"] == "interval" and rows[0]["preset"] == "allen:before"
    assert rows[0]["se_lo"] == 1 and rows[0]["se_hi"] is None
    raw = next(r for r in rows if r["kind"] == "interval" and r["preset"] is None)
    assert (raw["ss_lo"], raw["ss_hi"], raw["ee_hi"]) == (-2, 2, 0)
    log = read_export(out / "events.parquet", out / "subscriptions.parquet")
    for shards in (1, 3):
        _, table = replay_in_process(log, None, shards=shards, skew=0.5, progress=lambda m: None)
        d = table.to_pydict()
        got = Counter(zip(d["subscription_id"], d["sign"], d["r_id"], d["s_id"], strict=True))
        assert got == live, shards


def _format2_payload(image: Any) -> bytes:
    """A checkpoint payload as format 2 wrote it: no ``end`` column, no interval columns, no
    preset (what a server before interval events left on disk)."""
    import io
    import json
    import struct

    import pyarrow as pa

    from hotjoin.matcher.contract import SUBSCRIPTION_COLUMNS

    def ipc(table: pa.Table) -> bytes:
        sink = io.BytesIO()
        with pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        return sink.getvalue()

    sids = image.subs["sid"].tolist()
    metas = [image.meta[s] for s in sids]
    parts = [ipc(pa.table({**{k: image.subs[k] for k in SUBSCRIPTION_COLUMNS},
                           "affected": pa.array([m.affected for m in metas], pa.bool_()),
                           "subscriber": pa.array([m.subscriber for m in metas], pa.string()),
                           "owner": pa.array([""] * len(sids), pa.string())}))]
    for t in image.tuples:
        parts.append(ipc(pa.table({"id": pa.array(t.ids, pa.string()), "key": t.keys,
                                   "value": t.values, "time": t.times, "seq": t.seqs,
                                   "payload": pa.array(t.payloads, pa.binary())})))
    header = json.dumps({"format": 2, "seq": image.seq, "max_time": image.max_time,
                         "next_subscription_id": image.next_sid, "log_ops": image.log_ops,
                         "sides": [t.side for t in image.tuples]}).encode()
    out = [struct.pack("<I", len(header)), header]
    for p in parts:
        out += [struct.pack("<Q", len(p)), p]
    return b"".join(out)


def test_checkpoint_format_3_round_trip_and_format_2_still_loads() -> None:
    from hotjoin.matcher import Engine
    from hotjoin.server import checkpoint
    from hotjoin.server.convert import SubMeta

    e = Engine(lateness=10)
    e.subscribe_many([IntervalJoin.allen("overlaps", b=Range(0, 0)), BandJoin(b=Range(-1, 1))])
    e.publish(Event("R", "r1", 1.0, 0.0, 1, b"", 5))
    e.publish(Event("S", "s1", 1.0, 0.0, 3, b"", 8))
    e.publish(Event("S", "s2", 1.0, 0.0, 4))
    meta = {0: SubMeta(False, False, "a", 1, "allen:overlaps"), 1: SubMeta(True, False, "b", 2)}
    image = checkpoint.capture(e, meta, {}, 2, 5)
    back = checkpoint.decode(checkpoint.encode(image))
    assert back.meta == meta
    loaded = Engine(lateness=10)
    loaded.load_state(checkpoint.engine_state(back))
    assert loaded.get_event("R", "r1") == e.get_event("R", "r1")
    assert loaded.get_event("R", "r1").end == 5 and loaded.get_event("S", "s2").end == 4
    assert loaded.result(0) == e.result(0) and len(e.result(0)) == 1
    # format 2: points and the other kinds only
    old = Engine(lateness=10)
    old.subscribe(BandJoin(b=Range(-1, 1)))
    old.publish(Event("R", "r1", 1.0, 0.0, 1))
    old.publish(Event("S", "s1", 1.5, 0.0, 2))
    img2 = checkpoint.capture(old, {0: SubMeta(True, False, "b", 1)}, {}, 1, 3)
    back2 = checkpoint.decode(_format2_payload(img2))
    assert all(t.ends is None for t in back2.tuples) and back2.meta[0].preset == ""
    fresh = Engine(lateness=10)
    fresh.load_state(checkpoint.engine_state(back2))
    assert fresh.result(0) == old.result(0) and fresh.get_event("S", "s1").end == 2


def test_metrics_and_stats_list_interval_joins(tmp_path: Path) -> None:
    import urllib.request

    srv = HotjoinServer(data_dir=tmp_path / "d", port=0, metrics_port=0,
                        engine_factory=engine_factory()).start()
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            c.create_topic("t", lateness=10, strategy={"interval": "IJ-SSI"})
            with pytest.raises(InvalidArgument, match="unknown subscription kind 'intervals'"):
                c.create_topic("u", strategy={"intervals": "auto"})
            c.subscribe_many("t", [IntervalJoin.allen("overlaps", b=Range(0, 0))] * 2,
                             subscriber="a")
            c.publish("t", [event("R", "r", 1.0, 0.0, 1, end=5)])
            st = c.stats("t")
            assert st.subscriptions["interval"] == 2 and st.tau["interval"] >= 1
            text = urllib.request.urlopen(f"http://127.0.0.1:{srv.metrics_port}/metrics",
                                          timeout=10).read().decode()
        assert 'hotjoin_subscriptions{kind="interval",topic="t"} 2.0' in text
    finally:
        srv.stop(0)
