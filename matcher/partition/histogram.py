"""Histograms of an interval set: how many intervals a point stabs (paper 004, §4.1, App. B).

For a set ``I`` of closed intervals ``[lo, hi]`` (bounds may be ``±inf``), ``f_I(x)`` is the
number of intervals of ``I`` that contain ``x``.  The cost-based router (§4.1, ``n'`` and ``n''``)
needs an estimate of ``f_I`` for every incoming tuple, so an estimate must cost well under a
microsecond while subscriptions come and go.  The histogram modules keep ``f_I`` as a *step
function* and offer:

* :class:`EquiWidthHistogram` -- HIST-EQW, the paper's §4.1 histogram: ``B`` equal buckets over a
  domain ``[lo, hi]``; adding ``[a, b]`` raises every bucket it covers completely by 1 and every
  partially covered bucket by the covered fraction (removal subtracts the same).  Two more
  buckets hold the estimate for ``x < lo`` and ``x > hi``.  ``estimate`` is O(1).
* :class:`SSIHistogram` -- HIST-SSI of Appendix B: the canonical stabbing partition (Lemma 1),
  per group a left (increasing) and right (decreasing) step function, each compressed by weighted
  1-D k-means (Lloyd's iterations; weights ``w = ∫φ / y²``, Lemma 5), buckets given to groups in
  proportion to their cardinality, and the per-group functions summed into one step function
  (``estimate`` is one ``bisect``, O(log k)).
* :class:`IntervalHistogramChooser` -- keeps both, scores each on exact counts fed to it
  (``observe``) and answers with the better one; this is what the router uses.
* :class:`ExactStabbingCounter` -- exact ``f_I`` from two sorted arrays (tests, sampling).

One module each (this one re-exports them, so ``from hotjoin.matcher.partition.histogram import
X`` keeps working): :mod:`.hist_eqw` (HIST-EQW), :mod:`.hist_ssi` (HIST-SSI) and
:mod:`.hist_fit` (its fitting: isotonic sides, weighted k-means, bucket allocation),
:mod:`.hist_chooser` (the chooser), :mod:`.exact_counter` (exact counts), :mod:`.hist_lookup`
(the estimates in compiled code, a ``lookup()`` array per histogram) and :mod:`.hist_common`
(what they share: the ``IntervalHistogram`` protocol, closed ends, fractional coverage, the
rebuild rule).

>>> import numpy as np
>>> lo, hi = np.array([0.0, 2.0, 3.0]), np.array([4.0, 6.0, 3.5])
>>> ExactStabbingCounter(lo, hi).count(3.0)
3
>>> eqw = EquiWidthHistogram(0.0, 8.0, 4)
>>> eqw.add(1.0, 3.0)                       # buckets [0,2) [2,4) [4,6) [6,8]
>>> round(eqw.estimate(0.5), 6), round(eqw.estimate(2.5), 6), eqw.estimate(5.0)
(0.5, 0.5, 0.0)
>>> ssi = SSIHistogram.build(lo, hi, buckets=8)
>>> [ssi.estimate(x) for x in (1.0, 3.0, 5.0, 7.0)]
[1.0, 3.0, 1.0, 0.0]
"""

from __future__ import annotations

from hotjoin.matcher.partition.exact_counter import ExactStabbingCounter, count_stabbed
from hotjoin.matcher.partition.hist_chooser import IntervalHistogramChooser
from hotjoin.matcher.partition.hist_common import (
    MIN_CHURN,
    IntervalHistogram,
    relative_error,
)
from hotjoin.matcher.partition.hist_eqw import EquiWidthHistogram
from hotjoin.matcher.partition.hist_fit import merge_smallest as _merge_smallest
from hotjoin.matcher.partition.hist_lookup import (
    EQW_LOOKUP,
    LOOKUP_HEADER,
    SSI_LOOKUP,
    bucket_at,
    bucket_function,
    estimate_at,
    estimate_of_bucket,
    lookup_array,
)
from hotjoin.matcher.partition.hist_ssi import SSIHistogram

__all__ = [
    "EQW_LOOKUP",
    "LOOKUP_HEADER",
    "MIN_CHURN",
    "SSI_LOOKUP",
    "EquiWidthHistogram",
    "ExactStabbingCounter",
    "IntervalHistogram",
    "IntervalHistogramChooser",
    "SSIHistogram",
    "_merge_smallest",
    "bucket_at",
    "bucket_function",
    "count_stabbed",
    "estimate_at",
    "estimate_of_bucket",
    "lookup_array",
    "relative_error",
]
