"""The compiled primitives every join kind and every structure shares (as ``stumpy/core.py``).

Kernels import their searches, sorted inserts and output bookkeeping from here and nowhere
else; a join kind's own module (``joins/*_kernels.py``) holds only that kind's algorithms, a
structure's module only that structure's. All of them are compiled with
:mod:`matcher.config`'s flags; the small ones are inlined into their callers
(:data:`~matcher.config.INLINE`), so calling them costs what writing them out did — but for a
reference count per array argument and call in a kernel that runs with numba's runtime, which
is why the structures' kernels that loop over them run without it (``config.NO_NRT``).

**Searches** on a sorted run ``a[lo:hi]`` (float64 or int64, ascending, no NaN):
:func:`lower_bound` / :func:`upper_bound` (O(log n)), :func:`count_between`, and the galloping
searches :func:`gallop_lower` / :func:`gallop_upper`, which start from a hint and cost
O(log distance) when successive searches land near each other.

**Searches on a key difference** (the band and interval joins): the same searches on
``d(j) = keys[j] − b`` (IEEE-exact; read backwards for S tuples), which no key comparison
reproduces bit for bit — :func:`diff_at` / :func:`slot_at` (position j's difference and
slot), :func:`diff_lower_bound`, :func:`diff_gallop` / :func:`diff_gallop_back` (from a hint,
forwards or backwards), :func:`diff_locate` (through the run's key sample, with a sample hint).

**Sorted inserts and removes** in place, into arrays the caller made room in:
:func:`insert_at` / :func:`remove_at` (one column), :func:`sorted_insert` (a key column and
its payload column, after equal keys), :func:`sorted_insert_many` (a sorted batch, the same
order as one at a time) and :func:`find_entry` (the position of one ``(key, id)``).

**Owed pairs and output rows** (the modes and record rows of ``joins/protocol.py``):
:func:`owed` / :func:`owed_rec` (a subscription receives a pair iff it registered before
the pair formed, at the later tuple's sequence number, or with ``snapshot``: then it was
delivered the result first, README "File formats"), :func:`rows_of_event` (tag a run of rows
with its event).

**The out-of-room protocol.** Every kernel of every kind writes its output into buffers its
caller passed in and never allocates output of its own; when the room runs out it *stops and
says where*:

* a batch kernel (``*_many``) takes its row columns as one bundle ``out = (e, q, x)`` and where
  it stands as ``at = (e0, n_out, stamp, room)`` (``protocol.RowBuffers``, ``protocol.At``),
  and returns ``(next event, n_out, stamp)``, then the scratch it grew, if any. Before each
  event it checks ``n_out + room`` against the buffers (IDENTIFY/COUNT add at most ``room``
  rows per event: one per subscription), and in PAIRS, which has no bound, it stops at the
  event that overflowed and drops that event's partial rows;
* a one-tuple kernel or a query (:func:`~matcher.structures.interval_tree.stab`) returns
  :data:`OVERFLOW`: IDENTIFY/COUNT never overflow (the caller reserved a row per
  subscription), and PAIRS has no side effects but its dedupe marks, so it is rerun — with a
  fresh stamp where it marks (``MatchBuffer.run_fresh``);

and the caller grows the buffers and calls again from there (``MatchBuffer.run``,
``run_kernel_many`` in ``joins/protocol.py``). This convention also holds for kernels compiled
without numba's runtime (:data:`~matcher.config.NO_NRT`), which cannot allocate at all. The
appends below serve it: :func:`put` (a PAIRS row, or :data:`OVERFLOW`), :func:`record` and
:func:`emit_marked` (IDENTIFY/COUNT rows into reserved room).

>>> a = np.array([1.0, 2.0, 2.0, 5.0])
>>> lower_bound(a, 0, 4, 2.0), upper_bound(a, 0, 4, 2.0), count_between(a, 0, 4, 2.0, 5.0)
(1, 3, 3)
>>> keys, pays = np.zeros(5), np.zeros(5, np.int64)
>>> for n, (k, p) in enumerate([(3.0, 0), (1.0, 1), (3.0, 2)]):
...     _ = sorted_insert(keys, pays, 0, n, k, p)
>>> keys[:3].tolist(), pays[:3].tolist()
([1.0, 3.0, 3.0], [1, 0, 2])
"""

