"""The protocol every join kernel of paper 004 §3 shares: modes, record rows, bundles, outputs.

A strategy (one of §3.1–§3.3's; its interface to the engine is ``joins/interface.py``) keeps an
index over the subscriptions of one kind and, for an incoming tuple, runs compiled kernels (``config.kernel``) over
flat arrays that append to one output buffer:

* **modes**: ``IDENTIFY`` appends each affected subscription once; ``COUNT`` appends it once
  with its owed pair count in ``acc[q]``; ``PAIRS`` appends ``(q, partner slot)`` per owed pair
  (q is owed a pair iff it registered before the pair formed, or with snapshot: the brute
  force ``matcher/oracle.py``);
* **output**: :class:`MatchBuffer` (one tuple: ``out_q``/``out_s``, the dedupe ``stamp``) and
  :class:`BatchRows` (a run of tuples: ``(event, q, x)`` rows); a kernel that runs out of room
  in PAIRS returns ``OVERFLOW`` and is rerun on grown buffers (PAIRS has no side effects);
* **emit**: a subscription met more than once per tuple is recognised by ``mark[q] == stamp``
  and its count added to ``acc[q]``; the hot loops write this bookkeeping out instead of
  calling a helper (an ``inline="always"`` call with array arguments cost ~15 ns per
  subscription, ``band_kernels``' docstring);
* **record rows**: a subscription is one 64-byte row ``rec[q] = (b_lo, b_hi, a_lo, a_hi, c_lo,
  c_hi, reg, snap)`` (``SubscriptionColumns.rec``; select and window joins hold ``(0, w)`` in
  the B columns), so a kernel touching q misses the cache once;
* **bundles**: kernels take a few small bundles of arrays (as pynndescent's ``FlatTree``)
  instead of dozens of positional arrays, each named by a NamedTuple: :class:`KeyRun`,
  :class:`PartnerRun`, :class:`EventArrays` here, ``TableArrays`` / ``SubArrays`` beside the
  table and the subscription columns, and each structure's own (``GappedGroupPool.arrays()`` →
  ``GappedPoolArrays``, ``IntervalTree.arrays()`` → ``TreeArrays``, ...). A bundle crosses
  into a kernel as a *plain tuple* in its fields' order and the kernel names it back first
  (``t = TreeArrays(*tree)``, free in compiled code): numba types a NamedTuple argument in
  Python, ~1 µs per bundle per call, a plain tuple in C (~25 ns per array more than a
  positional array). A per-event kernel whose call is that short keeps positional arrays at
  its entry (``sj_scan``, ``sj_vanilla``; ``docs/benchmarks/engine.md``);
* **reference counting**: numba counts references to every array a compiled function binds (an
  atomic increment and decrement per binding: per call of a non-inlined kernel, per argument
  of an inlined helper, per tuple unpacked in a loop). In a loop over events and groups that
  was ~30 % of BJ-SSI's probe (1.36 → 0.95 µs per event without it). A kernel that
  allocates nothing and keeps its loops inside one function is compiled without numba's
  runtime (``_nrt=False``, ``matcher/config.py``'s ``NO_NRT``: numba's switch for its runtime,
  which its own maintainers use to show this cost: numba/numba#2350): the arrays
  are borrowed from the caller for the call's duration, so nothing needs counting
  (``band_kernels.ssi_many``; ``docs/benchmarks/batch.md``);
* **the id list**: :class:`DenseIds`, a kind's live subscriptions as a dense array (the base
  of every strategy, ``joins/interface.KindIndex``).

>>> buf = MatchBuffer(); buf.start(); buf.reserve(10000); buf.out_q.shape[0] >= 10016
True
>>> ids = DenseIds(); ids.add(7); ids.add(9); ids.remove(7); ids.view().tolist()
[9]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from hotjoin.matcher.base_table import TableArrays
from hotjoin.matcher.config import kernel
from hotjoin.matcher.subscriptions import SubArrays

__all__ = ["A_HI", "A_LO", "B_HI", "B_LO", "COUNT", "C_HI", "C_LO", "IDENTIFY", "OVERFLOW",
           "PAIRS", "REG", "SNAP", "At", "BatchRows", "DenseIds", "EventArrays", "KeyRun",
           "KeyedEvents", "MatchBuffer", "PartnerRun", "Partners", "Probe", "RowBuffers",
           "SubArrays", "TableArrays", "each_event", "room_of", "run_kernel_many"]

IDENTIFY = 0
COUNT = 1
PAIRS = 2
OVERFLOW = -1
"""Returned (as count or n_out) when PAIRS output does not fit: the caller grows the buffers
and runs the kernel again from the same start (PAIRS has no side effects)."""
B_LO, B_HI, A_LO, A_HI, C_LO, C_HI, REG, SNAP = 0, 1, 2, 3, 4, 5, 6, 7
"""Columns of a record row ``SubscriptionColumns.rec[q]``."""


# -- bundles shared by every kind's kernels ------------------------------------------------------


class KeyRun(NamedTuple):
    """One sorted run of the other side's key order: keys, slots and the key sample."""

    keys: np.ndarray
    pays: np.ndarray
    samp: np.ndarray


