"""KeyIndex batch lookups (``lookup_many``) against single lookups under random churn."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.structures.key_index import KeyIndex

ops = st.lists(
    st.one_of(
        st.tuples(st.just("add_many"), st.lists(st.integers(-3, 40), min_size=0, max_size=30)),
        st.tuples(st.just("add"), st.integers(-3, 40)),
        st.tuples(st.just("remove"), st.integers(0, 10_000)),
        st.tuples(st.just("lookup"), st.lists(st.integers(-5, 45), min_size=0, max_size=20)),
    ),
    max_size=60)


@settings(max_examples=300, deadline=None)
@given(program=ops)
def test_lookup_many_agrees_with_the_dict(program: list[tuple[str, Any]]) -> None:
    """Batch adds (new keys, keys dropped and back again), single adds, removes that drop
    groups: every batch lookup matches the dict."""
    ix = KeyIndex()
    stored: list[tuple[float, int]] = []  # (key, slot)
    slot = 0
    for op, arg in program:
        if op == "add_many":
            keys = np.array(arg, dtype=np.float64) * 0.5
            slots = np.arange(slot, slot + len(arg), dtype=np.int64)
            ix.add_many(keys, np.zeros(len(arg)), np.zeros(len(arg), dtype=np.int64), slots)
            stored += list(zip(keys.tolist(), slots.tolist(), strict=True))
            slot += len(arg)
        elif op == "add":
            ix.add(arg * 0.5, 0.0, 0, slot)
            stored.append((arg * 0.5, slot))
            slot += 1
        elif op == "remove" and stored:
            key, s = stored.pop(arg % len(stored))
            ix.remove(key, 0.0, 0, s)
        probe = np.array(arg if op == "lookup" else range(-5, 45), dtype=np.float64) * 0.5
        want = [ix.group.get(k, -1) for k in probe.tolist()]
        assert ix.lookup_many(probe).tolist() == want
        assert set(ix.group) == {k for k, _ in stored}


def test_unique_keys_batch_after_batch_stay_exact() -> None:
    """A table whose keys are all new (the server's R side), batch after batch."""
    ix = KeyIndex()
    rng = np.random.default_rng(3)
    keys = rng.permutation(200_000).astype(np.float64)
    for b in range(200):
        k = keys[b * 1000:(b + 1) * 1000]
        ix.add_many(k, np.zeros(1000), np.zeros(1000, dtype=np.int64),
                    np.arange(b * 1000, (b + 1) * 1000, dtype=np.int64))
    probe = np.concatenate([keys[::997], -1.0 - keys[:50]])
    got = ix.lookup_many(probe)
    assert got.tolist() == [ix.group.get(k, -1) for k in probe.tolist()]
    assert (got[: keys[::997].shape[0]] >= 0).all() and (got[-50:] == -1).all()


def _groups(ix: KeyIndex, pool_name: str) -> dict[float, list[tuple[float, int]]]:
    pool = getattr(ix, pool_name)
    return {k: pool.members(g) for k, g in ix.group.items()}


@settings(max_examples=200, deadline=None)
@given(program=ops, switch=st.integers(0, 60))
def test_time_order_added_later_equals_time_order_from_the_start(
        program: list[tuple[str, Any]], switch: int) -> None:
    """An index kept by value only (select joins), given its by-time groups after ``switch``
    operations (the first window join), holds the same groups as one kept by time throughout;
    both keep matching under further churn."""
    full, lazy = KeyIndex(), KeyIndex(time_order=False)
    stored: dict[int, tuple[float, float, int]] = {}  # slot -> (key, value, time)
    slot = 0
    rng = np.random.default_rng(len(program))
    for i, (op, arg) in enumerate(program):
        if i == switch:
            live = sorted(stored)
            lazy.enable_time_order(np.array([stored[s][0] for s in live], dtype=np.float64),
                                   np.array([stored[s][2] for s in live], dtype=np.int64),
                                   np.array(live, dtype=np.int64))
        if op in ("add_many", "add"):
            keys = np.array(arg if op == "add_many" else [arg], dtype=np.float64) * 0.5
            n = keys.shape[0]
            vals = rng.integers(0, 5, n).astype(np.float64)
            tms = rng.integers(0, 5, n).astype(np.int64)
            slots = np.arange(slot, slot + n, dtype=np.int64)
            for ix in (full, lazy):
                ix.add_many(keys, vals, tms, slots)
            stored.update({int(s): (float(k), float(v), int(t))
                           for s, k, v, t in zip(slots, keys, vals, tms, strict=True)})
            slot += n
        elif op == "remove" and stored:
            s = sorted(stored)[arg % len(stored)]
            k, v, t = stored.pop(s)
            for ix in (full, lazy):
                ix.remove(k, v, t, s)
        assert _groups(lazy, "by_value") == _groups(full, "by_value")
        if lazy.by_time is None:
            assert i < switch
        else:
            assert _groups(lazy, "by_time") == _groups(full, "by_time")


@settings(max_examples=300, deadline=None)
@given(pairs=st.lists(st.tuples(st.sampled_from([-1.0, -0.0, 0.0, 0.5, 2.0, 7.25]),
                                st.sampled_from([-3.0, 0.0, 1.0, 1.0, 9.5])), max_size=40))
def test_by_key_value_is_the_lexsort(pairs: list[tuple[float, float]]) -> None:
    """The compiled grouping of new keys: the order of ``np.lexsort((values, keys))`` (stable
    on ties of both, −0.0 equal to 0.0), the distinct keys ascending and their counts."""
    from hotjoin.matcher.structures.key_index import _by_key_value

    keys = np.array([k for k, _ in pairs], dtype=np.float64)
    values = np.array([v for _, v in pairs], dtype=np.float64)
    order, uk, counts = _by_key_value(keys, values)
    assert order.tolist() == np.lexsort((values, keys)).tolist()
    sk = keys[order]
    want_uk = [k for i, k in enumerate(sk.tolist()) if i == 0 or k != sk[i - 1]]
    assert uk.tolist() == want_uk
    assert counts.tolist() == [int((keys == k).sum()) for k in want_uk]


def test_the_single_key_dict_follows_batches_past_its_log_limit() -> None:
    """Batches log their new keys for the dict of single lookups; past the log's limit the dict
    is dropped and rebuilt from the flat map: single lookups, adds and removes in between and
    after stay exact against a plain dict of the keys stored."""
    ix = KeyIndex()
    rng = np.random.default_rng(5)
    want: dict[float, list[int]] = {}  # key -> slots
    slot = 0

    def batch(keys: np.ndarray) -> None:
        nonlocal slot
        slots = np.arange(slot, slot + keys.shape[0], dtype=np.int64)
        ix.add_many(keys, np.zeros(keys.shape[0]), np.zeros(keys.shape[0], dtype=np.int64),
                    slots)
        for k, s in zip(keys.tolist(), slots.tolist(), strict=True):
            want.setdefault(k, []).append(s)
        slot += keys.shape[0]

    def check() -> None:
        probe = rng.integers(-100, 20_000, 300).astype(np.float64)
        got = [ix.lookup(k) for k in probe.tolist()]
        assert [g >= 0 for g in got] == [k in want for k in probe.tolist()]
        assert got == ix.lookup_many(probe).tolist()
        assert len(ix) == len(want)

    batch(rng.permutation(6000).astype(np.float64))       # more than the log's limit: dropped
    check()                                                # rebuilt
    batch(np.arange(6000, 6100, dtype=np.float64))         # logged
    ix.add(50_000.0, 0.0, 0, slot)                         # a single add applies the log first
    want[50_000.0] = [slot]
    slot += 1
    for k in (3.0, 6050.0, 50_000.0):                      # removes drop groups
        for s in want.pop(k):
            ix.remove(k, 0.0, 0, s)
    check()
    for _ in range(3):                                     # batch after batch, no single op
        batch(rng.integers(7000, 19_000, 3000).astype(np.float64))
    check()
    assert set(ix.group) == set(want)
