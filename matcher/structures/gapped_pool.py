"""Many sorted sequences of ``(key, id, aux)`` in flat arrays, each with a small delta run.

The band-join indexes' variant of :mod:`matcher.structures.group_pool` (whose groups are single
contiguous runs, as the equi-join kernels read them): groups of thousands of ranges must take
updates without shifting the whole group.

This is how the SSI stores each stabbing group's sequences I_j^l (ranges by increasing left
end) and I_j^r (by decreasing right end, stored as ascending ``-hi``) of paper 004 §3.1.2, and
how BJ-DOuter's interval tree stores each node's lists; kernels read the flat arrays directly
(pynndescent's FlatTree habit).

Layout of group ``g``: the region ``[start[g], start[g] + cap[g])`` holds a sorted *main* run of
``size[g]`` entries at its front and a sorted *delta* run of ``dsize[g] <= DELTA`` entries in its
last ``DELTA`` slots. Invariant: every live entry is in exactly one run; a deleted main entry
stays in place as a tombstone (``id == -1``, key kept, so prefix scans stay ordered) and is
counted in ``dead[g]``. A reader scans both runs and skips ids < 0.

Costs: an insert shifts at most ``DELTA`` delta entries; a delete is a binary search plus a
tombstone (or a shift inside the delta). When the delta fills or tombstones pass a quarter of
the main run, the group is *flushed*: both runs merged into the main run, O(group size) — so
updates cost O(log g + DELTA + g / DELTA) amortised instead of O(g) for one sorted array. A group
whose region is too small moves to the end of the pool with twice the room; the pool compacts
when more than half of it is abandoned regions.

>>> pool = GappedGroupPool()
>>> g = pool.add_group(0)
>>> for k, q in [(5.0, 1), (2.0, 2), (9.0, 3)]:
...     pool.insert(g, k, q)
>>> pool.remove(g, 5.0, 1)
>>> pool.members(g)
[(2.0, 2), (9.0, 3)]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hotjoin.matcher.config import NO_NRT, kernel
from hotjoin.matcher.core import find_entry, insert_at, remove_at, upper_bound
from hotjoin.matcher.structures.growth import grown

DELTA = 32
"""Slots of each group's delta run."""


class GappedPoolArrays(NamedTuple):
    """A :class:`GappedGroupPool` as kernels read it: group ``g``'s main run is
    ``keys/ids/aux[start[g] : start[g] + size[g]]`` (ids < 0: tombstones), its delta run
    ``[start[g] + cap[g] − DELTA : … + dsize[g]]``. Per-group arrays have one entry per group
    id, the entry arrays one per slot."""

    start: np.ndarray
    size: np.ndarray
    cap: np.ndarray
    dsize: np.ndarray
    keys: np.ndarray
    ids: np.ndarray
    aux: np.ndarray


# The kernels take the pool as its bundle (``GappedGroupPool.arrays()``, a plain tuple named back
# here) plus the ``dead`` counts where they change them: they run once per subscription change,
# where the bundle costs what the seven attribute reads of positional arrays did.


@kernel(**NO_NRT)  # allocates nothing: no reference counting (matcher/config.py)
def _ins(p: tuple, g: int, key: float, ident: int, extra: float) -> bool:
    """Insert into g's delta run after equal keys; False (nothing done) if it has no room."""
    start, _, cap, dsize, keys, ids, aux = GappedPoolArrays(*p)
    n = dsize[g]
    if cap[g] == 0 or n == DELTA:
        return False
    s = start[g] + cap[g] - DELTA
    pos = upper_bound(keys, s, s + n, key)
    insert_at(keys, pos, s + n, key)
    insert_at(ids, pos, s + n, ident)
    insert_at(aux, pos, s + n, extra)
    dsize[g] = n + 1
    return True


