"""numba kernels of the select-join strategies of paper 004 §3.2 and §4.1.

A select join q holds pair (r, s) iff ``r.key == s.key``, ``r.value ∈ A_q`` and ``s.value ∈ C_q``.
Every kernel processes one incoming tuple ``x`` (value ``v``) against the *substructure* of its join
key in the other side's :class:`~matcher.structures.key_index.KeyIndex`: the partners of key b
sorted by value, ``pv[base : base + size]`` with their slots ``ps[…]`` (the B-tree on ``S(B, C)`` of
§3.2.1). The result of q for x is therefore one contiguous run of that substructure, the positions
whose value lies in q's *other* range.

Conventions are those of :mod:`matcher.joins.band_kernels`, with the shared helpers of
:mod:`matcher.core` (``lower_bound``/``upper_bound``, ``owed``, ``owed_rec``, ``record``,
``put``, ``rows_of_event``, ``OVERFLOW``):

* A subscription is its 64-byte row ``rec[q]`` (``SubscriptionColumns.rec``: ``A_LO, A_HI,
  C_LO, C_HI, REG, SNAP`` columns), so touching q misses the cache once. ``own`` is the column
  of the selection on ``x`` itself (``A_LO`` for an R tuple, ``C_LO`` for an S tuple) and
  ``6 − own`` that of the selection on the partner.
* ``mode`` IDENTIFY appends each affected subscription once (no ``owed`` filter, as for bands),
  COUNT appends it once with its owed pair count in ``acc[q]``, PAIRS appends ``(q, slot)`` per
  owed pair. Each strategy meets every subscription at most once per tuple, so SJ-SelectFirst,
  SJ-Vanilla and SJ-SSI need no ``mark`` dedupe; they never grow the output buffers either:
  the caller reserves room for every subscription of the index (IDENTIFY/COUNT), and PAIRS
  returns ``OVERFLOW`` when full (``MatchBuffer.run`` grows and reruns: PAIRS has no side
  effects). They return ``n_out`` only — no array crosses a call (no reference counting per
  call), and the hot loops read flat arrays sequentially. SJ-JoinFirst meets a subscription
  once per partner and dedupes by ``mark``; it follows the same protocol (``core.record``
  into reserved room, ``core.put`` in PAIRS).
* The batch kernels (``*_many``) take ``how = (own, mode)`` and the out-of-room protocol's
  ``out``/``at`` bundles (``matcher.core``), and return ``(next event, n_out, stamp)``.
* SJ-JoinFirst's R-tree is a :class:`~matcher.structures.rect_index.BoxForest` passed as its
  flat arrays ``F`` (:func:`~matcher.structures.rect_index.forest_arrays`), boxes (A, C) for
  both directions.
"""

from __future__ import annotations

import numpy as np

from hotjoin.matcher.config import INLINE, kernel
from hotjoin.matcher.core import (
    lower_bound,
    owed,
    owed_rec,
    put,
    record,
    rows_of_event,
    upper_bound,
)
from hotjoin.matcher.joins.protocol import (
    A_LO,
    C_LO,
    COUNT,
    IDENTIFY,
    OVERFLOW,
    PAIRS,
    REG,
    SNAP,
    At,
    PartnerRun,
    RowBuffers,
    SubArrays,
    TableArrays,
)
from hotjoin.matcher.structures.group_pool import PoolArrays
from hotjoin.matcher.structures.interval_tree import TreeArrays, descend, stab, stab_bound
from hotjoin.matcher.structures.partner_buckets import (
    BucketTable,
    PartnerBuckets,
    bucket,
    build,
    lower,
    upper,
)
from hotjoin.matcher.structures.rect_index import stab_group
from hotjoin.matcher.structures.scan_runs import ScanArrays, ScanScratch

__all__ = ["A_LO", "COUNT", "C_LO", "IDENTIFY", "OVERFLOW", "PAIRS", "sj_join_first",
           "sj_own_scan", "sj_own_scan_many", "sj_scan", "sj_scan_many", "sj_select_first",
           "sj_select_first_many", "sj_vanilla", "sj_vanilla_many"]


