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
caller (:mod:`matcher.window_join`): when a partner is newer than the probing tuple, the stored
skylines (by recency) are not the skylines by ``|Δt|``, and :func:`skyline_pass` with
``rel=True`` computes the skylines by ``−|t_x − t|`` in one pass instead.

>>> import numpy as np
>>> vals = np.array([1.0, 2.0, 3.0, 6.0]); slots = np.arange(4); times = np.array([5, 9, 7, 1])
>>> c, t, s, f = skyline_pass(vals, slots, times, 0, 4, np.array([4.0]), 0, False, 0, 0)
>>> [(float(x), int(y), int(z)) for x, y, z in zip(c, t, f)]  # L of slab −1, R of slab 0
[(2.0, 9, 2), (3.0, 7, 2), (6.0, 1, 1)]
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from numba import njit

R_FLAG = 1
L_FLAG = 2
_TMIN = np.iinfo(np.int64).min


@njit(cache=True, inline="always")
def _ub(keys: np.ndarray, x: float) -> int:
    lo, hi = 0, keys.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, inline="always")
def _score(t: int, rel: bool, now: int) -> int:
    return -abs(now - t) if rel else t


@njit(cache=True)
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
        j = _ub(points, vals[pos]) - 1
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


@njit(cache=True)
def sky_insert(c: np.ndarray, t: np.ndarray, s: np.ndarray, f: np.ndarray, n: int,
               points: np.ndarray, x: float, xt: int, xs: int) -> int:
    """Insert partner (x, xt) at slot xs into one key's skylines (arrays with room for n + 1).

    Only the slab of x changes: x joins R (L) unless a point of that skyline weakly dominates
    it, and then evicts the points it dominates. Returns the new length. O(n).
    """
    tau = points.shape[0]
    if tau == 0:
        return n
    j = _ub(points, x) - 1
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


@njit(cache=True)
def mirrored_sizes(gs: np.ndarray, keys: np.ndarray, n: np.ndarray, at: np.ndarray,
                   key_of: np.ndarray, version: int, out: np.ndarray, j: int) -> None:
    """``out[k, j]``: the size of key ``keys[k]``'s skyline when it is current, else −1, read
    from :class:`SkylineIndex`'s mirror by the key's group ``gs[k]`` (−1: no group). An entry
    counts only if it was written for this version of the points and for this very key (a
    group id freed and reused by another key reads as not current)."""
    m = n.shape[0]
    for k in range(gs.shape[0]):
        g = gs[k]
        if 0 <= g < m and at[g] == version and key_of[g] == keys[k]:
            out[k, j] = n[g]
        else:
            out[k, j] = -1.0


class _KeySky:
    """The skylines of one key: ascending-c arrays with per-point R/L flags (see module doc)."""

    __slots__ = ("c", "t", "s", "f", "n", "omega", "version", "stale", "g")

    def __init__(self) -> None:
        self.c = np.empty(0, np.float64)
        self.t = np.empty(0, np.int64)
        self.s = np.empty(0, np.int64)
        self.f = np.empty(0, np.int8)
        self.n = 0
        self.omega = 0
        self.version = -1
        self.stale = True
        self.g = -1  # the key's group in the table's key index when last refreshed


