"""BJ-Dynamic (``router/band.py``, paper 004 §4.2): ``strategy="auto"`` on band joins matches
the oracle, the choice follows the table size, learns per run inside a batch, explores one tuple
per explore interval and keeps its member until another is clearly cheaper."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from engine_harness import engine_factory, harness_settings, programs, run_program
from hypothesis import given

from hotjoin.matcher import BandJoin, Engine, Event, Range
from hotjoin.matcher.router.cost_model import CostProfile


@harness_settings(25)
@given(program=programs(kinds=("band",), max_ops=40, initial_subs=(3, 10)))
def test_auto_band_matches_oracle_shipped_profile(program: Any) -> None:
    run_program(engine_factory("auto", {"alpha": 0.2}), program)


def test_band_choice_follows_table_size() -> None:
    """Theorem 2: with an empty-ish S, BJ-DOuter (m lg n) is cheapest; as S grows the router
    moves away from it — and the deliveries match a static strategy throughout."""
    coef = {"BJ-QOuter": [0.0, 1e6], "BJ-DOuter": [0.0, 10.0], "BJ-MJ": [0.0, 1e6],
            "BJ-SSI": [5000.0, 0.0], "BJ-Hotspot": [1e9, 0.0, 0.0]}
    e = Engine(strategy="auto", options={"cost_profile": CostProfile(coef),
                                         "router_feedback": False})
    ref = Engine(strategy={"band": "BJ-QOuter"})
    subs = [BandJoin(b=Range(-float(i % 7), float(i % 5))) for i in range(64)]
    e.subscribe_many(subs)
    ref.subscribe_many(subs)
    rng = np.random.default_rng(2)
    for i in range(600):
        side = "S" if i % 2 else "R"
        ev = Event(side, f"{side}{i}", float(rng.integers(0, 200)), 0.0, i)  # type: ignore[arg-type]
        assert Counter(e.publish(ev)) == Counter(ref.publish(ev))
    dec = e.stats()["decisions"]
    assert dec["BJ-DOuter"] > 0 and dec["BJ-SSI"] > 0, dec
    e.check_invariants()


def test_band_router_inside_the_batch_learns_per_run() -> None:
    """BJ-Dynamic in ``publish_batch``: one decision per run of alike tuples, the refreshing
    run timed per tuple. With BJ-SSI modelled cheap but 4.5× dearer in truth (a fake clock
    advanced per tuple of each member's run), the runs move to BJ-MJ, every tuple is counted
    once, and the output equals a static strategy's."""
    e = Engine(strategy="auto", options={
        "cost_profile": CostProfile({"BJ-SSI": [1000.0, 0.0], "BJ-MJ": [3000.0, 0.0]}),
        "router_members": {"band": ("BJ-SSI", "BJ-MJ")}})
    ref = Engine(strategy={"band": "BJ-QOuter"})
    subs = [BandJoin(b=Range(-1, 1)), BandJoin(b=Range(0, 2), a=Range(0, 20))]
    e.subscribe_many(subs)
    ref.subscribe_many(subs)
    clock = {"now": 0.0}
    for m in e.band.members:  # type: ignore[attr-defined]
        cost = {"BJ-SSI": 9000.0, "BJ-MJ": 2000.0}[m.name]
        inner = m.match_many

        def run(events: Any, _inner: Any = inner, _cost: float = cost) -> None:
            _inner(events)
            clock["now"] += _cost * len(events)

        m.match_many = run
    e.band.clock = lambda: clock["now"]  # type: ignore[attr-defined]
    for j in range(60):
        side = "S" if j % 4 == 0 else "R"
        n = 40
        ids = [f"{side}{j}-{i}" for i in range(n)]
        keys = np.arange(n, dtype=np.float64) % 7 + j % 3
        vals = np.arange(n, dtype=np.float64) % 30
        times = np.full(n, j, dtype=np.int64)
        got = e.publish_batch([side] * n, ids, keys, vals, times, output="pairs")
        want = ref.publish_batch([side] * n, ids, keys, vals, times, output="pairs")
        assert (Counter(zip(got.output.subscription.tolist(), got.output.r_id.tolist(),
                            got.output.s_id.tolist(), strict=True))
                == Counter(zip(want.output.subscription.tolist(), want.output.r_id.tolist(),
                               want.output.s_id.tolist(), strict=True)))
    dec = e.band.routing_stats()["decisions"]  # type: ignore[attr-defined]
    assert sum(dec.values()) == 60 * 40 - 40  # every tuple once (the first S run met no R)
    assert dec["BJ-MJ"] > sum(dec.values()) / 2, dec


@pytest.mark.parametrize("run", [1, 500])
def test_band_router_explores_one_tuple_in_explore_interval(run: int) -> None:
    """BJ-Dynamic times one run per ``BAND_REFRESH`` tuples and explores a timed run whole:
    the tuples it may explore (an exploration due, run when the runner-up is close enough)
    stay near one in ``FEEDBACK_EVERY × EXPLORE_EVERY`` whether the stream comes one tuple
    at a time or in runs of 500 (an exploration of a 500-tuple run counts for 500), and one
    at a time explorations do come due. (Counting a band timed run as the SJ quiet factor, up
    to ``FEEDBACK_QUIET``, explored every timed run once converged.)"""
    import hotjoin.matcher.router.learning as router

    e = Engine(strategy={"band": "BJ-Dynamic"},
               options={"router_members": {"band": ("BJ-SSI", "BJ-Hotspot")}})
    e.subscribe_many([BandJoin(Range(-1.0 - k % 3, 1.0 + k % 5)) for k in range(60)])
    m = 200
    e.publish_batch(["S"] * m, [f"s{i}" for i in range(m)], np.arange(m, dtype=np.float64),
                    np.zeros(m), np.zeros(m, dtype=np.int64))
    ix: Any = e.band
    picks = [0]
    pick = ix._explore_pick

    def counted(*a: Any) -> Any:
        picks[0] += 1  # an exploration is due (it runs if the runner-up is close enough)
        return pick(*a)

    ix._explore_pick = counted
    n = 12_000
    keys = np.random.default_rng(3).uniform(0.0, m, n)
    for a in range(0, n, run):
        k = min(run, n - a)
        if run == 1:
            e.publish(Event("R", f"r{a}", float(keys[a]), 0.0, 0))
        else:
            e.publish_batch(["R"] * k, [f"r{a + j}" for j in range(k)], keys[a:a + k],
                            np.zeros(k), np.zeros(k, dtype=np.int64))
    pace = router.FEEDBACK_EVERY * router.EXPLORE_EVERY
    assert picks[0] * run <= 2 * n / pace + run, (picks, run)  # tuples explored at most
    assert ix.explorations <= picks[0]
    if run == 1:
        assert picks[0] >= n / pace / 2, picks


def test_band_router_keeps_its_member_until_another_is_clearly_cheaper() -> None:
    """BJ-Dynamic swaps member only for one modelled ``BAND_SWITCH`` times cheaper: a tie
    within the corrections' noise keeps the member whose index is warm; a clear win swaps,
    one at a time and on the batch path."""
    import hotjoin.matcher.router.band as router

    e = Engine(strategy={"band": "BJ-Dynamic"},
               options={"router_feedback": False,
                        "router_members": {"band": ("BJ-SSI", "BJ-Hotspot")}})
    e.subscribe_many([BandJoin(Range(-1.0, 1.0)) for _ in range(10)])
    e.publish_batch(["S"] * 5, [f"s{i}" for i in range(5)], np.arange(5.0), np.zeros(5),
                    np.zeros(5, dtype=np.int64))
    ix: Any = e.band
    costs = [100.0, 200.0]
    ix._costs = lambda x: list(costs)
    n = [0]

    def stream(k: int, batch: bool) -> int:
        ids = [f"r{n[0] + j}" for j in range(k)]
        n[0] += k
        if batch:  # runs of 16: a refresh falls due between runs
            for a in range(0, k, 16):
                m = len(ids[a:a + 16])
                e.publish_batch(["R"] * m, ids[a:a + 16], [2.0] * m, [0.0] * m, [0] * m)
        else:
            for i in ids:
                e.publish(Event("R", i, 2.0, 0.0, 0))
        return int(ix.last)

    for batch in (False, True):
        costs[:] = [100.0, 200.0]
        assert stream(2 * router.BAND_REFRESH, batch) == 0
        costs[:] = [100.0, 100.0 / (0.5 * (1.0 + router.BAND_SWITCH))]  # cheaper, inside the margin
        assert stream(3 * router.BAND_REFRESH, batch) == 0
        costs[:] = [100.0, 100.0 / (2.0 * router.BAND_SWITCH)]  # clearly cheaper
        assert stream(2 * router.BAND_REFRESH, batch) == 1
        costs[:] = [100.0 / (0.5 * (1.0 + router.BAND_SWITCH)), 100.0]  # back inside: stays
        assert stream(3 * router.BAND_REFRESH, batch) == 1