@kernel(**INLINE)
def run_out(q: int, a: int, b: int, ps: np.ndarray, rec: np.ndarray, dseqs: np.ndarray,
            xseq: int, mode: int, acc: np.ndarray, out_q: np.ndarray, out_s: np.ndarray,
            n_out: int) -> int:
    """Output of q whose result pairs are the partners at positions ``[a, b)``; new ``n_out``.

    IDENTIFY: q once if the run is not empty. COUNT: q once with its owed pairs in ``acc[q]``.
    PAIRS: ``(q, slot)`` per owed pair, or ``OVERFLOW`` when the buffers are full.
    """
    if a >= b:
        return n_out
    if mode == IDENTIFY:
        out_q[n_out] = q
        return n_out + 1
    cnt = 0
    cap = out_q.shape[0]
    for i in range(a, b):
        s = ps[i]
        if owed_rec(rec, q, s, xseq, dseqs):
            cnt += 1
            if mode == PAIRS:
                if n_out == cap:
                    return OVERFLOW
                out_q[n_out] = q
                out_s[n_out] = s
                n_out += 1
    if mode == COUNT and cnt > 0:
        acc[q] = cnt
        out_q[n_out] = q
        n_out += 1
    return n_out


@kernel
def sj_vanilla(qids: np.ndarray, pv: np.ndarray, ps: np.ndarray, base: int, size: int,
               v: float, rec: np.ndarray, own: int, dseqs: np.ndarray, xseq: int, mode: int,
               acc: np.ndarray, out_q: np.ndarray, out_s: np.ndarray, n_out: int) -> int:
    """SJ-Vanilla (§4.1): every subscription probes the key's substructure. O(n log m' + k).

    Positional arrays: with the partner run, table and subscription bundles the call costs
    ~0.4 µs more, and SJ-Vanilla was 5–6 % slower on the small points of ``hotjoin bench
    select --quick`` (Fig. 7–9; ``docs/benchmarks/engine.md``).
    """
    oth = A_LO + C_LO - own
    for i in range(qids.shape[0]):
        q = qids[i]
        if not (rec[q, own] <= v <= rec[q, own + 1]):
            continue
        a = lower_bound(pv, base, base + size, rec[q, oth])
        b = upper_bound(pv, base, base + size, rec[q, oth + 1])
        n_out = run_out(q, a, b, ps, rec, dseqs, xseq, mode, acc, out_q, out_s, n_out)
        if n_out < 0:
            return OVERFLOW
    return n_out


@kernel
def sj_select_first(tree: tuple, run: tuple, tab: tuple, sub: tuple, v: float, own: int,
                    xseq: int, mode: int, out_q: np.ndarray, out_s: np.ndarray,
                    n_out: int) -> int:
    """SJ-SelectFirst, improved (§4.1): stab an interval tree on the own ranges with ``v``, then
    each of the n' selected subscriptions searches the key's substructure. O(log n + n' log m' + k).

    The walk follows the tree's own descent rule (``interval_tree.descend``) with each hit's
    searches fused into it: writing the hits out first (``interval_tree.stab``, then
    :func:`_selected`) measured 11–19 % slower on Table I one tuple at a time (14.7k against
    17.8k tuples/s at k = 5), the ids written and read back plus an output sized per tuple.
    Bundles (plain tuples, named back here): ``tree`` ``TreeArrays`` over ``PoolArrays``
    (``IntervalTree.arrays()``), ``run`` ``PartnerRun``, ``tab`` ``TableArrays``, ``sub``
    ``SubArrays``.
    """
    t = TreeArrays(*tree)
    center, left, right = t.center, t.left, t.right
    lp, rp = PoolArrays(*t.lpool), PoolArrays(*t.rpool)
    lstart, lsize, lkeys, lids = lp.start, lp.size, lp.keys, lp.ids
    rstart, rsize, rkeys, rids = rp.start, rp.size, rp.keys, rp.ids
    pv, ps, base, size = PartnerRun(*run)
    dseqs = TableArrays(*tab).seqs
    s_ = SubArrays(*sub)
    rec, acc = s_.rec, s_.acc
    oth = A_LO + C_LO - own
    end = base + size
    u = t.root
    while u >= 0:
        use_left, nxt = descend(center[u], left[u], right[u], v)
        bs = lstart[u] if use_left else rstart[u]
        sz = lsize[u] if use_left else rsize[u]
        for k in range(bs, bs + sz):
            if use_left:
                if lkeys[k] > v:
                    break
                q = lids[k]
            else:
                if -rkeys[k] < v:
                    break
                q = rids[k]
            a = lower_bound(pv, base, end, rec[q, oth])
            b = upper_bound(pv, base, end, rec[q, oth + 1])
            n_out = run_out(q, a, b, ps, rec, dseqs, xseq, mode, acc, out_q, out_s, n_out)
            if n_out < 0:
                return OVERFLOW
        u = nxt
    return n_out


