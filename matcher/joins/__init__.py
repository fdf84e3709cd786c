"""The join strategies of paper 004 §3, one module per join kind plus its numba kernels.

- :mod:`~hotjoin.matcher.joins.interface`: the kind interface every strategy and router
  implements (``KindIndex``: add/remove subscriptions, match one event or a run, snapshot,
  state, stats) and the run bundles it takes (``OneEvent``, ``EventRun``);
- :mod:`~hotjoin.matcher.joins.protocol`: what the kernels share — modes, output buffers, emit
  conventions and the kernels' common array bundles;
- :mod:`~hotjoin.matcher.joins.band`: band joins (§3.1): BJ-QOuter, BJ-DOuter, BJ-MJ, BJ-SSI,
  BJ-Hotspot;
- :mod:`~hotjoin.matcher.joins.select`: select joins (§3.2): SJ-JoinFirst, SJ-SelectFirst,
  SJ-Vanilla, SJ-SSI, SJ-Hotspot, and the SelectFirst index window joins share;
- :mod:`~hotjoin.matcher.joins.window`: window joins (§3.3): WJ-JoinFirst, WJ-SelectFirst, WJ-SSI,
  WJ-Hotspot;
- :mod:`~hotjoin.matcher.joins.skyline`: the skylines that answer a hotspot group's probe;
- ``*_kernels``: the compiled kernels, over flat arrays only (decorated with
  ``matcher/config.py``'s ``kernel``, built on ``matcher/core.py``'s primitives).

The kinds are registered in ``matcher/kinds.py``.
"""
