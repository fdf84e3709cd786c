"""Quotas end to end over real gRPC on loopback (server/quotas.py): every breach is answered with
RESOURCE_EXHAUSTED, changes nothing and is counted in ``hotjoin_quota_rejections_total``, and a
principal flooding the server does not slow another principal's publishes down.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_harness import engine_factory
from test_server_security import PRINCIPALS, sample, write_auth

from hotjoin.clients import CallError, ResourceExhausted
from hotjoin.clients.client import HotjoinClient, band, event
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.app import HotjoinServer
from hotjoin.server.quotas import Limits

EXHAUSTED = "RESOURCE_EXHAUSTED"
# server-wide limits, and alice's own (tighter) ones from the auth file
LIMITS = Limits(message_bytes=20_000, batch_events=100, listeners=2, streams=1)
ALICE = {"publish_rate": 20, "publish_burst": 20, "subscriptions": 3, "listeners": 1}


class Quota:
    """A server with ``LIMITS``; clients per principal; topic t created by root."""

    def __init__(self, tmp: Path) -> None:
        self.tokens = write_auth(tmp / "auth.toml", PRINCIPALS, limits={"alice": ALICE})
        self.srv = HotjoinServer(data_dir=tmp / "data", port=0, auth_file=tmp / "auth.toml",
                                 limits=LIMITS, engine_factory=engine_factory()).start()
        self.c = {n: HotjoinClient(self.srv.target, timeout=20, token=t) for n, t in self.tokens.items()}
        self.c["root"].create_topic("t", lateness=10**9)

    def close(self) -> None:
        for c in self.c.values():
            c.close()
        self.srv.stop(0)


@pytest.fixture
def q(tmp_path: Path) -> Iterator[Quota]:
    env = Quota(tmp_path)
    yield env
    env.close()


def rejections(quota: str, principal: str) -> float:
    return sample("hotjoin_quota_rejections_total", {"quota": quota, "principal": principal})


def _refused(call: Any, quota: str, principal: str, message: str) -> str:
    """``call()`` fails with RESOURCE_EXHAUSTED mentioning ``message``, counted once."""
    before = rejections(quota, principal)
    with pytest.raises(ResourceExhausted) as err:
        call()
    assert err.value.code == EXHAUSTED, err.value.message
    assert message in err.value.message
    assert rejections(quota, principal) == before + 1
    return err.value.message


def test_publish_flood_is_refused_while_others_flow(q: Quota) -> None:
    alice, bob = q.c["alice"], q.c["bob"]
    stop = threading.Event()
    counts = {"ok": 0, "refused": 0, "other": 0}
    messages: list[str] = []
    before = rejections("publish_rate", "alice")

    def flood() -> None:
        i = 0
        while not stop.is_set():
            try:
                alice.publish("t", [event("R", f"a{i}-{k}", 0.0, 0.0, time=1) for k in range(5)])
                counts["ok"] += 1
            except CallError as e:
                if e.code == EXHAUSTED:
                    counts["refused"] += 1
                    if len(messages) < 3:
                        messages.append(e.message)
                else:
                    counts["other"] += 1
            i += 1

    flooder = threading.Thread(target=flood)
    flooder.start()
    t0 = time.monotonic()
    try:
        time.sleep(0.2)
        for i in range(60):  # bob is unlimited: every batch of his is accepted while alice floods
            resp = bob.publish("t", [event("S", f"b{i}-{k}", 0.0, 0.0, time=1) for k in range(5)])
            assert resp.accepted == 5
        assert flooder.is_alive(), "the flood must overlap bob's publishes"
    finally:
        stop.set()
        flooder.join()
    elapsed = time.monotonic() - t0
    assert counts["other"] == 0
    assert counts["refused"] > 0 and "publish rate limit of 20 events/s exceeded for principal 'alice'" in messages[0]
    assert "retry in" in messages[0]
    # the bucket: at most a burst (20) plus 20 events per second went through, 5 per batch
    assert counts["ok"] * 5 <= 20 + 20 * elapsed + 5
    assert rejections("publish_rate", "alice") == before + counts["refused"]
    assert rejections("publish_rate", "bob") == 0
    st = q.c["root"].stats("t")
    assert st.tuples["S"] == 300 and st.tuples["R"] == counts["ok"] * 5  # refused batches stored nothing


def test_batch_and_message_size(q: Quota) -> None:
    bob, root = q.c["bob"], q.c["root"]
    seq = root.get_topic("t").seq
    _refused(lambda: bob.publish("t", [event("R", f"x{i}", 0.0, 0.0, time=1) for i in range(101)]),
             "batch_events", "bob", "batch of 101 events exceeds the limit of 100 per request")
    _refused(lambda: bob.publish("t", [event("R", "big", 0.0, 0.0, time=1, payload=b"x" * 30_000)]),
             "message_bytes", "bob", "exceeds the limit of 20000 bytes per message")
    _refused(lambda: bob.subscribe_many("t", [band((0, 1), subscriber="s" * 200)] * 200),
             "message_bytes", "bob", "request message of")

    def stream() -> Any:  # the second message of a stream is too big: the stream is refused
        return list(bob.publishing.PublishStream(iter([
            pb.PublishRequest(topic="t", events=[event("R", "ok1", 0.0, 0.0, time=1)]),
            pb.PublishRequest(events=[event("R", "big2", 0.0, 0.0, time=1, payload=b"y" * 30_000)])])))

    _refused(stream, "message_bytes", "bob", "exceeds the limit of 20000 bytes")
    assert root.get_topic("t").seq == seq + 1  # only the first batch of the stream was applied
    assert bob.publish("t", [event("R", f"y{i}", 0.0, 0.0, time=1) for i in range(100)]).accepted == 100


def test_subscription_quota(q: Quota) -> None:
    alice, bob = q.c["alice"], q.c["bob"]
    ids = alice.subscribe_many("t", [band((0, 1))] * 3)
    _refused(lambda: alice.subscribe("t", band((0, 1))), "subscriptions", "alice",
             "owns 3 subscriptions; 1 more would exceed its limit of 3")
    _refused(lambda: alice.subscribe_many("t", [band((0, 1))] * 5, chunk=1), "subscriptions", "alice",
             "would exceed its limit of 3")
    assert len(list(alice.list_subscriptions("t"))) == 3
    alice.unsubscribe("t", ids[0])
    alice.subscribe("t", band((0, 1)))  # room again
    assert len(bob.subscribe_many("t", [band((0, 1))] * 10)) == 10  # bob has no such limit


def _open(c: HotjoinClient) -> Any:
    """A Listen stream that has received its caught_up message (so it is registered)."""
    stream = c.listen("t", subscriber="l", reconnect=False)
    it = iter(stream)
    assert next(it).kind == "caught_up"
    return stream, it


def test_listener_and_stream_caps(q: Quota) -> None:
    alice, bob = q.c["alice"], q.c["bob"]
    first, _ = _open(alice)
    _refused(lambda: next(iter(alice.listen("t", subscriber="l", reconnect=False))), "listeners", "alice",
             "already has 1 open Listen streams")
    bobs = [_open(bob) for _ in range(2)]  # bob: the server default of 2
    _refused(lambda: next(iter(bob.listen("t", subscriber="l", reconnect=False))), "listeners", "bob",
             "already has 2 open Listen streams")
    first.cancel()
    deadline = time.monotonic() + 10
    while True:  # the server frees the slot once it notices the cancelled stream
        try:
            again, _ = _open(alice)
            break
        except ResourceExhausted:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    again.cancel()
    for s, _ in bobs:
        s.cancel()
    # publish streams: one open per principal (server-wide limit 1)
    with bob.publisher("t", batch_size=1) as pub:
        pub.publish_batch([event("R", "p0", 0.0, 0.0, time=1)]).result(10)
        _refused(lambda: list(bob.publishing.PublishStream(iter([pb.PublishRequest(topic="t")]))),
                 "streams", "bob", "already has 1 open publish/subscribe streams")
        assert alice.publish("t", [event("R", "p1", 0.0, 0.0, time=1)]).accepted == 1


def test_limits_without_auth_apply_to_anonymous(tmp_path: Path) -> None:
    """Without --auth-file every caller is the principal 'anonymous'; the limits still hold."""
    srv = HotjoinServer(data_dir=tmp_path / "d", port=0, limits=Limits(batch_events=10),
                        engine_factory=engine_factory()).start()
    try:
        with HotjoinClient(srv.target) as c:
            c.create_topic("t")
            _refused(lambda: c.publish("t", [event("R", f"x{i}", 0.0, 0.0, time=1) for i in range(11)]),
                     "batch_events", "anonymous", "batch of 11 events exceeds the limit of 10")
            assert c.publish("t", [event("R", f"x{i}", 0.0, 0.0, time=1) for i in range(10)]).accepted == 10
    finally:
        srv.stop(0)
    with pytest.raises(Exception, match="batch_events may be at most 10000"):
        Limits(batch_events=10_001).validate()
