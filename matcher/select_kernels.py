"""numba kernels of the select-join strategies of paper 004 §3.2 and §4.1.

A select join q holds pair (r, s) iff ``r.key == s.key``, ``r.value ∈ A_q`` and ``s.value ∈ C_q``.
Every kernel processes one incoming tuple ``x`` (value ``v``) against the *substructure* of its
join key in the other side's :class:`~matcher.key_index.KeyIndex`: the partners of key b sorted by
value, ``pv[base : base + size]`` with their slots ``ps[…]`` (the B-tree on ``S(B, C)`` of §3.2.1).
The result of q for x is therefore one contiguous run of that substructure, the positions whose
value lies in q's *other* range.

Conventions are those of :mod:`matcher.band_kernels` (reused: ``push``, ``owed``, ``record``):

* ``own_lo/own_hi`` is the selection on ``x`` itself (A for an R tuple, C for an S tuple),
  ``oth_lo/oth_hi`` the selection on the partner;
* ``mode`` IDENTIFY appends each affected subscription once (no ``owed`` filter, as for bands),
  COUNT appends it once with its owed pair count in ``acc[q]``, PAIRS appends ``(q, slot)`` per
  owed pair; ``mark[q] == stamp`` deduplicates within one operation.
* Rectangle indexes are :class:`~matcher.rect_index.BoxForest` s passed as their flat arrays
  ``F``; their boxes have dimension 0 = own range, dimension 1 = other range, except the single
  global tree of SJ-JoinFirst which is (A, C) for both directions.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .band_kernels import COUNT, IDENTIFY, PAIRS, owed, push, record
from .rect_index import stab_group

__all__ = ["COUNT", "IDENTIFY", "PAIRS", "sj_join_first", "sj_select_first", "sj_ssi",
           "sj_vanilla"]


@njit(cache=True, inline="always")
def lower_bound(keys: np.ndarray, base: int, size: int, x: float) -> int:
    """First position in ``[base, base + size)`` with ``keys[pos] >= x`` (or base + size)."""
    lo, hi = base, base + size
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, inline="always")
def upper_bound(keys: np.ndarray, base: int, size: int, x: float) -> int:
    """First position in ``[base, base + size)`` with ``keys[pos] > x`` (or base + size)."""
    lo, hi = base, base + size
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def emit_run(q: int, a: int, b: int, ps: np.ndarray, dseqs: np.ndarray, xseq: int,
             reg: np.ndarray, snap: np.ndarray, mode: int,
             out_q: np.ndarray, out_s: np.ndarray, n_out: int):
    """Owed pairs of q with the partners at positions ``[a, b)``; returns ``(cnt, out…)``."""
    cnt = 0
    for i in range(a, b):
        s = ps[i]
        if mode == IDENTIFY:
            return 1, out_q, out_s, n_out
        if owed(q, s, xseq, dseqs, reg, snap):
            cnt += 1
            if mode == PAIRS:
                out_q, out_s, n_out = push(out_q, out_s, n_out, q, s)
    return cnt, out_q, out_s, n_out


@njit(cache=True, inline="always")
def emit_marked(q: int, cnt: int, mode: int, acc: np.ndarray,
                out_q: np.ndarray, out_s: np.ndarray, n_out: int):
    """IDENTIFY/COUNT output for a q already marked for this operation (visited once)."""
    if mode != PAIRS and cnt > 0:
        acc[q] = cnt
        out_q, out_s, n_out = push(out_q, out_s, n_out, q, 0)
    return out_q, out_s, n_out


@njit(cache=True)
def sj_vanilla(qids: np.ndarray, pv: np.ndarray, ps: np.ndarray, base: int, size: int,
               v: float, own_lo: np.ndarray, own_hi: np.ndarray, oth_lo: np.ndarray,
               oth_hi: np.ndarray, dseqs: np.ndarray, xseq: int, reg: np.ndarray,
               snap: np.ndarray, mode: int, mark: np.ndarray, stamp: int, acc: np.ndarray,
               out_q: np.ndarray, out_s: np.ndarray, n_out: int):
    """SJ-Vanilla (§4.1): every subscription probes the key's substructure. O(n log m' + k)."""
    for i in range(qids.shape[0]):
        q = qids[i]
        if not (own_lo[q] <= v <= own_hi[q]):
            continue
        a = lower_bound(pv, base, size, oth_lo[q])
        b = upper_bound(pv, base, size, oth_hi[q])
        if a >= b:
            continue
        cnt, out_q, out_s, n_out = emit_run(q, a, b, ps, dseqs, xseq, reg, snap, mode,
                                            out_q, out_s, n_out)
        out_q, out_s, n_out = record(q, cnt, mode, mark, stamp, acc, out_q, out_s, n_out)
    return out_q, out_s, n_out


@njit(cache=True)
def sj_select_first(center: np.ndarray, left: np.ndarray, right: np.ndarray, root: int,
                    lstart: np.ndarray, lsize: np.ndarray, lkeys: np.ndarray, lids: np.ndarray,
                    rstart: np.ndarray, rsize: np.ndarray, rkeys: np.ndarray, rids: np.ndarray,
                    pv: np.ndarray, ps: np.ndarray, base: int, size: int, v: float,
                    oth_lo: np.ndarray, oth_hi: np.ndarray, dseqs: np.ndarray, xseq: int,
                    reg: np.ndarray, snap: np.ndarray, mode: int, mark: np.ndarray, stamp: int,
                    acc: np.ndarray, out_q: np.ndarray, out_s: np.ndarray, n_out: int):
    """SJ-SelectFirst, improved (§4.1): stab an interval tree on the own ranges with ``v``, then
    each of the n' selected subscriptions searches the key's substructure. O(log n + n' log m' + k).
    """
    u = root
    while u >= 0:
        c = center[u]
        if v < c:
            bs, sz, use_left, nxt = lstart[u], lsize[u], True, left[u]
        elif v > c:
            bs, sz, use_left, nxt = rstart[u], rsize[u], False, right[u]
        else:
            bs, sz, use_left, nxt = lstart[u], lsize[u], True, -1
        for k in range(bs, bs + sz):
            if use_left:
                if lkeys[k] > v:
                    break
                q = lids[k]
            else:
                if -rkeys[k] < v:
                    break
                q = rids[k]
            a = lower_bound(pv, base, size, oth_lo[q])
            b = upper_bound(pv, base, size, oth_hi[q])
            if a >= b:
                continue
            cnt, out_q, out_s, n_out = emit_run(q, a, b, ps, dseqs, xseq, reg, snap, mode,
                                                out_q, out_s, n_out)
            out_q, out_s, n_out = record(q, cnt, mode, mark, stamp, acc, out_q, out_s, n_out)
        u = nxt
    return out_q, out_s, n_out


@njit(cache=True)
def sj_join_first(F: tuple, pv: np.ndarray, ps: np.ndarray, base: int, size: int, v: float,
                  dirn: int, dseqs: np.ndarray, xseq: int, reg: np.ndarray, snap: np.ndarray,
                  mode: int, mark: np.ndarray, stamp: int, acc: np.ndarray,
                  out_q: np.ndarray, out_s: np.ndarray, n_out: int,
                  stack: np.ndarray, hits: np.ndarray):
    """SJ-JoinFirst (§3.2.1): each of the m' joining partners probes the R-tree on (A, C) with
    the join result point (r.A, s.C); each hit is one result pair. O(log m + m' g(n) + k).
    """
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
                    out_q, out_s, n_out = record(q, 1, mode, mark, stamp, acc, out_q, out_s, n_out)
            elif owed(q, s, xseq, dseqs, reg, snap):
                if mode == PAIRS:
                    out_q, out_s, n_out = push(out_q, out_s, n_out, q, s)
                else:
                    out_q, out_s, n_out = record(q, 1, mode, mark, stamp, acc, out_q, out_s, n_out)
    return out_q, out_s, n_out, hits


@njit(cache=True)
def sj_ssi(gids: np.ndarray, gpoint: np.ndarray, F: tuple, pv: np.ndarray, ps: np.ndarray,
           base: int, size: int, v: float, oth_lo: np.ndarray, oth_hi: np.ndarray,
           dseqs: np.ndarray, xseq: int, reg: np.ndarray, snap: np.ndarray, mode: int,
           mark: np.ndarray, stamp: int, acc: np.ndarray, out_q: np.ndarray, out_s: np.ndarray,
           n_out: int, stack: np.ndarray, hits: np.ndarray):
    """SJ-SSI (§3.2.2): per stabbing group with point p, the partners q1 < p <= q2 closest to p
    give the two join result points (v, q1), (v, q2); the group's R-tree returns exactly the
    affected members; each one's pairs are a walk left from q1 and right from q2.
    O(τ (log m' + g(n)) + k).

    Every member's other range contains p, so a box contains a join result point iff it
    contains (v, q1) or (v, q2) (the paper's argument; q1 or q2 missing: that side is empty).
    """
    pt = np.empty(2, dtype=np.float64)
    pt[0] = v
    end = base + size
    for gi in range(gids.shape[0]):
        g = gids[gi]
        i = lower_bound(pv, base, size, gpoint[g])
        for side in range(2):
            j = i - 1 if side == 0 else i
            if j < base or j >= end:
                continue
            pt[1] = pv[j]
            hits, nh = stab_group(F, g, pt, stack, hits)
            for h in range(nh):
                q = hits[h]
                if mark[q] == stamp:
                    continue
                mark[q] = stamp
                if mode == IDENTIFY:
                    out_q, out_s, n_out = push(out_q, out_s, n_out, q, 0)
                    continue
                lo, hi = oth_lo[q], oth_hi[q]
                a = i
                while a > base and pv[a - 1] >= lo:
                    a -= 1
                b = i
                while b < end and pv[b] <= hi:
                    b += 1
                cnt, out_q, out_s, n_out = emit_run(q, a, b, ps, dseqs, xseq, reg, snap, mode,
                                                    out_q, out_s, n_out)
                out_q, out_s, n_out = emit_marked(q, cnt, mode, acc, out_q, out_s, n_out)
    return out_q, out_s, n_out, hits