class PartnerRun(NamedTuple):
    """The partners of one join key sorted by value (§3.2.1's B-tree substructure on
    ``S(B, C)``): values ``values[base : base + size]``, their slots ``slots[…]``."""

    values: np.ndarray
    slots: np.ndarray
    base: int
    size: int


class EventArrays(NamedTuple):
    """A run of incoming tuples of one side: keys, values and their sequence numbers."""

    keys: np.ndarray
    values: np.ndarray
    seqs: np.ndarray


class Probe(NamedTuple):
    """How a run of incoming tuples meets the subscriptions: its direction ``dirn`` (+1 an R
    tuple, −1 an S tuple), the record row's column of the selection on the tuple itself
    (``own``: A for R, C for S) and of the one on its partner (``oth``), and the output
    ``mode``."""

    dirn: int
    own: int
    oth: int
    mode: int


class KeyedEvents(NamedTuple):
    """Incoming tuples of one side that have partners of their key (the select and window
    joins' batch path, ``EventRun.keyed``): each one's position in the run (its rows' event
    column), its key's group ``g`` in the other side's ``KeyIndex`` and the key, the partner
    runs of the key by value (``base``/``size`` in ``KeyIndex.by_value``) and by time
    (``tbase``/``tsize`` in ``by_time``; the by-value run while no window join keeps that
    order), its value, time, sequence number and the watermark it is matched under. A member's
    ``*_many`` kernel walks them in order (:meth:`select_tuple`; the window kernels take the
    whole bundle as a plain tuple)."""

    pos: np.ndarray
    g: np.ndarray
    keys: np.ndarray
    base: np.ndarray
    size: np.ndarray
    tbase: np.ndarray
    tsize: np.ndarray
    values: np.ndarray
    times: np.ndarray
    seqs: np.ndarray
    nows: np.ndarray

    def subset(self, sel: np.ndarray) -> KeyedEvents:
        """The events at indexes ``sel`` (in that order)."""
        return KeyedEvents(*(a[sel] for a in self))

    def select_tuple(self) -> tuple[np.ndarray, ...]:
        """The select kernels' ``ev``: ``(pos, base, size, values, seqs)``."""
        return (self.pos, self.base, self.size, self.values, self.seqs)


class Partners:
    """The partners of one key (group ``g`` of the other side's ``KeyIndex``): its by-value run
    ``pv``/``ps`` at ``base``/``size`` and its by-time run ``tv``/``ts`` at ``tbase``/``tsize``
    (the window kernels' ``P`` bundle, :meth:`arrays`)."""

    __slots__ = ("base", "g", "ps", "pv", "size", "tbase", "ts", "tsize", "tv")

    def __init__(self, table: Any, g: int) -> None:
        self.g = g
        ix = table.key_index
        assert ix is not None
        bv, bt = ix.by_value, ix.by_time
        assert bt is not None, "the engine keeps the by-time order once a window join exists"
        self.pv, self.ps = bv.keys, bv.ids
        self.base, self.size = int(bv.start[g]), int(bv.size[g])
        self.tv, self.ts = bt.keys, bt.ids
        self.tbase, self.tsize = int(bt.start[g]), int(bt.size[g])

    def arrays(self) -> tuple:
        """The window kernels' ``P`` bundle (``window_kernels``' docstring), a plain tuple."""
        return (self.pv, self.ps, self.base, self.size, self.tv, self.ts, self.tbase, self.tsize)


