"""Select-join kernels beyond the random programs: the flat R-tree forest against brute force,
and large outputs (PAIRS buffer overflow and rerun, COUNT, IDENTIFY) agreeing across strategies.

The random programs of ``test_select`` are small, so every output fits the initial
buffers; here one event yields tens of thousands of pairs, and the forest goes through delta
lists, re-packs, removals of static members and compaction.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher import Engine
from hotjoin.matcher.model import Event, Range, SelectJoin, WindowJoin
from hotjoin.matcher.oracle import OracleEngine
from hotjoin.matcher.structures.rect_index import BoxForest

SJ = ("SJ-JoinFirst", "SJ-SelectFirst", "SJ-Vanilla", "SJ-SSI", "SJ-Hotspot")


def _brute(boxes: dict[int, tuple[np.ndarray, np.ndarray]], pt: np.ndarray) -> list[int]:
    return sorted(q for q, (lo, hi) in boxes.items() if np.all(lo <= pt) and np.all(pt <= hi))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), dims=st.sampled_from([2, 3]))
def test_box_forest_stab_equals_brute_force(seed: int, dims: int) -> None:
    rng = np.random.default_rng(seed)
    n_max = 400
    lo_all = rng.uniform(0, 100, (n_max, dims))
    hi_all = lo_all + rng.uniform(0, 30, (n_max, dims))
    lo_all[rng.random((n_max, dims)) < 0.05] = -np.inf
    hi_all[rng.random((n_max, dims)) < 0.05] = np.inf

    def coords(qs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return lo_all[qs], hi_all[qs]

    f = BoxForest(dims)
    groups = {g: rng.choice(n_max, 0, replace=False) for g in range(3)}
    member: dict[int, int] = {}
    first = rng.permutation(n_max)[:120]
    init = {g: first[g::3].astype(np.int64) for g in range(3)}
    f.reset_groups(init, coords)
    for g, qs in init.items():
        for q in qs.tolist():
            member[q] = g
    del groups
    free = [q for q in range(n_max) if q not in member]
    for _ in range(600):
        op = rng.random()
        if op < 0.5 and free:
            q = free.pop(int(rng.integers(len(free))))
            g = int(rng.integers(3))
            f.add(g, q, coords)
            member[q] = g
        elif member:
            q = list(member)[int(rng.integers(len(member)))]
            f.remove(member.pop(q), q)
            free.append(q)
        if rng.random() < 0.1:
            pt = rng.uniform(-5, 135, dims)
            for g in range(3):
                boxes = {q: (lo_all[q], hi_all[q]) for q, gg in member.items() if gg == g}
                assert sorted(f.stab_py(g, pt.tolist())) == _brute(boxes, pt)
    assert f.repacks > 0


def _events(n_keys: int, per_key: int, side: str, rng: np.random.Generator) -> list[Event]:
    out = []
    for k in range(n_keys):
        for j in range(per_key):
            out.append(Event(side, f"{side}{k}-{j}", float(k), float(rng.integers(0, 100)), 0))
    return out


@pytest.fixture(scope="module")
def big_case() -> tuple[list[SelectJoin], list[Event], list[Event]]:
    rng = np.random.default_rng(5)
    subs = []
    for _ in range(500):
        a0, c0 = rng.integers(0, 100, 2)
        subs.append(SelectJoin(a=Range(float(a0), float(a0 + rng.integers(0, 60))),
                               c=Range(float(c0), float(c0 + rng.integers(0, 60)))))
    subs.append(SelectJoin())  # unbounded both ways
    stored = _events(2, 250, "S", rng)
    incoming = [Event("R", f"r{i}", float(i % 2), float(rng.integers(0, 100)), 0)
                for i in range(6)]
    return subs, stored, incoming


def _run(name: str, case, mode: str, options: dict | None = None):
    subs, stored, incoming = case
    e = Engine(strategy={"select": name}, options=options or {"alpha": 0.05})
    e.subscribe_many(subs)
    e.publish_many(stored)
    out = []
    for ev in incoming:
        if mode == "pairs":
            m = e.publish_columnar(ev)
            out.append(Counter(zip(m.subscription_ids.tolist(), m.r_ids.tolist(),
                                   m.s_ids.tolist(), strict=True)))
        elif mode == "count":
            a = e.publish_affected(ev)
            out.append(dict(zip(a.subscription_ids.tolist(), a.counts.tolist(), strict=True)))
        else:
            out.append(sorted(e.publish_identify(ev).tolist()))
    return out


@pytest.mark.parametrize("mode", ["pairs", "count", "identify"])
def test_large_outputs_agree_across_strategies(big_case, mode: str) -> None:
    ref = _run("SJ-Vanilla", big_case, mode)
    if mode == "pairs":
        assert max(sum(c.values()) for c in ref) > 4096  # beyond the initial output buffers
        subs, stored, incoming = big_case
        o = OracleEngine()
        for s in subs:
            o.subscribe(s)
        for ev in stored:
            o.publish(ev)
        for ev, got in zip(incoming, ref, strict=True):
            want = Counter((d.subscription_id, d.r_id, d.s_id) for d in o.publish(ev))
            assert got == want
    for name in SJ:
        assert _run(name, big_case, mode) == ref, name
    for cost in (0.0, 1e18):  # SJ-Hotspot's scattered part forced to SelectFirst / SSI
        assert _run("SJ-Hotspot", big_case, mode, {"alpha": 0.05, "scattered_sf_cost": cost}) == ref


def test_rec_rows_of_select_and_window_subscriptions() -> None:
    e = Engine()
    a = e.subscribe(SelectJoin(a=Range(1, 2), c=Range(None, 5)))
    b = e.subscribe(WindowJoin(a=Range(0, 1), c=Range(3, 4), w=7), snapshot=True)
    assert e.cols.rec[a].tolist() == [0.0, 0.0, 1.0, 2.0, -np.inf, 5.0, float(e.cols.reg[a]), 0.0]
    assert e.cols.rec[b].tolist() == [0.0, 7.0, 0.0, 1.0, 3.0, 4.0, float(e.cols.reg[b]), 1.0]
