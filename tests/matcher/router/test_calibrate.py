"""Calibration's core (``router/calibrate.py``): the non-negative least squares ``fit`` against
an unconstrained solve and planted constants, ``fit_profile`` recovering a profile from member
times, the measuring core ``time_members`` against a static engine, the grid, the workloads'
``build``/``load``, ``gc_paused`` and the Table II layout. The ``hotjoin calibrate`` command
itself is smoke-tested in ``tests/ops/test_calibrate.py``."""

from __future__ import annotations

import gc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.router import calibrate as C
from hotjoin.matcher.router.calibrate import (
    ALL_MEMBERS,
    MemberTimes,
    Point,
    fit,
    fit_profile,
    gc_paused,
    grid,
    table,
)
from hotjoin.matcher.router.cost_model import FEATURES, CostProfile


def test_fit_recovers_constants_and_stays_non_negative() -> None:
    rng = np.random.default_rng(0)
    x = np.column_stack([np.ones(500), rng.uniform(0, 100, 500), rng.uniform(0, 10, 500)])
    y = x @ np.array([50.0, 3.0, 0.0]) + rng.normal(0, 1.0, 500)
    c, half = fit(x, y)
    assert abs(c[0] - 50) < 1 and abs(c[1] - 3) < 0.05
    assert (c >= 0).all() and (half >= 0).all()
    # a feature whose true constant is negative is dropped, never fitted below zero
    y2 = x @ np.array([50.0, 3.0, -2.0])
    c2, _ = fit(x, y2)
    assert c2[2] == 0.0 and (c2 >= 0).all()


def test_time_members_counts_agree_with_a_static_engine() -> None:
    """The measuring core reports the affected count every member agreed on, per tuple: the
    same as a plain engine with one static strategy."""
    from hotjoin.matcher import Engine
    from hotjoin.matcher.model import Range, SelectJoin
    from hotjoin.matcher.router.calibrate import ALL_MEMBERS, load, time_members

    rng = np.random.default_rng(4)
    lo_a, lo_c = rng.uniform(0, 80, 300), rng.uniform(0, 80, 300)
    subs = [SelectJoin(a=Range(a, a + 20), c=Range(c, c + 20))
            for a, c in zip(lo_a.tolist(), lo_c.tolist(), strict=True)]
    keys = rng.integers(0, 30, 500).astype(np.float64)
    vals = rng.uniform(0, 100, 500)
    times = np.arange(500, dtype=np.int64)
    e = Engine(strategy="auto", options={"alpha": 0.05,
                                         "router_members": {"select": ALL_MEMBERS["select"]}})
    ref = Engine(strategy={"select": "SJ-Vanilla"})
    for eng in (e, ref):
        eng.subscribe_many(subs)
        load(eng, keys, vals, times)
    rk, rv = rng.integers(0, 35, 80).astype(np.float64), rng.uniform(0, 100, 80)
    mt = time_members(e, "select", "R", rk, rv)
    expect = [ref.probe("R", k, v) for k, v in zip(rk.tolist(), rv.tolist(), strict=True)
              if k < 30]  # keys 30..34 have no partner: skipped
    assert mt.affected.tolist() == expect
    assert sum(expect) > 0 and len(expect) > 40
    # several rounds with a lead-in: the first 5 tuples with partners run untimed
    mt2 = time_members(e, "select", "R", rk, rv, rounds=3, lead_in=5)
    assert mt2.affected.tolist() == expect[5:]
    assert mt2.ns.shape == (len(expect) - 5, len(ALL_MEMBERS["select"]))
    assert mt2.dynamic_ns.shape == (len(expect) - 5,) and (mt2.ns > 0).all()
    assert all(f.shape[0] == len(expect) - 5 for f in mt2.features)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(1, 4), st.integers(8, 40))
def test_fit_is_the_least_squares_solution_when_that_is_non_negative(seed: int, p: int,
                                                                     n: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 10.0, (n, p))
    y = x @ rng.uniform(0.0, 5.0, p) + rng.normal(0.0, 0.01, n)
    unconstrained, *_ = np.linalg.lstsq(x, y, rcond=None)
    c, half = fit(x, y)
    assert (c >= 0).all() and (half >= 0).all()
    if (unconstrained >= 0).all():
        assert c == pytest.approx(unconstrained, rel=1e-6, abs=1e-9)
    else:  # a column was fixed at 0: no better non-negative fit on the columns it kept
        kept = c > 0
        if kept.any():
            sub, *_ = np.linalg.lstsq(x[:, kept], y, rcond=None)
            assert c[kept] == pytest.approx(sub, rel=1e-6, abs=1e-9)