@kernel
def _selected(hits: np.ndarray, nh: int, run: tuple, tab: tuple, sub: tuple, own: int,
              xseq: int, mode: int, out_q: np.ndarray, out_s: np.ndarray, n_out: int) -> int:
    """SJ-SelectFirst's second step for the subscriptions ``hits[:nh]`` (their own range holds
    the tuple's value): each one's partners are the positions of its other range in the key's
    substructure, two searches. Returns ``n_out``, or ``OVERFLOW`` (PAIRS, buffers full)."""
    pv, ps, base, size = PartnerRun(*run)
    dseqs = TableArrays(*tab).seqs
    s_ = SubArrays(*sub)
    rec, acc = s_.rec, s_.acc
    oth = A_LO + C_LO - own
    end = base + size
    for i in range(nh):
        q = hits[i]
        a = lower_bound(pv, base, end, rec[q, oth])
        b = upper_bound(pv, base, end, rec[q, oth + 1])
        n_out = run_out(q, a, b, ps, rec, dseqs, xseq, mode, acc, out_q, out_s, n_out)
        if n_out < 0:
            return OVERFLOW
    return n_out


@kernel
def sj_join_first(F: tuple, run: tuple, tab: tuple, sub: tuple, reg: np.ndarray,
                  snap: np.ndarray, v: float, dirn: int, xseq: int, mode: int,
                  stack: np.ndarray, stamp: int, out_q: np.ndarray, out_s: np.ndarray,
                  n_out: int, hits: np.ndarray):
    """SJ-JoinFirst (§3.2.1): each of the m' joining partners probes the R-tree on (A, C) with
    the join result point (r.A, s.C); each hit is one result pair. O(log m + m' g(n) + k).

    Bundles (plain tuples, named back here): ``F`` the forest's ``forest_arrays``, ``run``
    ``PartnerRun``, ``tab`` ``TableArrays``, ``sub`` ``SubArrays``. The owed test reads the
    compact ``reg``/``snap`` columns, not the record rows: a hit is a random q, and the rows
    (8× larger) made COUNT 13 % and PAIRS 9 % slower on Table I. Returns ``(n_out, hits)``
    (the R-tree's hit buffer, grown by its query); ``n_out`` is ``OVERFLOW`` when PAIRS rows
    do not fit (``MatchBuffer.run_fresh``).
    """
    pv, ps, base, size = PartnerRun(*run)
    dseqs = TableArrays(*tab).seqs
    s_ = SubArrays(*sub)
    mark, acc = s_.mark, s_.acc
    pt = np.empty(2, dtype=np.float64)
    for i in range(base, base + size):
        s = ps[i]
        if dirn > 0:
            pt[0], pt[1] = v, pv[i]
        else:
            pt[0], pt[1] = pv[i], v
        hits, nh = stab_group(F, 0, pt, stack, hits)
        for j in range(nh):
            q = hits[j]
            if mode == IDENTIFY:
                if mark[q] != stamp:
                    n_out = record(q, 1, mode, mark, stamp, acc, out_q, out_s, n_out)
            elif owed(q, s, xseq, dseqs, reg, snap):
                if mode == PAIRS:
                    n_out = put(out_q, out_s, n_out, q, s)
                    if n_out == OVERFLOW:
                        return OVERFLOW, hits
                else:
                    n_out = record(q, 1, mode, mark, stamp, acc, out_q, out_s, n_out)
    return n_out, hits


@kernel
def sj_join_first_many(F: tuple, pv: np.ndarray, ps: np.ndarray, tab: tuple, sub: tuple,
                       reg: np.ndarray, snap: np.ndarray, ev: tuple, dirn: int, mode: int,
                       stack: np.ndarray, out: tuple, at: tuple, hits: np.ndarray):
    """:func:`sj_join_first` (SJ-JoinFirst) for every event of ``ev`` from ``e0``
    (``KeyedEvents.select_tuple()``); returns ``(next event, n_out, stamp, hits)``."""
    pos, base, size, values, seqs = ev
    out_e, out_q, out_x = RowBuffers(*out)
    e0, n_out, stamp, room = At(*at)
    acc = SubArrays(*sub).acc
    for k in range(e0, pos.shape[0]):
        if mode != PAIRS and n_out + room > out_q.shape[0]:
            return k, n_out, stamp, hits
        stamp += 1
        n1, hits = sj_join_first(F, (pv, ps, base[k], size[k]), tab, sub, reg, snap, values[k],
                                 dirn, seqs[k], mode, stack, stamp, out_q, out_x, n_out, hits)
        if n1 == OVERFLOW:
            return k, n_out, stamp, hits
        rows_of_event(pos[k], n_out, n1, mode, acc, out_e, out_q, out_x)
        n_out = n1
    return pos.shape[0], n_out, stamp, hits