@kernel(**NO_NRT)  # allocates nothing: no reference counting (matcher/config.py)
def _rem(p: tuple, dead: np.ndarray, g: int, key: float, ident: int) -> int:
    """Remove ``(key, ident)`` from g: 0 absent, 1 removed, 2 removed and g wants a flush."""
    start, size, cap, dsize, keys, ids, aux = GappedPoolArrays(*p)
    if cap[g] == 0:
        return 0
    ds = start[g] + cap[g] - DELTA
    n = dsize[g]
    j = find_entry(keys, ids, ds, ds + n, key, ident)
    if j >= 0:
        remove_at(keys, j, ds + n)
        remove_at(ids, j, ds + n)
        remove_at(aux, j, ds + n)
        dsize[g] = n - 1
        return 1
    j = find_entry(keys, ids, start[g], start[g] + size[g], key, ident)
    if j < 0:
        return 0
    ids[j] = -1
    dead[g] += 1
    return 2 if dead[g] > max(DELTA, size[g] // 4) else 1


@kernel(**NO_NRT)  # allocates nothing: no reference counting (matcher/config.py)
def _merge(p: tuple, dead: np.ndarray, g: int, tk: np.ndarray, ti: np.ndarray,
           ta: np.ndarray) -> None:
    """Flush g: merge live main entries and the delta run into the main run (room checked),
    through the scratch ``tk``/``ti``/``ta``."""
    start, size, cap, dsize, keys, ids, aux = GappedPoolArrays(*p)
    s, n = start[g], size[g]
    ds, dn = s + cap[g] - DELTA, dsize[g]
    i, j, t = s, ds, 0
    while i < s + n or j < ds + dn:
        if i < s + n and ids[i] < 0:
            i += 1
            continue
        if j >= ds + dn or (i < s + n and keys[i] <= keys[j]):
            tk[t], ti[t], ta[t] = keys[i], ids[i], aux[i]
            i += 1
        else:
            tk[t], ti[t], ta[t] = keys[j], ids[j], aux[j]
            j += 1
        t += 1
    for k in range(t):
        keys[s + k] = tk[k]
        ids[s + k] = ti[k]
        aux[s + k] = ta[k]
    size[g] = t
    dsize[g] = 0
    dead[g] = 0


@kernel(**NO_NRT)  # allocates nothing: no reference counting (matcher/config.py)
def _ins_pair(lp: tuple, rp: tuple, g: int, lkey: float, rkey: float, ident: int,
              lextra: float, rextra: float) -> int:
    """Insert into g of two pools (bundles) in one call; bit 1/2 set when the left/right one
    is done."""
    done = 0
    if _ins(lp, g, lkey, ident, lextra):
        done |= 1
    if _ins(rp, g, rkey, ident, rextra):
        done |= 2
    return done


@kernel(**NO_NRT)  # allocates nothing: no reference counting (matcher/config.py)
def _rem_pair(lp: tuple, ldead: np.ndarray, rp: tuple, rdead: np.ndarray, g: int, lkey: float,
              rkey: float, ident: int) -> int:
    """Remove from g of two pools (bundles) in one call; returns 3 * left result + right
    result."""
    a = _rem(lp, ldead, g, lkey, ident)
    b = _rem(rp, rdead, g, rkey, ident)
    return 3 * a + b


@kernel(**NO_NRT)  # allocates nothing: no reference counting (matcher/config.py)
def _min_key(p: tuple, g: int) -> float:
    """Smallest live key of group g (``inf`` when empty)."""
    start, size, cap, dsize, keys, ids, _ = GappedPoolArrays(*p)
    best = np.inf
    s, n = start[g], size[g]
    for i in range(s, s + n):
        if ids[i] >= 0:
            best = keys[i]
            break
    if dsize[g] > 0:
        best = min(best, keys[s + cap[g] - DELTA])
    return best


class GappedGroupPool:
    """Per-group sorted main + delta runs with tombstones, in flat arrays (module docstring)."""

    __slots__ = ("keys", "ids", "aux", "start", "size", "cap", "dsize", "dead", "_used",
                 "_garbage", "n_groups_alloc", "_tmp")

    def __init__(self, capacity: int = 1024, groups: int = 16) -> None:
        self.keys = np.zeros(capacity, dtype=np.float64)
        self.ids = np.zeros(capacity, dtype=np.int64)
        self.aux = np.zeros(capacity, dtype=np.float64)  # one float carried with each entry
        self.start = np.zeros(groups, dtype=np.int64)
        self.size = np.zeros(groups, dtype=np.int64)  # main run, tombstones included
        self.cap = np.zeros(groups, dtype=np.int64)  # whole region (main room + DELTA)
        self.dsize = np.zeros(groups, dtype=np.int64)
        self.dead = np.zeros(groups, dtype=np.int64)
        self.n_groups_alloc = 0  # 1 + the largest group id ever added
        self._used = 0
        self._garbage = 0
        self._tmp = (np.zeros(64), np.zeros(64, dtype=np.int64), np.zeros(64))

    # -- groups ----------------------------------------------------------------------------
    def arrays(self) -> tuple[np.ndarray, ...]:
        """The pool as a kernel bundle: :class:`GappedPoolArrays`' fields as a plain tuple (the
        kernel names it back, ``GappedPoolArrays(*t)``: numba types a plain tuple argument as
        fast as positional arrays, a NamedTuple ~10× slower, ``matcher/joins/protocol.py``)."""
        return (self.start, self.size, self.cap, self.dsize, self.keys, self.ids, self.aux)

    def add_group(self, gid: int) -> int:
        """Create empty group ``gid`` (ids are the caller's: small dense ints); returns it."""
        if gid >= self.start.shape[0]:
            n = max(2 * self.start.shape[0], gid + 1)
            for name in ("start", "size", "cap", "dsize", "dead"):
                old = getattr(self, name)
                new = np.zeros(n, dtype=np.int64)
                new[: old.shape[0]] = old
                setattr(self, name, new)
        self.n_groups_alloc = max(self.n_groups_alloc, gid + 1)
        self.start[gid] = self._used
        self.size[gid] = self.cap[gid] = self.dsize[gid] = self.dead[gid] = 0
        return gid

    def drop_group(self, gid: int) -> None:
        """Forget group ``gid`` (its region becomes garbage)."""
        self._garbage += int(self.cap[gid])
        self.size[gid] = self.cap[gid] = self.dsize[gid] = self.dead[gid] = 0

    def min_key(self, gid: int) -> float:
        """Smallest live key of ``gid`` (``inf`` if empty); O(1) unless tombstones lead."""
        return float(_min_key(self.arrays(), gid))

    def live_count(self, gid: int) -> int:
        return int(self.size[gid] - self.dead[gid] + self.dsize[gid])

    def members(self, gid: int, with_aux: bool = False) -> list:
        """Live entries of ``gid`` in key order: ``(key, id)`` or ``(key, id, aux)``; O(g)."""
        s, n = int(self.start[gid]), int(self.size[gid])
        ds, dn = s + int(self.cap[gid]) - DELTA, int(self.dsize[gid])
        idx = [i for i in range(s, s + n) if self.ids[i] >= 0] + list(range(ds, ds + dn))
        idx.sort(key=lambda i: (self.keys[i], i >= ds))
        if with_aux:
            return [(float(self.keys[i]), int(self.ids[i]), float(self.aux[i])) for i in idx]
        return [(float(self.keys[i]), int(self.ids[i])) for i in idx]

    # -- regions ---------------------------------------------------------------------------
    def _reserve(self, n: int) -> int:
        if self._used + n > self.keys.shape[0]:
            if self._garbage > self._used // 2:
                self.compact()
            if self._used + n > self.keys.shape[0]:
                cap = max(2 * self.keys.shape[0], self._used + n)
                self.keys = grown(self.keys, cap, self._used)
                self.ids = grown(self.ids, cap, self._used)
                self.aux = grown(self.aux, cap, self._used)
        at = self._used
        self._used += n
        return at

    def _copy_group(self, gid: int, dst_keys: np.ndarray, dst_ids: np.ndarray,
                    dst_aux: np.ndarray, at: int, main_room: int) -> None:
        s, n = int(self.start[gid]), int(self.size[gid])
        ds, dn = s + int(self.cap[gid]) - DELTA, int(self.dsize[gid])
        dst_keys[at : at + n] = self.keys[s : s + n]
        dst_ids[at : at + n] = self.ids[s : s + n]
        dst_aux[at : at + n] = self.aux[s : s + n]
        d = at + main_room
        dst_keys[d : d + dn] = self.keys[ds : ds + dn]
        dst_ids[d : d + dn] = self.ids[ds : ds + dn]
        dst_aux[d : d + dn] = self.aux[ds : ds + dn]

    def _relocate(self, gid: int, main_room: int) -> None:
        at = self._reserve(main_room + DELTA)
        if self.cap[gid]:
            self._copy_group(gid, self.keys, self.ids, self.aux, at, main_room)
        self._garbage += int(self.cap[gid])
        self.start[gid] = at
        self.cap[gid] = main_room + DELTA

    def flush(self, gid: int) -> None:
        """Merge g's delta run and drop its tombstones (O(group size))."""
        live = self.live_count(gid)
        if self.cap[gid] == 0 or live > self.cap[gid] - DELTA:
            self._relocate(gid, max(4, 2 * live))
        tk, ti, ta = self._tmp
        if tk.shape[0] < live:
            self._tmp = tk, ti, ta = (np.zeros(2 * live), np.zeros(2 * live, dtype=np.int64),
                                      np.zeros(2 * live))
        _merge(self.arrays(), self.dead, gid, tk, ti, ta)

    # -- entries ---------------------------------------------------------------------------
    def insert(self, gid: int, key: float, ident: int, extra: float = 0.0) -> None:
        """Insert ``(key, ident, extra)`` into group ``gid``; O(DELTA) amortised + flushes."""
        if not _ins(self.arrays(), gid, key, ident, extra):
            self.flush(gid)
            _ins(self.arrays(), gid, key, ident, extra)

    def remove(self, gid: int, key: float, ident: int) -> None:
        """Remove ``(key, ident)`` from group ``gid``; KeyError if absent."""
        r = _rem(self.arrays(), self.dead, gid, key, ident)
        if r == 0:
            raise KeyError(f"({key}, {ident}) not in group {gid}")
        if r == 2:
            self.flush(gid)

    def load_group(self, gid: int, keys: np.ndarray, ids: np.ndarray,
                   aux: np.ndarray | None = None) -> None:
        """Fill empty group ``gid`` with already-sorted ``keys``/``ids`` (bulk build)."""
        n = keys.shape[0]
        room = n + max(4, n // 4)
        at = self._reserve(room + DELTA)
        self.keys[at : at + n] = keys
        self.ids[at : at + n] = ids
        self.aux[at : at + n] = 0.0 if aux is None else aux
        self.start[gid] = at
        self.size[gid] = n
        self.cap[gid] = room + DELTA
        self.dsize[gid] = self.dead[gid] = 0

    def compact(self) -> None:
        """Rewrite all live groups contiguously, dropping abandoned regions (O(pool size))."""
        live = np.nonzero(self.cap[: self.n_groups_alloc] > 0)[0]
        total = int(self.cap[live].sum())
        n = max(total, self.keys.shape[0] // 2, 16)
        keys, ids, aux = np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros(n)
        at = 0
        for g in live.tolist():
            c = int(self.cap[g])
            self._copy_group(g, keys, ids, aux, at, c - DELTA)
            self.start[g] = at
            at += c
        self.keys, self.ids, self.aux, self._used, self._garbage = keys, ids, aux, at, 0

    def memory_bytes(self) -> int:
        return (self.keys.nbytes + self.ids.nbytes + self.aux.nbytes
                + 5 * self.start.nbytes)


def insert_pair(lp: GappedGroupPool, rp: GappedGroupPool, g: int, lkey: float,
                rkey: float, ident: int, lextra: float = 0.0, rextra: float = 0.0) -> None:
    """``lp.insert(g, lkey, ident, lextra); rp.insert(g, rkey, ident, rextra)`` in one call."""
    done = _ins_pair(lp.arrays(), rp.arrays(), g, lkey, rkey, ident, lextra, rextra)
    if not done & 1:
        lp.insert(g, lkey, ident, lextra)
    if not done & 2:
        rp.insert(g, rkey, ident, rextra)


def remove_pair(lp: GappedGroupPool, rp: GappedGroupPool, g: int, lkey: float,
                rkey: float, ident: int) -> None:
    """``lp.remove(g, lkey, ident); rp.remove(g, rkey, ident)`` in one kernel call."""
    r = _rem_pair(lp.arrays(), lp.dead, rp.arrays(), rp.dead, g, lkey, rkey, ident)
    a, b = divmod(r, 3)
    if a == 0 or b == 0:
        raise KeyError(f"({lkey}, {rkey}, {ident}) not in group {g} of both pools")
    if a == 2:
        lp.flush(g)
    if b == 2:
        rp.flush(g)
