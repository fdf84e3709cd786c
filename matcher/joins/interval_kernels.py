"""numba kernels of the interval-join strategies (``joins/interval.py``).

Every kernel matches a run of incoming tuples (one tuple is a run of one) against the other
side's key order (the main and the delta run of ``BaseTable.order``) and appends rows
``(event, q, x)`` to growable output arrays it returns: ``x`` is the partner's slot in PAIRS, the
pair count in COUNT (IDENTIFY: one row per affected subscription). Conventions are the band
kernels' (``band_kernels``' docstring), whose exact difference searches they reuse
(:func:`~matcher.joins.band_kernels.lower_bound`): ``dirn = +1`` for an incoming R tuple,
``d(j)`` the key difference ``s.key − r.key`` of run position ``j``, non-decreasing in ``j``.

A subscription q is its record row ``rec[q] = (b_lo, b_hi, a_lo, a_hi, c_lo, c_hi, reg, snap)``
and its endpoint row ``irec[q] = (ss_lo, ss_hi, se_lo, se_hi, es_lo, es_hi, ee_lo, ee_hi)``
(int64, unbounded ends at ±2^62: ``SubscriptionColumns.irec``). The endpoint differences
are computed in int64, exact for times and ends within ±2^61 (``model.END_MAX``).

* :func:`nested_many` — IJ-NestedLoop: per subscription, a search of its key range in each run
  and a scan of the partners in it, every condition checked per partner. O(m log n + scanned).
* :func:`ssi_many` — IJ-SSI: the subscriptions grouped by a stabbing partition of their key
  ranges (paper 004 §2, §3.1); per group one search at its stabbing point, then the partners
  walked outwards against the members sorted by their far end, so each (member, partner) with
  the key condition met is visited once and nothing else is: O(τ log n + k_B).
"""

from __future__ import annotations

import numpy as np

from hotjoin.matcher.config import INLINE, kernel
from hotjoin.matcher.joins.band_kernels import lower_bound
from hotjoin.matcher.joins.protocol import COUNT, PAIRS


@kernel(**INLINE)
def _dpos(keys: np.ndarray, n: int, pos: int, b: float, dirn: int) -> float:
    if dirn > 0:
        return keys[pos] - b
    return b - keys[n - 1 - pos]


@kernel(**INLINE)
def _slot(pays: np.ndarray, n: int, pos: int, dirn: int) -> int:
    if dirn > 0:
        return pays[pos]
    return pays[n - 1 - pos]


@kernel(**INLINE)
def endpoints_hold(irec: np.ndarray, q: int, rt: int, re: int, st: int, se: int) -> bool:
    """Whether the four endpoint differences of r = [rt, re], s = [st, se] lie in q's ranges.

    >>> ir = np.array([[1, 10, -5, 5, -100, 100, -100, 100]], dtype=np.int64)
    >>> bool(endpoints_hold(ir, 0, 0, 3, 2, 4)), bool(endpoints_hold(ir, 0, 0, 3, 0, 4))
    (True, False)
    """
    d = st - rt
    if d < irec[q, 0] or d > irec[q, 1]:
        return False
    d = st - re
    if d < irec[q, 2] or d > irec[q, 3]:
        return False
    d = se - rt
    if d < irec[q, 4] or d > irec[q, 5]:
        return False
    d = se - re
    return irec[q, 6] <= d <= irec[q, 7]


@kernel(**INLINE)
def pair_holds(rec: np.ndarray, irec: np.ndarray, q: int, dirn: int, xv: float, xt: int,
               xe: int, xseq: int, slot: int, values: np.ndarray, times: np.ndarray,
               ends: np.ndarray, seqs: np.ndarray) -> bool:
    """Every condition of q but the key condition on the incoming tuple (value ``xv``,
    interval ``[xt, xe]``, sequence ``xseq``) and the stored tuple at ``slot``, and whether q is
    owed the pair (``core.owed_rec``: registered before it formed, or a snapshot)."""
    pv = values[slot]
    if dirn > 0:
        if not (rec[q, 2] <= xv <= rec[q, 3] and rec[q, 4] <= pv <= rec[q, 5]):
            return False
        if not endpoints_hold(irec, q, xt, xe, times[slot], ends[slot]):
            return False
    else:
        if not (rec[q, 4] <= xv <= rec[q, 5] and rec[q, 2] <= pv <= rec[q, 3]):
            return False
        if not endpoints_hold(irec, q, times[slot], ends[slot], xt, xe):
            return False
    return rec[q, 7] != 0.0 or rec[q, 6] < max(xseq, seqs[slot])


