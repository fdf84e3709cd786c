"""Key-ordered sequence of ``(key, payload)`` kept as two sorted numpy runs (a B-tree stand-in).

Invariant: ``main_keys[:n_main]`` and ``delta_keys[:n_delta]`` are each sorted ascending; every
live payload appears in exactly one run; payloads the owner reports dead (``alive[p] == False``)
may still sit in a run until the next merge. An insert shifts only the small delta run
(O(√n) moves); when the delta outgrows ``≈ 4√n`` entries, or dead entries reach 1/8 of the main
run, both runs are merged into a new main run (O(n), amortised O(√n) per update). Readers scan
both runs; numba kernels take the four arrays directly (pynndescent-style flat arrays). Each
rebuild of the main run also keeps every 16th key (``main_sample``) and an occupancy bitmap of
the key line (``main_cells``, :mod:`~matcher.structures.key_cells`) for BJ-SSI's searches.

Measured alternatives (``docs/benchmarks/engine.md``): a single sorted array costs ~47 µs per insert at
100,000 keys and ~490 µs at 1,000,000 (memmove); ``SortedList`` inserts in ~0.8 µs but cannot be
read by numba kernels without copying.

>>> runs = SortedRuns()
>>> for k, p in [(3.0, 0), (1.0, 1), (2.0, 2)]:
...     runs.insert(k, p)
>>> runs.items(alive=None)
[(1.0, 1), (2.0, 2), (3.0, 0)]
"""

from __future__ import annotations

import math

import numpy as np

from hotjoin.matcher.config import NO_NRT, kernel
from hotjoin.matcher.core import sorted_insert, sorted_insert_many
from hotjoin.matcher.structures.growth import grown
from hotjoin.matcher.structures.key_cells import NO_CELLS, build_key_cells


@kernel(**NO_NRT)  # allocates nothing: no reference counting (matcher/config.py)
def insert_sorted(keys: np.ndarray, pays: np.ndarray, n: int, key: float, pay: int) -> None:
    """Insert ``(key, pay)`` into sorted ``keys[:n]`` after equal keys; arrays have room.
    O(log n + n) (``core.sorted_insert``)."""
    sorted_insert(keys, pays, 0, n, key, pay)


@kernel
def merge_runs(
    k1: np.ndarray, p1: np.ndarray, k2: np.ndarray, p2: np.ndarray, alive: np.ndarray,
    out_k: np.ndarray, out_p: np.ndarray,
) -> int:
    """Stable merge of two sorted runs into ``out``, dropping payloads with ``alive[p] == False``."""
    i = j = n = 0
    n1, n2 = k1.shape[0], k2.shape[0]
    while i < n1 or j < n2:
        if j >= n2 or (i < n1 and k1[i] <= k2[j]):
            k, p = k1[i], p1[i]
            i += 1
        else:
            k, p = k2[j], p2[j]
            j += 1
        if alive[p]:
            out_k[n] = k
            out_p[n] = p
            n += 1
    return n


SAMPLE_EVERY = 16
"""Every 16th key of the main run is copied into ``main_sample``: a binary search there stays
in cache and leaves one 512-byte block of the main run to search (``joins/band_kernels.py``)."""

_EMPTY = np.empty(0, dtype=np.float64)


