"""Shard planning of the replay (ops/replay/sharding.py), without Spark.

The properties that make the replay exact: band reach never misses a partner under IEEE double
subtraction, and every pair that can match lies in exactly one cell (never two), whatever the
boundaries, hot-key splits and band hull. Plus the edge case of a band border exactly at a shard
boundary, replayed end to end (in process: the code each Spark task runs).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from engine_harness import example_count
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hotjoin.ops.replay.job import replay_in_process
from hotjoin.ops.replay.log import SIDE_R, SIDE_S, Ops, TopicOptions, build_log, read_export
from hotjoin.ops.replay.sharding import band_reach, plan_shards, route
from ops.replay.test_log import as_rows, edge_case_log, edge_plan, random_log

FINITE = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)
SMALL = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6)
SETTINGS = settings(max_examples=example_count(400), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _in_band(s: float, r: float, bmin: float, bmax: float) -> bool:
    return bmin <= s - r <= bmax  # docs/design.md#subscriptions: Python float subtraction is IEEE double


@SETTINGS
@given(s=FINITE, b1=FINITE, b2=FINITE, nudge=st.integers(-4, 4), which=st.sampled_from("lh"),
       unbounded=st.sampled_from(["", "lo", "hi"]))
def test_band_reach_never_misses_a_partner_at_the_borders(
        s: float, b1: float, b2: float, nudge: int, which: str, unbounded: str) -> None:
    """r chosen so that s − r lands on (or a few ulps off) a band end: if it is in, reach has r."""
    bmin, bmax = min(b1, b2), max(b1, b2)
    end = bmin if which == "l" else bmax
    r = s - end
    for _ in range(abs(nudge)):
        r = math.nextafter(r, math.copysign(math.inf, nudge))
    assume(math.isfinite(r))
    hull = (-math.inf if unbounded == "lo" else bmin, math.inf if unbounded == "hi" else bmax)
    lo, hi = band_reach(np.array([s]), hull)
    if _in_band(s, r, *hull):
        assert lo[0] <= r <= hi[0], (s, r, hull, lo[0], hi[0])


@SETTINGS
@given(s=SMALL, r=SMALL, b1=SMALL, b2=SMALL)
def test_band_reach_contains_every_partner(s: float, r: float, b1: float, b2: float) -> None:
    bmin, bmax = min(b1, b2), max(b1, b2)
    lo, hi = band_reach(np.array([s]), (bmin, bmax))
    if _in_band(s, r, bmin, bmax):
        assert lo[0] <= r <= hi[0]
    # and the reach is not absurdly wide: at most a relative 1e-12 beyond the real interval
    assert lo[0] >= (s - bmax) - 1e-12 * (abs(s) + abs(bmax) + 1)
    assert hi[0] <= (s - bmin) + 1e-12 * (abs(s) + abs(bmin) + 1)


def _ops(r_keys: list[float], s_keys: list[float]) -> Ops:
    """Publishes of R tuples r0.. and S tuples s0.. (for routing only)."""
    n_r, n = len(r_keys), len(r_keys) + len(s_keys)
    return Ops(seq=np.arange(1, n + 1), kind=np.zeros(n, dtype=np.int8),
               side=np.array([SIDE_R] * n_r + [SIDE_S] * len(s_keys), dtype=np.int8),
               id=np.array([f"r{i}" for i in range(n_r)] + [f"s{i}" for i in range(len(s_keys))],
                           dtype=object),
               key=np.array(r_keys + s_keys, dtype=np.float64), value=np.zeros(n),
               time=np.zeros(n, dtype=np.int64), sid=np.full(n, -1),
               clock=np.zeros(n, dtype=np.int64), has_clock=np.zeros(n, dtype=bool))


KEYS = st.one_of(st.sampled_from([0.0, -0.0, 0.1, 0.2, 0.3, 0.30000000000000004, 1.0, 5.0, 5.5]),
                 st.floats(-20, 20, allow_nan=False).map(lambda x: round(x, 1)))


@SETTINGS
@given(r_keys=st.lists(KEYS, min_size=1, max_size=30), s_keys=st.lists(KEYS, min_size=1, max_size=30),
       hot=st.integers(0, 40), shards=st.integers(2, 6), skew=st.sampled_from([0.1, 0.3, 1.0]),
       band=st.one_of(st.none(), st.tuples(st.sampled_from([-math.inf, -2.5, -0.1, 0.0, 0.2]),
                                           st.sampled_from([0.0, 0.1, 0.2, 1.0, math.inf]))))
def test_every_matching_pair_is_in_exactly_one_cell(
        r_keys: list[float], s_keys: list[float], hot: int, shards: int, skew: float,
        band: tuple[float, float] | None) -> None:
    """For every (r, s): at most one cell holds both, and one does when the pair can match."""
    r_keys = r_keys + [0.1] * hot  # a hot key on both sides
    s_keys = s_keys + [0.1] * (hot // 2)
    hull = None if band is None else (min(band), max(band))
    ops = _ops(r_keys, s_keys)
    plan = plan_shards(np.array(r_keys), np.array(s_keys), shards, hull, skew)
    cells = route(plan, ops)
    where: dict[int, set[int]] = {}
    for c, rows in enumerate(cells):
        for row in rows.tolist():
            where.setdefault(row, set()).add(c)
    n_r = len(r_keys)
    for i, rk in enumerate(r_keys):
        assert where.get(i), f"R tuple {i} reached no cell"
        for j, sk in enumerate(s_keys):
            both = where[i] & where.get(n_r + j, set())
            assert len(both) <= 1, (rk, sk, both)
            can = rk == sk or (hull is not None and _in_band(sk, rk, *hull))
            if can:
                assert len(both) == 1, (rk, sk, plan, where[i], where.get(n_r + j))


def test_hot_key_is_split_and_balanced() -> None:
    """One key holding 80% of the events gets cells of its own; R tuples spread over them."""
    rng = np.random.default_rng(1)
    keys = np.where(rng.random(4000) < 0.8, 42.0, rng.uniform(0, 100, 4000))
    plan = plan_shards(keys[:2000], keys[2000:], 4, None, 1.0)
    assert plan.hot_keys.tolist() == [42.0]
    hot_unit = int(plan.interval_unit[plan.interval_of(np.array([42.0]))[0]])
    assert plan.unit_k[hot_unit] >= 3
    ops = _ops(keys[:2000].tolist(), keys[2000:].tolist())
    cells = route(plan, ops)
    first, k = int(plan.unit_first[hot_unit]), int(plan.unit_k[hot_unit])
    split_side = int(plan.unit_split[hot_unit])
    per_cell = [int((ops.side[cells[c]] == split_side).sum()) for c in range(first, first + k)]
    assert min(per_cell) > 0.6 * max(per_cell), per_cell  # the split side is spread evenly
    assert plan.n_cells == len(cells)


def test_uniform_keys_give_balanced_ranges() -> None:
    rng = np.random.default_rng(2)
    keys = rng.uniform(0, 1000, 8000)
    plan = plan_shards(keys[:4000], keys[4000:], 4, (-1.0, 1.0), 1.0)
    assert plan.n_cells == 4 and plan.hot_keys.shape[0] == 0
    sizes = [c.shape[0] for c in route(plan, _ops(keys[:4000].tolist(), keys[4000:].tolist()))]
    assert max(sizes) < 1.2 * min(sizes), sizes


# ---- the edge case end to end: a band border exactly at a shard boundary -----------------------


def test_band_border_exactly_at_a_shard_boundary(tmp_path: Path) -> None:
    d, expected = edge_case_log(tmp_path)
    log = read_export(d / "events.parquet", d / "subscriptions.parquet")
    summary, table = replay_in_process(log, None, plan=edge_plan(), progress=lambda m: None)
    assert summary["plan"]["cells"] == 3
    assert as_rows(table) == expected
    # the S tuple at 2.0 reaches back over the boundary at 1.0 (r_at) and stays in its own range
    cells = route(edge_plan(), log.ops)
    s_hi = int(np.flatnonzero(log.ops.id == "s_hi")[0])
    assert sum(s_hi in c for c in cells) >= 2


def test_sharded_replay_of_a_skewed_log_equals_one_shard(tmp_path: Path) -> None:
    """Same deliveries with 1, 2, 4 shards and aggressive hot-key splitting (and the oracle's)."""
    g = random_log(11, n_ops=300, retention=6, hot=0.6)
    d = g.write(tmp_path / "x")
    log = read_export(d / "events.parquet", d / "subscriptions.parquet")
    outs = []
    for shards, skew in ((1, 1.0), (2, 0.2), (4, 0.1)):
        summary, table = replay_in_process(log, None, shards=shards, skew=skew,
                                           progress=lambda m: None)
        outs.append(as_rows(table))
        if shards > 1:
            assert summary["plan"]["hot_keys"], summary["plan"]
    assert outs[0] == outs[1] == outs[2] == g.expected_after()


def test_build_log_orders_and_clocks() -> None:
    """The merged order and the derived columns on a tiny hand-made log."""
    import pyarrow as pa

    ev = pa.table({"seq": [4, 2, 5], "op": ["publish", "publish", "delete"], "side": ["R", "S", "S"],
                   "id": ["a", "b", "b"], "key": [1.0, 2.0, None], "value": [0.0, 0.0, None],
                   "time": [7, 9, None]})
    subs = pa.table({"subscription_id": [0], "kind": ["select"], "a_lo": [None], "a_hi": [None],
                     "b_lo": [None], "b_hi": [None], "c_lo": [None], "c_hi": [None], "w": [None],
                     "delivery": ["pairs"], "snapshot": [False], "subscriber": ["x"],
                     "registered_seq": [1], "unsubscribed_seq": [3]},
                    schema=pa.schema([("subscription_id", pa.int64()), ("kind", pa.string()),
                                      *((c, pa.float64()) for c in ("a_lo", "a_hi", "b_lo", "b_hi",
                                                                    "c_lo", "c_hi")),
                                      ("w", pa.int64()), ("delivery", pa.string()),
                                      ("snapshot", pa.bool_()), ("subscriber", pa.string()),
                                      ("registered_seq", pa.int64()),
                                      ("unsubscribed_seq", pa.int64())]))
    log = build_log(TopicOptions(), ev, subs)
    assert log.ops.seq.tolist() == [1, 2, 3, 4, 5]
    assert log.ops.kind.tolist() == [2, 0, 3, 0, 1]  # subscribe, publish, unsubscribe, publish, delete
    assert log.ops.key[4] == 2.0  # the delete's key is its publish's
    assert log.ops.has_clock.tolist() == [False, False, True, True, True]
    assert log.ops.clock.tolist()[2:] == [9, 9, 9]  # time 7 at seq 4 does not lower the max