# -- outputs -------------------------------------------------------------------------------------


class MatchBuffer:
    """Growable output of one operation's kernels plus the IDENTIFY/COUNT dedupe stamp."""

    def __init__(self) -> None:
        self.out_q = np.empty(4096, dtype=np.int64)
        self.out_s = np.empty(4096, dtype=np.int64)
        self.n = 0
        self.stamp = 0

    def start(self) -> None:
        """Empty the buffer for a new tuple and take a fresh dedupe stamp."""
        self.n = 0
        self.stamp += 1

    def run(self, kernel: Callable[..., int], *args: Any) -> None:
        """Call ``kernel(*args, out_q, out_s, n)``; on ``OVERFLOW`` grow and run it again.

        Only PAIRS can overflow (IDENTIFY/COUNT reserve first) and PAIRS has no side effects,
        so rerunning from the same ``n`` is exact; the buffers persist, so this is rare.
        """
        while True:
            n = kernel(*args, self.out_q, self.out_s, self.n)
            if n != OVERFLOW:
                self.n = n
                return
            self.reserve(self.out_q.shape[0])

    def run_fresh(self, kernel: Callable[..., tuple[Any, ...]], args: tuple[Any, ...],
                  scratch: tuple[Any, ...] = ()) -> tuple[Any, ...]:
        """Call ``kernel(*args, stamp, out_q, out_s, n, *scratch)``, which returns ``(n,
        *scratch)`` (scratch it may have grown, e.g. a query's hit buffer); on ``OVERFLOW``
        grow, take a fresh stamp and run it again. For a kernel that dedupes by ``mark`` in
        PAIRS too: the marks of the overflowed run must not hide anyone from the rerun (PAIRS
        rows need no dedupe across kernels, so a new stamp loses nothing). Returns the
        scratch."""
        while True:
            n, *grown = kernel(*args, self.stamp, self.out_q, self.out_s, self.n, *scratch)
            scratch = tuple(grown)
            if n != OVERFLOW:
                self.n = n
                return scratch
            self.stamp += 1
            self.reserve(self.out_q.shape[0])

    def reserve(self, extra: int) -> None:
        """Room for ``extra`` more outputs (IDENTIFY/COUNT kernels never grow the buffers)."""
        need = self.n + extra + 16
        if need > self.out_q.shape[0]:
            cap = max(need, 2 * self.out_q.shape[0])
            q = np.empty(cap, dtype=np.int64)
            s = np.empty(cap, dtype=np.int64)
            q[: self.n] = self.out_q[: self.n]
            s[: self.n] = self.out_s[: self.n]
            self.out_q, self.out_s = q, s


TAKE_FRESH = 4096
"""``BatchRows``' starting capacity, and the least number of rows it hands over uncopied."""


