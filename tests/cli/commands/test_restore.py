"""``hotjoin restore EXPORT_DIR NEW_TOPIC`` (``cli/commands/restore.py``) against a fake client
and exports written here: operations replayed in sequence order in runs of one kind (at most
``BATCH`` each), old subscription ids mapped to new ones, the export's options unless
overridden, and one-line refusals (not an export, a rejected event)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.cli.commands import restore
from hotjoin.cli.main import main

SUB = {"subscription_id": 0, "registered_seq": 0, "unsubscribed_seq": None, "kind": "band",
       "delivery": "affected", "snapshot": False, "subscriber": "a", "a_lo": None, "a_hi": None,
       "b_lo": -1.0, "b_hi": 1.0, "c_lo": None, "c_hi": None, "w": None}
EVENT = {"seq": 0, "op": "publish", "side": "R", "id": "", "key": 0.0, "value": 0.0, "time": 0,
         "payload": None}


def write_export(d: Path, ops: list[tuple[str, int]], **opts: Any) -> None:
    """An export of ``ops`` (kind, old subscription id for subscribe/unsubscribe) at seqs
    1, 2, ..."""
    d.mkdir(parents=True, exist_ok=True)
    subs: dict[int, dict[str, Any]] = {}
    events = []
    for seq, (kind, sid) in enumerate(ops, 1):
        if kind == "subscribe":
            subs[sid] = {**SUB, "subscription_id": sid, "registered_seq": seq,
                         "kind": ("band", "select", "window")[sid % 3], "w": 5}
        elif kind == "unsubscribe":
            subs[sid]["unsubscribed_seq"] = seq
        else:
            events.append({**EVENT, "seq": seq, "op": kind, "id": f"e{seq}", "time": seq})
    pq.write_table(pa.Table.from_pylist(list(subs.values()) or [SUB]).slice(0, len(subs)),
                   d / "subscriptions.parquet")
    pq.write_table(pa.Table.from_pylist(events or [EVENT]).slice(0, len(events)),
                   d / "events.parquet")
    (d / "topic.json").write_text(json.dumps({"lateness": 3, "retention": None, "strategy": {},
                                              "last_seq": len(ops), **opts}))


class FakeClient:
    """Records each call as (kind, items); hands out new subscription ids from 100."""

    def __init__(self, reject: str | None = None) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.next_id = 100
        self.reject = reject

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def create_topic(self, name: str, lateness: int, retention: int | None,
                     strategy: dict[str, str], max_advance: int = 0) -> None:
        self.calls.append(("create", (name, lateness, retention, strategy, max_advance)))

    def subscribe_many(self, topic: str, specs: list[Any]) -> list[int]:
        new = list(range(self.next_id, self.next_id + len(specs)))
        self.next_id += len(specs)
        self.calls.append(("subscribe", new))
        return new

    def unsubscribe(self, topic: str, sid: int) -> None:
        self.calls.append(("unsubscribe", [sid]))

    def publish_columns(self, topic: str, sides: list[str], ids: list[str], *cols: Any) -> Any:
        self.calls.append(("publish", ids))
        bad = [i for i, x in enumerate(ids) if x == self.reject]
        statuses = [SimpleNamespace(id=ids[i], index=i, reason="late") for i in bad]
        return SimpleNamespace(rejected=len(bad), statuses=statuses)

    def delete_events(self, topic: str, refs: list[Any]) -> None:
        self.calls.append(("delete", [r.id for r in refs]))

    def get_topic(self, name: str) -> Any:
        return SimpleNamespace(seq=sum(len(items) for kind, items in self.calls
                                       if kind != "create"))


OPS = st.lists(st.sampled_from(["subscribe", "unsubscribe", "publish", "delete"]), max_size=30)


@settings(max_examples=40, deadline=None)
@given(OPS, st.integers(1, 4))
def test_operations_replay_in_order_in_runs(tmp_path_factory: pytest.TempPathFactory,
                                            kinds: list[str], batch: int) -> None:
    d = tmp_path_factory.mktemp("export")
    ops, live, next_old = [], [], 0
    for k in kinds:
        if k == "unsubscribe":
            if not live:
                continue
            ops.append((k, live.pop(0)))
        elif k == "subscribe":
            ops.append((k, next_old))
            live.append(next_old)
            next_old += 1
        else:
            ops.append((k, -1))
    write_export(d, ops)
    fake = FakeClient()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(restore, "BATCH", batch)
        mp.setattr(restore, "client", lambda args: fake)
        assert main(["restore", str(d), "new", "--quiet"]) == 0
    calls = fake.calls[1:]
    flat = [kind for kind, items in calls for _ in items]
    assert flat == [k for k, _ in ops]  # every operation once, in seq order
    for (kind, items), (nxt, _) in zip(calls, [*calls[1:], ("end", [])], strict=False):
        assert 1 <= len(items) <= (1 if kind == "unsubscribe" else batch)
        if nxt == kind and kind != "unsubscribe":  # a run is split only at BATCH
            assert len(items) == batch
    new_of = dict(zip([sid for k, sid in ops if k == "subscribe"],
                      [n for kind, items in calls if kind == "subscribe" for n in items],
                      strict=True))
    assert [items[0] for kind, items in calls if kind == "unsubscribe"] == [
        new_of[sid] for k, sid in ops if k == "unsubscribe"]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    f = FakeClient(reject="e3")
    monkeypatch.setattr(restore, "client", lambda args: f)
    return f


def test_options_summary_and_overrides(fake: FakeClient, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    write_export(tmp_path, [("subscribe", 7), ("publish", -1)], max_advance=50,
                 strategy={"band": "BJ-SSI"})
    assert main(["restore", str(tmp_path), "new", "--quiet"]) == 0
    assert fake.calls[0] == ("create", ("new", 3, None, {"band": "BJ-SSI"}, 50))
    out = json.loads(capsys.readouterr().out)
    assert out["subscription_ids"] == {"7": 100} and out["published"] == 1
    assert out["operations"] == 2 and out["export_last_seq"] == 2
    fake.calls.clear()
    assert main(["restore", str(tmp_path), "new2", "--lateness", "9", "--retention", "4",
                 "--quiet"]) == 0
    assert fake.calls[0] == ("create", ("new2", 9, 4, {"band": "BJ-SSI"}, 50))


def test_refusals_are_one_line(fake: FakeClient, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["restore", str(tmp_path / "nothing"), "new"]) == 2
    err = capsys.readouterr().err
    assert "is not an export of hotjoin export (missing topic.json" in err
    write_export(tmp_path, [("publish", -1), ("publish", -1), ("publish", -1)])
    assert main(["restore", str(tmp_path), "new", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "event 'e3' of seq 3 was rejected (late); 0 events were published before it" in err
    assert err.count("\n") == 1
