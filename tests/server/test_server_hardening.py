"""Regression tests of bad input: each gets a clean status and changes nothing;
SIGTERM during every RPC kind ends in UNAVAILABLE or a finished answer and a prompt exit."""

from __future__ import annotations

import math
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from hotjoin.clients import CallError
from hotjoin.clients.client import HotjoinClient, band, event, select, window
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.errors import MAX_MESSAGE_BYTES, clip

ROOT = Path(__file__).resolve().parents[2]
MAX = 2**63 - 1
INVALID, NOT_FOUND = "INVALID_ARGUMENT", "NOT_FOUND"


def state(c: HotjoinClient, topic: str) -> tuple[Any, ...]:
    """What a rejected request must leave unchanged: sequence, subscriptions, stored tuples."""
    st = c.stats(topic)
    subs = [(s.subscription_id, s.registered_seq, s.spec, s.subscriber, s.delivery, s.snapshot)
            for s in c.list_subscriptions(topic)]
    return c.get_topic(topic).seq, st.seq, dict(st.tuples), dict(st.subscriptions), subs


def refused(call: Callable[[], Any], code: str, text: str) -> str:
    with pytest.raises(CallError) as err:
        call()
    assert err.value.code == code, (err.value.code, err.value.message)
    details = err.value.message
    assert text in details, details
    return details


# ---- bad input --------------------------------------------------------------------------------

def test_huge_times_and_options_are_refused_not_overflowed(client: HotjoinClient) -> None:
    """Lateness = retention = 2^63-1 and times near ±2^63 once left the topic unable to
    take writes (UNKNOWN "int too big to convert"); they are now refused up front."""
    refused(lambda: client.create_topic("t", lateness=MAX, retention=MAX), INVALID, "lateness must be")
    refused(lambda: client.create_topic("t", retention=MAX), INVALID, "retention must be")
    client.create_topic("t", lateness=2**61, retention=2**61, max_advance=0)  # the largest allowed
    client.subscribe("t", band((-1, 1)))
    before = state(client, "t")
    resp = client.publish("t", [event("R", "a", 1.0, 1.0, time=MAX), event("S", "b", 1.0, 1.0, time=-(2**63))])
    assert [s.code for s in resp.statuses] == ["INVALID", "INVALID"]
    assert "outside the supported range" in resp.statuses[0].reason
    assert state(client, "t") == before
    stream = client.publishing.PublishStream(iter([pb.PublishRequest(topic="t", events=[
        event("R", "c", 1.0, 1.0, time=2**62)])]))
    [ack] = list(stream)
    assert ack.statuses[0].code == pb.INVALID and state(client, "t") == before
    ok = client.publish("t", [event("S", "e", 1.0, 1.0, time=-(2**61)), event("R", "d", 1.0, 1.0, time=2**61),
                              event("S", "f", 1.0, 1.0, time=-1)])
    # the extremes are accepted; W = 2^61 - 2^61 = 0 then makes time -1 late (no overflow anywhere)
    assert [s.code for s in ok.statuses] == ["OK", "OK", "LATE"]
    assert client.stats("t").watermark == 0
    assert client.delete_events("t", [pb.EventRef(side=pb.SIDE_R, id="d")]).statuses[0].code == "OK"


def test_window_w_beyond_range_refused(client: HotjoinClient) -> None:
    client.create_topic("t", retention=10)
    before = state(client, "t")
    refused(lambda: client.subscribe("t", window((0, 1), (0, 1), MAX)), INVALID, "w must be >= 0 and <= 2^61")
    assert state(client, "t") == before


@pytest.mark.parametrize("spec", [
    select((1e18, None)),                # a range above every stored value (histogram domain)
    window((1e18, 1e18), None, 5),        # an empty histogram sample
], ids=["select-above-values", "window-empty-sample"])
def test_failed_index_build_registers_nothing(client: HotjoinClient, spec: pb.SubscriptionSpec) -> None:
    """A subscription whose index build fails was registered although refused (and the
    bookkeeping broke later unsubscribes). Now it is rejected and nothing changes, in
    SubscribeMany too (all or nothing) — or, once the engine builds it, it is simply accepted."""
    client.create_topic("t", retention=10)
    keep = client.subscribe("t", band((-1, 1)))
    client.publish("t", [event("R", "r", 1.0, 1.0, time=100), event("S", "s", 1.0, 1.0, time=100)])
    before = state(client, "t")
    for call in (lambda: client.subscribe("t", spec), lambda: client.subscribe_many("t", [band((0, 1)), spec])):
        try:
            call()
        except CallError as e:
            assert e.code in (INVALID, "FAILED_PRECONDITION"), e
            assert state(client, "t") == before
        else:  # accepted: then it must be a registered, working subscription
            before = state(client, "t")
    assert client.unsubscribe("t", keep) == before[0] + 1
    n = len(list(client.list_subscriptions("t")))
    new = client.subscribe("t", select((0, 10)))
    assert client.unsubscribe("t", new) > 0 and len(list(client.list_subscriptions("t"))) == n


