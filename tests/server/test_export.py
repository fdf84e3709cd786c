"""Point-in-time copies: ``hotjoin export --until-seq`` on a live server, and ``hotjoin restore``
rebuilding a topic from an export into a new topic (docs/reference/persistence.md, "Backup and
restore"). The rebuilt topic is checked against the brute-force oracle fed the same operations."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
from server_harness import engine_factory

from hotjoin.clients.client import HotjoinClient, band, event, ref, select, window
from hotjoin.matcher.model import BandJoin, Range, SelectJoin, WindowJoin
from hotjoin.matcher.model import Event as MEvent
from hotjoin.matcher.oracle import OracleEngine
from hotjoin.server.app import HotjoinServer

SUBS = [(band((-1, 1), subscriber="a"), BandJoin(Range(-1, 1))),
        (select((0, 5), None, subscriber="b", delivery="affected"), SelectJoin(Range(0, 5), Range())),
        (window(None, None, 3, subscriber="a"), WindowJoin(Range(), Range(), 3))]


def hotjoin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "hotjoin"), *args],
                          capture_output=True, text=True, timeout=120)


def history(c: HotjoinClient) -> list[tuple[str, object]]:
    """Apply a mixed history to topic ``t``; returns it as oracle operations in order."""
    ops: list[tuple[str, object]] = []
    c.create_topic("t", lateness=5)
    for spec, sub in SUBS:
        c.subscribe("t", spec)
        ops.append(("subscribe", sub))
    evs = [("RS"[i % 2], f"e{i}", float(i % 4), float(i % 7), i) for i in range(40)]
    c.publish_columns("t", [e[0] for e in evs[:20]], [e[1] for e in evs[:20]],
                      [e[2] for e in evs[:20]], [e[3] for e in evs[:20]], [e[4] for e in evs[:20]])
    ops += [("publish", MEvent(*e)) for e in evs[:20]]
    assert c.delete_events("t", [ref("S", "e3")]).statuses[0].seq > 0
    ops.append(("delete", ("S", "e3")))
    c.unsubscribe("t", 1)
    ops.append(("unsubscribe", 1))
    c.publish("t", [event(*e) for e in evs[20:]])
    ops += [("publish", MEvent(*e)) for e in evs[20:]]
    return ops


def oracle_of(ops: list[tuple[str, object]], until: int) -> OracleEngine:
    o = OracleEngine(lateness=5)
    for kind, x in ops:
        if o.seq >= until:
            break
        if kind == "subscribe":
            o.subscribe(x)  # type: ignore[arg-type]
        elif kind == "publish":
            o.publish(x)  # type: ignore[arg-type]
        elif kind == "delete":
            o.delete(*x)  # type: ignore[misc]
        else:
            o.unsubscribe(x)  # type: ignore[arg-type]
    return o


def test_export_until_seq_then_restore_rebuilds_the_topic_as_it_was(tmp_path: Path) -> None:
    data = tmp_path / "data"
    srv = HotjoinServer(data_dir=data, port=0, engine_factory=engine_factory()).start()
    try:
        with HotjoinClient(srv.target, timeout=30) as c:
            ops = history(c)
            full = c.get_topic("t").seq
            for until in (14, 24, full):  # mid-columnar-batch, after the delete, everything
                out = tmp_path / f"export-{until}"
                p = hotjoin("export", "t", "--data-dir", str(data), "--out", str(out),
                            "--until-seq", str(until))  # the server is running
                assert p.returncode == 0, p.stderr
                assert json.loads(p.stdout)["last_seq"] == until
                seqs = pq.read_table(out / "events.parquet").column("seq").to_pylist()
                assert seqs and max(seqs) <= until
                new = f"copy{until}"
                p = hotjoin("restore", str(out), new, "--target", srv.target)
                assert p.returncode == 0, p.stderr
                summary = json.loads(p.stdout)
                o = oracle_of(ops, until)
                assert summary["seq"] == o.seq == until  # the export starts at seq 1
                st = c.stats(new)
                assert dict(st.tuples) == {s: len(o.stored(s)) for s in "RS"}
                assert st.watermark == o.watermark
                live = {s.subscription_id for s in c.list_subscriptions(new)}
                assert len(live) == len(dict(o.subscriptions()))
                assert c.get_topic(new).lateness == 5
                got = c.publish(new, [event("S", "probe", 2.0, 1.0, 45)])  # and it takes more
                assert got.accepted == 1 and got.statuses[0].seq == until + 1
            p = hotjoin("restore", str(tmp_path / f"export-{full}"), "copy14", "--target", srv.target)
            assert p.returncode == 1 and "ALREADY_EXISTS" in p.stderr
    finally:
        srv.stop(0)


def test_export_of_a_damaged_log_refuses_in_one_line_unless_it_stops_before(tmp_path: Path) -> None:
    data = tmp_path / "data"
    srv = HotjoinServer(data_dir=data, port=0, engine_factory=engine_factory()).start()
    with HotjoinClient(srv.target, timeout=30) as c:
        c.create_topic("t")
        for i in range(5):
            c.publish("t", [event("S", f"s{i}", 1.0, 0.0, time=i)])
    srv.stop(0)
    log = data / "topics" / "t" / "log"
    raw = bytearray(log.read_bytes())
    raw[raw.index(b"s3") + 1] ^= 0xFF
    log.write_bytes(bytes(raw))
    p = hotjoin("export", "t", "--data-dir", str(data), "--out", str(tmp_path / "e"))
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1
    assert "damaged" in p.stderr and "checksum mismatch" in p.stderr
    assert not (tmp_path / "e" / "events.parquet").exists()
    p = hotjoin("export", "t", "--data-dir", str(data), "--out", str(tmp_path / "e"), "--until-seq", "3")
    assert p.returncode == 0, p.stderr
    assert pq.read_table(tmp_path / "e" / "events.parquet").column("id").to_pylist() == ["s0", "s1", "s2"]
