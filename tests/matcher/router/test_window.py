"""WJ-Dynamic (``router/window.py``, paper 004 §4.2): ``strategy="auto"`` on window joins
matches the oracle, its decisions are counted, and it decides once per run of clear choices."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from engine_harness import engine_factory, harness_settings, programs, run_program
from hypothesis import given

from hotjoin.matcher import Engine, Event, Range, WindowJoin
from hotjoin.matcher.router.cost_model import CostProfile
from hotjoin.matcher.router.dynamic import DEFAULT_MEMBERS


@harness_settings(25)
@given(program=programs(kinds=("window",), max_ops=40, initial_subs=(3, 10)))
def test_auto_window_matches_oracle_shipped_profile(program: Any) -> None:
    run_program(engine_factory("auto", {"alpha": 0.2}), program)


def test_window_decisions_counted_and_exact() -> None:
    e = Engine(strategy="auto")
    ref = Engine(strategy={"window": "WJ-JoinFirst"})
    rng = np.random.default_rng(3)
    subs = [WindowJoin(a=Range(float(lo), float(lo + 40)), c=Range(None, None),
                       w=int(rng.integers(0, 30))) for lo in rng.integers(0, 60, 50)]
    e.subscribe_many(subs)
    ref.subscribe_many(subs)
    for i in range(400):
        side = "S" if rng.random() < 0.6 else "R"
        ev = Event(side, f"{side}{i}", float(rng.integers(0, 4)), float(rng.integers(0, 100)), i)  # type: ignore[arg-type]
        assert Counter(e.publish(ev)) == Counter(ref.publish(ev))
    st_ = e.stats()
    assert set(st_["window"]["decisions"]) == set(DEFAULT_MEMBERS["window"])
    assert sum(st_["window"]["decisions"].values()) > 0
    assert all(st_["decisions"][k] == v for k, v in st_["window"]["decisions"].items())
    assert st_["strategies"]["window"] == "WJ-Dynamic"


@pytest.mark.parametrize(("margin", "feedback"), [(10.0, False), (1.5, False), (10.0, True)])
def test_window_router_decides_once_per_run_of_clear_choices(margin: float,
                                                             feedback: bool) -> None:
    """WJ-Dynamic reuses a choice made by ≥ ``RUN_MARGIN`` for the next ``RUN_LENGTH`` tuples
    of the same m′ octave, never for a timed tuple: with WJ-SSI modelled 10× below
    WJ-JoinFirst, about one tuple in RUN_LENGTH + 1 is decided in full; at 1.5× every tuple
    is; with every second tuple timed, at least those are. Every delivery equals a static
    strategy's."""
    import hotjoin.matcher.router.learning as router
    import hotjoin.matcher.router.window as window_router

    e = Engine(strategy="auto", options={
        "cost_profile": CostProfile({"WJ-SSI": [1000.0, 0.0, 0.0, 0.0],
                                     "WJ-JoinFirst": [1000.0 * margin, 0.0, 0.0]}),
        "router_members": {"window": ("WJ-SSI", "WJ-JoinFirst")},
        "router_feedback": feedback})
    ref = Engine(strategy={"window": "WJ-SelectFirst"})
    subs = [WindowJoin(a=Range(0, 50), c=Range(None, None), w=5),
            WindowJoin(a=Range(10, 30), c=Range(0, 20), w=3)]
    e.subscribe_many(subs)
    ref.subscribe_many(subs)
    full = [0]
    inner = window_router.fresh_skyline

    def counted(sky: Any, b: float) -> float:
        full[0] += 1  # WJ-SSI's cost reads its skyline state on every full decision
        return float(inner(sky, b))

    now = [0]

    def clock() -> int:  # a timed run "takes" 0.5 µs against 1 µs modelled: sign steps only,
        now[0] += 500  # so the 10× margin stays
        return now[0]

    e.window.clock = clock  # type: ignore[attr-defined]
    routed = 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(window_router, "fresh_skyline", counted)
        mp.setattr(router, "FEEDBACK_EVERY", 2)
        mp.setattr(router, "FEEDBACK_QUIET", 1)  # every second tuple, also once converged
        mp.setattr(router, "EXPLORE_EVERY", 10**9)
        for i in range(2000):
            side = "S" if i % 4 == 0 else "R"
            ev = Event(side, f"{side}{i}", float(i % 3), float(i % 40), i)  # type: ignore[arg-type]
            assert Counter(e.publish(ev)) == Counter(ref.publish(ev))
            routed = sum(e.window.routing_stats()["decisions"].values())  # type: ignore
    assert routed > 1000
    if feedback:  # the timed half decides in full (and is timed only then)
        assert full[0] >= routed // 2 - 2, (full, routed)
    elif margin >= window_router.RUN_MARGIN:
        assert full[0] < 2 * routed / (window_router.RUN_LENGTH + 1), (full, routed)
    else:
        assert full[0] == routed, (full, routed)
