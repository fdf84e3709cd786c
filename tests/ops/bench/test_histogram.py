"""``hotjoin bench histogram`` (Fig. 25): HIST-OPT*'s dynamic program finds the least-``E²``
segmentation (against every segmentation of small step functions), reproduces the stabbing
count exactly given a bucket per piece, the workload and arguments are as documented, and the
quick run produces real numbers."""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.cli.main import main
from hotjoin.ops.bench import histogram as hist_bench

DOMAIN = (0.0, 20.0)

intervals = st.lists(st.tuples(st.integers(-3, 22), st.integers(0, 8)), min_size=1, max_size=5)


def _pieces(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The stabbing count as constant pieces over the domain: (starts with the domain's end,
    count on each piece, E² weight of each piece), one query point at a time."""
    d0, d1 = DOMAIN
    edges = sorted({d0, d1, *(x for x in lo if d0 < x < d1),
                    *(np.nextafter(x, np.inf) for x in hi if d0 < np.nextafter(x, np.inf) < d1)})
    starts = np.array(edges)
    y = np.array([float(np.sum((lo <= x) & (x <= hi))) for x in starts[:-1]])
    w = np.diff(starts) / (d1 - d0) / np.maximum(y, 1.0) ** 2
    return starts, y, w


def _cost(starts: np.ndarray, y: np.ndarray, w: np.ndarray, bp: np.ndarray, v: np.ndarray) -> float:
    """E² of the step function (``bp``, ``v``) against the pieces."""
    est = hist_bench._step_estimate(bp, v, starts[:-1])
    return float(np.sum(w * (y - est) ** 2))


def _best(y: np.ndarray, w: np.ndarray, k: int) -> float:
    """The least E² over every split of the pieces into ``min(k, pieces)`` runs."""
    m, best = y.shape[0], np.inf
    for cuts in itertools.combinations(range(1, m), min(k, m) - 1):
        bounds = (0, *cuts, m)
        cost = 0.0
        for a, b in itertools.pairwise(bounds):
            ww, yy = w[a:b], y[a:b]
            if not np.sum(ww) > 0:  # pieces of no width (a point at 0): no error to make
                continue
            mean = float(np.sum(ww * yy) / np.sum(ww))
            cost += float(np.sum(ww * (yy - mean) ** 2))
        best = min(best, cost)
    return best


@settings(max_examples=80, deadline=None)
@given(intervals, st.integers(1, 4))
def test_the_dynamic_program_finds_the_least_error_split(iv: list[tuple[int, int]], k: int) -> None:
    lo = np.array([float(a) for a, _ in iv])
    hi = lo + np.array([float(n) for _, n in iv])
    starts, y, w = _pieces(lo, hi)
    (bp, v), = hist_bench.opt_histograms(lo, hi, DOMAIN, (k,), 10_000).values()
    assert bp[0] == DOMAIN[0] and bp[-1] == DOMAIN[1] and np.all(np.diff(bp) > 0)
    assert v.shape[0] == bp.shape[0] - 1 == min(k, y.shape[0])
    assert _cost(starts, y, w, bp, v) == pytest.approx(_best(y, w, k), rel=1e-9, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(intervals)
def test_a_bucket_per_piece_is_the_exact_count(iv: list[tuple[int, int]]) -> None:
    """Everywhere but on the (measure-zero) ends themselves."""
    lo = np.array([float(a) for a, _ in iv])
    hi = lo + np.array([float(n) for _, n in iv])
    starts, y, _ = _pieces(lo, hi)
    (bp, v), = hist_bench.opt_histograms(lo, hi, DOMAIN, (64,), 10_000).values()
    xs = np.arange(400) * 0.05 + 0.025  # between the integer ends (a point has no width)
    truth = np.array([float(np.sum((lo <= x) & (x <= hi))) for x in xs])
    np.testing.assert_allclose(hist_bench._step_estimate(bp, v, xs), truth, rtol=1e-12)


def test_a_step_function_outside_its_breakpoints_is_zero() -> None:
    bp, v = np.array([0.0, 1.0, 3.0]), np.array([5.0, 7.0])
    assert hist_bench._step_estimate(bp, v, np.array([-1.0, 0.0, 0.5, 1.0, 2.9, 3.0, 9.0])).tolist() \
        == [0.0, 5.0, 5.0, 7.0, 7.0, 0.0, 0.0]


def test_the_workload_is_seeded_and_shaped_as_documented() -> None:
    c = hist_bench.HistogramBenchConfig(intervals=20_000, queries=300)
    lo, hi, q = hist_bench.workload(c, 0)
    again = hist_bench.workload(c, 0)
    assert all(np.array_equal(a, b) for a, b in zip((lo, hi, q), again, strict=True))
    assert not np.array_equal(lo, hist_bench.workload(c, 1)[0]), "each repeat draws anew"
    assert lo.shape == hi.shape == (20_000,) and q.shape == (300,)
    assert np.all(hi >= lo) and q.min() >= 0.0 and q.max() <= 10_000.0
    assert abs(float(np.mean((lo + hi) / 2)) - 5000.0) < 50.0


def _args(**kw: object) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    hist_bench.add_arguments(p)
    return p.parse_args([f"--{k.replace('_', '-')}={v}" for k, v in kw.items()])


def _quick() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    hist_bench.add_arguments(p)
    return p.parse_args(["--quick"])


def test_arguments() -> None:
    c = hist_bench.config_from_args(_args(buckets="5,10", repeats=2))
    assert c.buckets == (5, 10) and c.repeats == 2 and c.intervals == 100_000
    quick = hist_bench.config_from_args(_quick())
    assert (quick.intervals, quick.buckets, quick.repeats) == (5000, (20, 40), 1)
    for bad in ({"buckets": "a,b"}, {"buckets": "0"}, {"intervals": 0}, {"opt_candidates": -1}):
        with pytest.raises(ValueError, match="--"):
            hist_bench.config_from_args(_args(**bad))


def test_bench_histogram_quick_produces_real_numbers(tmp_path: Path) -> None:
    js, md, plots = tmp_path / "h.json", tmp_path / "h.md", tmp_path / "plots"
    assert main(["bench", "histogram", "--quick", "--json", str(js), "--plots", str(plots),
                 "--markdown", str(md)]) == 0
    res = json.loads(js.read_text())
    recs = {(r["buckets"], r["histogram"]): r for r in res["records"]}
    names = (hist_bench.EQW, hist_bench.SSI, hist_bench.EQW_MEM, hist_bench.OPT)
    assert set(recs) == {(k, n) for k in (20, 40) for n in names}
    for r in recs.values():
        assert 0.0 < r["mean_relative_error"] < 1.0
    assert recs[(20, hist_bench.SSI)]["pieces"] <= 20
    assert recs[(20, hist_bench.SSI)]["tau"] > 1
    assert recs[(20, hist_bench.EQW)]["estimate_ns"] > 0
    assert isinstance(res["ratios"]["target HIST-SSI <= 0.5 x HIST-EQW met"], bool)
    assert [p.name for p in plots.iterdir()] == ["histogram_fig25.png"]
    assert md.read_text().startswith("| buckets | HIST-EQW | HIST-SSI")
    assert hist_bench.to_markdown(res) == md.read_text()
