"""Stabbing groups of ranges as contiguous, scan-ordered flat runs: SJ-SSI's per-group probe.

Paper 004 §3.2.2 probes each stabbing group (point p) of the *other* ranges with the two join
result points (v, x1), (v, x2), where x1 < p <= x2 are the partners nearest to p. Every member's
other range ``[olo, ohi]`` contains p, so it holds a partner iff ``olo <= x1`` or ``ohi >= x2``:
the members holding x1 are a *prefix* of the group sorted by ``olo`` ascending, those holding x2
a prefix of the group sorted by ``ohi`` descending. The paper answers the probe with an R-tree
per group; this module answers it by scanning those two prefixes (the flat prototype of
``docs/benchmarks/engine.md``, ~2 ns per candidate against ~8 ns with a data-dependent branch):

* each group's members are stored twice, as a run sorted by ``olo`` (columns ``l_key = olo``,
  ``l_wlo``/``l_whi`` = own bounds, ``l_ohi``, ``l_q``) and a run sorted by ``ohi`` descending (``r_key =
  ohi``, ``r_olo``, ``r_wlo``/``r_whi``, ``r_q``), so a scan reads each column sequentially and
  never fetches a subscription by id;
* the scan is branch-free: it writes every candidate's id and advances the output cursor by the
  truth value of the own-range test (``own_lo <= v <= own_hi``; on the ``ohi`` run also "not
  already reported on the ``olo`` run", i.e. ``olo > x1``).

Dynamic (inserts, deletes, hotspot promotion/demotion): a new member goes to its group's small
*delta* (subscription ids, tested against their record rows); a removed main-run member becomes a
*tombstone* (id −1, own range emptied: the test is false, the scan needs no branch). A group is
rebuilt from its live members when its delta exceeds ``max(32, √n)`` or a quarter of its run is
dead, so a clean group is scanned with no delta at all; regions abandoned by rebuilds are
compacted away when they exceed half of the arrays. Rebuilding one group costs O(n_g log n_g);
a bulk :meth:`ScanRuns.reset` is two lexsorts over all members.

Invariant: every live member of group ``u`` is either exactly one live position of its main
region (in both runs: ``pos_l[q]``, ``pos_r[q]``) or one entry of delta group ``u``.

>>> runs = ScanRuns(lambda qs: (np.zeros(len(qs)), np.ones(len(qs)),
...                             np.array([0., 2., 4.])[qs], np.array([6., 8., 9.])[qs]))
>>> runs.reset({0: np.array([0, 1, 2])})
>>> runs.members(0).tolist()
[0, 1, 2]
>>> runs.remove(0, 1); runs.add(0, 1); sorted(runs.members(0).tolist())
[0, 1, 2]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from hotjoin.matcher.structures.group_pool import GroupedSortedPool

MAX_FINITE = float(np.finfo(np.float64).max)

# own_lo, own_hi, oth_lo, oth_hi of subscriptions qs
CoordFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]


class ScanArrays(NamedTuple):
    """A :class:`ScanRuns` as kernels read it (:meth:`ScanRuns.arrays`). Group ``u``'s main
    region is positions ``[gstart[u], gstart[u] + gcount[u])`` of two runs: the ``l_*`` run
    sorted by ``l_key`` (the lower end of the range that orders the groups) ascending, with the
    copied bounds ``l_wlo``/``l_whi`` and that range's upper end ``l_ohi``; the ``r_*`` run sorted
    by ``r_key`` (its upper end) descending, with its lower end ``r_olo`` and the copied bounds
    ``r_wlo``/``r_whi``; ids ``l_q``/``r_q`` (−1: tombstone). Its delta is
    ``dids[dstart[u] : dstart[u] + dsize[u]]``."""

    gstart: np.ndarray
    gcount: np.ndarray
    l_key: np.ndarray
    l_wlo: np.ndarray
    l_whi: np.ndarray
    l_q: np.ndarray
    r_key: np.ndarray
    r_olo: np.ndarray
    r_wlo: np.ndarray
    r_whi: np.ndarray
    r_q: np.ndarray
    dstart: np.ndarray
    dsize: np.ndarray
    dids: np.ndarray
    l_ohi: np.ndarray


class ScanScratch(NamedTuple):
    """A probe's scratch (:meth:`ScanRuns.probe_scratch`), one slot per member: PAIRS'
    candidate ids ``cand`` and the candidates' copied bounds ``clo``/``chi``."""

    cand: np.ndarray
    clo: np.ndarray
    chi: np.ndarray


