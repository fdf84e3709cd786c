"""numba kernels of the window-join strategies of paper 004 §3.3.

A window join q holds pair (r, s) iff the select-join condition holds and
``|r.time − s.time| ≤ w_q``. Kernels read the partners of the incoming tuple's key from the
other side's :class:`~matcher.structures.key_index.KeyIndex` twice: sorted by value and sorted
by time (float times, exact int64 times re-read from the table). Conventions (modes, ``owed``,
``mark``/``stamp``/``acc``, own/other ranges) are those of :mod:`matcher.joins.band_kernels`
and :mod:`matcher.joins.select_kernels`, with the shared helpers of :mod:`matcher.core`, and so is
the out-of-room protocol (``matcher.core``): IDENTIFY/COUNT write into room the caller reserved
(a row per subscription), PAIRS returns ``OVERFLOW`` when full and is rerun on grown buffers
(with a fresh stamp where it dedupes by ``mark``: ``MatchBuffer.run_fresh``); the batch
kernels stop before an event that might not fit.

Bundles (``matcher.joins.protocol``): every window kernel takes the same three plain tuples,
unpacked once at its top —

* ``P`` the key's partners ``(pv, ps, base, size, tv, ts, tbase, tsize)``: by value
  ``pv``/``ps[base : base + size]``, by time ``tv``/``ts[tbase : tbase + tsize]``
  (``window.Partners.arrays()``);
* ``T`` the other table's ``(times, values, seqs)`` per slot (``window.table_arrays``);
* ``Q`` the subscriptions' ``(rec, mark, acc, oth)``: ``oth`` is ``rec``'s column of the other
  range for the incoming tuple's direction; w (``B_HI``), registration and snapshot are read
  from the same row (``window.sub_arrays``).

𝒟, the index of §3.3.1 on the boxes ``rangeA × rangeC × [0, w]``, is a
:class:`~matcher.structures.rect_index.BoxForest` with one group (0) and dimensions (A, C, W) in
that order for both directions; a join result point is ``(r.value, s.value, |r.time − s.time|)``.
"""

from __future__ import annotations

import numpy as np

from hotjoin.matcher.config import INLINE, kernel
from hotjoin.matcher.core import (
    emit_marked,
    lower_bound,
    owed_rec,
    put,
    record,
    rows_of_event,
    upper_bound,
)
from hotjoin.matcher.joins.protocol import B_HI, IDENTIFY, OVERFLOW, PAIRS, At, RowBuffers
from hotjoin.matcher.joins.select_kernels import sj_own_scan
from hotjoin.matcher.joins.skyline import NONE, ONE_PASS, STORED, sky_refresh, skyline_pass
from hotjoin.matcher.structures.interval_tree import stab, stab_bound
from hotjoin.matcher.structures.rect_index import stab_group


@kernel
def enum_window(q: int, P: tuple, T: tuple, Q: tuple, t: int, xseq: int, mode: int,
                out_q: np.ndarray, out_s: np.ndarray, n_out: int):
    """q's owed pairs: partners with value in q's other range and |t − time| ≤ w_q (the
    two-level B → (C, T) lookup of WJ-SelectFirst). Walks the shorter of the value run and the
    time run. Returns ``(cnt, n_out)``, ``n_out`` ``OVERFLOW`` when a PAIRS row does not fit;
    IDENTIFY stops at the first pair.

    Everything q's test needs is read from its 64-byte record row ``rec[q]`` (other range,
    ``w`` in the ``B_HI`` column of a window join, registration, snapshot). PAIRS only: the
    kernels' COUNT/IDENTIFY paths call :func:`window_count`, ~10× cheaper per candidate.
    """
    pv, ps, base, size, tv, ts, tbase, tsize = P
    dtimes, dvals, dseqs = T
    rec, oth = Q[0], Q[3]
    lo, hi = rec[q, oth], rec[q, oth + 1]
    a = lower_bound(pv, base, base + size, lo)
    b = upper_bound(pv, base, base + size, hi)
    if a >= b:
        return 0, n_out
    w = int(rec[q, B_HI])
    ta = lower_bound(tv, tbase, tbase + tsize, float(t - w))
    tb = upper_bound(tv, tbase, tbase + tsize, float(t + w))
    cnt = 0
    by_value = b - a <= tb - ta
    n = b - a if by_value else tb - ta
    for k in range(n):
        s = ps[a + k] if by_value else ts[ta + k]
        if abs(t - dtimes[s]) > w:
            continue
        if not by_value:
            x = dvals[s]
            if x < lo or x > hi:
                continue
        if mode == IDENTIFY:
            return 1, n_out
        if owed_rec(rec, q, s, xseq, dseqs):
            cnt += 1
            if mode == PAIRS:
                n_out = put(out_q, out_s, n_out, q, s)
                if n_out == OVERFLOW:
                    return cnt, OVERFLOW
    return cnt, n_out


