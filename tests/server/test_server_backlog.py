"""Per-subscriber lag and backlog through the real server: ``GetCursors`` (lag from the
subscription's newest message, pending messages and bytes), the per-subscriber metrics and
``hotjoin cursors`` (docs/reference/metrics.md, "Subscribers: backlog and committed lag")."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from server_harness import engine_factory

from hotjoin.cli.main import main
from hotjoin.clients.client import HotjoinClient, band, event
from hotjoin.server.app import HotjoinServer
from hotjoin.server.delivery import PAIR_BYTES, PAIRS_ROW_BYTES, ROW_BYTES
from hotjoin.server.settings import DeliveryOptions

ONE_PAIR = ROW_BYTES + PAIRS_ROW_BYTES + PAIR_BYTES  # the estimate of a message of one pair


@pytest.fixture(params=["match log", "memory only"])
def served(request: pytest.FixtureRequest,
           tmp_path: Path) -> Iterator[tuple[HotjoinServer, HotjoinClient]]:
    delivery = DeliveryOptions(retention_bytes=0) if request.param == "memory only" else None
    kw = {"delivery": delivery} if delivery is not None else {}
    srv = HotjoinServer(data_dir=tmp_path / "d", port=0, metrics_port=0, buffer_capacity=64,
                        engine_factory=engine_factory(), **kw).start()
    with HotjoinClient(srv.target, timeout=30) as c:
        yield srv, c
    srv.stop(0)


def _cursors(c: HotjoinClient) -> dict[str, tuple]:
    """subscriber -> (committed or None, lag or None, pending, pending bytes, newest seq)."""
    out = {}
    for x in c.get_cursors("t").cursors:
        has = x.committed_seq is not None
        out[x.subscriber] = (x.committed_seq if has else None, x.lag if x.lag is not None else None,
                             x.pending_messages, x.pending_bytes, x.newest_seq)
    return out


def _scrape(srv: HotjoinServer) -> dict[tuple[str, str], float]:
    """(metric, subscriber) -> value of the per-subscriber series of topic t."""
    url = f"http://127.0.0.1:{srv.metrics_port}/metrics"
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        if fam.name.startswith("hotjoin_subscriber_"):
            for s in fam.samples:
                if s.labels.get("topic") == "t":
                    out[(s.name, s.labels["subscriber"])] = s.value
    return out


def test_lag_and_backlog_per_subscriber(served: tuple[HotjoinServer, HotjoinClient],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    srv, c = served
    c.create_topic("t", lateness=10**6)
    bob = c.subscribe("t", band((100, 101), subscriber="bob"))  # seq 1: matches nothing below
    assert c.commit_cursors("t", {bob: 1}) == 1
    assert _cursors(c)["bob"] == (1, 0, 0, 0, 0)
    alice = c.subscribe("t", band((-1, 1), subscriber="alice"))  # seq 2 takes a seq
    # bob's lag stays 0: another subscription's registration is not a message of his
    assert _cursors(c)["bob"] == (1, 0, 0, 0, 0)
    c.publish("t", [event("R", "r0", 0.0, 0.0, time=0)])  # seq 3: no pair yet
    c.publish("t", [event("S", f"s{i}", 0.5, 0.0, time=i) for i in range(4)])  # seqs 4..7
    assert _cursors(c) == {"bob": (1, 0, 0, 0, 0), "alice": (None, None, 4, 4 * ONE_PAIR, 7)}
    assert _scrape(srv) == {
        ("hotjoin_subscriber_backlog_messages", "alice"): 4.0,
        ("hotjoin_subscriber_backlog_bytes", "alice"): 4.0 * ONE_PAIR,
        ("hotjoin_subscriber_backlog_messages", "bob"): 0.0,
        ("hotjoin_subscriber_backlog_bytes", "bob"): 0.0,
        ("hotjoin_subscriber_committed_lag", "bob"): 0.0,  # alice committed nothing: no series
    }
    # a listener receives alice's messages: nothing is pending any more, committed or not
    stream = c.listen("t", subscriber="alice")
    seen = []
    for resp in stream:
        if resp.kind == "match":
            seen.append(resp.seq)
        if len(seen) == 4:
            break
    stream.cancel()
    assert seen == [4, 5, 6, 7]
    assert _cursors(c)["alice"] == (None, None, 0, 0, 7)
    assert c.commit_cursors("t", {alice: 5}) == 1
    assert _cursors(c)["alice"] == (5, 2, 0, 0, 7)
    d = c.stats("t").delivery
    assert (d.committed_cursors, d.cursor_lag_sum, d.cursor_lag_max) == (2, 2, 2)
    c.publish("t", [event("S", "s9", 0.5, 0.0, time=9)])  # seq 8 for alice
    assert _cursors(c)["alice"] == (5, 3, 1, ONE_PAIR, 8)
    m = _scrape(srv)
    assert m[("hotjoin_subscriber_committed_lag", "alice")] == 3.0
    assert m[("hotjoin_subscriber_backlog_messages", "alice")] == 1.0
    assert m[("hotjoin_subscriber_committed_lag", "bob")] == 0.0

    assert main(["cursors", "--target", srv.target, "t"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["subscription", "subscriber", "committed", "lag", "pending",
                                "pending_bytes"]
    assert lines[1].split() == [str(bob), "bob", "1", "0", "0", "0"]
    assert lines[2].split() == [str(alice), "alice", "5", "3", "1", str(ONE_PAIR)]
    assert lines[4].split() == ["subscriber", "subscriptions", "committed", "max_lag", "pending",
                                "pending_bytes"]
    assert lines[5].split() == ["bob", "1", "1", "0", "0", "0"]
    assert lines[6].split() == ["alice", "1", "1", "3", "1", str(ONE_PAIR)]
    assert lines[7] == (f"topic seq 8: 2 of 2 subscriptions committed, total lag 3, pending 1 "
                        f"messages ({ONE_PAIR} bytes)")
    assert main(["cursors", "--target", srv.target, "t", "--by-subscriber"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["subscriber", "subscriptions"] and len(lines) == 4
    # unsubscribing drops alice's backlog and series
    c.unsubscribe("t", alice)
    assert set(_cursors(c)) == {"bob"}
    assert ("hotjoin_subscriber_backlog_messages", "alice") not in _scrape(srv)
