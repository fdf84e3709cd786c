"""A forest of static R-trees over subscription boxes, in flat arrays: point-stabbing queries.

Paper 004 needs "an index on the set of query rectangles" at three places: SJ-JoinFirst's R-tree
over ``rangeA × rangeC`` (§3.2.1), SJ-SSI's per-stabbing-group R-tree probed with two join result
points (§3.2.2), and the three-dimensional box index 𝒟 over ``rangeA × rangeC × [0, w]`` of the
window joins (§3.3.1, footnote 4: "some variant of R-trees"). :class:`BoxForest` serves all
three: one tree per *group* (a stabbing group, or a single group 0), d = 2 or 3 dimensions.

Layout (pynndescent's FlatTree habit). Every box is an *entry* ``e`` with ``elo[e, :]``,
``ehi[e, :]``, its subscription ``eq[e]`` and ``ealive[e]``. A group's static part is an
STR-packed (Sort-Tile-Recursive) R-tree: entries are sorted into ``⌈√(n/B)⌉`` slabs by the centre
of dimension 0, each slab by dimension 1, cut into leaves of ``B = 16`` entries, and parents are
made from ``B`` consecutive children level by level. Node ``u`` covers ``nlo[u]``–``nhi[u]`` and
has ``ncount[u]`` children starting at ``nfirst[u]`` (nodes, or positions of ``leaf_ent`` when
``nleaf[u]``). Leaf position ``i`` also keeps a *copy* of its box, ``lbox[i] = (lo_0 … lo_{d-1},
hi_0 … hi_{d-1})``, and its subscription ``lq[i]`` (−1 once removed), so a query scans the
leaves it reaches sequentially instead of missing the cache on ``elo``/``ehi``/``eq``/``ealive``
once per entry (the STR order is not the entry order). New members go to the group's small *delta* list, scanned linearly; removed static
members are only marked dead. A group is re-packed when its delta outgrows ``max(32, 2√n)`` or
half its static part is dead, so a query costs one tree descent plus O(√n) — amortised
O(√n log n) per update. Regions abandoned by re-packing are compacted away when they exceed half
of the arrays.

Invariant: every live member of group g is exactly one live entry, reachable either from
``root[g]`` or from ``delta`` group g; a dead entry is never reachable from the delta.

>>> f = BoxForest(2)
>>> f.reset_groups({0: np.array([7, 8])}, lambda q: (np.array([[0., 0.], [5., 5.]])[q - 7],
...                                              np.array([[2., 2.], [6., 6.]])[q - 7]))
>>> sorted(f.stab_py(0, [1.0, 1.5]))
[7]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from hotjoin.matcher.config import INLINE, kernel
from hotjoin.matcher.core import OVERFLOW
from hotjoin.matcher.structures.group_pool import GroupedSortedPool

B = 16
CoordFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


class NodeArrays(NamedTuple):
    """The nodes of a :class:`BoxForest` (room for every node, grown by the forest): node
    ``u`` covers ``nlo[u, k]``–``nhi[u, k]`` in each dimension k (float64[cap, d]) and has
    ``ncount[u]`` children from ``nfirst[u]`` (int64[cap]): nodes, or leaf positions when
    ``nleaf[u]`` (bool[cap])."""

    nlo: np.ndarray
    nhi: np.ndarray
    nfirst: np.ndarray
    ncount: np.ndarray
    nleaf: np.ndarray


class ForestArrays(NamedTuple):
    """A :class:`BoxForest` as a stabbing query reads it (:func:`forest_arrays`, a plain tuple
    in this order). Per group ``g`` (int64[groups]): its tree's root ``root[g]`` (−1: none)
    and its delta, the entries ``dids[dstart[g] : dstart[g] + dsize[g]]``. Nodes as
    :class:`NodeArrays`. Per leaf position ``i``: a copy of its box ``lbox[i] = (lo_0 …
    lo_{d−1}, hi_0 … hi_{d−1})`` (float64[leaves, 2d]) and its subscription ``lq[i]`` (−1:
    removed). Per entry ``e``: its box ``elo[e]``/``ehi[e]`` (float64[entries, d]) and its
    subscription ``eq[e]``."""

    root: np.ndarray
    dstart: np.ndarray
    dsize: np.ndarray
    dids: np.ndarray
    nlo: np.ndarray
    nhi: np.ndarray
    nfirst: np.ndarray
    ncount: np.ndarray
    nleaf: np.ndarray
    lbox: np.ndarray
    lq: np.ndarray
    elo: np.ndarray
    ehi: np.ndarray
    eq: np.ndarray


@kernel
def _pack(ents: np.ndarray, gstart: np.ndarray, leaf_base: int, elo: np.ndarray,
          ehi: np.ndarray, nodes: tuple, n_nodes: int, roots: np.ndarray) -> int:
    """Build one tree per group over ``ents[gstart[g] : gstart[g+1]]`` (already STR-ordered)
    into ``nodes`` (a :class:`NodeArrays` bundle with room).

    ``ents`` sits at ``leaf_ent[leaf_base :]``. Appends nodes from ``n_nodes``; returns the new
    node count and writes each group's root (−1 for an empty group) into ``roots``.
    """
    nlo, nhi, nfirst, ncount, nleaf = NodeArrays(*nodes)
    d = elo.shape[1]
    for g in range(gstart.shape[0] - 1):
        s, e = gstart[g], gstart[g + 1]
        if s == e:
            roots[g] = -1
            continue
        lvl0 = n_nodes
        for i in range(s, e, B):
            u = n_nodes
            n_nodes += 1
            c = min(B, e - i)
            nfirst[u] = leaf_base + i
            ncount[u] = c
            nleaf[u] = True
            for k in range(d):
                lo, hi = np.inf, -np.inf
                for j in range(i, i + c):
                    x = ents[j]
                    lo = min(lo, elo[x, k])
                    hi = max(hi, ehi[x, k])
                nlo[u, k] = lo
                nhi[u, k] = hi
        a, b = lvl0, n_nodes
        while b - a > 1:
            nxt = n_nodes
            for i in range(a, b, B):
                u = n_nodes
                n_nodes += 1
                c = min(B, b - i)
                nfirst[u] = i
                ncount[u] = c
                nleaf[u] = False
                for k in range(d):
                    lo, hi = np.inf, -np.inf
                    for j in range(i, i + c):
                        lo = min(lo, nlo[j, k])
                        hi = max(hi, nhi[j, k])
                    nlo[u, k] = lo
                    nhi[u, k] = hi
            a, b = nxt, n_nodes
        roots[g] = a
    return n_nodes


@kernel(**INLINE)
def _box_has(lo: np.ndarray, hi: np.ndarray, i: int, pt: np.ndarray) -> bool:
    for k in range(pt.shape[0]):  # noqa: SIM110 - numba has no generator all()
        if pt[k] < lo[i, k] or pt[k] > hi[i, k]:
            return False
    return True


@kernel
def stab(forest: tuple, g: int, pt: np.ndarray, stack: np.ndarray, hits: np.ndarray) -> int:
    """The subscriptions of group ``g`` whose box contains the point ``pt`` (float64[d]),
    written to ``hits``: their number, or ``OVERFLOW`` when they do not fit (nothing else
    changed: grow ``hits`` and ask again, ``matcher/core.py``'s protocol; :func:`stab_group`
    does). ``forest`` is a :class:`ForestArrays` bundle; ``stack`` holds the descent
    (``B`` children per level: 1,024 slots serve any depth the packing builds).

    One tree descent plus a scan of the group's delta: O(visited nodes + delta + output).
    """
    (root, dstart, dsize, dids, nlo, nhi, nfirst, ncount, nleaf, lbox, lq, elo, ehi,
     eq) = ForestArrays(*forest)
    cap = hits.shape[0]
    nh = 0
    d = pt.shape[0]
    r = root[g]
    if r >= 0 and _box_has(nlo, nhi, r, pt):
        stack[0] = r
        top = 1
        while top > 0:
            top -= 1
            u = stack[top]
            f, c = nfirst[u], ncount[u]
            if nleaf[u]:
                for i in range(f, f + c):
                    inside = True
                    for k in range(d):
                        if pt[k] < lbox[i, k] or pt[k] > lbox[i, d + k]:
                            inside = False
                            break
                    if inside and lq[i] >= 0:
                        if nh == cap:
                            return OVERFLOW
                        hits[nh] = lq[i]
                        nh += 1
            else:
                for ch in range(f, f + c):
                    if _box_has(nlo, nhi, ch, pt):
                        stack[top] = ch
                        top += 1
    s = dstart[g]
    for i in range(s, s + dsize[g]):
        x = dids[i]
        if _box_has(elo, ehi, x, pt):
            if nh == cap:
                return OVERFLOW
            hits[nh] = eq[x]
            nh += 1
    return nh


def _str_order(gg: np.ndarray, lo: np.ndarray, hi: np.ndarray, n_groups: int) -> np.ndarray:
    """STR order of entries with group ``gg`` (sorted by group, then slab of dim 0, then dim 1).

    Plain STR cuts a group's ``L`` leaves into ``√L`` slabs, which suits boxes spread alike in
    both dimensions. A stabbing group is far from that: every member's *other* range contains
    the group's point, so along dimension 1 the boxes hardly differ while along dimension 0 they
    may spread over the whole domain. The slab count is therefore ``√(L · d₀ / d₁)`` (clipped to
    ``[1, L]``) where ``d_k = 1 + spread of the centres / mean finite length`` is roughly how
    many boxes side by side dimension k holds: with d₁ ≈ 1 the leaves are runs of boxes sorted
    by dimension 0, so a stab visits few leaves whose boxes mostly contain the point.
    """
    def centre(k: int) -> np.ndarray:
        a, b = lo[:, k], hi[:, k]
        fa, fb = np.isfinite(a), np.isfinite(b)
        a2 = np.where(fa, a, np.where(fb, b, 0.0))
        b2 = np.where(fb, b, a2)
        return a2 / 2 + b2 / 2

    c0, c1 = centre(0), centre(1)
    o = np.lexsort((c0, gg))
    sizes = np.bincount(gg, minlength=n_groups)
    gstart = np.concatenate(([0], np.cumsum(sizes)))
    leaves = -(-sizes // B)
    aspect = np.ones(n_groups)
    nz = np.flatnonzero(sizes)
    if nz.shape[0] and o.shape[0] > B:
        starts = gstart[:-1][nz]

        def side_by_side(c: np.ndarray, k: int) -> np.ndarray:
            cs = c[o]
            spread = np.maximum.reduceat(cs, starts) - np.minimum.reduceat(cs, starts)
            length = (hi[:, k] - lo[:, k])[o]
            fin = np.isfinite(length)
            lsum = np.add.reduceat(np.where(fin, length, 0.0), starts)
            lcnt = np.add.reduceat(fin.astype(np.int64), starts)
            mean = lsum / np.maximum(lcnt, 1)
            denom = np.where(mean > 0, mean, np.maximum(spread * 1e-12, 1e-300))
            d = np.where(spread <= 0, 1.0, 1.0 + spread / denom)
            return np.where(lcnt == 0, 1.0, np.minimum(d, 1e12))

        aspect[nz] = side_by_side(c0, 0) / side_by_side(c1, 1)
    slabs = np.clip(np.rint(np.sqrt(leaves * aspect)), 1, np.maximum(leaves, 1)).astype(np.int64)
    slab_cap = np.maximum(1, -(-leaves // slabs)) * B
    g_sorted = gg[o]
    rank = np.arange(o.shape[0]) - gstart[g_sorted]
    slab = rank // slab_cap[g_sorted]
    o2 = np.lexsort((c1[o], slab, g_sorted))
    return o[o2]


class BoxForest:
    """One STR-packed R-tree per group, flat arrays, delta lists (see module docstring)."""

    def __init__(self, dims: int) -> None:
        self.d = dims
        self._clear()

    def _clear(self, ent_cap: int = 64, node_cap: int = 16) -> None:
        d = self.d
        self.elo = np.zeros((ent_cap, d), dtype=np.float64)
        self.ehi = np.zeros((ent_cap, d), dtype=np.float64)
        self.eq = np.zeros(ent_cap, dtype=np.int64)
        self.ealive = np.zeros(ent_cap, dtype=np.bool_)
        self.estatic = np.zeros(ent_cap, dtype=np.bool_)
        self.egroup = np.zeros(ent_cap, dtype=np.int64)
        self.n_ent = 0
        self._free_ent: list[int] = []
        self.entry_of = np.full(64, -1, dtype=np.int64)   # subscription id -> entry
        self.nlo = np.zeros((node_cap, d), dtype=np.float64)
        self.nhi = np.zeros((node_cap, d), dtype=np.float64)
        self.nfirst = np.zeros(node_cap, dtype=np.int64)
        self.ncount = np.zeros(node_cap, dtype=np.int64)
        self.nleaf = np.zeros(node_cap, dtype=np.bool_)
        self.n_nodes = 0
        self.leaf_ent = np.zeros(max(ent_cap, 16), dtype=np.int64)
        self.lbox = np.zeros((self.leaf_ent.shape[0], 2 * d), dtype=np.float64)
        self.lq = np.full(self.leaf_ent.shape[0], -1, dtype=np.int64)
        self.eleaf = np.full(ent_cap, -1, dtype=np.int64)  # entry -> leaf position (static)
        self.n_leaf = 0
        self.garbage = 0
        self.root = np.full(16, -1, dtype=np.int64)
        self.lstart = np.zeros(16, dtype=np.int64)
        self.lcount = np.zeros(16, dtype=np.int64)
        self.n_static = np.zeros(16, dtype=np.int64)
        self.n_dead = np.zeros(16, dtype=np.int64)
        self.delta = GroupedSortedPool()
        self.groups: set[int] = set()
        self._pending: dict[int, list[int]] = {}
        self.stack = np.zeros(1024, dtype=np.int64)
        self.hits = np.zeros(256, dtype=np.int64)
        self.repacks = 0

    # -- sizing helpers ---------------------------------------------------------------------
    def _grow_groups(self, g: int) -> None:
        if g < self.root.shape[0]:
            return
        n = max(2 * self.root.shape[0], g + 1)
        for name, fill in (("root", -1), ("lstart", 0), ("lcount", 0), ("n_static", 0),
                           ("n_dead", 0)):
            old = getattr(self, name)
            new = np.full(n, fill, dtype=np.int64)
            new[: old.shape[0]] = old
            setattr(self, name, new)

    def _grow_entries(self, need: int) -> None:
        cap = self.eq.shape[0]
        if need <= cap:
            return
        cap = max(need, 2 * cap)
        for name in ("elo", "ehi"):
            old = getattr(self, name)
            new = np.zeros((cap, self.d), dtype=np.float64)
            new[: old.shape[0]] = old
            setattr(self, name, new)
        for name in ("eq", "ealive", "estatic", "egroup", "eleaf"):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[: old.shape[0]] = old
            setattr(self, name, new)

    def _grow_leaves(self, cap: int) -> None:
        old = self.leaf_ent.shape[0]
        self.leaf_ent = np.resize(self.leaf_ent, cap)
        lbox = np.zeros((cap, 2 * self.d), dtype=np.float64)
        lbox[:old] = self.lbox
        self.lbox = lbox
        lq = np.full(cap, -1, dtype=np.int64)
        lq[:old] = self.lq
        self.lq = lq

    def _ensure_q(self, qmax: int) -> None:
        if qmax >= self.entry_of.shape[0]:
            new = np.full(max(qmax + 1, 2 * self.entry_of.shape[0]), -1, dtype=np.int64)
            new[: self.entry_of.shape[0]] = self.entry_of
            self.entry_of = new

    def _new_entries(self, qs: np.ndarray, coords: CoordFn, group: int | np.ndarray) -> np.ndarray:
        k = qs.shape[0]
        take = min(k, len(self._free_ent))
        fresh = k - take
        ents = np.empty(k, dtype=np.int64)
        if take:
            ents[:take] = [self._free_ent.pop() for _ in range(take)]
        if fresh:
            self._grow_entries(self.n_ent + fresh)
            ents[take:] = np.arange(self.n_ent, self.n_ent + fresh)
            self.n_ent += fresh
        lo, hi = coords(qs)
        self.elo[ents] = lo
        self.ehi[ents] = hi
        self.eq[ents] = qs
        self.ealive[ents] = True
        self.estatic[ents] = False
        self.eleaf[ents] = -1
        self.egroup[ents] = group
        if k:
            self._ensure_q(int(qs.max()))
            self.entry_of[qs] = ents
        return ents

    # -- building -----------------------------------------------------------------------------
    def _pack_groups(self, gids: np.ndarray, ents_by_group: np.ndarray, gg: np.ndarray) -> None:
        """STR-pack entries ``ents_by_group`` (group index ``gg`` into ``gids``) and append."""
        n = ents_by_group.shape[0]
        o = _str_order(gg, self.elo[ents_by_group], self.ehi[ents_by_group], gids.shape[0])
        ents = ents_by_group[o]
        sizes = np.bincount(gg, minlength=gids.shape[0])
        gstart = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        if self.n_leaf + n > self.leaf_ent.shape[0]:
            self._grow_leaves(max(2 * self.leaf_ent.shape[0], self.n_leaf + n))
        base = self.n_leaf
        self.leaf_ent[base: base + n] = ents
        self.lbox[base: base + n, : self.d] = self.elo[ents]
        self.lbox[base: base + n, self.d:] = self.ehi[ents]
        self.lq[base: base + n] = self.eq[ents]
        self.eleaf[ents] = np.arange(base, base + n)
        self.n_leaf += n
        need = self.n_nodes + n // (B - 1) + 8 * gids.shape[0] + 2
        if need > self.nfirst.shape[0]:
            cap = max(need, 2 * self.nfirst.shape[0])
            for name in ("nlo", "nhi"):
                old = getattr(self, name)
                new = np.zeros((cap, self.d), dtype=np.float64)
                new[: old.shape[0]] = old
                setattr(self, name, new)
            for name in ("nfirst", "ncount", "nleaf"):
                old = getattr(self, name)
                new = np.zeros(cap, dtype=old.dtype)
                new[: old.shape[0]] = old
                setattr(self, name, new)
        roots = np.empty(gids.shape[0], dtype=np.int64)
        self.n_nodes = _pack(self.leaf_ent[base: base + n], gstart, base, self.elo, self.ehi,
                             (self.nlo, self.nhi, self.nfirst, self.ncount, self.nleaf),
                             self.n_nodes, roots)
        self.root[gids] = roots
        self.lstart[gids] = base + gstart[:-1]
        self.lcount[gids] = sizes
        self.n_static[gids] = sizes
        self.n_dead[gids] = 0
        self.estatic[ents] = True

    def reset_groups(self, groups: dict[int, np.ndarray], coords: CoordFn) -> None:
        """Replace everything by ``{group: member subscription ids}``; O(n log n)."""
        n = sum(int(m.shape[0]) for m in groups.values())
        self._clear(ent_cap=max(64, n + n // 4), node_cap=max(16, n // (B - 1) + 8 * len(groups) + 2))
        if groups:
            self._grow_groups(max(groups))
        gids = np.fromiter(groups.keys(), dtype=np.int64, count=len(groups))
        for g in gids.tolist():
            self.groups.add(g)
            self.delta.add_group(g)
        if n == 0:
            return
        qs = np.concatenate([np.asarray(m, dtype=np.int64) for m in groups.values()])
        gg = np.repeat(np.arange(len(groups)), [m.shape[0] for m in groups.values()])
        ents = self._new_entries(qs, coords, gids[gg])
        self._pack_groups(gids, ents, gg)

    def add_group(self, g: int) -> None:
        self._grow_groups(g)
        self.groups.add(g)
        self.root[g] = -1
        self.lcount[g] = self.n_static[g] = self.n_dead[g] = 0
        self.delta.add_group(g)

    def drop_group(self, g: int) -> None:
        """Forget group ``g`` (all its members must have been removed)."""
        self.garbage += int(self.lcount[g])
        self.root[g] = -1
        self.lcount[g] = self.n_static[g] = self.n_dead[g] = 0
        self.delta.drop_group(g)
        self.groups.discard(g)
        self._free_ent.extend(self._pending.pop(g, []))

    def add(self, g: int, q: int, coords: CoordFn) -> None:
        """Member ``q`` joins group ``g`` (delta list; re-pack when the delta grows)."""
        e = int(self._new_entries(np.array([q], dtype=np.int64), coords, g)[0])
        self.delta.insert(g, float(e), e)
        self._maybe_repack(g)

    def add_many(self, g: int, qs: np.ndarray, coords: CoordFn, whole: bool = False) -> None:
        """Members ``qs`` join group ``g``; ``whole``: they are all its members (a bulk load),
        so the group is packed from them at once (:meth:`reset_groups`) instead of growing a
        delta list member by member."""
        if whole:
            self.reset_groups({g: qs.astype(np.int64)}, coords)
            return
        ents = self._new_entries(qs.astype(np.int64), coords, g)
        for e in ents.tolist():
            self.delta.insert(g, float(e), e)
        self._maybe_repack(g)

    def remove(self, g: int, q: int) -> None:
        """Member ``q`` leaves group ``g``."""
        e = int(self.entry_of[q])
        self.entry_of[q] = -1
        self.ealive[e] = False
        if self.estatic[e]:
            self.lq[self.eleaf[e]] = -1
            self.n_dead[g] += 1
            self._pending.setdefault(g, []).append(e)
            self._maybe_repack(g)
        else:
            self.delta.remove(g, float(e), e)
            self._free_ent.append(e)

    def _maybe_repack(self, g: int) -> None:
        ns, nd = int(self.n_static[g]), int(self.n_dead[g])
        nl = int(self.delta.size[g])
        if nl > max(32, 2 * math.isqrt(ns)) or nd > max(32, ns // 2):
            self.repack(g)

    def repack(self, g: int) -> None:
        """Rebuild group ``g``'s tree over its live members (static live + delta)."""
        self.repacks += 1
        s, c = int(self.lstart[g]), int(self.lcount[g])
        old = self.leaf_ent[s: s + c]
        live = old[self.ealive[old]]
        ds, dn = int(self.delta.start[g]), int(self.delta.size[g])
        delta = self.delta.ids[ds: ds + dn].copy()
        ents = np.concatenate([live, delta]).astype(np.int64)
        self.garbage += c
        self.delta.drop_group(g)
        self.delta.add_group(g)
        self._free_ent.extend(self._pending.pop(g, []))
        if self.garbage > max(1024, self.n_leaf // 2):
            self._compact(exclude=g, extra=(g, ents))
            return
        self._pack_groups(np.array([g], dtype=np.int64), ents,
                          np.zeros(ents.shape[0], dtype=np.int64))

    def settle(self) -> None:
        """Re-pack everything once if any group has delta members: call after a bulk load that
        arrived member by member (a hotspot tracker's callbacks), so queries scan no deltas.
        O(n log n)."""
        if self.groups and int(self.delta.size[list(self.groups)].sum()) > 0:
            self._compact()

    def _compact(self, exclude: int = -1, extra: tuple[int, np.ndarray] | None = None) -> None:
        """Re-pack every group into fresh node/leaf arrays (drops abandoned regions)."""
        gl: list[int] = []
        parts: list[np.ndarray] = []
        for g in sorted(self.groups):
            if g == exclude and extra is not None:
                ents = extra[1]
            else:
                s, c = int(self.lstart[g]), int(self.lcount[g])
                old = self.leaf_ent[s: s + c]
                ds, dn = int(self.delta.start[g]), int(self.delta.size[g])
                ents = np.concatenate([old[self.ealive[old]], self.delta.ids[ds: ds + dn]])
                self.delta.drop_group(g)
                self.delta.add_group(g)
                self._free_ent.extend(self._pending.pop(g, []))
            gl.append(g)
            parts.append(ents.astype(np.int64))
        n = sum(p.shape[0] for p in parts)
        cap = max(16, n + n // 4)
        self.leaf_ent = np.zeros(cap, dtype=np.int64)
        self.lbox = np.zeros((cap, 2 * self.d), dtype=np.float64)
        self.lq = np.full(cap, -1, dtype=np.int64)
        self.n_leaf = 0
        self.n_nodes = 0
        self.garbage = 0
        if gl:
            gg = np.repeat(np.arange(len(gl)), [p.shape[0] for p in parts])
            self._pack_groups(np.array(gl, dtype=np.int64),
                              np.concatenate(parts) if parts else np.empty(0, np.int64), gg)

    # -- queries (tests, debugging) ---------------------------------------------------------------
    def stab_py(self, g: int, pt: list[float]) -> list[int]:
        """Subscriptions of group ``g`` whose box contains ``pt`` (Python entry to the kernel)."""
        self.hits, nh = stab_group(forest_arrays(self), g, np.asarray(pt, dtype=np.float64),
                                   self.stack, self.hits)
        return self.hits[:nh].tolist()

    def memory_bytes(self) -> int:
        return sum(getattr(self, n).nbytes for n in (
            "elo", "ehi", "eq", "ealive", "estatic", "egroup", "eleaf", "entry_of", "nlo", "nhi",
            "nfirst", "ncount", "nleaf", "leaf_ent", "lbox", "lq", "root", "lstart", "lcount", "n_static",
            "n_dead")) + self.delta.memory_bytes()


def forest_arrays(f: BoxForest) -> tuple[np.ndarray, ...]:
    """The forest as a kernel bundle: :class:`ForestArrays`' fields as a plain tuple (kernels
    name it back; pass to :func:`stab` / :func:`stab_group`)."""
    return (f.root, f.delta.start, f.delta.size, f.delta.ids, f.nlo, f.nhi, f.nfirst, f.ncount,
            f.nleaf, f.lbox, f.lq, f.elo, f.ehi, f.eq)


@kernel
def stab_group(forest: tuple, g: int, pt: np.ndarray, stack: np.ndarray,
               hits: np.ndarray) -> tuple[np.ndarray, int]:
    """:func:`stab`, growing ``hits`` (doubled) and asking again until the answer fits:
    ``(hits, n_hits)``. For the one-tuple kernels that return their buffers to the caller
    (``matcher/core.py``)."""
    nh = stab(forest, g, pt, stack, hits)
    while nh == OVERFLOW:
        hits = np.empty(2 * hits.shape[0] + 16, dtype=np.int64)
        nh = stab(forest, g, pt, stack, hits)
    return hits, nh
