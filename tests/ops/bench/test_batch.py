"""Smoke run of ``hotjoin bench batch --quick``: every kind, real work, same work by every contender."""

from __future__ import annotations

import json

from hotjoin.cli.main import main
from hotjoin.ops.bench import batch


def test_batch_bench_quick_run_does_the_same_real_work_in_every_contender(tmp_path) -> None:
    js = tmp_path / "batch.json"
    assert main(["bench", "batch", "--quick", "--json", str(js)]) == 0
    res = json.loads(js.read_text())
    assert [r["kind"] for r in res["records"]] == list(batch.KINDS)
    for r in res["records"]:
        assert r["events"] == 2000
        # the batch path and the one-at-a-time loop report identical affected rows and pair
        # totals, and so does the NumPy brute force for the equi-joins (band ends are compared
        # as k + b there, not by IEEE subtraction, so it may differ by a rounding)
        assert r["same_work"], r
        if r["kind"] != "band":
            assert r["numpy_same_work"], r
        pb = r["publish_batch"]
        assert pb["affected_rows"] > 100 and pb["pairs"] >= pb["affected_rows"]
        assert 0 < r["affected_per_event"] < 100
        for name in batch.CONTENDERS:
            assert r[name]["events_per_s"] > 0
    assert set(res["ratios"]) == set(batch.KINDS)
    assert res["records"][2]["lateness"] > 0


def test_batch_bench_rejects_bad_arguments(capsys) -> None:
    assert main(["bench", "batch", "--quick", "--kinds", "cross"]) == 2
    assert "--kinds" in capsys.readouterr().err
    assert main(["bench", "batch", "--quick", "--strategy", "SJ-Nope"]) == 2
    assert "unknown strategy" in capsys.readouterr().err
