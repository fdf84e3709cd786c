"""Per-join-key index of one base table: key b → its tuples sorted by value and by time.

Paper 004 §3.2 and §3.3 assume B-trees on ``S(B, C)`` (SJ-SelectFirst, SJ-Vanilla, SJ-SSI: "the
substructure of the B-tree containing all joining S-tuples") and on ``S(B, T)`` (WJ-JoinFirst: the
selection ``S.B = b ∧ S.T ≥ t − w_max``). Here both are one *group* per distinct key in two
:class:`~matcher.structures.group_pool.GroupedSortedPool`\\ s: ``by_value`` holds ``(value, slot)``
and ``by_time`` holds ``(float(time), slot)``, each sorted ascending inside the group. A kernel gets
the whole substructure of key b as ``keys[start[g] : start[g] + size[g]]`` after one dict lookup.
``by_time`` exists only for window joins (``KeyIndex(time_order=False)`` for select joins alone,
``enable_time_order`` when the first window join arrives): it would double the index of every stored
tuple.

Invariant: group ``g`` of ``by_value`` and of ``by_time`` hold exactly the stored (live) tuples
with key ``b`` where ``group[b] == g``; empty groups are dropped and their ids reused. Because the
index is updated synchronously on every insert and remove, it never holds a dead or reused slot.

Times are stored as float64 for the binary searches; the conversion is monotone, so a search for
``float(lo)`` never misses a tuple with ``time >= lo``; kernels re-check times exactly as int64.

Complexity: ``add``/``remove`` O(1) dict + O(group size) shift (groups are the tuples of one join
key); ``lookup`` O(1); ``bulk`` O(n log n).

Two maps key → group: a ``FloatIntMap`` (flat arrays: ``lookup_many`` answers a column in one
compiled call) and a dict for single lookups (~50 ns against a ~0.2 µs kernel call). The batch
path writes the flat map only; the new keys of each ``add_many`` wait in a log and reach the
dict at the next single-key operation (``lookup``, ``add``, ``remove``). Once the log holds
more keys than the dict it is dropped and the dict is rebuilt from the flat map when next
needed: a batch-only workload never pays for the dict (0.09 of the select batch path's ~1.05
µs per event), a mixed one pays what it paid before, amortised.

>>> ix = KeyIndex()
>>> ix.add(3.0, 5.0, 10, 0); ix.add(3.0, 1.0, 12, 1); ix.add(4.0, 2.0, 11, 2)
>>> g = ix.lookup(3.0)
>>> ix.by_value.members(g), ix.by_time.members(g)
([(1.0, 1), (5.0, 0)], [(10.0, 0), (12.0, 1)])
>>> ix.lookup(9.0)
-1
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hotjoin.matcher.config import NO_NRT, kernel
from hotjoin.matcher.core import insert_at, upper_bound
from hotjoin.matcher.structures.float_map import FloatIntMap
from hotjoin.matcher.structures.group_pool import GroupedSortedPool, PoolArrays

RemoveHook = Callable[[float, float, int, int], None]
ManyHook = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]


@kernel(**NO_NRT)  # allocates nothing: no reference counting (matcher/config.py)
def _insert_run(pool: tuple, cap: np.ndarray, groups: np.ndarray, ks: np.ndarray,
                idents: np.ndarray, i0: int) -> int:
    """Insert ``(ks[i], idents[i])`` into group ``groups[i]`` of a pool (its bundle,
    ``GroupedSortedPool.arrays()``, and its per-group capacities ``cap``), after equal keys as
    ``GroupedSortedPool.insert``, for i = i0, i0 + 1, ...; stops at the first full group and
    returns its i (``len(ks)`` when all are in): the caller makes room and calls again from
    there (``matcher/core.py``'s out-of-room protocol)."""
    start, size, keys, ids, aux = PoolArrays(*pool)
    for i in range(i0, ks.shape[0]):
        g = groups[i]
        n = size[g]
        if n == cap[g]:
            return i
        s = start[g]
        key = ks[i]
        pos = upper_bound(keys, s, s + n, key)
        insert_at(keys, pos, s + n, key)
        insert_at(ids, pos, s + n, idents[i])
        insert_at(aux, pos, s + n, 0.0)
        size[g] = n + 1
    return ks.shape[0]


@kernel
def _by_key_value(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                np.ndarray]:
    """``(order, distinct keys, counts)``: positions sorted by key then value (stably, as
    ``np.lexsort((values, keys))``), the distinct keys ascending and each one's count. One
    compiled call in place of a lexsort and five small NumPy calls (~0.07 µs per new key of
    the select batch path); ties of key are few, so a merge sort by key and an
    insertion sort by value inside each run of equal keys."""
    n = keys.shape[0]
    order = np.argsort(keys, kind="mergesort")
    uk = np.empty(n, dtype=np.float64)
    counts = np.empty(n, dtype=np.int64)
    m = 0
    a = 0
    while a < n:
        k = keys[order[a]]
        b = a + 1
        while b < n and keys[order[b]] == k:
            b += 1
        for i in range(a + 1, b):  # insertion sort by value, stable
            x = order[i]
            v = values[x]
            j = i - 1
            while j >= a and values[order[j]] > v:
                order[j + 1] = order[j]
                j -= 1
            order[j + 1] = x
        uk[m] = k
        counts[m] = b - a
        m += 1
        a = b
    return order, uk[:m].copy(), counts[:m].copy()


def _pool_insert_many(pool: GroupedSortedPool, groups: np.ndarray, ks: np.ndarray,
                      idents: np.ndarray) -> None:
    """Insert a column of entries into ``pool`` in order: compiled runs, and the pool's own
    ``insert`` (which makes room) for an entry whose group is full."""
    i, n = 0, ks.shape[0]
    while i < n:
        i = _insert_run(pool.arrays(), pool.cap, groups, ks, idents, i)
        if i < n:
            pool.insert(int(groups[i]), float(ks[i]), int(idents[i]))
            i += 1


class KeyIndex:
    """Groups of tuples by join key, each sorted by value and by time (see module docstring)."""

    def __init__(self, time_order: bool = True) -> None:
        self.by_value = GroupedSortedPool()
        #: the by-time groups, kept only when asked for (window joins): they double the index
        self.by_time: GroupedSortedPool | None = GroupedSortedPool() if time_order else None
        #: key → group for single lookups (module docstring), None when dropped; its log of
        #: (keys, groups) added by ``add_many`` since, and whether it is behind the flat map
        self._dict: dict[float, int] | None = {}
        self._log: list[tuple[np.ndarray, np.ndarray]] = []
        self._logged = 0
        self._stale = False
        #: the same map in flat arrays, for column lookups in one compiled call (the batch
        #: path)
        self._groups = FloatIntMap()
        self._free: list[int] = []
        self._next = 0
        #: called as ``hook(key, value, time, slot)`` after a tuple is added / before it is removed
        self.insert_hooks: list[RemoveHook] = []
        self.remove_hooks: list[RemoveHook] = []
        #: called as ``hook(keys, values, times, slots)`` after ``add_many`` (instead of the
        #: per-tuple hooks, which must then be registered here too, in the same order)
        self.insert_many_hooks: list[ManyHook] = []
        #: bumped when the table rebuilds its index wholesale (bulk load): caches must drop
        self.generation = 0

    def __len__(self) -> int:
        """Number of distinct keys."""
        return len(self._groups)

    @property
    def group(self) -> dict[float, int]:
        """The map key → group id as a dict (brought up to date first)."""
        if self._stale:
            self._sync()
        assert self._dict is not None
        return self._dict

    def _sync(self) -> None:
        """Bring the dict up to date: apply the log, or rebuild it after it was dropped."""
        if self._dict is None:
            self._dict = self._groups.items()
        else:
            for ks, gs in self._log:
                self._dict.update(zip(ks.tolist(), gs.tolist(), strict=True))
        self._log, self._logged, self._stale = [], 0, False

    def _log_keys(self, ks: np.ndarray, gs: np.ndarray) -> None:
        """New keys → groups for the dict (module docstring): logged, or nothing once the log
        outgrew the dict (dropped, rebuilt when next needed)."""
        if self._dict is None:
            return
        self._log.append((ks, gs))
        self._logged += ks.shape[0]
        self._stale = True
        if self._logged > max(len(self._dict), 4096):
            self._dict, self._log, self._logged = None, [], 0

    def lookup(self, key: float) -> int:
        """Group id of ``key`` or −1 when no stored tuple has that key. O(1) amortised."""
        if self._stale:
            self._sync()
        return self._dict.get(key, -1)  # type: ignore[union-attr]

    def succeed(self, old: KeyIndex) -> None:
        """Take over ``old``'s hooks after the table rebuilt its index wholesale; caches keyed
        by its generation see a new one."""
        self.insert_hooks, self.remove_hooks = old.insert_hooks, old.remove_hooks
        self.insert_many_hooks = old.insert_many_hooks
        self.generation = old.generation + 1

    def lookup_many(self, keys: np.ndarray) -> np.ndarray:
        """Group ids of ``keys`` (−1 where no stored tuple has the key), one compiled call
        over ``FloatIntMap``'s arrays. (A C-level dict lookup each costs ~150 ns per key with the
        boxing: 0.31 of the select batch path's 1.35 µs per event. Binary
        searches over a sorted copy of the keys were measured slower still.)

        >>> ix = KeyIndex()
        >>> ix.add_many(np.array([2.0, 5.0]), np.zeros(2), np.zeros(2, np.int64), np.arange(2))
        >>> ix.lookup_many(np.array([5.0, 3.0, 2.0, 9.0])).tolist()
        [1, -1, 0, -1]
        """
        return self._groups.get_many(keys)

    def add(self, key: float, value: float, time: int, slot: int) -> None:
        """Index the tuple at ``slot``."""
        group = self.group
        g = group.get(key, -1)
        if g < 0:
            g = self._free.pop() if self._free else self._next
            if g == self._next:
                self._next += 1
            self.by_value.add_group(g)
            if self.by_time is not None:
                self.by_time.add_group(g)
            group[key] = g
            self._groups.set(key, g)
        self.by_value.insert(g, value, slot)
        if self.by_time is not None:
            self.by_time.insert(g, float(time), slot)
        for h in self.insert_hooks:
            h(key, value, time, slot)

    def add_many(self, keys: np.ndarray, values: np.ndarray, times: np.ndarray,
                 slots: np.ndarray) -> None:
        """Index many tuples, in order; the same index as ``add`` one at a time (batch path).

        One dict lookup per tuple; tuples of keys already indexed go in with one compiled
        insert per order (by value, by time), tuples of new keys fill their new groups with one
        ``load_groups`` per order. O(n log n + n · group size).
        """
        n = keys.shape[0]
        if n == 0:
            return
        groups = self.lookup_many(np.asarray(keys, dtype=np.float64))
        slots = np.ascontiguousarray(slots, dtype=np.int64)
        vals = np.ascontiguousarray(values, dtype=np.float64)
        tms = np.asarray(times).astype(np.float64)
        new = groups < 0
        if new.any():
            idx = np.flatnonzero(new)
            nk, nv = keys[idx], vals[idx]
            # by key, then value (by_value's load order too); the new keys ascending, counts
            by_key, uk, counts = _by_key_value(nk, nv)
            m = uk.shape[0]
            reuse = min(m, len(self._free))  # freed group ids first, in ``add``'s pop order
            taken = self._free[len(self._free) - reuse:][::-1]
            del self._free[len(self._free) - reuse:]
            gids = np.empty(m, dtype=np.int64)
            gids[:reuse] = taken
            gids[reuse:] = np.arange(self._next, self._next + m - reuse, dtype=np.int64)
            self._next += m - reuse
            self._log_keys(uk, gids)
            self._groups.put_many(uk, gids)
            self.by_value.load_groups(gids, counts, nv[by_key], slots[idx][by_key])
            if self.by_time is not None:
                inv = np.empty(idx.shape[0], dtype=np.int64)  # each new tuple's key rank
                inv[by_key] = np.repeat(np.arange(m, dtype=np.int64), counts)
                order = np.lexsort((tms[idx], inv))  # by group, then time; stable
                self.by_time.load_groups(gids, counts, tms[idx][order], slots[idx][order])
        old = ~new
        if old.any():
            idx = np.flatnonzero(old)
            for pool, col in self._pools(vals, tms):
                _pool_insert_many(pool, groups[idx], col[idx], slots[idx])
        for hm in self.insert_many_hooks:
            hm(keys, values, times, slots)
        if self.insert_hooks and not self.insert_many_hooks:
            for key, value, time, slot in zip(keys.tolist(), values.tolist(), times.tolist(),
                                              slots.tolist(), strict=True):
                for h in self.insert_hooks:
                    h(key, value, time, slot)

    def remove(self, key: float, value: float, time: int, slot: int) -> None:
        """Un-index the tuple at ``slot`` (it must be indexed with these attributes)."""
        for h in self.remove_hooks:
            h(key, value, time, slot)
        group = self.group
        g = group[key]
        self.by_value.remove(g, value, slot)
        if self.by_time is not None:
            self.by_time.remove(g, float(time), slot)
        if self.by_value.size[g] == 0:
            self.by_value.drop_group(g)
            if self.by_time is not None:
                self.by_time.drop_group(g)
            del group[key]
            self._groups.discard(key)
            self._free.append(g)

    def bulk(self, keys: np.ndarray, values: np.ndarray, times: np.ndarray,
             slots: np.ndarray) -> None:
        """Build from scratch (the index must be empty): one sort per order. O(n log n)."""
        assert not len(self._groups)
        n = keys.shape[0]
        if n == 0:
            return
        uniq, inv = np.unique(keys, return_inverse=True)
        m = uniq.shape[0]
        self._log_keys(uniq, np.arange(m, dtype=np.int64))
        self._groups.put_many(uniq, np.arange(m, dtype=np.int64))
        self._next = m
        gids = np.arange(m, dtype=np.int64)
        counts = np.bincount(inv, minlength=m)
        slots = np.asarray(slots, dtype=np.int64)
        for pool, col in self._pools(values.astype(np.float64), times.astype(np.float64)):
            order = np.lexsort((col, inv))  # by group, then value/time
            pool.load_groups(gids, counts, col[order], slots[order])

    def enable_time_order(self, keys: np.ndarray, times: np.ndarray, slots: np.ndarray) -> None:
        """Add the by-time groups to an index kept by value only, from the indexed tuples' keys,
        times and slots (the table's live rows); a no-op when they exist. O(n log n).

        >>> ix = KeyIndex(time_order=False)
        >>> ix.add_many(np.array([3.0, 3.0]), np.array([5.0, 1.0]), np.array([10, 12]), np.arange(2))
        >>> ix.enable_time_order(np.array([3.0, 3.0]), np.array([10, 12]), np.arange(2))
        >>> ix.by_time.members(ix.lookup(3.0))
        [(10.0, 0), (12.0, 1)]
        """
        if self.by_time is not None:
            return
        pool = GroupedSortedPool()
        self.by_time = pool
        n = keys.shape[0]
        if n == 0:
            return
        groups = self.lookup_many(np.asarray(keys, dtype=np.float64))
        tms = np.asarray(times).astype(np.float64)
        order = np.lexsort((tms, groups))  # by group, then time
        gids, counts = np.unique(groups, return_counts=True)
        pool.load_groups(gids, counts, tms[order], np.asarray(slots, dtype=np.int64)[order])

    def _pools(self, values: np.ndarray,
               times: np.ndarray) -> list[tuple[GroupedSortedPool, np.ndarray]]:
        """The pools kept, each with the column it is ordered by."""
        if self.by_time is None:
            return [(self.by_value, values)]
        return [(self.by_value, values), (self.by_time, times)]

    def memory_bytes(self) -> int:
        pools = self.by_value.memory_bytes()
        if self.by_time is not None:
            pools += self.by_time.memory_bytes()
        d = 0 if self._dict is None else 100 * len(self._dict)
        return pools + d + 16 * self._logged + self._groups.memory_bytes()
