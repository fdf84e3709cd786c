"""Band kernels on tables large enough for sampled searches, two runs and every output mode."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher import BandJoin, Engine, Event, Range
from hotjoin.matcher.joins.band import BAND_STRATEGIES
from hotjoin.matcher.joins.band_kernels import lower_bound
from hotjoin.matcher.structures.sorted_runs import SAMPLE_EVERY


def _plain_lower_bound(keys: np.ndarray, b: float, dirn: int, x: float) -> int:
    n = keys.shape[0]
    d = [(keys[j] - b) if dirn > 0 else (b - keys[n - 1 - j]) for j in range(n)]
    return next((j for j in range(n) if d[j] >= x), n)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-40, 40), min_size=0, max_size=300), st.integers(-50, 50),
       st.sampled_from([-1, 1]), st.integers(-90, 90).map(lambda x: x / 2))
def test_sampled_lower_bound_equals_linear_scan(keys, b, dirn, x) -> None:
    k = np.sort(np.array(keys, dtype=np.float64)) / 4
    samp = np.ascontiguousarray(k[::SAMPLE_EVERY])
    want = _plain_lower_bound(k, float(b) / 3, dirn, x)
    assert lower_bound(k, samp, SAMPLE_EVERY, float(b) / 3, dirn, x) == want
    assert lower_bound(k, np.empty(0), SAMPLE_EVERY, float(b) / 3, dirn, x) == want


def _engine(name: str, seed: int, selections: bool,
            churn: bool = True) -> tuple[Engine, list[Event]]:
    rng = np.random.default_rng(seed)
    e = Engine(strategy={"band": name}, options={"alpha": 0.05})
    subs = []
    for _ in range(300):
        c = float(rng.integers(-20, 20))
        sub = BandJoin(b=Range(c - rng.integers(0, 3), c + rng.integers(0, 3)))
        if selections and rng.random() < 0.3:
            sub = BandJoin(b=sub.b, a=Range(0, float(rng.integers(0, 50))),
                           c=Range(float(rng.integers(0, 50)), None))
        subs.append(sub)
    e.subscribe_many(subs[:200])
    for s in subs[200:]:
        e.subscribe(s)
    # S: a bulk-loaded main run (sampled) plus a delta run of recent inserts, some deleted
    main = [Event("S", f"s{i}", float(rng.integers(0, 200)), float(rng.integers(0, 100)), i)
            for i in range(3000)]
    e.restore_events(main, list(range(e.seq + 1, e.seq + 3001)))
    e.restore_clock(e.seq + 3000, 2999)
    for i in range(3000, 3150 if churn else 3000):
        e.publish(Event("S", f"s{i}", float(rng.integers(0, 200)), float(rng.integers(0, 100)), i))
    for i in range(0, 3150 if churn else 0, 20):
        e.delete("S", f"s{i}")
    order = e.tables["S"].order
    if churn:
        assert order.n_main > 64 * 2 and order.n_delta > 0 and order.n_dead > 0
    else:
        assert order.n_delta == 0 and order.n_dead == 0
    probes = [Event("R", f"r{i}", float(rng.integers(0, 200)), float(rng.integers(0, 100)),
                    4000 + i) for i in range(40)]
    return e, probes


@pytest.mark.parametrize("selections", [False, True], ids=["plain", "selections"])
def test_all_modes_and_strategies_agree_on_large_tables(selections: bool) -> None:
    engines = {n: _engine(n, 5, selections) for n in BAND_STRATEGIES}
    ref_name = "BJ-QOuter"
    total = 0
    for i in range(40):
        outs = {}
        for name, (e, probes) in engines.items():
            ev = probes[i]
            n_ident = e.probe("R", ev.key, ev.value, "identify")
            ident = set(e._buf.out_q[: e._buf.n].tolist())
            assert len(ident) == n_ident, (name, "identify must not repeat a subscription")
            n_pairs = e.probe("R", ev.key, ev.value, "pairs")
            m = e.publish_columnar(ev)
            assert len(m) == n_pairs
            pairs = Counter(m.deliveries())
            per_sub = Counter(d.subscription_id for d in pairs.elements())
            assert ident == set(per_sub), name
            outs[name] = pairs
        assert all(o == outs[ref_name] for o in outs.values()), i
        total += len(outs[ref_name])
    assert total > 1000
    # COUNT mode on deletes, against the pairs
    for name, (e, _) in engines.items():
        twin = _engine(name, 5, selections)[0]
        for p in _engine(name, 5, selections)[1]:
            twin.publish(p)
        for sid in ("s1", "s2", "s3", "s3149", "s3101"):
            aff = e.delete_affected("S", sid)
            lost = Counter(d.subscription_id for d in twin.delete("S", sid))
            assert dict(zip(aff.subscription_ids.tolist(), (-aff.counts).tolist(),
                            strict=True)) == dict(lost), name


@pytest.mark.parametrize("selections", [False, True], ids=["plain", "selections"])
def test_counts_on_a_clean_table_equal_the_pairs(selections: bool) -> None:
    """A clean run (no deletes) takes COUNT's two-binary-search path; it must equal the walk."""
    for name in ("BJ-SSI", "BJ-Hotspot", "BJ-QOuter"):
        e, probes = _engine(name, 9, selections, churn=False)
        twin, _ = _engine(name, 9, selections, churn=False)
        total = 0
        for ev in probes[:15]:
            aff = e.publish_affected(ev)
            pairs = Counter(d.subscription_id for d in twin.publish(ev))
            assert dict(zip(aff.subscription_ids.tolist(), aff.counts.tolist(),
                            strict=True)) == dict(pairs), name
            total += sum(pairs.values())
        assert total > 1000
