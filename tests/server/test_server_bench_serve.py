"""A seconds-long smoke run of ``hotjoin bench serve`` (server, publisher and listener processes)."""

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
