"""SJ-Dynamic (``router/select.py``, paper 004 §4.1): ``strategy="auto"`` on select joins
matches the oracle with the shipped profile, the choice varies from tuple to tuple with results
unchanged, and the fast path picks the cheapest member by the full cost models."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from engine_harness import engine_factory, harness_settings, programs, run_program
from hypothesis import given

from hotjoin.matcher import Engine, Event, Range, SelectJoin, WindowJoin
from hotjoin.matcher.router.cost_model import FEATURES, CostProfile
from hotjoin.matcher.router.dynamic import DEFAULT_MEMBERS

ALL_MEMBERS = {"select": DEFAULT_MEMBERS["select"] + ("SJ-SSI",), "band": DEFAULT_MEMBERS["band"],
               "window": DEFAULT_MEMBERS["window"]}


@harness_settings(25)
@given(program=programs(kinds=("select",), max_ops=40, initial_subs=(4, 14)))
def test_auto_select_matches_oracle_shipped_profile(program: Any) -> None:
    run_program(engine_factory("auto", {"alpha": 0.2}), program)


def _alternating_profile(kind: str, cheap_feature_member: str) -> CostProfile:
    """Every member costs 1000 except ``cheap_feature_member``, whose cost grows with its last
    feature: it wins on tuples where that feature is small and loses where it is large."""
    coef = {}
    for name in DEFAULT_MEMBERS[kind]:
        c = [0.0] * len(FEATURES[name])
        c[0] = 1000.0
        if name == cheap_feature_member:
            c[0] = 0.0
            c[-1] = 20.0
        coef[name] = c
    return CostProfile(coef)


def test_select_choice_varies_per_tuple_and_results_stay_exact() -> None:
    """SJ-JoinFirst's m'·√|Q| term: keys with one partner go to JoinFirst, crowded keys not."""
    prof = _alternating_profile("select", "SJ-JoinFirst")
    e = Engine(strategy="auto", options={"cost_profile": prof, "router_feedback": False})
    ref = Engine(strategy={"select": "SJ-Vanilla"})
    rng = np.random.default_rng(1)
    subs = [SelectJoin(a=Range(float(lo), float(lo + 30)), c=Range(None, float(hi)))
            for lo, hi in zip(rng.integers(0, 70, 40), rng.integers(0, 100, 40), strict=True)]
    assert e.subscribe_many(subs) == ref.subscribe_many(subs)
    for i in range(300):  # key 0 crowded (many partners), keys 1..50 sparse
        key = 0.0 if i % 3 == 0 else float(rng.integers(1, 50))
        ev = Event("S", f"s{i}", key, float(rng.integers(0, 100)), i)
        assert Counter(e.publish(ev)) == Counter(ref.publish(ev))
    for i in range(200):
        key = 0.0 if i % 2 else float(rng.integers(1, 50))
        ev = Event("R", f"r{i}", key, float(rng.integers(0, 100)), 300 + i)
        assert Counter(e.publish(ev)) == Counter(ref.publish(ev))
    dec = e.stats()["decisions"]
    assert dec["SJ-JoinFirst"] > 0
    assert sum(v for k, v in dec.items() if k != "SJ-JoinFirst") > 0
    e.check_invariants()


def test_fast_path_picks_the_cheapest_by_the_full_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-tuple fast path (constants folded every PLAN_REFRESH tuples) chooses exactly the
    argmin of the full cost formulas when the fold is fresh (refresh every tuple here)."""
    import hotjoin.matcher.router.estimators as estimators
    import hotjoin.matcher.router.learning as router

    monkeypatch.setattr(router, "PLAN_REFRESH", 0)
    monkeypatch.setattr(estimators, "SAMPLE_EVERY", 10**9)
    rng = np.random.default_rng(5)
    prof = CostProfile({n: [float(x) for x in rng.choice([0.0, 1.0, 50.0, 2000.0], len(f))]
                        for n, f in FEATURES.items()})
    e = Engine(strategy="auto", options={"cost_profile": prof, "alpha": 0.2,
                                         "router_members": dict(ALL_MEMBERS),
                                         "router_feedback": False})
    e.subscribe_many([SelectJoin(a=Range(float(x), float(x + 20)), c=Range(float(y), float(y + 5)))
                      for x, y in zip(rng.integers(0, 80, 60), rng.integers(0, 95, 60),
                                      strict=True)])
    e.subscribe_many([WindowJoin(a=Range(float(x), float(x + 30)), c=Range(None, float(y)),
                                 w=int(w)) for x, y, w in zip(rng.integers(0, 70, 40),
                                                              rng.integers(0, 100, 40),
                                                              rng.integers(0, 50, 40),
                                                              strict=True)])
    checked = {"select": 0, "window": 0}
    for i in range(400):
        side = "S" if i < 250 or i % 2 else "R"
        key, val = float(rng.integers(0, 6)), float(rng.integers(0, 100))
        if side == "R":
            table = e.tables["S"]
            c = e.select.costs(1, key, val, i, table)  # type: ignore[union-attr]
            cw = e.window.costs(1, key, val, i, table)  # type: ignore[union-attr]
        e.publish(Event(side, f"{side}{i}", key, val, i))  # type: ignore[arg-type]
        if side == "R" and c is not None:
            assert c[e.select.last] <= min(c) * (1 + 1e-9) + 1e-9  # type: ignore[union-attr]
            checked["select"] += 1
        if side == "R" and cw is not None:
            assert cw[e.window.last] <= min(cw) * (1 + 1e-9) + 1e-9  # type: ignore[union-attr]
            checked["window"] += 1
    assert checked["select"] > 50 and checked["window"] > 50
