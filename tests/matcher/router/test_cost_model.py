"""Each strategy's cost model is written once (``cost_model.MODELS``, paper 004 §4): its folded
plan, as the router evaluates it per tuple (select joins: the compiled
``choice_kernels.member_cost``), equals ``Σ c_j · features_j`` on every tuple. Cost profiles:
a user profile overrides the shipped one strategy by strategy, bad files say why, an older
model's constants are set aside."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hotjoin.matcher import Engine, Event, Range, SelectJoin, WindowJoin
from hotjoin.matcher.router.choice_kernels import empty_plan, fill_row, member_cost
from hotjoin.matcher.router.cost_model import (
    BUILTIN_COEF,
    FEATURES,
    MODELS,
    CostProfile,
    SelectQuantities,
    WindowQuantities,
    fresh_skyline,
    load_profile,
    skyline_sizes,
)
from hotjoin.matcher.router.dynamic import DEFAULT_MEMBERS

MEMBERS = {"select": DEFAULT_MEMBERS["select"] + ("SJ-SSI",),
           "window": DEFAULT_MEMBERS["window"]}


def select_plan_cost(plan: tuple[Any, ...], x: SelectQuantities) -> float:
    """The router's per-tuple cost of a select plan (``cost_model.SelectPlan``): the kernel's
    own formula (``choice_kernels.member_cost``) over the plan's row."""
    row = empty_plan(1)
    fill_row(row, 0, *plan, 1.0)
    return member_cost(row, 0, int(x.m1), x.n1)


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


def test_profile_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user profile overrides the shipped one strategy by strategy; bad files say why."""
    monkeypatch.delenv("HOTJOIN_PROFILE", raising=False)
    shipped = load_profile()
    assert set(shipped.coef) >= set(FEATURES)
    mine = CostProfile({"BJ-MJ": [1.0, 2.0]}, {"BJ-MJ": [(0.5, 1.5), (1.0, 3.0)]})
    path = tmp_path / "p.json"
    mine.save(path)
    monkeypatch.setenv("HOTJOIN_PROFILE", str(path))
    merged = load_profile()
    assert merged.constants("BJ-MJ") == [1.0, 2.0]
    assert merged.constants("BJ-SSI") == shipped.constants("BJ-SSI")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "hotjoin-cost-profile/1", "coef": {"BJ-MJ": [1.0]}}))
    with pytest.raises(ValueError, match="BJ-MJ has 1 constants"):
        CostProfile.load(bad)
    bad.write_text("{nope")
    with pytest.raises(ValueError, match="not valid JSON"):
        CostProfile.load(bad)
    with pytest.raises(ValueError, match="does not exist"):
        CostProfile.load(tmp_path / "missing.json")
    with pytest.raises(ValueError, match=">= 0"):
        CostProfile({"BJ-MJ": [1.0, -2.0]})
    assert set(BUILTIN_COEF) == set(FEATURES)


def test_a_profile_of_an_older_model_keeps_the_shipped_constants(tmp_path: Path) -> None:
    """An upgrade that changes a strategy's cost model: the user's old fit of it is set aside
    (named in ``meta["stale"]``), the rest of the file still applies, nothing fails."""
    path = tmp_path / "old.json"
    path.write_text(json.dumps({
        "format": "hotjoin-cost-profile/1",
        "features": {"SJ-SelectFirst": ["1", "lg|S|", "lg|Q|", "n'·lg m'"],
                     "BJ-MJ": list(FEATURES["BJ-MJ"])},
        "coef": {"SJ-SelectFirst": [1.0, 2.0, 3.0, 4.0], "BJ-MJ": [5.0, 6.0]}}))
    prof = CostProfile.load(path)
    assert prof.meta["stale"] == ["SJ-SelectFirst"]
    assert prof.constants("BJ-MJ") == [5.0, 6.0]
    assert len(prof.constants("SJ-SelectFirst")) == len(FEATURES["SJ-SelectFirst"])
