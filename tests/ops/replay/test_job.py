"""The replay on Spark (local[2]): equal to the oracle and to what a real server delivered.

One SparkSession for the module (JVM start ≈ 10–15 s); each replay is a small job of ~1 s.

- random logs of every kind (deletes, disorder, retention, a hot key, subscription changes,
  a compacted export) replayed on Spark equal the oracle's deliveries as a multiset;
- the band-border-at-a-shard-boundary edge case on Spark tasks;
- the online server: a random workload through the gRPC client, every message a live listener
  received, ``hotjoin export``, ``hotjoin replay`` → the same messages (pairs, and signed counts
  for AFFECTED subscriptions), for the full log and again for the log compacted at shutdown;
- ``hotjoin replay``'s command line: summary line, output, one-line errors.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from hotjoin.ops.replay.log import read_export
from ops.replay.test_log import as_rows, edge_case_log, edge_plan, random_log

if shutil.which("java") is None and not __import__("os").environ.get("JAVA_HOME"):
    pytest.skip("no Java runtime (scripts/setup installs one)", allow_module_level=True)


def _quiet(msg: str) -> None:
    pass


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from hotjoin.ops.replay.job import spark_session

    s = spark_session("local[2]", {"spark.sql.shuffle.partitions": "2",
                                   "spark.default.parallelism": "2"})
    yield s
    s.stop()


def _replay(spark: Any, export: Path, out: Path, **kw: Any) -> tuple[dict[str, Any], Counter]:
    from hotjoin.ops.replay.job import replay_spark

    log = read_export(export / "events.parquet", export / "subscriptions.parquet")
    summary = replay_spark(spark, log, str(out), progress=_quiet, worker_progress=False, **kw)
    return summary, as_rows(pq.read_table(out))


@pytest.mark.parametrize("seed,kinds,retention,hot,compacted", [
    (1, ("band",), None, 0.0, False),
    (2, ("select",), 5, 0.7, False),
    (3, ("window",), 6, 0.0, True),
    (4, ("band", "select", "window"), 5, 0.7, False),
    (5, ("band", "select", "window"), 4, 0.5, True),
    (6, ("interval",), None, 0.5, False),
    (7, ("band", "select", "window", "interval"), 6, 0.3, True),
])
def test_spark_replay_equals_oracle(spark: Any, tmp_path: Path, seed: int, kinds: tuple[str, ...],
                                    retention: int | None, hot: float, compacted: bool) -> None:
    g = random_log(seed, kinds=kinds, n_ops=300, lateness=2, retention=retention, hot=hot,
                   cut_at=0.4 if compacted else None)
    export = g.write(tmp_path / "export", compacted=compacted)
    summary, got = _replay(spark, export, tmp_path / "out", shards=3, skew=0.3)
    assert got == g.expected_after(g.compact_state[0] if compacted else None)
    assert summary["plan"]["cells"] >= 3
    if hot:
        assert summary["plan"]["hot_keys"], "the hot key was not split"


def test_spark_band_border_at_shard_boundary(spark: Any, tmp_path: Path) -> None:
    export, expected = edge_case_log(tmp_path)
    summary, got = _replay(spark, export, tmp_path / "out", plan=edge_plan())
    assert summary["plan"]["cells"] == 3 and got == expected


# ---- against a real server ----------------------------------------------------------------------

Msg = tuple[int, int, Any]  # sign, count, pairs (Counter of (r, s)) or None for AFFECTED


def _workload(client: Any, seed: int, n_ops: int = 260) -> set[int]:
    """Random operations of all kinds on topic "t" through the gRPC client (late, duplicate and
    not-found ones included: the server rejects them); returns the AFFECTED subscription ids."""
    from hotjoin.clients.client import band, event, ref, select, window
    from hotjoin.proto import hotjoin_pb2 as pb

    rnd = random.Random(seed)
    affected: set[int] = set()
    stored: dict[str, set[str]] = {"R": set(), "S": set()}
    live: list[int] = []
    clock = 0
    for _ in range(n_ops):
        r = rnd.random()
        if r < 0.12:
            delivery = "affected" if rnd.random() < 0.35 else "pairs"
            snap = rnd.random() < 0.3
            a = tuple(sorted(round(rnd.uniform(0, 10), 1) for _ in range(2)))
            c = tuple(sorted(round(rnd.uniform(0, 10), 1) for _ in range(2)))
            kind = rnd.choice(("band", "select", "window"))
            if kind == "band":
                b = tuple(sorted(rnd.choice((-2.0, -0.5, 0.0, 0.1, 0.2, 1.0, 2.5)) for _ in range(2)))
                spec = band(b, a, c, delivery=delivery, snapshot=snap, subscriber="s")
            elif kind == "select":
                spec = select(a, c, delivery=delivery, snapshot=snap, subscriber="s")
            else:
                spec = window(a, c, rnd.randint(0, 6), delivery=delivery, snapshot=snap,
                              subscriber="s")
            sid = client.subscribe("t", spec)
            live.append(sid)
            if delivery == "affected":
                affected.add(sid)
        elif r < 0.8:
            batch = []
            for _ in range(rnd.randint(1, 6)):
                side = rnd.choice("RS")
                clock += rnd.randint(-1, 3)
                key = 0.1 if rnd.random() < 0.4 else rnd.choice((0.0, 0.2, 0.3, 1.0, 1.1, 2.2, 3.0))
                batch.append(event(side, f"{side}{rnd.randint(0, 40)}", key,
                                   round(rnd.uniform(0, 10), 1), time=clock - rnd.randint(0, 4)))
            resp = client.publish("t", batch)
            for e, st in zip(batch, resp.statuses, strict=True):
                if st.code == "OK":
                    stored["R" if e.side == pb.SIDE_R else "S"].add(e.id)
        elif r < 0.92:
            side = rnd.choice("RS")
            if stored[side]:
                eid = rnd.choice(sorted(stored[side]))
                client.delete_events("t", [ref(side, eid)])  # not_found once retention dropped it
                stored[side].discard(eid)
        elif live:
            client.unsubscribe("t", live.pop(rnd.randrange(len(live))))
    return affected


def _messages_from_rows(rows: Counter, affected: set[int], after: int = 0,
                        ) -> dict[tuple[int, int], Msg]:
    """What a listener receives for the replay's rows: one message per (subscription, seq)."""
    by: dict[tuple[int, int], list] = defaultdict(list)
    for (sid, sign, r, s, seq), n in rows.items():
        if seq > after:
            by[(sid, seq)] += [(sign, r, s)] * n
    out: dict[tuple[int, int], Msg] = {}
    for k, items in by.items():
        signs = {x[0] for x in items}
        assert len(signs) == 1, f"mixed signs in one operation {k}"
        pairs = None if k[0] in affected else Counter((r, s) for _, r, s in items)
        out[k] = (signs.pop(), len(items), pairs)
    return out


