"""``IntervalHistogramChooser`` (the router's entry point to the histograms): empty until
needed, builds on demand, picks the histogram with the smaller observed error, follows churn."""

from __future__ import annotations

import numpy as np

from hotjoin.matcher.partition.exact_counter import ExactStabbingCounter
from hotjoin.matcher.partition.hist_chooser import IntervalHistogramChooser
from hotjoin.matcher.partition.hist_common import relative_error


def test_chooser_starts_empty_builds_on_demand_and_picks_the_better() -> None:
    rng = np.random.default_rng(9)
    ch = IntervalHistogramChooser()
    assert ch.estimate(3.0) == 0.0 and not ch.needs_rebuild()
    ch.add(1.0, 2.0)
    assert ch.needs_rebuild()
    ch.rebuild(np.array([1.0]), np.array([2.0]))
    assert not ch.needs_rebuild() and ch.estimate(1.5) == 1.0
    assert ch.ssi.resolution == 1.0              # integer ends, no query seen yet
    # twelve tight clusters with empty space between: the SSI represents the gaps, EQW cannot
    c = rng.integers(0, 12, 3000) * 100.0
    lo, hi = c - rng.uniform(0, 3, 3000), c + rng.uniform(0, 3, 3000)
    ch = IntervalHistogramChooser(buckets=30)
    ch.add_many(lo, hi)                           # empty before: builds from these arrays
    assert ch.rebuilds == 1 and ch.ssi.size == 3000 and ch.ssi.resolution == 0.0
    exact = ExactStabbingCounter(lo, hi)
    for x in rng.uniform(-10, 1110, 200):
        ch.observe(x, exact.count(x))
    assert ch.errors["ssi"] < ch.errors["eqw"] and ch.choice == "ssi"
    assert ch.estimate(700.0) == ch.ssi.estimate(700.0)
    # a single-piece SSI against a 30-bucket EQW on a smooth set: EQW wins and answers
    mid = rng.normal(0, 100, 3000)
    lo, hi = mid - 50, mid + 50
    ch = IntervalHistogramChooser(buckets=30, ssi_buckets=1, min_observations=8)
    ch.rebuild(lo, hi)
    exact = ExactStabbingCounter(lo, hi)
    for x in rng.uniform(-200, 200, 50):
        ch.observe(x, exact.count(x))
    assert ch.choice == "eqw" and ch.errors["eqw"] < ch.errors["ssi"]
    assert ch.eqw is not None and ch.estimate(10.0) == ch.eqw.estimate(10.0)
    assert ch.stats()["choice"] == "eqw"


def test_chooser_follows_churn() -> None:
    rng = np.random.default_rng(4)
    lo = rng.uniform(0, 1000, 400)
    hi = lo + rng.uniform(0, 50, 400)
    ch = IntervalHistogramChooser(buckets=20)
    ch.add_many(lo[:300], hi[:300])
    for i in range(300, 400):                    # 100 adds > max(16, 0.25 * 300)
        ch.add(lo[i], hi[i])
    assert ch.needs_rebuild()
    ch.rebuild(lo, hi)
    assert not ch.needs_rebuild()
    exact = ExactStabbingCounter(lo, hi)
    xs = rng.uniform(0, 1000, 50)
    err = np.mean(relative_error(ch.estimate_many(xs), exact.count_many(xs)))
    assert err < 0.5
    ch.remove_many(lo[:10], hi[:10])
    ch.remove(lo[10], hi[10])
    assert ch.ssi.size == 389
