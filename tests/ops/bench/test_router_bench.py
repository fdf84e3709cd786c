"""Smoke runs of ``hotjoin bench router`` and ``hotjoin calibrate`` (seconds, tiny sizes)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hotjoin.cli.main import main
from hotjoin.matcher.router.calibrate import fit
from hotjoin.matcher.router.cost_model import FEATURES, CostProfile


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
        # every point with timed tuples carries the NumPy brute force (SPEC §6), timed on the
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


def test_calibrate_quick_writes_a_loadable_profile(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "profile.json"
    assert main(["calibrate", "--quick", "--kinds", "band,select", "--tuples", "30",
                 "--out", str(out)]) == 0
    text = capsys.readouterr()
    assert "BJ-MJ" in text.out and "95% interval" in text.out
    assert "[calibrate] 1/" in text.err  # progress
    prof = CostProfile.load(out)
    assert set(prof.coef) == {n for n in FEATURES if n[:2] in ("BJ", "SJ")}
    for name, c in prof.coef.items():
        assert len(c) == len(FEATURES[name]) and all(x >= 0 for x in c)
        assert all(lo <= x <= hi for x, (lo, hi) in zip(c, prof.ci[name], strict=True))


def test_calibrate_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--kinds", "cubes"]) == 2
    assert "--kinds" in capsys.readouterr().err
    assert main(["calibrate", "--tuples", "3"]) == 2


def test_fit_recovers_constants_and_stays_non_negative() -> None:
    rng = np.random.default_rng(0)
    x = np.column_stack([np.ones(500), rng.uniform(0, 100, 500), rng.uniform(0, 10, 500)])
    y = x @ np.array([50.0, 3.0, 0.0]) + rng.normal(0, 1.0, 500)
    c, half = fit(x, y)
    assert abs(c[0] - 50) < 1 and abs(c[1] - 3) < 0.05
    assert (c >= 0).all() and (half >= 0).all()
    # a feature whose true constant is negative is dropped, never fitted below zero
    y2 = x @ np.array([50.0, 3.0, -2.0])
    c2, _ = fit(x, y2)
    assert c2[2] == 0.0 and (c2 >= 0).all()


def test_time_members_counts_agree_with_a_static_engine() -> None:
    """The measuring core reports the affected count every member agreed on, per tuple: the
    same as a plain engine with one static strategy."""
    from hotjoin.matcher import Engine
    from hotjoin.matcher.model import Range, SelectJoin
    from hotjoin.matcher.router.calibrate import ALL_MEMBERS, load, time_members

    rng = np.random.default_rng(4)
    lo_a, lo_c = rng.uniform(0, 80, 300), rng.uniform(0, 80, 300)
    subs = [SelectJoin(a=Range(a, a + 20), c=Range(c, c + 20))
            for a, c in zip(lo_a.tolist(), lo_c.tolist(), strict=True)]
    keys = rng.integers(0, 30, 500).astype(np.float64)
    vals = rng.uniform(0, 100, 500)
    times = np.arange(500, dtype=np.int64)
    e = Engine(strategy="auto", options={"alpha": 0.05,
                                         "router_members": {"select": ALL_MEMBERS["select"]}})
    ref = Engine(strategy={"select": "SJ-Vanilla"})
    for eng in (e, ref):
        eng.subscribe_many(subs)
        load(eng, keys, vals, times)
    rk, rv = rng.integers(0, 35, 80).astype(np.float64), rng.uniform(0, 100, 80)
    mt = time_members(e, "select", "R", rk, rv)
    expect = [ref.probe("R", k, v) for k, v in zip(rk.tolist(), rv.tolist(), strict=True)
              if k < 30]  # keys 30..34 have no partner: skipped
    assert mt.affected.tolist() == expect
    assert sum(expect) > 0 and len(expect) > 40
    # several rounds with a lead-in: the first 5 tuples with partners run untimed
    mt2 = time_members(e, "select", "R", rk, rv, rounds=3, lead_in=5)
    assert mt2.affected.tolist() == expect[5:]
    assert mt2.ns.shape == (len(expect) - 5, len(ALL_MEMBERS["select"]))
    assert mt2.dynamic_ns.shape == (len(expect) - 5,) and (mt2.ns > 0).all()
    assert all(f.shape[0] == len(expect) - 5 for f in mt2.features)