def test_replay_equals_what_the_online_server_delivered(spark: Any, tmp_path: Path) -> None:
    from hotjoin.clients.client import HotjoinClient, select
    from hotjoin.server.app import HotjoinServer
    from hotjoin.server.export import export_topic

    data = tmp_path / "data"
    srv = HotjoinServer(data_dir=data, port=0, buffer_capacity=100_000).start()
    live: dict[tuple[int, int], Msg] = {}
    try:
        with HotjoinClient(srv.target, timeout=30) as client:
            client.create_topic("t", lateness=3, retention=12)
            client.subscribe("t", select((0.0, 10.0), (0.0, 10.0), subscriber="s"))
            stream = client.listen("t", subscriber="s")

            def consume() -> None:
                with contextlib.suppress(Exception):  # ends when cancelled
                    for resp in stream:
                        if resp.kind == "match":
                            m = resp
                            pairs = Counter(m.pairs) if m.pairs else None
                            live[(m.subscription_id, m.seq)] = (m.sign, m.count, pairs)

            listener = threading.Thread(target=consume, daemon=True)
            listener.start()
            affected = _workload(client, seed=8)
            export_topic(data, "t", tmp_path / "full")  # safe while the server runs
            summary, rows = _replay(spark, tmp_path / "full", tmp_path / "out-full", shards=3,
                                    skew=0.3)
            want = _messages_from_rows(rows, affected)
            deadline = time.monotonic() + 30
            while len(live) < len(want) and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)
            stream.cancel()
            listener.join(5)
            assert summary["deliveries"] > 50, "the workload formed too few pairs to mean much"
            assert any(v[0] == -1 for v in want.values()), "no delete retracted a pair"
            assert live == want
    finally:
        srv.stop(0)
    # the clean stop compacted the log (retention is set); replaying that export gives what was
    # delivered after the compaction point: nothing, as nothing happened after it
    export_topic(data, "t", tmp_path / "compacted")
    cut = read_export(tmp_path / "compacted" / "events.parquet",
                      tmp_path / "compacted" / "subscriptions.parquet").options.compacted_at_seq
    assert cut is not None, "the server did not compact its log at shutdown"
    summary, rows = _replay(spark, tmp_path / "compacted", tmp_path / "out-compacted", shards=2)
    assert summary["restored"] > 0 and summary["deliveries"] == 0
    assert not {k: v for k, v in live.items() if k[1] > cut}


