"""Tests of the Table I workload generator (``matcher.workload``, paper 004 §5).

Determinism per seed, the configured distributions (means within tolerance), exact stabbing-number
targeting, output-size targeting and the churn sequence of Fig. 11.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from hotjoin.matcher.model import BandJoin, SelectJoin, WindowJoin
from hotjoin.matcher.oracle import OracleEngine
from hotjoin.matcher.workload import (
    TableIConfig,
    apply_churn,
    band_churn,
    band_churn_arrays,
    band_length_for_depth,
    band_ranges_arrays,
    band_ranges_for_affected,
    band_ranges_for_tau,
    band_subscriptions,
    clustered_ranges,
    expected_join_rate,
    expected_selection_rate,
    hotspot_ranges_arrays,
    mean_affected,
    r_arrays,
    r_events,
    s_arrays,
    s_events,
    select_ranges_arrays,
    select_subscriptions,
    window_arrays,
    window_subscriptions,
)

CFG = TableIConfig(n_subscriptions=20_000, r_size=20_000, s_size=20_000, seed=7)


def greedy_tau(lo: np.ndarray, hi: np.ndarray) -> int:
    """Stabbing number by the canonical greedy partition (sort by right end, stab at it)."""
    order = np.argsort(hi, kind="stable")
    point, groups = -math.inf, 0
    for a, b in zip(lo[order].tolist(), hi[order].tolist(), strict=True):
        if a > point:
            point, groups = b, groups + 1
    return groups


def _all_arrays(cfg: TableIConfig) -> list[np.ndarray]:
    return [
        *r_arrays(cfg, 500, disorder=3),
        *s_arrays(cfg, 500),
        *select_ranges_arrays(cfg),
        *window_arrays(cfg),
        *band_ranges_arrays(cfg),
        *band_ranges_for_tau(cfg, 17),
        *hotspot_ranges_arrays(cfg, 0.3),
        *band_churn_arrays(cfg, 300),
    ]


# ---- determinism -------------------------------------------------------------------------------


def test_deterministic_per_seed_and_streams_independent() -> None:
    a = _all_arrays(CFG)
    b = _all_arrays(replace(CFG))
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    c = _all_arrays(replace(CFG, seed=8))
    assert not np.array_equal(a[0], c[0]) and not np.array_equal(a[-2], c[-2])
    # drawing events first does not change the subscriptions (one stream per generator)
    lo1, _ = band_ranges_arrays(CFG)
    r_events(CFG, 100)
    lo2, _ = band_ranges_arrays(CFG)
    np.testing.assert_array_equal(lo1, lo2)
    assert band_churn(CFG, 50) == band_churn(CFG, 50)
    assert r_events(CFG, 20) == r_events(CFG, 20)
    assert r_events(CFG, 20, batch=1) != r_events(CFG, 20)


# ---- distributions (Table I) --------------------------------------------------------------------


def test_event_distributions() -> None:
    n = 200_000
    rk, rv, rt = r_arrays(CFG, n)
    sk, sv, _ = s_arrays(CFG, n)
    for x in (rk, rv, sk, sv):
        assert np.all(x == np.rint(x))  # integer-valued as in the paper
    assert rk.min() >= 0 and rk.max() <= 10_000 and sk.min() >= 0 and sk.max() <= 10_000
    assert abs(rk.mean() - 5_000) < 50 and abs(rk.std() - 10_000 / math.sqrt(12)) < 50
    assert abs(rv.mean() - 500_000) < 5_000 and rv.min() >= 0 and rv.max() <= 1_000_000
    assert abs(sv.mean() - 500_000) < 5_000
    assert abs(sk.mean() - 5_000) < 15 and abs(sk.std() - 1_000) < 15
    np.testing.assert_array_equal(rt, np.arange(n))


def test_s_key_clipped_and_r_key_sigma() -> None:
    sk = s_arrays(replace(CFG, s_key_sigma=50_000.0), 10_000)[0]
    assert sk.min() == 0 and sk.max() == 10_000
    assert np.mean((sk == 0) | (sk == 10_000)) > 0.8
    rk = r_arrays(replace(CFG, r_key_sigma=100.0), 10_000)[0]
    assert abs(rk.mean() - 5_000) < 5 and abs(rk.std() - 100) < 5


def test_non_integer_mode() -> None:
    cfg = replace(CFG, integer=False)
    rk = r_arrays(cfg, 1000)[0]
    lo, hi = band_ranges_arrays(cfg)
    assert np.any(rk != np.rint(rk)) and np.any(lo != np.rint(lo))
    assert np.all(lo <= hi)


def test_subscription_distributions() -> None:
    cfg = replace(CFG, n_subscriptions=100_000)
    a_lo, a_hi, c_lo, c_hi = select_ranges_arrays(cfg)
    assert abs(((a_lo + a_hi) / 2).mean() - cfg.a_mid_mu) < 2_000
    assert abs(((a_lo + a_hi) / 2).std() - cfg.a_mid_sigma) < 2_000
    assert abs((a_hi - a_lo).mean() - cfg.sel_len_mu) < 500
    assert abs((a_hi - a_lo).std() - cfg.sel_len_sigma) < 500
    assert abs((c_hi - c_lo).mean() - cfg.sel_len_mu) < 500
    c_mid = (c_lo + c_hi) / 2
    assert abs(c_mid.mean() - 500_000) < 5_000 and c_mid.min() >= -1 and c_mid.max() <= 1_000_001
    b_lo, b_hi = band_ranges_arrays(cfg)
    assert np.all(b_lo <= b_hi) and np.all(b_lo == np.rint(b_lo))
    b_mid = (b_lo + b_hi) / 2
    assert abs(b_mid.mean()) < 50 and b_mid.min() >= -5_001 and b_mid.max() <= 5_001
    assert abs((b_hi - b_lo).mean() - cfg.b_len_mu) < 10
    assert abs((b_hi - b_lo).std() - cfg.b_len_sigma) < 10
    *_, w = window_arrays(cfg, w_mu=500, w_sigma=100)
    assert w.dtype == np.int64 and w.min() >= 0 and abs(w.mean() - 500) < 5


def test_join_and_selection_rates() -> None:
    cfg = replace(CFG, r_key_sigma=300.0)
    sk = s_arrays(cfg, cfg.s_size)[0]
    rk = r_arrays(cfg, 2_000)[0]
    counts = np.bincount(sk.astype(np.int64), minlength=10_001)
    measured = counts[rk.astype(np.int64)].mean()
    assert measured == pytest.approx(expected_join_rate(cfg), rel=0.1)
    # Fig. 7(i): event selection rate 0.1 with the defaults (E[len A] / |dom A|)
    assert expected_selection_rate(CFG) == pytest.approx(0.1, abs=0.01)
    a_lo, a_hi, _, _ = select_ranges_arrays(CFG)
    ra = r_arrays(CFG, 200)[1]
    rate = np.mean([np.mean((a_lo <= a) & (a <= a_hi)) for a in ra])
    assert rate == pytest.approx(0.1, abs=0.015)


def test_objects_match_arrays() -> None:
    cfg = replace(CFG, n_subscriptions=300)
    subs = band_subscriptions(cfg)
    lo, hi = band_ranges_arrays(cfg)
    assert all(isinstance(q, BandJoin) and q.a.unbounded and q.c.unbounded for q in subs)
    assert [q.b.lo for q in subs] == lo.tolist() and [q.b.hi for q in subs] == hi.tolist()
    with_sel = band_subscriptions(replace(cfg, band_selections=True))
    assert not any(q.a.unbounded or q.c.unbounded for q in with_sel)
    assert [q.b for q in with_sel] == [q.b for q in subs]
    sel = select_subscriptions(cfg)
    assert len(sel) == 300 and all(isinstance(q, SelectJoin) for q in sel)
    win = window_subscriptions(cfg, w_mu=10, w_sigma=5)
    assert all(isinstance(q, WindowJoin) and q.w >= 0 for q in win)


def test_events_ids_times_and_disorder_never_late() -> None:
    evs = r_events(CFG, 1_000, start_time=100, time_step=2, disorder=5, start_index=10)
    assert [e.id for e in evs[:2]] == ["r10", "r11"]
    assert len({e.id for e in evs}) == 1_000
    assert all(e.side == "R" for e in evs)
    assert min(e.time for e in evs) >= 95 and max(e.time for e in evs) <= 100 + 2 * 999
    assert any(e.time < evs[i - 1].time for i, e in enumerate(evs) if i)  # really disordered
    # disorder <= lateness + time_step: no event is late (the watermark rule, matcher/oracle.py)
    engine = OracleEngine(lateness=3)
    engine.publish_many(evs)
    s = s_events(CFG, 10, id_prefix="x")
    assert s[0].id == "x0" and s[0].side == "S"


# ---- stabbing number targeting ------------------------------------------------------------------


@pytest.mark.parametrize("tau", [1, 2, 7, 100, 1_000, 5_000, 10_000])
def test_tau_targeting_exact(tau: int) -> None:
    lo, hi = band_ranges_for_tau(CFG, tau)
    assert lo.size == CFG.n_subscriptions and np.all(lo <= hi)
    assert greedy_tau(lo, hi) == tau


@pytest.mark.parametrize("tau", [1, 3, 50, 20_000])
def test_tau_targeting_floats(tau: int) -> None:
    rng = np.random.default_rng(0)
    lo, hi = clustered_ranges(rng, 20_000, tau, -1.0, 1.0, integer=False)
    assert greedy_tau(lo, hi) == tau


def test_tau_targeting_rejects_impossible() -> None:
    with pytest.raises(ValueError):
        band_ranges_for_tau(replace(CFG, n_subscriptions=5), 6)
    with pytest.raises(ValueError):
        band_ranges_for_tau(CFG, 10_002)  # more distinct integer centres than the width


def test_fig10i_default_tau_grows_like_the_paper() -> None:
    # paper 004 §5.2: "the number of stabbing groups also increases from about 10 to 60"
    small = greedy_tau(*band_ranges_arrays(CFG, 50))
    large = greedy_tau(*band_ranges_arrays(CFG, 500_000))
    assert 5 <= small <= 20
    assert 40 <= large <= 90


def test_hotspot_ranges() -> None:
    lo, hi, hot = hotspot_ranges_arrays(CFG, 0.4, n_hot=4, n_scattered_groups=1_000)
    assert hot.sum() == 8_000
    assert greedy_tau(lo, hi) == 4 + 1_000
    assert greedy_tau(lo[hot], hi[hot]) == 4
    assert hi[hot].max() < lo[~hot].min()  # scattered part disjoint from the hotspots
    lo1, hi1, hot1 = hotspot_ranges_arrays(CFG, 1.0, n_hot=3)
    assert hot1.all() and greedy_tau(lo1, hi1) == 3


def test_stabbing_module_agrees() -> None:
    from hotjoin.matcher.partition import stabbing

    for lo, hi in (band_ranges_for_tau(CFG, 37), band_ranges_arrays(CFG, 5_000)):
        assert int(stabbing.stabbing_number(lo, hi)) == greedy_tau(lo, hi)


# ---- output size targeting ----------------------------------------------------------------------


def test_depth_targeting() -> None:
    cfg = replace(CFG, n_subscriptions=50_000, integer=False)
    mu = band_length_for_depth(cfg, 40)
    lo, hi = band_ranges_arrays(replace(cfg, b_len_mu=mu, b_len_sigma=mu / 5))
    pts = np.linspace(-3_000, 3_000, 61)
    depth = np.mean([np.count_nonzero((lo <= p) & (p <= hi)) for p in pts])
    assert depth == pytest.approx(40, rel=0.15)


def test_mean_affected_equals_brute_force() -> None:
    rng = np.random.default_rng(1)
    lo = rng.integers(-5, 5, 200).astype(float)
    hi = lo + rng.integers(0, 3, 200)
    r = rng.integers(0, 10, 20).astype(float)
    s = rng.integers(0, 10, 7).astype(float)
    brute = np.mean(
        [sum(any(lo[i] <= sk - rk <= hi[i] for sk in s) for i in range(200)) for rk in r]
    )
    assert mean_affected(lo, hi, r, s) == pytest.approx(brute)


def test_affected_targeting() -> None:
    cfg = replace(CFG, n_subscriptions=5_000, s_size=300)
    lo, hi, achieved = band_ranges_for_affected(cfg, 1_500)
    assert achieved == pytest.approx(1_500, rel=0.05)
    r_keys = r_arrays(cfg, 32, batch=7)[0]
    assert mean_affected(lo, hi, r_keys, s_arrays(cfg, cfg.s_size)[0]) == achieved


# ---- churn (Fig. 11) ---------------------------------------------------------------------------


def test_churn_sequence_and_apply() -> None:
    cfg = replace(CFG, n_subscriptions=200)
    ops = band_churn(cfg, 2_000)
    inserts = sum(op[0] == "subscribe" for op in ops)
    assert 850 < inserts < 1_150
    live = 200
    for kind, arg in ops:
        if kind == "subscribe":
            assert isinstance(arg, BandJoin)
            live += 1
        else:
            assert 0 <= arg < live
            live -= 1
    engine = OracleEngine()
    initial = engine.subscribe_many(band_subscriptions(cfg))
    final = apply_churn(engine, ops, list(initial))
    assert len(final) == live == len(engine.subscriptions())
    assert sorted(final) == sorted(engine.subscriptions())


def test_churn_delete_on_empty_becomes_insert() -> None:
    ops = band_churn(CFG, 10, insert_fraction=0.0, n_initial=2)
    assert [k for k, _ in ops] == ["unsubscribe", "unsubscribe"] + ["subscribe", "unsubscribe"] * 4
    assert ops[1] == ("unsubscribe", 0)
