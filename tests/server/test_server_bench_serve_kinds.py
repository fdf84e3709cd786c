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
    import json

    [rec] = json.loads(out.read_text())["records"]
    assert rec["listeners"] == 2 and rec["listen_form"] == "batch" and "engine_reference" not in rec
    assert rec["delivered_messages"] == rec["messages"] > 0
