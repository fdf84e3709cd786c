"""Stabbing partitions of intervals (paper 004 §2, App. A) and interval histograms (App. B).

- :mod:`~hotjoin.matcher.partition.stabbing`: the dynamic stabbing partition, τ groups each
  sharing a point, kept within a constant factor of the optimum (§2, Lemma 2).
- :mod:`~hotjoin.matcher.partition.hotspot`: the hotspot tracker: α-hotspots of a stream of
  intervals and the scattered rest (§2.2, Theorem 1).
- :mod:`~hotjoin.matcher.partition.histogram`: HIST-EQW and HIST-SSI interval histograms that
  feed the router's cost models (App. B), one module each (``hist_eqw``, ``hist_ssi``), with
  HIST-SSI's fitting (``hist_fit``), the chooser the router uses (``hist_chooser``), exact
  counts (``exact_counter``), the compiled estimates (``hist_lookup``) and what they share
  (``hist_common``); ``histogram`` re-exports them all.
"""
