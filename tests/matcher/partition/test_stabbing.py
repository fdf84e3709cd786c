"""Tests of ``matcher.partition.stabbing``: Lemma 1 (canonical partition) and Lemma 2 / Appendix A.1.

The canonical partition is checked against an independent brute force (interval graphs are
perfect, so ``tau`` equals the largest number of pairwise disjoint intervals); the dynamic
partition runs random and hypothesis-driven operation sequences, checking its invariants and
that a listener fed only the callbacks sees exactly the partition, after every operation.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)

from hotjoin.matcher.partition.stabbing import (
    DynamicStabbingPartition,
    GroupMirror,
    StabbingGroups,
    canonical_partition,
    snapshot_of,
    stabbing_number,
)

INF = math.inf

# ---- helpers --------------------------------------------------------------------------------

endpoint = st.one_of(st.integers(-3, 12).map(float), st.floats(-5, 15, allow_nan=False))


@st.composite
def intervals(draw: st.DrawFn) -> tuple[float, float]:
    """A closed interval with a finite point inside; many ties, some unbounded ends."""
    a = draw(endpoint)
    b = draw(endpoint)
    lo, hi = min(a, b), max(a, b)
    if draw(st.integers(0, 9)) == 0:
        lo = -INF
    if draw(st.integers(0, 9)) == 0:
        hi = INF
    return lo, hi


def brute_tau(ivs: list[tuple[float, float]]) -> int:
    """Largest set of pairwise disjoint intervals, by exhaustion (= tau for intervals)."""
    best = 0
    for r in range(len(ivs), 0, -1):
        for sub in itertools.combinations(ivs, r):
            if all(a[1] < b[0] or b[1] < a[0] for a, b in itertools.combinations(sub, 2)):
                return r
    return best


def brute_cover(ivs: list[tuple[float, float]]) -> int:
    """Smallest number of groups with a common point, by exhaustion over candidate points."""
    if not ivs:
        return 0
    cands = sorted({x for iv in ivs for x in iv if math.isfinite(x)} | {0.0})
    stabs = [frozenset(i for i, (lo, hi) in enumerate(ivs) if lo <= p <= hi) for p in cands]
    everything = frozenset(range(len(ivs)))
    for k in range(1, len(ivs) + 1):
        for combo in itertools.combinations(stabs, k):
            if frozenset().union(*combo) == everything:
                return k
    raise AssertionError("unreachable")


def check_partition(
    ivs: list[tuple[float, float]], points: np.ndarray, group_of: np.ndarray
) -> None:
    assert group_of.shape == (len(ivs),)
    assert np.all(np.isfinite(points))
    assert np.all(np.diff(points) > 0), "points are strictly increasing"
    assert set(group_of.tolist()) == set(range(points.shape[0])), "every group is non-empty"
    for (lo, hi), g in zip(ivs, group_of.tolist(), strict=True):
        assert lo <= points[g] <= hi


def as_arrays(ivs: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    return (
        np.array([a for a, _ in ivs], dtype=np.float64),
        np.array([b for _, b in ivs], dtype=np.float64),
    )


class StrictMirror(GroupMirror):
    """A mirror that also checks, at every callback, that each point stabs its members."""

    def __init__(self) -> None:
        super().__init__()
        self.part: DynamicStabbingPartition | None = None

    def _stabs(self, gid: int) -> None:
        assert self.part is not None
        p = self.points[gid]
        for iid in self.members[gid]:
            lo, hi = self.part.interval(iid)
            assert lo <= p <= hi, f"point {p} of {gid} misses member {iid} = [{lo}, {hi}]"

    def member_added(self, gid: int, iid: int) -> None:
        super().member_added(gid, iid)
        assert self.part is not None and iid in self.part
        lo, hi = self.part.interval(iid)
        assert lo <= self.points[gid] <= hi, "point_moved must come before member_added"

    def point_moved(self, gid: int, point: float) -> None:
        super().point_moved(gid, point)
        self._stabs(gid)

    def reset(self, partition: StabbingGroups) -> None:
        super().reset(partition)
        for g in self.points:
            self._stabs(g)


def make(
    eps: float = 1.0, trigger: str = "witness"
) -> tuple[DynamicStabbingPartition, StrictMirror]:
    mirror = StrictMirror()
    part = DynamicStabbingPartition(eps, mirror, trigger=trigger)  # type: ignore[arg-type]
    mirror.part = part
    return part, mirror


def check(part: DynamicStabbingPartition, mirror: GroupMirror) -> None:
    part.check_invariants()
    assert mirror.snapshot() == snapshot_of(part)
    pts = [p for _, p, _ in part.groups()]
    assert pts == sorted(pts)
    assert part.points().tolist() == pts


# ---- Lemma 1 ----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.lists(intervals(), max_size=8))
def test_canonical_is_minimum_small(ivs: list[tuple[float, float]]) -> None:
    los, his = as_arrays(ivs)
    points, group_of = canonical_partition(los, his)
    check_partition(ivs, points, group_of)
    assert points.shape[0] == brute_tau(ivs) == brute_cover(ivs)
    assert stabbing_number(los, his) == points.shape[0]


@settings(max_examples=100, deadline=None)
@given(st.lists(intervals(), min_size=1, max_size=60))
def test_canonical_matches_disjoint_greedy(ivs: list[tuple[float, float]]) -> None:
    """Against the classic dual greedy: most pairwise-disjoint intervals, by right end."""
    los, his = as_arrays(ivs)
    points, group_of = canonical_partition(los, his)
    check_partition(ivs, points, group_of)
    count, last = 0, -INF
    for lo, hi in sorted(ivs, key=lambda iv: iv[1]):
        if count == 0 or lo > last:
            count, last = count + 1, hi
    assert points.shape[0] == count


@pytest.mark.parametrize(
    ("ivs", "points", "groups"),
    [
        ([], [], []),
        ([(3.0, 4.0)], [4.0], [0]),
        ([(0.0, 1.0), (1.0, 2.0)], [1.0], [0, 0]),  # closed ends touch: one group
        ([(0.0, 1.0), (1.5, 2.0)], [1.0, 2.0], [0, 1]),
        ([(2.0, 5.0)] * 4, [5.0], [0, 0, 0, 0]),  # identical intervals
        ([(1.0, 1.0), (1.0, 1.0), (0.0, 2.0)], [1.0], [0, 0, 0]),  # points
        ([(-INF, INF)], [0.0], [0]),  # unbounded both ways: point 0
        ([(-INF, INF), (-INF, INF)], [0.0], [0, 0]),
        ([(5.0, INF)], [5.0], [0]),  # right end infinite: left end
        ([(-INF, -7.0)], [-7.0], [0]),
        ([(-INF, 0.0), (1.0, INF), (-INF, INF)], [0.0, 1.0], [0, 1, 0]),
        ([(0.0, 10.0), (1.0, 2.0), (3.0, 4.0)], [2.0, 4.0], [0, 0, 1]),
    ],
)
def test_canonical_boundary_cases(
    ivs: list[tuple[float, float]], points: list[float], groups: list[int]
) -> None:
    los, his = as_arrays(ivs)
    p, g = canonical_partition(los, his)
    assert p.dtype == np.float64 and g.dtype == np.int64
    assert p.tolist() == points and g.tolist() == groups


@pytest.mark.parametrize(
    ("lo", "hi"), [(1.0, 0.0), (math.nan, 1.0), (0.0, math.nan), (INF, INF), (-INF, -INF)]
)
def test_canonical_rejects_bad_intervals(lo: float, hi: float) -> None:
    with pytest.raises(ValueError):
        canonical_partition(np.array([0.0, lo]), np.array([1.0, hi]))


def test_canonical_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError):
        canonical_partition(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError):
        canonical_partition(np.zeros((2, 2)), np.zeros((2, 2)))


def test_canonical_large_clustered() -> None:
    rng = np.random.default_rng(7)
    mid = rng.uniform(0, 10_000, 50_000)
    ln = np.clip(rng.normal(2000, 300, 50_000), 0, None)
    los, his = mid - ln / 2, mid + ln / 2
    points, group_of = canonical_partition(los, his)
    assert np.all(los <= points[group_of]) and np.all(points[group_of] <= his)
    # the dual greedy (vectorised enough for 50k) gives the same tau
    order = np.argsort(his)
    count, last = 0, -INF
    for lo, hi in zip(los[order].tolist(), his[order].tolist(), strict=True):
        if lo > last:
            count, last = count + 1, hi
    assert points.shape[0] == count


# ---- Lemma 2 / Appendix A.1: unit behaviour ----------------------------------------------------


def test_join_by_intersection_and_point_move() -> None:
    part, mirror = make(eps=3.0)  # no rebuild in this test: 2 groups < (1 + 3) * 1
    part.insert(1, 0.0, 10.0)
    g = part.group_of(1)
    assert part.point(g) == 10.0 and part.core(g) == (0.0, 10.0)
    part.insert(2, 2.0, 20.0)  # meets the core, contains the point: no move
    assert part.group_of(2) == g and part.point(g) == 10.0 and part.core(g) == (2.0, 10.0)
    part.insert(3, -5.0, 4.0)  # meets the core but not the point: the point moves to 4
    assert part.group_of(3) == g and part.point(g) == 4.0 and part.core(g) == (2.0, 4.0)
    part.insert(4, 5.0, 6.0)  # misses the core [2, 4] (though it meets every member)
    assert part.group_of(4) != g and part.size == 2
    part.insert(5, 4.0, 4.5)  # touches the core's closed end
    assert part.group_of(5) == g and part.point(g) == 4.0
    check(part, mirror)
    part.delete(3)  # cores never grow on deletion
    assert part.core(g) == (4.0, 4.0)
    check(part, mirror)


def test_unbounded_intervals_get_finite_points() -> None:
    part, mirror = make()
    part.insert(1, -INF, INF)
    assert part.point(part.group_of(1)) == 0.0
    part.insert(2, 3.0, INF)  # joins: core [3, inf], point 0 left it -> 3
    assert part.group_of(2) == part.group_of(1) and part.point(part.group_of(1)) == 3.0
    part.insert(3, -INF, -1.0)
    assert part.point(part.group_of(3)) == -1.0
    check(part, mirror)


def test_delete_last_member_removes_group() -> None:
    part, mirror = make(eps=3.0)
    part.insert_many([1, 2], [0.0, 5.0], [1.0, 6.0])
    calls: list[str] = []
    orig_removed, orig_member = mirror.group_removed, mirror.member_removed
    mirror.group_removed = lambda g: (calls.append("group"), orig_removed(g))[1]  # type: ignore[method-assign]
    mirror.member_removed = lambda g, i: (calls.append("member"), orig_member(g, i))[1]  # type: ignore[method-assign]
    g = part.group_of(2)
    part.delete(2)
    assert calls[:2] == ["member", "group"]
    assert 2 not in part and len(part) == 1
    with pytest.raises(KeyError):
        part.point(g)
    check(part, mirror)


def test_errors_leave_state_unchanged() -> None:
    part, mirror = make()
    part.insert_many(range(5), [0.0, 1.0, 2.0, 3.0, 4.0], [0.5, 1.5, 2.5, 3.5, 4.5])
    before = snapshot_of(part)
    with pytest.raises(KeyError):
        part.delete(99)
    with pytest.raises(ValueError):
        part.insert(3, 0.0, 1.0)
    for lo, hi in [(2.0, 1.0), (math.nan, 1.0), (INF, INF), (-INF, -INF)]:
        with pytest.raises(ValueError):
            part.insert(50, lo, hi)
    with pytest.raises(ValueError):
        part.insert_many([50, 51], [0.0, 1.0], [1.0, 0.0])
    with pytest.raises(ValueError):
        part.insert_many([50, 50], [0.0, 1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        part.insert_many([50, 4], [0.0, 1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        part.insert_many([50], [0.0, 1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        DynamicStabbingPartition(0.0)
    with pytest.raises(ValueError):
        DynamicStabbingPartition(1.0, trigger="sometimes")  # type: ignore[arg-type]
    assert snapshot_of(part) == before and len(part) == 5
    check(part, mirror)


def test_bulk_insert_many_is_one_reset() -> None:
    part, mirror = make()
    rng = np.random.default_rng(3)
    lo = rng.uniform(0, 100, 500)
    hi = lo + rng.exponential(5, 500)
    part.insert_many(np.arange(500), lo, hi)
    assert mirror.resets == 1 and part.reconstructions == 1
    assert part.size == stabbing_number(lo, hi)  # a fresh rebuild is canonical
    check(part, mirror)
    # a small batch goes one by one (no reset)
    part.insert_many([1000, 1001], [1.0, 2.0], [1.5, 2.5])
    assert mirror.resets == 1
    check(part, mirror)


def test_rebuild_gives_canonical_partition() -> None:
    part, mirror = make(eps=3.0)
    rng = random.Random(5)
    ivs = {}
    for i in range(300):
        lo = rng.uniform(0, 100)
        ivs[i] = (lo, lo + rng.expovariate(0.3))
        part.insert(i, *ivs[i])
    for i in rng.sample(range(300), 120):
        part.delete(i)
        del ivs[i]
    part.rebuild()
    check(part, mirror)
    los, his = as_arrays(list(ivs.values()))
    points, group_of = canonical_partition(los, his)
    assert part.points().tolist() == points.tolist()
    expect = {}
    for iid, g in zip(ivs, group_of.tolist(), strict=True):
        expect.setdefault(g, set()).add(iid)
    assert sorted(map(sorted, expect.values())) == sorted(
        sorted(m.tolist()) for _, _, m in part.groups()
    )


def test_pop_group() -> None:
    part, mirror = make()
    part.insert_many(range(4), [0.0, 0.5, 5.0, 5.5], [1.0, 1.5, 6.0, 6.5])
    g = part.group_of(0)
    iids, los, his = part.pop_group(g)
    assert sorted(iids.tolist()) == [0, 1]
    assert sorted(zip(iids.tolist(), los.tolist(), his.tolist(), strict=True)) == [
        (0, 0.0, 1.0),
        (1, 0.5, 1.5),
    ]
    assert 0 not in part and 1 not in part and len(part) == 2
    check(part, mirror)


def test_witness_trigger_skips_rebuilds_on_clusters() -> None:
    """Deleting non-witness members never lowers the certified bound: no rebuild at all."""
    rng = np.random.default_rng(11)
    n = 3000
    mid = rng.uniform(0, 1000, n)
    ln = np.clip(rng.normal(200, 30, n), 0, None)
    counts = {}
    for trig in ("witness", "deletions"):
        part, mirror = make(1.0, trig)
        part.insert_many(np.arange(n), mid - ln / 2, mid + ln / 2)
        for i in rng.permutation(n)[: n // 2].tolist():
            part.delete(i)
        check(part, mirror)
        counts[trig] = part.reconstructions
        assert part.deleted_since_rebuild <= n
    assert counts["witness"] < counts["deletions"]


@pytest.mark.parametrize("trigger", ["witness", "deletions"])
@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_random_sequences(eps: float, trigger: str) -> None:
    rng = random.Random(hash((eps, trigger)) & 0xFFFF)
    part, mirror = make(eps, trigger)
    live: list[int] = []
    nid = 0
    for _ in range(700):
        r = rng.random()
        if live and r < 0.45:
            part.delete(live.pop(rng.randrange(len(live))))
        elif r < 0.5:
            k = rng.randint(1, 60)
            centre = rng.uniform(0, 50)
            lo = [round(centre + rng.gauss(0, 4)) for _ in range(k)]
            hi = [a + rng.choice([0.0, 1.0, rng.expovariate(0.3), INF]) for a in lo]
            part.insert_many(range(nid, nid + k), lo, hi)
            live += range(nid, nid + k)
            nid += k
        else:
            lo = rng.choice([float(rng.randint(0, 50)), rng.uniform(0, 50), -INF])
            hi = rng.choice([lo, lo + rng.expovariate(0.2), INF]) if lo > -INF else 3.0
            part.insert(nid, lo, hi)
            live.append(nid)
            nid += 1
        check(part, mirror)
    assert len(part) == len(live)


# ---- Lemma 2: hypothesis state machine ----------------------------------------------------


class PartitionMachine(RuleBasedStateMachine):
    """Random insert / delete / bulk insert / rebuild, invariants checked after every step."""

    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        self.next_id = 0
        self.part, self.mirror = make()

    @initialize(
        eps=st.sampled_from([0.25, 1.0, 3.0]), trigger=st.sampled_from(["witness", "deletions"])
    )
    def setup(self, eps: float, trigger: str) -> None:
        self.part, self.mirror = make(eps, trigger)

    @rule(target=ids, iv=intervals())
    def insert(self, iv: tuple[float, float]) -> int:
        iid = self.next_id
        self.next_id += 1
        self.part.insert(iid, *iv)
        assert self.part.interval(iid) == iv
        return iid

    @rule(iid=consumes(ids))
    def delete(self, iid: int) -> None:
        if iid not in self.part:  # already gone through delete_some
            with pytest.raises(KeyError):
                self.part.delete(iid)
            return
        self.part.delete(iid)
        assert iid not in self.part

    @rule(ivs=st.lists(intervals(), min_size=1, max_size=40))
    def insert_many(self, ivs: list[tuple[float, float]]) -> None:
        # bundle entries are not needed for deletion coverage: delete_some covers them
        first = self.next_id
        self.next_id += len(ivs)
        los, his = as_arrays(ivs)
        self.part.insert_many(np.arange(first, self.next_id), los, his)

    @rule(data=st.data())
    def delete_some(self, data: st.DataObject) -> None:
        if len(self.part) == 0:
            return
        iids, _, _ = self.part.intervals()
        k = data.draw(st.integers(1, min(10, len(iids))))
        for iid in data.draw(st.permutations(iids.tolist()))[:k]:
            self.part.delete(iid)

    @rule()
    def rebuild(self) -> None:
        self.part.rebuild()
        assert self.part.size == self.part.tau0

    @invariant()
    def consistent(self) -> None:
        check(self.part, self.mirror)


TestPartitionMachine = PartitionMachine.TestCase
TestPartitionMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
