"""The per-tuple cost-based router (paper 004 §4): ``SJ-Dynamic``, ``BJ-Dynamic``, ``WJ-Dynamic``.

Each Dynamic strategy keeps every member strategy's index up to date (the paper's
"pre-compiled alternatives") and, per incoming tuple, evaluates each member's cost model
(:mod:`matcher.cost_model`) from exact quantities (|S|, |Q|, τ, hotspot sizes, the key's partner
count m′, a window key's m_b) and estimated ones (n′ from an interval histogram of the
subscriptions' own ranges, :mod:`matcher.histogram`; n″ and m̄_b as §4.1/§4.2 describe), then
runs only the cheapest member. Every member yields the same deliveries, so routing never changes
results — only speed. Decisions are counted per member (``stats()["decisions"]``, exported by
the server as ``hotjoin_router_decisions_total``).

Routing overhead is kept to a few hundred nanoseconds per tuple:

* band joins' costs (Theorem 2) depend only on |Q|, |S|, τ and hotspot sizes, so the choice is
  re-evaluated every ``BAND_REFRESH`` tuples and after any subscription change, not per tuple;
* select and window joins read m′ from the key index lookup every member does first anyway
  (§4.2: "we can perform this lookup first without any penalty") — exact, so no histogram of
  stored keys is needed for m′; n′ is one histogram lookup.

``force(name)`` pins one member (benchmarks time every member on the same tuples that way, which
is how ``*-Optimum`` is measured: the fastest member per tuple, :mod:`matcher.bench.router`).
Members share one id list; an index is never built twice for the same subscription.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .band_join import BAND_STRATEGIES, BandStrategy, DenseIds, MatchBuffer, make_band_strategy
from .base_table import BaseTable
from .cost_model import CostProfile, g2, g3, lg, load_profile
from .histogram import IntervalHistogramChooser
from .model import Side
from .select_join import (
    SCATTERED_SF_COST,
    SELECT_STRATEGIES,
    SelectStrategy,
    make_select_strategy,
    own_other,
    partner_group,
)
from .subscriptions import SubscriptionColumns
from .window_join import (
    WINDOW_STRATEGIES,
    WindowStrategy,
    make_window_strategy,
    partners_of,
)

BAND_REFRESH = 64
"""Band joins re-evaluate Theorem 2's costs every this many tuples (|S| moves by at most that)."""
PLAN_REFRESH = 64
"""Select and window joins refold the slowly moving quantities (|S|, |Q|, τ, hotspot sizes) into
per-member constants every this many tuples; per tuple only m′, n′, m_b, m̄_b are read."""
SAMPLE_EVERY = 256
"""Every this many routed tuples (or n/64 with n subscriptions, whichever is more), the exact
n′ is counted once (O(n) numpy, ~5 ns per subscription) to score the two histograms; so the
sampling costs at most ~0.3 µs per tuple on average."""

DEFAULT_MEMBERS = {
    "select": ("SJ-JoinFirst", "SJ-SelectFirst", "SJ-Vanilla", "SJ-Hotspot"),
    "band": ("BJ-QOuter", "BJ-DOuter", "BJ-MJ", "BJ-SSI", "BJ-Hotspot"),
    "window": ("WJ-JoinFirst", "WJ-SelectFirst", "WJ-SSI", "WJ-Hotspot"),
}
"""The alternatives each Dynamic strategy routes between (option ``router_members`` overrides).
SJ-Dynamic uses the paper's four (§5.4); SJ-SSI is left out as SJ-Hotspot contains it."""

DYNAMIC_NAMES = {"select": "SJ-Dynamic", "band": "BJ-Dynamic", "window": "WJ-Dynamic"}


def _profile(options: dict[str, Any]) -> CostProfile:
    p = options.get("cost_profile")
    if isinstance(p, CostProfile):
        return p
    prof = load_profile(p)
    options["cost_profile"] = prof  # one load per engine, shared by the three kinds
    return prof


def _members(kind: str, options: dict[str, Any], allowed: tuple[str, ...]) -> tuple[str, ...]:
    names = tuple((options.get("router_members") or {}).get(kind) or DEFAULT_MEMBERS[kind])
    bad = [n for n in names if n not in allowed]
    if bad or not names:
        raise ValueError(f"router_members[{kind!r}] must name {kind}-join strategies "
                         f"({', '.join(allowed)}), got {names!r}")
    return names


