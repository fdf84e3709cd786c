"""HIST-SSI, the stabbing-partition interval histogram of paper 004 App. B.

The canonical stabbing partition (Lemma 1), per group a left (increasing) and right
(decreasing) step function, each compressed by weighted 1-D k-means (Lloyd's iterations;
weights ``w = ∫φ / y²``, Lemma 5; :mod:`.hist_fit`), buckets given to groups in proportion to
their cardinality, and the per-group functions summed into one step function (``estimate`` is
one ``bisect``, O(log k)).  Conventions (closed ends, outside pieces, rebuild rule):
:mod:`.hist_common`.

>>> ssi = SSIHistogram.build(np.array([0.0, 2.0, 3.0]), np.array([4.0, 6.0, 3.5]), buckets=8)
>>> [ssi.estimate(x) for x in (1.0, 3.0, 5.0, 7.0)]
[1.0, 3.0, 1.0, 0.0]
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable
from typing import Literal

import numpy as np

from hotjoin.matcher.partition.hist_common import (
    Churn,
    cover_many,
    cover_one,
    data_domain,
    open_end,
    open_ends,
)
from hotjoin.matcher.partition.hist_fit import (
    Group,
    allocate_cardinality,
    greedy_split,
    merge_smallest,
    refine,
    side_of,
    steps_of,
)
from hotjoin.matcher.partition.hist_lookup import SSI_LOOKUP, lookup_array
from hotjoin.matcher.partition.stabbing import _check_arrays, _check_interval, canonical_partition

__all__ = ["SSIHistogram"]

_INF = math.inf


class SSIHistogram(Churn):
    """HIST-SSI (App. B): a step function with at most ``buckets`` constant pieces.

    **Build** (:meth:`rebuild`, O(n log n)):

    1. the canonical stabbing partition of Lemma 1
       (:func:`matcher.partition.stabbing.canonical_partition`), ``τ`` groups in stabbing-point
       order;
    2. per group ``I_i`` with stabbing point ``p_i``, the exact ``f_{I_i}``: increasing left of
       ``p_i`` (``#lo <= x``), decreasing right of it; each side's pieces ``y_l`` get the weight
       ``w_l = ∫_piece φ / max(F_l, 1)²`` (φ uniform over ``domain``, or the empirical
       distribution of ``query_sample`` mixed with 25 % uniform).  ``weights="group"`` takes
       ``F_l = y_l``, the group's own count, as App. B writes it; the default ``"total"`` takes
       ``F_l = f_I`` on that piece, the count actually being estimated, so that each group's
       error is weighed relative to the total (the two agree for a single group; with more,
       ``"group"`` overweights each group's own tails: on the Fig. 25 workload, two merged
       groups at 20 buckets give 19.6 % mean relative error with ``"group"``, 13.5 % with
       ``"total"``);
    3. buckets go to groups in proportion to cardinality (each group at least one; a group with
       one bucket gets a single bucket spanning both sides at its weighted mean, with two or
       more at least one per side); within a group the buckets go to the side where a split
       saves the most weighted error (``allocation="greedy"`` instead spends every bucket,
       across all groups, on the split that saves the most);
    4. each side is compressed by weighted 1-D k-means (Lemma 5): greedy splitting for the
       initial clusters, then Lloyd's iterations (kept when they lower the cost);
    5. the groups' functions are summed into one step function (breakpoints + values).

    **Bucket count.**  ``buckets`` bounds the number of constant pieces of the final step
    function (between its first and last breakpoint; outside them the value is 0), the same
    currency as HIST-OPT's buckets.  A group with ``k_i`` buckets contributes at most ``k_i + 1``
    breakpoints, so ``G`` groups get ``Σ k_i = buckets − G + 1`` buckets between them.  Compared
    with HIST-EQW's ``B`` buckets this stores ``buckets + 1`` more floats (the breakpoints).

    **More groups than buckets.**  Each group needs one bucket, so at most ``(buckets + 1) // 2``
    groups fit.  When ``τ`` is larger the smallest groups are merged into their smaller
    neighbour until they fit (:func:`merge_smallest`); a merged group is no longer stabbed by one
    point, so its function is split at its maximum and each side is made monotone by isotonic
    regression (pool adjacent violators, the best monotone fit under the same weights) before
    k-means — for an unmerged group both steps change nothing.  ``groups="auto"`` (default)
    tries the canonical partition when it fits and merged partitions with 1, 2, 4, 8, …
    groups, and keeps the one whose summed function has the least ``E²`` (App. B's error, over
    all pieces of the exact ``f_I``); ``"canonical"`` takes ``τ`` groups, merged only as far as
    needed; an int forces that many.

    **Updates** between builds: :meth:`add` / :meth:`remove` apply an interval to the pieces as in
    HIST-EQW (+1 on pieces it covers, the covered fraction on partial ones); see the module
    docstring for the rebuild rule.  ``estimate`` is one ``bisect`` on a list, O(log buckets),
    0.11–0.15 µs measured (``docs/benchmarks/engine.md``).

    >>> h = SSIHistogram.build(np.array([0.0, 1.0, 2.0]), np.array([3.0, 3.0, 3.0]), buckets=4)
    >>> [h.estimate(x) for x in (-1.0, 0.0, 1.5, 2.0, 3.0, 3.5)], h.tau, h.pieces
    ([0.0, 1.0, 2.0, 3.0, 3.0, 0.0], 1, 3)
    """

    def __init__(self, buckets: int = 100, *, domain: tuple[float, float] | None = None,
                 query_sample: np.ndarray | None = None, resolution: float = 0.0,
                 groups: int | Literal["auto", "canonical"] = "auto",
                 allocation: Literal["cardinality", "greedy"] = "cardinality",
                 weights: Literal["total", "group"] = "total",
                 lloyd_iterations: int = 50, rebuild_fraction: float = 0.25) -> None:
        if int(buckets) < 1:
            raise ValueError(f"buckets must be >= 1, got {buckets}")
        if not resolution >= 0:
            raise ValueError(f"resolution must be >= 0, got {resolution}")
        if allocation not in ("cardinality", "greedy"):
            raise ValueError(f"allocation must be 'cardinality' or 'greedy', got {allocation!r}")
        if weights not in ("total", "group"):
            raise ValueError(f"weights must be 'total' or 'group', got {weights!r}")
        if not (groups in ("auto", "canonical") or (isinstance(groups, int) and groups >= 1)):
            raise ValueError(f"groups must be 'auto', 'canonical' or an int >= 1, got {groups!r}")
        if domain is not None and not (math.isfinite(domain[0]) and math.isfinite(domain[1])
                                       and domain[0] < domain[1]):
            raise ValueError(f"domain must be finite with lo < hi, got {domain}")
        self._init_churn(rebuild_fraction)
        self.buckets = int(buckets)
        self.domain = domain
        self.query_sample = None if query_sample is None else \
            np.sort(np.asarray(query_sample, np.float64))
        self.resolution = float(resolution)
        self.group_policy = groups
        self.allocation = allocation
        self.weights = weights
        self.lloyd_iterations = int(lloyd_iterations)
        self.tau = 0
        self.groups = 0
        self.build_error = 0.0
        self.candidates: list[tuple[int, float]] = []
        self._set_steps(np.empty(0), np.empty(0))

    @classmethod
    def build(cls, lo: np.ndarray, hi: np.ndarray, buckets: int = 100,
              **options: object) -> SSIHistogram:
        """A histogram of ``[lo[i], hi[i]]`` (``options``: the constructor's keywords)."""
        h = cls(buckets, **options)  # type: ignore[arg-type]
        h.rebuild(lo, hi)
        return h

    # -- reading --------------------------------------------------------------------------------

    def estimate(self, x: float) -> float:
        """Estimated number of intervals containing ``x``. O(log pieces)."""
        return self._est[bisect_right(self._bp, x)]

    def lookup(self) -> np.ndarray:
        """The array :func:`estimate_at` reads (a copy: valid until the next update)."""
        return lookup_array(SSI_LOOKUP, 0.0, 0.0, 0.0, 0, self._bp_arr, self._est)

    def estimate_many(self, xs: np.ndarray) -> np.ndarray:
        """:meth:`estimate` for every element of ``xs`` (float64 array)."""
        if self._est_arr is None:
            self._est_arr = np.array(self._est)
        return self._est_arr[np.searchsorted(self._bp_arr, np.asarray(xs, np.float64), "right")]

    @property
    def pieces(self) -> int:
        """Constant pieces of the step function (between its first and last breakpoint)."""
        return max(len(self._bp) - 1, 0)

    def breakpoints(self) -> np.ndarray:
        return self._bp_arr.copy()

    def values(self) -> np.ndarray:
        """``[below, piece 0, …, piece P−1, above]`` (clamped at 0)."""
        return np.array(self._est)

    # -- updates --------------------------------------------------------------------------------

    def _update(self, lo: float, hi: float, sign: float) -> None:
        lo, hi = _check_interval(lo, hi)
        if self._edges:
            cover_one(self._edges, self._vals, self._est, lo, open_end(hi, self.resolution),
                       sign)
            self._est_arr = None
        self._size += int(sign)
        self._churn += 1
        if not self._bp:
            self._limit = 0.0   # nothing to update yet: ask for a build

    def add(self, lo: float, hi: float) -> None:
        """Add ``[lo, hi]`` to the pieces (+1 where covered, fractions on partial pieces)."""
        self._update(lo, hi, 1.0)

    def remove(self, lo: float, hi: float) -> None:
        """Remove ``[lo, hi]`` (exact inverse of :meth:`add`)."""
        self._update(lo, hi, -1.0)

    def _update_many(self, lo: np.ndarray, hi: np.ndarray, sign: float) -> None:
        lo, hi = _check_arrays(lo, hi)
        if self._edges:
            acc = cover_many(self._edges_arr, lo, open_ends(hi, self.resolution))
            vals = np.array(self._vals) + sign * acc
            self._vals = vals.tolist()
            self._est = np.maximum(vals, 0.0).tolist()
            self._est_arr = None
        self._size += int(sign) * lo.shape[0]
        self._churn += lo.shape[0]
        if not self._bp and lo.shape[0]:
            self._limit = 0.0

    def add_many(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """:meth:`add` for every ``[lo[i], hi[i]]``, vectorised."""
        self._update_many(lo, hi, 1.0)

    def remove_many(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """:meth:`remove` for every ``[lo[i], hi[i]]``, vectorised."""
        self._update_many(lo, hi, -1.0)

    # -- building -------------------------------------------------------------------------------

    def rebuild(self, lo: np.ndarray, hi: np.ndarray) -> None:
        """Build from exactly the intervals ``[lo[i], hi[i]]`` (class docstring). O(n log n)."""
        lo, hi = _check_arrays(lo, hi)
        n = lo.shape[0]
        self.candidates = []
        if n == 0:
            self.tau = self.groups = 0
            self.build_error = 0.0
            self._set_steps(np.empty(0), np.empty(0))
            self._mark_built(0)
            return
        hio = open_ends(hi, self.resolution)
        if self.domain is not None:
            d0, d1 = self.domain
        else:
            d0, d1 = data_domain(lo, hi, self.resolution, self.query_sample)
        phi = self._phi_fn(d0, d1)
        points, group_of = canonical_partition(lo, hi)
        self.tau = tau = int(points.shape[0])
        sizes = np.bincount(group_of, minlength=tau)
        ev = np.concatenate([lo, hio])
        delta = np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64)])
        order = np.argsort(ev, kind="stable")
        ev, delta, gid = ev[order], delta[order], np.concatenate([group_of, group_of])[order]
        all_edges, all_vals = _compress(ev, delta)
        all_w = phi(all_edges) / np.maximum(all_vals[:-1], 1.0) ** 2

        gmax = min(tau, (self.buckets + 1) // 2)
        if self.group_policy == "canonical":
            cands = [gmax]
        elif isinstance(self.group_policy, int):
            cands = [min(self.group_policy, gmax)]
        else:
            cands = sorted({1 << i for i in range(gmax.bit_length()) if 1 << i <= gmax}
                           | {gmax})
        best: tuple[float, int, np.ndarray, np.ndarray] | None = None
        for g in cands:
            label = merge_smallest(sizes, g)
            bp, vals = self._fit(ev, delta, label[gid], g, sizes, label, phi,
                                 (all_edges, all_vals))
            h = np.zeros(all_vals.shape[0] - 1)
            if bp.shape[0]:
                idx = np.searchsorted(bp, all_edges[:-1], side="right") - 1
                inside = (idx >= 0) & (idx < vals.shape[0])
                h[inside] = vals[idx[inside]]
            err = float(np.sum(all_w * (h - all_vals[:-1]) ** 2))
            self.candidates.append((g, math.sqrt(err)))
            if best is None or err < best[0]:
                best = (err, g, bp, vals)
        assert best is not None
        err, self.groups, bp, vals = best
        self.build_error = math.sqrt(err)
        self._set_steps(bp, vals)
        self._mark_built(n)

    def _phi_fn(self, d0: float, d1: float) -> Callable[[np.ndarray], np.ndarray]:
        """``φ`` measure of the pieces between consecutive ``edges`` (class docstring)."""
        sample = self.query_sample
        span = d1 - d0

        def phi(edges: np.ndarray) -> np.ndarray:
            uni = np.diff(np.clip(edges, d0, d1)) / span
            if sample is None or sample.shape[0] == 0:
                return uni
            emp = np.diff(np.searchsorted(sample, edges, side="left")) / sample.shape[0]
            return 0.25 * uni + 0.75 * emp
        return phi

    def _fit(self, ev: np.ndarray, delta: np.ndarray, lab: np.ndarray, g: int,
             sizes: np.ndarray, label: np.ndarray,
             phi: Callable[[np.ndarray], np.ndarray],
             total: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """One candidate: the summed step function for the partition ``label`` (``g`` groups)."""
        small = lab.astype(np.int16) if g < 2**15 else lab   # 16-bit: numpy's O(n) radix sort
        order = np.argsort(small, kind="stable")     # events by group, by value within
        counts = np.bincount(lab, minlength=g)
        gsize = np.bincount(label, weights=sizes, minlength=g).astype(np.int64)
        groups: list[Group] = []
        pos = 0
        for i in range(g):
            sl = order[pos:pos + counts[i]]
            pos += counts[i]
            edges, vals = _compress(ev[sl], delta[sl])
            y = vals[:-1].astype(np.float64)
            if self.weights == "total":   # relative to f_I, the count being estimated
                at = np.searchsorted(total[0], edges[:-1], side="right") - 1
                w = phi(edges) / np.maximum(total[1][at], 1.0) ** 2
            else:                           # App. B as written: relative to the group's own
                w = phi(edges) / np.maximum(y, 1.0) ** 2
            w = w + 1e-12 * (float(w.max()) if w.max() > 0 else 1.0)  # zero φ: never 0/0
            top = int(np.argmax(y))
            sides = [s for s in (side_of(y[:top + 1], w[:top + 1], True, 0),
                                 side_of(y[top + 1:], w[top + 1:], False, top + 1)) if s]
            groups.append(Group(edges, int(gsize[i]), sides))
        budget = self.buckets - g + 1
        if self.allocation == "greedy":
            greedy_split(groups, budget)
        else:
            for grp, k in zip(groups, allocate_cardinality(groups, budget), strict=True):
                greedy_split([grp], k)
        for grp in groups:
            if not grp.spanning:
                for s in grp.sides:
                    refine(s, self.lloyd_iterations)
        return steps_of(groups)

    def _set_steps(self, bp: np.ndarray, vals: np.ndarray) -> None:
        self._bp: list[float] = bp.tolist()
        self._bp_arr = np.asarray(bp, np.float64)
        raw = [0.0, *vals.tolist(), 0.0] if bp.shape[0] else [0.0]
        self._vals: list[float] = raw
        self._est: list[float] = [v if v > 0.0 else 0.0 for v in raw]
        self._est_arr: np.ndarray | None = None
        self._edges: list[float] = _region_edges(bp).tolist() if bp.shape[0] else []
        self._edges_arr = np.array(self._edges)


def _compress(ev: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact step function of sorted events (+1 at ``lo``, −1 at ``hi⁺``): ``(edges, values)``
    with ``values[i]`` on ``[edges[i], edges[i+1])`` and ``values[-1] == 0``."""
    last = np.ones(ev.shape[0], np.bool_)
    last[:-1] = ev[1:] != ev[:-1]
    return ev[last], np.cumsum(delta)[last]


def _region_edges(bp: np.ndarray) -> np.ndarray:
    """Finite edges of the ``P + 2`` regions (below, pieces, above) for the fractional rule: an
    infinite end becomes the finite one ∓ ``vw``, the outside regions get width ``vw``."""
    e = bp.astype(np.float64).copy()
    fin = e[np.isfinite(e)]
    # halves first: the span of edges near ±1.8e308 overflows; vw is capped so that the outer
    # edges stay finite (clipped below) for any finite data
    span = 2.0 * (float(fin[-1]) / 2 - float(fin[0]) / 2) if fin.shape[0] >= 2 else 0.0
    vw = min(span / max(fin.shape[0] - 1, 1), 1e306) if span > 0 else 1.0
    fmax = float(np.finfo(np.float64).max)
    with np.errstate(over="ignore"):  # edges next to ±1.8e308 may overflow: clipped at the end
        if fin.shape[0] == 0:
            e = np.array([-0.5, 0.5]) if e.shape[0] == 2 else np.array([0.0, 1.0])
        else:
            if e[0] == -_INF:
                e[0] = e[1] - vw
            if e[-1] == _INF:
                e[-1] = e[-2] + vw
        return np.clip(np.concatenate([[e[0] - vw], e, [e[-1] + vw]]), -fmax, fmax)
