"""The routers' shared estimators (paper 004 §4.1, App. B): n′(v) from interval histograms.

A select or window router's cost models need n′(v), the subscriptions whose own range (A for an
incoming R tuple, C for an S tuple) holds the tuple's value. :class:`OwnRanges` keeps, per
direction, HIST-EQW and HIST-SSI (``partition/histogram.py``) over those ranges and answers with
the better of the two, scored now and then against an exact count.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hotjoin.matcher.joins.protocol import DenseIds
from hotjoin.matcher.joins.select import own_other
from hotjoin.matcher.partition.histogram import IntervalHistogramChooser, count_stabbed
from hotjoin.matcher.subscriptions import SubscriptionColumns

SAMPLE_EVERY = 1024
"""Every this many routed tuples (or n/16 with n subscriptions, whichever is more), the exact
n′ is counted once (O(n) numba, ~1–2 ns per subscription) to score the two histograms; so the
sampling costs ~0.02 µs per tuple on average (every 256 or n/64 tuples cost ~0.1 µs: 1 % of a
10 µs probe)."""


class OwnRanges:
    """n′(v) per direction: interval histograms of the own ranges (A for R, C for S), §4.1.

    Each direction keeps HIST-EQW and HIST-SSI (Appendix B) in an
    :class:`~matcher.partition.hist_chooser.IntervalHistogramChooser`, updated on every subscription
    change and rebuilt when churn passes its threshold — on the subscribe path, never while matching
    (a rebuild at 100k subscriptions takes ~0.25 s). Every ``SAMPLE_EVERY`` routed tuples the
    exact n′ is counted once (O(n) numpy) and scores both; the better one answers.
    """

    def __init__(self, cols: SubscriptionColumns, ids: DenseIds) -> None:
        self.cols = cols
        self.ids = ids
        self.hist = {d: IntervalHistogramChooser() for d in (1, -1)}
        self.count = 0

    def _refresh(self, d: int) -> None:
        h = self.hist[d]
        if h.needs_rebuild():
            lo, hi = own_other(self.cols, d)[:2]
            q = self.ids.view()
            h.rebuild(lo[q], hi[q])

    def add(self, q: int) -> None:
        """Count subscription ``q``'s own ranges in both directions' histograms."""
        for d, h in self.hist.items():
            lo, hi = own_other(self.cols, d)[:2]
            h.add(float(lo[q]), float(hi[q]))
            self._refresh(d)

    def add_many(self, qs: np.ndarray) -> None:
        """:meth:`add` for many subscriptions at once (a bulk build)."""
        for d, h in self.hist.items():
            lo, hi = own_other(self.cols, d)[:2]
            h.add_many(lo[qs], hi[qs])
            self._refresh(d)

    def remove(self, q: int) -> None:
        """Call after ``q`` left the id list (the rebuild reads the live ids)."""
        for d, h in self.hist.items():
            lo, hi = own_other(self.cols, d)[:2]
            h.remove(float(lo[q]), float(hi[q]))
            self._refresh(d)

    def estimate(self, d: int, v: float) -> float:
        """n′(v) for direction ``d``; now and then counts it exactly to score the histograms."""
        self.tick(d, v, 1)
        return self.hist[d].estimate(v)

    def tick(self, d: int, v: float, tuples: int) -> None:
        """``tuples`` more estimates were asked; every max(SAMPLE_EVERY, n/16) of them the exact
        n′(v) is counted (O(n), numba) and scores the two histograms."""
        self.count += tuples
        if self.count >= max(SAMPLE_EVERY, len(self.ids) // 16):
            self.count = 0
            lo, hi = own_other(self.cols, d)[:2]
            self.hist[d].observe(v, count_stabbed(lo, hi, self.ids.view(), float(v)))

    def estimator(self, d: int) -> Any:
        """The current best histogram's ``estimate(v)`` for direction ``d`` (bound method)."""
        return self.hist[d].estimate

    def lookup(self, d: int) -> np.ndarray:
        """The current best histogram's array for ``histogram.estimate_at`` (direction
        ``d``; valid until the next subscription change)."""
        return self.hist[d].lookup()

    def minimum(self, d: int) -> float:
        """A lower bound of n′(v) over every v (the smallest value of the step function)."""
        return self.hist[d].minimum()

    def maximum(self, d: int) -> float:
        """An upper bound of n′(v) over every v (the largest value of the step function)."""
        return self.hist[d].maximum()

    def stats(self) -> dict[str, Any]:
        """Each direction's histogram stats (which one answers, their scored errors)."""
        return {"R" if d > 0 else "S": h.stats() for d, h in self.hist.items()}

