"""Smoke runs of ``hotjoin bench serve`` for the kinds added with the columnar path: window joins
with lateness and out-of-order events, band PAIRS with pairs/s delivered, and both wire forms."""

from __future__ import annotations

from pathlib import Path

from hotjoin.ops.loadtest import ServeBenchConfig, run


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