@kernel(**INLINE)
def window_count(q: int, pv: np.ndarray, ps: np.ndarray, base: int, size: int, tv: np.ndarray,
                 ts: np.ndarray, tbase: int, tsize: int, dtimes: np.ndarray, dvals: np.ndarray,
                 dseqs: np.ndarray, rec: np.ndarray, oth: int, t: int, xseq: int,
                 ident: bool) -> int:
    """:func:`enum_window`'s count without output (IDENTIFY: > 0 iff q has a pair; COUNT: q's
    owed pairs), from unpacked arrays and q's record row (``w`` in ``B_HI``).

    The per-candidate test of every window kernel's COUNT/IDENTIFY path. Written flat — two
    plain loops, no early return, no bundle unpacked or array returned per call — because
    numba pays reference counting for each: on the load-test window workload (~1,000
    candidates per tuple) the :func:`enum_window` call cost ~185 ns per candidate, this ~9
    (IDENTIFY) to ~26 ns (COUNT), measured side by side in one script.
    """
    lo, hi = rec[q, oth], rec[q, oth + 1]
    a = lower_bound(pv, base, base + size, lo)
    b = upper_bound(pv, base, base + size, hi)
    if a >= b:
        return 0
    w = int(rec[q, B_HI])
    ta = lower_bound(tv, tbase, tbase + tsize, float(t - w))
    tb = upper_bound(tv, tbase, tbase + tsize, float(t + w))
    cnt = 0
    if b - a <= tb - ta:
        for k in range(a, b):
            s = ps[k]
            if abs(t - dtimes[s]) <= w:
                cnt += 1 if ident else owed_rec(rec, q, s, xseq, dseqs)
    else:
        for k in range(ta, tb):
            s = ts[k]
            x = dvals[s]
            if abs(t - dtimes[s]) <= w and lo <= x <= hi:
                cnt += 1 if ident else owed_rec(rec, q, s, xseq, dseqs)
    return cnt


@kernel
def wj_select_first(tree: tuple, qfilter: np.ndarray, P: tuple, T: tuple, Q: tuple, v: float,
                    t: int, own: int, xseq: int, mode: int, stamp: int, out_q: np.ndarray,
                    out_s: np.ndarray, n_out: int):
    """WJ-SelectFirst (§3.3.1): interval tree on own ranges stabbed with v, then per selected q
    the two-level lookup. O(log n + log m + n' g₂(m') + k). With an empty tree (``root < 0``)
    the subscriptions are ``qfilter`` instead, own range tested on ``rec[q, own : own + 2]``
    (a plain list: ``Engine.result``).

    ``tree``: ``TreeArrays`` over ``PoolArrays`` (``IntervalTree.arrays()``), stabbed by the
    tree's own query (``interval_tree.stab``); ``P``, ``T``, ``Q``: the module's bundles.
    Returns ``n_out`` or ``OVERFLOW``.
    """
    if tree[3] < 0:
        return _window_each(qfilter, qfilter.shape[0], True, P, T, Q, v, t, own, xseq, mode,
                            stamp, out_q, out_s, n_out)
    hits = np.empty(stab_bound(tree, v), dtype=np.int64)
    nh = stab(tree, v, hits)
    return _window_each(hits, nh, False, P, T, Q, v, t, own, xseq, mode, stamp, out_q, out_s,
                        n_out)