@kernel
def grown(out_e: np.ndarray, out_q: np.ndarray, out_x: np.ndarray, n: int):
    """The three row arrays with room for at least one more row (contents kept)."""
    if n < out_e.shape[0]:
        return out_e, out_q, out_x
    cap = 2 * out_e.shape[0] + 64
    e = np.empty(cap, dtype=np.int64)
    q = np.empty(cap, dtype=np.int64)
    x = np.empty(cap, dtype=np.int64)
    e[:n] = out_e[:n]
    q[:n] = out_q[:n]
    x[:n] = out_x[:n]
    return e, q, x


@kernel
def nested_many(qids: np.ndarray, mk: np.ndarray, mp: np.ndarray, msamp: np.ndarray,
                dk: np.ndarray, dp: np.ndarray, dsamp: np.ndarray, step: int,
                alive: np.ndarray, values: np.ndarray, times: np.ndarray, ends: np.ndarray,
                seqs: np.ndarray, rec: np.ndarray, irec: np.ndarray, mark: np.ndarray,
                acc: np.ndarray, ekeys: np.ndarray, evals: np.ndarray, etimes: np.ndarray,
                eends: np.ndarray, eseqs: np.ndarray, dirn: int, mode: int, stamp0: int,
                out_e: np.ndarray, out_q: np.ndarray, out_x: np.ndarray, n_out: int):
    """IJ-NestedLoop over the subscriptions ``qids`` for every incoming tuple (``ekeys`` …
    ``eseqs``): per tuple, per subscription, per run, the partners whose key difference lies in
    q's range B are scanned and checked. Event i dedupes with stamp ``stamp0 + i``. Returns
    ``(out_e, out_q, out_x, n_out)``. O(Σ (m log n + scanned))."""
    for i in range(ekeys.shape[0]):
        b, xv, xt, xe, xseq = ekeys[i], evals[i], etimes[i], eends[i], eseqs[i]
        stamp = stamp0 + i
        n0 = n_out
        for r in range(2):
            keys = mk if r == 0 else dk
            pays = mp if r == 0 else dp
            samp = msamp if r == 0 else dsamp
            n = keys.shape[0]
            if n == 0:
                continue
            for j in range(qids.shape[0]):
                q = qids[j]
                if dirn > 0:
                    if not rec[q, 2] <= xv <= rec[q, 3]:
                        continue
                elif not rec[q, 4] <= xv <= rec[q, 5]:
                    continue
                hi = rec[q, 1]
                pos = lower_bound(keys, samp, step, b, dirn, rec[q, 0])
                while pos < n:
                    if _dpos(keys, n, pos, b, dirn) > hi:
                        break
                    slot = _slot(pays, n, pos, dirn)
                    pos += 1
                    if not alive[slot] or not pair_holds(rec, irec, q, dirn, xv, xt, xe,
                                                         xseq, slot, values, times, ends,
                                                         seqs):
                        continue
                    out_e, out_q, out_x = grown(out_e, out_q, out_x, n_out)
                    if mode == PAIRS:
                        out_e[n_out] = i
                        out_q[n_out] = q
                        out_x[n_out] = slot
                        n_out += 1
                    else:
                        if mark[q] != stamp:
                            mark[q] = stamp
                            acc[q] = 0
                            out_e[n_out] = i
                            out_q[n_out] = q
                            out_x[n_out] = 0
                            n_out += 1
                        acc[q] += 1
        if mode == COUNT:
            for k in range(n0, n_out):
                out_x[k] = acc[out_q[k]]
    return out_e, out_q, out_x, n_out


