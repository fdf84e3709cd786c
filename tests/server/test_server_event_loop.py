"""The server's streams live on one asyncio event loop (``server/app.py``): an open Listen
stream holds no thread, a stream the client drops releases its listener and its quota slot, a
publish stream the client drops still makes every batch it applied durable and delivered, and a
slow listener never holds up publishers or other listeners."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest

from hotjoin.clients.client import HotjoinClient, event
from hotjoin.clients.convert import band
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server import service
from hotjoin.server.app import HotjoinServer
from hotjoin.server.settings import DeliveryOptions


def _until(cond: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _listen(client: HotjoinClient, subscriber: str) -> grpc.Call:
    """A raw Listen stream, read up to its ``caught_up``."""
    stream = client.listening.Listen(pb.ListenRequest(topic="t", subscriber=subscriber), timeout=60)
    assert next(stream).HasField("caught_up")
    return stream


def test_open_listen_streams_hold_no_thread_each(server: HotjoinServer, topic: HotjoinClient) -> None:
    streams = [_listen(topic, "me")]
    before = threading.active_count()
    streams += [_listen(topic, "me") for _ in range(29)]  # the default quota: 32 per principal
    _until(lambda: topic.stats("t").listeners == 30, "30 listeners attached")
    assert threading.active_count() - before < 8  # the sync server took one thread per stream
    for s in streams:
        s.cancel()
    _until(lambda: topic.stats("t").listeners == 0, "every cancelled stream detached")


def test_matches_reach_every_listener_of_many(topic: HotjoinClient) -> None:
    streams = [_listen(topic, "me") for _ in range(30)]
    topic.publish("t", [event("S", "s1", 1.0, 1.0, time=101)])
    for s in streams:
        msg = next(s)
        assert msg.HasField("match") or msg.HasField("matches")
        s.cancel()


def test_a_slow_listener_holds_up_neither_publishers_nor_other_listeners(topic: HotjoinClient) -> None:
    slow = _listen(topic, "me")  # never read again: its stream's window fills
    fast = _listen(topic, "me")
    pad = "x" * 900
    for k in range(80):  # ~4 MB of matches per listener, past gRPC's flow-control window
        topic.publish("t", [event("S", f"s{k}.{j}{pad}", 1.0, 1.0, time=101) for j in range(25)])
    got = 0
    while got < 80 * 25:
        msg = next(fast)
        got += 1 if msg.HasField("match") else len(msg.matches.subscription_ids)
    assert got == 80 * 25
    slow.cancel()
    fast.cancel()


def _batches(n: int, gate: threading.Event, prefix: str = "p") -> Iterator[pb.PublishRequest]:
    for k in range(n):
        yield pb.PublishRequest(topic="t", events=[
            pb.Event(side=pb.SIDE_S, id=f"{prefix}{k}", key=1.0, value=1.0, time=101)])
    gate.wait(30)  # the stream stays open until the test drops it


def test_a_dropped_publish_stream_keeps_every_batch_it_applied(server: HotjoinServer,
                                                                topic: HotjoinClient) -> None:
    gate = threading.Event()
    stream = topic.publishing.PublishStream(_batches(5, gate), timeout=60)
    acks = [next(stream) for _ in range(5)]
    assert [a.accepted for a in acks] == [1] * 5
    stream.cancel()
    gate.set()
    seq = topic.get_topic("t").seq
    assert topic.publish("t", [event("S", "after", 1.0, 1.0, time=101)]).accepted == 1
    assert topic.get_topic("t").seq == seq + 1
    # every acknowledged batch is in the match log: a new listener from the start gets them all
    stream = topic.listening.Listen(pb.ListenRequest(topic="t", subscriber="me", ignore_committed=True),
                                    timeout=60)
    ids = []
    for msg in stream:
        if msg.HasField("match"):
            ids.append(msg.match.event.id)
        if msg.HasField("caught_up"):
            break
    stream.cancel()
    assert [i for i in ids if i.startswith("p")] == [f"p{k}" for k in range(5)]
    assert "after" in ids


@pytest.mark.parametrize("drop_after", [0, 2])
def test_a_dropped_publish_stream_releases_its_slot(server: HotjoinServer, topic: HotjoinClient,
                                                   drop_after: int) -> None:
    """More streams are dropped than a principal may hold open (``--max-workers`` / 4 = 16):
    a new one is still accepted, so each dropped stream gave its slot back."""
    for i in range(20):
        gate = threading.Event()
        stream = topic.publishing.PublishStream(_batches(drop_after, gate, f"d{i}."), timeout=60)
        for _ in range(drop_after):
            next(stream)
        stream.cancel()
        gate.set()
    gate = threading.Event()
    gate.set()
    _until(lambda: _publishes(topic, gate), "a new publish stream accepted")


def _publishes(topic: HotjoinClient, gate: threading.Event) -> bool:
    try:
        acks = list(topic.publishing.PublishStream(_batches(1, gate, "new."), timeout=60))
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e  # a slot not yet released
        return False
    return [a.accepted for a in acks] == [1]


def test_a_write_to_a_stream_whose_client_left_is_not_logged_as_an_error(
        caplog: pytest.LogCaptureFixture) -> None:
    """gRPC's asyncio server reports such a write as an error with a traceback; the server
    drops that record (a client leaving is routine) and keeps every other one of the logger."""
    import hotjoin.server.app  # noqa: F401 - installs the filter

    logger = logging.getLogger("grpc._cython.cygrpc")
    with caplog.at_level(logging.INFO, logger="grpc._cython.cygrpc"):
        logger.error("ExecuteBatchError raised in core by servicer method [/hotjoin.v1.ListenService/Listen]")
        logger.error("Unexpected [RuntimeError] raised by servicer method [/x/y]")
    assert [r.getMessage() for r in caplog.records] == [
        "Unexpected [RuntimeError] raised by servicer method [/x/y]"]


def _always_linger(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every wake counted late (``Linger``): each stream waits the longest before each drain."""
    monkeypatch.setattr(service.Linger, "LATE_SECONDS", -1.0)
    monkeypatch.setattr(service.Linger, "AFTER", 1)
    monkeypatch.setattr(service.Linger, "FACTOR", 1e6)