class _Routing:
    """What the three Dynamic strategies share: members, constants, decisions, forcing."""

    kind = ""
    member_names: tuple[str, ...] = ()

    def _init_routing(self, options: dict[str, Any]) -> None:
        prof = _profile(options)
        self.coef = [prof.constants(n) for n in self.member_names]
        self.decisions = dict.fromkeys(self.member_names, 0)
        self.forced: int | None = None
        self.last = -1

    def force(self, name: str | None) -> None:
        """Run only member ``name`` from now on (None: route by cost again). Benchmarks."""
        self.forced = None if name is None else self.member_names.index(name)

    def check_invariants(self) -> None:
        """Every member's own invariants (the engine's tests call this after each operation)."""
        for m in self.members:  # type: ignore[attr-defined]
            check = getattr(m, "check_invariants", None)
            if check is not None:
                check()

    def memory_bytes(self) -> int:
        """The shared id list once plus each member's index."""
        ids = self.ids  # type: ignore[attr-defined]
        return ids.arr.nbytes + sum(m.memory_bytes() - m.ids.arr.nbytes
                                    for m in self.members)  # type: ignore[attr-defined]

    def routing_stats(self) -> dict[str, Any]:
        return {"decisions": dict(self.decisions), "members": list(self.member_names)}


class _OwnRanges:
    """n′(v) per direction: interval histograms of the own ranges (A for R, C for S), §4.1.

    Each direction keeps HIST-EQW and HIST-SSI (Appendix B) in an
    :class:`~matcher.histogram.IntervalHistogramChooser`, updated on every subscription change
    and rebuilt when churn passes its threshold — on the subscribe path, never while matching
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
        for d, h in self.hist.items():
            lo, hi = own_other(self.cols, d)[:2]
            h.add(float(lo[q]), float(hi[q]))
            self._refresh(d)

    def add_many(self, qs: np.ndarray) -> None:
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
        h = self.hist[d]
        self.count += 1
        if self.count % max(SAMPLE_EVERY, len(self.ids) // 64) == 0:
            lo, hi = own_other(self.cols, d)[:2]
            q = self.ids.view()
            h.observe(v, int(np.count_nonzero((lo[q] <= v) & (hi[q] >= v))))
        return h.estimate(v)

    def stats(self) -> dict[str, Any]:
        return {"R" if d > 0 else "S": h.stats() for d, h in self.hist.items()}


# -- select joins ------------------------------------------------------------------------------


class SelectDynamic(_Routing, SelectStrategy):
    """SJ-Dynamic (§4.1, §5.4): the cheapest of the members per incoming tuple."""

    name = "SJ-Dynamic"
    kind = "select"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any]) -> None:
        SelectStrategy.__init__(self, cols, options)
        self.member_names = _members("select", options, SELECT_STRATEGIES)
        self.members = [make_select_strategy(n, cols, options) for n in self.member_names]
        for m in self.members:
            m.ids = self.ids
        self._init_routing(options)
        self.own = _OwnRanges(cols, self.ids)
        self.hot = next((m for m in self.members if m.name == "SJ-Hotspot"), None)
        self.sf_cost = float(options.get("scattered_sf_cost", SCATTERED_SF_COST))
        self._hot_sqrt: dict[int, float] = {}  # cleared on every subscription change
        self._plans: dict[int, list[tuple[int, float, float, int]]] = {1: [], -1: []}
        self._scat: dict[int, tuple[float, float, float, float]] = {
            1: (0.0, 0.0, 0.0, 0.0), -1: (0.0, 0.0, 0.0, 0.0)}
        self._countdown = {1: -1, -1: -1}

    def _add(self, q: int) -> None:
        for m in self.members:
            m._add(q)
        self.own.add(q)
        self._changed()

    def _add_many(self, qs: np.ndarray) -> None:
        for m in self.members:
            m._add_many(qs)
        self.own.add_many(qs)
        self._changed()

    def _remove(self, q: int) -> None:
        for m in self.members:
            m._remove(q)
        self.own.remove(q)
        self._changed()

    def _changed(self) -> None:
        self._hot_sqrt.clear()
        self._countdown = {1: -1, -1: -1}

    def _hot_sum(self, d: int) -> float:
        """Σ_i √|Q_i^H| over the hotspots for direction ``d`` (hot sets change only with
        subscriptions, so it is recomputed only after one changed: O(2/α))."""
        s = self._hot_sqrt.get(d)
        if s is None:
            assert self.hot is not None
            tr = self.hot.trackers[d]
            s = self._hot_sqrt[d] = float(sum(math.sqrt(len(m)) for m in
                                              tr._hmembers.values()))
        return s

    def features(self, dirn: int, v: float, table: BaseTable, size: int) -> list[list[float]]:
        """Each member's feature vector (``cost_model.FEATURES``) for one incoming tuple."""
        d = 1 if dirn > 0 else -1
        S = float(len(table))
        Q = float(len(self.ids))
        lgS, lgm = lg(S), lg(size)
        n1 = self.own.estimate(d, v)
        out: list[list[float]] = []
        for name in self.member_names:
            if name == "SJ-JoinFirst":
                out.append([1.0, lgS, size * math.sqrt(Q)])
            elif name == "SJ-SelectFirst":
                out.append([1.0, lgS, lg(Q), n1 * lgm])
            elif name == "SJ-Vanilla":
                out.append([1.0, lgS, Q * lgm])
            elif name == "SJ-Hotspot":
                assert self.hot is not None
                g = self.hot.groups[d]
                g.flush()
                ns = float(len(g.scattered))
                n2 = n1 * ns / Q if Q else 0.0  # n″ ≈ n′ · |Q_S| / |Q|
                scat = min(float(len(g.scat_groups)), self.sf_cost * n2) if ns else 0.0
                out.append([1.0, lgS, lg(ns), scat, scat * lgm, self._hot_sum(d)])
            else:  # SJ-SSI
                tau = float(len(self.members[self.member_names.index(name)].groups[d]))
                out.append([1.0, lgS, tau * lgm, math.sqrt(Q * max(tau, 1.0))])
        return out

    def costs(self, dirn: int, v: float, table: BaseTable, size: int) -> list[float]:
        """Each member's modelled cost (ns) from the full feature vectors (tests, calibration)."""
        return [sum(c * f for c, f in zip(cs, fs, strict=True))
                for cs, fs in zip(self.coef, self.features(dirn, v, table, size), strict=True)]

    def _plan(self, d: int, table: BaseTable) -> list[tuple[int, float, float, int]]:
        """Per member ``(code, A, K)``: cost = A + K · (its per-tuple term); the slowly moving
        parts (|S|, |Q|, τ, hotspot sizes) folded into A and K. Refreshed every
        ``PLAN_REFRESH`` tuples and after any subscription change."""
        lgS = lg(float(len(table)))
        Q = float(len(self.ids))
        plan = []
        for name, c in zip(self.member_names, self.coef, strict=True):
            if name == "SJ-JoinFirst":
                plan.append((0, c[0] + c[1] * lgS, c[2] * math.sqrt(Q)))
            elif name == "SJ-SelectFirst":
                plan.append((1, c[0] + c[1] * lgS + c[2] * lg(Q), c[3]))
            elif name == "SJ-Vanilla":
                plan.append((2, c[0] + c[1] * lgS, c[2] * Q))
            elif name == "SJ-Hotspot":
                assert self.hot is not None
                g = self.hot.groups[d]
                g.flush()
                ns = float(len(g.scattered))
                a = c[0] + c[1] * lgS + c[2] * lg(ns) + c[5] * self._hot_sum(d)
                # per tuple: min(τ_S, sf · n′ · |Q_S| / |Q|) · (c3 + c4 lg m′)
                self._scat[d] = (float(len(g.scat_groups)), self.sf_cost * ns / Q if Q else 0.0,
                                 c[3], c[4])
                plan.append((3, a, 1.0) if ns and (c[3] or c[4]) else (2, a, 0.0))
            else:  # SJ-SSI: cost = A + K · lg m'
                tau = float(len(self.members[self.member_names.index(name)].groups[d]))
                plan.append((2, c[0] + c[1] * lgS + c[3] * math.sqrt(Q * max(tau, 1.0)),
                             c[2] * tau))
        # cheapest-looking first: a member whose fixed part A already exceeds the best cost
        # so far is skipped before its per-tuple estimate is computed
        return sorted(((*t, j) for j, t in enumerate(plan)), key=lambda t: t[1])

    def _match(self, buf: MatchBuffer, dirn: int, v: float, xseq: int, table: BaseTable,
               mode: int, pool: Any, base: int, size: int) -> None:
        i = self.forced
        if i is None:
            d = 1 if dirn > 0 else -1
            self._countdown[d] -= 1
            if self._countdown[d] < 0:
                self._plans[d] = self._plan(d, table)
                self._countdown[d] = PLAN_REFRESH
            lgm = math.log2(size + 2.0)
            n1 = -1.0
            best = math.inf
            i = 0
            for code, a, k, j in self._plans[d]:
                if a >= best:  # its per-tuple term is >= 0: cannot win, skip estimating it
                    continue
                if code == 0:
                    cost = a + k * size
                elif code == 2:
                    cost = a + k * lgm
                elif code == 1:
                    if k == 0.0:
                        cost = a
                    else:
                        if n1 < 0.0:
                            n1 = self.own.estimate(d, v)
                        cost = a + k * n1 * lgm
                else:  # 3: SJ-Hotspot's scattered part
                    if n1 < 0.0:
                        n1 = self.own.estimate(d, v)
                    tau_s, f, c3, c4 = self._scat[d]
                    cost = a + min(tau_s, f * n1) * (c3 + c4 * lgm)
                if cost < best:
                    best, i = cost, j
            self.last = i
            self.decisions[self.member_names[i]] += 1
        else:
            self.last = i
        self.members[i]._match(buf, dirn, v, xseq, table, mode, pool, base, size)

    def stats(self) -> dict[str, Any]:
        st: dict[str, Any] = {**SelectStrategy.stats(self), **self.routing_stats(),
                              "histograms": self.own.stats()}
        if self.hot is not None:
            hs = self.hot.stats()
            st.update(hotspots=hs["hotspots"], scattered=hs["scattered"])
        for m in self.members:
            if m.name == "SJ-SSI":
                st["tau"] = m.stats()["tau"]
        return st