from __future__ import annotations

import numpy as np

from hotjoin.matcher.config import INLINE, kernel

__all__ = [
    "A_HI", "A_LO", "B_HI", "B_LO", "COUNT", "C_HI", "C_LO", "IDENTIFY", "OVERFLOW", "PAIRS",
    "REG", "SNAP", "count_between", "diff_at", "diff_gallop", "diff_gallop_back", "diff_locate",
    "diff_lower_bound", "emit_marked", "find_entry", "gallop_lower", "sample_rank", "slot_at",
    "gallop_upper", "insert_at", "lower_bound", "owed", "owed_rec", "put", "record",
    "remove_at", "rows_of_event", "sorted_insert", "sorted_insert_many", "upper_bound",
]

# -- modes and record rows (named for every kind in ``joins/protocol.py``) ------------------------

IDENTIFY = 0
"""Mode: each affected subscription once."""
COUNT = 1
"""Mode: each affected subscription once, with its owed pair count in ``acc[q]``."""
PAIRS = 2
"""Mode: ``(q, partner slot)`` per owed pair."""
OVERFLOW = -1
"""What a one-tuple kernel or a query returns when its output does not fit (module
docstring): it changed nothing, the caller grows the buffers and runs it again."""
B_LO, B_HI, A_LO, A_HI, C_LO, C_HI, REG, SNAP = 0, 1, 2, 3, 4, 5, 6, 7
"""Columns of a subscription's 64-byte record row ``SubscriptionColumns.rec[q]``."""


# -- searches on sorted runs ----------------------------------------------------------------------


@kernel(**INLINE)
def lower_bound(a: np.ndarray, lo: int, hi: int, x: float) -> int:
    """The first position ``i`` in ``[lo, hi)`` with ``a[i] >= x`` (``hi`` when none).

    ``a[lo:hi]`` ascending. O(log(hi − lo)) probes, no allocation.

    >>> lower_bound(np.array([1.0, 2.0, 2.0, 5.0]), 0, 4, 2.0)
    1
    >>> lower_bound(np.array([1.0, 2.0, 2.0, 5.0]), 2, 4, 9.0)
    4
    """
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel(**INLINE)
def upper_bound(a: np.ndarray, lo: int, hi: int, x: float) -> int:
    """The first position ``i`` in ``[lo, hi)`` with ``a[i] > x`` (``hi`` when none): the
    position a new ``x`` takes after the equal keys. O(log(hi − lo)).

    >>> upper_bound(np.array([1.0, 2.0, 2.0, 5.0]), 0, 4, 2.0)
    3
    >>> upper_bound(np.array([1.0, 2.0, 2.0, 5.0]), 0, 4, 0.5)
    0
    """
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel(**INLINE)
def count_between(a: np.ndarray, lo: int, hi: int, x0: float, x1: float) -> int:
    """``#{i ∈ [lo, hi) : x0 <= a[i] <= x1}`` of an ascending run (0 when ``x0 > x1``):
    two searches, O(log(hi − lo)), no slice.

    >>> count_between(np.array([1.0, 2.0, 2.0, 5.0]), 0, 4, 2.0, 4.0)
    2
    >>> count_between(np.array([1.0, 2.0, 2.0, 5.0]), 0, 4, 3.0, 1.0)
    0
    """
    return max(upper_bound(a, lo, hi, x1) - lower_bound(a, lo, hi, x0), 0)


