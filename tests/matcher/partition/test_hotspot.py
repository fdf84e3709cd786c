"""Tests of ``matcher.partition.hotspot``: the alpha-hotspot tracker of Section 2.2 (Theorem 1).

Random and hypothesis-driven update sequences check (I1)-(I3) after every operation (see
``HotspotTracker.check_invariants``) and that a listener fed only the callbacks rebuilds exactly
the hot groups and the scattered set; hand-made cases pin promotion at ``alpha|I|`` and demotion
below ``(alpha/2)|I|``.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from hotjoin.matcher.partition.hotspot import HotspotMirror, HotspotTracker, _SizeBuckets
from hotjoin.matcher.partition.stabbing import snapshot_of

INF = math.inf


class StrictHotspotMirror(HotspotMirror):
    """Mirror that also checks each hot point stabs its members at every callback."""

    def __init__(self) -> None:
        super().__init__()
        self.tracker: HotspotTracker | None = None

    def member_added(self, gid: int, iid: int) -> None:
        assert iid not in self.scattered, "scattered_removed must precede member_added"
        super().member_added(gid, iid)
        assert self.tracker is not None
        lo, hi = self.tracker.interval(iid)
        assert lo <= self.points[gid] <= hi

    def point_moved(self, gid: int, point: float) -> None:
        super().point_moved(gid, point)
        assert self.tracker is not None
        for iid in self.members[gid]:
            lo, hi = self.tracker.interval(iid)
            assert lo <= point <= hi

    def scattered_added(self, iid: int) -> None:
        super().scattered_added(iid)
        assert self.tracker is not None and not self.tracker.is_hot(iid)


def make(
    alpha: float, eps: float = 1.0, trigger: str = "witness"
) -> tuple[HotspotTracker, StrictHotspotMirror]:
    mirror = StrictHotspotMirror()
    tracker = HotspotTracker(alpha, eps, mirror, trigger=trigger)  # type: ignore[arg-type]
    mirror.tracker = tracker
    return tracker, mirror


def check(tr: HotspotTracker, mirror: HotspotMirror) -> None:
    tr.check_invariants()
    assert mirror.snapshot() == snapshot_of(tr)
    assert mirror.scattered == set(tr.scattered().tolist())
    assert mirror.resets == 0
    assert len(tr) == tr.n_hot + tr.n_scattered
    for g, p, members in tr.hot_groups():
        assert tr.point(g) == p
        for iid in members.tolist():
            assert tr.is_hot(iid) and tr.group_of(iid) == g


# ---- size buckets -------------------------------------------------------------------------


@pytest.mark.parametrize("largest", [True, False])
def test_size_buckets_against_brute_force(largest: bool) -> None:
    rng = random.Random(int(largest))
    b = _SizeBuckets(largest)
    sizes: dict[int, int] = {}
    for step in range(3000):
        r = rng.random()
        if sizes and r < 0.35:
            g = rng.choice(list(sizes))
            sizes[g] += 1
            b.inc(g)
        elif sizes and r < 0.7:
            g = rng.choice([g for g, s in sizes.items() if s > 0] or [None])
            if g is not None:
                sizes[g] -= 1
                b.dec(g)
        elif sizes and r < 0.8:
            g = rng.choice(list(sizes))
            del sizes[g]
            b.remove(g)
        else:
            sizes[step] = rng.randint(0, 20)
            b.add(step, sizes[step])
        assert b.size == sizes
        if sizes:
            best = max(sizes.values()) if largest else min(sizes.values())
            assert b.best == best and sizes[b.pick()] == best
    b.rebuild([(1, 4), (2, 9)])
    assert b.best == (9 if largest else 4)


# ---- hand-made promotion / demotion -------------------------------------------------------


def test_promotion_at_alpha_n_and_demotion_below_half() -> None:
    tr, mirror = make(alpha=0.5)
    far = 1000.0
    # 40 disjoint intervals, bulk loaded: 40 singleton groups, none >= 0.5 * 40
    tr.insert_many(
        range(40), [far + 10.0 * i for i in range(40)], [far + 10.0 * i + 1 for i in range(40)]
    )
    tr.insert(100, 0.0, 1.0)  # n = 41, a singleton in S
    check(tr, mirror)
    assert tr.hot_count == 0 and tr.n_scattered == 41
    # grow the group of 100: size s = 1 + j at n = 41 + j; promoted once s >= n/2, i.e. j = 39
    for j in range(1, 39):
        tr.insert(100 + j, 0.25, 0.75)
        assert tr.hot_count == 0, f"promoted too early at size {1 + j}, n = {41 + j}"
    check(tr, mirror)
    assert tr.moved_out_of_scattered == 0
    tr.insert(139, 0.25, 0.75)  # size 40 at n = 80: 40 >= 0.5 * 80
    check(tr, mirror)
    assert tr.hot_count == 1
    g = tr.group_of(100)
    assert len(tr.members(g)) == 40 and tr.point(g) == 0.75
    assert tr.moved_out_of_scattered == 39  # 139 joined S in this very update: not a move
    assert mirror.scattered == set(range(40))
    # a hot group of 40 is demoted once 40 < n / 4, i.e. at n = 161
    for i in range(80):
        tr.insert(1000 + i, 5000.0 + 10 * i, 5000.0 + 10 * i + 1)
        n = 80 + i + 1
        assert tr.hot_count == (1 if 0.25 * n <= 40 else 0), n
    check(tr, mirror)
    assert len(tr) == 160 and tr.hot_count == 1
    tr.insert(2000, 9000.0, 9001.0)  # n = 161: 40 < 40.25
    check(tr, mirror)
    assert tr.hot_count == 0 and tr.moved_into_scattered == 40
    assert tr.n_scattered == 161


def test_demotion_by_deletion_and_promotion_by_deletion() -> None:
    tr, mirror = make(alpha=0.5)
    tr.insert_many(range(20), [0.0] * 20, [1.0] * 20)  # one group of 20 = |I|: hot
    tr.insert_many(range(20, 40), [10.0 + i for i in range(20)], [10.5 + i for i in range(20)])
    check(tr, mirror)
    assert tr.hot_count == 1 and tr.n_hot == 20 and tr.n_scattered == 20
    # deleting hot members: demoted when 20 - d < (40 - d) / 4, i.e. d = 14 (6 < 6.5)
    for d in range(1, 15):
        tr.delete(d - 1)
        assert tr.hot_count == (1 if 20 - d >= (40 - d) / 4 else 0)
    check(tr, mirror)
    assert tr.hot_count == 0 and tr.moved_into_scattered == 6
    # deleting scattered singletons makes the group of 6 a hotspot again: 6 >= (26 - d) / 2
    d = 0
    while tr.hot_count == 0:
        tr.delete(20 + d)
        d += 1
    check(tr, mirror)
    assert d == 14 and len(tr) == 12 and tr.moved_out_of_scattered == 6


def test_empty_hot_group_is_removed() -> None:
    tr, mirror = make(alpha=1.0)
    tr.insert(1, 0.0, 1.0)
    assert tr.is_hot(1)
    tr.delete(1)
    check(tr, mirror)
    assert tr.hot_count == 0 and len(tr) == 0
    tr.insert(2, 0.0, 1.0)
    tr.insert(3, 5.0, 6.0)  # 2 stays hot (1 >= |I| / 2); 3 is not an alpha-hotspot
    check(tr, mirror)
    assert tr.is_hot(2) and not tr.is_hot(3)


def test_hot_join_prefers_a_stabbing_point() -> None:
    tr, mirror = make(alpha=0.1)
    tr.insert_many(range(50), [0.0] * 50, [10.0] * 50)
    tr.insert_many(range(50, 100), [20.0] * 50, [30.0] * 50)
    assert tr.hot_count == 2
    g1, g2 = tr.group_of(0), tr.group_of(50)
    tr.insert(200, 9.0, 25.0)  # meets both cores, contains the point 30? no; 10: yes
    assert tr.group_of(200) == g1 and tr.point(g1) == 10.0
    tr.insert(201, 25.0, 35.0)  # only g2's core; its point 30 is inside
    assert tr.group_of(201) == g2 and tr.point(g2) == 30.0
    tr.insert(202, 5.0, 6.0)  # g1's core [9, 10] is missed: goes to S
    assert not tr.is_hot(202)
    tr.insert(203, 27.0, 28.0)  # meets g2's core [25, 30] but not its point: the point moves
    assert tr.group_of(203) == g2 and tr.point(g2) == 28.0
    check(tr, mirror)


def test_errors_leave_state_unchanged() -> None:
    tr, mirror = make(alpha=0.3)
    tr.insert_many(range(10), [float(i) for i in range(10)], [i + 0.5 for i in range(10)])
    before = (snapshot_of(tr), set(tr.scattered().tolist()), tr.updates)
    with pytest.raises(KeyError):
        tr.delete(99)
    with pytest.raises(KeyError):
        tr.is_hot(99)
    with pytest.raises(ValueError):
        tr.insert(3, 0.0, 1.0)
    with pytest.raises(ValueError):
        tr.insert(50, 2.0, 1.0)
    with pytest.raises(ValueError):
        tr.insert_many([50, 3], [0.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError):
        tr.insert_many([50, 51], [0.0, INF], [1.0, INF])
    for alpha in (0.0, -1.0, 1.5, math.nan):
        with pytest.raises(ValueError):
            HotspotTracker(alpha)
    assert (snapshot_of(tr), set(tr.scattered().tolist()), tr.updates) == before
    check(tr, mirror)


# ---- random sequences -------------------------------------------------------------------


def random_run(
    alpha: float, eps: float, steps: int, seed: int, trigger: str = "witness"
) -> HotspotTracker:
    rng = random.Random(seed)
    tr, mirror = make(alpha, eps, trigger)
    live: list[int] = []
    nid = 0
    centres = [rng.uniform(0, 100) for _ in range(4)]
    for _ in range(steps):
        r = rng.random()
        if live and r < 0.47:
            tr.delete(live.pop(rng.randrange(len(live))))
        elif r < 0.5:
            k = rng.randint(1, 70)
            c = rng.choice(centres)
            lo = np.array([c + rng.gauss(0, 3) for _ in range(k)])
            hi = lo + np.array([rng.expovariate(0.2) for _ in range(k)])
            tr.insert_many(range(nid, nid + k), lo, hi)
            live += range(nid, nid + k)
            nid += k
        else:
            if rng.random() < 0.6:
                lo = rng.choice(centres) + rng.gauss(0, 2)
                hi = lo + rng.choice([0.0, rng.expovariate(0.3), INF])
            else:
                lo = rng.choice([rng.uniform(0, 100), float(rng.randint(0, 100)), -INF])
                hi = rng.choice([lo, lo + rng.expovariate(0.5), INF]) if lo > -INF else 50.0
            tr.insert(nid, lo, hi)
            live.append(nid)
            nid += 1
        check(tr, mirror)
    assert len(tr) == len(live)
    return tr


@pytest.mark.parametrize("alpha", [0.5, 0.1, 0.01])
@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
def test_random_sequences(alpha: float, eps: float) -> None:
    tr = random_run(alpha, eps, 500, seed=int(alpha * 1000 + eps * 10))
    assert tr.updates > 500
    assert tr.moved_into_scattered + tr.moved_out_of_scattered <= 5 * tr.updates


def test_random_sequence_paper_trigger() -> None:
    tr = random_run(0.1, 1.0, 400, seed=99, trigger="deletions")
    assert tr.scattered_partition.reconstructions > 0


def test_churn_moves_intervals_both_ways() -> None:
    """A workload whose clusters rise and fall exercises both moves; (I3) is checked each step."""
    rng = random.Random(1)
    tr, mirror = make(alpha=0.2, eps=1.0)
    live: dict[int, list[int]] = {c: [] for c in range(5)}
    nid = 0
    for phase in range(40):
        hot = phase % 5
        for _ in range(25):
            c = hot if rng.random() < 0.7 else rng.randrange(5)
            tr.insert(nid, 20.0 * c + rng.uniform(0, 1), 20.0 * c + rng.uniform(1, 2))
            live[c].append(nid)
            nid += 1
            check(tr, mirror)
        for c in range(5):
            if c != hot:
                for _ in range(min(len(live[c]), 5)):
                    tr.delete(live[c].pop(rng.randrange(len(live[c]))))
                    check(tr, mirror)
    assert tr.moved_into_scattered > 0 and tr.moved_out_of_scattered > 0
    assert tr.moved_into_scattered + tr.moved_out_of_scattered <= 5 * tr.updates


# ---- hypothesis state machine -------------------------------------------------------------

endpoint = st.one_of(st.integers(0, 12).map(float), st.floats(0, 12, allow_nan=False))


@st.composite
def intervals(draw: st.DrawFn) -> tuple[float, float]:
    a, b = sorted((draw(endpoint), draw(endpoint)))
    if draw(st.integers(0, 14)) == 0:
        a = -INF
    if draw(st.integers(0, 14)) == 0:
        b = INF
    return a, b


class TrackerMachine(RuleBasedStateMachine):
    """Random updates against a tracker with random alpha and eps; (I1)-(I3) after each."""

    def __init__(self) -> None:
        super().__init__()
        self.next_id = 0
        self.tr, self.mirror = make(0.5)

    @initialize(alpha=st.sampled_from([0.5, 0.25, 0.1, 0.01]), eps=st.sampled_from([0.5, 1.0, 3.0]))
    def setup(self, alpha: float, eps: float) -> None:
        self.tr, self.mirror = make(alpha, eps)

    @rule(iv=intervals())
    def insert(self, iv: tuple[float, float]) -> None:
        self.tr.insert(self.next_id, *iv)
        self.next_id += 1

    @rule(ivs=st.lists(intervals(), min_size=1, max_size=45))
    def insert_many(self, ivs: list[tuple[float, float]]) -> None:
        first = self.next_id
        self.next_id += len(ivs)
        self.tr.insert_many(
            np.arange(first, self.next_id), [a for a, _ in ivs], [b for _, b in ivs]
        )

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        live = sorted(self.mirror.of) + sorted(self.mirror.scattered)
        if not live:
            return
        k = data.draw(st.integers(1, min(8, len(live))))
        for iid in data.draw(st.permutations(live))[:k]:
            self.tr.delete(iid)

    @invariant()
    def consistent(self) -> None:
        check(self.tr, self.mirror)


TestTrackerMachine = TrackerMachine.TestCase
TestTrackerMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
