"""``hotjoin publish`` against a real server: strict event files and safe re-runs.

- A field other than side, id, key, value, time, payload, or a required field missing, in JSON
  lines, CSV or Parquet: exit 2, one line naming the file and the line (CSV header: line 1;
  Parquet: the schema or the row) and the field, and nothing published.
- A missing time is an error unless ``--server-time``.
- Publishing a file again: its events come back as identical duplicates, exit 0; an event whose
  content changed is a conflict, exit 1.
- A failure part-way (a batch refused) says how many events, through which line, were
  acknowledged; running the command again completes the file.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_harness import engine_factory

from hotjoin.cli.commands import publish
from hotjoin.cli.main import main
from hotjoin.clients.client import HotjoinClient
from hotjoin.server.app import HotjoinServer
from hotjoin.server.quotas import Limits

ROWS: list[dict[str, Any]] = [
    {"side": "S", "id": "s1", "key": 100.0, "value": 2.0, "time": 1000},
    {"side": "R", "id": "r1", "key": 98.5, "value": 1.0, "time": 1002, "payload": "order 17"},
    {"side": "R", "id": "r2", "key": 101.0, "value": 4.0, "time": 1003},
    {"side": "S", "id": "s2", "key": 181.5, "value": 0.5, "time": 1005},
]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HotjoinServer]:
    """An in-process server (one per test: a process holds one server's metrics at a time)."""
    srv = HotjoinServer(data_dir=tmp_path / "data", port=0, engine_factory=engine_factory()).start()
    yield srv
    srv.stop(0)


_n = iter(range(10**6))


@pytest.fixture
def topic(server: HotjoinServer) -> str:
    """A fresh topic holding one event (seq 1), so "nothing published" is seq staying 1."""
    name = f"t{next(_n)}"
    with HotjoinClient(server.target) as c:
        c.create_topic(name, lateness=100)
        c.publish_columns(name, ["S"], ["before"], [0.0], [0.0], [900])
    return name


def _seq(server: HotjoinServer, topic: str) -> int:
    with HotjoinClient(server.target) as c:
        return c.get_topic(topic).seq


def _hotjoin(capsys: pytest.CaptureFixture[str], server: HotjoinServer, *argv: str
             ) -> tuple[int, str, str]:
    """Run ``hotjoin publish ARGV`` in process; its stdout and stderr (redirected here,
    whichever capture owns the process's streams)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["publish", "--target", server.target, *argv])
    return code, out.getvalue(), err.getvalue()


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    """``rows`` as JSON lines, CSV (header: the union of the keys, in order) or Parquet."""
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        cols = list(dict.fromkeys(k for r in rows for k in r))
        if path.suffix == ".csv":
            cell = lambda v: "" if v is None else str(v)  # noqa: E731
            lines = [",".join(cols)] + [",".join(cell(r.get(c)) for c in cols) for r in rows]
            path.write_text("\n".join(lines) + "\n")
        else:
            pq.write_table(pa.table({c: [r.get(c) for r in rows] for c in cols}), path)
    return path


def _where(path: Path, line: int) -> str:
    """How an error names event ``line`` (1-based, after a CSV header) of ``path``."""
    if path.suffix == ".jsonl":
        return f"{path}:{line}:"
    if path.suffix == ".csv":
        return f"{path}:{line + 1}:"
    return f"{path}: row {line}:"


def _one_error(err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hotjoin publish: error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], (n, lines[0])


SUFFIXES = [".jsonl", ".csv", ".parquet"]


# ---- strict files: nothing is published ------------------------------------------------------


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_misspelt_field(server: HotjoinServer, topic: str, tmp_path: Path,
                        capsys: pytest.CaptureFixture[str], suffix: str) -> None:
    rows = [*ROWS[:2], {"side": "R", "id": "x", "key": 1, "value": 1, "tme": 5}]
    f = _write(tmp_path / f"typo{suffix}", rows)
    code, out, err = _hotjoin(capsys, server, topic, str(f))
    where = {".jsonl": f"{f}:3:", ".csv": f"{f}:1:", ".parquet": f"{f} (Parquet schema):"}[suffix]
    assert code == 2 and out == ""
    _one_error(err, where, "unknown field 'tme' (did you mean 'time'?)", "nothing was published")
    assert _seq(server, topic) == 1


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_extra_field(server: HotjoinServer, topic: str, tmp_path: Path,
                     capsys: pytest.CaptureFixture[str], suffix: str) -> None:
    rows = [ROWS[0], {**ROWS[1], "colour": "red"}, *ROWS[2:]]
    f = _write(tmp_path / f"extra{suffix}", rows)
    code, _, err = _hotjoin(capsys, server, topic, str(f))
    where = {".jsonl": f"{f}:2:", ".csv": f"{f}:1:", ".parquet": f"{f} (Parquet schema):"}[suffix]
    assert code == 2
    _one_error(err, where, "unknown field 'colour' (the fields are side, id, key, value, time, "
               "payload, end)")
    assert _seq(server, topic) == 1


@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("field", ["side", "key", "value"])
def test_missing_field(server: HotjoinServer, topic: str, tmp_path: Path,
                       capsys: pytest.CaptureFixture[str], suffix: str, field: str) -> None:
    rows = [dict(r) for r in ROWS]
    rows[2][field] = None  # the third event lacks it (a null / an empty cell)
    f = _write(tmp_path / f"missing{suffix}", rows)
    code, _, err = _hotjoin(capsys, server, topic, str(f))
    assert code == 2
    _one_error(err, _where(f, 3), f"missing field {field!r}")
    assert _seq(server, topic) == 1


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_missing_column(server: HotjoinServer, topic: str, tmp_path: Path,
                        capsys: pytest.CaptureFixture[str], suffix: str) -> None:
    rows = [{k: v for k, v in r.items() if k != "key"} for r in ROWS]
    f = _write(tmp_path / f"nokey{suffix}", rows)
    code, _, err = _hotjoin(capsys, server, topic, str(f))
    assert code == 2
    _one_error(err, _where(f, 1), "missing field 'key'")
    assert _seq(server, topic) == 1


@pytest.mark.parametrize(("line", "needle"), [
    ('{"side": "R", "id": "x", "key": 1, "value": 1, "time": 5.5}', "time must be an integer"),
    ('{"side": "R", "id": "x", "key": 1, "value": 1, "time": "5"}', "time must be an integer"),
    ('{"side": "R", "id": "x", "key": 1, "value": 1, "time": true}', "time must be an integer"),
    ('{"side": "R", "id": "x", "key": "1", "value": 1, "time": 5}', "key must be a number"),
    ('{"side": "R", "id": "x", "key": 1, "value": NaN, "time": 5}', "value must be finite"),
    ('{"side": "R", "id": "x", "key": 1e999, "value": 1, "time": 5}', "key must be finite"),
    ('{"side": "R", "id": 7, "key": 1, "value": 1, "time": 5}', "id must be a string"),
    ('{"side": "R", "id": "x", "key": 1, "value": 1, "time": 5, "payload": 3}',
     "payload must be a string"),
    ('{"side": "r", "id": "x", "key": 1, "value": 1, "time": 5}', "side must be R or S, got 'r'"),
    ('{"side": "R", "side": "S", "id": "x", "key": 1, "value": 1, "time": 5}',
     "field 'side' appears twice"),
    ('{"side": "R", "id": "x", "key": 1, "value": 1, "time": 9223372036854775808}',
     "does not fit in 64 bits"),
    ('["R", "x", 1, 1, 5]', "expected a JSON object"),
    ('{"side": "R", "id": "x", key: 1}', "not valid JSON"),
])
def test_bad_json_line_sends_nothing(server: HotjoinServer, topic: str, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str], line: str,
                                     needle: str) -> None:
    f = tmp_path / "bad.jsonl"
    good = "".join(json.dumps(r) + "\n" for r in ROWS)
    f.write_text(good + "\n" + line + "\n" + good)  # the bad line is line 6
    code, out, err = _hotjoin(capsys, server, topic, str(f))
    assert code == 2 and out == ""
    _one_error(err, f"{f}:6:", needle)
    assert _seq(server, topic) == 1


@pytest.mark.parametrize(("text", "needle"), [
    ("side,id,key,value,time\nR,x,1,1,5\nR,y,1,1,5,surplus\n", ":3: more cells than the header"),
    ("side,id,key,value,time\nR,x,1,1,5\nR,y,1,1,5.0\n", ":3: time must be an integer, got '5.0'"),
    ("side,id,key,value,time\nR,x,1,1,5\nR,y,one,1,5\n", ":3: key must be a number, got 'one'"),
    ("side,id,key,value,time,key\nR,x,1,1,5,1\n", ":1: field 'key' appears twice"),
    ("side,id,key,value,time\nR,x,1,1,5\nR,y,1,nan,5\n", ":3: value must be finite"),
])
def test_bad_csv_sends_nothing(server: HotjoinServer, topic: str, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str], text: str, needle: str) -> None:
    f = tmp_path / "bad.csv"
    f.write_text(text)
    code, _, err = _hotjoin(capsys, server, topic, str(f))
    assert code == 2
    _one_error(err, f"{f}{needle}")
    assert _seq(server, topic) == 1


def test_csv_ids_are_text(server: HotjoinServer, topic: str, tmp_path: Path,
                          capsys: pytest.CaptureFixture[str]) -> None:
    """Only an empty cell is a missing id: "NA" and "null" are ids, not server-assigned."""
    f = tmp_path / "ids.csv"
    f.write_text("side,id,key,value,time\nR,NA,1,1,950\nR,null,1,1,950\n")
    code, out, _ = _hotjoin(capsys, server, topic, str(f), "--quiet")
    assert code == 0 and json.loads(out)["accepted"] == 2
    engine = server.registry.get(topic).engine
    assert engine.get_event("R", "NA") is not None and engine.get_event("R", "null") is not None


def test_pandas_index_column_is_not_a_field(server: HotjoinServer, topic: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    table = pa.table({c: [r.get(c) for r in ROWS] for c in ("side", "id", "key", "value", "time")})
    meta = {b"pandas": json.dumps({"index_columns": ["__index_level_0__"]}).encode()}
    table = table.append_column("__index_level_0__", pa.array([7, 8, 9, 10]))
    table = table.replace_schema_metadata(meta)
    pq.write_table(table, tmp_path / "df.parquet")
    code, out, _ = _hotjoin(capsys, server, topic, str(tmp_path / "df.parquet"), "--quiet")
    assert code == 0 and json.loads(out)["accepted"] == 4


def test_file_the_columnar_reader_refuses_goes_row_by_row(
        server: HotjoinServer, topic: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A dictionary-encoded side column (pandas' category) is valid, and published row by row;
    re-publishing it gives identical duplicates in that form too."""
    table = pa.table({c: [r.get(c) for r in ROWS] for c in ("side", "id", "key", "value", "time")})
    table = table.set_column(0, "side", table.column("side").dictionary_encode())
    pq.write_table(table, tmp_path / "cat.parquet")
    assert not publish.check_file(str(tmp_path / "cat.parquet"), "cat.parquet", 10, False).columnar
    code, out, _ = _hotjoin(capsys, server, topic, str(tmp_path / "cat.parquet"), "--quiet")
    assert code == 0 and json.loads(out)["accepted"] == 4
    code, out, _ = _hotjoin(capsys, server, topic, str(tmp_path / "cat.parquet"), "--quiet")
    assert code == 0 and json.loads(out)["identical_duplicates"] == 4
    assert _seq(server, topic) == 5


# ---- time ------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_missing_time_needs_server_time(server: HotjoinServer, topic: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str], suffix: str) -> None:
    rows = [dict(r) for r in ROWS]
    rows[1]["time"] = None
    f = _write(tmp_path / f"notime{suffix}", rows)
    code, _, err = _hotjoin(capsys, server, topic, str(f))
    assert code == 2
    _one_error(err, _where(f, 2), "missing field 'time'", "--server-time")
    assert _seq(server, topic) == 1

    # times an hour ago: the time-less r1 takes the server's clock, which moves the watermark
    # to now; the timed events keep their times, so r2 and s2, after it in the file, are late
    t0 = time.time_ns() // 1_000_000
    for r in rows:
        if r["time"] is not None:
            r["time"] += t0 - 3_600_000
    _write(f, rows)
    fresh = f"{topic}-now"
    with HotjoinClient(server.target) as c:
        c.create_topic(fresh, lateness=100)
    code, out, _ = _hotjoin(capsys, server, fresh, str(f), "--server-time", "--quiet",
                            "--allow-rejections")
    t1 = time.time_ns() // 1_000_000
    assert code == 0 and json.loads(out)["accepted"] == 2
    engine = server.registry.get(fresh).engine
    assert engine.get_event("S", "s1").time == rows[0]["time"]
    assert t0 <= engine.get_event("R", "r1").time <= t1
    assert engine.get_event("R", "r2") is None


def test_absent_time_field_with_server_time(server: HotjoinServer, topic: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "clock.csv"
    f.write_text("side,id,key,value\nR,a,1,1\nS,b,1,1\n")
    code, _, err = _hotjoin(capsys, server, topic, str(f))
    assert code == 2
    _one_error(err, f"{f}:2:", "missing field 'time'")
    fresh = f"{topic}-now"  # without the event at time 900: now is within its max_advance
    with HotjoinClient(server.target) as c:
        c.create_topic(fresh, lateness=100)
    code, out, _ = _hotjoin(capsys, server, fresh, str(f), "--server-time", "--quiet")
    assert code == 0 and json.loads(out)["accepted"] == 2


# ---- re-running ------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_republish_is_identical(server: HotjoinServer, topic: str, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str], suffix: str) -> None:
    f = _write(tmp_path / f"events{suffix}", ROWS)
    code, out, _ = _hotjoin(capsys, server, topic, str(f), "--quiet")
    assert code == 0
    first = json.loads(out)
    assert (first["accepted"], first["rejected"], first["identical_duplicates"]) == (4, 0, 0)
    seq = _seq(server, topic)

    code, out, err = _hotjoin(capsys, server, topic, str(f))
    again = json.loads(out)
    assert code == 0, err
    assert (again["sent"], again["accepted"], again["rejected"]) == (4, 0, 4)
    assert again["identical_duplicates"] == 4 and again["rejections"] == []
    assert err.strip().splitlines()[-1] == \
        "4 events were already published (identical duplicates), skipped"
    assert _seq(server, topic) == seq

    changed = [dict(r) for r in ROWS]
    changed[2]["value"] = 5.0
    _write(f, changed)
    code, out, err = _hotjoin(capsys, server, topic, str(f), "--quiet")
    got = json.loads(out)
    assert code == 1 and (got["rejected"], got["identical_duplicates"]) == (4, 3)
    assert got["rejections"] == [{"id": "r2", "reason": "event R/r2 already exists"}]
    _one_error(err, "1 of 4 events rejected (first: 'r2': event R/r2 already exists)",
               "3 events were already published (identical duplicates)")
    assert _seq(server, topic) == seq


def test_republish_quiet_and_allowed(server: HotjoinServer, topic: str, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    f = _write(tmp_path / "events.jsonl", ROWS[:1])
    assert _hotjoin(capsys, server, topic, str(f), "--quiet")[0] == 0
    code, out, err = _hotjoin(capsys, server, topic, str(f), "--quiet")
    assert code == 0 and err == "" and json.loads(out)["identical_duplicates"] == 1
    code, _, err = _hotjoin(capsys, server, topic, str(f))
    assert code == 0
    assert err.strip() == "1 event was already published (identical duplicates), skipped"


# ---- failure part-way ------------------------------------------------------------------------


def test_refused_batch_then_rerun_completes(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A publish rate of 10 events (and almost no refill): of 12 events in batches of 4, two
    batches pass and the third is refused; a re-run on an unlimited server completes the file."""
    data = tmp_path / "data"
    rows = [{"side": "RS"[i % 2], "id": f"e{i}", "key": float(i), "value": 0.0, "time": 1000 + i}
            for i in range(12)]
    f = tmp_path / "twelve.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" + ("\n" if i == 3 else "")
                         for i, r in enumerate(rows)))
    srv = HotjoinServer(data_dir=data, port=0, engine_factory=engine_factory(),
                        limits=Limits(publish_rate=0.001, publish_burst=10)).start()
    try:
        with HotjoinClient(srv.target) as c:
            c.create_topic("t", lateness=100)
        code, out, err = _hotjoin(capsys, srv, "t", str(f), "--batch-size", "4", "--quiet")
        assert code == 1 and out == ""
        # eight events acknowledged: the eighth is on line 9 (a blank line 5 before it)
        _one_error(err, "RESOURCE_EXHAUSTED", f"8 events (through {f}:9) were acknowledged "
                   "before the failure", "run the same command again to publish the rest")
        with HotjoinClient(srv.target) as c:
            assert c.get_topic("t").seq == 8
    finally:
        srv.stop(0)
    srv = HotjoinServer(data_dir=data, port=0, engine_factory=engine_factory()).start()
    try:
        code, out, err = _hotjoin(capsys, srv, "t", str(f), "--batch-size", "4", "--quiet")
        got = json.loads(out)
        assert code == 0, err
        assert (got["accepted"], got["identical_duplicates"], got["rejected"]) == (4, 8, 8)
        with HotjoinClient(srv.target) as c:
            assert c.get_topic("t").seq == 12
    finally:
        srv.stop(0)


def test_unreachable_server_says_nothing_was_acknowledged(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    f = _write(tmp_path / "events.jsonl", ROWS)
    code = main(["publish", "--target", "127.0.0.1:1", "t", str(f), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    _one_error(err, "UNAVAILABLE", "no event was acknowledged before the failure",
               "run the same command again")


def test_events_without_id_are_named_in_the_resume_hint(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    f = _write(tmp_path / "events.jsonl", [{**ROWS[0], "id": ""}, ROWS[1]])
    main(["publish", "--target", "127.0.0.1:1", "t", str(f), "--quiet"])
    _one_error(capsys.readouterr().err,
               "events without an id (1 in this file) get new ids on every run")


# ---- the checks, without a server: property against a brute-force definition ---------------

_MISSING = object()
_VALUES: dict[str, list[Any]] = {
    "side": ["R", "S", "Q", None, 1, _MISSING],
    "id": ["a", "", None, 3, _MISSING],
    "key": [1, 2.5, -0.0, "3", True, None, math.inf, _MISSING],
    "value": [0, 1e300, None, _MISSING],
    "time": [5, -7, 5.5, "5", None, True, 2**63, _MISSING],
    "payload": ["p", "", None, 4, _MISSING],
    "tme": [_MISSING, _MISSING, _MISSING, 1],
    "end": [_MISSING, _MISSING, None, 5, 6, 4, -7, 5.5, "9", True, 2**63],
}


def _valid(row: dict[str, Any], server_time: bool) -> bool:
    """Whether a JSON row is an event, straight from the README's table."""
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    t = row.get("time")
    e = row.get("end")
    end_ok = e is None or (isinstance(e, int) and not isinstance(e, bool) and e < 2**63
                           and isinstance(t, int) and not isinstance(t, bool) and e >= t)
    return (end_ok and set(row) <= set(publish.FIELDS) and row.get("side") in ("R", "S")
            and (row.get("id") is None or isinstance(row["id"], str))
            and number(row.get("key")) and number(row.get("value"))
            and ((t is None and server_time) or (isinstance(t, int) and not isinstance(t, bool)
                                                 and -2**63 <= t < 2**63))
            and (row.get("payload") is None or isinstance(row["payload"], str)))


_rows = st.lists(st.fixed_dictionaries({k: st.sampled_from(v) for k, v in _VALUES.items()}).map(
    lambda r: {k: v for k, v in r.items() if v is not _MISSING}), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_rows, server_time=st.booleans(), batch_size=st.sampled_from([1, 3, 1000]))
def test_check_file_names_the_first_bad_line(tmp_path: Path, rows: list[dict[str, Any]],
                                             server_time: bool, batch_size: int) -> None:
    """The columnar check and the row reader together accept exactly the valid files, and a
    file with a bad row is refused at its first bad line (the fast path never lets one by)."""
    from hotjoin.cli.main import CliError

    f = tmp_path / "p.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    bad = [i for i, r in enumerate(rows) if not _valid(r, server_time)]
    if bad:
        with pytest.raises(CliError) as e:
            publish.check_file(str(f), "p.jsonl", batch_size, server_time)
        assert str(e.value).startswith(f"p.jsonl:{bad[0] + 1}: "), (str(e.value), rows[bad[0]])
    else:
        found = publish.check_file(str(f), "p.jsonl", batch_size, server_time)
        assert found.events == len(rows)
        assert found.without_id == sum(1 for r in rows if not r.get("id"))


# ---- the checks, without a server ------------------------------------------------------------


def test_fields_constant_names_every_field() -> None:
    assert publish.FIELDS == ("side", "id", "key", "value", "time", "payload", "end")
    assert set(publish.REQUIRED) < set(publish.FIELDS)