@kernel
def _window_each(qs: np.ndarray, n: int, check_own: bool, P: tuple, T: tuple, Q: tuple,
                 v: float, t: int, own: int, xseq: int, mode: int, stamp: int,
                 out_q: np.ndarray, out_s: np.ndarray, n_out: int):
    """WJ-SelectFirst's second step for the subscriptions ``qs[:n]`` (with ``check_own``,
    only those whose own range holds ``v``): each one's two-level lookup, output as
    :func:`~matcher.core.record`. Returns ``n_out`` or ``OVERFLOW`` (PAIRS)."""
    pv, ps, base, size, tv, ts, tbase, tsize = P
    dtimes, dvals, dseqs = T
    rec, mark, acc, oth = Q
    for i in range(n):
        q = qs[i]
        if check_own and not (rec[q, own] <= v <= rec[q, own + 1]):
            continue
        if mode == PAIRS:
            cnt, n_out = enum_window(q, P, T, Q, t, xseq, mode, out_q, out_s, n_out)
            if n_out == OVERFLOW:
                return OVERFLOW
        else:
            cnt = window_count(q, pv, ps, base, size, tv, ts, tbase, tsize, dtimes, dvals,
                               dseqs, rec, oth, t, xseq, mode == IDENTIFY)
            n_out = record(q, cnt, mode, mark, stamp, acc, out_q, out_s, n_out)
    return n_out


@kernel
def _sure_partners(P: tuple, T: tuple, t: int, wmin: int, wmax: int) -> tuple:
    """The key's partners within ``wmin`` of ``t`` as a by-value run ``(values, slots, 0, m)``
    — or the key's whole run when every partner is — and whether none lies between ``wmin``
    and ``wmax`` (False: the window test depends on the subscription; the run is then empty).

    Float times bound the walk (a superset: float() is monotone), int times decide exactly.
    """
    pv, ps, base, size, tv, ts, tbase, tsize = P
    dtimes = T[0]
    oa = lower_bound(tv, tbase, tbase + tsize, float(t - wmax))
    ob = upper_bound(tv, tbase, tbase + tsize, float(t + wmax))
    m = 0
    for k in range(oa, ob):
        dt = abs(t - dtimes[ts[k]])
        if dt <= wmin:
            m += 1
        elif dt <= wmax:
            return (pv, ps, 0, 0), False
    if m == size:
        return (pv, ps, base, size), True
    vals = np.empty(m, dtype=np.float64)
    slots = np.empty(m, dtype=np.int64)
    j = 0
    for k in range(oa, ob):
        s = ts[k]
        if abs(t - dtimes[s]) <= wmin:
            vals[j] = T[1][s]
            slots[j] = s
            j += 1
    o = np.argsort(vals, kind="mergesort")
    return (vals[o], slots[o], 0, m), True


@kernel
def wj_own_scan(G: tuple, P: tuple, T: tuple, Q: tuple, W: tuple, v: float, t: int, own: int,
                xseq: int, mode: int, stamp: int, out_q: np.ndarray, out_s: np.ndarray,
                n_out: int):
    """WJ-SelectFirst (§3.3.1) over SJ-SelectFirst's own-range groups: the scan of
    ``select_kernels.sj_own_scan`` (IDENTIFY) lists the subscriptions whose own range holds v
    and whose other range holds some partner value — every q with a window pair is among
    them — then each one's two-level B → (C, T) lookup (:func:`window_count`) finds its pairs
    within w. O(τ_own + m′ + n′ + n″ g₂(m′) + k), n″ ≤ n′ the candidates the values admit.

    ``W = (w_min, w_max, reg_max)`` of the strategy's subscriptions. When no partner of the
    key lies between w_min and w_max of t, the window test is the same for every q: the
    partners within w_min (:func:`_sure_partners`) are a select join's partners, and the one
    ``sj_own_scan`` pass in the asked mode is the whole answer — no candidate's record row
    is read (a row miss each: ~0.2 µs per candidate on the load-test window workload, where
    every subscription has the same w).

    ``G`` the groups ``(gids, gpoint, runs arrays, cand, clo, chi, side, bucket table)``;
    ``P``, ``T``, ``Q``: the module's bundles. Returns ``n_out`` or ``OVERFLOW`` (PAIRS); the
    caller reserved a row per member (IDENTIFY/COUNT).
    """
    gids, gpoint, S, cand, clo, chi, side, bk = G
    pv, ps, base, size = P[0], P[1], P[2], P[3]
    dseqs = T[2]
    rec, mark, acc, oth = Q
    wmin, wmax, reg_max = W
    sure, uniform = _sure_partners(P, T, t, wmin, wmax)
    if uniform:
        if sure[3] == 0:
            return n_out
        return sj_own_scan(gids, gpoint, S, (cand, clo, chi), side, bk, reg_max, sure,
                           (T[0], T[1], dseqs), (rec, mark, acc), v, own, xseq, mode, out_q,
                           out_s, n_out)
    n = sj_own_scan(gids, gpoint, S, (cand, clo, chi), side, bk, -np.inf, (pv, ps, base, size),
                    (T[0], T[1], dseqs), (rec, mark, acc), v, own, xseq, IDENTIFY, cand, out_s,
                    0)
    if mode == PAIRS:
        for i in range(n):
            cnt, n_out = enum_window(cand[i], P, T, Q, t, xseq, mode, out_q, out_s, n_out)
            if n_out == OVERFLOW:
                return OVERFLOW
        return n_out
    # COUNT/IDENTIFY: each q once (no ``mark`` dedupe), into the room reserved per member
    tv, ts, tbase, tsize = P[4], P[5], P[6], P[7]
    dtimes, dvals = T[0], T[1]
    ident = mode == IDENTIFY
    for i in range(n):
        q = cand[i]
        cnt = window_count(q, pv, ps, base, size, tv, ts, tbase, tsize, dtimes, dvals, dseqs,
                           rec, oth, t, xseq, ident)
        if cnt > 0:
            acc[q] = cnt
            out_q[n_out] = q
            n_out += 1
    return n_out