class SortedRuns:
    """Dynamic key order over int payloads; liveness of a payload is owned by the caller."""

    __slots__ = ("main_keys", "main_pays", "n_main", "delta_keys", "delta_pays", "n_delta",
                 "n_dead", "merges", "main_sample", "main_cells")

    def __init__(self) -> None:
        self.main_keys = np.empty(0, dtype=np.float64)
        self.main_pays = np.empty(0, dtype=np.int64)
        self.n_main = 0
        self.delta_keys = np.empty(64, dtype=np.float64)
        self.delta_pays = np.empty(64, dtype=np.int64)
        self.n_delta = 0
        self.n_dead = 0
        self.merges = 0
        self.main_sample = _EMPTY
        self.main_cells = NO_CELLS  # occupancy bitmap of the main run (``key_cells``)

    def __len__(self) -> int:
        """Number of entries physically present (live + not yet merged-away dead)."""
        return self.n_main + self.n_delta

    def delta_limit(self) -> int:
        return max(256, 4 * math.isqrt(self.n_main + 1))

    def insert(self, key: float, pay: int, alive: np.ndarray | None = None) -> None:
        """Add ``(key, pay)``; O(√n) amortised. ``alive`` is needed only if a merge may run."""
        if self.n_delta == self.delta_keys.shape[0]:
            if self.n_delta >= self.delta_limit() and alive is not None:
                self.merge(alive)
            else:
                cap = 2 * self.delta_keys.shape[0]
                self.delta_keys = grown(self.delta_keys, cap, self.n_delta)
                self.delta_pays = grown(self.delta_pays, cap, self.n_delta)
        insert_sorted(self.delta_keys, self.delta_pays, self.n_delta, key, pay)
        self.n_delta += 1

    def insert_many(self, keys: np.ndarray, pays: np.ndarray, alive: np.ndarray) -> None:
        """Add many ``(key, pay)`` at once; the same runs as ``insert`` one at a time would give
        (up to when merges happen). One sort and one compiled merge into the delta run."""
        k = int(keys.shape[0])
        if k == 0:
            return
        order = np.argsort(keys, kind="stable")
        nk = np.ascontiguousarray(keys[order], dtype=np.float64)
        np_ = np.ascontiguousarray(pays[order], dtype=np.int64)
        # a batch of k costs O(delta + k) to merge into the delta run and a merge O(n): a
        # delta of ~√(n·k) balances the two (one at a time, k = 1, gives the √n rule)
        limit = max(self.delta_limit(), 2 * math.isqrt(self.n_main * k))
        if self.n_delta + k > limit:
            self.merge(alive)
        need = self.n_delta + k
        if need > self.delta_keys.shape[0]:
            cap = max(need, 2 * self.delta_keys.shape[0])
            self.delta_keys = grown(self.delta_keys, cap, self.n_delta)
            self.delta_pays = grown(self.delta_pays, cap, self.n_delta)
        sorted_insert_many(self.delta_keys, self.delta_pays, self.n_delta, nk, np_)
        self.n_delta = need
        if self.n_delta > limit:
            self.merge(alive)

    def mark_dead(self, alive: np.ndarray) -> None:
        """Record that one payload became dead; merges when dead entries pile up."""
        self.n_dead += 1
        if self.n_dead > max(256, self.n_main // 8):
            self.merge(alive)

    def merge(self, alive: np.ndarray) -> None:
        """Fold the delta run into the main run and drop dead payloads (O(n))."""
        total = self.n_main + self.n_delta
        out_k = np.empty(max(total, 1), dtype=np.float64)
        out_p = np.empty(max(total, 1), dtype=np.int64)
        n = merge_runs(self.main_keys[: self.n_main], self.main_pays[: self.n_main],
                       self.delta_keys[: self.n_delta], self.delta_pays[: self.n_delta],
                       alive, out_k, out_p)
        self.main_keys, self.main_pays, self.n_main = out_k, out_p, n
        self.main_sample = np.ascontiguousarray(out_k[:n:SAMPLE_EVERY])
        self.main_cells = build_key_cells(out_k[:n])
        self.n_delta = 0
        self.n_dead = 0
        self.merges += 1
        limit = self.delta_limit()
        if self.delta_keys.shape[0] < limit:
            self.delta_keys = np.empty(limit, dtype=np.float64)
            self.delta_pays = np.empty(limit, dtype=np.int64)

    def bulk_load(self, keys: np.ndarray, pays: np.ndarray) -> None:
        """Replace the content by ``(keys, pays)`` (any order) in O(n log n)."""
        order = np.argsort(keys, kind="stable")
        self.main_keys = np.ascontiguousarray(keys[order], dtype=np.float64)
        self.main_pays = np.ascontiguousarray(pays[order], dtype=np.int64)
        self.n_main = int(self.main_keys.shape[0])
        self.main_sample = np.ascontiguousarray(self.main_keys[::SAMPLE_EVERY])
        self.main_cells = build_key_cells(self.main_keys)
        self.n_delta = 0
        self.n_dead = 0

    def runs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The four arrays a kernel scans: main keys/payloads, delta keys/payloads."""
        return (self.main_keys[: self.n_main], self.main_pays[: self.n_main],
                self.delta_keys[: self.n_delta], self.delta_pays[: self.n_delta])

    def items(self, alive: np.ndarray | None) -> list[tuple[float, int]]:
        """All live entries in key order (for tests and debugging; O(n))."""
        mk, mp, dk, dp = self.runs()
        keys = np.concatenate([mk, dk])
        pays = np.concatenate([mp, dp])
        order = np.argsort(keys, kind="stable")
        return [(float(keys[i]), int(pays[i])) for i in order
                if alive is None or alive[pays[i]]]
