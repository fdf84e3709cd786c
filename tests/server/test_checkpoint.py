"""Topic checkpoints: a columnar image of the engine and the topic's subscription metadata,
encoded, written atomically next to the log with a checksum, and read back on restart; a file
that does not verify reads as None (the topic then replays its whole log)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from hotjoin.clients.client import HotjoinClient, band, event
from hotjoin.matcher import Engine, Event, Range, SelectJoin
from hotjoin.server import checkpoint
from hotjoin.server.convert import SubMeta


def state(c: HotjoinClient, topic: str) -> tuple[Any, ...]:
    """What a restart must keep: sequence, subscriptions, stored tuples."""
    st = c.stats(topic)
    subs = [(s.subscription_id, s.registered_seq, s.spec, s.subscriber, s.delivery, s.snapshot)
            for s in c.list_subscriptions(topic)]
    return c.get_topic(topic).seq, st.seq, dict(st.tuples), dict(st.subscriptions), subs


def test_split_checkpoint_restores(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A columnar checkpoint (captured under the lock, encoded outside it) is loaded on restart —
    not discarded for a full replay — and gives the same subscriptions (owners, subscriber names,
    registered seqs) and tuples."""
    from server_harness import engine_factory

    from hotjoin.server import checkpoint
    from hotjoin.server.app import HotjoinServer

    data = tmp_path / "data"
    srv = HotjoinServer(data_dir=data, port=0, engine_factory=engine_factory(), checkpoint_min_ops=20).start()
    with HotjoinClient(srv.target) as c:
        c.create_topic("t")
        topic = srv.registry.get("t")
        topic.durability.checkpoint_idle_seconds = 0.3
        c.subscribe_many("t", [band((0, i), subscriber=f"s{i % 3}") for i in range(15)])
        c.publish("t", [event("RS"[i % 2], f"e{i}", float(i), 0.0, time=i) for i in range(10)])
        deadline = time.monotonic() + 30
        while topic.durability.checkpoints < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert topic.durability.checkpoints >= 1
        c.unsubscribe("t", 3)  # the log's tail after the checkpoint
        before = state(c, "t")
    srv.stop(0)
    got = checkpoint.read(data / "topics" / "t")
    assert got is not None and len(got[2].meta) == 15 and got[2].subs["sid"].tolist() == list(range(15))
    caplog.set_level("INFO", logger="hotjoin.topic")
    srv = HotjoinServer(data_dir=data, port=0, engine_factory=engine_factory(), checkpoint_min_ops=20).start()
    try:
        with HotjoinClient(srv.target) as c:
            assert state(c, "t") == before
    finally:
        srv.stop(0)
    assert "restored checkpoint at seq 25" in caplog.text and "unusable" not in caplog.text


@pytest.mark.parametrize("retention", [None, 40])
def test_columnar_checkpoint_roundtrip(retention: int | None) -> None:
    """``capture`` → ``encode`` → ``decode`` → bulk restore gives an engine that behaves like the
    original: same subscriptions (ids, kinds, unbounded ends, registration seqs), tuples with
    their payloads and seqs, clock; later publishes, deletes and unsubscribes match exactly."""
    from collections import Counter

    import numpy as np

    from hotjoin.matcher import BandJoin, Engine, Event, Range, SelectJoin, WindowJoin
    from hotjoin.server import checkpoint
    from hotjoin.server.convert import SubMeta

    e = Engine(lateness=3, retention=retention)
    specs = [BandJoin(b=Range(i % 7 - 3.0, i % 7 - 2.0), c=Range(None, 30.0)) for i in range(300)]
    specs += [SelectJoin(a=Range(float(i % 5), None)) for i in range(100)]
    specs += [WindowJoin(c=Range(0.0, 10.0), w=i % 4) for i in range(100)]
    sids = e.subscribe_many(specs)
    for sid in sids[::7]:
        e.unsubscribe(sid)
    e.publish_many([Event("RS"[i % 2], f"e{i}", float(i % 50), float(i % 13), i, payload=b"p%d" % i)
                    for i in range(3000)], match=False)
    meta = {sid: SubMeta(sid % 2 == 0, False, f"s{sid % 3}", int(e.cols.reg[sid])) for sid in e.subs}
    owners = {sid: "alice" for sid in list(e.subs)[::3]}
    image = checkpoint.capture(e, meta, owners, 0, 1234)
    back = checkpoint.decode(checkpoint.encode(image))
    assert back.meta == meta and back.owners == owners and back.seq == e.seq and back.log_ops == 1234
    f = Engine(lateness=3, retention=retention)
    f.load_state(checkpoint.engine_state(back))
    assert f.subs == e.subs and f.seq == e.seq and f.watermark == e.watermark
    assert f.cols.n == e.cols.n and f.get_event("S", "e2999") == e.get_event("S", "e2999")
    live = e.cols.active[: e.cols.n]
    assert np.array_equal(f.cols.active[: e.cols.n], live)
    for name in ("a_lo", "a_hi", "b_lo", "b_hi", "c_lo", "c_hi", "w", "reg", "snap", "selective",
                 "kind", "rec"):  # the vectorised restore writes every live row as subscribe did
        assert np.array_equal(getattr(f.cols, name)[: e.cols.n][live], getattr(e.cols, name)[: e.cols.n][live]), name
    for i in range(20):
        ev = Event("RS"[i % 2], f"new{i}", float(i % 9), float(i % 13), 3000 + i)
        assert Counter(f.publish(ev)) == Counter(e.publish(ev))
    for sid in (sids[1], sids[351], sids[451]):
        f.unsubscribe(sid)
        e.unsubscribe(sid)
    assert Counter(f.delete("R", "e2990")) == Counter(e.delete("R", "e2990"))
    ev = Event("S", "last", 1.0, 0.0, 6000)
    assert Counter(f.publish(ev)) == Counter(e.publish(ev))
    f.check_invariants()