@kernel
def wj_join_first(F: tuple, P: tuple, T: tuple, Q: tuple, v: float, t: int, wmax: int,
                  dirn: int, xseq: int, mode: int, stack: np.ndarray, stamp: int,
                  out_q: np.ndarray, out_s: np.ndarray, n_out: int, hits: np.ndarray):
    """WJ-JoinFirst (§3.3.1): the partners with |t − time| ≤ w_max (B-tree on (B, T)) each probe
    𝒟 with (a, c, |Δt|); each hit is one result pair. O(log m + m_b g₃(n) + k).

    ``F``: 𝒟's ``forest_arrays``; ``P``, ``T``, ``Q``: the module's bundles. Returns ``(n_out,
    hits)`` (𝒟's hit buffer, grown by its query); ``n_out`` ``OVERFLOW`` in PAIRS when full.
    """
    tv, ts, tbase, tsize = P[4], P[5], P[6], P[7]
    dtimes, dvals, dseqs = T
    rec, mark, acc = Q[0], Q[1], Q[2]
    pt = np.empty(3, dtype=np.float64)
    a = lower_bound(tv, tbase, tbase + tsize, float(t - wmax))
    b = upper_bound(tv, tbase, tbase + tsize, float(t + wmax))
    for i in range(a, b):
        s = ts[i]
        dt = abs(t - dtimes[s])
        if dt > wmax:
            continue
        if dirn > 0:
            pt[0], pt[1] = v, dvals[s]
        else:
            pt[0], pt[1] = dvals[s], v
        pt[2] = dt
        hits, nh = stab_group(F, 0, pt, stack, hits)
        for j in range(nh):
            q = hits[j]
            if mode == IDENTIFY:
                if mark[q] != stamp:
                    n_out = record(q, 1, mode, mark, stamp, acc, out_q, out_s, n_out)
            elif owed_rec(rec, q, s, xseq, dseqs):
                if mode == PAIRS:
                    n_out = put(out_q, out_s, n_out, q, s)
                    if n_out == OVERFLOW:
                        return OVERFLOW, hits
                else:
                    n_out = record(q, 1, mode, mark, stamp, acc, out_q, out_s, n_out)
    return n_out, hits