@kernel(**INLINE)
def gallop_lower(a: np.ndarray, lo: int, hi: int, x: float, hint: int) -> int:
    """:func:`lower_bound` by an exponential search from ``hint`` (clamped to ``[lo, hi]``),
    in whichever direction the answer lies: O(log |answer − hint|) probes of neighbouring,
    usually cached positions, for searches that land near the previous answer (ascending
    queries over one run). Same result as ``lower_bound(a, lo, hi, x)`` for any hint.

    >>> a = np.array([1.0, 2.0, 2.0, 5.0, 7.0])
    >>> [gallop_lower(a, 0, 5, 2.0, h) for h in (0, 1, 2, 4, 9)]
    [1, 1, 1, 1, 1]
    """
    h = min(max(hint, lo), hi)
    if h < hi and a[h] < x:  # the answer lies above h: a[below] < x, answer in (below, top]
        below = h
        step = 1
        top = h + 1
        while top < hi and a[top] < x:
            below = top
            step <<= 1
            top = below + step
        return lower_bound(a, below + 1, min(top, hi), x)
    top = h  # a[top] >= x or top == hi: the answer is top or below
    step = 1
    below = h - 1
    while below >= lo and a[below] >= x:
        top = below
        step <<= 1
        below = top - step
    return lower_bound(a, max(below + 1, lo), top, x)


@kernel(**INLINE)
def gallop_upper(a: np.ndarray, lo: int, hi: int, x: float, hint: int) -> int:
    """:func:`upper_bound` by an exponential search from ``hint``, as :func:`gallop_lower`.

    >>> a = np.array([1.0, 2.0, 2.0, 5.0, 7.0])
    >>> [gallop_upper(a, 0, 5, 2.0, h) for h in (0, 3, 5)]
    [3, 3, 3]
    """
    h = min(max(hint, lo), hi)
    if h < hi and a[h] <= x:
        below = h
        step = 1
        top = h + 1
        while top < hi and a[top] <= x:
            below = top
            step <<= 1
            top = below + step
        return upper_bound(a, below + 1, min(top, hi), x)
    top = h
    step = 1
    below = h - 1
    while below >= lo and a[below] > x:
        top = below
        step <<= 1
        below = top - step
    return upper_bound(a, max(below + 1, lo), top, x)


# -- searches on a key difference ------------------------------------------------------------------
#
# The band and interval joins search a run of the other side's key order by the key difference
# ``d(j)`` of its position j: for an incoming R tuple (``dirn = +1``, key b) the run holds S keys
# and ``d(j) = keys[j] − b``; for an S tuple (``dirn = −1``) it holds R keys read backwards and
# ``d(j) = b − keys[n−1−j]``. Either way d is non-decreasing in j and is exactly the join
# condition's ``s.key − r.key`` (IEEE subtraction), so a search on d is exact, where a key search
# for ``b + x`` can land one key off by the rounding of the sum. ``samp`` holds every
# ``step``-th key of a main run (``sorted_runs.SAMPLE_EVERY``; or is empty): it narrows a search
# to one block first, so only the last probes miss the cache.


@kernel(**INLINE)
def diff_at(keys: np.ndarray, n: int, pos: int, b: float, dirn: int) -> float:
    """``d(pos)`` of the run ``keys[:n]`` for an incoming key ``b`` of direction ``dirn``.

    >>> keys = np.array([1.0, 4.0, 9.0])
    >>> diff_at(keys, 3, 0, 5.0, 1), diff_at(keys, 3, 0, 5.0, -1)
    (-4.0, -4.0)
    """
    if dirn > 0:
        return keys[pos] - b
    return b - keys[n - 1 - pos]


@kernel(**INLINE)
def slot_at(pays: np.ndarray, n: int, pos: int, dirn: int) -> int:
    """The slot (payload) at ``d``-order position ``pos`` of the run ``pays[:n]``.

    >>> slot_at(np.array([7, 8, 9]), 3, 0, 1), slot_at(np.array([7, 8, 9]), 3, 0, -1)
    (7, 9)
    """
    if dirn > 0:
        return pays[pos]
    return pays[n - 1 - pos]


