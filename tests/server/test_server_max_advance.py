"""The topic option ``max_advance`` through the server: CreateTopic, the per-event and columnar
publish forms, ``topic.json`` across a restart, topics created before the option existed, and
``hotjoin topic create --max-advance`` (docs/reference/errors.md, docs/reference/persistence.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from server_harness import engine_factory

from hotjoin.cli.main import main
from hotjoin.clients import CallError
from hotjoin.clients.client import HotjoinClient, event
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.app import HotjoinServer
from hotjoin.server.registry import DEFAULT_MAX_ADVANCE

FAR = 10**12


def _reason(t: int, bound: int, clock: int) -> str:
    return (f"event time {t} is more than {bound} ahead of the topic's largest event time "
            f"{clock} (max_advance); nothing changed")


def _start(data_dir: Path) -> HotjoinServer:
    return HotjoinServer(data_dir=data_dir, port=0, engine_factory=engine_factory()).start()


def _statuses(c: HotjoinClient, topic: str, times: list[int]) -> list[tuple[str, str]]:
    """Publish one event per time (ids e<time>, per-event form): (code, reason) each."""
    resp = c.publish(topic, [event("R", f"e{t}", 1.0, 0.0, time=t) for t in times])
    return [(s.code, s.reason) for s in resp.statuses]


def _column_statuses(c: HotjoinClient, topic: str, times: list[int]) -> list[tuple[str, str]]:
    """The same through ``PublishRequest.columns`` (rejected events are listed by index)."""
    resp = c.publish_columns(topic, ["R"] * len(times), [f"e{t}" for t in times],
                             [1.0] * len(times), [0.0] * len(times), times)
    bad = {s.index: (s.code, s.reason) for s in resp.statuses}
    return [bad.get(i, ("OK", "")) for i in range(len(times))]


def test_far_event_is_invalid_and_moves_nothing(data_dir: Path) -> None:
    """time 5, then 10^12 (INVALID with the reason), then 6: accepted, not LATE; the columnar
    form answers the same; the option survives a restart and GetTopic shows it."""
    srv = _start(data_dir)
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            for name in ("t", "cols"):
                assert c.create_topic(name, lateness=0, max_advance=1000).max_advance == 1000
            # 1006 is the bound itself (clock 6 + 1000), 2007 one past the next bound
            times = [5, FAR, 6, 1006, 2007]
            want = [("OK", ""), ("INVALID", _reason(FAR, 1000, 5)), ("OK", ""), ("OK", ""),
                    ("INVALID", _reason(2007, 1000, 1006))]
            assert _statuses(c, "t", times) == want
            assert _column_statuses(c, "cols", times) == want
            for name in ("t", "cols"):
                assert c.get_topic(name).seq == 3
                assert c.stats(name).watermark == 1006
            # an event without a time takes the server's clock (~1.8e12 ms): too far ahead here
            resp = c.publish("t", [pb.Event(side=pb.SIDE_S, id="now", key=1.0, value=0.0)])
            assert resp.statuses[0].code == "INVALID"
            assert "ahead of the topic's largest event time 1006" in resp.statuses[0].reason
            assert c.get_topic("t").seq == 3
    finally:
        srv.stop(0)
    opts = json.loads((data_dir / "topics" / "t" / "topic.json").read_text())
    assert opts["max_advance"] == 1000
    srv = _start(data_dir)
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            assert c.get_topic("t").max_advance == 1000
            assert [t.max_advance for t in c.list_topics()] == [1000, 1000]
            assert _statuses(c, "t", [2007, 2006]) == [
                ("INVALID", _reason(2007, 1000, 1006)), ("OK", "")]
            assert c.get_topic("t").seq == 4
    finally:
        srv.stop(0)


def test_default_zero_and_old_topics(data_dir: Path) -> None:
    """Left out: one day in ms; 0: no bound; a topic.json without the key (a topic created by an
    earlier version) loads unbounded, so nothing changes for existing topics."""
    srv = _start(data_dir)
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            assert c.create_topic("d").max_advance == DEFAULT_MAX_ADVANCE == 86_400_000
            assert c.create_topic("free", max_advance=0).max_advance == 0
            c.create_topic("old")
            assert _statuses(c, "d", [5, 5 + DEFAULT_MAX_ADVANCE, 6 + 2 * DEFAULT_MAX_ADVANCE]) == [
                ("OK", ""), ("OK", ""),
                ("INVALID", _reason(6 + 2 * DEFAULT_MAX_ADVANCE, DEFAULT_MAX_ADVANCE,
                                     5 + DEFAULT_MAX_ADVANCE))]
            assert _statuses(c, "free", [5, FAR]) == [("OK", ""), ("OK", "")]
    finally:
        srv.stop(0)
    path = data_dir / "topics" / "old" / "topic.json"
    opts = json.loads(path.read_text())
    assert opts["max_advance"] == DEFAULT_MAX_ADVANCE
    del opts["max_advance"]
    path.write_text(json.dumps(opts))
    srv = _start(data_dir)
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            assert c.get_topic("old").max_advance == 0
            assert c.get_topic("d").max_advance == DEFAULT_MAX_ADVANCE
            assert _statuses(c, "old", [5, FAR, 6 + FAR]) == [("OK", "")] * 3
    finally:
        srv.stop(0)


@pytest.mark.parametrize(("value", "message"), [
    (-1, "max_advance must be >= 0 and <= 2^61, got -1"),
    (2**61 + 1, f"max_advance must be >= 0 and <= 2^61, got {2**61 + 1}"),
])
def test_create_refuses_an_out_of_range_max_advance(client: HotjoinClient, value: int,
                                                    message: str) -> None:
    with pytest.raises(CallError) as err:
        client.create_topic("bad", max_advance=value)
    assert err.value.code == "INVALID_ARGUMENT"
    assert err.value.message == message
    assert client.list_topics() == []
    assert client.create_topic("edge", max_advance=2**61).max_advance == 2**61


def test_cli_max_advance(server: HotjoinServer, capsys: pytest.CaptureFixture[str]) -> None:
    t = ["--target", server.target]
    assert main(["topic", *t, "create", "neg", "--max-advance", "-1"]) == 2
    err = capsys.readouterr().err
    assert err == "hotjoin topic: error: --max-advance must be >= 0 (0: no bound), got -1\n"
    assert main(["topic", *t, "create", "cli", "--max-advance", "500"]) == 0
    assert json.loads(capsys.readouterr().out)["max_advance"] == 500
    assert main(["topic", *t, "create", "dflt"]) == 0
    assert json.loads(capsys.readouterr().out)["max_advance"] == 86_400_000
    assert main(["topic", *t, "list"]) == 0
    assert [x["name"] for x in json.loads(capsys.readouterr().out)] == ["cli", "dflt"]
