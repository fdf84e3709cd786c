"""Smoke runs of ``hotjoin bench router`` (seconds, tiny sizes), one-at-a-time and batched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hotjoin.cli.main import main


def test_bench_router_quick(tmp_path: Path) -> None:
    out = tmp_path / "router.json"
    plots = tmp_path / "plots"
    assert main(["bench", "router", "--quick", "--json", str(out), "--plots", str(plots)]) == 0
    res = json.loads(out.read_text())
    figs = {r["figure"] for r in res["records"]}
    assert figs == {"12", "15", "18", "band", "window"}
    for r in res["records"]:
        prefix = r["members"][0][:3]
        tp = r["throughput"]
        # every point with timed tuples carries the NumPy brute force (the same-run reference), timed on the
        # same tuples; the bench itself asserts it found the engine's affected counts
        numpy = {"NumPy brute force"} if r["tuples"] else set()
        assert set(tp) == {*r["members"], prefix + "Dynamic", prefix + "Optimum", *numpy}
        if numpy:
            assert r["dynamic_over_numpy"] == tp[prefix + "Dynamic"] / tp["NumPy brute force"]
        assert all(v > 0 for v in tp.values())
        assert sum(r["decisions"].values()) == r["tuples"] > 0
        assert sum(r["optimum_choices"].values()) == r["tuples"]
        assert 0.0 <= r["optimal_share"] <= 1.0
    # the quick band workload does real matching work, not empty probes
    assert all(r["affected_per_tuple"] > 0 for r in res["records"] if r["figure"] == "band")
    # and so do select and window: the brute force's equal counts are a real check
    assert any(r["affected_per_tuple"] > 0 for r in res["records"] if r["kind"] == "select")
    assert any(r["affected_per_tuple"] > 0 for r in res["records"] if r["kind"] == "window")
    assert all("NumPy brute force" in r["throughput"] for r in res["records"]
               if r["kind"] != "select")
    assert (plots / "router_fig12_throughput.png").stat().st_size > 0
    assert (plots / "router_fig15_decisions.png").stat().st_size > 0


def test_bench_router_batch_path_quick(tmp_path: Path) -> None:
    """``--batch``: every runner also probes the same tuples through ``probe_batch``; the bench
    asserts the batch path found the one-at-a-time affected counts on every tuple."""
    out, md, plots = tmp_path / "router.json", tmp_path / "router.md", tmp_path / "plots"
    assert main(["bench", "router", "--quick", "--figures", "15,band,window", "--batch", "8",
                 "--json", str(out), "--markdown", str(md), "--plots", str(plots)]) == 0
    res = json.loads(out.read_text())
    assert res["config"]["batch"] == 8 and res["config"]["batch_rounds"] == 2
    for r in res["records"]:
        b = r["batch"]
        prefix = r["members"][0][:3]
        assert set(b["throughput"]) >= {*r["members"], prefix + "Dynamic"}
        assert all(v > 0 for v in b["throughput"].values())
        best = max(r["members"], key=b["throughput"].__getitem__)
        assert b["best_static"] == best
        assert b["dynamic_over_best_static"] == (b["throughput"][prefix + "Dynamic"]
                                                 / b["throughput"][best])
        assert set(b["decisions"]) == set(r["members"])
        assert any(k.startswith(f"fig {r['figure']} x=") and "batch path" in k
                   for k in res["ratios"])
    assert "Batch path" in md.read_text()
    assert (plots / "router_figband_batch_throughput.png").stat().st_size > 0


def test_bench_router_rejects_bad_rounds(capsys: pytest.CaptureFixture[str]) -> None:
    """``--batch-rounds`` 0 is refused in one line, before any workload is built."""
    assert main(["bench", "router", "--batch", "8", "--batch-rounds", "0"]) == 2
    err = capsys.readouterr().err
    assert "--batch-rounds must be >= 1" in err and "Traceback" not in err