@kernel(**INLINE)
def _flips(k: float, b: float, dirn: int, x: float) -> bool:
    """Monotone predicate over key index i (false, then true as keys grow) for
    :func:`diff_lower_bound`."""
    if dirn > 0:
        return k - b >= x
    return not (b - k >= x)


@kernel(**INLINE)
def diff_lower_bound(keys: np.ndarray, samp: np.ndarray, step: int, b: float, dirn: int,
                     x: float) -> int:
    """First position ``j`` with ``d(j) >= x`` (``n`` if none); O(log n).

    Searches in key-index space for the first ``i`` where ``_flips`` holds (dirn −1 maps it back
    with ``pos = n − i``). ``samp`` holds every ``step``-th key (``sorted_runs.SAMPLE_EVERY``; or
    is empty): it narrows the search to one block first, so only the last probes miss the cache.
    Module constants of other files are passed as arguments: numba's cache would not notice
    a change of them.
    """
    n = keys.shape[0]
    lo, hi = 0, n
    ns = samp.shape[0]
    if ns > 1:
        a, c = 0, ns
        while a < c:
            mid = (a + c) >> 1
            if _flips(samp[mid], b, dirn, x):
                c = mid
            else:
                a = mid + 1
        # flips first in block a-1 (keys[(a-1)*step .. a*step]) or at the sample a*step itself
        lo = max(0, (a - 1) * step)
        hi = min(n, a * step)
    while lo < hi:
        mid = (lo + hi) >> 1
        if _flips(keys[mid], b, dirn, x):
            hi = mid
        else:
            lo = mid + 1
    if dirn > 0:
        return lo
    return n - lo


@kernel(**INLINE)
def _diff_bisect(keys: np.ndarray, n: int, b: float, dirn: int, x: float, a: int,
                 hi: int) -> int:
    """The first position ``j`` in ``[a, hi]`` with ``d(j) >= x``, given that none below
    ``a`` has it and ``hi`` has it (or is ``n``): the binary search that ends both gallops."""
    while a < hi:
        mid = (a + hi) >> 1
        if diff_at(keys, n, mid, b, dirn) >= x:
            hi = mid
        else:
            a = mid + 1
    return a


@kernel(**INLINE)
def diff_gallop(keys: np.ndarray, samp: np.ndarray, step: int, b: float, dirn: int, x: float,
                start: int) -> int:
    """:func:`diff_lower_bound` started from ``start``: when ``d(start − 1) < x`` (the answer for a
    smaller ``x``, as when stabbing points are visited in increasing order) an exponential
    search forward from ``start``, O(log gap) over neighbouring, cached positions; otherwise the
    full search. Same result as ``diff_lower_bound(keys, samp, step, b, dirn, x)``."""
    n = keys.shape[0]
    if start <= 0 or start > n or diff_at(keys, n, start - 1, b, dirn) >= x:
        return diff_lower_bound(keys, samp, step, b, dirn, x)
    lo = start - 1  # d(lo) < x: the answer is in (lo, hi]
    hi = start
    gap = 1
    while hi < n and diff_at(keys, n, hi, b, dirn) < x:
        lo = hi
        gap <<= 1
        hi = lo + gap
    return _diff_bisect(keys, n, b, dirn, x, lo + 1, min(hi, n))


@kernel(**INLINE)
def sample_rank(samp: np.ndarray, b: float, dirn: int, x: float, h: int) -> int:
    """First sample index ``a`` with ``_flips(samp[a])`` (``len(samp)`` if none), by an
    exponential search from the hint ``h`` in whichever direction the answer lies: a few
    probes of the sample array, which stays in cache, where a search of the run would miss."""
    ns = samp.shape[0]
    h = min(max(h, 0), ns)
    if h < ns and not _flips(samp[h], b, dirn, x):  # the answer is above h
        lo = h
        gap = 1
        hi = h + 1
        while hi < ns and not _flips(samp[hi], b, dirn, x):
            lo = hi
            gap <<= 1
            hi = lo + gap
        if hi > ns:
            hi = ns
    else:  # the answer is h or below
        hi = h
        gap = 1
        lo = h - 1
        while lo >= 0 and _flips(samp[lo], b, dirn, x):
            hi = lo
            gap <<= 1
            lo = hi - gap
        if lo < -1:
            lo = -1
    a = lo + 1  # not flipped at lo (or lo = −1), flipped at hi (or hi = ns): answer in (lo, hi]
    while a < hi:
        mid = (a + hi) >> 1
        if _flips(samp[mid], b, dirn, x):
            hi = mid
        else:
            a = mid + 1
    return a