@kernel
def wj_ssi(cand: np.ndarray, F: tuple, P: tuple, T: tuple, Q: tuple, v: float, t: int,
           wmax: int, dirn: int, xseq: int, mode: int, stack: np.ndarray, stamp: int,
           out_q: np.ndarray, out_s: np.ndarray, n_out: int, hits: np.ndarray):
    """WJ-SSI (§3.3.2): probe 𝒟 with the skyline points ``cand`` (slots) only; every box hit is
    an affected subscription (its pairs: the two-level lookup). O(m̄_b g₃(n) + k) after the
    skylines are current.

    ``F``: 𝒟's ``forest_arrays``; ``P``, ``T``, ``Q``: the module's bundles. Returns as
    :func:`wj_join_first`; it marks every hit, so a PAIRS rerun takes a fresh stamp.
    """
    pv, ps, base, size, tv, ts, tbase, tsize = P
    dtimes, dvals, dseqs = T
    rec, mark, acc, oth = Q
    pt = np.empty(3, dtype=np.float64)
    for i in range(cand.shape[0]):
        s = cand[i]
        dt = abs(t - dtimes[s])
        if dt > wmax:
            continue
        if dirn > 0:
            pt[0], pt[1] = v, dvals[s]
        else:
            pt[0], pt[1] = dvals[s], v
        pt[2] = dt
        hits, nh = stab_group(F, 0, pt, stack, hits)
        for j in range(nh):
            q = hits[j]
            if mark[q] == stamp:
                continue
            mark[q] = stamp
            if mode == IDENTIFY:
                out_q[n_out] = q
                out_s[n_out] = 0
                n_out += 1
                continue
            if mode == PAIRS:
                cnt, n_out = enum_window(q, P, T, Q, t, xseq, mode, out_q, out_s, n_out)
                if n_out == OVERFLOW:
                    return OVERFLOW, hits
            else:
                cnt = window_count(q, pv, ps, base, size, tv, ts, tbase, tsize, dtimes, dvals,
                                   dseqs, rec, oth, t, xseq, False)
                n_out = emit_marked(q, cnt, mode, acc, out_q, out_s, n_out)
    return n_out, hits


@kernel
def count_within(tv: np.ndarray, base: int, size: int, lo: float, hi: float) -> int:
    """#{i ∈ [base, base+size): lo ≤ tv[i] ≤ hi} for a sorted run: a key's m_b (§4.2), without
    a Python-side slice (the router asks it per tuple)."""
    return upper_bound(tv, base, base + size, hi) - lower_bound(tv, base, base + size, lo)


# -- the batch path: one call per member and run of events ----------------------------------------
#
# As ``select_kernels``' ``*_many`` kernels: ``ev`` is ``KeyedEvents`` as a plain tuple, ``K``
# the other side's key index by value and by time ``(pv, ps, tv, ts)``, ``how`` ``(dirn, own,
# mode)``; each event's rows are tagged with its position (``rows_of_event``), each event takes
# the next stamp, and the kernel stops before an event that might not fit (IDENTIFY/COUNT:
# ``room`` rows) or at the event whose PAIRS rows overflowed (dropped; it is redone with a
# fresh stamp). Returns ``(next event, n_out, stamp)``, then the scratch it grew.


@kernel
def wj_own_scan_many(G: tuple, K: tuple, T: tuple, Q: tuple, W: tuple, ev: tuple, how: tuple,
                     out: tuple, at: tuple):
    """:func:`wj_own_scan` (WJ-SelectFirst) for every event of ``ev`` from ``e0``."""
    pv, ps, tv, ts = K
    pos, _, _, base, size, tbase, tsize, values, times, seqs, _ = ev
    _, own, mode = how
    out_e, out_q, out_x = RowBuffers(*out)
    e0, n_out, stamp, room = At(*at)
    acc = Q[2]
    for k in range(e0, pos.shape[0]):
        if mode != PAIRS and n_out + room > out_q.shape[0]:
            return k, n_out, stamp
        stamp += 1
        n1 = wj_own_scan(G, (pv, ps, base[k], size[k], tv, ts, tbase[k], tsize[k]), T, Q, W,
                         values[k], times[k], own, seqs[k], mode, stamp, out_q, out_x, n_out)
        if n1 == OVERFLOW:
            return k, n_out, stamp
        rows_of_event(pos[k], n_out, n1, mode, acc, out_e, out_q, out_x)
        n_out = n1
    return pos.shape[0], n_out, stamp


@kernel
def wj_join_first_many(F: tuple, K: tuple, T: tuple, Q: tuple, wmax: int, ev: tuple,
                       how: tuple, stack: np.ndarray, out: tuple, at: tuple, hits: np.ndarray):
    """:func:`wj_join_first` (WJ-JoinFirst) for every event of ``ev`` from ``e0``; returns
    ``(next event, n_out, stamp, hits)``."""
    pv, ps, tv, ts = K
    pos, _, _, base, size, tbase, tsize, values, times, seqs, _ = ev
    dirn, _, mode = how
    out_e, out_q, out_x = RowBuffers(*out)
    e0, n_out, stamp, room = At(*at)
    acc = Q[2]
    for k in range(e0, pos.shape[0]):
        if mode != PAIRS and n_out + room > out_q.shape[0]:
            return k, n_out, stamp, hits
        stamp += 1
        n1, hits = wj_join_first(F, (pv, ps, base[k], size[k], tv, ts, tbase[k], tsize[k]), T,
                                 Q, values[k], times[k], wmax, dirn, seqs[k], mode, stack, stamp,
                                 out_q, out_x, n_out, hits)
        if n1 == OVERFLOW:
            return k, n_out, stamp, hits
        rows_of_event(pos[k], n_out, n1, mode, acc, out_e, out_q, out_x)
        n_out = n1
    return pos.shape[0], n_out, stamp, hits