# -- band joins --------------------------------------------------------------------------------


class BandDynamic(_Routing, BandStrategy):
    """BJ-Dynamic (§4.2): Theorem 2's costs from |Q|, |S|, τ and the hotspot sizes."""

    name = "BJ-Dynamic"
    kind = "band"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any]) -> None:
        BandStrategy.__init__(self, cols, options)
        self.member_names = _members("band", options, BAND_STRATEGIES)
        self.members: list[BandStrategy] = [make_band_strategy(n, cols, options)
                                            for n in self.member_names]
        for m in self.members:
            m.ids = self.ids
        self._init_routing(options)
        self._countdown = {1: 0, -1: 0}
        self._choice = {1: 0, -1: 0}

    def _add(self, q: int) -> None:
        for m in self.members:
            m._add(q)
        self._countdown = {1: 0, -1: 0}

    def _add_many(self, qs: np.ndarray) -> None:
        for m in self.members:
            m._add_many(qs)
        self._countdown = {1: 0, -1: 0}

    def _remove(self, q: int) -> None:
        for m in self.members:
            m._remove(q)
        self._countdown = {1: 0, -1: 0}

    def features(self, table: BaseTable) -> list[list[float]]:
        """Each member's Theorem 2 feature vector (they do not depend on the tuple)."""
        n = float(len(self.ids))
        m = float(len(table))
        lgm = lg(m)
        out: list[list[float]] = []
        for name, mem in zip(self.member_names, self.members, strict=True):
            if name == "BJ-QOuter":
                out.append([1.0, n * lgm])
            elif name == "BJ-DOuter":
                out.append([1.0, m * lg(n)])
            elif name == "BJ-MJ":
                out.append([1.0, m + n])
            elif name == "BJ-SSI":
                out.append([1.0, len(mem.groups) * lgm])  # type: ignore[attr-defined]
            else:  # BJ-Hotspot
                lis = mem.listener  # type: ignore[attr-defined]
                ns = float(len(lis.scattered_ids))
                out.append([1.0, len(lis) * lgm, min(ns * lgm, ns + m) if ns else 0.0])
        return out

    def match(self, buf: MatchBuffer, dirn: int, b: float, v: float, xseq: int,
              table: BaseTable, mode: int) -> None:
        i = self.forced
        if i is None:
            d = 1 if dirn > 0 else -1
            if self._countdown[d] <= 0:
                feats = self.features(table)
                costs = [sum(c * f for c, f in zip(cs, fs, strict=True))
                         for cs, fs in zip(self.coef, feats, strict=True)]
                self._choice[d] = min(range(len(costs)), key=costs.__getitem__)
                self._countdown[d] = BAND_REFRESH
            self._countdown[d] -= 1
            i = self._choice[d]
            self.decisions[self.member_names[i]] += 1
        self.last = i
        self.members[i].match(buf, dirn, b, v, xseq, table, mode)

    def stats(self) -> dict[str, Any]:
        st: dict[str, Any] = {**BandStrategy.stats(self), **self.routing_stats()}
        for m in self.members:
            ms = m.stats()
            if m.name == "BJ-SSI":
                st["tau"] = ms["tau"]
            if m.name == "BJ-Hotspot":
                st.update(hotspots=ms["hotspots"], scattered=ms["scattered"])
        return st


