"""Durable delivery, delivery retention, committed cursors and byte bounds (docs/reference/persistence.md).

The kill -9 fault runs are in ``test_server_durable_faults.py`` and the match log's own recovery
and retention in ``test_match_log.py``; these cover each mechanism on its own: the cursor store,
the delivery hub's byte
bounds (memory-only and with the match log behind it), and through the real server the Gap at
the retention bound, committed cursors across a restart, their stats, metrics and CLI.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_harness import engine_factory

from hotjoin.cli.main import main
from hotjoin.clients import CallError
from hotjoin.clients.client import HotjoinClient, band, event
from hotjoin.server.app import HotjoinServer
from hotjoin.server.cursors import CursorStore
from hotjoin.server.delivery import (
    EVICTED,
    Chunk,
    DeliveryHub,
    GapItem,
    MatchBlock,
    OpMatches,
    row_bytes,
)
from hotjoin.server.match_log import MatchLog, encode
from hotjoin.server.settings import DeliveryOptions


def _cols(seq: int, sid: int = 0, n_pairs: int = 0) -> tuple:
    pairs = None
    if n_pairs:
        pairs = {0: (np.array([f"r{seq}.{i}" for i in range(n_pairs)], dtype=object),
                     np.array([f"s{seq}"] * n_pairs, dtype=object))}
    return (np.array([sid]), np.array([seq]), np.array([1], dtype=np.int8), np.array([max(n_pairs, 1)]),
            np.array([0], dtype=np.int32), [("publish", "S", f"s{seq}", 0)], pairs)


def _chunk(seq: int, sid: int = 0, n_pairs: int = 0) -> Chunk:
    c = _cols(seq, sid, n_pairs)
    return Chunk.build([OpMatches(seq, 1, "publish", "S", f"s{seq}", 0, c[0], c[3], c[6])])


def test_cursor_store_survives_a_torn_commit(tmp_path: Path) -> None:
    cs = CursorStore(tmp_path, sync=False)
    cs.commit([(0, 5), (1, 9)])
    cs.commit([(0, 7)])
    cs.close()
    with open(tmp_path / "cursors", "ab") as f:
        f.write(b"\x10\x00\x00\x00\x01\x02")  # a commit cut off by kill -9 (never acknowledged)
    cs = CursorStore(tmp_path, sync=False)
    assert cs.positions() == {0: 7, 1: 9}
    assert cs.summary(10) == (2, 3 + 1, 3)
    for k in range(5000):  # the file is rewritten once it holds mostly overwritten pairs
        cs.commit([(0, k)])
    assert (tmp_path / "cursors").stat().st_size < 16 * 5000
    cs.forget([1])
    cs.close()
    assert CursorStore(tmp_path, sync=False).positions() == {0: 4999}


# ---- delivery hub -------------------------------------------------------------------------------


def _drain_all(hub: DeliveryHub, lis) -> tuple[list[GapItem], list[int], list[int]]:
    gaps, seqs, sizes = [], [], []
    for _ in range(1000):
        items = lis.next_batch(0.05)
        if not items and not lis.wake.is_set():
            break
        n = 0
        for it in items:
            if isinstance(it, GapItem):
                gaps.append(it)
            elif isinstance(it, MatchBlock):
                seqs += it.seqs.tolist()
                n += int(row_bytes(it).sum())
        sizes.append(n)
    return gaps, seqs, sizes


def test_memory_only_hub_is_bounded_in_bytes_and_reports_overflow() -> None:
    hub = DeliveryHub(capacity=10**6, max_pairs=10**9, boot_seq=0, buffer_bytes=100_000,
                      listener_bytes=20_000)
    hub.add_subscription(0, "a", registered_seq=1)
    for seq in range(2, 202):
        hub.push(_chunk(seq, n_pairs=50))  # about 3.4 kB each
    b, _msgs, _chunks = hub.buffer_stats()
    assert b <= 100_000
    lis = hub.listen("a", [], {}, default_after_seq=0, from_latest=False, current_seq=201)
    gaps, seqs, sizes = _drain_all(hub, lis)
    assert len(gaps) == 1 and gaps[0].reason == EVICTED and gaps[0].from_seq == 1
    assert seqs == list(range(gaps[0].to_seq + 1, 202)), "the newest messages, each once, in order"
    assert max(sizes) <= 20_000, "a listener takes about listener_bytes at a time"


def test_hub_with_match_log_reads_evicted_messages_back(tmp_path: Path) -> None:
    ml = MatchLog(tmp_path, log_seq=0, sync=False)
    hub = DeliveryHub(boot_seq=0, store=ml, buffer_bytes=10_000, listener_bytes=8_000)
    hub.add_subscription(0, "a", registered_seq=1)
    hub.add_subscription(1, "a", registered_seq=1)
    for seq in range(2, 302):
        ch = _chunk(seq, sid=seq % 2, n_pairs=20)
        ml.append(ch.first_seq, ch.last_seq, encode(ch.columns()))
        hub.push(ch)
    assert hub.buffer_stats()[0] <= 10_000
    lis = hub.listen("a", [], {1: 101}, default_after_seq=0, from_latest=False, current_seq=301)
    gaps, seqs, sizes = _drain_all(hub, lis)
    assert gaps == []
    assert seqs == [s for s in range(2, 302) if s % 2 == 0 or s > 101]
    assert max(sizes) <= 8_000 + 20 * 64 + 48
    assert not lis.on_disk, "back on the memory ring once caught up"
    hub.push(_chunk(302, sid=0))
    ml.append(302, 302, encode(_chunk(302, sid=0).columns()))
    assert _drain_all(hub, lis)[1] == [302]


# ---- through the server -------------------------------------------------------------------------


def _collect(stream) -> tuple[list, list[tuple[int, int]]]:
    gaps, got = [], []
    for resp in stream:
        kind = resp.kind
        if kind == "caught_up":
            break
        if kind == "gap":
            gaps.append(resp)
        elif kind == "match":
            got.append((resp.subscription_id, resp.seq))
    stream.cancel()
    return gaps, got


def test_gap_only_beyond_the_delivery_retention(data_dir: Path) -> None:
    opts = DeliveryOptions(segment_bytes=2048)
    srv = HotjoinServer(data_dir=data_dir, port=0, engine_factory=engine_factory(), delivery=opts).start()
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            t = c.create_topic("t", lateness=10**6, delivery_retention_bytes=8192)
            assert (t.delivery_retention_bytes, t.delivery_retention_ms) == (8192, 7 * 24 * 3600 * 1000)
            sid = c.subscribe("t", band((-1, 1), subscriber="me"))
            c.publish("t", [event("R", "r0", 0.0, 0.0, time=0)])
            for i in range(60):
                c.publish("t", [event("S", f"s{i}.{k}", 0.5, 0.0, time=i) for k in range(3)])
            seq = c.get_topic("t").seq
            st = c.stats("t").delivery
            first = st.retained_from_seq
            assert 3 < first < seq and st.match_log_bytes <= 8192 + 2048 + 1024
            gaps, got = _collect(c.listen("t", subscriber="me"))
            assert [(g.subscription_id, g.from_seq, g.to_seq) for g in gaps] == [(sid, 1, first - 1)]
            assert "beyond the topic's delivery retention" in gaps[0].reason
            assert got == [(sid, s) for s in range(max(first, 3), seq + 1)]
            # within the bound: no Gap, exactly the messages after the cursor
            gaps, got = _collect(c.listen("t", subscriber="me", cursors={sid: first + 5}))
            assert gaps == [] and got == [(sid, s) for s in range(first + 6, seq + 1)]
            assert main(["topic", "--target", srv.target, "create", "t2", "--delivery-retention-bytes",
                         "0", "--delivery-retention-ms", "-1"]) == 0
            t2 = c.get_topic("t2")
            assert (t2.delivery_retention_bytes, t2.delivery_retention_ms) == (0, -1)
            assert not (data_dir / "topics" / "t2" / "matches").exists(), "memory only: no match log"
            with pytest.raises(CallError) as err:
                c.create_topic("t3", delivery_retention_bytes=-1)
            assert err.value.code == "INVALID_ARGUMENT"
    finally:
        srv.stop(0)


def test_committed_cursors_survive_a_restart(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    factory = engine_factory()
    srv = HotjoinServer(data_dir=data_dir, port=0, metrics_port=0, engine_factory=factory).start()
    port = srv.port
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            c.create_topic("t", lateness=10**6)
            a = c.subscribe("t", band((-1, 1), subscriber="me"))
            b = c.subscribe("t", band((-1, 1), subscriber="me", delivery="affected"))
            other = c.subscribe("t", band((-1, 1), subscriber="you"))
            c.publish("t", [event("R", "r0", 0.0, 0.0, time=0)])
            c.publish("t", [event("S", f"s{i}", 0.5, 0.0, time=i) for i in range(10)])  # seqs 5..14
            with pytest.raises(CallError) as err:
                c.commit_cursors("t", {a: 99})
            assert err.value.code == "INVALID_ARGUMENT" and "beyond" in err.value.message
            with pytest.raises(CallError) as err:
                c.commit_cursors("t", {77: 3})
            assert err.value.code == "NOT_FOUND"
            assert c.commit_cursors("t", subscriber="me", after_seq=8) == 2
            stream = c.listen("t", subscriber="me", auto_commit=0.0)
            seen = []
            for resp in stream:  # auto-commit: what the application moved past is committed
                seen.append((resp.subscription_id, resp.seq))
                if len(seen) == 5:
                    break
            stream.cancel()
            del stream
            assert seen == [(a, 9), (b, 9), (a, 10), (b, 10), (a, 11)]
            assert c.commit_cursors("t", {b: 12}) == 1
            cur = {x.subscription_id: x for x in c.get_cursors("t").cursors}
            assert cur[a].committed_seq == 10 and cur[a].lag == 4  # (a, 11) was not moved past
            assert cur[b].committed_seq == 12 and cur[other].committed_seq is None
            d = c.stats("t").delivery
            assert (d.committed_cursors, d.cursor_lag_sum, d.cursor_lag_max) == (2, 4 + 2, 4)
            text = urllib.request.urlopen(f"http://127.0.0.1:{srv.metrics_port}/metrics", timeout=10).read().decode()
            for line in ('hotjoin_committed_cursors{topic="t"} 2.0', 'hotjoin_cursor_lag_max{topic="t"} 4.0',
                         'hotjoin_committed_cursors_lag{topic="t"} 6.0'):
                assert line in text, line
            assert 'hotjoin_delivery_buffer_bytes{topic="t"}' in text
            assert 'hotjoin_delivery_buffer_fill_ratio{topic="t"}' in text
    finally:
        srv.stop(0)
    srv = HotjoinServer(data_dir=data_dir, port=port, engine_factory=factory).start()
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            # a client restarted without local state resumes after the committed cursors
            gaps, got = _collect(c.listen("t", subscriber="me"))
            assert gaps == []
            assert sorted(got) == sorted([(a, s) for s in range(11, 15)] + [(b, s) for s in range(13, 15)])
            gaps, got = _collect(c.listen("t", subscriber="me", ignore_committed=True))
            assert gaps == [] and len(got) == 20
            assert main(["cursors", "--target", srv.target, "t"]) == 0
            out = capsys.readouterr().out
            assert "2 of 3 subscriptions committed, total lag 6" in out
            assert main(["cursors", "--target", srv.target, "t", "--subscriber", "you", "--commit", "14"]) == 0
            assert "committed seq 14 for 1 subscriptions" in capsys.readouterr().out
            assert main(["cursors", "--target", srv.target, "nope"]) == 1
            assert "NOT_FOUND" in capsys.readouterr().err
            c.unsubscribe("t", other)
            assert [x.subscription_id for x in c.get_cursors("t").cursors] == [a, b]
            assert c.stats("t").delivery.committed_cursors == 2
    finally:
        srv.stop(0)


# ---- property: memory ring + match log deliver exactly what is owed ------------------------------

ops_strategy = st.lists(
    st.tuples(st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True), st.integers(0, 6)),
    min_size=1, max_size=60)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops_strategy, buffer_bytes=st.integers(1, 6000), listener_bytes=st.integers(1, 3000),
       cursors=st.dictionaries(st.integers(0, 3), st.integers(0, 70), max_size=4),
       listen_at=st.integers(0, 60), drain_every=st.integers(1, 10))
def test_hub_delivers_every_owed_message_once(tmp_path_factory: pytest.TempPathFactory, ops: list,
                                              buffer_bytes: int, listener_bytes: int,
                                              cursors: dict[int, int], listen_at: int,
                                              drain_every: int) -> None:
    """Whatever the ring and drain sizes, a listener gets, per subscription, every message after
    its cursor exactly once and in seq order, no Gap, from memory or disk (the match log)."""
    ml = MatchLog(tmp_path_factory.mktemp("ml"), log_seq=0, sync=False)
    hub = DeliveryHub(boot_seq=0, store=ml, buffer_bytes=buffer_bytes, listener_bytes=listener_bytes)
    for sid in range(4):
        hub.add_subscription(sid, "a", registered_seq=sid + 1)
    sent: list[tuple[int, int]] = []
    lis = None
    got: list[tuple[int, int]] = []
    gaps: list[GapItem] = []

    def drain() -> None:
        for it in lis.next_batch(0):
            if isinstance(it, GapItem):
                gaps.append(it)
            elif isinstance(it, MatchBlock):
                got.extend(zip(it.sids.tolist(), it.seqs.tolist(), strict=True))

    for k, (sids, n_pairs) in enumerate(ops):
        seq = 5 + k
        if k == listen_at:
            lis = hub.listen("a", [], dict(cursors), 0, False, current_seq=seq - 1)
        parts = [OpMatches(seq, 1, "publish", "S", f"s{seq}", 0, np.array(sorted(sids)),
                           np.full(len(sids), max(n_pairs, 1)),
                           {i: (np.array([f"r{j}" for j in range(n_pairs)], dtype=object),
                                np.array([f"s{seq}"] * n_pairs, dtype=object)) for i in range(len(sids))}
                           if n_pairs else None)]
        ch = Chunk.build(parts)
        ml.append(ch.first_seq, ch.last_seq, encode(ch.columns()))
        hub.push(ch)
        sent += [(s, seq) for s in sorted(sids)]
        if lis is not None and k % drain_every == 0:
            drain()
    if lis is None:
        lis = hub.listen("a", [], dict(cursors), 0, False, current_seq=4 + len(ops))
    for _ in range(10 * len(sent) + 10):
        drain()
        if not lis.wake.is_set():
            break
    assert gaps == []
    owed = [(s, q) for s, q in sent if q > cursors.get(s, 0)]
    assert sorted(got) == sorted(owed) and len(got) == len(set(got))
    for sid in range(4):
        seqs = [q for s, q in got if s == sid]
        assert seqs == sorted(seqs)
    ml.close()


def test_unreadable_match_log_record_becomes_a_gap(tmp_path: Path) -> None:
    ml = MatchLog(tmp_path, log_seq=0, sync=False)
    hub = DeliveryHub(boot_seq=0, store=ml, buffer_bytes=1)
    hub.add_subscription(0, "a", registered_seq=1)
    for seq in range(2, 6):
        ch = _chunk(seq)
        ml.append(ch.first_seq, ch.last_seq, encode(ch.columns()))
        hub.push(ch)
    seg = ml.segments[0]
    with open(seg.path, "r+b") as f:  # damage the payload of the record of seq 2 (disk rot)
        f.seek(int(seg.offsets[0]) + 36)
        f.write(b"\x00" * 8)
    lis = hub.listen("a", [], {}, default_after_seq=0, from_latest=False, current_seq=5)
    gaps, seqs, _ = _drain_all(hub, lis)  # only the damaged record's messages are a gap
    assert [(g.subscription_id, g.from_seq, g.to_seq) for g in gaps] == [(0, 1, 2)]
    assert seqs == [3, 4, 5]
    hub.push(_chunk(6))
    ml.append(6, 6, encode(_chunk(6).columns()))
    assert _drain_all(hub, lis)[1] == [6], "the stream goes on after the gap"


def test_cli_listen_commit_resumes_where_the_last_run_stopped(
        client: HotjoinClient, server: HotjoinServer, capsys: pytest.CaptureFixture[str]) -> None:
    client.create_topic("t", lateness=10**6)
    sid = client.subscribe("t", band((-1, 1), subscriber="me"))
    client.publish("t", [event("R", "r0", 0.0, 0.0, time=0)])
    client.publish("t", [event("S", f"s{i}", 0.5, 0.0, time=i) for i in range(3)])  # seqs 3, 4, 5
    t = ["--target", server.target]

    def seqs() -> list[int]:
        import json
        return [int(json.loads(x)["match"]["seq"]) for x in capsys.readouterr().out.splitlines()
                if "match" in json.loads(x)]

    assert main(["listen", *t, "t", "--subscriber", "me", "--count", "2", "--commit"]) == 0
    assert seqs() == [3, 4]
    assert client.get_cursors("t", subscription_ids=[sid]).cursors[0].committed_seq == 4
    assert main(["listen", *t, "t", "--subscriber", "me", "--count", "1", "--commit"]) == 0
    assert seqs() == [5]
    assert main(["listen", *t, "t", "--subscriber", "me", "--count", "1", "--ignore-committed"]) == 0
    assert seqs() == [3]
    assert client.get_cursors("t").cursors[0].committed_seq == 5


def test_get_cursors_selects_exactly_the_asked_subscriptions(client: HotjoinClient) -> None:
    client.create_topic("t")
    anon = client.subscribe("t", band((-1, 1)))  # no subscriber name
    mine = client.subscribe("t", band((-1, 1), subscriber="me"))
    other = client.subscribe("t", band((-1, 1), subscriber="you"))
    assert client.commit_cursors("t", {anon: 3, other: 1}) == 2

    def ids(**kw: object) -> list[int]:
        return [c.subscription_id for c in client.get_cursors("t", **kw).cursors]

    assert ids() == [anon, mine, other]
    assert ids(subscription_ids=[other]) == [other]
    assert ids(subscriber="me") == [mine]
    assert ids(subscriber="me", subscription_ids=[anon]) == [anon, mine]
    with pytest.raises(CallError) as err:
        ids(subscription_ids=[99])
    assert err.value.code == "NOT_FOUND"
    with pytest.raises(CallError) as err:
        client.commit_cursors("t", after_seq=1)
    assert err.value.code == "INVALID_ARGUMENT"