@kernel
def wj_ssi_many(S: tuple, points: np.ndarray, F: tuple, tree: tuple, K: tuple, T: tuple,
                Q: tuple, wmax: int, ev: tuple, how: tuple, stack: np.ndarray, out: tuple,
                at: tuple, hits: np.ndarray, pool: tuple):
    """WJ-SSI (§3.3.2) for every event of ``ev`` from ``e0`` (each one's group in the key
    index ``g``, key and watermark ``now`` are ``KeyedEvents``' fields), then WJ-SelectFirst
    over ``tree``: WJ-Hotspot (§3.3.3) with the scattered ranges' tree, WJ-SSI with an empty
    one. As the one-tuple path (``window.run_window_ssi``): a tuple no partner is newer than,
    with the watermark not past it, probes its key's stored skylines, refreshed in place in
    the store ``S``/``pool`` (``skyline.sky_refresh``); any other tuple the skylines by
    ``|Δt|`` from one pass. Returns ``(next event, n_out, stamp, hits, pool)``: the hit
    buffer and the skyline pool may have grown (a refresh is kept when an event is redone:
    redoing it refreshes nothing more)."""
    pv, ps, tv, ts = K
    pos, gs, keys, base, size, tbase, tsize, values, times, seqs, nows = ev
    dirn, own, mode = how
    out_e, out_q, out_x = RowBuffers(*out)
    e0, n_out, stamp, room = At(*at)
    dtimes = T[0]
    acc = Q[2]
    start, n, meta = S[3], S[5], S[6]
    thits = np.empty(0, dtype=np.int64)  # the tree's answer, reused from event to event
    for k in range(e0, pos.shape[0]):
        if mode != PAIRS and n_out + room > out_q.shape[0]:
            return k, n_out, stamp, hits, pool
        stamp += 1
        t = times[k]
        n1 = n_out
        P = (pv, ps, base[k], size[k], tv, ts, tbase[k], tsize[k])
        how_probed = NONE
        if points.shape[0] > 0:
            newest = dtimes[ts[tbase[k] + tsize[k] - 1]]
            now = nows[k]
            if newest <= t and now <= t:
                g = gs[k]
                pool = sky_refresh(S, pool, g, keys[k], now - wmax, pv, ps, dtimes, base[k],
                                   size[k], points)
                cand = pool[2][start[g]:start[g] + n[g]]
                how_probed = STORED
            else:
                cand = skyline_pass(pv, ps, dtimes, base[k], size[k], points, 0, True, t,
                                    wmax)[2]
                how_probed = ONE_PASS
            n1, hits = wj_ssi(cand, F, P, T, Q, values[k], t, wmax, dirn, seqs[k], mode, stack,
                              stamp, out_q, out_x, n1, hits)
            if n1 == OVERFLOW:
                return k, n_out, stamp, hits, pool
        if tree[3] >= 0:  # WJ-SelectFirst over the scattered ranges (wj_select_first)
            v = values[k]
            nh = stab(tree, v, thits)
            if nh == OVERFLOW:  # the out-of-room protocol: grow to the bound and ask again
                thits = np.empty(2 * stab_bound(tree, v) + 64, dtype=np.int64)
                nh = stab(tree, v, thits)
            n1 = _window_each(thits, nh, False, P, T, Q, v, t, own, seqs[k], mode, stamp, out_q,
                              out_x, n1)
            if n1 == OVERFLOW:
                return k, n_out, stamp, hits, pool
        meta[how_probed] += 1
        rows_of_event(pos[k], n_out, n1, mode, acc, out_e, out_q, out_x)
        n_out = n1
    return pos.shape[0], n_out, stamp, hits, pool
