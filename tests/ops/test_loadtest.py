"""``hotjoin bench serve``, the load test of the gRPC server: latency percentiles read from
histogram buckets, and seconds-long smoke runs (server, publisher and listener processes) of
every option: the restart test, window joins with lateness and out-of-order events, band PAIRS
with pairs/s delivered, both wire forms, the server's CPU against the in-process engine and
fan-out to many listeners."""

from __future__ import annotations

import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from hotjoin.ops.loadtest import (
    BenchFailed,
    ServeBenchConfig,
    await_children,
    histogram_percentiles,
    run,
)


def test_histogram_percentiles_interpolate_within_buckets() -> None:
    les = np.array([0.001, 0.01, np.inf])
    out = histogram_percentiles(les, np.zeros(3), np.array([50.0, 100.0, 100.0]))
    assert out["p50"] == 1.0 and 1.0 < out["p90"] <= 10.0


def test_a_child_that_dies_before_it_is_ready_stops_the_run_at_once() -> None:
    ctx = mp.get_context("spawn")
    sem = ctx.Semaphore(0)
    dead = ctx.Process(target=sys.exit, args=(3,))
    alive = ctx.Process(target=time.sleep, args=(60,))
    dead.start()
    alive.start()
    t0 = time.monotonic()
    with pytest.raises(BenchFailed, match=f"publisher process \\(pid {dead.pid}\\) exited with code 3"):
        await_children(sem, 1, [dead], [dead, alive], "publisher", 600)
    assert time.monotonic() - t0 < 30  # not the 600 s limit
    alive.join(10)
    assert alive.exitcode is not None  # the others are terminated with it


def test_children_not_ready_in_time_and_ready_ones() -> None:
    ctx = mp.get_context("spawn")
    sem = ctx.Semaphore(0)
    slow = ctx.Process(target=time.sleep, args=(60,))
    slow.start()
    with pytest.raises(BenchFailed, match="1 of 1 listeners were not ready after 0.5 s"):
        await_children(sem, 1, [slow], [slow], "listener", 0.5)
    slow.join(10)
    assert slow.exitcode is not None
    sem.release()
    sem.release()
    await_children(sem, 2, [], [], "listener", 5)  # both signals there: returns
    assert not sem.acquire(timeout=0.01)


def test_bench_serve_smoke(tmp_path: Path) -> None:
    cfg = ServeBenchConfig(subscriptions=(1000,), stored=500, rate=400, duration=1.5, publishers=1,
                           batch_size=50, affected=5)
    res = run(cfg, str(tmp_path / "out.json"), str(tmp_path / "plots"))
    [rec] = res["records"]
    assert rec["events"] > 0 and rec["throughput_events_per_s"] > 0
    # the publishing window ends at the last acknowledgement (1.5 s of publishing), not at the
    # coordinator's next half-second look at the publisher processes
    assert 1.5 <= rec["publish_s"] < 2.0, rec["publish_s"]
    assert abs(rec["throughput_events_per_s"] * rec["publish_s"] / rec["events"] - 1) < 0.01
    assert set(rec["publish_to_ack_ms"]) == {"p50", "p90", "p99", "p99.9"}
    assert rec["server_rss_mib"] > 0
    assert Path(rec["plot"]).exists()
    assert json.loads((tmp_path / "out.json").read_text())["records"][0]["events"] == rec["events"]
    [ref] = res["references"]  # the NumPy brute force timed in the same run (docs/benchmarks/index.md#same-run-references)
    assert ref["contender"] == "numpy_reference" and ref["events"] > 0
    assert ref["throughput_events_per_s"] > 0 and ref["affected_per_event"] > 0


def test_bench_serve_restart_smoke(tmp_path: Path) -> None:
    """``--restart-test`` fills the topic, kills the server with SIGKILL, restarts it and reports
    the time, RSS before and after and the server's own account of the restore."""
    cfg = ServeBenchConfig(subscriptions=(1000,), stored=500, rate=400, duration=1.0, publishers=1,
                           batch_size=50, affected=5, restart_test=True, restart_stored=3000)
    [rec] = run(cfg, str(tmp_path / "out.json"), None)["records"]
    assert rec["restart_s"] > 0 and rec["restart_stored"] == 3000
    assert rec["restart_rss_mib"] > 0 and rec["rss_before_kill_mib"] > 0
    assert isinstance(rec["restart_server_log"], list) and isinstance(rec["restart_checkpoint"], bool)


