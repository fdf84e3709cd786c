"""Choosing between the two interval histograms on exact counts (paper 004 §4.1, App. B):
the estimator the router uses for n′.

>>> ch = IntervalHistogramChooser(buckets=8)
>>> ch.add_many(np.array([0.0, 2.0, 3.0]), np.array([4.0, 6.0, 3.5]))
>>> ch.choice, ch.estimate(3.0)
('ssi', 3.0)
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from hotjoin.matcher.partition.hist_common import relative_error
from hotjoin.matcher.partition.hist_eqw import EquiWidthHistogram
from hotjoin.matcher.partition.hist_ssi import SSIHistogram
from hotjoin.matcher.partition.stabbing import _check_arrays

__all__ = ["IntervalHistogramChooser"]


class IntervalHistogramChooser:
    """Keeps a HIST-EQW and a HIST-SSI of the same intervals and answers with the better one.

    ``observe(x, true_count)`` (the router's occasional exact ``n'``) scores both on the same
    point; each keeps a running mean of its relative error (:func:`relative_error`): the plain
    mean of the first ``window`` observations, then an exponential mean with weight
    ``1 / window``.  :meth:`estimate` is *rebound* to the winner's own ``estimate`` (same cost as
    calling it directly); until both have ``min_observations`` the SSI answers.

    The chooser owns no intervals: the caller calls :meth:`rebuild` with the current ones when
    :meth:`needs_rebuild` (the SSI's churn rule, :mod:`.hist_common`).  A rebuild refits HIST-EQW's
    domain (:meth:`EquiWidthHistogram.fit`) and rebuilds HIST-SSI with ``φ`` taken from the last
    observed query points when there are at least 64 (a reservoir of 1024).  ``resolution="auto"``
    uses 1 when every finite endpoint and every observed point is an integer, else 0.
    Starting empty, the first :meth:`add_many` builds both from its arrays.
    """

    def __init__(self, buckets: int = 100, ssi_buckets: int | None = None, *,
                 resolution: float | Literal["auto"] = "auto", window: int = 256,
                 min_observations: int = 16, rebuild_fraction: float = 0.25,
                 seed: int = 0) -> None:
        self.eqw_buckets = int(buckets)
        self.ssi_buckets = int(ssi_buckets if ssi_buckets is not None else buckets)
        self._resolution_opt = resolution
        self.window = int(window)
        self.min_observations = int(min_observations)
        self.rebuild_fraction = float(rebuild_fraction)
        self._rng = np.random.default_rng(seed)
        self._sample: list[float] = []
        self._seen = 0
        self._integral_queries = True
        self.eqw: EquiWidthHistogram | None = None
        self.ssi = SSIHistogram(self.ssi_buckets, rebuild_fraction=rebuild_fraction)
        self.errors: dict[str, float] = {"eqw": math.nan, "ssi": math.nan}
        self.observations: dict[str, int] = {"eqw": 0, "ssi": 0}
        self.choice = "ssi"
        self.rebuilds = 0
        self._rebind()

    # -- the hot path (rebound in _rebind) ------------------------------------------------------

    def estimate(self, x: float) -> float:  # pragma: no cover - replaced per instance
        """Estimated number of intervals containing ``x`` (the better histogram's)."""
        return self._current().estimate(x)

    def estimate_many(self, xs: np.ndarray) -> np.ndarray:
        return self._current().estimate_many(xs)

    def lookup(self) -> np.ndarray:
        """The better histogram's array for :func:`estimate_at`."""
        return self._current().lookup()

    def minimum(self) -> float:
        """The least estimate over every x: a lower bound of the current histogram's answers
        (the router bounds members' costs with it)."""
        vals = self._current().values()
        return float(vals.min()) if vals.size else 0.0

    def maximum(self) -> float:
        """The largest estimate over every x: an upper bound of the current histogram's
        answers (the router's choice is settled without n′ when it holds at both bounds)."""
        vals = self._current().values()
        return float(vals.max()) if vals.size else 0.0

    def _current(self) -> EquiWidthHistogram | SSIHistogram:
        if self.choice == "eqw" and self.eqw is not None:
            return self.eqw
        return self.ssi

    def _rebind(self) -> None:
        self.estimate = self._current().estimate  # type: ignore[method-assign]

    # -- updates --------------------------------------------------------------------------------

    def add(self, lo: float, hi: float) -> None:
        self.ssi.add(lo, hi)
        if self.eqw is not None:
            self.eqw.add(lo, hi)

    def remove(self, lo: float, hi: float) -> None:
        self.ssi.remove(lo, hi)
        if self.eqw is not None:
            self.eqw.remove(lo, hi)

    def add_many(self, lo: np.ndarray, hi: np.ndarray) -> None:
        if self.ssi.size == 0 and self.ssi.churn == 0 and np.asarray(lo).shape[0]:
            self.rebuild(lo, hi)
            return
        self.ssi.add_many(lo, hi)
        if self.eqw is not None:
            self.eqw.add_many(lo, hi)

    def remove_many(self, lo: np.ndarray, hi: np.ndarray) -> None:
        self.ssi.remove_many(lo, hi)
        if self.eqw is not None:
            self.eqw.remove_many(lo, hi)

    def needs_rebuild(self) -> bool:
        """O(1): the SSI's churn rule (:mod:`.hist_common`)."""
        return self.ssi.needs_rebuild()

    def rebuild(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """Rebuild both from the current intervals ``[lo[i], hi[i]]``. O(n log n)."""
        lo, hi = _check_arrays(lo, hi)
        res = self._resolution(lo, hi)
        sample = np.array(self._sample) if len(self._sample) >= 64 else None
        self.ssi.resolution = res
        self.ssi.query_sample = None if sample is None else np.sort(sample)
        self.ssi.rebuild(lo, hi)
        self.eqw = EquiWidthHistogram.fit(lo, hi, self.eqw_buckets, resolution=res,
                                          rebuild_fraction=self.rebuild_fraction)
        self.rebuilds += 1
        self._rebind()

    def _resolution(self, lo: np.ndarray, hi: np.ndarray) -> float:
        if self._resolution_opt != "auto":
            return float(self._resolution_opt)
        ends = np.concatenate([lo[np.isfinite(lo)], hi[np.isfinite(hi)]])
        integral = bool(np.all(ends == np.rint(ends))) and self._integral_queries
        return 1.0 if integral and ends.shape[0] else 0.0

    # -- scoring --------------------------------------------------------------------------------

    def observe(self, x: float, true_count: float) -> None:
        """Score both histograms on the exact count at ``x`` and switch to the better one."""
        x = float(x)
        self._seen += 1
        if len(self._sample) < 1024:
            self._sample.append(x)
        else:
            j = int(self._rng.integers(self._seen))
            if j < 1024:
                self._sample[j] = x
        if x != math.floor(x):
            self._integral_queries = False
        for name, h in (("eqw", self.eqw), ("ssi", self.ssi)):
            if h is None or (name == "ssi" and not h.pieces and h.size):
                continue
            e = float(relative_error(h.estimate(x), true_count))
            k = self.observations[name] = self.observations[name] + 1
            prev = self.errors[name]
            a = 1.0 / min(k, self.window)
            self.errors[name] = e if k == 1 else prev + a * (e - prev)
        if min(self.observations.values()) >= self.min_observations:
            choice = "eqw" if self.errors["eqw"] < self.errors["ssi"] else "ssi"
            if choice != self.choice:
                self.choice = choice
                self._rebind()

    def stats(self) -> dict[str, object]:
        """Running errors, observation counts, the current choice and the SSI's shape."""
        return {"choice": self.choice, "errors": dict(self.errors),
                "observations": dict(self.observations), "rebuilds": self.rebuilds,
                "ssi_tau": self.ssi.tau, "ssi_groups": self.ssi.groups,
                "ssi_pieces": self.ssi.pieces, "size": self.ssi.size}
