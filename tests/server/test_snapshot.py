"""Log compaction's snapshot: a topic's state captured as columns, written as the head of a
compacted log and restored into a fresh engine that then behaves exactly like the original."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hotjoin.matcher import BandJoin, Engine, Event, Range, SelectJoin, WindowJoin
from hotjoin.server import snapshot
from hotjoin.server.convert import SubMeta
from hotjoin.server.log import MAGIC, read_log


def _engine(intervals: bool = False) -> tuple[Engine, dict[int, SubMeta], dict[int, str]]:
    e = Engine(lateness=2)
    specs = [SelectJoin(a=Range(float(i), None)) for i in range(4)]
    specs += [BandJoin(b=Range(-1.0, 1.0), c=Range(None, 8.0)), WindowJoin(c=Range(0.0, 9.0), w=2)]
    sids = e.subscribe_many(specs)
    e.unsubscribe(sids[1])
    evs = [Event("RS"[i % 2], f"e{i}", float(i % 3), float(i % 10), 10 + i, payload=b"p%d" % i,
                 **({"end": 10 + i + i % 4} if intervals else {}))
           for i in range(40)]
    e.publish_many(evs, match=False)
    e.delete("R", "e4")
    meta = {sid: SubMeta(sid % 2 == 0, sid == sids[0], f"s{sid}", int(e.cols.reg[sid]))
            for sid in e.subs}
    owners = {sids[0]: "alice", sids[5]: "bob"}
    return e, meta, owners


def _restore(tmp_path: Path, state: snapshot.State) -> tuple[Engine, dict[str, Any], list[Any]]:
    log = tmp_path / "log"
    log.write_bytes(snapshot.snapshot_bytes(state))
    header, batches = read_log(log)
    assert header is not None
    f = Engine(lateness=2)
    registered: list[Any] = []
    snapshot.restore(f, header, batches, lambda sid, m, owner: registered.append((sid, m, owner)))
    return f, header, registered


@pytest.mark.parametrize("intervals", [False, True], ids=["points", "intervals"])
def test_a_restored_snapshot_behaves_like_the_original(tmp_path: Path, intervals: bool) -> None:
    e, meta, owners = _engine(intervals)
    state = snapshot.capture(e, meta, e.lateness, owners)
    assert state.seq == e.seq and state.max_time == 49 and state.owners == owners
    f, header, registered = _restore(tmp_path, state)
    assert header["seq"] == e.seq and header["max_time"] == 49
    assert header["subscriptions"] == len(e.subs) == 5 and header["tuples"] == 39
    assert header["next_subscription_id"] == 6
    assert f.subs == e.subs and f.seq == e.seq and f.watermark == e.watermark
    assert snapshot.stored_count(f) == snapshot.stored_count(e) == 39
    assert {sid: (m, o) for sid, m, o in registered} == {
        sid: (meta[sid], owners.get(sid, "")) for sid in e.subs}
    for side in "RS":
        a, b = snapshot.tuples_of(e, side), snapshot.tuples_of(f, side)
        order_a, order_b = np.argsort(a.ids), np.argsort(b.ids)
        assert sorted(a.ids) == sorted(b.ids)
        for name in ("keys", "values", "times", "seqs"):
            assert np.array_equal(getattr(a, name)[order_a], getattr(b, name)[order_b]), name
        assert [a.payloads[i] for i in order_a] == [b.payloads[i] for i in order_b]
        assert (a.ends is None) == (b.ends is None) == (not intervals)
    assert f.get_event("S", "e39") == e.get_event("S", "e39")
    assert f.get_event("R", "e4") is None
    # the ids unsubscribed after the last live one stay unused: both give the next id
    assert f.subscribe(SelectJoin()) == e.subscribe(SelectJoin()) == 6
    for i in range(10):
        ev = Event("RS"[i % 2], f"n{i}", float(i % 3), float(i), 50 + i)
        assert Counter(f.publish(ev)) == Counter(e.publish(ev))
    assert Counter(f.delete("S", "e1")) == Counter(e.delete("S", "e1"))


def test_a_snapshot_is_split_into_frames_of_bounded_ops(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "OPS_PER_FRAME", 7)
    e, meta, owners = _engine()
    state = snapshot.capture(e, meta, e.lateness, owners)
    assert state.n_ops == 5 + 39
    data = snapshot.snapshot_bytes(state)
    assert data.startswith(MAGIC)
    f, header, _ = _restore(tmp_path, state)
    assert header["frames"] == -(-44 // 7) == 7
    assert f.subs == e.subs and snapshot.stored_count(f) == 39


def test_an_empty_topic_gives_a_header_without_frames(tmp_path: Path) -> None:
    e = Engine()
    state = snapshot.capture(e, {}, 0)
    assert (state.seq, state.max_time, state.n_ops) == (0, None, 0)
    log = tmp_path / "log"
    log.write_bytes(snapshot.snapshot_bytes(state))
    header, batches = read_log(log)
    assert header == {"format": 1, "seq": 0, "max_time": None, "next_subscription_id": 0,
                      "frames": 0, "subscriptions": 0, "tuples": 0}
    assert list(batches) == []
    f, _, registered = _restore(tmp_path, state)
    assert registered == [] and f.seq == 0 and snapshot.stored_count(f) == 0


def test_tuples_of_points_carry_no_ends() -> None:
    times = np.array([1, 2], dtype=np.int64)
    t = snapshot.Tuples("R", ["a", "b"], np.zeros(2), np.zeros(2), times, times, [b"", b""],
                        ends=times.copy())
    assert t.ends is None
    t = snapshot.Tuples("R", ["a", "b"], np.zeros(2), np.zeros(2), times, times, [b"", b""],
                        ends=np.array([1, 5]))
    assert t.ends is not None and t.columns()[0] == ["a", "b"]
    st = snapshot.load_state_input(3, 2, 4, {}, [t])
    assert st["seq"] == 3 and st["max_time"] == 2 and st["next_sid"] == 4
    assert st["ends"]["R"].tolist() == [1, 5] and len(st["tuples"]["R"]) == 6
    assert "ends" not in snapshot.load_state_input(0, None, 0, {}, [])
    assert json.dumps(snapshot.load_state_input(0, None, 0, {}, [])["tuples"]) == "{}"