def test_checkpoint_of_another_format_is_ignored(tmp_path: Path) -> None:
    """A file that is not a version-2 checkpoint (e.g. the pickled v1) reads as None: full replay."""
    from hotjoin.server import checkpoint

    (tmp_path / "checkpoint").write_bytes(b"HJCKPT\x00\x01" + b"\x00" * 64)
    assert checkpoint.read(tmp_path) is None
    (tmp_path / "checkpoint").write_bytes(b"junk")
    assert checkpoint.read(tmp_path) is None


def _small_image(seq_events: int = 5) -> tuple[Engine, checkpoint.Image]:
    e = Engine(lateness=1)
    sids = e.subscribe_many([SelectJoin(a=Range(0.0, None)), SelectJoin(a=Range(None, 2.0))])
    e.publish_many([Event("RS"[i % 2], f"e{i}", 1.0, float(i), i, payload=b"x%d" % i)
                    for i in range(seq_events)], match=False)
    meta = {sid: SubMeta(True, False, "sub", int(e.cols.reg[sid])) for sid in sids}
    return e, checkpoint.capture(e, meta, {sids[0]: "alice"}, 0, 7)


def _log(tmp_path: Path) -> Path:
    log = tmp_path / "log"
    log.write_bytes(b"ops")
    return log


def test_a_written_checkpoint_reads_back_with_its_seq_and_offset(tmp_path: Path) -> None:
    e, image = _small_image()
    checkpoint.write(tmp_path, checkpoint.encode(image), e.seq, 123, _log(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint", "log"]
    got = checkpoint.read(tmp_path)
    assert got is not None
    seq, offset, back = got
    assert (seq, offset) == (e.seq, 123) and back.seq == e.seq
    assert back.meta == image.meta and back.owners == image.owners and back.log_ops == 7
    f = Engine(lateness=1)
    f.load_state(checkpoint.engine_state(back))
    assert f.subs == e.subs and f.get_event("S", "e3") == e.get_event("S", "e3")


def test_no_checkpoint_reads_as_none_and_a_leftover_temp_file_is_removed(tmp_path: Path) -> None:
    (tmp_path / "checkpoint.tmp").write_bytes(b"half written")
    assert checkpoint.read(tmp_path) is None
    assert not (tmp_path / "checkpoint.tmp").exists()


@pytest.mark.parametrize("damage", ["flip a payload byte", "truncate", "wrong seq", "empty"])
def test_a_checkpoint_that_does_not_verify_reads_as_none(tmp_path: Path, damage: str) -> None:
    e, image = _small_image()
    seq = e.seq + 1 if damage == "wrong seq" else e.seq
    checkpoint.write(tmp_path, checkpoint.encode(image), seq, 0, _log(tmp_path))
    path = tmp_path / "checkpoint"
    data = bytearray(path.read_bytes())
    if damage == "flip a payload byte":
        data[-10] ^= 0xFF
    elif damage == "truncate":
        del data[-1:]
    elif damage == "empty":
        data.clear()
    path.write_bytes(bytes(data))
    assert checkpoint.read(tmp_path) is None


def test_set_aside_keeps_an_unusable_checkpoint_for_inspection(tmp_path: Path) -> None:
    assert checkpoint.set_aside(tmp_path) is None  # nothing to set aside
    (tmp_path / "checkpoint").write_bytes(b"junk")
    moved = checkpoint.set_aside(tmp_path)
    assert moved is not None and moved.parent == tmp_path
    assert moved.name.startswith("checkpoint.unusable-") and moved.read_bytes() == b"junk"
    assert not (tmp_path / "checkpoint").exists() and checkpoint.read(tmp_path) is None


def test_remove_deletes_the_checkpoint_and_its_temp_file_only(tmp_path: Path) -> None:
    for name in ("checkpoint", "checkpoint.tmp", "log"):
        (tmp_path / name).write_bytes(b"x")
    checkpoint.remove(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["log"]
    checkpoint.remove(tmp_path)  # nothing left to remove: no error
