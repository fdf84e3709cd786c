"""numba kernels of the band-join strategies of paper 004 §3.1 (BJ-QOuter, BJ-DOuter, BJ-MJ, BJ-SSI).

Every kernel processes one incoming tuple ``x`` against ONE sorted run of the other side's key
order (a table has a main and a delta run, see ``sorted_runs``) and appends to output buffers.
Conventions shared by all kernels:

* ``dirn = +1``: ``x`` is an R tuple with key ``b``; the run holds S keys and the band difference of
  position ``j`` is ``d(j) = keys[j] − b``. ``dirn = −1``: ``x`` is an S tuple; the run holds R keys
  read backwards, ``d(j) = b − keys[n−1−j]``. Either way ``d`` is non-decreasing in ``j`` and is
  exactly the band condition's ``s.key − r.key`` (IEEE subtraction; README, "Using the engine"), so
  binary searches on ``d`` are exact: ``matcher.core``'s searches on a key difference
  (:func:`~matcher.core.diff_lower_bound`, :func:`~matcher.core.diff_gallop`,
  :func:`~matcher.core.diff_locate`, :func:`~matcher.core.diff_gallop_back`), which the
  interval joins share; a key search for ``b + x`` can land one key off ``d(j) >= x`` by the
  rounding of the sum, and S tuples read the run backwards.
* A band subscription is one 64-byte row ``rec[q] = (b_lo, b_hi, a_lo, a_hi, c_lo, c_hi, reg,
  snap)`` (``SubscriptionColumns.rec``), so a kernel touching subscription q misses the cache
  once, not once per column. ``own`` is the column of the local selection on ``x`` itself (A=2
  for R, C=4 for S), ``oth`` the one on the partner; unbounded ends are ``±inf``.
* ``mode``: ``IDENTIFY`` appends each affected subscription once; ``COUNT`` appends each affected
  subscription once with its pair count in ``acc[q]``. When an event scans more than one run
  (``dedupe``), a subscription met again is recognised by ``mark[q] == stamp`` and its count added;
  with one run ``mark`` is never read, which saves a cache miss per subscription. This bookkeeping
  ("emit") is written out in every hot loop rather than called: even an ``inline="always"`` call
  with array arguments cost ~15 ns per subscription (measured in BJ-SSI: 16 → 2 ns per affected
  subscription); ``PAIRS`` appends ``(q, partner slot)`` per result pair. COUNT and PAIRS keep only
  pairs the subscription is owed: ``snap[q]`` or ``reg[q] < max(xseq, seqs[slot])`` (a pair forms at
  the later tuple's sequence number: ``core.owed_rec``). For an insert ``xseq`` exceeds every
  registration, so the filter passes everything.
* Output buffers follow ``matcher/core.py``'s out-of-room protocol: one-tuple kernels return
  ``OVERFLOW`` in PAIRS, the batch kernels the event they stopped at.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from hotjoin.matcher.config import INLINE, NO_NRT, kernel
from hotjoin.matcher.core import (
    diff_at,
    diff_gallop,
    diff_gallop_back,
    diff_locate,
    diff_lower_bound,
    owed_rec,
    rows_of_event,
    slot_at,
)
from hotjoin.matcher.joins.protocol import (
    B_HI,
    B_LO,
    COUNT,
    IDENTIFY,
    OVERFLOW,
    PAIRS,
    At,
    EventArrays,
    KeyRun,
    Probe,
    RowBuffers,
    SubArrays,
    TableArrays,
)
from hotjoin.matcher.structures.gapped_pool import GappedPoolArrays
from hotjoin.matcher.structures.interval_tree import TreeArrays, descend
from hotjoin.matcher.structures.key_cells import may_hold


@kernel(**INLINE)
def walk(q: int, start: int, step: int, lo: float, hi: float, olo: float, ohi: float,
         keys: np.ndarray, pays: np.ndarray, b: float, dirn: int, tab: tuple, xseq: int,
         rec: np.ndarray, mode: int, out_q: np.ndarray, out_s: np.ndarray,
         n_out: int) -> tuple[int, int]:
    """Visit positions ``start, start+step, …`` while ``lo <= d <= hi``; count/emit q's pairs.

    ``olo/ohi`` is q's selection on the partner's value, ``tab`` the other table's
    ``TableArrays``. Returns ``(count, n_out)``; IDENTIFY stops at the first pair; PAIRS
    returns count ``OVERFLOW`` when the buffers are full.
    """
    alive, dvals, dseqs = TableArrays(*tab)
    n = keys.shape[0]
    cap = out_q.shape[0]
    pos = start
    cnt = 0
    while 0 <= pos < n:
        dd = diff_at(keys, n, pos, b, dirn)
        if dd < lo or dd > hi:
            break
        s = slot_at(pays, n, pos, dirn)
        if alive[s]:
            v = dvals[s]
            if olo <= v <= ohi:
                if mode == IDENTIFY:
                    return 1, n_out
                if owed_rec(rec, q, s, xseq, dseqs):
                    cnt += 1
                    if mode == PAIRS:
                        if n_out == cap:
                            return OVERFLOW, n_out
                        out_q[n_out] = q
                        out_s[n_out] = s
                        n_out += 1
        pos += step
    return cnt, n_out


@kernel
def qouter(qids: np.ndarray, run: tuple, tab: tuple, sub: tuple, step: int, b: float, v: float,
           dirn: int, xseq: int, own: int, oth: int, mode: int, dedupe: bool, stamp: int,
           out_q: np.ndarray, out_s: np.ndarray, n_out: int):
    """BJ-QOuter: each subscription in turn searches the run for ``d ∈ rangeB``, O(n log m + k).

    Bundles (plain tuples, named back here): ``run`` ``KeyRun``, ``tab`` ``TableArrays``,
    ``sub`` ``SubArrays``.
    """
    keys, pays, samp = KeyRun(*run)
    alive, dvals, dseqs = TableArrays(*tab)
    rec, mark, acc = SubArrays(*sub)
    for i in range(qids.shape[0]):
        q = qids[i]
        if not (rec[q, own] <= v <= rec[q, own + 1]):
            continue
        lo = rec[q, B_LO]
        start = diff_lower_bound(keys, samp, step, b, dirn, lo)
        if start >= keys.shape[0] or diff_at(keys, keys.shape[0], start, b, dirn) > rec[q, B_HI]:
            continue  # no partner in range: skip the call (a numba call costs ~18 ns)
        cnt, n_out = walk(q, start, 1, lo, rec[q, B_HI], rec[q, oth],
                                        rec[q, oth + 1], keys, pays, b, dirn, tab, xseq, rec,
                                        mode, out_q, out_s, n_out)
        if cnt == OVERFLOW:
            return OVERFLOW
        if cnt > 0 and mode != PAIRS:  # emit, written out (see the module docstring)
            if not dedupe:
                if mode == COUNT:
                    acc[q] = cnt
                out_q[n_out] = q
                n_out += 1
            elif mark[q] != stamp:
                mark[q] = stamp
                acc[q] = cnt
                out_q[n_out] = q
                n_out += 1
            else:
                acc[q] += cnt
    return n_out


@kernel
def merge_join(ikeys: np.ndarray, ipays: np.ndarray, ents: tuple, run: tuple, tab: tuple,
               sub: tuple, b: float, v: float, dirn: int, xseq: int, own: int, oth: int,
               mode: int, dedupe: bool, stamp: int,
               out_q: np.ndarray, out_s: np.ndarray, n_out: int):
    """BJ-MJ: merge the ranges sorted by left end (shifted by ``b``) with the run — O(n + m + k).

    The range order holds entry ids: entry ``e`` is subscription ``ent_q[e]`` with a copy of its
    record in ``ent_rec[e]``, live iff ``ent_alive[e]``. Entries of the main run are numbered in
    key order, so the merge reads windows sequentially like the paper's sorted list.

    Bundles (plain tuples, named back here): ``ents`` :class:`RangeArrays`, ``run`` ``KeyRun``,
    ``tab`` ``TableArrays``, ``sub`` ``SubArrays``.
    """
    ent_q, ent_alive, ent_rec = RangeArrays(*ents)
    keys, pays, _ = KeyRun(*run)
    alive, dvals, dseqs = TableArrays(*tab)
    rec, mark, acc = SubArrays(*sub)
    n = keys.shape[0]
    j = 0
    for t in range(ikeys.shape[0]):
        e = ipays[t]
        if not ent_alive[e]:
            continue
        lo = ikeys[t]
        while j < n and diff_at(keys, n, j, b, dirn) < lo:
            j += 1
        if j >= n:
            break
        if not (ent_rec[e, own] <= v <= ent_rec[e, own + 1]):
            continue
        if diff_at(keys, n, j, b, dirn) > ent_rec[e, B_HI]:
            continue  # no partner in range: skip the call (a numba call costs ~18 ns)
        q = ent_q[e]
        cnt, n_out = walk(q, j, 1, lo, ent_rec[e, B_HI], ent_rec[e, oth],
                                        ent_rec[e, oth + 1], keys, pays, b, dirn, tab, xseq,
                                        rec, mode, out_q, out_s, n_out)
        if cnt == OVERFLOW:
            return OVERFLOW
        if cnt > 0 and mode != PAIRS:  # emit, written out (see the module docstring)
            if not dedupe:
                if mode == COUNT:
                    acc[q] = cnt
                out_q[n_out] = q
                n_out += 1
            elif mark[q] != stamp:
                mark[q] = stamp
                acc[q] = cnt
                out_q[n_out] = q
                n_out += 1
            else:
                acc[q] += cnt
    return n_out


@kernel
def douter(tree: tuple, run: tuple, tab: tuple, sub: tuple, delta: int, b: float, v: float,
           dirn: int, xseq: int, own: int, oth: int, mode: int, stamp: int,
           out_q: np.ndarray, out_s: np.ndarray, n_out: int):
    """BJ-DOuter: every live partner probes an interval tree on the band ranges with its ``d``.

    The tree is a centred interval tree: node ``u`` keeps the ranges containing ``center[u]``
    sorted by ascending lo (I^l) and descending hi (I^r). A probe walks one root-to-leaf path,
    O(log n + output) per partner, O(m log n + k) per event (Theorem 2). A subscription is met
    once per partner, so IDENTIFY and COUNT always deduplicate with ``mark``.

    The walk is written out here, with the tree's descent rule (``interval_tree.descend``),
    rather than calling ``interval_tree.stab``: a probe costs ~5–8 ns per partner on the
    batch load test, and writing each partner's ids out to read them back made BJ-DOuter
    20–45 % slower (measured on that workload's tree and a denser one).

    Bundles (plain tuples, named back here): ``tree`` ``TreeArrays`` over gapped pools,
    ``run`` ``(keys, pays, samp)``, ``tab`` ``TableArrays``, ``sub`` ``SubArrays``.
    """
    t = TreeArrays(*tree)
    center, left, right, root = t.center, t.left, t.right, t.root
    lp = GappedPoolArrays(*t.lpool)
    rp = GappedPoolArrays(*t.rpool)
    kr = KeyRun(*run)
    keys, pays = kr.keys, kr.pays
    t_ = TableArrays(*tab)
    alive, dvals, dseqs = t_.alive, t_.values, t_.seqs
    s_ = SubArrays(*sub)
    rec, mark, acc = s_.rec, s_.mark, s_.acc
    n = keys.shape[0]
    for pos in range(n):
        s = slot_at(pays, n, pos, dirn)
        if not alive[s]:
            continue
        x = diff_at(keys, n, pos, b, dirn)
        sv = dvals[s]
        u = root
        while u >= 0:
            use_left, nxt = descend(center[u], left[u], right[u], x)
            for part in range(2):  # the node list's main run, then its delta run
                if use_left:
                    base = lp.start[u] if part == 0 else lp.start[u] + lp.cap[u] - delta
                    size = lp.size[u] if part == 0 else lp.dsize[u]
                else:
                    base = rp.start[u] if part == 0 else rp.start[u] + rp.cap[u] - delta
                    size = rp.size[u] if part == 0 else rp.dsize[u]
                for k in range(base, base + size):
                    if use_left:
                        if lp.keys[k] > x:
                            break
                        q = lp.ids[k]
                    else:
                        if -rp.keys[k] < x:
                            break
                        q = rp.ids[k]
                    if q < 0:
                        continue  # tombstone
                    if not (rec[q, own] <= v <= rec[q, own + 1]) or \
                            not (rec[q, oth] <= sv <= rec[q, oth + 1]):
                        continue
                    if mode == IDENTIFY:
                        if mark[q] != stamp:
                            mark[q] = stamp
                            out_q[n_out] = q
                            n_out += 1
                        continue
                    if not owed_rec(rec, q, s, xseq, dseqs):
                        continue
                    if mode == PAIRS:
                        if n_out == out_q.shape[0]:
                            return OVERFLOW
                        out_q[n_out] = q
                        out_s[n_out] = s
                        n_out += 1
                    elif mark[q] != stamp:  # emit, written out (see the module docstring)
                        mark[q] = stamp
                        acc[q] = 1
                        out_q[n_out] = q
                        n_out += 1
                    else:
                        acc[q] += 1
            u = nxt
    return n_out


# -- multi-event entry points (the batch path) ---------------------------------------------------


class SSIArrays(NamedTuple):
    """BJ-SSI's flat group arrays (``SSIGroups.arrays()``): group ids in increasing order of
    their points, the points, the I^l / I^r pools (``GappedPoolArrays`` fields; I^l keyed by
    lo with aux = hi, I^r keyed by −hi with aux = lo), and per group the members with an A/C
    selection and bounds of lo / hi."""

    gids: np.ndarray
    point: np.ndarray
    lstart: np.ndarray
    lsize: np.ndarray
    lcap: np.ndarray
    ldsize: np.ndarray
    lkeys: np.ndarray
    lids: np.ndarray
    laux: np.ndarray
    rstart: np.ndarray
    rsize: np.ndarray
    rcap: np.ndarray
    rdsize: np.ndarray
    rkeys: np.ndarray
    rids: np.ndarray
    raux: np.ndarray
    gsel: np.ndarray
    gminlo: np.ndarray
    gmaxhi: np.ndarray


class RangeArrays(NamedTuple):
    """BJ-MJ's entries (``RangeOrder.arrays()``): entry ``e`` is subscription ``ent_q[e]``,
    live iff ``ent_alive[e]``, with a copy of its record row in ``ent_rec[e]``."""

    ent_q: np.ndarray
    ent_alive: np.ndarray
    ent_rec: np.ndarray


@kernel(**NO_NRT)
def ssi_many(groups: tuple, main: tuple, cells: tuple, dlt: tuple, tab: tuple, sub: tuple,
             ev: tuple, order: np.ndarray, hints: np.ndarray, probe: tuple, opts: tuple,
             out: tuple, at: tuple):
    """BJ-SSI (§3.1.2) for the incoming tuples ``ev[order[e0:]]`` (an ``EventArrays`` bundle),
    one after the other, each over both runs ``main`` and ``dlt`` (``KeyRun`` bundles; the
    main run's occupancy bitmap is ``cells``, ``key_cells``' ``(words, params)``); ``probe``
    a :class:`~matcher.joins.protocol.Probe`, ``opts`` ``(clean, fast_count, delta, step)``,
    ``out``/``at`` the out-of-room protocol's bundles (``matcher.core``).

    Per stabbing group (``groups``, an :class:`SSIArrays` bundle; groups in increasing order
    of their point p), two neighbours of ``p + b`` decide who is affected: let s1/s2 be the
    live run entries just below/at-or-above p in ``d`` order. A range (which contains p) is
    affected iff ``lo <= d(s1)`` or ``hi >= d(s2)``: scan I^l (ascending lo) while
    ``lo <= d(s1)`` and I^r (descending hi, stored as ascending −hi) while ``hi >= d(s2)``; a
    range met by both scans is handled in the first. Each affected range's pairs are the
    consecutive run entries around p. O(τ log m + k) per tuple and run.

    * **Searches.** Each group's position is searched from a hint: :func:`diff_locate` over the
      main run's sample (hints are sample indexes), :func:`diff_gallop` in the unsampled delta run
      (hints are positions). With ``hints`` of shape ``(2, τ)`` every group keeps its result
      for the next tuple, and ``order`` visits the tuples by key (ascending for R, descending
      for S) so the next search is a short, cached step; with shape ``(2, 0)`` (one tuple)
      each group starts from the previous group's result.
    * **Skips.** ``gminlo[g]``/``gmaxhi[g]`` bound g's lowest lo / highest hi (never tighter than
      the truth), so a group nobody in which can be affected is skipped without touching its lists.
      In the main run, the occupancy bitmap ``cells`` (``key_cells``, built with the run) is read
      first: when it shows no key in the hull ``[b + min lo, b + max hi]`` (for S tuples
      ``[b − max hi, b − min lo]``), nobody in g can be affected by that run and the search is
      skipped (91 % of the searches on the batch load test). ``clean`` says the runs hold no deleted
      entry (no liveness check for the neighbours); ``fast_count`` (clean, and every pair owed: an
      insert) lets COUNT count an unselective subscription's pairs by two searches galloped from the
      neighbours instead of walking them; ``raux[k]`` is the lower bound of I^r's k-th range, so the
      dedupe needs no record read, and ``laux[k]`` the upper bound of I^l's; when no member of g has
      an A/C selection (``gsel[g] == 0``), IDENTIFY and COUNT read only the group's own sequential
      arrays, no subscription record.
    * **Output.** Each event takes the next ``stamp`` (its own dedupe generation) and its rows
      are tagged with its position in ``ev`` (so the caller sorts rows by event; not tagged
      when ``out_e`` is empty: the one-at-a-time path); ``out_x`` is the partner slot (PAIRS)
      or the pair count (COUNT). Stops before an event that might not fit — IDENTIFY/COUNT
      need ``room`` free rows; PAIRS is rerun from the event it overflowed in — and returns
      ``(next index into order, n_out, stamp)``, so the caller grows the buffers and calls
      again.

    One function with the event loop inside, its arrays bound once, compiled without numba's
    reference counting (``_nrt=False``: it allocates nothing; ``protocol``'s docstring): a
    compiled call per event and run (the earlier ``ssi``) cost ~0.6 µs, an inlined one
    ~0.3 µs, and the counted bindings left inside the loops ~30 % of the rest (1.36 →
    0.95 µs per event with ``_nrt=False``), all in reference counting
    (``docs/benchmarks/batch.md``). In COUNT, a count goes
    straight to its row when one run is searched; ``acc`` sums it over two runs, and is the
    result for the one-at-a-time caller (untagged rows).
    """
    n_ev = order.shape[0]
    dirn, own, oth, mode = Probe(*probe)
    clean, fast_count, delta, step = opts
    out_e, out_q, out_x = RowBuffers(*out)
    e0, n_out, stamp, room = At(*at)
    (gids, gpoint, lstart, lsize, lcap, ldsize, lkeys, lids, laux, rstart, rsize, rcap, rdsize,
     rkeys, rids, raux, gsel, gminlo, gmaxhi) = groups
    mkeys, mpays, msamp = main
    cwords, cparams = cells
    dkeys, dpays, dsamp = dlt
    alive, dvals, dseqs = tab
    rec, mark, acc = sub
    evkeys, evvals, evseqs = ev
    use_hint = hints.shape[1] > 0
    mhint = hints[0]
    dhint = hints[1]
    dedupe = mkeys.shape[0] > 0 and dkeys.shape[0] > 0
    tagged = out_e.shape[0] > 0
    for oi in range(e0, n_ev):
        e = order[oi]
        if mode != PAIRS and n_out + room > out_q.shape[0]:
            return oi, n_out, stamp
        stamp += 1
        n0 = n_out
        b = evkeys[e]
        v = evvals[e]
        xseq = evseqs[e]
        for r in range(2):
            keys = mkeys if r == 0 else dkeys
            pays = mpays if r == 0 else dpays
            samp = msamp if r == 0 else dsamp
            hint = mhint if r == 0 else dhint
            n = keys.shape[0]
            if n == 0:
                continue
            sampled = samp.shape[0] > 1
            i = 0
            h = 0
            for gi in range(gids.shape[0]):
                g = gids[gi]
                p = gpoint[g]
                if r == 0:  # the main run's bitmap may show no key in g's hull: skip g
                    glo, ghi = gminlo[g], gmaxhi[g]
                    if dirn > 0:
                        klo, khi = b + glo, b + ghi
                    else:
                        klo, khi = b - ghi, b - glo
                    if not may_hold(cwords, cparams, klo, khi, abs(b) + abs(glo) + abs(ghi)):
                        continue
                if sampled:  # hints are sample indexes
                    if use_hint:
                        h = hint[g]
                    i, h = diff_locate(keys, samp, step, b, dirn, p, h)
                    if use_hint:
                        hint[g] = h
                elif use_hint:  # hints are positions
                    i = diff_gallop(keys, samp, step, b, dirn, p, hint[g])
                    hint[g] = i
                else:
                    i = diff_gallop(keys, samp, step, b, dirn, p, i)  # groups come in increasing p
                j1 = i - 1
                j2 = i
                if not clean:  # the run holds deleted entries: the neighbours must be live ones
                    while j1 >= 0 and not alive[slot_at(pays, n, j1, dirn)]:
                        j1 -= 1
                    while j2 < n and not alive[slot_at(pays, n, j2, dirn)]:
                        j2 += 1
                d1 = diff_at(keys, n, j1, b, dirn) if j1 >= 0 else -np.inf
                d2 = diff_at(keys, n, j2, b, dirn) if j2 < n else np.inf
                left = j1 >= 0 and gminlo[g] <= d1  # (a band may reach −inf / +inf)
                right = j2 < n and gmaxhi[g] >= d2
                if not (left or right):
                    continue  # no live key in [b + min lo, b + max hi]: nobody in g is affected
                nosel = gsel[g] == 0  # no member has an A/C selection: no record read
                plain = mode == IDENTIFY and nosel
                for part in range(4):  # I^l main, I^l delta, I^r main, I^r delta (gapped_pool)
                    side = part >> 1
                    if side == 0:
                        if not left:
                            continue
                        if part == 0:
                            base, size = lstart[g], lsize[g]
                        else:
                            base, size = lstart[g] + lcap[g] - delta, ldsize[g]
                    else:
                        if not right:
                            continue
                        if part == 2:
                            base, size = rstart[g], rsize[g]
                        else:
                            base, size = rstart[g] + rcap[g] - delta, rdsize[g]
                    for k in range(base, base + size):
                        if side == 0:
                            qlo = lkeys[k]
                            if qlo > d1:
                                break
                            q = lids[k]
                            if q < 0:
                                continue  # tombstone
                            qhi = laux[k]
                        else:
                            qhi = -rkeys[k]
                            if qhi < d2:
                                break
                            q = rids[k]
                            qlo = raux[k]
                            if q < 0 or (j1 >= 0 and qlo <= d1):
                                continue  # tombstone, or already met in the I^l scan
                        if plain:
                            if dedupe:
                                if mark[q] == stamp:
                                    continue
                                mark[q] = stamp
                            out_q[n_out] = q
                            n_out += 1
                            continue
                        if nosel:
                            olo, ohi = -np.inf, np.inf
                        else:
                            if not (rec[q, own] <= v <= rec[q, own + 1]):
                                continue
                            olo, ohi = rec[q, oth], rec[q, oth + 1]
                        cnt = 0
                        if mode == IDENTIFY and olo == -np.inf and ohi == np.inf:
                            cnt = 1  # affected (the scan's test), no partner to check
                        elif mode == COUNT and fast_count and olo == -np.inf and ohi == np.inf:
                            # every position is live and every pair owed: q's pairs are the
                            # positions [diff_lower_bound(lo), j1] and [j2, first d > hi) — count
                            # them, don't walk (a few positions each for a narrow band:
                            # galloped from j1 / j2, not searched over the whole run)
                            if j1 >= 0 and qlo <= d1:
                                cnt += j1 + 1 - diff_gallop_back(keys, b, dirn, qlo, j1)
                            if j2 < n and qhi >= d2:
                                cnt += diff_gallop(keys, samp, step, b, dirn,
                                              np.nextafter(qhi, np.inf), j2 + 1) - j2
                        else:
                            if j1 >= 0:
                                c1, n_out = walk(q, j1, -1, qlo, np.inf, olo, ohi, keys, pays,
                                                 b, dirn, tab, xseq, rec, mode, out_q, out_x,
                                                 n_out)
                                if c1 == OVERFLOW:
                                    return oi, n0, stamp
                                cnt += c1
                            if j2 < n and not (mode == IDENTIFY and cnt > 0):
                                c2, n_out = walk(q, j2, 1, -np.inf, qhi, olo, ohi, keys, pays,
                                                 b, dirn, tab, xseq, rec, mode, out_q, out_x,
                                                 n_out)
                                if c2 == OVERFLOW:
                                    return oi, n0, stamp
                                cnt += c2
                        if cnt > 0 and mode != PAIRS:  # emit, written out (module docstring)
                            if not dedupe:
                                if mode == COUNT:
                                    if tagged:  # the count goes straight to its row
                                        out_x[n_out] = cnt
                                    else:
                                        acc[q] = cnt
                                out_q[n_out] = q
                                n_out += 1
                            elif mark[q] != stamp:
                                mark[q] = stamp
                                acc[q] = cnt
                                out_q[n_out] = q
                                n_out += 1
                            else:
                                acc[q] += cnt
        if tagged:
            for k in range(n0, n_out):
                out_e[k] = e
                if mode == COUNT and dedupe:  # counts summed over both runs in acc
                    out_x[k] = acc[out_q[k]]
    return n_ev, n_out, stamp


@kernel
def qouter_many(qids: np.ndarray, main: tuple, dlt: tuple, tab: tuple, sub: tuple, ev: tuple,
                probe: tuple, step: int, out: tuple, at: tuple):
    """:func:`qouter` for the incoming tuples ``ev[e0:]``; conventions of :func:`ssi_many`."""
    dirn, own, oth, mode = Probe(*probe)
    out_e, out_q, out_x = RowBuffers(*out)
    e0, n_out, stamp, room = At(*at)
    evs = EventArrays(*ev)
    n_ev = evs.keys.shape[0]
    kmain, kdlt = KeyRun(*main), KeyRun(*dlt)
    acc = SubArrays(*sub).acc
    dedupe = kmain.keys.shape[0] > 0 and kdlt.keys.shape[0] > 0
    for e in range(e0, n_ev):
        if mode != PAIRS and n_out + room > out_q.shape[0]:
            return e, n_out, stamp
        stamp += 1
        n0 = n_out
        for r in range(2):
            if (kmain if r == 0 else kdlt).keys.shape[0] == 0:
                continue
            n_out = qouter(qids, main if r == 0 else dlt, tab, sub, step, evs.keys[e],
                           evs.values[e], dirn, evs.seqs[e], own, oth, mode, dedupe, stamp,
                           out_q, out_x, n_out)
            if n_out == OVERFLOW:
                return e, n0, stamp
        rows_of_event(e, n0, n_out, mode, acc, out_e, out_q, out_x)
    return n_ev, n_out, stamp


@kernel
def merge_join_many(ranges: tuple, ents: tuple, main: tuple, dlt: tuple, tab: tuple,
                    sub: tuple, ev: tuple, probe: tuple, out: tuple, at: tuple):
    """:func:`merge_join` (BJ-MJ) for the incoming tuples ``ev[e0:]``, over both runs of the
    range order (``ranges = (ik1, ip1, ik2, ip2)``: keys and ids of each) and both runs of the
    table, as one at a time (``band.run_merge_join``); conventions of :func:`ssi_many`."""
    ik1, ip1, ik2, ip2 = ranges
    dirn, own, oth, mode = Probe(*probe)
    out_e, out_q, out_x = RowBuffers(*out)
    e0, n_out, stamp, room = At(*at)
    evs = EventArrays(*ev)
    n_ev = evs.keys.shape[0]
    kmain, kdlt = KeyRun(*main), KeyRun(*dlt)
    acc = SubArrays(*sub).acc
    dedupe = (kmain.keys.shape[0] > 0 and kdlt.keys.shape[0] > 0) or ik2.shape[0] > 0
    for e in range(e0, n_ev):
        if mode != PAIRS and n_out + room > out_q.shape[0]:
            return e, n_out, stamp
        stamp += 1
        n0 = n_out
        for part in range(2):
            ikeys, ipays = (ik1, ip1) if part == 0 else (ik2, ip2)
            if ikeys.shape[0] == 0:
                continue
            for r in range(2):
                if (kmain if r == 0 else kdlt).keys.shape[0] == 0:
                    continue
                n_out = merge_join(ikeys, ipays, ents, main if r == 0 else dlt, tab, sub,
                                   evs.keys[e], evs.values[e], dirn, evs.seqs[e], own, oth,
                                   mode, dedupe, stamp, out_q, out_x, n_out)
                if n_out == OVERFLOW:
                    return e, n0, stamp
        rows_of_event(e, n0, n_out, mode, acc, out_e, out_q, out_x)
    return n_ev, n_out, stamp


@kernel
def douter_many(tree: tuple, main: tuple, dlt: tuple, tab: tuple, sub: tuple, ev: tuple,
                probe: tuple, delta: int, out: tuple, at: tuple):
    """:func:`douter` (BJ-DOuter) for the incoming tuples ``ev[e0:]``, over both runs of the
    table; conventions of :func:`ssi_many`."""
    dirn, own, oth, mode = Probe(*probe)
    out_e, out_q, out_x = RowBuffers(*out)
    e0, n_out, stamp, room = At(*at)
    evs = EventArrays(*ev)
    n_ev = evs.keys.shape[0]
    kmain, kdlt = KeyRun(*main), KeyRun(*dlt)
    acc = SubArrays(*sub).acc
    for e in range(e0, n_ev):
        if mode != PAIRS and n_out + room > out_q.shape[0]:
            return e, n_out, stamp
        stamp += 1
        n0 = n_out
        for r in range(2):
            if (kmain if r == 0 else kdlt).keys.shape[0] == 0:
                continue
            n_out = douter(tree, main if r == 0 else dlt, tab, sub, delta, evs.keys[e],
                           evs.values[e], dirn, evs.seqs[e], own, oth, mode, stamp, out_q,
                           out_x, n_out)
            if n_out == OVERFLOW:
                return e, n0, stamp
        rows_of_event(e, n0, n_out, mode, acc, out_e, out_q, out_x)
    return n_ev, n_out, stamp