@kernel
def ssi_many(points: np.ndarray, gstart: np.ndarray, gsize: np.ndarray, gbound: np.ndarray,
             hi_q: np.ndarray, hi_v: np.ndarray, lo_q: np.ndarray, lo_v: np.ndarray,
             live: np.ndarray,
             mk: np.ndarray, mp: np.ndarray, msamp: np.ndarray, dk: np.ndarray,
             dp: np.ndarray, dsamp: np.ndarray, step: int, alive: np.ndarray,
             values: np.ndarray, times: np.ndarray, ends: np.ndarray, seqs: np.ndarray,
             rec: np.ndarray, irec: np.ndarray, mark: np.ndarray, acc: np.ndarray,
             ekeys: np.ndarray, evals: np.ndarray, etimes: np.ndarray, eends: np.ndarray,
             eseqs: np.ndarray, dirn: int, mode: int, stamp0: int, out_e: np.ndarray,
             out_q: np.ndarray, out_x: np.ndarray, n_out: int):
    """IJ-SSI: group g (stabbing point ``points[g]``) holds members ``gstart[g] … + gsize[g]``
    of ``hi_q`` (by upper key bound ``hi_v``, descending) and of ``lo_q`` (by lower bound
    ``lo_v``, ascending); ``live[q]`` False for a member removed since the build. Per tuple and
    group: one search for the first partner with ``d >= p``; walking right, the members with
    ``hi >= d`` are a prefix of ``hi_q`` (their ``lo <= p <= d`` holds), walking left those
    with ``lo <= d`` a prefix of ``lo_q``; a walk stops when the prefix is empty. A group's
    members share which endpoint bounds they have, and ``gbound[g]`` holds the loosest of each
    (an endpoint row, as ``irec``): a partner outside it is passed over without visiting a
    member. The first partner that passes has the group's members filtered once by the
    incoming tuple's own selection (A for an R tuple, C for an S tuple; both orders kept), so
    the walks visit only those. Other conditions are checked per visited (member, partner).
    Returns the rows as :func:`nested_many`. O(τ log n + partners in the groups' B ranges +
    members of the groups met + k_B) per tuple."""
    big = 0
    for g in range(gsize.shape[0]):
        big = max(big, gsize[g])
    fh_q = np.empty(big, dtype=np.int64)  # the group's members passing the own selection
    fh_v = np.empty(big, dtype=np.float64)
    fl_q = np.empty(big, dtype=np.int64)
    fl_v = np.empty(big, dtype=np.float64)
    for i in range(ekeys.shape[0]):
        b, xv, xt, xe, xseq = ekeys[i], evals[i], etimes[i], eends[i], eseqs[i]
        stamp = stamp0 + i
        n0 = n_out
        for g in range(points.shape[0]):
            a0 = gstart[g]
            m = gsize[g]
            if m == 0:
                continue
            nf = -1  # filtered on the first partner that passes the group's bounds
            for r in range(2):
                keys = mk if r == 0 else dk
                pays = mp if r == 0 else dp
                samp = msamp if r == 0 else dsamp
                n = keys.shape[0]
                if n == 0:
                    continue
                start = lower_bound(keys, samp, step, b, dirn, points[g])
                for side in range(2):
                    pos = start if side == 0 else start - 1
                    while 0 <= pos < n:
                        d = _dpos(keys, n, pos, b, dirn)
                        if (hi_v[a0] < d) if side == 0 else (lo_v[a0] > d):
                            break  # no member's B range reaches this far
                        slot = _slot(pays, n, pos, dirn)
                        pos = pos + 1 if side == 0 else pos - 1
                        if not alive[slot]:
                            continue
                        if dirn > 0:
                            if not endpoints_hold(gbound, g, xt, xe, times[slot], ends[slot]):
                                continue
                        elif not endpoints_hold(gbound, g, times[slot], ends[slot], xt, xe):
                            continue
                        if nf < 0:  # the members the incoming tuple's own value selects
                            nf = 0
                            nl = 0
                            for k in range(m):
                                q = hi_q[a0 + k]
                                if live[q] and ((rec[q, 2] <= xv <= rec[q, 3]) if dirn > 0
                                                else (rec[q, 4] <= xv <= rec[q, 5])):
                                    fh_q[nf] = q
                                    fh_v[nf] = hi_v[a0 + k]
                                    nf += 1
                                q = lo_q[a0 + k]
                                if live[q] and ((rec[q, 2] <= xv <= rec[q, 3]) if dirn > 0
                                                else (rec[q, 4] <= xv <= rec[q, 5])):
                                    fl_q[nl] = q
                                    fl_v[nl] = lo_v[a0 + k]
                                    nl += 1
                        k = 0
                        while k < nf:
                            if side == 0:
                                if fh_v[k] < d:
                                    break
                                q = fh_q[k]
                            else:
                                if fl_v[k] > d:
                                    break
                                q = fl_q[k]
                            k += 1
                            if not pair_holds(rec, irec, q, dirn, xv, xt, xe, xseq, slot,
                                              values, times, ends, seqs):
                                continue
                            out_e, out_q, out_x = grown(out_e, out_q, out_x, n_out)
                            if mode == PAIRS:
                                out_e[n_out] = i
                                out_q[n_out] = q
                                out_x[n_out] = slot
                                n_out += 1
                            else:
                                if mark[q] != stamp:
                                    mark[q] = stamp
                                    acc[q] = 0
                                    out_e[n_out] = i
                                    out_q[n_out] = q
                                    out_x[n_out] = 0
                                    n_out += 1
                                acc[q] += 1
        if mode == COUNT:
            for k in range(n0, n_out):
                out_x[k] = acc[out_q[k]]
    return out_e, out_q, out_x, n_out