@kernel(**INLINE)
def diff_locate(keys: np.ndarray, samp: np.ndarray, step: int, b: float, dirn: int, x: float,
                h: int) -> tuple[int, int]:
    """``(diff_lower_bound(keys, samp, step, b, dirn, x), sample hint)`` for a run with a sample
    (``samp[j] == keys[j * step]``): :func:`sample_rank` from the hint ``h``, then the one
    block of ``step`` keys it leaves is counted without branches (``step`` compares, no
    mispredicted jumps). Used where successive searches land near each other (BJ-SSI's
    groups, and tuples taken in key order); in a throwaway prototype of the load test's
    searches, 15.5 ns against :func:`diff_gallop`'s 26.9 ns per search."""
    n = keys.shape[0]
    a = sample_rank(samp, b, dirn, x, h)
    if a == 0:
        i = 0  # the first key already flips
    else:
        base = (a - 1) * step + 1  # keys[(a − 1) · step] does not flip, keys[a · step] does
        end = min(a * step, n)
        c = 0
        for k in range(base, end):
            c += not _flips(keys[k], b, dirn, x)
        i = base + c
    if dirn > 0:
        return i, a
    return n - i, a


@kernel(**INLINE)
def diff_gallop_back(keys: np.ndarray, b: float, dirn: int, x: float, start: int) -> int:
    """First position ``j <= start`` with ``d(j) >= x``, given ``d(start) >= x``: an
    exponential search backwards, O(log distance) — the mirror of :func:`diff_gallop`."""
    n = keys.shape[0]
    hi = start  # d(hi) >= x
    lo = start - 1
    gap = 1
    while lo >= 0 and diff_at(keys, n, lo, b, dirn) >= x:
        hi = lo
        gap <<= 1
        lo = hi - gap
    return _diff_bisect(keys, n, b, dirn, x, max(lo, -1) + 1, hi)  # the answer is in (lo, hi]


# -- sorted inserts and removes in place ----------------------------------------------------------


@kernel(**INLINE)
def insert_at(a: np.ndarray, pos: int, hi: int, x: float) -> None:
    """Shift ``a[pos:hi]`` up by one and write ``x`` at ``pos`` (``a[hi]`` must exist).
    O(hi − pos).

    >>> a = np.array([1, 2, 3, 0])
    >>> insert_at(a, 1, 3, 9); a.tolist()
    [1, 9, 2, 3]
    """
    for j in range(hi, pos, -1):
        a[j] = a[j - 1]
    a[pos] = x


@kernel(**INLINE)
def remove_at(a: np.ndarray, pos: int, hi: int) -> None:
    """Shift ``a[pos + 1:hi]`` down by one over ``a[pos]``. O(hi − pos).

    >>> a = np.array([1, 9, 2, 3])
    >>> remove_at(a, 1, 4); a[:3].tolist()
    [1, 2, 3]
    """
    for j in range(pos, hi - 1):
        a[j] = a[j + 1]


@kernel(**INLINE)
def sorted_insert(keys: np.ndarray, pays: np.ndarray, lo: int, hi: int, key: float,
                  pay: int) -> int:
    """Insert ``(key, pay)`` into the sorted run ``keys/pays[lo:hi]`` after the equal keys
    (stable: insertion order among equal keys); both arrays have room at ``hi``. Returns the
    position. O(log n) search plus O(n) shift.

    >>> keys, pays = np.array([1.0, 3.0, 0.0]), np.array([7, 8, 0])
    >>> sorted_insert(keys, pays, 0, 2, 1.0, 9), keys.tolist(), pays.tolist()
    (1, [1.0, 1.0, 3.0], [7, 9, 8])
    """
    pos = upper_bound(keys, lo, hi, key)
    for j in range(hi, pos, -1):
        keys[j] = keys[j - 1]
        pays[j] = pays[j - 1]
    keys[pos] = key
    pays[pos] = pay
    return pos


