"""The per-tuple cost-based router of paper 004 §4.

- :mod:`~hotjoin.matcher.router.cost_model`: one cost model object per strategy (its features
  and its folded plan) and the fitted constants (Table II), loaded from a profile;
- :mod:`~hotjoin.matcher.router.select`, :mod:`~hotjoin.matcher.router.band`,
  :mod:`~hotjoin.matcher.router.window`: SJ-, BJ- and WJ-Dynamic, which keep every member's index
  and send each tuple to the cheapest, through the kind interface's public methods only;
- :mod:`~hotjoin.matcher.router.learning`: the online calibration every router shares (timed runs
  moving each member's correction factor), and :mod:`~hotjoin.matcher.router.estimators`: the n′
  estimates from interval histograms;
- :mod:`~hotjoin.matcher.router.choice_kernels`: SJ-Dynamic's compiled per-tuple decision;
- :mod:`~hotjoin.matcher.router.dynamic`: the routers by name and their default members;
- :mod:`~hotjoin.matcher.router.calibrate`: ``hotjoin calibrate``, which fits the constants here.
"""