# ---- command line -------------------------------------------------------------------------------


def test_cli_replay(spark: Any, tmp_path: Path, capsys: Any) -> None:
    from hotjoin.cli.main import main

    g = random_log(9, n_ops=200, retention=5, hot=0.5)
    export = g.write(tmp_path / "export")
    out = tmp_path / "out"
    rc = main(["replay", "--events", str(export / "events.parquet"), "--subscriptions",
               str(export / "subscriptions.parquet"), "--out", str(out), "--shards", "2",
               "--skew", "0.3", "--quiet"])
    assert rc == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("replayed ") and f"{len(g.expected):,} deliveries" in line, line
    assert as_rows(pq.read_table(out)) == g.expected_after()
    # a second run refuses the non-empty output directory, with one line and exit code 2
    rc = main(["replay", "--events", str(export / "events.parquet"), "--subscriptions",
               str(export / "subscriptions.parquet"), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("hotjoin replay: error:") and "--overwrite" in err
    assert len(err.splitlines()) == 1
    rc = main(["replay", "--events", str(tmp_path / "nope.parquet"), "--subscriptions",
               str(export / "subscriptions.parquet"), "--topic", str(export / "topic.json"),
               "--out", str(tmp_path / "o2"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "no such file" in err
    # a log the server could not have written fails inside a Spark task: exit 1, the seq named
    ev = pq.read_table(export / "events.parquet")
    rows = ev.to_pylist()
    last = {(r["side"], r["id"]): r for r in rows if r["op"] == "publish"}
    stored = next(r for r in reversed(rows) if r["op"] == "publish"
                  and not any(x["op"] == "delete" and x["id"] == r["id"] and x["side"] == r["side"]
                              and x["seq"] > r["seq"] for x in rows) and last[(r["side"], r["id"])] is r)
    bad_seq = max(r["seq"] for r in rows) + 1000
    rows.append(dict(stored, seq=bad_seq, time=stored["time"] + 10**6))  # a duplicate id
    pq.write_table(type(ev).from_pylist(rows, schema=ev.schema), export / "events.parquet")
    rc = main(["replay", "--events", str(export / "events.parquet"), "--subscriptions",
               str(export / "subscriptions.parquet"), "--out", str(tmp_path / "o3"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 1 and f"seq {bad_seq}: publish of" in err and len(err.splitlines()) == 1, err