def test_fit_fixes_columns_that_never_vary_from_zero() -> None:
    x = np.column_stack([np.ones(20), np.zeros(20), np.arange(20.0)])
    c, half = fit(x, 2.0 + 0.5 * np.arange(20.0))
    assert c.tolist() == pytest.approx([2.0, 0.0, 0.5]) and half[1] == 0.0
    c, half = fit(np.zeros((5, 2)), np.ones(5))  # nothing to fit: all constants 0
    assert c.tolist() == [0.0, 0.0] and half.tolist() == [0.0, 0.0]


def test_fit_profile_recovers_planted_constants() -> None:
    rng = np.random.default_rng(1)
    members = ("BJ-MJ", "BJ-SSI")
    truth = {m: rng.uniform(1.0, 50.0, len(FEATURES[m])) for m in members}
    per_affected = 7.0
    n = 400
    features = [rng.uniform(1.0, 100.0, (n, len(FEATURES[m]))) for m in members]
    affected = rng.integers(0, 30, n).astype(np.float64)
    ns = np.column_stack([f @ truth[m] + per_affected * affected
                          for f, m in zip(features, members, strict=True)])
    mt = MemberTimes(members=members, ns=ns, dynamic_ns=ns.min(axis=1),
                     choice=ns.argmin(axis=1), affected=affected, features=features)
    profile, report = fit_profile([mt], {"note": "planted"})
    assert isinstance(profile, CostProfile) and profile.meta["note"] == "planted"
    for m in members:
        assert profile.constants(m) == pytest.approx(truth[m].tolist(), rel=1e-6)
        assert report[m]["per_affected_ns"] == pytest.approx(per_affected, rel=1e-6)
        assert report[m]["r2"] == pytest.approx(1.0)
        assert report[m]["samples"] == int(np.sum(ns[:, members.index(m)]
                                                  <= np.quantile(ns[:, members.index(m)], 0.99)))
    text = table(profile, report)
    assert text.splitlines()[0].split()[:2] == ["strategy", "term"]
    assert sum(line.startswith("BJ-MJ ") for line in text.splitlines()) == len(FEATURES["BJ-MJ"])
    assert "SJ-Vanilla" not in text  # strategies not fitted are not listed


@pytest.mark.parametrize("kind", ["select", "band", "window"])
def test_grid_points(kind: str) -> None:
    quick = grid(kind, quick=True)
    assert len(quick) == 2 and all(p.kind == kind for p in quick)
    full = grid(kind)
    assert len(full) == 4 * 4 * 3 and len({p.label() for p in full}) == len(full)
    assert {p.subscriptions for p in full} == {10_000, 50_000, 100_000, 200_000}


@pytest.mark.parametrize("kind", ["select", "band", "window"])
def test_build_subscribes_and_stores_the_point_s_sizes(kind: str) -> None:
    p = Point(kind, subscriptions=60, s_size=80, tau=4, join_rate=5.0)
    e, (rk, rv) = C.build(p)
    assert e.stats()["subscriptions"][kind] == 60
    assert len(e.tables["S"]) == 80 and rk.shape == rv.shape == (400,)
    again, (rk2, _) = C.build(p)  # seeded: the same workload
    assert rk2.tolist() == rk.tolist()
    assert set(C._strategy(e, kind).member_names) == set(ALL_MEMBERS[kind])


def test_gc_paused_restores_the_collector() -> None:
    was = gc.isenabled()
    try:
        gc.enable()
        with gc_paused():
            assert not gc.isenabled()
        assert gc.isenabled()
        gc.disable()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # off before: stays off
        gc.enable()
        with pytest.raises(RuntimeError), gc_paused():
            raise RuntimeError("a failing timed pass")
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


def test_machine_describes_the_host() -> None:
    m = C.machine()
    assert set(m) == {"cpu", "cores", "memory_gib", "python", "platform"}
    assert m["cores"] >= 1 and m["python"].count(".") == 2
