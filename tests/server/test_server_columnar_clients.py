"""Columnar clients: ``hotjoin publish`` through pyarrow, Arrow in and out (the asyncio client's
columns: ``tests/clients/test_aio.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hotjoin.cli.main import main
from hotjoin.clients.client import (
    HotjoinClient,
    MatchColumns,
    band,
    columns_from_arrow,
)
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.app import HotjoinServer


def test_arrow_in_and_out(client: HotjoinClient) -> None:
    client.create_topic("t")
    client.subscribe("t", band((-1, 1), subscriber="me"))
    table = pa.table({"side": ["S", "R", "R"], "id": ["s", None, "r2"], "key": [1.0, 1.5, 7.0],
                      "value": [0.0, 0.0, 0.0], "time": [1, 2, 3], "payload": ["x", None, "z"]})
    resp = client.publishing.Publish(pb.PublishRequest(topic="t", columns=columns_from_arrow(table)))
    assert (resp.accepted, [(a.index, a.id) for a in resp.assigned]) == (3, [(1, "auto-3")])  # raw stub
    for m in client.listen_columns("t", subscriber="me"):
        assert isinstance(m, MatchColumns)
        rb, pairs = m.to_arrow(), m.pairs_arrow()
        assert rb.to_pydict()["event_id"] == ["auto-3"] and rb.to_pydict()["count"] == [1]
        assert pairs.to_pydict() == {"subscription_id": [0], "seq": [3], "sign": [1], "r_id": ["auto-3"],
                                     "s_id": ["s"]}
        break
    with pytest.raises(ValueError, match="missing column"):
        columns_from_arrow(pa.table({"side": ["R"], "key": [1.0]}))


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_publish_command_streams_columns(server: HotjoinServer, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    t = ["--target", server.target]
    with HotjoinClient(server.target) as c:
        c.create_topic("p", lateness=10**12, max_advance=0)  # rows with the server's clock below
    n = 2500
    rng = np.random.default_rng(1)
    pq.write_table(pa.table({"side": np.where(rng.integers(0, 2, n) == 0, "R", "S"),
                             "id": [f"q{i}" for i in range(n)], "key": rng.normal(size=n),
                             "value": rng.normal(size=n), "time": np.arange(n)}), tmp_path / "e.parquet")
    code, out, _ = _cli(capsys, "publish", *t, "p", str(tmp_path / "e.parquet"), "--quiet", "--batch-size", "1000")
    assert code == 0 and json.loads(out)["accepted"] == n
    # CSV: rows with and without a time (server clock), an empty id, a duplicate
    (tmp_path / "e.csv").write_text("side,id,key,value,time\nS,c1,1.5,0,2\nR,,9,0,\nR,c2,9,0,\nS,c1,1,1,5\n")
    code, out, _ = _cli(capsys, "publish", *t, "p", str(tmp_path / "e.csv"), "--quiet", "--allow-rejections",
                        "--server-time")
    res = json.loads(out)
    assert code == 0 and (res["sent"], res["accepted"], res["rejected"]) == (4, 3, 1)
    assert "already exists" in res["rejections"][0]["reason"]
    (tmp_path / "e.jsonl").write_text('{"side": "S", "key": 2.0, "value": 0}\n'  # server clock, assigned id
                                      '{"side": "R", "id": "j1", "key": 1.0, "value": 0, "time": 2000000000000}\n')
    code, out, _ = _cli(capsys, "publish", *t, "p", str(tmp_path / "e.jsonl"), "--quiet", "--server-time")
    assert code == 0 and json.loads(out)["accepted"] == 2, out
    with HotjoinClient(server.target) as c:
        assert c.get_topic("p").seq == n + 3 + 2
    (tmp_path / "bad.csv").write_text("side,id,key,value,time\nS,b1,notanumber,0,2\n")
    code, _, err = _cli(capsys, "publish", *t, "p", str(tmp_path / "bad.csv"), "--quiet")
    assert code == 2 and "bad.csv:2: key must be a number" in err and "Traceback" not in err
    assert "nothing was published" in err
    (tmp_path / "nokey.csv").write_text("side,id,value\nS,b1,0\n")
    code, _, err = _cli(capsys, "publish", *t, "p", str(tmp_path / "nokey.csv"), "--quiet")
    assert code == 2 and "nokey.csv" in err and "'key'" in err


def test_batch_pairs_listen(client: HotjoinClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """PAIRS messages in MatchBatch columns; a message over the per-message limit still comes as
    split Match parts, and batch_rows expands a batch into the single messages."""
    from hotjoin.clients.client import batch_rows
    from hotjoin.server import service

    monkeypatch.setattr(service, "PAIRS_PER_MESSAGE", 2)
    client.create_topic("t")
    client.subscribe_many("t", [band((-1, 1), subscriber="me"), band((-1, 1), subscriber="me", delivery="affected")])
    client.publish_columns("t", ["S"] * 5, [f"s{i}" for i in range(5)], [1.0, 1.0, 1.0, 5.0, 5.0], [0.0] * 5,
                           [1] * 5)
    client.publish_columns("t", ["R", "R"], ["big", "small"], [1.0, 5.0], [0.0, 0.0], [2, 2])
    kinds, rows = [], []
    for resp in client.listen("t", subscriber="me", batch=True, batch_pairs=True):
        kind = resp.kind
        kinds.append(kind)
        if kind == "caught_up":
            break
        ms = batch_rows(resp) if kind == "matches" else [resp]
        rows += [(m.subscription_id, m.seq, m.count, sorted(m.pairs)) for m in ms]
    # the 3-pair message came as Match parts (joined by the client), everything else in batches
    assert kinds.count("match") == 1 and kinds[-1] == "caught_up" and set(kinds[:-1]) == {"match", "matches"}
    assert sorted(rows) == [(0, 8, 3, [("big", "s0"), ("big", "s1"), ("big", "s2")]),
                            (0, 9, 2, [("small", "s3"), ("small", "s4")]), (1, 8, 3, []), (1, 9, 2, [])]
