"""Batched Listen (MatchBatch), group commit across publish streams, columnar restart replay."""

from __future__ import annotations

import random
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

from server_harness import engine_factory

from hotjoin.clients.client import HotjoinClient, band, batch_rows, event, ref, select
from hotjoin.server.app import HotjoinServer


def _collect(stream, batched: bool) -> tuple[dict[int, list[tuple]], list[Any]]:
    """Matches per subscription until caught up; also every non-match message."""
    per: dict[int, list[tuple]] = defaultdict(list)
    other: list[Any] = []
    for resp in stream:
        kind = resp.kind
        if kind == "matches":
            assert batched
            for m in batch_rows(resp):
                per[m.subscription_id].append((m.seq, m.sign, m.count, m.op, m.event.id))
        elif kind == "match":
            m = resp
            per[m.subscription_id].append((m.seq, m.sign, m.count, m.op, m.event.id))
        else:
            other.append(resp)
            if kind == "caught_up":
                break
    stream.cancel()
    return per, other


def test_batched_listen_equals_single_messages(client: HotjoinClient) -> None:
    """The same matches, per subscription in seq order, with the same cursors; deletes carry −1."""
    client.create_topic("t", lateness=10**6)
    rnd = random.Random(3)
    sids = client.subscribe_many("t", [select((rnd.uniform(0, 5), rnd.uniform(5, 10)), (None, None),
                                              delivery="affected", subscriber="me") for _ in range(40)])
    live_b = client.listen("t", subscriber="me", batch=True)
    for k in range(5):
        client.publish("t", [event(rnd.choice("RS"), f"e{k}-{i}", float(rnd.randint(0, 4)), rnd.uniform(0, 10),
                                   time=k) for i in range(30)])
    client.delete_events("t", [ref("R", f"e0-{i}") for i in range(30)])  # NOT_FOUND ones are fine
    client.delete_events("t", [ref("S", f"e1-{i}") for i in range(30)])
    seq = client.get_topic("t").seq
    batched = client.listen("t", subscriber="me", batch=True)
    single = client.listen("t", subscriber="me")
    got_b, _ = _collect(batched, True)
    got_s, _ = _collect(single, False)
    assert got_b == got_s and sum(len(v) for v in got_b.values()) > 50
    assert any(x[1] == -1 for v in got_b.values() for x in v)
    for sid, msgs in got_b.items():
        assert [m[0] for m in msgs] == sorted({m[0] for m in msgs})
        assert batched.cursors[sid] == msgs[-1][0] == single.cursors[sid]
    # the stream opened before publishing sees the same thing live
    per: dict[int, list[tuple]] = defaultdict(list)
    for resp in live_b:
        if resp.kind == "matches":
            for m in batch_rows(resp):
                per[m.subscription_id].append((m.seq, m.sign, m.count, m.op, m.event.id))
        if all(live_b.cursors.get(s, 0) >= max((x[0] for x in got_b.get(s, [(0,)])), default=0) for s in sids) \
                and sum(map(len, per.values())) >= sum(map(len, got_b.values())):
            break
    live_b.cancel()
    assert per == got_b
    assert seq == client.get_topic("t").seq


def test_batched_listen_gap_after_eviction_and_resume(memory_client: HotjoinClient) -> None:
    """Capacity 64 (conftest): the oldest messages give one Gap, then the newest 64, in order."""
    client = memory_client
    client.create_topic("t", lateness=10**6)
    sid = client.subscribe("t", band((-1, 1), subscriber="me", delivery="affected"))
    other = client.subscribe("t", band((-1, 1), subscriber="me", delivery="pairs"))
    client.publish("t", [event("R", "r0", 0.0, 0.0, time=0)])
    client.publish("t", [event("S", f"s{i}", 0.5, 0.0, time=i) for i in range(100)])
    first = client.get_topic("t").seq - 99
    per, rest = _collect(client.listen("t", subscriber="me", batch=True), True)
    gaps = {g.subscription_id: (g.from_seq, g.to_seq) for g in rest if g.kind == "gap"}
    assert gaps == {sid: (1, first + 35), other: (2, first + 35)}  # from the registration seq
    for q in (sid, other):
        assert [m[0] for m in per[q]] == list(range(first + 36, first + 100))
    # resume from the middle: nothing lost, nothing twice
    s2 = client.listen("t", cursors={sid: first + 80}, subscription_ids=[sid], batch=True)
    per2, rest2 = _collect(s2, True)
    assert [m[0] for m in per2[sid]] == list(range(first + 81, first + 100))
    assert [r.kind for r in rest2] == ["caught_up"]


