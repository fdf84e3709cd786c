"""``hotjoin bench serve``, the load test of the gRPC server: latency percentiles read from
histogram buckets, and seconds-long smoke runs (server, publisher and listener processes) of
every option: the restart test, window joins with lateness and out-of-order events, band PAIRS
with pairs/s delivered, both wire forms, the server's CPU against the in-process engine and
fan-out to many listeners."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hotjoin.ops.loadtest import ServeBenchConfig, histogram_percentiles, run


def test_histogram_percentiles_interpolate_within_buckets() -> None:
    les = np.array([0.001, 0.01, np.inf])
    out = histogram_percentiles(les, np.zeros(3), np.array([50.0, 100.0, 100.0]))
    assert out["p50"] == 1.0 and 1.0 < out["p90"] <= 10.0


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
