"""The command line with interval joins: ``hotjoin subscribe --kind interval`` (Allen and ISEQL
relations, raw endpoint ranges), subscription files with interval lines, ``hotjoin publish``
files with an ``end`` field, and ``hotjoin subscriptions`` showing the preset name (README,
"File formats"; docs/design.md, "Interval joins")."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from server_harness import engine_factory

from hotjoin.cli.commands.subscribe import interval_from_dict
from hotjoin.cli.main import main
from hotjoin.clients.client import HotjoinClient
from hotjoin.matcher.model import ALLEN_RELATIONS, IntervalJoin, Range
from hotjoin.server.app import HotjoinServer

_names = itertools.count()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HotjoinServer]:
    """An in-process server on a free loopback port."""
    srv = HotjoinServer(data_dir=tmp_path / "data", port=0, buffer_capacity=64,
                        engine_factory=engine_factory()).start()
    yield srv
    srv.stop(0)


@pytest.fixture
def topic() -> str:
    """A topic name no other test of the run uses."""
    return f"t{next(_names)}"


def _hotjoin(capsys: pytest.CaptureFixture[str], server: HotjoinServer, *argv: str
             ) -> tuple[int, str, str]:
    """Run ``hotjoin ARGV`` in process; its stdout and stderr as written through ``sys.stdout``
    and ``sys.stderr`` (redirected here, whichever capture owns the process's streams)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([argv[0], "--target", server.target, *argv[1:]])
        except SystemExit as e:  # argparse's own errors
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


def _create(server: HotjoinServer, topic: str) -> None:
    with HotjoinClient(server.target) as c:
        c.create_topic(topic, lateness=1000)


def _specs(server: HotjoinServer, topic: str) -> list[Any]:
    with HotjoinClient(server.target) as c:
        return [s.spec for s in c.list_subscriptions(topic)]


def test_subscribe_flags(server: HotjoinServer, topic: str,
                         capsys: pytest.CaptureFixture[str]) -> None:
    _create(server, topic)
    base = ("subscribe", topic, "--kind", "interval", "--subscriber", "bob", "--b", "0:0")
    runs = [
        (["--relation", "overlaps"], IntervalJoin.allen("overlaps", b=Range(0, 0))),
        (["--relation", "allen:during", "--a", "0:5"],
         IntervalJoin.allen("during", b=Range(0, 0), a=Range(0, 5))),
        (["--relation", "iseql:left_overlap", "--delta", "5", "--eps", "3"],
         IntervalJoin.iseql("left_overlap", delta=5, eps=3, b=Range(0, 0))),
        (["--relation", "iseql:before", "--delta", "1"],
         IntervalJoin.iseql("before", delta=1, b=Range(0, 0))),
        (["--ss=-2:2", "--ee", ":0"],
         IntervalJoin(Range(0, 0), ss=Range(-2, 2), ee=Range(None, 0))),
    ]
    for flags, _ in runs:
        code, out, err = _hotjoin(capsys, server, *base, *flags)
        assert code == 0, err
        assert "subscription_id" in json.loads(out)
    got = _specs(server, topic)
    assert got == [w for _, w in runs]
    assert [s.preset for s in got] == [w.preset for _, w in runs]
    code, out, _ = _hotjoin(capsys, server, "subscriptions", topic, "--table")
    assert code == 0
    lines = out.splitlines()
    assert "interval allen:overlaps b=[0:0]" in lines[1]
    assert "interval iseql:left_overlap(5,3)" in lines[3]
    assert lines[5].endswith("ss=[-2:2] ee=[:0]")


@pytest.mark.parametrize("flags,needle", [
    (["--relation", "sideways"], "unknown Allen relation 'sideways'"),
    (["--relation", "start_preceding"], "ISEQL joins are spelled iseql:NAME"),
    (["--relation", "iseql:left_overlap", "--delta", "5"], "iseql:left_overlap needs eps"),
    (["--relation", "iseql:start_preceding", "--delta", "1", "--eps", "2"],
     "iseql:start_preceding takes delta, not eps"),
    (["--relation", "iseql:before", "--delta", "0"], "delta must be >= 1"),
    (["--relation", "overlaps", "--delta", "1"], "takes no delta or eps"),
    (["--relation", "overlaps", "--ss", "0:1"], "not both"),
    (["--ss", "0.5:1"], "integers"),
    (["--delta", "3"], "delta and eps go with an ISEQL relation"),
    (["--ss", "3:1"], "lower bound"),
])
def test_subscribe_flag_errors(server: HotjoinServer, topic: str,
                               capsys: pytest.CaptureFixture[str], flags: list[str],
                               needle: str) -> None:
    _create(server, topic)
    code, _, err = _hotjoin(capsys, server, "subscribe", topic, "--kind", "interval",
                            "--subscriber", "bob", "--b", "0:0", *flags)
    assert code == 2 and needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert _specs(server, topic) == []


def test_subscribe_interval_needs_b_and_other_kinds_refuse_relation(
        server: HotjoinServer, topic: str, capsys: pytest.CaptureFixture[str]) -> None:
    _create(server, topic)
    code, _, err = _hotjoin(capsys, server, "subscribe", topic, "--kind", "interval",
                            "--subscriber", "bob", "--relation", "overlaps")
    assert code == 2 and "needs --b" in err
    code, _, err = _hotjoin(capsys, server, "subscribe", topic, "--kind", "band",
                            "--subscriber", "bob", "--b", "0:0", "--relation", "overlaps")
    assert code == 2 and "takes no --relation" in err


def test_subscription_file_with_interval_lines(server: HotjoinServer, topic: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    _create(server, topic)
    lines = [
        {"kind": "interval", "b": [0, 0], "relation": "meets"},
        {"kind": "interval", "b": [-1, 1], "relation": "iseql:during", "delta": 2, "eps": 0,
         "delivery": "affected"},
        {"kind": "interval", "b": [None, None], "se": [0, None], "es": [None, 10]},
        {"kind": "band", "b": [-1, 1]},
    ]
    f = tmp_path / "subs.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    code, out, err = _hotjoin(capsys, server, "subscribe", topic, "--file", str(f),
                              "--subscriber", "carol", "--quiet")
    assert code == 0, err
    assert json.loads(out)["subscription_ids"] == [0, 1, 2, 3]
    got = _specs(server, topic)
    assert got[0] == IntervalJoin.allen("meets", b=Range(0, 0))
    assert got[1].preset == "iseql:during(2,0)" and got[1].b == Range(-1, 1)
    assert got[2] == IntervalJoin(Range(), se=Range(0, None), es=Range(None, 10))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(lines[0]) + "\n" +
                   json.dumps({"kind": "interval", "b": [0, 0], "relation": "iseql:during"}) + "\n")
    code, _, err = _hotjoin(capsys, server, "subscribe", topic, "--file", str(bad),
                            "--subscriber", "carol")
    assert code == 2 and "bad.jsonl:2: iseql:during needs delta and eps" in err
    assert len(_specs(server, topic)) == 4  # all or nothing