def test_huge_finite_bounds_are_valid(client: HotjoinClient) -> None:
    """A band of [-1e308, 1e308] (width inf) hung the band index, and select ranges beyond every
    stored value failed the router's histograms; every finite bound is valid (docs/design.md#ranges) and is
    accepted now. A non-finite bound is refused and changes nothing."""
    client.create_topic("t")
    before = state(client, "t")
    refused(lambda: client.subscribe_many("t", [band((0, 1)), select((math.nan, 1))]), INVALID,
            "finite")
    assert state(client, "t") == before
    client.subscribe("t", band((-1e308, 1e308)))
    client.subscribe_many("t", [band((0, 1)), select((1e308, None)), select((-1.7e308, 1.7e308))])
    assert len(list(client.list_subscriptions("t"))) == 4


def test_long_names_get_short_messages(client: HotjoinClient) -> None:
    """A 20,000-character name used to be echoed in full (RESOURCE_EXHAUSTED "Stream
    removed" instead of NOT_FOUND); messages are cut to 1 KiB with an ellipsis."""
    name = "a" * 20_000
    for call, code in ((lambda: client.get_topic(name), NOT_FOUND),
                       (lambda: client.create_topic(name), INVALID),
                       (lambda: client.create_topic("é" * 5000), INVALID),
                       (lambda: client.stats(name), NOT_FOUND)):
        details = refused(call, code, "")
        assert len(details.encode()) <= MAX_MESSAGE_BYTES and "…" in details, len(details)
    assert clip("short") == "short" and len(clip("ü" * 2000).encode()) <= MAX_MESSAGE_BYTES


def test_trailing_newline_topic_name_refused(client: HotjoinClient) -> None:
    """``$`` matched before a trailing newline, so "x\\n" was a valid topic name."""
    refused(lambda: client.create_topic("x\n"), INVALID, "invalid topic name")
    assert client.list_topics() == []


def test_undecodable_body_is_invalid_argument(client: HotjoinClient) -> None:
    """A body that is not a protobuf answered INTERNAL "Exception deserializing request!"."""
    client.create_topic("t")
    raw = b"\xff\xff\xff\xff"
    ident = lambda b: b  # noqa: E731
    unary = client.channel.unary_unary("/hotjoin.v1.TopicService/GetTopic", request_serializer=ident,
                                       response_deserializer=ident)
    refused(lambda: unary(raw, timeout=10), INVALID, "not a valid protobuf message")
    listen = client.channel.unary_stream("/hotjoin.v1.ListenService/Listen", request_serializer=ident,
                                         response_deserializer=ident)
    refused(lambda: next(iter(listen(raw, timeout=10))), INVALID, "not a valid protobuf message")
    stream = client.channel.stream_stream("/hotjoin.v1.PublishService/PublishStream",
                                          request_serializer=ident, response_deserializer=ident)
    refused(lambda: list(stream(iter([raw]), timeout=10)), INVALID, "not a valid protobuf message")
    many = client.channel.stream_unary("/hotjoin.v1.SubscriptionService/SubscribeStream",
                                       request_serializer=ident, response_deserializer=ident)
    refused(lambda: many(iter([raw]), timeout=10), INVALID, "not a valid protobuf message")
    health = client.channel.unary_unary("/grpc.health.v1.Health/Check", request_serializer=ident,
                                        response_deserializer=ident)
    refused(lambda: health(raw, timeout=10), INVALID, "not a valid protobuf message")
    assert health(b"", timeout=10) == b"\x08\x01"  # an empty request parses: SERVING
    assert client.get_topic("t").seq == 0


# ---- shutdown ---------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(data_dir: Path, port: int, timeout: float = 10.0) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("serve_proc.py")), "--data-dir", str(data_dir),
         "--port", str(port), "--metrics-port", "-1", "--shutdown-timeout", str(timeout)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


RETRYABLE = {"UNAVAILABLE", "CANCELLED"}


def _publish_stream(c: HotjoinClient) -> Iterator[pb.PublishResponse]:
    def reqs() -> Iterator[pb.PublishRequest]:
        for i in range(1_000_000):
            yield pb.PublishRequest(topic="t", events=[event("R", f"p{i}", 0.0, 0.0, time=i)])
    return iter(c.publishing.PublishStream(reqs(), timeout=60))


def _unary_loop(c: HotjoinClient, kind: str) -> Iterator[Any]:
    i = 0
    while True:
        i += 1
        if kind == "publish":
            yield c.publish("t", [event("S", f"u{i}", 0.0, 0.0, time=i)])
        elif kind == "subscribe":
            yield c.subscribe("t", select((0, i)))
        elif kind == "subscribe_many":
            yield c.subscribe_many("t", [band((0, i))] * 100)
        elif kind == "delete":
            yield c.delete_events("t", [pb.EventRef(side=pb.SIDE_R, id="nope")])
        elif kind == "stats":
            yield c.stats("t")
        else:
            yield c.get_topic("t")


KINDS = ["listen", "publish_stream", "publish", "subscribe", "subscribe_many", "delete", "stats", "get"]