@kernel(**INLINE)
def _pair_count(q: int, a: int, b: int, ps: np.ndarray, rec: np.ndarray, dseqs: np.ndarray,
                xseq: int) -> int:
    """Owed pairs of q among the partners at ``[a, b)``: ``b − a`` when q registered before
    ``xseq`` or with snapshot (every pair is owed: ``core.owed_rec``), else one test per pair."""
    if rec[q, SNAP] != 0.0 or rec[q, REG] < xseq:
        return b - a
    cnt = 0
    for i in range(a, b):
        cnt += owed_rec(rec, q, ps[i], xseq, dseqs)
    return cnt


@kernel
def sj_scan(gids: np.ndarray, gpoint: np.ndarray, runs: tuple, cand: np.ndarray,
            clo: np.ndarray, chi: np.ndarray, reg_max: float, pv: np.ndarray, ps: np.ndarray,
            base: int, size: int, v: float, rec: np.ndarray, own: int, dseqs: np.ndarray,
            xseq: int, mode: int, acc: np.ndarray, out_q: np.ndarray, out_s: np.ndarray,
            n_out: int) -> int:
    """SJ-SSI (§3.2.2) over :class:`~matcher.structures.scan_runs.ScanRuns` (groups ``gids``,
    points ``gpoint``).

    Per group with point p, x1 < p <= x2 are the partners nearest p; a member holds a partner
    iff ``olo <= x1`` (a prefix of the run sorted by ``olo``) or ``ohi >= x2`` (a prefix of the
    run sorted by ``ohi`` descending, minus those with ``olo <= x1``, already reported). Both
    prefixes are scanned branch-free: the candidate's id is always written and the cursor moves
    by the own-range test. Then the delta is tested against the record rows.
    O(τ log m' + candidates + k).

    IDENTIFY writes the ids into ``out_q`` (the caller reserved a slot per member). COUNT and
    PAIRS also copy each candidate's other range into ``clo``/``chi`` (scan order: no fetch by
    id) and then find its partners with two binary searches over the key's sorted values; COUNT
    is ``b − a`` when every member registered before the tuple (``reg_max < xseq``: every pair
    is owed), else one registration test per pair. PAIRS collects the ids in ``cand`` first.

    ``runs`` is a bundle (``ScanRuns.arrays()``, named back as ``ScanArrays``); the rest stays
    positional: this is a per-event kernel of a few µs on small workloads (``hotjoin bench
    select --quick``: ~5 µs per tuple), and the partner run, table, subscription and scratch
    bundles cost ~0.6 µs more per call (Python-side tuples and numba's typing of nested tuples):
    SJ-SSI, SJ-Hotspot and auto 7–15 % slower there (``docs/benchmarks/engine.md``).
    """
    (gstart, gcount, l_key, l_wlo, l_whi, l_q, r_key, r_olo, r_wlo, r_whi, r_q, dstart, dsize,
     dids, l_ohi) = ScanArrays(*runs)
    oth = A_LO + C_LO - own
    end = base + size
    dst = cand if mode == PAIRS else out_q
    n0 = 0 if mode == PAIRS else n_out
    n = n0
    bounds = mode != IDENTIFY
    for gi in range(gids.shape[0]):
        g = gids[gi]
        i = lower_bound(pv, base, end, gpoint[g])
        have1 = i > base
        x1 = pv[i - 1] if have1 else -np.inf
        s = gstart[g]
        e = s + gcount[g]
        if have1:
            k = s
            if bounds:
                while k < e and l_key[k] <= x1:
                    dst[n] = l_q[k]
                    clo[n - n0] = l_key[k]
                    chi[n - n0] = l_ohi[k]
                    n += (l_wlo[k] <= v) & (v <= l_whi[k])
                    k += 1
            else:
                while k < e and l_key[k] <= x1:
                    dst[n] = l_q[k]
                    n += (l_wlo[k] <= v) & (v <= l_whi[k])
                    k += 1
        if i < end:
            x2 = pv[i]
            fresh = not have1
            k = s
            if bounds:
                while k < e and r_key[k] >= x2:
                    dst[n] = r_q[k]
                    clo[n - n0] = r_olo[k]
                    chi[n - n0] = r_key[k]
                    n += (r_wlo[k] <= v) & (v <= r_whi[k]) & (fresh | (r_olo[k] > x1))
                    k += 1
            else:
                while k < e and r_key[k] >= x2:
                    dst[n] = r_q[k]
                    n += (r_wlo[k] <= v) & (v <= r_whi[k]) & (fresh | (r_olo[k] > x1))
                    k += 1
        else:
            x2 = np.inf  # no partner at or above p: only ``olo <= x1`` can hold one
        for k in range(dstart[g], dstart[g] + dsize[g]):
            q = dids[k]
            dst[n] = q
            clo[n - n0] = rec[q, oth]
            chi[n - n0] = rec[q, oth + 1]
            n += ((rec[q, own] <= v) & (v <= rec[q, own + 1])
                  & ((have1 & (rec[q, oth] <= x1)) | ((i < end) & (rec[q, oth + 1] >= x2))))
    if mode == IDENTIFY:
        return n
    if mode == COUNT:
        all_owed = reg_max < xseq
        w = n0
        for j in range(n0, n):
            q = out_q[j]
            a = lower_bound(pv, base, end, clo[j - n0])
            b = upper_bound(pv, base, end, chi[j - n0])
            cnt = b - a if all_owed else _pair_count(q, a, b, ps, rec, dseqs, xseq)
            if cnt > 0:
                acc[q] = cnt
                out_q[w] = q
                w += 1
        return w
    for j in range(n):
        q = cand[j]
        a = lower_bound(pv, base, end, clo[j])
        b = upper_bound(pv, base, end, chi[j])
        n_out = run_out(q, a, b, ps, rec, dseqs, xseq, mode, acc, out_q, out_s, n_out)
        if n_out < 0:
            return OVERFLOW
    return n_out