def test_unsubscribed_after_its_batched_messages(client: HotjoinClient) -> None:
    client.create_topic("t", lateness=10**6)
    sid = client.subscribe("t", band((-1, 1), subscriber="me", delivery="affected"))
    stream = client.listen("t", subscriber="me", batch=True)
    it = iter(stream)
    assert next(it).kind == "caught_up"  # the stream is open
    client.publish("t", [event("R", "r0", 0.0, 0.0, time=0), event("S", "s0", 0.5, 0.0, time=0)])
    useq = client.unsubscribe("t", sid)
    kinds = []
    for resp in it:
        kinds.append(resp.kind)
        if kinds[-1] == "unsubscribed":
            assert resp.seq == useq
            break
    stream.cancel()
    assert kinds.index("matches") < kinds.index("unsubscribed")


def test_concurrent_streams_share_syncs_and_stay_ordered(data_dir: Path) -> None:
    """Group commit: 4 streams x 50 batches all acknowledged, with fewer fdatasyncs than batches;
    every event survives a restart; per-subscription seqs stay strictly increasing."""
    srv = HotjoinServer(data_dir=data_dir, port=0, engine_factory=engine_factory(),
                        buffer_capacity=10_000).start()
    try:
        with HotjoinClient(srv.target) as c:
            c.create_topic("t", lateness=10**6)
            sid = c.subscribe("t", band((-100, 100), subscriber="me", delivery="affected"))
            c.publish("t", [event("S", "s0", 0.0, 0.0, time=0)])
            lis = c.listen("t", subscriber="me", batch=True)
            it = iter(lis)
            assert next(it).kind == "caught_up"
            errors: list[BaseException] = []

            def pub(k: int) -> None:
                try:
                    with c.publisher("t", batch_size=20, max_in_flight=4) as p:
                        for b in range(50):
                            p.publish_batch([event("R", f"r{k}-{b}-{i}", 1.0, 0.0, time=1) for i in range(20)])
                    assert p.rejected == 0
                except BaseException as e:  # noqa: BLE001
                    errors.append(e)

            threads = [threading.Thread(target=pub, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors
            topic = srv.registry.get("t")
            log = topic.durability.log
            assert log is not None and log.durable == log.written
            assert log.syncs < 200 + 3
            seqs: list[int] = []
            for resp in it:
                if resp.kind == "matches":
                    seqs.extend(resp.seqs)
                if len(seqs) >= 4000:
                    break
            lis.cancel()
            assert seqs == sorted(set(seqs)) and len(seqs) == 4000
            assert lis.cursors[sid] == seqs[-1]
            n = c.stats("t").tuples["R"]
        assert n == 4000
    finally:
        srv.stop(0)
    srv = HotjoinServer(data_dir=data_dir, port=0, engine_factory=engine_factory()).start()
    try:
        with HotjoinClient(srv.target) as c:
            assert c.stats("t").tuples["R"] == 4000
    finally:
        srv.stop(0)


def test_columnar_replay_reaches_the_same_state(data_dir: Path) -> None:
    """No retention: runs of publishes are replayed as columns; interleaved deletes, subscribes
    and unsubscribes keep their places; later operations get the same seqs, ids and matches."""
    _replay_roundtrip(data_dir, checkpoint_min_ops=0)


def test_restart_from_checkpoint_plus_log_tail(data_dir: Path) -> None:
    """A checkpoint taken while the topic is idle; the restart loads it and replays only the
    frames after it, reaching the same state."""
    assert _replay_roundtrip(data_dir, checkpoint_min_ops=100) >= 1
    assert (data_dir / "topics" / "t" / "checkpoint").exists()


def test_unusable_checkpoint_falls_back_to_full_replay(data_dir: Path) -> None:
    assert _replay_roundtrip(data_dir, checkpoint_min_ops=100, damage=True) >= 1


def _replay_roundtrip(data_dir: Path, checkpoint_min_ops: int, damage: bool = False) -> int:
    import time

    factory = engine_factory()
    rnd = random.Random(7)
    ops: list[tuple] = []
    for k in range(6):
        ops.append(("pub", [(rnd.choice("RS"), f"e{k}-{i}", float(rnd.randint(0, 5)), rnd.uniform(0, 10),
                              rnd.randint(0, 100), b"x" if i % 3 == 0 else b"") for i in range(40)]))
        ops.append(("sub", k))
        ops.append(("del", [("R", f"e{k}-{i}") for i in range(0, 40, 3)]))
        if k == 3:
            ops.append(("unsub", 1))

    def drive(c: HotjoinClient, ops: list[tuple] = ops) -> None:
        for op in ops:
            if op[0] == "pub":
                c.publish("t", [event(*e) for e in op[1]])
            elif op[0] == "sub":
                k = op[1]
                spec = select((0, 5 + k), None, delivery="affected" if k % 2 else "pairs", subscriber="a") \
                    if k % 3 else band((-1, 1), subscriber="a")
                c.subscribe("t", spec)
            elif op[0] == "del":
                c.delete_events("t", [ref(*r) for r in op[1]])
            else:
                c.unsubscribe("t", op[1])

    def probe(c: HotjoinClient) -> tuple:
        t, st = c.get_topic("t"), c.stats("t")
        subs = [(s.subscription_id, s.registered_seq, s.spec, s.subscriber, s.delivery)
                for s in c.list_subscriptions("t")]
        resp = c.publish("t", [event("R", "probe", 2.0, 1.0, time=200), event("S", "probe", 2.0, 1.0, time=200)])
        lis = c.listen("t", subscriber="a", from_latest=False, cursors={s[0]: t.seq for s in subs})
        per, _ = _collect(lis, False)
        return (t.seq, dict(st.tuples), st.watermark, subs, [(s.code, s.seq) for s in resp.statuses],
                c.subscribe("t", band((0, 1))), dict(per))

    srv = HotjoinServer(data_dir=data_dir, port=0, engine_factory=factory,
                        checkpoint_min_ops=checkpoint_min_ops).start()
    with HotjoinClient(srv.target) as c:
        c.create_topic("t", lateness=1000)
        topic = srv.registry.get("t")
        topic.durability.checkpoint_idle_seconds = 0.3
        half = len(ops) // 2
        drive(c, ops[:half])
        deadline = time.monotonic() + 30
        while checkpoint_min_ops and topic.durability.checkpoints < 1 and time.monotonic() < deadline:
            time.sleep(0.05)  # a checkpoint once the topic is idle; the rest is the log's tail
        drive(c, ops[half:])
    written = topic.durability.checkpoints
    srv.stop(0)
    if damage:
        ck = data_dir / "topics" / "t" / "checkpoint"
        raw = bytearray(ck.read_bytes())
        raw[-10] ^= 0xFF
        ck.write_bytes(bytes(raw))
    srv = HotjoinServer(data_dir=data_dir, port=0, engine_factory=factory,
                        checkpoint_min_ops=checkpoint_min_ops).start()
    with HotjoinClient(srv.target) as c:
        restarted = probe(c)
    srv.stop(0)
    # reference: the same operations applied live, never restarted
    srv = HotjoinServer(data_dir=data_dir.parent / "live", port=0, engine_factory=factory).start()
    with HotjoinClient(srv.target) as c:
        c.create_topic("t", lateness=1000)
        drive(c)
        live = probe(c)
    srv.stop(0)
    assert restarted[:6] == live[:6]
    assert restarted[6] == live[6] and restarted[6]
    return written