@kernel
def sorted_insert_many(keys: np.ndarray, pays: np.ndarray, n: int, new_keys: np.ndarray,
                       new_pays: np.ndarray) -> None:
    """Merge the sorted batch ``new_keys/new_pays`` into the sorted run ``keys/pays[:n]`` in
    place, each new entry after the equal keys already there (as :func:`sorted_insert` one at
    a time, in batch order); the arrays have room for ``n + len(new_keys)``. O(n + k), from
    the back, no scratch.

    >>> keys, pays = np.array([1.0, 3.0, 0.0, 0.0]), np.array([7, 8, 0, 0])
    >>> sorted_insert_many(keys, pays, 2, np.array([0.5, 3.0]), np.array([5, 6]))
    >>> keys.tolist(), pays.tolist()
    ([0.5, 1.0, 3.0, 3.0], [5, 7, 8, 6])
    """
    i, j, w = n - 1, new_keys.shape[0] - 1, n + new_keys.shape[0] - 1
    while j >= 0:
        if i >= 0 and keys[i] > new_keys[j]:
            keys[w] = keys[i]
            pays[w] = pays[i]
            i -= 1
        else:
            keys[w] = new_keys[j]
            pays[w] = new_pays[j]
            j -= 1
        w -= 1


@kernel(**INLINE)
def find_entry(keys: np.ndarray, ids: np.ndarray, lo: int, hi: int, key: float,
               ident: int) -> int:
    """The position of the entry ``(key, ident)`` in the sorted run ``keys/ids[lo:hi]``, or
    −1: a search for ``key``, then a walk over the equal keys. O(log n + duplicates).

    >>> find_entry(np.array([1.0, 2.0, 2.0]), np.array([4, 5, 6]), 0, 3, 2.0, 6)
    2
    >>> find_entry(np.array([1.0, 2.0, 2.0]), np.array([4, 5, 6]), 0, 3, 2.0, 4)
    -1
    """
    j = lower_bound(keys, lo, hi, key)
    while j < hi and keys[j] == key:
        if ids[j] == ident:
            return j
        j += 1
    return -1


# -- owed pairs and output rows --------------------------------------------------------------------


@kernel(**INLINE)
def owed(q: int, slot: int, xseq: int, dseqs: np.ndarray, reg: np.ndarray,
         snap: np.ndarray) -> bool:
    """Whether subscription ``q`` receives the pair of the incoming tuple (sequence number
    ``xseq``) with the stored one at ``slot``: it registered (``reg[q]``) before the pair
    formed, at the later of the two tuples' sequence numbers, or with snapshot (it was given
    the result as of its registration). Compact columns ``reg``/``snap``; O(1).

    >>> owed(0, 0, 5, np.array([3]), np.array([4]), np.array([False]))
    True
    >>> owed(0, 0, 5, np.array([3]), np.array([5]), np.array([False]))
    False
    """
    return snap[q] or reg[q] < max(xseq, dseqs[slot])


@kernel(**INLINE)
def owed_rec(rec: np.ndarray, q: int, slot: int, xseq: int, dseqs: np.ndarray) -> bool:
    """:func:`owed` read from q's record row ``rec[q]`` (columns :data:`REG`,
    :data:`SNAP`): one cache line per subscription instead of two columns.

    >>> rec = np.zeros((1, 8)); rec[0, REG] = 5.0
    >>> owed_rec(rec, 0, 0, 5, np.array([6])), owed_rec(rec, 0, 0, 5, np.array([2]))
    (True, False)
    """
    return rec[q, SNAP] != 0.0 or rec[q, REG] < max(xseq, dseqs[slot])