@kernel
def _exact_hit(pv: np.ndarray, end: int, table: tuple, lo: float, hi: float) -> bool:
    """Whether some partner lies in ``[lo, hi]``, exactly (a mixed bucket's walk): the slow
    path of the scan, a separate function so the hot loop stays free of inner loops.
    ``table``: the probe's bucket table (``partner_buckets.BucketTable``)."""
    low, first, mult, nb, scale, pmin = BucketTable(*table)
    j = lower(pv, end, low, first, mult, nb, scale, pmin, lo)
    return j < end and pv[j] <= hi


@kernel
def _exact_count(pv: np.ndarray, end: int, table: tuple, lo: float, hi: float) -> int:
    """The number of partners in ``[lo, hi]``, exactly (the COUNT pass's slow path)."""
    low, first, mult, nb, scale, pmin = BucketTable(*table)
    return (upper(pv, end, low, first, mult, nb, scale, pmin, hi)
            - lower(pv, end, low, first, mult, nb, scale, pmin, lo))


@kernel
def sj_own_scan(gids: np.ndarray, gpoint: np.ndarray, runs: tuple, scratch: tuple,
                side: tuple, buckets: tuple, reg_max: float, run: tuple, tab: tuple, sub: tuple,
                v: float, own: int, xseq: int, mode: int, out_q: np.ndarray, out_s: np.ndarray,
                n_out: int) -> int:
    """SJ-SelectFirst (§3.2.1, §4.1) over stabbing groups of the *own* ranges, scan-ordered
    (:class:`~matcher.structures.scan_runs.ScanRuns` with own and other swapped: ``l_key`` = own
    lower ends, the copied bounds ``l_wlo``/``l_whi`` and ``r_wlo``/``r_whi`` = other bounds,
    ``r_key`` = own upper ends descending).

    Every member of a group (point p) contains p, so for ``v <= p`` the members whose own range
    holds v are the prefix ``own_lo <= v`` of the run sorted by ``own_lo``, and for ``v > p`` the
    prefix ``own_hi >= v`` of the run sorted by ``own_hi`` descending: the scan visits exactly the
    n′ selected subscriptions. Each one's join test "some partner in ``[olo, ohi]``" is
    ``next_partner(olo) <= ohi`` over the key's bucket table
    (:mod:`matcher.structures.partner_buckets`): two loads and a conditional move, no
    data-dependent branch; the output cursor moves by the test's truth value. A candidate in a
    mixed bucket (~1–3 %; also a tombstone's emptied range) is set aside in ``side`` (ids and other
    bounds, room for every member) and tested exactly after the scan. The delta is tested against
    the record rows. O(τ_own + m′ + n′ + k) per tuple.

    Outputs as :func:`sj_scan`: IDENTIFY ids into ``out_q``; COUNT ids with ``acc[q]`` pair
    counts from two bucket lookups (exact walks only for mixed buckets, and per-pair
    registration tests only when a member registered after the tuple); PAIRS ``(q, slot)`` per
    owed pair. The rare cases call non-inlined functions: a loop inside the hot loop's body,
    even behind a branch never taken, made the scan ~4x slower here.

    Bundles (plain tuples, named back here): ``runs`` ``ScanArrays``, ``scratch``
    ``ScanScratch``, ``buckets`` the per-probe ``PartnerBuckets`` scratch, ``run``
    ``PartnerRun``, ``tab`` ``TableArrays``, ``sub`` ``SubArrays``.
    """
    r_ = ScanArrays(*runs)
    gstart, gcount, l_key, l_q = r_.gstart, r_.gcount, r_.l_key, r_.l_q
    r_key, r_q, dstart, dsize, dids = r_.r_key, r_.r_q, r_.dstart, r_.dsize, r_.dids
    l_olo, l_ohi, r_olo, r_ohi = r_.l_wlo, r_.l_whi, r_.r_wlo, r_.r_whi  # the other range
    cand, clo, chi = ScanScratch(*scratch)
    bk = PartnerBuckets(*buckets)
    pv, ps, base, size = PartnerRun(*run)
    dseqs = TableArrays(*tab).seqs
    s_ = SubArrays(*sub)
    rec, acc = s_.rec, s_.acc
    oth = A_LO + C_LO - own
    end = base + size
    nb, scale, pmin = build(pv, base, size, bk)
    low, nxt, first, mult = bk.low, bk.nxt, bk.first, bk.mult
    dst = cand if mode == PAIRS else out_q
    n0 = 0 if mode == PAIRS else n_out
    bounds = mode != IDENTIFY
    n = n0
    ns = 0
    side_q, side_lo, side_hi = side
    for gi in range(gids.shape[0]):
        g = gids[gi]
        s = gstart[g]
        e = s + gcount[g]
        # the two prefix loops are written out on purpose: one inline helper taking the
        # direction as a flag measured 12 % slower on Table I (23.6k against 26.8k tuples/s)
        if v <= gpoint[g]:
            k = s
            while k < e and l_key[k] <= v:
                lo = l_olo[k]
                hi = l_ohi[k]
                q = l_q[k]
                dst[n] = q
                if bounds:
                    clo[n - n0] = lo
                    chi[n - n0] = hi
                b = bucket(lo, pmin, scale, nb)
                lp = low[b]
                nx = nxt[b]
                r = lp if lp >= lo else nx  # next_partner(lo): NaN in a mixed bucket
                n += r <= hi  # +inf (no partner at or above lo) > hi (finite: scan_runs)
                if r != r:  # rare (~1–3 %), predictable: set aside for the exact test
                    side_q[ns] = q
                    side_lo[ns] = lo
                    side_hi[ns] = hi
                    ns += 1
                k += 1
        else:
            k = s
            while k < e and r_key[k] >= v:
                lo = r_olo[k]
                hi = r_ohi[k]
                q = r_q[k]
                dst[n] = q
                if bounds:
                    clo[n - n0] = lo
                    chi[n - n0] = hi
                b = bucket(lo, pmin, scale, nb)
                lp = low[b]
                nx = nxt[b]
                r = lp if lp >= lo else nx  # next_partner(lo): NaN in a mixed bucket
                n += r <= hi  # +inf (no partner at or above lo) > hi (finite: scan_runs)
                if r != r:  # rare (~1–3 %), predictable: set aside for the exact test
                    side_q[ns] = q
                    side_lo[ns] = lo
                    side_hi[ns] = hi
                    ns += 1
                k += 1
    for gi in range(gids.shape[0]):  # the deltas (kept out of the scan loop: it runs faster)
        g = gids[gi]
        for k in range(dstart[g], dstart[g] + dsize[g]):
            q = dids[k]
            if rec[q, own] <= v <= rec[q, own + 1]:
                side_q[ns] = q
                side_lo[ns] = rec[q, oth]
                side_hi[ns] = rec[q, oth + 1]
                ns += 1
    # the bucket table as one bundle for the exact paths, built once: a tuple of arrays built
    # per call counts a reference per array and call (11-19 % of Table I's probe, k = 5)
    table = (low, first, mult, nb, scale, pmin)
    for t in range(ns):  # mixed buckets' candidates (and tombstones, q = -1), deltas: exactly
        q = side_q[t]
        lo = side_lo[t]
        hi = side_hi[t]
        if q >= 0 and _exact_hit(pv, end, table, lo, hi):
            dst[n] = q
            if bounds:
                clo[n - n0] = lo
                chi[n - n0] = hi
            n += 1
    if mode == IDENTIFY:
        return n
    if mode == COUNT:
        if reg_max >= xseq:  # a member registered after the tuple: per-pair tests (deletes)
            w = n0
            for j in range(n0, n):
                q = out_q[j]
                a = lower(pv, end, low, first, mult, nb, scale, pmin, clo[j - n0])
                b = upper(pv, end, low, first, mult, nb, scale, pmin, chi[j - n0])
                cnt = _pair_count(q, a, b, ps, rec, dseqs, xseq)
                if cnt > 0:
                    acc[q] = cnt
                    out_q[w] = q
                    w += 1
            return w
        # every pair is owed: count = upper(ohi) - lower(olo) from the bucket table, branch-free
        # but for a mixed bucket (rare: its walk runs in a function of its own)
        w = n0
        ns = 0
        for j in range(n0, n):
            q = out_q[j]
            x = clo[j - n0]
            y = chi[j - n0]
            kl = bucket(x, pmin, scale, nb)
            kh = bucket(y, pmin, scale, nb)
            cnt = (first[kh] + mult[kh] * (low[kh] <= y)) - (first[kl] + mult[kl] * (low[kl] < x))
            mixed = (mult[kl] < 0) | (mult[kh] < 0)
            if mixed:  # rare and predictable: counted exactly after the loop
                side_q[ns] = q
                side_lo[ns] = x
                side_hi[ns] = y
                ns += 1
            acc[q] = cnt
            out_q[w] = q
            w += (cnt > 0) & ~mixed
        for t in range(ns):
            q = side_q[t]
            cnt = _exact_count(pv, end, table, side_lo[t], side_hi[t])
            acc[q] = cnt
            if cnt > 0:
                out_q[w] = q
                w += 1
        return w
    for j in range(n):
        q = cand[j]
        a = lower(pv, end, low, first, mult, nb, scale, pmin, clo[j])
        b = upper(pv, end, low, first, mult, nb, scale, pmin, chi[j])
        n_out = run_out(q, a, b, ps, rec, dseqs, xseq, mode, acc, out_q, out_s, n_out)
        if n_out < 0:
            return OVERFLOW
    return n_out


