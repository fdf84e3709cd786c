"""Many small sorted sequences of ``(key, id)`` packed into one pair of flat arrays.

Group ``g`` owns ``keys[start[g] : start[g] + cap[g]]``; its first ``size[g]`` entries are sorted
ascending. Inserting shifts only inside the group (O(group size)); a full group moves to the end
of the pool with twice the room, and the pool compacts itself when more than half of it is
abandoned regions. This is how the SSI stores each stabbing group's sequences I_j^l (ranges by
increasing left end) and I_j^r (by decreasing right end, stored as ascending ``-hi``) of paper 004
§3.1.2, and how the interval tree of BJ-DOuter stores each node's lists: kernels read the flat
arrays with ``start``/``size`` (pynndescent's FlatTree habit). The band-join indexes, whose
groups hold thousands of ranges, use :mod:`matcher.structures.gapped_pool` instead.

>>> pool = GroupedSortedPool()
>>> g = pool.add_group(0)
>>> for k, q in [(5.0, 1), (2.0, 2), (9.0, 3)]:
...     pool.insert(g, k, q)
>>> pool.members(g)
[(2.0, 2), (5.0, 1), (9.0, 3)]
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hotjoin.matcher.config import NO_NRT, kernel
from hotjoin.matcher.core import find_entry, insert_at, remove_at, upper_bound
from hotjoin.matcher.structures.growth import grown


class PoolArrays(NamedTuple):
    """A :class:`GroupedSortedPool` as kernels read it: group ``g`` is the sorted run
    ``keys/ids/aux[start[g] : start[g] + size[g]]``."""

    start: np.ndarray
    size: np.ndarray
    keys: np.ndarray
    ids: np.ndarray
    aux: np.ndarray


# ``_insert``/``_remove`` keep positional arrays: they are called from Python once per stored
# tuple (``KeyIndex.add``) or subscription, where a bundle of the arrays costs ~75 ns more per
# call to type and ~160 ns with the tuple's construction (0.42 → 0.58 µs a call, measured with
# seven arrays).


@kernel(**NO_NRT)  # allocates nothing: no reference counting (matcher/config.py)
def _insert(keys: np.ndarray, ids: np.ndarray, aux: np.ndarray, start: np.ndarray,
            size: np.ndarray, cap: np.ndarray, g: int, key: float, ident: int,
            extra: float) -> bool:
    """Insert into group g after equal keys; False (nothing done) when the group is full."""
    n = size[g]
    if n == cap[g]:
        return False
    s = start[g]
    pos = upper_bound(keys, s, s + n, key)
    insert_at(keys, pos, s + n, key)
    insert_at(ids, pos, s + n, ident)
    insert_at(aux, pos, s + n, extra)
    size[g] = n + 1
    return True


@kernel(**NO_NRT)  # allocates nothing: no reference counting (matcher/config.py)
def _remove(keys: np.ndarray, ids: np.ndarray, aux: np.ndarray, start: np.ndarray,
            size: np.ndarray, g: int, key: float, ident: int) -> bool:
    """Remove ``(key, ident)`` from group g; False if absent."""
    s, n = start[g], size[g]
    j = find_entry(keys, ids, s, s + n, key, ident)
    if j < 0:
        return False
    remove_at(keys, j, s + n)
    remove_at(ids, j, s + n)
    remove_at(aux, j, s + n)
    size[g] = n - 1
    return True


class GroupedSortedPool:
    """Per-group sorted sequences in flat arrays with per-group slack."""

    __slots__ = ("keys", "ids", "aux", "start", "size", "cap", "_used", "_garbage",
                 "n_groups_alloc")

    def __init__(self, capacity: int = 1024, groups: int = 16) -> None:
        self.keys = np.zeros(capacity, dtype=np.float64)
        self.ids = np.zeros(capacity, dtype=np.int64)
        self.aux = np.zeros(capacity, dtype=np.float64)  # one float carried with each entry
        self.start = np.zeros(groups, dtype=np.int64)
        self.size = np.zeros(groups, dtype=np.int64)
        self.cap = np.zeros(groups, dtype=np.int64)
        self.n_groups_alloc = 0  # 1 + the largest group id ever added
        self._used = 0
        self._garbage = 0

    # -- groups ----------------------------------------------------------------------------
    def arrays(self) -> tuple[np.ndarray, ...]:
        """The pool as a kernel bundle: :class:`PoolArrays`' fields as a plain tuple (the
        kernel names it back, ``PoolArrays(*t)``; see ``GappedGroupPool.arrays``)."""
        return (self.start, self.size, self.keys, self.ids, self.aux)

    def add_group(self, gid: int) -> int:
        """Create empty group ``gid`` (ids are the caller's: small dense ints); returns it."""
        if gid >= self.start.shape[0]:
            n = max(2 * self.start.shape[0], gid + 1)
            for name in ("start", "size", "cap"):
                old = getattr(self, name)
                new = np.zeros(n, dtype=np.int64)
                new[: old.shape[0]] = old
                setattr(self, name, new)
        self.n_groups_alloc = max(self.n_groups_alloc, gid + 1)
        self.start[gid] = self._used
        self.size[gid] = 0
        self.cap[gid] = 0
        return gid

    def drop_group(self, gid: int) -> None:
        """Forget group ``gid`` (its region becomes garbage)."""
        self._garbage += int(self.cap[gid])
        self.size[gid] = 0
        self.cap[gid] = 0

    def members(self, gid: int) -> list[tuple[float, int]]:
        s, n = int(self.start[gid]), int(self.size[gid])
        return list(zip(self.keys[s : s + n].tolist(), self.ids[s : s + n].tolist(), strict=True))

    # -- entries ---------------------------------------------------------------------------
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

    def _relocate(self, gid: int, new_cap: int) -> None:
        n = int(self.size[gid])
        at = self._reserve(new_cap)
        s = int(self.start[gid])
        self.keys[at : at + n] = self.keys[s : s + n]
        self.ids[at : at + n] = self.ids[s : s + n]
        self.aux[at : at + n] = self.aux[s : s + n]
        self._garbage += int(self.cap[gid])
        self.start[gid] = at
        self.cap[gid] = new_cap

    def insert(self, gid: int, key: float, ident: int, extra: float = 0.0) -> None:
        """Insert ``(key, ident, extra)`` into group ``gid``, after equal keys. O(group size)."""
        if not _insert(self.keys, self.ids, self.aux, self.start, self.size, self.cap, gid, key,
                       ident, extra):
            self._relocate(gid, max(4, 2 * int(self.size[gid])))
            _insert(self.keys, self.ids, self.aux, self.start, self.size, self.cap, gid, key,
                    ident, extra)

    def remove(self, gid: int, key: float, ident: int) -> None:
        """Remove ``(key, ident)`` from group ``gid``; KeyError if absent."""
        if not _remove(self.keys, self.ids, self.aux, self.start, self.size, gid, key, ident):
            raise KeyError(f"({key}, {ident}) not in group {gid}")

    def load_group(self, gid: int, keys: np.ndarray, ids: np.ndarray,
                   aux: np.ndarray | None = None) -> None:
        """Fill empty group ``gid`` with already-sorted ``keys``/``ids`` (bulk build)."""
        n = keys.shape[0]
        cap = n + max(4, n // 4)
        at = self._reserve(cap)
        self.keys[at : at + n] = keys
        self.ids[at : at + n] = ids
        self.aux[at : at + n] = 0.0 if aux is None else aux
        self.start[gid] = at
        self.size[gid] = n
        self.cap[gid] = cap

    def load_groups(self, gids: np.ndarray, counts: np.ndarray, keys: np.ndarray,
                    ids: np.ndarray) -> None:
        """Create and fill many new groups at once (batch inserts): group ``gids[j]`` gets the
        next ``counts[j]`` entries of ``keys``/``ids`` (each group's run already sorted). One
        reservation and a few numpy operations for all, instead of ``add_group`` + ``insert``."""
        m = int(gids.shape[0])
        if m == 0:
            return
        top = int(gids.max()) + 1
        if top > self.start.shape[0]:
            n = max(2 * self.start.shape[0], top)
            for name in ("start", "size", "cap"):
                old = getattr(self, name)
                new = np.zeros(n, dtype=np.int64)
                new[: old.shape[0]] = old
                setattr(self, name, new)
        self.n_groups_alloc = max(self.n_groups_alloc, top)
        counts = counts.astype(np.int64)
        caps = counts + np.maximum(1, counts // 4)  # room for one more: most new keys get few
        at = self._reserve(int(caps.sum()))
        offs = at + np.cumsum(caps) - caps
        first = np.cumsum(counts) - counts
        dest = np.repeat(offs - first, counts) + np.arange(int(counts.sum()), dtype=np.int64)
        self.keys[dest] = keys
        self.ids[dest] = ids
        self.aux[dest] = 0.0
        self.start[gids] = offs
        self.size[gids] = counts
        self.cap[gids] = caps

    def compact(self) -> None:
        """Rewrite all live groups contiguously, dropping abandoned regions (O(pool size))."""
        live = np.nonzero(self.cap[: self.n_groups_alloc] > 0)[0]
        total = int(self.cap[live].sum())
        keys = np.zeros(max(total, self.keys.shape[0] // 2, 16), dtype=np.float64)
        ids = np.zeros(keys.shape[0], dtype=np.int64)
        aux = np.zeros(keys.shape[0], dtype=np.float64)
        at = 0
        for g in live.tolist():
            s, n, c = int(self.start[g]), int(self.size[g]), int(self.cap[g])
            keys[at : at + n] = self.keys[s : s + n]
            ids[at : at + n] = self.ids[s : s + n]
            aux[at : at + n] = self.aux[s : s + n]
            self.start[g] = at
            at += c
        self.keys, self.ids, self.aux, self._used, self._garbage = keys, ids, aux, at, 0

    def clear(self) -> None:
        self.__init__(max(16, self.keys.shape[0] // 2))  # type: ignore[misc]

    def memory_bytes(self) -> int:
        return self.keys.nbytes + self.ids.nbytes + self.aux.nbytes + 3 * self.start.nbytes
