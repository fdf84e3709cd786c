"""The per-tuple cost-based router of paper 004 §4.

- :mod:`~hotjoin.matcher.router.cost_model`: one cost model object per strategy (its features
  and its folded plan) and the fitted constants (Table II), loaded from a profile;
- :mod:`~hotjoin.matcher.router.dynamic`: SJ-, BJ- and WJ-Dynamic, which keep every member's
  index and send each tuple to the cheapest, learning online;
- :mod:`~hotjoin.matcher.router.calibrate`: ``hotjoin calibrate``, which fits the constants here.
"""
