"""Smoke runs of ``hotjoin bench select`` (seconds, tiny sizes)."""

from __future__ import annotations

import json
from pathlib import Path

from hotjoin.cli.main import main


def test_bench_select_quick(tmp_path: Path) -> None:
    out = tmp_path / "select.json"
    assert main(["bench", "select", "--quick", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    figs = {r["figure"] for r in res["records"]}
    assert figs == {"table1", "7i", "7i-ssi", "7ii", "8i", "8ii", "9"}
    figs.discard("table1")  # identify and AFFECTED (test_bench_select_table1_reference_lines)
    assert any("side by side" in k for k in res["ratios"])
    figs.discard("7i-ssi")  # identify only
    assert all(r["identify_tuples_per_s"] > 0 for r in res["records"])
    # every strategy found the same number of result pairs on the same tuples
    for fig in figs:
        for x in {r["x"] for r in res["records"] if r["figure"] == fig}:
            rows = [r for r in res["records"] if r["figure"] == fig and r["x"] == x]
            full = [r for r in rows if r["events_pairs"] == max(q["events_pairs"] for q in rows)]
            assert len({round(r["pairs_per_tuple"], 6) for r in full}) == 1


def test_bench_select_table1_reference_lines(tmp_path: Path) -> None:
    """The Table I point times every strategy beside the NumPy brute force and the flat limit
    in one run, and every contender affected the same subscriptions with the same counts."""
    out = tmp_path / "t1.json"
    assert main(["bench", "select", "--quick", "--figures", "table1", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    rows = res["records"]
    names = {r["strategy"] for r in rows}
    assert {"NumPy brute force", "flat limit", "flat limit, own ranges first", "SJ-SSI",
            "SJ-SelectFirst", "SJ-Hotspot", "auto"} <= names
    assert {r["x"] for r in rows} == {"k=30,spread=5000", "k=3,spread=500"}
    assert all(r["verified_tuples"] == 10 and r["agrees_with_brute_force"] for r in rows)
    for x in {r["x"] for r in rows}:
        at = [r for r in rows if r["x"] == x]
        # same tuples, same affected subscriptions per tuple for every contender
        assert len({round(r["affected_per_tuple"], 9) for r in at
                    if r["events_identify"] == max(q["events_identify"] for q in at)}) == 1
        assert all(r["identify_tuples_per_s"] > 0 and r["count_tuples_per_s"] > 0 for r in at)
    assert any(k.endswith("AFFECTED / NumPy brute force") for k in res["ratios"])