def test_window_with_lateness_and_band_pairs(tmp_path: Path) -> None:
    cfg = ServeBenchConfig(subscriptions=(500,), stored=300, rate=400, duration=1.5, publishers=1, batch_size=50,
                           affected=5, kind="window", delivery="affected", lateness=1000)
    [rec] = run(cfg, str(tmp_path / "w.json"))["records"]
    assert rec["wire"] == "columns" and rec["lateness"] == 1000
    assert rec["events"] > 0 and rec["rejected"] == 0  # out of order, but within the lateness
    assert rec["messages"] > 0 and rec["delivered_messages"] == rec["messages"]
    cfg = ServeBenchConfig(subscriptions=(500,), stored=300, rate=400, duration=1.5, publishers=1, batch_size=50,
                           affected=5, kind="band", delivery="pairs", wire=("columns", "events"))
    recs = run(cfg, str(tmp_path / "b.json"))["records"]
    assert [r["wire"] for r in recs] == ["columns", "events"]
    for r in recs:
        assert r["events"] > 0 and r["pairs_delivered"] > 0 and r["pairs_delivered_per_s"] > 0


def test_server_cpu_engine_reference_and_fan_out(tmp_path: Path) -> None:
    """The server's CPU per event and per delivered message and pair (and, with ``marginal``,
    the delivery's own share), the in-process ``publish_batch`` reference on the same events,
    and N listeners each holding a share of the subscriptions (every message delivered once in
    all), in both listen forms."""
    for form in ("columns", "batch"):
        cfg = ServeBenchConfig(subscriptions=(600,), stored=300, rate=400, duration=1.5, publishers=1,
                               batch_size=50, affected=5, kind="band", delivery="pairs", listeners=3,
                               listen_form=form, marginal=form == "columns")
        [rec] = run(cfg, str(tmp_path / f"{form}.json"))["records"]
        assert rec["listeners"] == 3 and rec["listen_form"] == form
        assert rec["messages"] > 0 and rec["delivered_messages"] == rec["messages"]
        assert rec["pairs_delivered"] > 0 and rec["server_cpu_us_per_pair"] > 0
        assert rec["server_cpu_us_per_event"] > 0 and rec["server_cpu_us_per_message"] > 0
        assert rec["messages_received_per_s"] > 0
        ref = rec["engine_reference"]
        assert ref["events"] == rec["events"] and ref["output"] == "pairs"
        assert ref["output_rows"] > 0 and rec["server_cpu_over_engine"] > 0
        if form == "columns":  # a run without a listener first: the delivery's own CPU
            assert rec["no_listener_cpu_us_per_event"] > 0
            assert "delivery_cpu_us_per_message" in rec and "delivery_cpu_us_per_pair" in rec


def test_bench_serve_command_takes_the_listener_options(tmp_path: Path) -> None:
    from hotjoin.cli.main import main

    out = tmp_path / "cli.json"
    assert main(["bench", "serve", "--subscriptions", "400", "--stored", "200", "--rate", "300",
                 "--duration", "1", "--publishers", "1", "--batch-size", "50", "--affected", "5",
                 "--listeners", "2", "--listen-form", "batch", "--no-engine-reference",
                 "--json", str(out)]) == 0
    [rec] = json.loads(out.read_text())["records"]
    assert rec["listeners"] == 2 and rec["listen_form"] == "batch" and "engine_reference" not in rec
    assert rec["delivered_messages"] == rec["messages"] > 0


def test_bench_serve_command_says_in_one_line_why_a_run_failed(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from hotjoin.cli.main import main
    from hotjoin.ops import loadtest

    def failed(*_: object) -> None:
        raise BenchFailed("a publisher process (pid 7) exited with code 3 before it was ready")

    monkeypatch.setattr(loadtest, "run", failed)
    assert main(["bench", "serve", "--subscriptions", "400", "--duration", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["hotjoin bench: error: a publisher process (pid 7) exited with code 3 before it "
                   "was ready"]
