"""``BaseTable`` (one side's stored tuples: slots, the key order, expiry) against plain-Python
models: inserts, removals, expiry and slot reuse, and a key order enabled late."""

from __future__ import annotations

import numpy as np

from hotjoin.matcher.base_table import BaseTable
from hotjoin.matcher.model import Event


def test_base_table_insert_remove_expire_and_slot_reuse() -> None:
    t = BaseTable("S", capacity=4)
    for i in range(2000):
        t.insert(Event("S", f"s{i}", float(i % 13), 1.0, i), i + 1)
    assert len(t) == 2000
    for i in range(0, 2000, 2):
        t.remove(f"s{i}")
    dropped = t.expire_before(1000)  # odd ids below time 1000
    assert len(dropped) == 500 and len(t) == 500
    assert all(int(t.times[s]) >= 1000 for s in t.live_slots())
    assert t.event("s1") is None and t.event("s1001") == Event("S", "s1001", 1001 % 13, 1.0, 1001)
    for i in range(3000, 4000):  # reuses slots freed by merges, never a referenced one
        t.insert(Event("S", f"s{i}", 0.5, 2.0, i), i + 1)
    order = t.order.items(t.alive)
    assert len(order) == len(t) == 1500
    assert sorted(s for _, s in order) == sorted(t.live_slots().tolist())
    assert all(t.keys[s] == k for k, s in order)


def test_key_order_enabled_late_never_holds_a_reused_slot() -> None:
    """A table without a key order (no band join yet) frees slots at once; once the order is
    enabled (the first band join), freed slots again wait for a merge, so no slot the order
    still holds (dead) is handed to a new tuple. Batches and single inserts, before and
    after."""
    t = BaseTable("S", capacity=4, key_order=False)
    for i in range(300):
        t.insert(Event("S", f"s{i}", float(i % 7), 1.0, i), i + 1)
    for i in range(0, 300, 3):
        t.remove(f"s{i}")
    t.insert_many([f"b{i}" for i in range(50)], np.full(50, 2.5), np.zeros(50),
                  np.arange(50, dtype=np.int64), np.arange(400, 450, dtype=np.int64))
    t.enable_key_order()
    for step in range(400):
        if step % 3 == 0:
            live = sorted(t.slot_of)
            t.remove(live[(7 * step) % len(live)])
        else:
            t.insert(Event("S", f"n{step}", float(step % 5), 0.0, step), 1000 + step)
        order = t.order.items(t.alive)
        assert sorted(s for _, s in order) == sorted(t.live_slots().tolist()), step
        assert all(t.keys[s] == k for k, s in order), step


def test_latest_time_and_end_bound_every_stored_tuple() -> None:
    """``latest_time``/``latest_end`` are the largest start and end stored so far, through every
    way in (insert, insert_many, bulk_load, load_columns), and a delete does not lower them."""
    t = BaseTable("R")
    assert t.latest_time == t.latest_end == -(1 << 63)
    t.insert(Event("R", "a", 1.0, 0.0, 5, end=9), seq=1)
    assert (t.latest_time, t.latest_end) == (5, 9)
    t.insert_many(["b", "c"], np.array([1.0, 2.0]), np.zeros(2), np.array([3, 7]),
                  np.array([2, 3]), ends=np.array([20, 7]))
    assert (t.latest_time, t.latest_end) == (7, 20)
    t.remove("b")
    assert (t.latest_time, t.latest_end) == (7, 20)
    t.bulk_load([Event("R", "d", 0.0, 0.0, 11)], [4])
    assert (t.latest_time, t.latest_end) == (11, 20)
    u = BaseTable("S")
    u.load_columns(["x", "y"], np.zeros(2), np.zeros(2), np.array([-4, -2]), np.array([1, 2]))
    assert (u.latest_time, u.latest_end) == (-2, -2)
    u.insert_many([], np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64),
                  np.zeros(0, dtype=np.int64))
    assert (u.latest_time, u.latest_end) == (-2, -2)
