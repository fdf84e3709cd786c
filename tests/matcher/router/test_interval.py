"""IJ-Dynamic (``router/interval.py``): ``strategy="auto"`` on interval joins delivers what
IJ-NestedLoop delivers, one at a time and in batches, counts its decisions, reports IJ-SSI's τ,
and keeps its members' invariants through subscription changes. (Its agreement with the
brute-force oracle under deletes, lateness, retention and snapshots is in
``tests/matcher/joins/test_interval.py``, which runs every interval strategy.)"""

from __future__ import annotations

from collections import Counter

import numpy as np

from hotjoin.matcher import Engine, Event, IntervalJoin, Range
from hotjoin.matcher.router.interval import IntervalDynamic
from hotjoin.matcher.workload import interval_workload


def _pairs(ds: list) -> Counter[tuple[int, str, str]]:
    return Counter((int(d.subscription_id), d.r_id, d.s_id) for d in ds)


def test_decisions_counted_and_exact_one_at_a_time() -> None:
    w = interval_workload(400, 600, seed=5, key_domain=8)
    e = Engine(strategy={"interval": "IJ-Dynamic"}, lateness=1 << 40)
    ref = Engine(strategy={"interval": "IJ-NestedLoop"}, lateness=1 << 40)
    assert e.subscribe_many(w.subscriptions) == ref.subscribe_many(w.subscriptions)
    ix = e.kind_index("interval")
    assert isinstance(ix, IntervalDynamic)
    delivered = 0
    for i in range(600):
        ev = Event("RS"[int(w.sides[i])], w.ids[i], float(w.keys[i]), float(w.values[i]),
                   int(w.times[i]), end=int(w.ends[i]))
        got = _pairs(e.publish(ev))
        assert got == _pairs(ref.publish(ev)), i
        delivered += sum(got.values())
        if i % 150 == 149:  # subscription changes in between: the router re-decides
            for sid in (i // 150, 200 + i // 150):
                e.unsubscribe(sid)
                ref.unsubscribe(sid)
            e.check_invariants()
    assert delivered > 0
    st = e.stats()
    decisions = st["interval"]["decisions"]
    assert set(decisions) <= {"IJ-NestedLoop", "IJ-SSI"}
    assert sum(decisions.values()) > 0
    assert all(st["decisions"][k] == v for k, v in decisions.items())
    assert st["tau"]["interval"] == ix.stats()["tau"] > 0


def test_batches_match_nested_loop_and_decide_once_per_run() -> None:
    w = interval_workload(300, 800, seed=6, key_domain=6)
    e = Engine(strategy={"interval": "IJ-Dynamic"}, lateness=1 << 40)
    ref = Engine(strategy={"interval": "IJ-NestedLoop"}, lateness=1 << 40)
    e.subscribe_many(w.subscriptions)
    ref.subscribe_many(w.subscriptions)
    before = sum(e.stats()["interval"]["decisions"].values())
    rows = 0
    for lo in range(0, 800, 200):
        cut = slice(lo, lo + 200)
        args = (w.sides[cut], w.ids[cut], w.keys[cut], w.values[cut], w.times[cut])
        got = e.publish_batch(*args, ends=w.ends[cut], output="affected").output
        want = ref.publish_batch(*args, ends=w.ends[cut], output="affected").output
        rows += len(got.event)
        assert Counter(zip(got.event.tolist(), got.subscription.tolist(), got.count.tolist(),
                           strict=True)) == Counter(zip(want.event.tolist(),
                                                        want.subscription.tolist(),
                                                        want.count.tolist(), strict=True))
    assert rows > 0
    made = sum(e.stats()["interval"]["decisions"].values()) - before
    assert 0 < made < 800  # a run of one side takes one decision, not one per tuple


def test_memory_is_the_members_and_stats_name_them() -> None:
    e = Engine(strategy={"interval": "IJ-Dynamic"})
    m0 = e.memory_bytes()
    rng = np.random.default_rng(2)
    e.subscribe_many([IntervalJoin.allen("overlaps", b=Range(float(k), float(k) + 2))
                      for k in rng.integers(-5, 5, 200)])
    ix = e.kind_index("interval")
    assert isinstance(ix, IntervalDynamic)
    assert e.memory_bytes() - m0 >= sum(m.memory_bytes() for m in ix.members) // 2 > 0
    assert {m.name for m in ix.members} == {"IJ-NestedLoop", "IJ-SSI"}
