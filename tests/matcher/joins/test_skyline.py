"""Skylines of WJ-SSI (paper 004 §3.3.2) equal a brute-force skyline after every operation.

``SkylineIndex`` is driven directly (inserts, deletes of skyline and non-skyline points, stabbing
points that move, window starts that advance and move back) and inside an engine running WJ-SSI
(subscription churn, disorder, retention); after each step every key's skylines — brought up to
date lazily by ``refresh`` — must equal :func:`brute_force_skylines` of the stored tuples in the
window.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.engine import Engine
from hotjoin.matcher.joins.skyline import SkylineIndex, brute_force_skylines, skyline_pass
from hotjoin.matcher.model import Event, Range, WindowJoin


def _stored(table: BaseTable, key: float, omega: int) -> list[tuple[float, int]]:
    return [(float(table.values[s]), int(table.times[s])) for s in table.slot_of.values()
            if table.keys[s] == key and table.times[s] >= omega]


def _check_all(sky: SkylineIndex, table: BaseTable, omega: int) -> None:
    for key in {float(table.keys[s]) for s in table.slot_of.values()}:
        want = brute_force_skylines(sky.points, _stored(table, key, omega))
        assert sky.skylines(key, omega) == want, (key, omega, sky.points)


ops = st.lists(st.tuples(st.sampled_from(["ins", "ins", "ins", "del", "pts", "omega", "reload"]),
                         st.integers(0, 2), st.integers(0, 8), st.integers(0, 9),
                         st.lists(st.integers(0, 8), max_size=4)), min_size=5, max_size=60)


@settings(max_examples=150, deadline=None)
@given(ops=ops)
def test_skyline_index_matches_brute_force(ops: list) -> None:
    table = BaseTable("S")
    table.enable_key_index()
    sky = SkylineIndex(table)
    omega, t_now, n = 0, 0, 0
    for op, key, c, dt, pts in ops:
        if op == "ins":
            t_now += dt % 3
            n += 1
            table.insert(Event("S", f"s{n}", float(key), float(c), t_now - dt % 4), n)
        elif op == "del" and table.slot_of:
            ids = sorted(table.slot_of)
            table.remove(ids[(c * 7 + dt) % len(ids)])
        elif op == "pts":
            sky.set_points(np.array(sorted(set(float(p) for p in pts)), dtype=np.float64))
        elif op == "omega":
            omega = max(-5, omega + dt - 4)  # forward (trim) or back (w_max grew: extend)
        elif op == "reload":  # the table rebuilds its key index: a new generation of groups
            table.load_columns([], np.empty(0), np.empty(0), np.empty(0, dtype=np.int64),
                               np.empty(0, dtype=np.int64))
        sky.check_invariants()
        _check_all(sky, table, omega)
        sky.check_invariants()
        _check_sizes(sky, table)


def _check_sizes(sky: SkylineIndex, table: BaseTable) -> None:
    """Every key's skylines held as current in the store, read without a refresh (kept by
    the insert and remove hooks alone), are the brute-force skylines of its tuples in the
    entry's window; the batch router's compiled lookup of sizes (``current_sizes``) gives
    their size, −1 for a key not current."""
    ix = table.key_index
    keys = np.array(sorted({float(table.keys[s]) for s in table.slot_of.values()}))
    if keys.shape[0] == 0:
        return
    gs = ix.lookup_many(keys)
    out = np.full((keys.shape[0], 2), np.nan)
    sky.current_sizes(gs, keys, out, 1)
    for k, key in enumerate(keys.tolist()):
        cur = sky.current(key)
        if cur is None:
            assert out[k, 1] == -1.0 and sky.fresh_size(key) == -1.0, key
            continue
        omega, cs, ts, _ = cur
        want = brute_force_skylines(sky.points, _stored(table, key, omega))
        held = {(c, t) for pts in want.values() for c, t in pts}
        assert set(zip(cs.tolist(), ts.tolist(), strict=True)) == held, (key, omega)
        assert out[k, 1] == len(held) == sky.fresh_size(key), (key, out[k, 1], len(held))
    assert np.isnan(out[:, 0]).all()  # only column j is written


def test_insert_replaces_a_run_and_delete_marks_stale() -> None:
    table = BaseTable("S")
    table.enable_key_index()
    sky = SkylineIndex(table)
    sky.set_points(np.array([10.0]))
    for i, (c, t) in enumerate([(11, 1), (12, 2), (13, 3), (9, 1), (8, 4)]):
        table.insert(Event("S", f"s{i}", 1.0, float(c), t), i + 1)
    assert sky.skylines(1.0, 0) == {(0, "R"): [(11.0, 1), (12.0, 2), (13.0, 3)],
                                   (-1, "L"): [(8.0, 4), (9.0, 1)]}
    table.insert(Event("S", "new", 1.0, 11.5, 5), 9)   # dominates 12 and 13 (a consecutive run)
    assert sky.inserts == 1 and sky.recomputes == 1
    assert sky.skylines(1.0, 0)[(0, "R")] == [(11.0, 1), (11.5, 5)]
    table.remove("s0")                                   # a skyline point: stale, one pass
    assert sky.skylines(1.0, 0)[(0, "R")] == [(11.5, 5)]
    assert sky.recomputes == 2
    assert sky.skylines(1.0, 3)[(0, "R")] == [(11.5, 5)]  # trim: ω moved forward
    assert sky.trims >= 1


def test_relative_pass_handles_points_on_both_sides_in_time() -> None:
    vals = np.array([1.0, 2.0, 3.0])
    slots = np.arange(3)
    times = np.array([10, 14, 11])
    c, t, s, f = skyline_pass(vals, slots, times, 0, 3, np.array([0.0]), 0, True, 12, 5)
    # scores −|12 − t| = −2, −2, −1: R from p=0 keeps 1.0 (−2) and 3.0 (−1)
    assert s.tolist() == [0, 2]


@pytest.mark.parametrize("lateness,retention", [(0, None), (3, None), (2, 6)])
def test_engine_skylines_after_every_operation(lateness: int, retention: int | None) -> None:
    rng = random.Random(lateness * 10 + (retention or 0))
    e = Engine(lateness=lateness, retention=retention,
               strategy={"band": "BJ-SSI", "select": "SJ-SSI", "window": "WJ-SSI"})
    sids = [e.subscribe(WindowJoin(c=Range(k, k + rng.randint(0, 4)), w=rng.randint(0, 6)))
            for k in range(0, 20, 2)]
    t = 0
    for i in range(400):
        t += rng.randint(0, 2)
        side = rng.choice("RS")
        tm = t - rng.randint(0, lateness)
        e.publish(Event(side, f"{side}{i}", float(rng.randint(0, 3)), float(rng.randint(0, 22)), tm))
        if i % 17 == 0 and sids:
            e.unsubscribe(sids.pop(rng.randrange(len(sids))))
        if i % 13 == 0:
            sids.append(e.subscribe(WindowJoin(c=Range(rng.randint(0, 20), 22), w=rng.randint(0, 9))))
        if i % 11 == 0 and e.tables["S"].slot_of:
            e.delete("S", rng.choice(sorted(e.tables["S"].slot_of)))
        w = e.window
        for d, table in ((1, e.tables["S"]), (-1, e.tables["R"])):
            sky = w.skies[d]
            sky.set_points(w.groups[d].points())
            _check_all(sky, table, e.watermark - w.wmax)


def test_store_survives_group_reuse_and_renumbering() -> None:
    """The store by key-index group: a group freed by one key and given to another reads as
    not current for the newcomer; a key index rebuilt with new group ids leaves no entry
    claiming a skyline the index no longer holds."""
    table = BaseTable("S")
    table.enable_key_index()
    sky = SkylineIndex(table)
    sky.set_points(np.array([10.0]))
    table.insert(Event("S", "a_old", 5.0, 11.0, 0), 1)   # before ω = 2: in no skyline
    sky.refresh(5.0, 2)                                   # key 5.0: current, size 0
    g = table.key_index.lookup(5.0)
    table.remove("a_old")                                 # not a skyline point: still current
    table.insert(Event("S", "b", 7.0, 11.0, 3), 2)        # a new key takes the freed group
    assert table.key_index.lookup(7.0) == g
    out = np.zeros((1, 1))
    sky.current_sizes(np.array([g]), np.array([7.0]), out, 0)
    assert out[0, 0] == -1.0                              # 5.0's entry is not 7.0's
    sky.check_invariants()
    # keys inserted out of order, every skyline current, then the index is rebuilt
    for i, key in enumerate((9.0, 1.0, 3.0)):
        table.insert(Event("S", f"k{i}", key, 11.0, 4), 10 + i)
    for key in (7.0, 9.0, 1.0, 3.0):
        sky.refresh(key, 2)
    sky.check_invariants()
    table.load_columns([], np.empty(0), np.empty(0), np.empty(0, dtype=np.int64),
                       np.empty(0, dtype=np.int64))
    sky.refresh(1.0, 2)                                   # the new generation clears the rest
    sky.check_invariants()
    _check_sizes(sky, table)


def test_store_keeps_its_skylines_while_the_key_index_grows() -> None:
    """Skylines held for the first keys survive the store's per-group arrays growing (keys
    added later take group ids beyond them) and the pool growing and compacting under new
    entries: every current entry still equals the brute force, read without a refresh."""
    table = BaseTable("S")
    table.enable_key_index()
    sky = SkylineIndex(table)
    sky.set_points(np.array([3.0, 6.0]))
    rng = random.Random(3)
    n = 0
    for wave in range(4):  # 10, then 60, 200 and 400 keys in all
        for key in range((0, 10, 60, 200)[wave], (10, 60, 200, 400)[wave]):
            for _ in range(6):
                n += 1
                table.insert(Event("S", f"s{n}", float(key), float(rng.randint(0, 9)),
                                   rng.randint(0, 20)), n)
        for key in range(0, (10, 60, 200, 400)[wave], 3):
            sky.refresh(float(key), 2)
        sky.check_invariants()
        _check_sizes(sky, table)
    assert sky.key.shape[0] >= 400 and sky.size() > 0
    held = sum(sky.current(float(k)) is not None for k in range(400))
    assert held == len(range(0, 400, 3))