class BatchRows:
    """Growable rows ``(event position, q, x)`` of a multi-event match (the batch path): ``x`` is
    the partner slot (PAIRS) or the pair count (COUNT). Kernels fill the arrays in place."""

    def __init__(self) -> None:
        self.e = np.empty(TAKE_FRESH, dtype=np.int64)
        self.q = np.empty(TAKE_FRESH, dtype=np.int64)
        self.x = np.empty(TAKE_FRESH, dtype=np.int64)
        self.n = 0
        # ``sort_by_event``'s copy of a first run, kept between batches (never handed over)
        self._run = np.empty((3, 0), dtype=np.int64)

    def reserve(self, extra: int) -> None:
        """Room for ``extra`` more rows."""
        need = self.n + extra
        if need > self.e.shape[0]:
            cap = max(need, 2 * self.e.shape[0])
            for name in ("e", "q", "x"):
                a = np.empty(cap, dtype=np.int64)
                a[: self.n] = getattr(self, name)[: self.n]
                setattr(self, name, a)

    def grow(self) -> None:
        """Double the capacity (a kernel stopped for want of room), empty or not."""
        self.reserve(2 * self.e.shape[0] - self.n)

    def append(self, e: int, q: np.ndarray, x: np.ndarray) -> None:
        """Rows ``(e, q[i], x[i])``."""
        k = q.shape[0]
        self.reserve(k)
        n = self.n
        self.e[n: n + k] = e
        self.q[n: n + k] = q
        self.x[n: n + k] = x
        self.n = n + k

    def sort_by_event(self, start: int = 0) -> None:
        """Order rows ``start …`` by event, stably (a kernel visited the events out of order):
        two runs each in event order are merged (:meth:`merge_runs`), any other order takes a
        counting sort (:func:`order_by_event`)."""
        e = self.e[start: self.n]
        cut = first_descent(e)
        if cut == e.shape[0]:
            return  # in order already
        if first_descent(e[cut:]) == e.shape[0] - cut:
            self.merge_runs(start, [start + cut])
        else:
            order_by_event(e, self.q[start: self.n], self.x[start: self.n])

    def merge_runs(self, start: int, cuts: Sequence[int]) -> None:
        """Merge the runs of rows ``[start, cuts[0])``, ``[cuts[0], cuts[1])``, … ``[cuts[-1],
        n)``, each in event order (a router's timed tuples' rows, then each member's), into event
        order, stably, in place (:func:`merge_two_runs`: the run before a cut is copied to a
        buffer kept between batches, then one sequential pass).

        On output-heavy batches (``hotjoin bench batch --kinds select --affected 5000``, ~2.9 M
        rows per batch of 1,000 events) a merge moves each row twice and touches no fresh
        memory; a counting sort moves it four times through two fresh columns, and merging into
        fresh columns measured slower than either for their page faults."""
        # [start, cut) is merged by now; add [cut, end)
        for cut, end in zip(cuts, [*cuts[1:], self.n], strict=False):  # (no cuts: nothing)
            if start < cut < end and self.e[cut] < self.e[cut - 1]:
                if self._run.shape[1] < cut - start:
                    self._run = np.empty((3, max(cut - start, 2 * self._run.shape[1])),
                                         dtype=np.int64)
                merge_two_runs(self.e[start:end], self.q[start:end], self.x[start:end],
                               cut - start, self._run)

    def count_by_event(self, n_events: int) -> np.ndarray:
        """The number of rows of each event ``0 … n_events − 1``; empties the buffer without
        copying or replacing its arrays (``Engine.probe_batch``: a benchmark's probe keeps no
        rows, so its timing holds no allocation of fresh output arrays)."""
        n = self.n
        self.n = 0
        return np.bincount(self.e[:n], minlength=n_events)

    def take(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows so far in the order they were written; empties the buffer.

        Few rows are copied out; when they fill at least half of the buffer, the arrays
        themselves are handed over (trimmed views, at most 2× their size) and the buffer
        takes fresh arrays of the same capacity: on output-heavy batches (millions of rows)
        the copy cost ~7 of ~69 µs per event (``docs/benchmarks/batch.md``), and fresh arrays
        page-fault just as the copy's own did."""
        n = self.n
        self.n = 0
        cap = self.e.shape[0]
        if n < TAKE_FRESH or 2 * n < cap:
            return self.e[:n].copy(), self.q[:n].copy(), self.x[:n].copy()
        out = self.e[:n], self.q[:n], self.x[:n]
        self.e = np.empty(cap, dtype=np.int64)
        self.q = np.empty(cap, dtype=np.int64)
        self.x = np.empty(cap, dtype=np.int64)
        return out


@kernel
def first_descent(e: np.ndarray) -> int:
    """The first ``i`` with ``e[i] < e[i - 1]`` (``len(e)``: none, ``e`` is in order)."""
    for i in range(1, e.shape[0]):
        if e[i] < e[i - 1]:
            return i
    return e.shape[0]


@kernel
def merge_two_runs(e: np.ndarray, q: np.ndarray, x: np.ndarray, cut: int,
                   buf: np.ndarray) -> None:
    """Merge the rows ``[0, cut)`` and ``[cut, n)``, each in event order, into event order,
    stably (the first run's rows first within an event), in place: the first run is copied to
    ``buf`` (3 × ≥ ``cut``) and merged with the second from the front (a write never passes the
    second run's next unread row). O(rows), one sequential pass over each column.

    >>> e, q, x = np.array([0, 2, 2, 1, 2]), np.arange(5), np.arange(5) * 10
    >>> merge_two_runs(e, q, x, 3, np.empty((3, 3), dtype=np.int64))
    >>> e.tolist(), q.tolist(), x.tolist()
    ([0, 1, 2, 2, 2], [0, 3, 1, 2, 4], [0, 30, 10, 20, 40])
    """
    n = e.shape[0]
    for i in range(cut):
        buf[0, i] = e[i]
        buf[1, i] = q[i]
        buf[2, i] = x[i]
    i, j, k = 0, cut, 0
    while i < cut and j < n:
        if e[j] < buf[0, i]:
            e[k] = e[j]
            q[k] = q[j]
            x[k] = x[j]
            j += 1
        else:
            e[k] = buf[0, i]
            q[k] = buf[1, i]
            x[k] = buf[2, i]
            i += 1
        k += 1
    while i < cut:
        e[k] = buf[0, i]
        q[k] = buf[1, i]
        x[k] = buf[2, i]
        i += 1
        k += 1


@kernel
def order_by_event(e: np.ndarray, q: np.ndarray, x: np.ndarray) -> None:
    """Reorder the rows ``(e[i], q[i], x[i])`` by event ``e`` (non-negative), stably, in place:
    a counting sort, O(rows + events). A stable ``argsort`` and three gathers took ~4 ms per
    batch of 1,000 events with ~900,000 rows (SJ-Dynamic routing runs to two members, whose
    rows come one member after the other).

    >>> e, q, x = np.array([2, 0, 2, 1, 0]), np.arange(5), np.arange(5) * 10
    >>> order_by_event(e, q, x)
    >>> e.tolist(), q.tolist(), x.tolist()
    ([0, 0, 1, 2, 2], [1, 4, 3, 0, 2], [10, 40, 30, 0, 20])
    """
    n = e.shape[0]
    m = 0
    for i in range(n):
        if e[i] + 1 > m:
            m = e[i] + 1
    first = np.zeros(m + 1, dtype=np.int64)
    for i in range(n):
        first[e[i] + 1] += 1
    for k in range(m):
        first[k + 1] += first[k]
    q2 = np.empty(n, dtype=q.dtype)
    x2 = np.empty(n, dtype=x.dtype)
    for i in range(n):
        j = first[e[i]]
        first[e[i]] = j + 1
        q2[j] = q[i]
        x2[j] = x[i]
    k = 0
    for ev in range(m):  # ``first[ev]`` is now the end of event ev's rows
        while k < first[ev]:
            e[k] = ev
            k += 1
    q[:] = q2
    x[:] = x2


def each_event(match_one: Callable[[int], None], n: int, buf: MatchBuffer, rows: BatchRows,
               mode: int, acc: np.ndarray, pos: np.ndarray | None = None) -> None:
    """Events one at a time into batch rows: ``match_one(j)`` fills ``buf`` for event ``j``;
    its output is appended to ``rows`` as event ``j``'s rows, or event ``pos[j]``'s. (Only a
    router's timed tuple takes this path now: every strategy matches a run in its compiled
    ``*_many`` kernel.)"""
    for j in range(n):
        buf.start()
        match_one(j)
        k = buf.n
        if k:
            q = buf.out_q[:k]
            rows.append(j if pos is None else int(pos[j]), q,
                        buf.out_s[:k] if mode == PAIRS else acc[q])


class RowBuffers(NamedTuple):
    """A batch kernel's output columns (``BatchRows``' arrays): event position, subscription,
    and the partner slot (PAIRS) or pair count (COUNT)."""

    e: np.ndarray
    q: np.ndarray
    x: np.ndarray


class At(NamedTuple):
    """Where a batch kernel starts (``matcher.core``'s out-of-room protocol): the first event
    to do, the rows already written, the last dedupe stamp taken, and the free rows an event
    needs in IDENTIFY/COUNT (0 in PAIRS)."""

    e0: int
    n_out: int
    stamp: int
    room: int


def room_of(mode: int, members: int) -> int:
    """The free rows a batch kernel needs per event (``At.room``): one per subscription in
    IDENTIFY/COUNT (each is output at most once per event), none in PAIRS (no bound: the
    kernel stops where it overflows)."""
    return 0 if mode == PAIRS else members + 16


def run_kernel_many(kernel: Callable[..., tuple[Any, ...]], head: tuple[Any, ...],
                    n_events: int, buf: MatchBuffer, rows: BatchRows, room: int,
                    scratch: tuple[Any, ...] = ()) -> tuple[Any, ...]:
    """Call a ``*_many`` kernel, ``kernel(*head, out, at, *scratch)`` with ``out`` a
    :class:`RowBuffers` and ``at`` an :class:`At` (plain tuples), until every event is done,
    growing ``rows`` whenever it stops for room. It returns ``(next event, n_out, stamp,
    *scratch)``: the scratch it may have grown (a query's hit buffer, a store's pool) goes
    into the next call and is returned. ``buf.stamp`` advances by one per event."""
    e = 0
    rows.reserve(room + 16)
    while True:
        e, rows.n, buf.stamp, *grown = kernel(*head, (rows.e, rows.q, rows.x),
                                              (e, rows.n, buf.stamp, room), *scratch)
        scratch = tuple(grown)
        if e >= n_events:
            return scratch
        rows.grow()


# -- the strategy base ---------------------------------------------------------------------------


class DenseIds:
    """Set of ids (non-negative integers: subscription ids) as a dense numpy array with O(1)
    add / swap-remove; each id's position in a column indexed by id (8 bytes per id, not a
    dict entry).

    >>> d = DenseIds(); d.add_many(np.array([4, 7, 9])); d.remove(4); sorted(d.view().tolist())
    [7, 9]
    """

    def __init__(self) -> None:
        self.arr = np.empty(64, dtype=np.int64)
        self.n = 0
        self.pos = np.full(64, -1, dtype=np.int64)

    def __len__(self) -> int:
        return self.n

    def _room(self, n: int, q_max: int) -> None:
        if n > self.arr.shape[0]:
            self.arr = np.resize(self.arr, max(n, 2 * self.arr.shape[0]))
        if q_max >= self.pos.shape[0]:
            old = self.pos
            self.pos = np.full(max(q_max + 1, 2 * old.shape[0]), -1, dtype=np.int64)
            self.pos[: old.shape[0]] = old

    def add(self, q: int) -> None:
        """Append ``q``; O(1) amortised."""
        self._room(self.n + 1, q)
        self.pos[q] = self.n
        self.arr[self.n] = q
        self.n += 1

    def add_many(self, qs: np.ndarray) -> None:
        """Append the (new, distinct) ids ``qs``; O(len(qs)) vectorised."""
        k = qs.shape[0]
        if k == 0:
            return
        self._room(self.n + k, int(qs.max()))
        self.arr[self.n: self.n + k] = qs
        self.pos[qs] = np.arange(self.n, self.n + k, dtype=np.int64)
        self.n += k

    def remove(self, q: int) -> None:
        """Drop ``q`` (the last id takes its place); O(1)."""
        i = int(self.pos[q])
        self.pos[q] = -1
        last = int(self.arr[self.n - 1])
        self.n -= 1
        if i != self.n:
            self.arr[i] = last
            self.pos[last] = i

    def view(self) -> np.ndarray:
        """The ids, in no particular order (a view: valid until the next change)."""
        return self.arr[: self.n]

    def memory_bytes(self) -> int:
        """Bytes of the id array (the positions column is the index's: ``memory_bytes`` of a
        strategy counts the id list once)."""
        return self.arr.nbytes

