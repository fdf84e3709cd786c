"""Smoke run of ``hotjoin bench memory`` (fresh subprocess, tiny sizes)."""

from __future__ import annotations

import json
from pathlib import Path

from hotjoin.cli.main import main


def test_bench_memory_quick(tmp_path: Path) -> None:
    out = tmp_path / "memory.json"
    assert main(["bench", "memory", "--quick", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["subscriptions"] == 3000
    assert res["stored_tuples"] == 3000 + 2 * 20
    assert 0 < res["rss_base_bytes"] <= res["rss_final_bytes"] <= res["peak_rss_bytes"]
    assert res["bytes_per_subscription"] > 0
    assert res["target_met"] is True


def test_bench_memory_select_bulk_subscribe(tmp_path: Path) -> None:
    """``--kinds select``: the bulk-subscribe time and peak of select joins only."""
    out = tmp_path / "select.json"
    assert main(["bench", "memory", "--quick", "--kinds", "select", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["config"]["kinds"] == "select" and res["subscriptions"] == 3000
    assert res["seconds_subscribe_many"] > 0
    assert res["rss_base_bytes"] <= res["rss_listed_bytes"] <= res["peak_rss_subscribe_bytes"]
