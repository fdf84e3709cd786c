"""The client sub-commands against a live server: topic, subscribe, publish, listen, stats, export."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hotjoin.cli.main import main
from hotjoin.server.app import HotjoinServer


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_cli_round_trip(server: HotjoinServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = ["--target", server.target]
    _run(capsys, "topic", *t, "create", "cli", "--lateness", "100")
    assert json.loads(_run(capsys, "topic", *t, "list"))[0]["name"] == "cli"
    subs = tmp_path / "subs.jsonl"
    subs.write_text('{"kind": "band", "b": [-1, 1], "subscriber": "me"}\n'
                    '{"kind": "band", "b": [0, null], "delivery": "affected", "subscriber": "me"}\n')
    assert json.loads(_run(capsys, "subscribe", *t, "cli", "--file", str(subs)))["subscription_ids"] == [0, 1]
    assert json.loads(_run(capsys, "subscribe", *t, "cli", "--kind", "band", "--b", "-2:2", "--subscriber", "you"))["subscription_id"] == 2
    (tmp_path / "e.jsonl").write_text('{"side": "R", "id": "r1", "key": 1.0, "value": 0, "time": 1}\n')
    (tmp_path / "e.csv").write_text("side,id,key,value,time\nS,s1,1.5,0,2\nS,s2,9,0,4\n")
    pq.write_table(pa.table({"side": ["S"], "id": ["s3"], "key": [0.5], "value": [0.0], "time": [3]}),
                   tmp_path / "e.parquet")
    for f in ("e.jsonl", "e.csv", "e.parquet"):
        out = json.loads(_run(capsys, "publish", *t, "cli", str(tmp_path / f), "--quiet"))
        assert out["rejected"] == 0 and out["accepted"] == out["sent"]
    lines = _run(capsys, "listen", *t, "cli", "--subscriber", "me", "--count", "3").splitlines()
    got = [json.loads(x)["match"] for x in lines if "match" in json.loads(x)]
    assert [(m["subscription_id"], m["seq"]) for m in got] == [(0, 5), (1, 5), (1, 6)]
    stats = json.loads(_run(capsys, "stats", *t, "cli"))
    assert stats["tuples"] == {"R": 1, "S": 3}
    assert main(["stats", *t, "nope"]) == 1
    assert "NOT_FOUND: unknown topic 'nope'" in capsys.readouterr().err
    out = json.loads(_run(capsys, "export", "cli", "--data-dir", str(server.registry.data_dir),
                          "--out", str(tmp_path / "x")))
    assert out["events"] == 4 and out["subscriptions"] == 3