# -- window joins ------------------------------------------------------------------------------


class WindowDynamic(_Routing, WindowStrategy):
    """WJ-Dynamic (§4.2): Theorem 4's costs from m′, m_b, m̄_b and n′ of the tuple's key."""

    name = "WJ-Dynamic"
    kind = "window"

    def __init__(self, cols: SubscriptionColumns, options: dict[str, Any],
                 tables: dict[Side, BaseTable]) -> None:
        WindowStrategy.__init__(self, cols, options, tables)
        self.member_names = _members("window", options, WINDOW_STRATEGIES)
        self.members: list[WindowStrategy] = [make_window_strategy(n, cols, options, tables)
                                              for n in self.member_names]
        for m in self.members:
            m.ids = self.ids
        self._init_routing(options)
        self.own = _OwnRanges(cols, self.ids)
        self._plans: dict[int, list[tuple[int, float, float, float, float, float, int]]] = {
            1: [], -1: []}
        self._countdown = {1: -1, -1: -1}

    def _sync_w(self) -> None:
        self._countdown = {1: -1, -1: -1}
        for m in self.members:
            m.wmax = self.wmax

    def _add(self, q: int) -> None:
        self._sync_w()
        for m in self.members:
            m._add(q)
        self.own.add(q)

    def _add_many(self, qs: np.ndarray) -> None:
        self._sync_w()
        for m in self.members:
            m._add_many(qs)
        self.own.add_many(qs)

    def _remove(self, q: int) -> None:
        self._sync_w()
        for m in self.members:
            m._remove(q)
        self.own.remove(q)

    def features(self, dirn: int, b: float, v: float, t: int, table: BaseTable,
                 p: Any) -> list[list[float]]:
        """Each member's Theorem 4 feature vector for one incoming tuple (§4.2's estimates)."""
        d = 1 if dirn > 0 else -1
        n = float(len(self.ids))
        m = float(len(table))
        mp = float(p.size)
        mb = self._m_b(p, t)
        n1 = self.own.estimate(d, v)
        lgm = lg(m)
        out: list[list[float]] = []
        for name, mem in zip(self.member_names, self.members, strict=True):
            if name == "WJ-JoinFirst":
                out.append([1.0, lgm, mb * g3(n)])
            elif name == "WJ-SelectFirst":
                out.append([1.0, lg(n), lgm, n1 * g2(mp)])
            else:
                sky = mem.skies[d]  # type: ignore[attr-defined]
                st = sky.keys.get(b)
                if name == "WJ-SSI":
                    tau = float(len(mem.groups[d]))  # type: ignore[attr-defined]
                    nh = n
                    scat = 0.0
                else:
                    g = mem.groups[d]  # type: ignore[attr-defined]
                    tau = float(len(g))
                    ns = float(len(g.scattered))
                    nh = n - ns
                    scat = (n1 * ns / n if n else 0.0) * g2(mp)
                if st is not None and sky._fresh(st):
                    mbar = float(st.n)
                    mpb = 2.0 * mbar
                else:  # a stale skyline is recomputed in one pass over the key's partners
                    mbar = min(mb, 2.0 * tau)
                    mpb = mp
                if name == "WJ-SSI":
                    out.append([1.0, lgm, mpb, mbar * g3(nh)])
                else:
                    out.append([1.0, lgm, mpb, mbar * g3(nh), scat])
        return out

    def costs(self, dirn: int, b: float, v: float, t: int, table: BaseTable,
              p: Any) -> list[float]:
        """Each member's modelled cost (ns) from the full feature vectors (tests, calibration)."""
        return [sum(c * f for c, f in zip(cs, fs, strict=True)) for cs, fs in
                zip(self.coef, self.features(dirn, b, v, t, table, p), strict=True)]

    def _plan(self, d: int, table: BaseTable) -> list[tuple[int, float, float, float, float,
                                                            float, int]]:
        """Per member ``(code, A, K, K2, K3, τ)`` with the slowly moving quantities folded in
        (see ``SelectDynamic._plan``); per tuple only m′, m_b, m̄_b, n′ are read."""
        n = float(len(self.ids))
        lgm = lg(float(len(table)))
        plan = []
        for name, mem, c in zip(self.member_names, self.members, self.coef, strict=True):
            if name == "WJ-JoinFirst":
                plan.append((0, c[0] + c[1] * lgm, c[2] * g3(n), 0.0, 0.0, 0.0))
            elif name == "WJ-SelectFirst":
                plan.append((1, c[0] + c[1] * lg(n) + c[2] * lgm, c[3], 0.0, 0.0, 0.0))
            elif name == "WJ-SSI":
                tau = float(len(mem.groups[d]))  # type: ignore[attr-defined]
                plan.append((2, c[0] + c[1] * lgm, c[2], c[3] * g3(n), 0.0, tau))
            else:  # WJ-Hotspot
                g = mem.groups[d]  # type: ignore[attr-defined]
                ns = float(len(g.scattered))
                plan.append((3, c[0] + c[1] * lgm, c[2], c[3] * g3(n - ns),
                             c[4] * ns / n if n else 0.0, float(len(g))))
        return sorted(((*t, j) for j, t in enumerate(plan)), key=lambda t: t[1])

    def match(self, buf: MatchBuffer, dirn: int, b: float, v: float, t: int, xseq: int,
              table: BaseTable, mode: int, now: int) -> None:
        p = partners_of(table, b)
        if p is None:
            return
        i = self.forced
        if i is None:
            d = 1 if dirn > 0 else -1
            self._countdown[d] -= 1
            if self._countdown[d] < 0:
                self._plans[d] = self._plan(d, table)
                self._countdown[d] = PLAN_REFRESH
            mp = float(p.size)
            mb = -1.0
            n1 = -1.0
            best = math.inf
            i = 0
            for code, a, k, k2, k3, tau, j in self._plans[d]:
                if a >= best:  # its per-tuple terms are >= 0: cannot win
                    continue
                if code == 0:
                    if mb < 0.0:
                        mb = self._m_b(p, t)
                    cost = a + k * mb
                elif code == 1:
                    if k != 0.0 and n1 < 0.0:
                        n1 = self.own.estimate(d, v)
                    cost = a + (k * n1 * math.sqrt(mp) if k != 0.0 else 0.0)
                else:
                    sky = self.members[j].skies[d]  # type: ignore[attr-defined]
                    st = sky.keys.get(b)
                    if st is not None and not st.stale and st.version == sky.version:
                        mbar = float(st.n)
                        mpb = 2.0 * mbar
                    else:
                        if mb < 0.0:
                            mb = self._m_b(p, t)
                        mbar = min(mb, 2.0 * tau)
                        mpb = mp
                    cost = a + k * mpb + k2 * mbar
                    if k3 != 0.0:
                        if n1 < 0.0:
                            n1 = self.own.estimate(d, v)
                        cost += k3 * n1 * math.sqrt(mp)
                if cost < best:
                    best, i = cost, j
            self.last = i
            self.decisions[self.member_names[i]] += 1
        else:
            self.last = i
        self.members[i].match(buf, dirn, b, v, t, xseq, table, mode, now)

    def _m_b(self, p: Any, t: int) -> float:
        """m_b: the key's partners within w_max of t (two searches of the by-time run)."""
        tv = p.tv[p.tbase: p.tbase + p.tsize]
        w = self.wmax
        return float(tv.searchsorted(t + w, "right") - tv.searchsorted(t - w))

    def stats(self) -> dict[str, Any]:
        st: dict[str, Any] = {**WindowStrategy.stats(self), **self.routing_stats(),
                              "histograms": self.own.stats()}
        for m in self.members:
            ms = m.stats()
            if m.name == "WJ-SSI":
                st["tau"] = ms["tau"]
            if m.name == "WJ-Hotspot":
                st.update(hotspots=ms["hotspots"], scattered=ms["scattered"])
        return st


__all__ = ["BandDynamic", "SelectDynamic", "WindowDynamic", "DEFAULT_MEMBERS", "DYNAMIC_NAMES",
           "partner_group"]
