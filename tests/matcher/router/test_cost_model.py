"""Each strategy's cost model is written once (``cost_model.MODELS``, paper 004 §4): its folded
plan, as the router's per-tuple loop reads it, equals ``Σ c_j · features_j`` on every tuple."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hotjoin.matcher import Engine, Event, Range, SelectJoin, WindowJoin
from hotjoin.matcher.router.cost_model import (
    FEATURES,
    MODELS,
    SelectQuantities,
    WindowQuantities,
    fresh_skyline,
    lg,
    skyline_sizes,
)
from hotjoin.matcher.router.dynamic import DEFAULT_MEMBERS

MEMBERS = {"select": DEFAULT_MEMBERS["select"] + ("SJ-SSI",),
           "window": DEFAULT_MEMBERS["window"]}


def select_plan_cost(plan: tuple[Any, ...], x: SelectQuantities) -> float:
    """The router's per-tuple formula for a select plan (``cost_model.SelectPlan``)."""
    _, code, a, k, extra = plan
    lgm = lg(x.m1)
    if code == 0:
        return a + k * x.m1
    if code == 1:
        return a + k * x.n1 * lgm
    if code == 2:
        return a + k * lgm
    if code == 4:
        return a + k * x.n1 + extra * x.m1
    tau_s, f, c3, c4 = extra
    return a + min(tau_s, f * x.n1) * (c3 + c4 * lgm)


def window_plan_cost(plan: tuple[Any, ...], member: Any, x: WindowQuantities) -> float:
    """The router's per-tuple formula for a window plan (``cost_model.WindowPlan``)."""
    code, a, k, k2, k3, tau = plan
    if code == 0:
        return a + k * x.mb
    if code == 1:
        return a + k * x.n1 * math.sqrt(x.mp)
    mbar, mpb = skyline_sizes(fresh_skyline(member.skies[x.d], x.b), x.mb, x.mp, tau)
    return a + k * mpb + k2 * mbar + k3 * x.n1 * math.sqrt(x.mp)


def test_every_strategy_has_one_model() -> None:
    assert set(MODELS) == set(FEATURES)
    assert all(MODELS[n].terms == FEATURES[n] and MODELS[n].name == n for n in MODELS)


def test_plans_equal_the_feature_formulas() -> None:
    rng = np.random.default_rng(3)
    e = Engine(strategy="auto", options={"alpha": 0.2, "router_members": MEMBERS,
                                         "router_feedback": False})
    lo = rng.integers(0, 80, 100).astype(float)
    e.subscribe_many([SelectJoin(a=Range(x, x + 25), c=Range(x / 2, x / 2 + 8)) for x in lo[:60]])
    e.subscribe_many([WindowJoin(a=Range(x, None), c=Range(None, x + 10), w=int(x) % 40)
                      for x in lo[60:]])
    checked = 0
    for i in range(300):
        side = "S" if i < 200 or i % 2 else "R"
        key, val = float(rng.integers(0, 6)), float(rng.integers(0, 100))
        e.publish(Event(side, f"{side}{i}", key, val, i))  # type: ignore[arg-type]
        if side == "S":
            continue
        table = e.tables["S"]
        for ix in (e.select, e.window):
            x = ix.quantities(1, key, val, i, table)  # type: ignore[union-attr]
            if x is None:
                continue
            for name, mem in zip(ix.member_names, ix.members, strict=True):  # type: ignore[union-attr]
                model = MODELS[name]
                c = [float(v) for v in rng.choice([0.0, 1.0, 50.0, 2000.0], len(model.terms))]
                want = model.cost(c, mem, x)
                if isinstance(x, SelectQuantities):
                    got = select_plan_cost(model.plan(c, mem, x), x)  # type: ignore[attr-defined]
                else:
                    got = window_plan_cost(model.plan(c, mem, x), mem, x)  # type: ignore[attr-defined]
                assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9), (name, got, want)
                checked += 1
    assert checked > 200
