"""Smoke run of ``hotjoin bench window`` (seconds, tiny sizes)."""

from __future__ import annotations

import json
from pathlib import Path

from hotjoin.cli.main import main


def test_bench_window_quick(tmp_path: Path) -> None:
    out = tmp_path / "window.json"
    assert main(["bench", "window", "--quick", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert {r["series"] for r in res["records"]} == {"n", "spread", "per_key"}
    assert all(r["m_b"] >= 0 for r in res["records"])
    ssi = [r for r in res["records"] if r["strategy"] == "WJ-SSI"]
    assert ssi and all(r["skyline_points_per_key"] <= 2 * r["m_b"] + 1 for r in ssi)
