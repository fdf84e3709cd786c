"""End to end over real gRPC on loopback: listeners receive exactly what the oracle delivers."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict
from typing import Any

import pytest
from server_harness import engine_factory

from hotjoin.clients import Match
from hotjoin.clients.client import HotjoinClient, band, event, ref, select, window
from hotjoin.matcher.model import BandJoin, Range, SelectJoin, WindowJoin
from hotjoin.matcher.model import Event as MEvent
from hotjoin.matcher.oracle import OracleEngine
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.app import HotjoinServer

Key = tuple[int, int]  # (subscription id, seq)


def _rand_range(rnd: random.Random, lo: float, hi: float) -> tuple[float | None, float | None]:
    a, b = sorted(rnd.uniform(lo, hi) for _ in range(2))
    return (None if rnd.random() < 0.15 else round(a, 1), None if rnd.random() < 0.15 else round(b, 1))


def _make_sub(rnd: random.Random, kind: str, delivery: str, snapshot: bool) -> tuple[pb.SubscriptionSpec, Any]:
    a, c = _rand_range(rnd, 0, 10), _rand_range(rnd, 0, 10)
    if kind == "band":
        b = _rand_range(rnd, -3, 3)
        return band(b, a, c, delivery=delivery, snapshot=snapshot, subscriber="s"), BandJoin(Range(*b), Range(*a), Range(*c))
    if kind == "select":
        return select(a, c, delivery=delivery, snapshot=snapshot, subscriber="s"), SelectJoin(Range(*a), Range(*c))
    w = rnd.randint(0, 5)
    return window(a, c, w, delivery=delivery, snapshot=snapshot, subscriber="s"), WindowJoin(Range(*a), Range(*c), w)


def _expected(out: list, sign_of: int, affected: set[int], seq: int, exp: dict) -> None:
    by_sid: dict[int, list] = defaultdict(list)
    for d in out:
        by_sid[d.subscription_id].append(d)
    for sid, ds in by_sid.items():
        if sid in affected:
            exp[(sid, seq)] = (sign_of, len(ds), None)
        else:
            exp[(sid, seq)] = (sign_of, len(ds), Counter((d.r_id, d.s_id) for d in ds))


def _got(m: Match) -> tuple[Key, tuple]:
    pairs = None if not m.pairs else Counter(m.pairs)
    return (m.subscription_id, m.seq), (m.sign, m.count, pairs)


def run_workload(client: HotjoinClient, kind: str, seed: int, n_ops: int = 300) -> None:
    """Random subscribe/publish/delete/unsubscribe; compare a live and a late listener with the oracle."""
    rnd = random.Random(seed)
    lateness, retention = 3, (None if seed % 2 else 20)
    client.create_topic("t", lateness=lateness, retention=retention)
    oracle = OracleEngine(lateness, retention)
    exp: dict[Key, tuple] = {}
    affected: set[int] = set()
    live: dict[Key, tuple] = {}
    stream = None
    listener = None
    stored: dict[str, list[str]] = {"R": [], "S": []}
    clock = 0
    for i in range(n_ops):
        r = rnd.random()
        if r < 0.12 or i < 3:
            delivery = "affected" if rnd.random() < 0.4 else "pairs"
            snap = rnd.random() < 0.3
            spec, sub = _make_sub(rnd, kind, delivery, snap)
            sid = client.subscribe("t", spec)  # every kind is implemented: an error fails the test
            assert sid == oracle.subscribe(sub, snapshot=snap)
            if delivery == "affected":
                affected.add(sid)
            if snap:
                _expected(oracle.result(sid), 1, affected, oracle.seq, exp)
            if stream is None:
                stream = client.listen("t", subscriber="s")

                def consume(s: Any = stream) -> None:
                    for resp in s:
                        if resp.kind == "match":
                            k, v = _got(resp)
                            assert k not in live, f"duplicate message {k}"
                            live[k] = v

                listener = threading.Thread(target=consume, daemon=True)
                listener.start()
        elif r < 0.8:
            batch = []
            for _ in range(rnd.randint(1, 5)):
                side = rnd.choice("RS")
                clock += rnd.randint(-2, 3)
                eid = f"{side}{rnd.randint(0, 60)}"
                batch.append((side, eid, float(rnd.randint(0, 10)) / 2, round(rnd.uniform(0, 10), 1), clock))
            resp = client.publish("t", [event(*b) for b in batch])
            for b, st in zip(batch, resp.statuses, strict=True):
                try:
                    out = oracle.publish(MEvent(*b))
                except Exception as e:  # late or duplicate
                    want = "DUPLICATE" if "exists" in str(e) else "LATE"
                    assert st.code == want, (b, st, e)
                    continue
                assert st.code == "OK" and st.seq == oracle.seq, (b, st)
                stored[b[0]].append(b[1])
                _expected(out, 1, affected, oracle.seq, exp)
        elif r < 0.92:
            side = rnd.choice("RS")
            cands = [x for x in stored[side] if x in oracle.stored(side)]
            if not cands:
                continue
            eid = rnd.choice(cands)
            st = client.delete_events("t", [ref(side, eid)]).statuses[0]
            out = oracle.delete(side, eid)
            assert st.code == "OK" and st.seq == oracle.seq
            _expected(out, -1, affected, oracle.seq, exp)
        else:
            live_subs = list(oracle.subscriptions())
            if not live_subs:
                continue
            sid = rnd.choice(live_subs)
            seq = client.unsubscribe("t", sid)
            oracle.unsubscribe(sid)
            assert seq == oracle.seq
    assert client.get_topic("t").seq == oracle.seq
    # The live listener sees everything, in time.
    deadline = time.monotonic() + 20
    while len(live) < len(exp) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    if stream is not None:
        stream.cancel()
        listener.join(5)  # type: ignore[union-attr]
    assert live == exp
    # A listener started now, from the beginning, gets the same from the buffers (still live subs).
    survivors = set(oracle.subscriptions())
    if survivors:
        got: dict[Key, tuple] = {}
        late = client.listen("t", subscription_ids=sorted(survivors))
        for resp in late:
            kind_ = resp.kind
            if kind_ == "match":
                k, v = _got(resp)
                got[k] = v
            elif kind_ == "caught_up":
                late.cancel()
                break
            else:
                raise AssertionError(f"unexpected {resp}")
        assert got == {k: v for k, v in exp.items() if k[0] in survivors}


@pytest.mark.parametrize("kind", ["band", "select", "window"])
@pytest.mark.parametrize("seed", [1, 2])
def test_deliveries_equal_oracle(kind: str, seed: int, tmp_path: Any) -> None:
    srv = HotjoinServer(data_dir=tmp_path, port=0, buffer_capacity=100_000, engine_factory=engine_factory()).start()
    try:
        with HotjoinClient(srv.target) as c:
            run_workload(c, kind, seed)
    finally:
        srv.stop(0)


def _matching_pair_stream(client: HotjoinClient, n: int, start: int = 0) -> None:
    """Publish n events that each form exactly one pair with r0 (band |Δkey| <= 1)."""
    client.publish("t", [event("S", f"s{start + i}", 0.5, 0.0, time=start + i) for i in range(n)])


def test_resume_after_drop_and_gap_after_eviction(memory_client: HotjoinClient) -> None:
    """Buffer capacity is 64 (conftest): resume loses nothing buffered, reports a gap otherwise."""
    client = memory_client
    client.create_topic("t", lateness=1_000_000)
    sid = client.subscribe("t", band((-1, 1), subscriber="me"))
    client.publish("t", [event("R", "r0", 0.0, 0.0, time=0)])
    _matching_pair_stream(client, 10)
    stream = client.listen("t", subscriber="me")
    seen = []
    for resp in stream:
        seen.append(resp.seq)
        if len(seen) == 3:
            break
    stream.cancel()  # the connection drops
    cursor = stream.cursors[sid]
    assert cursor == seen[-1]
    resumed = client.listen("t", cursors={sid: cursor}, subscription_ids=[sid])
    rest = []
    for resp in resumed:
        if resp.kind == "caught_up":
            break
        assert resp.kind == "match"
        rest.append(resp.seq)
    resumed.cancel()
    assert seen + rest == list(range(3, 13)), "every buffered message exactly once, in order"
    last = rest[-1]
    _matching_pair_stream(client, 100, start=10)  # 100 > capacity 64: the oldest 36 are evicted
    again = client.listen("t", cursors={sid: last}, subscription_ids=[sid])
    msgs = []
    for resp in again:
        if resp.kind == "caught_up":
            break
        msgs.append(resp)
    again.cancel()
    assert msgs[0].kind == "gap"
    gap = msgs[0]
    assert (gap.subscription_id, gap.from_seq, gap.to_seq) == (sid, last + 1, last + 36)
    assert [m.seq for m in msgs[1:]] == list(range(last + 37, last + 101))


def test_slow_listener_does_not_block_publishers(client: HotjoinClient) -> None:
    """A listener that never reads: publishing proceeds at full speed and memory stays bounded."""
    client.create_topic("t", lateness=10**9)
    sid = client.subscribe("t", band((-1, 1), subscriber="slow"))
    client.publish("t", [event("R", "r0", 0.0, 0.0, time=0)])
    stalled = client.listen("t", subscriber="slow")
    it = iter(stalled)
    next(it)  # open the stream, then stop reading
    t0 = time.monotonic()
    for k in range(20):
        client.publish("t", [event("S", f"s{k}-{i}", 0.5, 0.0, time=i) for i in range(200)])
    assert time.monotonic() - t0 < 30
    stats = client.stats("t")
    assert stats.tuples["S"] == 4000
    stalled.cancel()
    other = client.listen("t", subscription_ids=[sid], from_latest=True)
    assert next(iter(other)).kind == "caught_up"
    other.cancel()


def test_reconnect_after_server_restart(data_dir: Any) -> None:
    """The client iterator reconnects by itself; messages before the restart are reported as a gap."""
    factory = engine_factory()
    srv = HotjoinServer(data_dir=data_dir, port=0, engine_factory=factory).start()
    port = srv.port
    c = HotjoinClient(srv.target)
    c.create_topic("t", lateness=100)
    sid = c.subscribe("t", band((-1, 1), subscriber="me"))
    c.publish("t", [event("R", "r0", 0.0, 0.0, time=0), event("S", "s0", 0.5, 0.0, time=1)])
    stream = c.listen("t", subscriber="me", retry_delay=0.1)
    got: list[Any] = []

    def consume() -> None:
        for resp in stream:
            got.append(resp)

    th = threading.Thread(target=consume, daemon=True)
    th.start()
    deadline = time.monotonic() + 10
    while not any(r.kind == "match" for r in got) and time.monotonic() < deadline:
        time.sleep(0.02)
    srv.stop(0)
    c.publish  # noqa: B018 - the channel survives; the server comes back on the same port
    srv2 = HotjoinServer(data_dir=data_dir, port=port, engine_factory=factory).start()
    try:
        c.publish("t", [event("S", "s1", 0.2, 0.0, time=2)])
        deadline = time.monotonic() + 15
        while not any(r.seq == 4 for r in got if r.kind == "match") and time.monotonic() < deadline:
            time.sleep(0.05)
        matches = [(r.subscription_id, r.seq) for r in got if r.kind == "match"]
        assert matches == [(sid, 3), (sid, 4)]
        assert stream.reconnects >= 1
    finally:
        stream.cancel()
        c.close()
        srv2.stop(0)