# -- the batch path: one call per member and run of events ----------------------------------------
#
# Each ``*_many`` kernel runs its one-tuple kernel for the events ``ev[e0:]`` (a ``KeyedEvents``
# bundle: row position, partner run base and size, value, sequence number), tags each event's
# rows with its position (``rows_of_event``; COUNT rows take their count from ``acc``) and
# returns ``(next event, n_out, stamp)`` for ``protocol.run_kernel_many``: IDENTIFY/COUNT stop
# before an event that might not fit in ``room`` rows, PAIRS stops at the event that
# overflowed (its partial rows dropped: PAIRS has no side effects). The one-tuple kernels are
# called, not inlined: a call costs ~0.12 µs (``sj_vanilla_many`` over 100,000 events and no
# subscription), against ~1–2 µs of Python per event when each event was its own call.


@kernel
def sj_own_scan_many(gids: np.ndarray, gpoint: np.ndarray, runs: tuple, scratch: tuple,
                     side: tuple, buckets: tuple, reg_max: float, pv: np.ndarray,
                     ps: np.ndarray, tab: tuple, sub: tuple, ev: tuple, how: tuple,
                     out: tuple, at: tuple):
    """:func:`sj_own_scan` (SJ-SelectFirst) for each event of ``ev`` from ``e0``."""
    own, mode = how
    out_e, out_q, out_x = RowBuffers(*out)
    e0, n_out, stamp, room = At(*at)
    pos, base, size, values, seqs = ev
    acc = SubArrays(*sub).acc
    for k in range(e0, pos.shape[0]):
        if mode != PAIRS and n_out + room > out_q.shape[0]:
            return k, n_out, stamp
        stamp += 1
        n1 = sj_own_scan(gids, gpoint, runs, scratch, side, buckets, reg_max,
                         (pv, ps, base[k], size[k]), tab, sub, values[k], own, seqs[k], mode,
                         out_q, out_x, n_out)
        if n1 == OVERFLOW:
            return k, n_out, stamp
        rows_of_event(pos[k], n_out, n1, mode, acc, out_e, out_q, out_x)
        n_out = n1
    return pos.shape[0], n_out, stamp


