"""The replay's shards against the oracle, without Spark (the code every Spark task runs).

Random logs of every kind (interval joins with interval events among points) — deletes, disorder within lateness, retention, a hot key holding
most events, subscribe / unsubscribe / snapshot inside the log, compacted exports — replayed with
1–5 key-range shards and hot-key splitting must deliver exactly the oracle's deliveries
(subscription, sign, r, s, seq) as a multiset. Plus the engine's clock hook and the log reader's
errors.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from engine_harness import harness_settings
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.matcher import Engine, Event, Range, SelectJoin
from hotjoin.ops.replay.job import replay_in_process
from hotjoin.ops.replay.log import LogError, read_export
from hotjoin.ops.replay.worker import ReplayError
from ops.replay.test_log import as_rows, random_log

KINDS = st.sampled_from([("band",), ("select",), ("window",), ("band", "select", "window"),
                         ("interval",), ("band", "select", "window", "interval")])
TIMES = st.sampled_from([(0, None), (2, None), (3, 4), (1, 0), (5, 8)])  # (lateness, retention)


def _quiet(msg: str) -> None:
    pass


@harness_settings(150)
@given(seed=st.integers(0, 10**6), kinds=KINDS, times=TIMES, hot=st.sampled_from([0.0, 0.5, 0.8]),
       shards=st.integers(1, 5), skew=st.sampled_from([0.2, 0.5, 1.0]),
       compacted=st.booleans())
def test_sharded_replay_equals_oracle(seed: int, kinds: tuple[str, ...], times: tuple[int, int | None],
                                      hot: float, shards: int, skew: float, compacted: bool) -> None:
    lateness, retention = times
    g = random_log(seed, kinds=kinds, n_ops=160, lateness=lateness, retention=retention, hot=hot,
                   cut_at=0.5 if compacted else None)
    with tempfile.TemporaryDirectory() as d:
        p = g.write(Path(d), compacted=compacted)
        log = read_export(p / "events.parquet", p / "subscriptions.parquet")
    _, table = replay_in_process(log, None, shards=shards, skew=skew, progress=_quiet)
    cut = g.compact_state[0] if compacted and g.compact_state else None
    assert as_rows(table) == g.expected_after(cut)


def test_written_output_is_the_delivery_schema(tmp_path: Path) -> None:
    """``out`` gets part files + _replay.json + _SUCCESS; the dataset reads back as the rows."""
    g = random_log(5, n_ops=200, retention=5, hot=0.5)
    d = g.write(tmp_path / "x")
    log = read_export(d / "events.parquet", d / "subscriptions.parquet")
    summary, none = replay_in_process(log, str(tmp_path / "out"), shards=3, skew=0.3,
                                      progress=_quiet)
    assert none is None
    table = pq.read_table(tmp_path / "out")
    assert table.schema.names == ["subscription_id", "sign", "r_id", "s_id", "seq"]
    assert as_rows(table) == g.expected_after()
    assert summary["deliveries"] == table.num_rows == len(g.expected)
    assert (tmp_path / "out" / "_SUCCESS").exists()
    assert len(list((tmp_path / "out").glob("part-*.parquet"))) == summary["plan"]["cells"]
    with pytest.raises(FileExistsError):
        replay_in_process(log, str(tmp_path / "out"), progress=_quiet)
    replay_in_process(log, str(tmp_path / "out"), overwrite=True, progress=_quiet)
    assert as_rows(pq.read_table(tmp_path / "out")) == g.expected_after()


def test_advance_clock_sets_seq_and_expires_retention() -> None:
    """The one engine method the replay adds: next seq, topic-wide max time, retention."""
    e = Engine(lateness=1, retention=2)
    sid = e.subscribe(SelectJoin(a=Range(), c=Range()))
    e.advance_clock(10, None)
    e.publish(Event("R", "r", 1.0, 0.0, 5))
    assert e.seq == 10
    e.advance_clock(20, 6)  # another shard published up to time 6: W = 5, nothing expires yet
    assert e.watermark == 5 and len(e.tables["R"]) == 1
    out = e.publish(Event("S", "s", 1.0, 0.0, 6))
    assert e.seq == 20 and [(d.subscription_id, d.r_id, d.s_id) for d in out] == [(sid, "r", "s")]
    e.advance_clock(25, 9)  # W = 8, retention 2: tuples with time < 6 are dropped silently
    assert len(e.tables["R"]) == 0 and len(e.tables["S"]) == 1
    e.advance_clock(30, 3)  # a smaller max time changes nothing
    assert e.watermark == 8
    with pytest.raises(ValueError, match="not after"):
        e.advance_clock(29, None)


def _write_bad(tmp_path: Path, mutate: str) -> tuple[Path, Path]:
    g = random_log(2, n_ops=80)
    d = g.write(tmp_path / mutate)
    ev = pq.read_table(d / "events.parquet")
    if mutate == "orphan-delete":
        rows = ev.to_pylist()
        rows.append({**rows[0], "seq": 10_000, "op": "delete", "id": "never-published",
                     "key": None, "value": None, "time": None, "payload": None})
        pq.write_table(type(ev).from_pylist(rows, schema=ev.schema), d / "events.parquet")
    elif mutate == "duplicate-seq":
        rows = ev.to_pylist()
        rows.append(dict(rows[-1], id="other"))
        pq.write_table(type(ev).from_pylist(rows, schema=ev.schema), d / "events.parquet")
    elif mutate == "missing-column":
        pq.write_table(ev.drop(["time"]), d / "events.parquet")
    elif mutate == "no-topic":
        (d / "topic.json").unlink()
    return d / "events.parquet", d / "subscriptions.parquet"


@pytest.mark.parametrize("mutate,message", [
    ("orphan-delete", "has no earlier publish"), ("duplicate-seq", "used by two operations"),
    ("missing-column", "missing column"), ("no-topic", "no topic.json"),
])
def test_bad_exports_are_refused_with_a_clear_error(tmp_path: Path, mutate: str, message: str) -> None:
    events, subs = _write_bad(tmp_path, mutate)
    with pytest.raises(LogError, match=message):
        read_export(events, subs)


def test_an_inconsistent_log_fails_in_the_worker_with_its_seq(tmp_path: Path) -> None:
    """A publish the server would have refused (duplicate id) names the operation."""
    g = random_log(4, n_ops=60, kinds=("select",))
    d = g.write(tmp_path / "x")
    ev = pq.read_table(d / "events.parquet")
    rows = ev.to_pylist()
    last = {(r["side"], r["id"]): r for r in rows}  # no retention: stored iff last op is publish
    pub = next(r for r in last.values() if r["op"] == "publish")
    rows.append(dict(pub, seq=max(r["seq"] for r in rows) + 100))  # same id again, still stored
    pq.write_table(type(ev).from_pylist(rows, schema=ev.schema), d / "events.parquet")
    log = read_export(d / "events.parquet", d / "subscriptions.parquet")
    with pytest.raises(ReplayError, match=f"seq {rows[-1]['seq']}: publish of"):
        replay_in_process(log, None, progress=_quiet)


def test_missing_java_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from hotjoin.ops.replay import job

    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(job.shutil, "which", lambda name: None)
    with pytest.raises(job.JavaMissingError, match="scripts/setup"):
        job.check_java()