def _columnar_streams(client: HotjoinClient, n: int) -> list[grpc.Call]:
    """``n`` columnar Listen streams of subscriber "a" (one AFFECTED band join), each read up to
    its ``caught_up``."""
    client.subscribe("t", band((-1, 1), subscriber="a", delivery="affected"))
    streams = []
    for _ in range(n):
        stream = client.listening.Listen(pb.ListenRequest(topic="t", subscriber="a", columnar=True),
                                         timeout=60)
        assert next(stream).HasField("caught_up")
        streams.append(stream)
    return streams


def _read_seqs(stream: grpc.Call, n: int) -> tuple[list[int], int]:
    """The seqs of the next ``n`` messages of a columnar stream, and the responses they took."""
    seqs: list[int] = []
    responses = 0
    while len(seqs) < n:
        msg = next(stream)  # a message that never comes: the stream's 60 s deadline
        responses += 1
        seqs += np.frombuffer(msg.matches.columns.seqs, dtype="<i8").tolist()
    return seqs, responses


def test_listeners_that_linger_under_load_still_get_every_message_once_in_order(
        topic: HotjoinClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every wake counted late (``Linger``): each stream waits before each drain and takes the
    batches pushed meanwhile (columnar batches, AFFECTED) in fewer responses; every message
    still arrives, once, in seq order, on every listener."""
    _always_linger(monkeypatch)  # every wait the longest (50 ms)
    streams = _columnar_streams(topic, 3)
    n = 40
    for k in range(n):
        topic.publish_columns("t", ["S"], [f"s{k}"], [1.0], [1.0], [101])
    for s in streams:
        seqs, responses = _read_seqs(s, n)
        assert seqs == sorted(set(seqs)) and len(seqs) == n
        assert responses < n  # batches joined into fewer responses
        s.cancel()


def test_a_listener_on_a_quiet_server_does_not_linger() -> None:
    """Wakes on time, or late only now and then (a collection, a checkpoint): no wait; late
    ``AFTER`` times in a row: a wait of ``FACTOR`` times the lateness, at most ``max_seconds``,
    until a wake on time; with ``max_seconds`` 0 (``--listen-linger-ms 0``) never a wait."""
    lg = service.Linger()
    late = service.Linger.LATE_SECONDS * 2
    assert [lg.after(0.0) for _ in range(10)] == [0.0] * 10
    assert [lg.after(late if k % 2 else 0.0) for k in range(10)] == [0.0] * 10
    lg.after(0.0)
    waits = [lg.after(late) for _ in range(service.Linger.AFTER + 2)]
    assert waits[:service.Linger.AFTER - 1] == [0.0] * (service.Linger.AFTER - 1)
    assert waits[service.Linger.AFTER - 1:] == [service.Linger.FACTOR * late] * 3
    assert lg.after(10.0) == lg.max_seconds == service.LINGER_MS / 1000
    assert lg.after(0.0) == 0.0
    never = service.Linger(0.0)
    assert [never.after(10.0) for _ in range(10)] == [0.0] * 10


def test_the_servers_listen_streams_linger_as_configured(data_dir: Path) -> None:
    for ms, want in ((0, 0.0), (250, 0.25)):
        srv = HotjoinServer(data_dir=data_dir / str(ms), port=0,
                            delivery=DeliveryOptions(linger_ms=ms)).start()
        try:  # the server's settings reach its Listen service
            assert service.ListenService(srv.registry, srv.quotas).linger_seconds == want
        finally:
            srv.stop(0)


def test_a_listener_behind_drains_again_at_once_while_lingering_is_on(
        data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every wake counted late, each wait a whole second: a listener whose drains are full (it
    starts behind a backlog of many drains' worth) takes drain after drain without waiting, and
    only its first wake, for messages pushed after it caught up, waits."""
    _always_linger(monkeypatch)
    srv = HotjoinServer(data_dir=data_dir, port=0,
                        delivery=DeliveryOptions(listener_bytes=2_000, linger_ms=1_000)).start()
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            c.create_topic("t", lateness=5)
            c.subscribe("t", band((-1, 1), subscriber="a", delivery="affected"))
            c.publish("t", [event("R", "r1", 1.0, 1.0, time=100)])
            n = 600  # drains of ~40 messages (listener_bytes / ROW_BYTES): 15 full drains
            c.publish_columns("t", ["S"] * n, [f"s{k}" for k in range(n)], [1.0] * n, [1.0] * n,
                              [101] * n)
            stream = c.listening.Listen(pb.ListenRequest(topic="t", subscriber="a", columnar=True,
                                                         default_after_seq=1), timeout=60)
            t0 = time.monotonic()
            got = 0
            while got < n:
                msg = stream.next()
                if msg.HasField("matches"):
                    got += len(np.frombuffer(msg.matches.columns.seqs, dtype="<i8"))
            assert got == n
            assert time.monotonic() - t0 < 2.5  # not a second per drain
            stream.cancel()
    finally:
        srv.stop(0)


@pytest.mark.parametrize("lingering", [False, True])
def test_every_push_reaches_a_waiting_stream_without_the_poll(
        topic: HotjoinClient, monkeypatch: pytest.MonkeyPatch, lingering: bool) -> None:
    """A wake calls the event loop only when it goes from clear to set (``Wake``): pushes that
    find it set (the stream lingering, draining or about to) call nothing. With the periodic
    look of a stream put an hour away, only wakes can bring a stream its messages: batches
    published one after another while three streams drain (and, with ``lingering``, wait
    before every drain) all arrive, once and in order, long before it."""
    monkeypatch.setattr(service, "LISTEN_POLL_SECONDS", 3600.0)
    if lingering:
        _always_linger(monkeypatch)
    streams = _columnar_streams(topic, 3)
    n = 150
    for k in range(n):
        topic.publish_columns("t", ["S"], [f"s{k}"], [1.0], [1.0], [101])
        if k % 50 == 49:
            time.sleep(0.2)  # streams idle and waiting, then woken again
    for s in streams:
        seqs, _ = _read_seqs(s, n)  # a lost wake: no message before the 60 s deadline
        assert seqs == sorted(set(seqs)) and len(seqs) == n
        s.cancel()
