"""``ScanRuns`` and the branch-free SJ-SSI probe ``sj_scan`` against a brute force, with churn.

The structure (``matcher/structures/scan_runs.py``) must stay exact under inserts (delta),
deletes (tombstones), group rebuilds, compaction and ``settle``; the probe must report exactly
the members whose own range holds v and whose other range holds a partner, and COUNT/PAIRS the
partners in the other range. Boundaries are pinned on purpose: partners equal to range ends,
v equal to own ends, unbounded ranges, partners on one side of the point only.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.joins import protocol as P
from hotjoin.matcher.joins import select_kernels as K
from hotjoin.matcher.structures.scan_runs import ScanRuns

GRID = [-np.inf, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, np.inf]
POINTS = [2.0, 5.0]


def make_rec(n: int) -> np.ndarray:
    rec = np.zeros((n, 8))
    rec[:, K.C_LO] = -np.inf
    rec[:, P.C_HI] = np.inf
    return rec


def probe(runs: ScanRuns, point: np.ndarray, rec: np.ndarray, pv: np.ndarray, v: float,
          mode: int, xseq: int = 10) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    gids = np.array(sorted(runs.groups), dtype=np.int64)
    runs.ensure_scratch()
    n = rec.shape[0] + 16
    out_q, out_s, acc = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(rec.shape[0], np.int64)
    if mode == K.PAIRS:
        out_q, out_s = np.zeros(n * max(1, pv.shape[0]), np.int64), np.zeros(n * max(1, pv.shape[0]), np.int64)
    ps = np.arange(pv.shape[0], dtype=np.int64)
    m = K.sj_scan(gids, point, runs.arrays(), runs.cand, runs.clo, runs.chi,
                  float(rec[:, P.REG].max()), pv, ps, 0, pv.shape[0], v, rec, K.A_LO,
                  np.zeros(pv.shape[0], np.int64), xseq, mode, acc, out_q, out_s, 0)
    return out_q[:m], out_s[:m], acc


def brute(members: set[int], rec: np.ndarray, pv: np.ndarray, v: float) -> dict[int, int]:
    out = {}
    for q in members:
        if rec[q, K.A_LO] <= v <= rec[q, P.A_HI]:
            c = int(((pv >= rec[q, K.C_LO]) & (pv <= rec[q, P.C_HI])).sum())
            if c:
                out[q] = c
    return out


def check_all(runs: ScanRuns, point: np.ndarray, rec: np.ndarray, members: set[int],
              pv: np.ndarray, v: float) -> None:
    runs.check_invariants()
    want = brute(members, rec, pv, v)
    got, _, _ = probe(runs, point, rec, pv, v, K.IDENTIFY)
    assert sorted(got.tolist()) == sorted(want)
    got, _, acc = probe(runs, point, rec, pv, v, K.COUNT)
    assert {int(q): int(acc[q]) for q in got} == want
    gq, gs, _ = probe(runs, point, rec, pv, v, K.PAIRS)
    pairs = sorted(zip(gq.tolist(), gs.tolist(), strict=True))
    exp = sorted((q, i) for q in want for i in range(pv.shape[0])
                 if rec[q, K.C_LO] <= pv[i] <= rec[q, P.C_HI])
    assert pairs == exp


ops = st.lists(st.tuples(st.sampled_from(["add", "remove", "settle", "probe"]),
                         st.integers(0, 39), st.integers(0, 1),
                         st.sampled_from(GRID), st.sampled_from(GRID),
                         st.sampled_from(GRID[1:-1]), st.sampled_from(GRID[1:-1]),
                         st.lists(st.sampled_from(GRID[1:-1] + [2.5, 4.5]), max_size=6),
                         st.sampled_from(GRID[1:-1] + [2.5])),
               min_size=1, max_size=120)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_scan_runs_churn_matches_brute_force(program: list) -> None:
    """Random inserts, deletes and settles between probes; every probe exact in all modes."""
    rec = make_rec(40)
    point = np.array(POINTS)
    runs = ScanRuns(lambda qs: (rec[qs, K.A_LO], rec[qs, P.A_HI], rec[qs, K.C_LO],
                                rec[qs, P.C_HI]))
    runs.reset({0: np.empty(0, np.int64), 1: np.empty(0, np.int64)})
    where: dict[int, int] = {}
    for op, q, g, clo, chi, alo, ahi, pvals, v in program:
        if op == "add" and q not in where:
            p = POINTS[g]
            rec[q, K.C_LO], rec[q, P.C_HI] = min(clo, p), max(chi, p)  # holds the point
            rec[q, K.A_LO], rec[q, P.A_HI] = min(alo, ahi), max(alo, ahi)
            runs.add(g, q)
            where[q] = g
        elif op == "remove" and where:
            victim = sorted(where)[q % len(where)]
            runs.remove(where.pop(victim), victim)
        elif op == "settle":
            runs.settle()
        elif op == "probe":
            pv = np.sort(np.array(pvals, dtype=np.float64))
            if pv.shape[0]:
                check_all(runs, point, rec, set(where), pv, v)
    runs.check_invariants()


def test_rebuilds_tombstones_and_compaction_stay_exact() -> None:
    """Enough churn to trigger delta rebuilds, tombstone rebuilds and compaction."""
    rng = np.random.default_rng(3)
    n = 6000
    rec = make_rec(n)
    point = np.array([100.0, 500.0, 900.0])
    g_of = rng.integers(0, 3, n)
    p = point[g_of]
    rec[:, K.C_LO] = p - rng.uniform(0, 150, n)
    rec[:, P.C_HI] = p + rng.uniform(0, 150, n)
    rec[::97, K.C_LO] = -np.inf
    rec[::89, P.C_HI] = np.inf
    mid = rng.uniform(0, 1000, n)
    rec[:, K.A_LO], rec[:, P.A_HI] = mid - 100, mid + 100
    runs = ScanRuns(lambda qs: (rec[qs, K.A_LO], rec[qs, P.A_HI], rec[qs, K.C_LO],
                                rec[qs, P.C_HI]))
    half = np.arange(n // 2)
    runs.reset({g: half[g_of[half] == g] for g in range(3)})
    members = set(half.tolist())
    for q in range(n // 2, n):  # one at a time: the deltas fill and rebuild
        runs.add(int(g_of[q]), q)
        members.add(q)
    for q in rng.permutation(n)[: n // 2].tolist():  # tombstones, rebuilds, compaction
        runs.remove(int(g_of[q]), q)
        members.discard(q)
    assert runs.rebuilds > 3
    pv = np.sort(rng.uniform(0, 1000, 40))
    for v in (0.0, 250.0, 500.0, 999.0):
        check_all(runs, point, rec, members, pv, v)
    runs.settle()
    check_all(runs, point, rec, members, pv, 500.0)


def test_boundaries_are_closed() -> None:
    """Partners exactly on a range end and v exactly on an own end are inside (closed ranges);
    partners on one side of the point only; unbounded ranges."""
    rec = make_rec(6)
    rows = [(0, 1, 1.0, 3.0), (0, 1, 2.0, 2.0), (1, 1, -np.inf, 2.0), (0, 0.5, 2.0, np.inf),
            (2, 3, 1.0, 3.0), (-np.inf, np.inf, -np.inf, np.inf)]
    for q, (alo, ahi, clo, chi) in enumerate(rows):
        rec[q, K.A_LO], rec[q, P.A_HI], rec[q, K.C_LO], rec[q, P.C_HI] = alo, ahi, clo, chi
    point = np.array([2.0])
    runs = ScanRuns(lambda qs: (rec[qs, K.A_LO], rec[qs, P.A_HI], rec[qs, K.C_LO],
                                rec[qs, P.C_HI]))
    runs.reset({0: np.arange(5, dtype=np.int64)})
    runs.add(0, 5)  # one member in the delta
    members = set(range(6))
    for pv in ([1.0], [3.0], [2.0], [0.0, 4.0], [1.0, 3.0], [-5.0], [7.0]):
        for v in (0.0, 0.5, 1.0, 1.5, 3.0):
            check_all(runs, point, rec, members, np.array(pv), v)


def test_count_checks_registration_for_late_subscriptions() -> None:
    """COUNT counts only owed pairs when q registered after the tuple's sequence number."""
    rec = make_rec(2)
    rec[:, K.A_LO], rec[:, P.A_HI], rec[:, K.C_LO], rec[:, P.C_HI] = 0, 10, 0, 10
    rec[1, P.REG] = 50  # registered after xseq = 10 and after both partners (seqs 0)
    runs = ScanRuns(lambda qs: (rec[qs, K.A_LO], rec[qs, P.A_HI], rec[qs, K.C_LO],
                                rec[qs, P.C_HI]))
    runs.reset({0: np.array([0, 1])})
    got, _, acc = probe(runs, np.array([5.0]), rec, np.array([4.0, 6.0]), 5.0, K.COUNT)
    assert got.tolist() == [0] and acc[0] == 2