@kernel(**INLINE)
def rows_of_event(e: int, n0: int, n_out: int, mode: int, acc: np.ndarray, out_e: np.ndarray,
                  out_q: np.ndarray, out_x: np.ndarray) -> None:
    """Tag the rows ``n0 … n_out`` of a batch kernel's output with their event ``e``; in
    COUNT a row's count (``out_x``) is taken from ``acc[q]``. O(rows).

    >>> out_e, out_q, out_x = np.zeros(3, np.int64), np.array([4, 2, 0]), np.zeros(3, np.int64)
    >>> rows_of_event(7, 0, 2, COUNT, np.array([0, 0, 5, 0, 9]), out_e, out_q, out_x)
    >>> out_e.tolist(), out_x.tolist()
    ([7, 7, 0], [9, 5, 0])
    """
    for k in range(n0, n_out):
        out_e[k] = e
        if mode == COUNT:
            out_x[k] = acc[out_q[k]]


# -- appends into room the caller made --------------------------------------------------------------


@kernel(**INLINE)
def put(out_q: np.ndarray, out_s: np.ndarray, n_out: int, q: int, s: int) -> int:
    """Append the PAIRS row ``(q, s)``; the new ``n_out``, or :data:`OVERFLOW` when the buffers
    are full (the kernel then stops: the out-of-room protocol). O(1).

    >>> q, s = np.zeros(1, np.int64), np.zeros(1, np.int64)
    >>> put(q, s, 0, 3, 4), put(q, s, 1, 5, 6), q.tolist(), s.tolist()
    (1, -1, [3], [4])
    """
    if n_out == out_q.shape[0]:
        return OVERFLOW
    out_q[n_out] = q
    out_s[n_out] = s
    return n_out + 1


@kernel(**INLINE)
def record(q: int, cnt: int, mode: int, mark: np.ndarray, stamp: int, acc: np.ndarray,
           out_q: np.ndarray, out_s: np.ndarray, n_out: int) -> int:
    """IDENTIFY/COUNT bookkeeping of a subscription met possibly several times per tuple:
    output once (``mark[q] == stamp`` once output), counts summed in ``acc[q]``; returns the
    new ``n_out``. PAIRS: nothing. The caller reserved a row per subscription (the
    out-of-room protocol's ``room``), so this never runs out.

    >>> mark, acc = np.zeros(3, np.int64), np.zeros(3, np.int64)
    >>> q, s = np.empty(4, np.int64), np.empty(4, np.int64)
    >>> n = record(2, 1, COUNT, mark, 9, acc, q, s, 0)
    >>> n = record(2, 3, COUNT, mark, 9, acc, q, s, n)
    >>> q[:n].tolist(), int(acc[2])
    ([2], 4)
    """
    if cnt > 0 and mode != PAIRS:
        if mark[q] != stamp:
            mark[q] = stamp
            acc[q] = 0
            out_q[n_out] = q
            out_s[n_out] = 0
            n_out += 1
        acc[q] += cnt
    return n_out


@kernel(**INLINE)
def emit_marked(q: int, cnt: int, mode: int, acc: np.ndarray, out_q: np.ndarray,
                out_s: np.ndarray, n_out: int) -> int:
    """IDENTIFY/COUNT output of a subscription already marked for this tuple (met once):
    ``acc[q] = cnt`` and one row when ``cnt > 0``; returns the new ``n_out`` (room reserved,
    as :func:`record`).

    >>> acc, q, s = np.zeros(3, np.int64), np.empty(2, np.int64), np.empty(2, np.int64)
    >>> n = emit_marked(1, 2, COUNT, acc, q, s, 0)
    >>> q[:n].tolist(), int(acc[1])
    ([1], 2)
    """
    if mode != PAIRS and cnt > 0:
        acc[q] = cnt
        out_q[n_out] = q
        out_s[n_out] = 0
        n_out += 1
    return n_out