@kernel
def sj_scan_many(gids: np.ndarray, gpoint: np.ndarray, runs: tuple, cand: np.ndarray,
                 clo: np.ndarray, chi: np.ndarray, reg_max: float, pv: np.ndarray,
                 ps: np.ndarray, rec: np.ndarray, dseqs: np.ndarray, acc: np.ndarray,
                 ev: tuple, how: tuple, out: tuple, at: tuple):
    """:func:`sj_scan` (SJ-SSI, SJ-Hotspot's groups) for each event of ``ev`` from ``e0``."""
    own, mode = how
    out_e, out_q, out_x = RowBuffers(*out)
    e0, n_out, stamp, room = At(*at)
    pos, base, size, values, seqs = ev
    for k in range(e0, pos.shape[0]):
        if mode != PAIRS and n_out + room > out_q.shape[0]:
            return k, n_out, stamp
        stamp += 1
        n1 = sj_scan(gids, gpoint, runs, cand, clo, chi, reg_max, pv, ps, base[k], size[k],
                     values[k], rec, own, dseqs, seqs[k], mode, acc, out_q, out_x, n_out)
        if n1 == OVERFLOW:
            return k, n_out, stamp
        rows_of_event(pos[k], n_out, n1, mode, acc, out_e, out_q, out_x)
        n_out = n1
    return pos.shape[0], n_out, stamp