@pytest.mark.parametrize("name", ALLEN_RELATIONS)
def test_every_allen_name_parses(name: str) -> None:
    assert interval_from_dict({"b": [0, 0], "relation": name}) == \
        IntervalJoin.allen(name, b=Range(0, 0))


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_publish_file_with_end(server: HotjoinServer, topic: str, tmp_path: Path, suffix: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    _create(server, topic)
    with HotjoinClient(server.target) as c:
        c.subscribe(topic, IntervalJoin.allen("overlaps", b=Range(0, 0)), subscriber="a")
    rows = [{"side": "R", "id": "r1", "key": 1.0, "value": 0.0, "time": 10, "end": 20},
            {"side": "S", "id": "s1", "key": 1.0, "value": 0.0, "time": 15, "end": 30},
            {"side": "S", "id": "s2", "key": 1.0, "value": 0.0, "time": 16, "end": None}]
    f = tmp_path / f"events{suffix}"
    if suffix == ".jsonl":
        f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif suffix == ".csv":
        f.write_text("side,id,key,value,time,end\n" + "".join(
            f"{r['side']},{r['id']},{r['key']},{r['value']},{r['time']},"
            f"{'' if r['end'] is None else r['end']}\n" for r in rows))
    else:
        pq.write_table(pa.Table.from_pylist(rows), f)
    code, out, err = _hotjoin(capsys, server, "publish", topic, str(f), "--quiet")
    assert code == 0, err
    assert json.loads(out)["accepted"] == 3
    with HotjoinClient(server.target) as c:
        stream = c.listen(topic, subscriber="a")
        pairs = []
        for m in stream:
            if m.kind == "caught_up":
                break
            pairs += list(m.pairs)
        stream.cancel()
    assert pairs == [("r1", "s1")]  # s2 is a point inside r1: "during", not "overlaps"
    # publishing again: identical duplicates, the ends included
    code, out, _ = _hotjoin(capsys, server, "publish", topic, str(f), "--quiet")
    assert code == 0 and json.loads(out)["identical_duplicates"] == 3


@pytest.mark.parametrize("row,needle", [
    ({"side": "R", "id": "r", "key": 1, "value": 0, "time": 10, "end": 9},
     "end 9 is before time 10"),
    ({"side": "R", "id": "r", "key": 1, "value": 0, "time": 10, "end": 9.5},
     "end must be an integer"),
])
def test_publish_file_bad_end(server: HotjoinServer, topic: str, tmp_path: Path,
                              capsys: pytest.CaptureFixture[str], row: dict[str, Any],
                              needle: str) -> None:
    _create(server, topic)
    f = tmp_path / "bad.jsonl"
    ok = {"side": "S", "id": "s", "key": 1, "value": 0, "time": 10, "end": 12}
    f.write_text(json.dumps(ok) + "\n" + json.dumps(row) + "\n")
    code, _, err = _hotjoin(capsys, server, "publish", topic, str(f))
    assert code == 2 and f"bad.jsonl:2: {needle}" in err and "nothing was published" in err
    with HotjoinClient(server.target) as c:
        assert c.stats(topic).seq == 0
