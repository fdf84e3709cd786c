"""``hotjoin bench scaleout``: a matching-bound topic on Ray workers against one process; a
tiny run reports every figure (the bench itself checks the workers' pair counts against the
engine's), and ``--plot-from`` draws saved runs without running."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

ray = pytest.importorskip("ray")

CLI = "import sys; from hotjoin.cli.main import main; sys.exit(main(sys.argv[1:]))"


def test_bench_scaleout_smoke(local_ray: Any) -> None:
    """``hotjoin bench scaleout`` on a tiny workload: every figure present; the bench itself
    asserts that the workers' pair counts and the NumPy brute force's equal the engine's."""
    from hotjoin.ops.bench import scaleout

    res = scaleout.run(2_000, 200, 60, 20, 2.0, 30, [2], 10, 5)
    assert res["workers"]["2"]["events_per_s"] > 0 and res["single"]["pairs"] > 0
    assert res["workers"]["2"]["recovery_seconds"] > 0 and res["front_end"]["us_per_event"] > 0
    assert set(res["ratios"]) == {"2_workers_vs_single", "single_vs_numpy", "modelled_2_workers_vs_single",
                                  "batch_2_workers_vs_single", "batch_modelled_2_workers_vs_single"}
    assert len(res["workers"]["2"]["worker_cpu_us_per_event"]) == 2
    # the server's path (publish_batch) timed too; the bench asserts its pair counts
    assert res["single_batch"]["events_per_s"] > 0 and res["workers"]["2"]["batch"]["events_per_s"] > 0
    assert len(res["workers"]["2"]["batch"]["worker_cpu_us_per_event"]) == 2
    md = scaleout.to_markdown(res)
    assert "| 2 workers vs single process ≥ 1.4× |" in md and "| batch path: 2 workers vs single" in md
    key = scaleout.run(2_000, 200, 60, 20, 2.0, 30, [2], 10, 5, "key")
    assert key["config"]["scheme"] == "key" and key["workers"]["2"]["batch"]["events_per_s"] > 0
    assert "the keys of worker 0 of 2" in scaleout.to_markdown(key)


def test_bench_scaleout_plots_saved_runs(tmp_path: Any) -> None:
    """``--plot-from`` draws saved runs without running; a missing --plot is one line, exit 2."""
    import json as _json

    run = {"config": {"scheme": "key", "width": 0.5, "batch": 500},
           "single_batch": {"events_per_s": 100.0, "runs_events_per_s": [90.0, 100.0, 110.0]},
           "workers": {"1": {"batch": {"events_per_s": 80.0}},
                       "2": {"batch": {"events_per_s": 150.0, "runs_events_per_s": [140.0, 150.0]}}},
           "numpy_brute_force": {"events_per_s": 5.0}}
    src = tmp_path / "run.json"
    src.write_text(_json.dumps(run))
    png = tmp_path / "out.png"
    ok = subprocess.run([sys.executable, "-c", CLI, "bench", "scaleout", "--plot", str(png),
                         "--plot-from", str(src)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = subprocess.run([sys.executable, "-c", CLI, "bench", "scaleout", "--plot-from", str(src)],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "--plot-from needs --plot" in bad.stderr
    assert "Traceback" not in bad.stderr