@pytest.mark.parametrize("kind", KINDS)
def test_sigterm_during_rpc(tmp_path: Path, kind: str) -> None:
    """SIGTERM while an RPC of ``kind`` runs: the RPC finishes or ends UNAVAILABLE (never
    NOT_FOUND "topic closed", never UNKNOWN), the process exits 0 within its deadline, and stderr
    holds no traceback."""
    port = _free_port()
    proc = _serve(tmp_path / "data", port, timeout=5.0)
    c = HotjoinClient(f"127.0.0.1:{port}", timeout=30)
    outcome: dict[str, Any] = {"n": 0}
    try:
        c.wait_ready(60)
        c.create_topic("t")
        c.subscribe("t", band((-1, 1), subscriber="me"))

        def run() -> None:
            try:
                if kind == "listen":
                    it: Iterator[Any] = iter(c.listening.Listen(pb.ListenRequest(topic="t", subscriber="me"), timeout=60))
                elif kind == "publish_stream":
                    it = _publish_stream(c)
                else:
                    it = _unary_loop(c, kind)
                for _ in it:
                    outcome["n"] += 1
                outcome["end"] = "ok"
            except CallError as e:
                outcome["end"] = e.code
                outcome["details"] = e.message

        t = threading.Thread(target=run, daemon=True)
        t.start()
        deadline = time.monotonic() + 30
        while outcome["n"] == 0 and kind != "listen" and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        t0 = time.monotonic()
        proc.terminate()
        rc = proc.wait(timeout=20)
        took = time.monotonic() - t0
        t.join(20)
    finally:
        c.close()
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert rc == 0 and took < 5.0 + 2.0, (rc, took)
    assert "Traceback" not in err, err[-3000:]
    assert outcome.get("end") in RETRYABLE | {"ok"}, outcome
    assert "closed" not in str(outcome.get("details", "")) or outcome["end"] != "NOT_FOUND"


def test_subscribe_many_all_or_nothing_across_runs(server: Any, client: HotjoinClient,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Specs are registered in runs of equal ``snapshot``; when a later run's index build
    fails, the earlier runs are rolled back too, and the topic still works afterwards."""
    client.create_topic("t")
    client.subscribe("t", band((-1, 1)))
    engine = server.registry.get("t").engine
    before = state(client, "t")
    band_index = engine.kind_index("band")
    real, calls = band_index.add_many, []

    def second_fails(qs: Any) -> None:
        calls.append(len(qs))
        real(qs)
        if len(calls) == 2:
            raise ValueError("index build failed")

    monkeypatch.setattr(band_index, "add_many", second_fails)
    specs = [band((0, 1)), band((0, 2)), band((0, 3), snapshot=True)]
    refused(lambda: client.subscribe_many("t", specs), INVALID, "index build failed")
    assert calls == [2, 1] and state(client, "t") == before
    monkeypatch.undo()
    ids = client.subscribe_many("t", specs)
    assert ids == [1, 2, 3] and client.get_topic("t").seq == before[0] + 3


# ---- large requests and other topics ----------------------------------------------------------

def test_a_large_subscribe_many_does_not_stall_other_topics(client: HotjoinClient, server: Any) -> None:
    """While one SubscribeMany of 150,000 specs is applied to topic ``big`` (it holds only that
    topic's lock), topic ``small`` keeps taking publishes, answering stats and health checks:
    many of them complete *during* the large request, not after it."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    client.create_topic("big")
    client.create_topic("small")
    client.subscribe("small", select(delivery="affected"))
    specs = [select((float(i % 1000), float(i % 1000) + 50.0), (float(i % 777), float(i % 777) + 9.0),
                    delivery="affected") for i in range(150_000)]
    done = threading.Event()
    errors: list[BaseException] = []

    def big() -> None:
        try:
            with HotjoinClient(server.target, timeout=600) as c:
                c.subscribe_many("big", specs, chunk=150_000)
        except BaseException as x:  # noqa: BLE001 - reported by the assertion below
            errors.append(x)
        finally:
            done.set()

    worker = threading.Thread(target=big)
    worker.start()
    health = health_pb2_grpc.HealthStub(grpc.insecure_channel(server.target))
    during, slowest, k = 0, 0.0, 0
    time.sleep(0.2)  # the large request is on the wire
    while not done.is_set():
        t0 = time.perf_counter()
        r = client.publish("small", [event("RS"[k % 2], f"e{k}", 1.0, 0.0, time=k)])
        assert r.accepted == 1 and r.statuses[0].code == "OK"
        assert client.stats("small").subscriptions
        assert health.Check(health_pb2.HealthCheckRequest(), timeout=30).status == health_pb2.HealthCheckResponse.SERVING
        slowest = max(slowest, time.perf_counter() - t0)
        during += 1 if not done.is_set() else 0
        k += 1
    worker.join()
    assert not errors, errors
    assert sum(client.stats("big").subscriptions.values()) == 150_000
    assert during >= 5, f"only {during} round trips on another topic during the large request (slowest {slowest:.2f}s)"
