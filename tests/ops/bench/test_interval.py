"""Smoke run of ``hotjoin bench interval`` (a tiny workload, seconds): every strategy and
baseline measured, the baselines agreeing with each other on every probe, the targets recorded,
the JSON written only where ``--json`` says and never over a file git tracks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hotjoin.cli.main import main
from hotjoin.matcher.joins.interval import INTERVAL_STRATEGIES
from hotjoin.matcher.workload import interval_workload
from hotjoin.ops.bench.interval import TARGETS, Baselines

ROOT = Path(__file__).resolve().parents[3]


def test_bench_interval_quick(tmp_path: Path) -> None:
    out = tmp_path / "interval.json"
    assert main(["bench", "interval", "--quick", "--budget", "2", "--json", str(out)]) == 0
    res = json.loads(out.read_text())
    names = {*INTERVAL_STRATEGIES, "auto", "nested loop", "plane sweep", "NumPy brute force"}
    assert set(res["affected_throughput"]) == names
    assert all(r["per_second"] > 0 and r["items"] > 0 for r in res["affected_throughput"].values())
    assert res["baselines_agree"] is True
    assert set(res["targets"]) == set(TARGETS)
    assert all(isinstance(t["met"], bool) for t in res["targets"].values())
    assert res["memory"]["interval_bytes_per_subscription"] > 0
    assert res["batch_over_one_at_a_time"] > 0 and res["quick"] is True


def test_bench_interval_refuses_a_tracked_file(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "interval", "--quick", "--json", str(ROOT / "README.md")])
    assert code == 2
    assert "git tracks" in capsys.readouterr().err
    assert (ROOT / "README.md").read_text().startswith("#")


def test_baselines_count_the_same_pairs_as_a_direct_check() -> None:
    """Nested loop, plane sweep and brute force against the conditions checked pair by pair."""
    w = interval_workload(60, 260, seed=3, key_domain=6, mean_length=8.0)
    st = slice(0, 200)
    bl = Baselines(w.subscriptions, w.sides[st], w.keys[st], w.values[st], w.times[st],
                   w.ends[st])
    pr = np.arange(200, 260)
    for side in (0, 1):
        idx = pr[w.sides[pr] == side]
        cols = [c[idx] for c in (w.keys, w.values, w.times, w.ends)]
        want_aff, want_pairs = [], []
        for i in range(idx.shape[0]):
            aff = pairs = 0
            for sub in w.subscriptions:
                c = 0
                for j in np.flatnonzero(w.sides[st] == 1 - side).tolist():
                    me = (cols[0][i], cols[1][i], int(cols[2][i]), int(cols[3][i]))
                    other = (w.keys[j], w.values[j], int(w.times[j]), int(w.ends[j]))
                    (rk, rv, rt, re), (sk, sv, s_t, se) = (me, other) if side == 0 else (other, me)
                    c += (sub.b.contains(sk - rk) and sub.a.contains(rv) and sub.c.contains(sv)
                          and sub.ss.contains(s_t - rt) and sub.se.contains(s_t - re)
                          and sub.es.contains(se - rt) and sub.ee.contains(se - re))
                aff += c > 0
                pairs += c
            want_aff.append(aff)
            want_pairs.append(pairs)
        for got in (bl.per_subscription(side, *cols, sweep=False),
                    bl.per_subscription(side, *cols, sweep=True), bl.brute_force(side, *cols)):
            assert got[0].tolist() == want_aff and got[1].tolist() == want_pairs
    assert sum(want_pairs) > 0