@kernel
def sj_select_first_many(tree: tuple, pv: np.ndarray, ps: np.ndarray, tab: tuple, sub: tuple,
                         ev: tuple, how: tuple, out: tuple, at: tuple):
    """:func:`sj_select_first` (SJ-Hotspot's scattered tree) for each event of ``ev`` from
    ``e0``."""
    own, mode = how
    out_e, out_q, out_x = RowBuffers(*out)
    e0, n_out, stamp, room = At(*at)
    pos, base, size, values, seqs = ev
    acc = SubArrays(*sub).acc
    hits = np.empty(0, dtype=np.int64)  # the tree's answer, reused from event to event
    for k in range(e0, pos.shape[0]):
        if mode != PAIRS and n_out + room > out_q.shape[0]:
            return k, n_out, stamp
        stamp += 1
        v = values[k]
        nh = stab(tree, v, hits)
        if nh == OVERFLOW:  # the out-of-room protocol: grow to the bound and ask again
            hits = np.empty(2 * stab_bound(tree, v) + 64, dtype=np.int64)
            nh = stab(tree, v, hits)
        n1 = _selected(hits, nh, (pv, ps, base[k], size[k]), tab, sub, own, seqs[k], mode,
                       out_q, out_x, n_out)
        if n1 == OVERFLOW:
            return k, n_out, stamp
        rows_of_event(pos[k], n_out, n1, mode, acc, out_e, out_q, out_x)
        n_out = n1
    return pos.shape[0], n_out, stamp


@kernel
def sj_vanilla_many(qids: np.ndarray, pv: np.ndarray, ps: np.ndarray, rec: np.ndarray,
                    dseqs: np.ndarray, acc: np.ndarray, ev: tuple, how: tuple,
                    out: tuple, at: tuple):
    """:func:`sj_vanilla` for each event of ``ev`` from ``e0``."""
    own, mode = how
    out_e, out_q, out_x = RowBuffers(*out)
    e0, n_out, stamp, room = At(*at)
    pos, base, size, values, seqs = ev
    for k in range(e0, pos.shape[0]):
        if mode != PAIRS and n_out + room > out_q.shape[0]:
            return k, n_out, stamp
        stamp += 1
        n1 = sj_vanilla(qids, pv, ps, base[k], size[k], values[k], rec, own, dseqs, seqs[k],
                        mode, acc, out_q, out_x, n_out)
        if n1 == OVERFLOW:
            return k, n_out, stamp
        rows_of_event(pos[k], n_out, n1, mode, acc, out_e, out_q, out_x)
        n_out = n1
    return pos.shape[0], n_out, stamp
