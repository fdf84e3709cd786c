"""``FloatIntMap`` (the key index's compiled group map) against a Python dict."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.structures.float_map import MISSING, FloatIntMap

# a small pool, so that puts overwrite, pops hit and probe chains collide; boundary floats
KEYS = st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, 1e-300, -1e-300, 5e-324, 1e300,
                        -1e308, 1.7976931348623157e308, 4096.0, 4097.0, 1 / 3, 123456.789,
                        float(2**53), float(2**53 + 2), -7.25])
OPS = st.lists(st.one_of(
    st.tuples(st.just("put"), st.lists(st.tuples(KEYS, st.integers(0, 2**62)), max_size=12)),
    st.tuples(st.just("set"), st.tuples(KEYS, st.integers(0, 2**62))),
    st.tuples(st.just("discard"), KEYS),
    st.tuples(st.just("pop"), KEYS),
    st.tuples(st.just("get"), st.lists(KEYS, max_size=12))), max_size=60)


@settings(max_examples=300, deadline=None)
@given(ops=OPS, capacity=st.sampled_from([1, 4, 64]), log_limit=st.sampled_from([1, 3, 4096]))
def test_matches_a_dict(ops: list[tuple], capacity: int, log_limit: int) -> None:
    """Puts (growing past the load factor from a tiny capacity), logged sets and discards
    (applied at the next read or when the log is full), pops (backward shifts inside
    colliding chains) and column gets answer as a dict does; −0.0 is 0.0."""
    import hotjoin.matcher.structures.float_map as fm

    saved, fm.LOG_LIMIT = fm.LOG_LIMIT, log_limit
    try:
        _run_against_a_dict(ops, capacity)
    finally:
        fm.LOG_LIMIT = saved


def _run_against_a_dict(ops: list[tuple], capacity: int) -> None:
    m, ref = FloatIntMap(capacity), {}
    for op, arg in ops:
        if op == "put":
            ks = np.array([k for k, _ in arg], dtype=np.float64)
            vs = np.array([v for _, v in arg], dtype=np.int64)
            m.put_many(ks, vs)
            ref.update(zip(ks.tolist(), vs.tolist(), strict=True))
        elif op == "set":
            m.set(*arg)
            ref[arg[0]] = arg[1]
            continue  # the next read applies it
        elif op == "discard":
            m.discard(arg)
            ref.pop(arg, None)
            continue
        elif op == "pop":
            assert m.pop(arg) == ref.pop(arg, MISSING)
        else:
            qs = np.array(arg, dtype=np.float64)
            assert m.get_many(qs).tolist() == [ref.get(k, MISSING) for k in arg]
        assert len(m) == len(ref)
        assert m.items() == ref
        assert 2 * len(m) <= m.keys.shape[0]
    keys = list(ref)
    assert m.get_many(np.array(keys, dtype=np.float64)).tolist() == [ref[k] for k in keys]


def test_every_key_of_a_full_chain_survives_removals_in_any_order() -> None:
    """Many keys in a small table (long probe chains that wrap around the end), removed in a
    shuffled order: after each removal every remaining key is still found."""
    rng = np.random.default_rng(5)
    keys = np.unique(rng.integers(-10**6, 10**6, 3000).astype(np.float64))
    m = FloatIntMap(1)
    m.put_many(keys, np.arange(keys.shape[0]))
    left = dict(zip(keys.tolist(), range(keys.shape[0]), strict=True))
    for k in rng.permutation(keys).tolist()[:2000]:
        assert m.pop(k) == left.pop(k)
        if len(left) % 97 == 0:
            q = np.array(list(left), dtype=np.float64)
            assert m.get_many(q).tolist() == list(left.values())
    assert m.items() == left


def test_keys_must_be_finite_and_nothing_changes() -> None:
    m = FloatIntMap()
    m.put_many(np.array([1.0]), np.array([3]))
    for bad in (np.nan, np.inf, -np.inf):
        with pytest.raises(ValueError, match="finite"):
            m.put_many(np.array([2.0, bad]), np.array([4, 5]))
    assert m.items() == {1.0: 3}


def test_a_chain_wrapping_past_the_end_shifts_back_over_it() -> None:
    """Four keys whose home is the last slot of a 16-slot table fill slots 15, 0, 1, 2; removing
    the first must move the other three back across the end, or a probe from slot 15 would stop
    at the hole."""
    from hotjoin.matcher.structures.float_map import _home

    m = FloatIntMap(4)
    cap = m.keys.shape[0]
    assert cap == 16
    last = [k for k in np.arange(1.0, 20000.0).tolist() if _home(k, cap - 1) == cap - 1][:4]
    m.put_many(np.array(last), np.arange(4))
    assert m.used[[cap - 1, 0, 1, 2]].all()
    assert m.pop(last[0]) == 0
    assert m.get_many(np.array(last)).tolist() == [MISSING, 1, 2, 3]
    assert m.pop(last[2]) == 2
    assert m.get_many(np.array(last)).tolist() == [MISSING, 1, MISSING, 3]