class SkylineIndex:
    """``L_b^i``, ``R_b^i`` for every key b of one partner table (the B-tree of skylines, (3)).

    Keys are looked up in a dict (the paper's B-tree keyed by (S.B, p_i)); each key's skylines
    are small sorted flat arrays. ``refresh(b, ω)`` returns them current for window start ω.
    """

    def __init__(self, table: Any) -> None:
        self.table = table
        ix = table.enable_key_index(time_order=False)  # by value only (or as the engine keeps it)
        self.generation = ix.generation
        ix.insert_hooks.append(self._on_insert)
        ix.insert_many_hooks.append(self._on_insert_many)
        ix.remove_hooks.append(self._on_remove)
        self.points = np.empty(0, np.float64)
        self.version = 0
        self.keys: dict[float, _KeySky] = {}
        # the current skylines' sizes by key-index group, for the batch router's compiled
        # lookup (:meth:`current_sizes`): size, the points' version it is current for (−1:
        # stale), and the key it belongs to
        self._mirror_n = np.zeros(64, dtype=np.float64)
        self._mirror_at = np.full(64, -1, dtype=np.int64)
        self._mirror_key = np.full(64, np.nan)
        self.recomputes = 0
        self.trims = 0
        self.inserts = 0

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
            self.version += 1

    def is_fresh(self, st: _KeySky) -> bool:
        """Whether ``st`` (a key's skyline, ``keys[key]``) is current: not marked stale and built
        against the current version of the points. O(1)."""
        return not st.stale and st.version == self.version

    def current_sizes(self, gs: np.ndarray, keys: np.ndarray, out: np.ndarray, j: int) -> None:
        """``out[k, j]`` = the size of key ``keys[k]``'s skyline if current (as
        ``cost_model.fresh_skyline`` reads it from ``keys``), else −1, for keys whose groups
        in the table's key index are ``gs``: one compiled pass over a mirror kept by group,
        no dict lookup per key (WJ-Dynamic on the batch path, §4.2)."""
        mirrored_sizes(gs, keys, self._mirror_n, self._mirror_at, self._mirror_key,
                       self.version, out, j)

    def _mirror(self, key: float, st: _KeySky) -> None:
        """Record ``st`` (current, of group ``st.g``) in the mirror."""
        g = st.g
        if g >= self._mirror_n.shape[0]:
            cap = max(g + 1, 2 * self._mirror_n.shape[0])
            self._mirror_n = np.resize(self._mirror_n, cap)
            key_of = np.full(cap, np.nan)
            key_of[: self._mirror_key.shape[0]] = self._mirror_key
            self._mirror_key = key_of
            at = np.full(cap, -1, dtype=np.int64)
            at[: self._mirror_at.shape[0]] = self._mirror_at
            self._mirror_at = at
        self._mirror_n[g] = st.n
        self._mirror_at[g] = self.version
        self._mirror_key[g] = key

    def _owns(self, key: float, st: _KeySky) -> bool:
        """Whether the mirror's entry at ``st.g`` is ``key``'s (the group may since have been
        freed and given to another key, whose entry it then is)."""
        return 0 <= st.g < self._mirror_key.shape[0] and self._mirror_key[st.g] == key

    def _unmirror(self, key: float, st: _KeySky) -> None:
        if self._owns(key, st):
            self._mirror_at[st.g] = -1

    def check_mirror(self) -> None:
        """The mirror never calls a skyline current that ``keys`` does not, and gives its size;
        a current skyline whose group entry is its own is mirrored (tests). (The one gap:
        after its key left the table and came back in a group another key's skyline had
        taken meanwhile, a current skyline may read as not current until its next refresh:
        a cost estimate, never a result.)"""
        for g in np.flatnonzero(self._mirror_at == self.version).tolist():
            key = float(self._mirror_key[g])
            st = self.keys.get(key)
            assert st is not None and self.is_fresh(st) and st.g == g, (g, key)
            assert self._mirror_n[g] == st.n, (g, key, self._mirror_n[g], st.n)
        ix = self.table.key_index
        if ix is None or ix.generation != self.generation:
            return
        held = Counter(st.g for st in self.keys.values())
        for key, st in self.keys.items():
            if self.is_fresh(st) and held[st.g] == 1 and ix.lookup(key) == st.g:
                assert self._owns(key, st) and self._mirror_at[st.g] == self.version, \
                    (key, st.g)

    def _on_insert(self, key: float, value: float, time: int, slot: int) -> None:
        st = self.keys.get(key)
        if st is None or not self.is_fresh(st) or time < st.omega:
            return
        if st.n + 1 > st.c.shape[0]:
            cap = 2 * st.n + 4
            st.c, st.t = np.resize(st.c, cap), np.resize(st.t, cap)
            st.s, st.f = np.resize(st.s, cap), np.resize(st.f, cap)
        st.n = sky_insert(st.c, st.t, st.s, st.f, st.n, self.points, value, time, slot)
        if self._owns(key, st):
            self._mirror_n[st.g] = st.n
        self.inserts += 1

    def _on_insert_many(self, keys: np.ndarray, values: np.ndarray, times: np.ndarray,
                        slots: np.ndarray) -> None:
        """:meth:`_on_insert` for a batch, in order; only keys holding a skyline cost a call."""
        if not self.keys:
            return
        sky = self.keys
        klist = keys.tolist()
        hit = np.fromiter(map(sky.__contains__, klist), dtype=np.bool_, count=len(klist))
        for i in np.flatnonzero(hit).tolist():
            self._on_insert(klist[i], float(values[i]), int(times[i]), int(slots[i]))

    def _on_remove(self, key: float, value: float, time: int, slot: int) -> None:
        st = self.keys.get(key)
        if st is None or st.stale or time < st.omega:
            return
        if np.any(st.s[: st.n] == slot):
            st.stale = True
            self._unmirror(key, st)

    def refresh(self, key: float, omega: int, g: int | None = None) -> _KeySky | None:
        """The skylines of ``key`` over partners with time ≥ ``omega``, brought up to date lazily.

        None when no partner has this key. Stale or extended (ω moved back): one pass;
        ω moved forward: a trim. ``g``: the key's group in the table's key index when the
        caller has it (the batch path looks groups up a column at a time).
        """
        ix = self.table.key_index
        if ix.generation != self.generation:
            self.generation = ix.generation
            self.keys.clear()
            self._mirror_at.fill(-1)  # group ids may have been renumbered
        if g is None:
            g = ix.lookup(key)
        if g < 0:
            gone = self.keys.pop(key, None)
            if gone is not None:
                self._unmirror(key, gone)
            return None
        st = self.keys.get(key)
        if st is None:
            st = self.keys[key] = _KeySky()
        elif st.g != g:
            self._unmirror(key, st)
        st.g = g
        if not self.is_fresh(st) or omega < st.omega:
            pool = ix.by_value
            c, t, s, f = skyline_pass(pool.keys, pool.ids, self.table.times, int(pool.start[g]),
                                      int(pool.size[g]), self.points, omega, False, 0, 0)
            st.c, st.t, st.s, st.f, st.n = c, t, s, f, c.shape[0]
            st.omega, st.version, st.stale = omega, self.version, False
            self.recomputes += 1
        elif omega > st.omega:
            keep = st.t[: st.n] >= omega
            if not keep.all():
                m = int(keep.sum())
                st.c[:m], st.t[:m] = st.c[: st.n][keep], st.t[: st.n][keep]
                st.s[:m], st.f[:m] = st.s[: st.n][keep], st.f[: st.n][keep]
                st.n = m
                self.trims += 1
            st.omega = omega
        self._mirror(key, st)
        return st

    def skylines(self, key: float, omega: int) -> dict[tuple[int, str], list[tuple[float, int]]]:
        """``{(slab j, "R" | "L"): [(c, t), …]}`` after :meth:`refresh` (tests, debugging)."""
        st = self.refresh(key, omega)
        out: dict[tuple[int, str], list[tuple[float, int]]] = {}
        if st is None:
            return out
        for i in range(st.n):
            c, t, f = float(st.c[i]), int(st.t[i]), int(st.f[i])
            j = int(np.searchsorted(self.points, c, side="right")) - 1
            if f & R_FLAG:
                out.setdefault((j, "R"), []).append((c, t))
            if f & L_FLAG:
                out.setdefault((j, "L"), []).append((c, t))
        return {k: sorted(v) for k, v in out.items()}

    def size(self) -> int:
        return sum(st.n for st in self.keys.values())

    def memory_bytes(self) -> int:
        return sum(st.c.nbytes + st.t.nbytes + st.s.nbytes + st.f.nbytes + 120
                   for st in self.keys.values())


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
