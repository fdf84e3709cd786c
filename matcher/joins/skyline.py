"""Left and right skylines per join key and stabbing point (paper 004 §3.3.2, WJ-SSI).

Setting. The partners of one join key b (say S tuples, for incoming R tuples) are points
``(c, t)`` in the plane S.C × T; the stabbing points ``p_1 < … < p_τ`` of the SSI on the window
joins' C ranges cut the plane into slabs ``[p_j, p_{j+1})`` (slab −1 is ``(−∞, p_1)``, slab τ−1 is
``[p_τ, ∞)``). Within slab j:

* the **right skyline** ``R_b^j`` (j ≥ 0) holds the points not weakly dominated from the left:
  no other point with ``p_j ≤ c' ≤ c`` and ``t' ≥ t`` — closer to ``h_j`` and at least as recent;
* the **left skyline** ``L_b^{j+1}`` (j + 1 < τ) holds the points with no other point with
  ``c ≤ c' < p_{j+1}`` and ``t' ≥ t``.

Points are compared as coordinates: of several tuples at the same ``(c, t)`` one represents them.
Along ``R`` (increasing c) times strictly increase; along ``L`` (decreasing c) likewise. The union
of all slab skylines, ``S̄_b``, contains for every stabbing point ``p_i`` the skylines of *all*
points left and right of ``h_i`` (Fig. 6(ii)), so a window join box ``rangeC × [0, w]`` of group i
holds a point ``(c, t_now − t)`` of ``S_b`` iff it holds one of ``S̄_b`` (Fig. 6(i)). Total size
``≤ 2 |S_b|``.

Maintenance, exactly as §3.3.2 and lazy where the paper is lazy:

* **insertion** of a partner: its slab's R and L are updated in place (a new point replaces a
  consecutive run of dominated points) — O(skyline of the slab);
* **stabbing points change** (subscriptions come and go): every key's skylines are *stale*
  (one version counter); a key is recomputed in one pass over its partners sorted by C the next
  time it is queried (:func:`skyline_pass`) — never worse than WJ-JoinFirst's pass;
* **time advances / w_max shrinks**: a key's skylines cover ``t ≥ ω_b``; raising ``ω_b`` only
  drops the points older than it (the skyline of a time window is the skyline of everything,
  cut to the window, because a dominating point is never older);
* **w_max grows** (``ω`` moves back): recomputed in one pass (the extension of the paper).

Beyond the paper (append-only, in order): a **removed** partner (delete, retention) that is a
skyline point makes its key stale; one that is not changes nothing. Disorder is handled by the
caller (:mod:`matcher.joins.window`): when a partner is newer than the probing tuple, the stored
skylines (by recency) are not the skylines by ``|Δt|``, and :func:`skyline_pass` with
``rel=True`` computes the skylines by ``−|t_x − t|`` in one pass instead.

>>> import numpy as np
>>> vals = np.array([1.0, 2.0, 3.0, 6.0]); slots = np.arange(4); times = np.array([5, 9, 7, 1])
>>> c, t, s, f = skyline_pass(vals, slots, times, 0, 4, np.array([4.0]), 0, False, 0, 0)
>>> [(float(x), int(y), int(z)) for x, y, z in zip(c, t, f)]  # L of slab −1, R of slab 0
[(2.0, 9, 2), (3.0, 7, 2), (6.0, 1, 1)]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hotjoin.matcher.config import INLINE, kernel
from hotjoin.matcher.core import upper_bound

R_FLAG = 1
L_FLAG = 2
_TMIN = np.iinfo(np.int64).min


@kernel(**INLINE)
def _score(t: int, rel: bool, now: int) -> int:
    return -abs(now - t) if rel else t


@kernel
def skyline_pass(vals: np.ndarray, slots: np.ndarray, times: np.ndarray, base: int, size: int,
                 points: np.ndarray, omega: int, rel: bool, now: int, wmax: int):
    """All slab skylines of one key in one pass over its partners sorted by value.

    ``vals[base:base+size]`` ascending with ``slots``; a partner's time is ``times[slot]``.
    ``rel=False``: score = time, partners with time < ``omega`` are ignored (the stored skylines).
    ``rel=True``: score = −|now − time|, partners with |now − time| > ``wmax`` ignored (disorder).
    Returns ``(c, t, slot, flags)`` of the skyline points in ascending c. O(size + #slabs·log τ).
    """
    end = base + size
    tau = points.shape[0]
    flag = np.zeros(size, dtype=np.int8)
    pos = base
    while pos < end:
        j = upper_bound(points, 0, points.shape[0], vals[pos]) - 1
        e = pos
        while e < end and (j + 1 >= tau or vals[e] < points[j + 1]):
            e += 1
        if j >= 0:  # right skyline of h_j over [pos, e)
            run = _TMIN
            i = pos
            while i < e:
                k, best, bt = i, -1, _TMIN
                while k < e and vals[k] == vals[i]:
                    tt = times[slots[k]]
                    ok = abs(now - tt) <= wmax if rel else tt >= omega
                    sc = _score(tt, rel, now)
                    if ok and (best < 0 or sc > bt):
                        best, bt = k, sc
                    k += 1
                if best >= 0 and bt > run:
                    flag[best - base] |= R_FLAG
                    run = bt
                i = k
        if j + 1 < tau:  # left skyline of h_{j+1} over [pos, e)
            run = _TMIN
            i = e - 1
            while i >= pos:
                k, best, bt = i, -1, _TMIN
                while k >= pos and vals[k] == vals[i]:
                    tt = times[slots[k]]
                    ok = abs(now - tt) <= wmax if rel else tt >= omega
                    sc = _score(tt, rel, now)
                    if ok and (best < 0 or sc >= bt):  # >=: the first of equal ones, scanning back
                        best, bt = k, sc
                    k -= 1
                if best >= 0 and bt > run:
                    flag[best - base] |= L_FLAG
                    run = bt
                i = k
        pos = e
    n = 0
    for i in range(size):
        if flag[i]:
            n += 1
    oc = np.empty(n, np.float64)
    ot = np.empty(n, np.int64)
    os_ = np.empty(n, np.int64)
    of = np.empty(n, np.int8)
    n = 0
    for i in range(size):
        if flag[i]:
            oc[n] = vals[base + i]
            os_[n] = slots[base + i]
            ot[n] = times[os_[n]]
            of[n] = flag[i]
            n += 1
    return oc, ot, os_, of


@kernel
def sky_insert(c: np.ndarray, t: np.ndarray, s: np.ndarray, f: np.ndarray, n: int,
               points: np.ndarray, x: float, xt: int, xs: int) -> int:
    """Insert partner (x, xt) at slot xs into one key's skylines (arrays with room for n + 1).

    Only the slab of x changes: x joins R (L) unless a point of that skyline weakly dominates
    it, and then evicts the points it dominates. Returns the new length. O(n).
    """
    tau = points.shape[0]
    if tau == 0:
        return n
    j = upper_bound(points, 0, points.shape[0], x) - 1
    lo = points[j] if j >= 0 else -np.inf
    hi = points[j + 1] if j + 1 < tau else np.inf
    newf = 0
    if j >= 0:
        dom = False
        for i in range(n):
            if (f[i] & R_FLAG) and lo <= c[i] < hi and c[i] <= x and t[i] >= xt:
                dom = True
                break
        if not dom:
            newf |= R_FLAG
            for i in range(n):
                if (f[i] & R_FLAG) and lo <= c[i] < hi and c[i] >= x and t[i] <= xt:
                    f[i] &= ~R_FLAG
    if j + 1 < tau:
        dom = False
        for i in range(n):
            if (f[i] & L_FLAG) and lo <= c[i] < hi and c[i] >= x and t[i] >= xt:
                dom = True
                break
        if not dom:
            newf |= L_FLAG
            for i in range(n):
                if (f[i] & L_FLAG) and lo <= c[i] < hi and c[i] <= x and t[i] <= xt:
                    f[i] &= ~L_FLAG
    m = 0
    for i in range(n):  # drop points that lost both flags
        if f[i]:
            c[m], t[m], s[m], f[m] = c[i], t[i], s[i], f[i]
            m += 1
    if newf:
        k = m
        while k > 0 and c[k - 1] > x:
            c[k], t[k], s[k], f[k] = c[k - 1], t[k - 1], s[k - 1], f[k - 1]
            k -= 1
        c[k], t[k], s[k], f[k] = x, xt, xs, newf
        m += 1
    return m


# -- the store: every key's skylines, by the key's group in the partner table's key index ------
#
# ``SkyStore`` (a plain tuple, kernels unpack it): per group g, the key whose skylines the entry
# holds (``key[g]``, NaN: none), the version of the stabbing points it is current for (``at[g]``,
# −1: stale), its window start ``omega[g]`` and its points ``pool[start[g] : start[g] + n[g]]``
# (room for ``cap[g]``); ``meta`` holds the pool's top, the points' version and counters. An
# entry is the current skylines of key b iff ``key[g] == b`` and ``at[g] == version``: a group
# freed by one key and given to another reads as not current for the newcomer. The pool (four
# arrays ``(c, t, s, f)``) is grown or compacted by the kernels, which return it.

TOP, VERSION, RECOMPUTES, TRIMS, INSERTS, STORED, ONE_PASS, NONE = range(8)
"""Slots of ``meta``: the pool's first free index, the points' version, then counters
(recomputes, trims, inserts; probes through the stored skylines, through a one-pass
skyline, with no stabbing point)."""
_PROBE_SLOT = {"stored": STORED, "one-pass": ONE_PASS, "none": NONE}


@kernel(**INLINE)
def _copy(src: tuple, a: int, dst: tuple, b: int, m: int) -> None:
    """Points ``a … a + m`` of pool ``src`` to ``b …`` of pool ``dst`` (they may be one pool,
    copied to a higher index)."""
    c, t, s, f = src
    dc, dt, ds, df = dst
    for i in range(m):
        dc[b + i], dt[b + i], ds[b + i], df[b + i] = c[a + i], t[a + i], s[a + i], f[a + i]


@kernel
def _room(S: tuple, pool: tuple, g: int, need: int) -> tuple:
    """``pool`` with room for ``need`` points in entry ``g`` (its first ``n[g]`` kept): a full
    entry moves to the pool's top with about twice the room; a full pool is rebuilt with only
    the current entries (a stale entry's points are never read again). Returns the pool."""
    key, at, omega, start, cap, n, meta = S
    if cap[g] >= need:
        return pool
    newcap = max(need, 2 * n[g] + 4)
    top = meta[TOP]
    if top + newcap <= pool[0].shape[0]:
        _copy(pool, start[g], pool, top, n[g])
        start[g], cap[g], meta[TOP] = top, newcap, top + newcap
        return pool
    ver = meta[VERSION]
    live = newcap
    for h in range(at.shape[0]):
        if h != g and at[h] == ver:
            live += cap[h]
    size = max(2 * live, 256)
    new = (np.empty(size, np.float64), np.empty(size, np.int64), np.empty(size, np.int64),
           np.empty(size, np.int8))
    pos = 0
    for h in range(at.shape[0]):
        if h == g:
            continue
        if at[h] != ver:
            at[h], start[h], cap[h], n[h] = -1, 0, 0, 0
            continue
        _copy(pool, start[h], new, pos, n[h])
        start[h] = pos
        pos += cap[h]
    _copy(pool, start[g], new, pos, n[g])
    start[g], cap[g] = pos, newcap
    meta[TOP] = pos + newcap
    return new


@kernel
def sky_refresh(S: tuple, pool: tuple, g: int, b: float, om: int, pv: np.ndarray,
                ps: np.ndarray, times: np.ndarray, base: int, size: int,
                points: np.ndarray) -> tuple:
    """Entry ``g`` made the current skylines of key ``b`` (partners ``pv``/``ps[base : base +
    size]`` by value) over partners with time ≥ ``om``: stale, another key's, or ω moved back:
    one :func:`skyline_pass`; ω moved forward: a trim (the skyline of a later window is the old
    one cut to it, a dominating point is never older). Returns the pool."""
    key, at, omega, start, cap, n, meta = S
    if at[g] != meta[VERSION] or key[g] != b or om < omega[g]:
        c2, t2, s2, f2 = skyline_pass(pv, ps, times, base, size, points, om, False, 0, 0)
        m = c2.shape[0]
        n[g] = 0
        pool = _room(S, pool, g, m)
        c, t, s, f = pool
        o = start[g]
        c[o:o + m], t[o:o + m], s[o:o + m], f[o:o + m] = c2, t2, s2, f2
        n[g], at[g], key[g], omega[g] = m, meta[VERSION], b, om
        meta[RECOMPUTES] += 1
    elif om > omega[g]:
        c, t, s, f = pool
        o, m = start[g], 0
        for i in range(o, o + n[g]):
            if t[i] >= om:
                c[o + m], t[o + m], s[o + m], f[o + m] = c[i], t[i], s[i], f[i]
                m += 1
        if m < n[g]:
            n[g] = m
            meta[TRIMS] += 1
        omega[g] = om
    return pool


@kernel
def sky_insert_many(S: tuple, pool: tuple, gs: np.ndarray, keys: np.ndarray,
                    values: np.ndarray, times: np.ndarray, slots: np.ndarray,
                    points: np.ndarray) -> tuple:
    """New partners (key, value, time, slot), in order, each in group ``gs[i]`` of the key
    index: :func:`sky_insert` into the entries that are current for their key and whose
    window holds the time; the others change nothing. Returns the pool."""
    key, at, omega, start, cap, n, meta = S
    ver = meta[VERSION]
    for i in range(gs.shape[0]):
        g = gs[i]
        if g < 0 or g >= at.shape[0] or at[g] != ver or key[g] != keys[i] or times[i] < omega[g]:
            continue
        pool = _room(S, pool, g, n[g] + 1)
        c, t, s, f = pool
        o = start[g]
        n[g] = sky_insert(c[o:], t[o:], s[o:], f[o:], n[g], points, values[i], times[i],
                          slots[i])
        meta[INSERTS] += 1
    return pool


@kernel
def stored_sizes(gs: np.ndarray, keys: np.ndarray, n: np.ndarray, at: np.ndarray,
                 key_of: np.ndarray, version: int, out: np.ndarray, j: int) -> None:
    """``out[k, j]``: the size of key ``keys[k]``'s skyline when it is current, else −1, read
    from the store by the key's group ``gs[k]`` (−1: no group). An entry counts only if it is
    current for this version of the points and for this very key (a group id freed and reused
    by another key reads as not current)."""
    m = n.shape[0]
    for k in range(gs.shape[0]):
        g = gs[k]
        if 0 <= g < m and at[g] == version and key_of[g] == keys[k]:
            out[k, j] = n[g]
        else:
            out[k, j] = -1.0


class SkylineIndex:
    """``L_b^i``, ``R_b^i`` for every key b of one partner table (the B-tree of skylines, (3)).

    The paper's B-tree keyed by (S.B, p_i) is a store by the key's group in the table's key
    index (module comment above ``TOP``): flat arrays that kernels read and update, so that the
    batch path refreshes, probes and inserts into skylines inside one compiled call
    (``window_kernels.wj_ssi_many``). ``refresh(b, ω)`` brings one key's skylines up to date.
    The per-group arrays grow only to the groups that were given skylines (48 bytes per group
    up to the largest), so an index no tuple ever probed through costs nothing per key.
    """

    def __init__(self, table: Any) -> None:
        self.table = table
        ix = table.enable_key_index(time_order=False)  # by value only (or as the engine keeps it)
        self.generation = ix.generation
        ix.insert_hooks.append(self._on_insert)
        ix.insert_many_hooks.append(self._on_insert_many)
        ix.remove_hooks.append(self._on_remove)
        self.points = np.empty(0, np.float64)
        self.meta = np.zeros(8, dtype=np.int64)
        #: whether any entry may be current (else the insert and remove hooks return at once)
        self.held = False
        self._groups(0)
        self.pool: tuple[np.ndarray, ...] = (np.empty(256, np.float64), np.empty(256, np.int64),
                                             np.empty(256, np.int64), np.empty(256, np.int8))

    def _groups(self, cap: int) -> None:
        """Per-group arrays for ``cap`` groups, every entry empty."""
        self.key = np.full(cap, np.nan)
        self.at = np.full(cap, -1, dtype=np.int64)
        self.omega = np.zeros(cap, dtype=np.int64)
        self.start = np.zeros(cap, dtype=np.int64)
        self.cap = np.zeros(cap, dtype=np.int64)
        self.n = np.zeros(cap, dtype=np.int64)
        self.meta[TOP] = 0

    def store(self) -> tuple[np.ndarray, ...]:
        """The kernels' ``S`` bundle (after :meth:`sync` and :meth:`ready_for`)."""
        return (self.key, self.at, self.omega, self.start, self.cap, self.n, self.meta)

    def sync(self) -> None:
        """Follow the key index: a rebuilt index (new generation) renumbers its groups, so
        every entry is dropped."""
        gen = self.table.key_index.generation
        if gen != self.generation:
            self.generation = gen
            self._groups(self.key.shape[0])  # no entry, no room held in the pool
            self.held = False

    def ready_for(self, g: int) -> None:
        """Before a kernel may give skylines to any group up to ``g``: the per-group arrays
        reach ``g`` and the hooks stop skipping the store."""
        self.held = True
        m = self.key.shape[0]
        if g >= m:
            old, top = self.store(), int(self.meta[TOP])
            self._groups(max(g + 1, 2 * m, 64))
            for new, a in zip(self.store()[:6], old[:6], strict=True):
                new[:m] = a
            self.meta[TOP] = top

    def detach(self) -> None:
        ix = self.table.key_index
        if ix is not None:
            ix.insert_hooks.remove(self._on_insert)
            ix.insert_many_hooks.remove(self._on_insert_many)
            ix.remove_hooks.remove(self._on_remove)

    def set_points(self, points: np.ndarray) -> None:
        """New stabbing points (sorted): every key's skylines become stale. O(τ) compare."""
        if points.shape != self.points.shape or not np.array_equal(points, self.points):
            self.points = np.ascontiguousarray(points, dtype=np.float64)
            self.meta[VERSION] += 1

    @property
    def version(self) -> int:
        return int(self.meta[VERSION])

    @property
    def recomputes(self) -> int:
        return int(self.meta[RECOMPUTES])

    @property
    def trims(self) -> int:
        return int(self.meta[TRIMS])

    @property
    def inserts(self) -> int:
        return int(self.meta[INSERTS])

    def probes(self) -> dict[str, int]:
        """Matches that read the stored skylines, a one-pass skyline (the tuple arrived out of
        order), or none (no stabbing point)."""
        m = self.meta
        return {"stored": int(m[STORED]), "one-pass": int(m[ONE_PASS]), "none": int(m[NONE])}

    def count_probe(self, how: str) -> None:
        """Count one match of the one-tuple path (``window.run_window_ssi``'s answer)."""
        self.meta[_PROBE_SLOT[how]] += 1

    def _entry(self, key: float) -> int:
        """The group whose entry holds ``key``'s current skylines, else −1."""
        self.sync()
        if not self.held:
            return -1
        g = self.table.key_index.lookup(key)
        if g < 0 or g >= self.at.shape[0] or self.at[g] != self.meta[VERSION] \
                or self.key[g] != key:
            return -1
        return g

    def fresh_size(self, key: float) -> float:
        """The size of ``key``'s stored skylines if current, else −1 (the router's cost of
        WJ-SSI reads it: a stale key costs one pass over its partners). O(1)."""
        g = self._entry(key)
        return -1.0 if g < 0 else float(self.n[g])

    def current(self, key: float) -> tuple[int, np.ndarray, np.ndarray, np.ndarray] | None:
        """``(ω, c, t, flags)`` of ``key``'s current skylines as stored (no refresh), else None
        (tests)."""
        g = self._entry(key)
        if g < 0:
            return None
        o, m = int(self.start[g]), int(self.n[g])
        c, t, _, f = self.pool
        return int(self.omega[g]), c[o:o + m].copy(), t[o:o + m].copy(), f[o:o + m].copy()

    def current_sizes(self, gs: np.ndarray, keys: np.ndarray, out: np.ndarray, j: int) -> None:
        """``out[k, j]`` = the size of key ``keys[k]``'s skyline if current, else −1, for keys
        whose groups in the table's key index are ``gs``: one compiled pass over the store
        (WJ-Dynamic on the batch path, §4.2)."""
        self.sync()
        stored_sizes(gs, keys, self.n, self.at, self.key, self.version, out, j)

    def check_invariants(self) -> None:
        """Current entries lie inside the pool's used part, do not overlap, and hold points in
        ascending c each with an R or L flag; none is current unless ``held`` (tests)."""
        ver = self.meta[VERSION]
        live = np.flatnonzero(self.at == ver)
        assert self.held or live.shape[0] == 0
        spans = sorted((int(self.start[g]), int(self.cap[g]), int(g)) for g in live)
        end = 0
        for o, cp, g in spans:
            assert o >= end and self.n[g] <= cp and o + cp <= self.meta[TOP], (g, o, cp)
            end = o + cp
            c, f = self.pool[0][o:o + self.n[g]], self.pool[3][o:o + self.n[g]]
            assert np.all(np.diff(c) >= 0) and np.all(f > 0), g
        assert self.meta[TOP] <= self.pool[0].shape[0]

    def _on_insert(self, key: float, value: float, time: int, slot: int) -> None:
        """One new partner (the one-at-a-time path): only a key with current skylines whose
        window holds ``time`` costs a compiled call."""
        if not self.held:
            return
        g = self._entry(key)
        if g < 0 or time < self.omega[g]:
            return
        self.pool = sky_insert_many(self.store(), self.pool, np.array([g]), np.array([key]),
                                    np.array([value], dtype=np.float64),
                                    np.array([time], dtype=np.int64),
                                    np.array([slot], dtype=np.int64), self.points)

    def _on_insert_many(self, keys: np.ndarray, values: np.ndarray, times: np.ndarray,
                        slots: np.ndarray) -> None:
        """New partners, in order, into the current skylines of their keys: one compiled call."""
        self.sync()
        if not self.held:
            return
        ix = self.table.key_index
        keys = np.asarray(keys, dtype=np.float64)
        self.pool = sky_insert_many(self.store(), self.pool, ix.lookup_many(keys), keys,
                                    np.asarray(values, dtype=np.float64),
                                    np.asarray(times, dtype=np.int64),
                                    np.asarray(slots, dtype=np.int64), self.points)

    def _on_remove(self, key: float, value: float, time: int, slot: int) -> None:
        """A removed partner that is a point of its key's current skylines makes them stale."""
        if not self.held:
            return
        g = self._entry(key)
        if g < 0 or time < self.omega[g]:
            return
        o = int(self.start[g])
        if np.any(self.pool[2][o:o + self.n[g]] == slot):
            self.at[g] = -1

    def refresh(self, key: float, omega: int, g: int | None = None) -> np.ndarray | None:
        """The slots of ``key``'s skyline points over partners with time ≥ ``omega``, brought up
        to date lazily (a view into the store, valid until its next change); None when no
        partner has this key. ``g``: the key's group in the table's key index when the caller
        has it."""
        self.sync()
        ix = self.table.key_index
        if g is None:
            g = ix.lookup(key)
        if g < 0:
            return None
        self.ready_for(g)
        pool = ix.by_value
        self.pool = sky_refresh(self.store(), self.pool, g, key, omega, pool.keys, pool.ids,
                                self.table.times, int(pool.start[g]), int(pool.size[g]),
                                self.points)
        o = int(self.start[g])
        return self.pool[2][o:o + self.n[g]]

    def skylines(self, key: float, omega: int) -> dict[tuple[int, str], list[tuple[float, int]]]:
        """``{(slab j, "R" | "L"): [(c, t), …]}`` after :meth:`refresh` (tests, debugging)."""
        out: dict[tuple[int, str], list[tuple[float, int]]] = {}
        if self.refresh(key, omega) is None:
            return out
        cur = self.current(key)
        assert cur is not None
        _, cs, ts, fs = cur
        for c, t, f in zip(cs.tolist(), ts.tolist(), fs.tolist(), strict=True):
            j = int(np.searchsorted(self.points, c, side="right")) - 1
            if f & R_FLAG:
                out.setdefault((j, "R"), []).append((c, t))
            if f & L_FLAG:
                out.setdefault((j, "L"), []).append((c, t))
        return {k: sorted(v) for k, v in out.items()}

    def size(self) -> int:
        """Points held in current skylines."""
        return int(self.n[self.at == self.meta[VERSION]].sum())

    def memory_bytes(self) -> int:
        return sum(a.nbytes for a in self.store()) + sum(a.nbytes for a in self.pool)


def brute_force_skylines(points: np.ndarray, pts: list[tuple[float, int]]
                         ) -> dict[tuple[int, str], list[tuple[float, int]]]:
    """The definition, literally (tests): slab skylines of coordinate points ``(c, t)``."""
    uniq = sorted(set(pts))
    tau = points.shape[0]
    out: dict[tuple[int, str], list[tuple[float, int]]] = {}
    for c, t in uniq:
        j = int(np.searchsorted(points, c, side="right")) - 1
        lo = points[j] if j >= 0 else -np.inf
        hi = points[j + 1] if j + 1 < tau else np.inf
        same = [(c2, t2) for c2, t2 in uniq if lo <= c2 < hi and (c2, t2) != (c, t)]
        if j >= 0 and not any(c2 <= c and t2 >= t for c2, t2 in same):
            out.setdefault((j, "R"), []).append((c, t))
        if j + 1 < tau and not any(c2 >= c and t2 >= t for c2, t2 in same):
            out.setdefault((j, "L"), []).append((c, t))
    return {k: sorted(v) for k, v in out.items()}