class ScanRuns:
    """Per group: a run sorted by the other range's lower end and one sorted by its upper end
    (descending), each with the own bounds copied in; plus a delta and tombstones (module doc).

    Groups are small dense ids ``u`` (the caller maps partition group ids to them).
    """

    def __init__(self, coords: CoordFn, lean: bool = False) -> None:
        self.coords = coords
        #: without the ``l_ohi`` and ``r_olo`` copies (SJ-SelectFirst's own-range runs never
        #: read them: 16 bytes per member less, 36 MB at 10^6 subscriptions in both directions)
        self.lean = lean
        self.rebuilds = 0
        self._clear(64)

    def _clear(self, cap: int) -> None:
        self.l_key = np.zeros(cap)
        self.l_wlo = np.zeros(cap)
        self.l_whi = np.zeros(cap)
        self.l_ohi = np.zeros(0 if self.lean else cap)
        self.l_q = np.full(cap, -1, dtype=np.int64)
        self.r_key = np.zeros(cap)
        self.r_olo = np.zeros(0 if self.lean else cap)
        self.r_wlo = np.zeros(cap)
        self.r_whi = np.zeros(cap)
        self.r_q = np.full(cap, -1, dtype=np.int64)
        self.used = 0          # positions [0, used) hold regions (live or abandoned)
        self.garbage = 0       # positions of abandoned regions
        self.gstart = np.zeros(16, dtype=np.int64)
        self.gcount = np.zeros(16, dtype=np.int64)
        self.gdead = np.zeros(16, dtype=np.int64)
        self.pos_l = np.full(64, -1, dtype=np.int64)
        self.pos_r = np.full(64, -1, dtype=np.int64)
        self.delta = GroupedSortedPool()
        self.groups: set[int] = set()
        self.n_members = 0
        self._scratch(64)

    def _scratch(self, n: int) -> None:
        """Per-probe scratch for ``n`` members: PAIRS ids, candidates' other-range bounds."""
        self.cand = np.zeros(n, dtype=np.int64)
        self.clo = np.zeros(n)
        self.chi = np.zeros(n)

    # -- sizing -------------------------------------------------------------------------------
    def _grow_groups(self, u: int) -> None:
        if u < self.gstart.shape[0]:
            return
        n = max(2 * self.gstart.shape[0], u + 1)
        for name in ("gstart", "gcount", "gdead"):
            old = getattr(self, name)
            new = np.zeros(n, dtype=np.int64)
            new[: old.shape[0]] = old
            setattr(self, name, new)

    def _ensure_q(self, qmax: int) -> None:
        if qmax >= self.pos_l.shape[0]:
            n = max(qmax + 1, 2 * self.pos_l.shape[0])
            for name in ("pos_l", "pos_r"):
                old = getattr(self, name)
                new = np.full(n, -1, dtype=np.int64)
                new[: old.shape[0]] = old
                setattr(self, name, new)

    def _ensure_cap(self, need: int) -> None:
        cap = self.l_key.shape[0]
        if need <= cap:
            return
        cap = max(need, 2 * cap)
        copies = ("l_key", "l_wlo", "l_whi", "r_key", "r_wlo", "r_whi") + (
            () if self.lean else ("l_ohi", "r_olo"))
        for name in copies:
            old = getattr(self, name)
            new = np.zeros(cap)
            new[: self.used] = old[: self.used]
            setattr(self, name, new)
        for name in ("l_q", "r_q"):
            old = getattr(self, name)
            new = np.full(cap, -1, dtype=np.int64)
            new[: self.used] = old[: self.used]
            setattr(self, name, new)

    # -- building -----------------------------------------------------------------------------
    def _write(self, us: np.ndarray, qs: np.ndarray, gg: np.ndarray) -> None:
        """Append one main region per group ``us[j]`` holding the members ``qs[gg == j]``."""
        n = qs.shape[0]
        self._ensure_cap(self.used + n)
        wlo, whi, olo, ohi = (np.asarray(x, dtype=np.float64) for x in self.coords(qs))
        # the copied upper bound of an unbounded range is the largest finite double: every
        # value (finite) compares as against +inf, and a scan's "next partner <= whi" is false
        # when there is no next partner (+inf), with no extra test in the scan's loop
        whi = np.minimum(whi, MAX_FINITE)
        base = self.used
        ol = np.lexsort((olo, gg))
        orr = np.lexsort((-ohi, gg))
        sl = slice(base, base + n)
        self.l_key[sl], self.l_wlo[sl], self.l_whi[sl], self.l_q[sl] = (
            olo[ol], wlo[ol], whi[ol], qs[ol])
        self.r_key[sl], self.r_wlo[sl], self.r_whi[sl], self.r_q[sl] = (
            ohi[orr], wlo[orr], whi[orr], qs[orr])
        if not self.lean:
            self.l_ohi[sl], self.r_olo[sl] = ohi[ol], olo[orr]
        if n:
            self._ensure_q(int(qs.max()))
            pos = np.arange(base, base + n, dtype=np.int64)
            self.pos_l[qs[ol]] = pos
            self.pos_r[qs[orr]] = pos
        sizes = np.bincount(gg, minlength=us.shape[0]).astype(np.int64)
        self.gstart[us] = base + np.concatenate(([0], np.cumsum(sizes)[:-1]))
        self.gcount[us] = sizes
        self.gdead[us] = 0
        self.used += n

    def reset(self, groups: dict[int, np.ndarray]) -> None:
        """Replace everything by ``{u: member ids}``. O(n log n)."""
        n = sum(int(m.shape[0]) for m in groups.values())
        self._clear(max(64, n + n // 8))
        us = np.fromiter(groups.keys(), dtype=np.int64, count=len(groups))
        if us.shape[0]:
            self._grow_groups(int(us.max()))
        for u in us.tolist():
            self.groups.add(u)
            self.delta.add_group(u)
        self.n_members = n
        if n:
            qs = np.concatenate([np.asarray(m, dtype=np.int64) for m in groups.values()])
            gg = np.repeat(np.arange(us.shape[0]), [m.shape[0] for m in groups.values()])
            self._write(us, qs, gg)

    def ensure_scratch(self) -> None:
        """Room in the per-probe scratch for every member (called before each probe; grown
        lazily so member-by-member loads and idle directions cost no scratch memory)."""
        if self.n_members + 16 > self.cand.shape[0]:
            self._scratch(self.n_members + self.n_members // 4 + 64)

    def probe_scratch(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The per-probe scratch, with room for every member, as a kernel bundle:
        :class:`ScanScratch`' fields as a plain tuple."""
        self.ensure_scratch()
        return (self.cand, self.clo, self.chi)

    def members(self, u: int) -> np.ndarray:
        """The live members of group ``u`` (main run order, then delta). O(n_u)."""
        s, c = int(self.gstart[u]), int(self.gcount[u])
        run = self.l_q[s: s + c]
        ds, dn = int(self.delta.start[u]), int(self.delta.size[u])
        return np.concatenate([run[run >= 0], self.delta.ids[ds: ds + dn]]).astype(np.int64)

    def add_group(self, u: int) -> None:
        self._grow_groups(u)
        self.groups.add(u)
        self.gcount[u] = self.gdead[u] = 0
        self.delta.add_group(u)

    def drop_group(self, u: int) -> None:
        """Forget group ``u`` (all its members must have been removed)."""
        self.garbage += int(self.gcount[u])
        self.gcount[u] = self.gdead[u] = 0
        self.delta.drop_group(u)
        self.groups.discard(u)

    def add(self, u: int, q: int) -> None:
        """Member ``q`` joins group ``u`` (its delta; the group is rebuilt when that grows)."""
        self._ensure_q(q)
        self.pos_l[q] = self.pos_r[q] = -1
        self.delta.insert(u, float(q), q)
        self.n_members += 1
        if self.delta.size[u] > max(32, math.isqrt(int(self.gcount[u]))):
            self.rebuild([u])

    def add_many(self, u: int, qs: np.ndarray) -> None:
        """Members ``qs`` join group ``u`` at once: one rewrite of the group instead of a delta
        insert per member (a hotspot promotion moves a whole group, paper 004 §2.2)."""
        qs = np.asarray(qs, dtype=np.int64)
        if qs.shape[0] == 0:
            return
        self._ensure_q(int(qs.max()))
        self.pos_l[qs] = self.pos_r[qs] = -1
        members = np.concatenate([self.members(u), qs])
        self.n_members += int(qs.shape[0])
        self.rebuilds += 1
        self.garbage += int(self.gcount[u])
        self.delta.drop_group(u)
        self.delta.add_group(u)
        if self.garbage > max(4096, self.used // 2):
            self._compact({u: members})
            return
        self._write(np.array([u], dtype=np.int64), members, np.zeros(members.shape[0], dtype=np.int64))

    def remove(self, u: int, q: int) -> None:
        """Member ``q`` leaves group ``u`` (tombstone in the runs, or out of the delta)."""
        pl = int(self.pos_l[q])
        self.n_members -= 1
        if pl < 0:
            self.delta.remove(u, float(q), q)
            return
        pr = int(self.pos_r[q])
        self.pos_l[q] = self.pos_r[q] = -1
        self.l_q[pl] = self.r_q[pr] = -1
        self.l_wlo[pl] = self.r_wlo[pr] = np.inf
        self.l_whi[pl] = self.r_whi[pr] = -np.inf
        self.gdead[u] += 1
        if self.gdead[u] > max(32, int(self.gcount[u]) // 4):
            self.rebuild([u])

    def rebuild(self, us: list[int]) -> None:
        """Rewrite the groups ``us`` from their live members (no delta, no tombstones)."""
        if not us:
            return
        self.rebuilds += 1
        parts = [self.members(u) for u in us]
        for u in us:
            self.garbage += int(self.gcount[u])
            self.delta.drop_group(u)
            self.delta.add_group(u)
        if self.garbage > max(4096, self.used // 2):
            self._compact(dict(zip(us, parts, strict=True)))
            return
        self._write(np.asarray(us, dtype=np.int64), np.concatenate(parts).astype(np.int64),
                    np.repeat(np.arange(len(us)), [p.shape[0] for p in parts]))

    def _compact(self, fresh: dict[int, np.ndarray]) -> None:
        groups = {u: fresh[u] if u in fresh else self.members(u) for u in sorted(self.groups)}
        n_members = self.n_members
        self.reset(groups)
        self.n_members = n_members

    def settle(self) -> None:
        """Rewrite everything compactly when any group has a delta, a tombstone or abandoned
        regions (after a bulk load that arrived member by member, e.g. hotspot promotions), so
        probes scan no delta and the arrays hold no garbage. O(n log n)."""
        if not self.groups:
            return
        us = np.fromiter(self.groups, dtype=np.int64, count=len(self.groups))
        if np.any(self.delta.size[us] > 0) or self.garbage or np.any(self.gdead[us] > 0):
            self.rebuilds += 1
            self._compact({})  # one bulk rewrite: no delta, no tombstones, no abandoned region

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The runs as a kernel bundle: :class:`ScanArrays`' fields as a plain tuple (kernels
        name it back; see ``matcher.joins.protocol``)."""
        return (self.gstart, self.gcount, self.l_key, self.l_wlo, self.l_whi, self.l_q,
                self.r_key, self.r_olo, self.r_wlo, self.r_whi, self.r_q, self.delta.start,
                self.delta.size, self.delta.ids, self.l_ohi)

    def check_invariants(self) -> None:
        """Assert the module invariant (tests)."""
        seen = 0
        for u in self.groups:
            s, c = int(self.gstart[u]), int(self.gcount[u])
            lk, rk = self.l_key[s: s + c], self.r_key[s: s + c]
            assert np.all(lk[:-1] <= lk[1:]) and np.all(rk[:-1] >= rk[1:])
            lq, rq = self.l_q[s: s + c], self.r_q[s: s + c]
            assert sorted(lq[lq >= 0].tolist()) == sorted(rq[rq >= 0].tolist())
            assert int((lq < 0).sum()) == int(self.gdead[u])
            for j in np.flatnonzero(lq >= 0).tolist():
                q = int(lq[j])
                assert self.pos_l[q] == s + j and self.r_q[self.pos_r[q]] == q
            seen += int((lq >= 0).sum()) + int(self.delta.size[u])
        assert seen == self.n_members

    def memory_bytes(self) -> int:
        return sum(getattr(self, n).nbytes for n in (
            "l_key", "l_wlo", "l_whi", "l_ohi", "l_q", "r_key", "r_olo", "r_wlo", "r_whi", "r_q",
            "gstart", "gcount", "gdead", "pos_l", "pos_r", "cand", "clo", "chi")) + self.delta.memory_bytes()
