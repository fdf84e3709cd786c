"""Smoke runs of ``hotjoin bench band``: every figure, every strategy."""

from __future__ import annotations

import json

from hotjoin.cli.main import main
from hotjoin.matcher.joins.band import BAND_STRATEGIES
from hotjoin.ops.bench import band


def test_band_bench_quick_run_has_every_figure_strategy_and_ratio(tmp_path) -> None:
    js, md, plots = tmp_path / "b.json", tmp_path / "b.md", tmp_path / "plots"
    assert main(["bench", "band", "--quick", "--json", str(js), "--plots", str(plots),
                 "--markdown", str(md)]) == 0
    res = json.loads(js.read_text())
    figs = {(r["figure"], r["strategy"]) for r in res["records"]}
    refs = (band.BRUTE, band.LIMIT)
    assert figs == ({(f, s) for f in ("10i", "10ii") for s in (*BAND_STRATEGIES, *refs)}
                    | {("11", s) for s in BAND_STRATEGIES}
                    | {("group", s) for s in ("BJ-SSI", "BJ-Hotspot", *refs)})
    for r in res["records"]:
        if r["figure"] == "11":
            assert r["us_per_update"] > 0 and r["updates"] == 400
        else:
            assert r["identify_tuples_per_s"] > 0 and r["pairs_tuples_per_s"] > 0
            # every contender affected the same subscriptions with the same pair counts
            assert r["verified_tuples"] == 10 and r["agrees_with_brute_force"], r
    for fig in ("10i", "10ii", "group"):
        for x in {(r["subscriptions"], r["tau_target"]) for r in res["records"]
                  if r["figure"] == fig}:
            at = [r for r in res["records"] if r["figure"] == fig
                  and (r["subscriptions"], r["tau_target"]) == x]
            full = max(r["events_pairs"] for r in at)
            assert len({round(r["pairs_per_tuple"], 6) for r in at
                        if r["events_pairs"] == full}) == 1
    # the workload affects subscriptions at the 2,000-subscription points (not an empty run)
    assert max(r["affected_per_tuple"] for r in res["records"]
               if r["figure"] != "11" and r["subscriptions"] == 2000) > 1
    assert "maintenance BJ-SSI / BJ-MJ (us per update)" in res["ratios"]
    assert sorted(p.name for p in plots.iterdir()) == [
        "band_fig10i_identify.png", "band_fig10i_with.png", "band_fig10ii_identify.png",
        "band_fig10ii_with.png", "band_fig11.png", "band_group.png"]
    assert "Fig. 11" in md.read_text() and band.to_markdown(res).startswith("Fig. 10i")


def test_band_bench_rejects_unknown_strategy(capsys) -> None:
    assert main(["bench", "band", "--quick", "--strategies", "BJ-Nope"]) == 2
    assert "unknown band strategy 'BJ-Nope'" in capsys.readouterr().err


