"""The kind interface (``matcher/joins/interface.py``).

Every strategy and router of every kind, driven directly through ``KindIndex.match`` (one tuple,
``OneEvent``) and ``KindIndex.match_many`` (a run, ``EventRun``), gives what a brute force over
the stored tuples gives, in IDENTIFY, COUNT and PAIRS; the routers reach their members only
through the interface's public methods; the bundles look a key's partners up once for every
kind; a router option naming no member refuses the engine.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from engine_harness import EQUI_KEYS, VALUES, harness_settings, subscriptions
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.matcher.engine import STRATEGIES, Engine
from hotjoin.matcher.joins.interface import EventRun, KindIndex, OneEvent
from hotjoin.matcher.joins.protocol import COUNT, IDENTIFY, PAIRS, BatchRows, MatchBuffer
from hotjoin.matcher.kinds import KINDS
from hotjoin.matcher.model import BandJoin, Event, Range, SelectJoin, WindowJoin
from hotjoin.matcher.router.learning import Routing

ALL = [(kind, name) for kind in KINDS for name in STRATEGIES[kind] if kind != "interval"]
"""The strategies of the kinds the brute force below knows; interval joins' strategies are
checked the same way through the engine (``test_interval.py``)."""


def _sample(kind: str) -> Any:
    """A subscription of ``kind`` matching everything (an interval join needs its B)."""
    spec = KINDS[kind]
    return spec.subscription(Range()) if kind == "interval" else spec.subscription()


# ---- router options ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_bad_router_option_refuses_the_engine(kind: str) -> None:
    """Checked at construction (``KindIndex.check_options``), before any index exists."""
    with pytest.raises(ValueError, match=f"router_members\\['{kind}'\\]"):
        Engine(options={"router_members": {kind: ["XX-Nope"]}})
    Engine(strategy={kind: STRATEGIES[kind][0]},  # a static strategy takes no router option
           options={"router_members": {kind: ["XX-Nope"]}})


# ---- match and match_many against a brute force --------------------------------------------


def _brute(sub: Any, dirn: int, key: float, value: float, time: int,
           stored: list[tuple[float, float, int]]) -> list[int]:
    """The stored tuples (indexes) ``sub`` pairs with the incoming tuple."""
    out = []
    for j, (k, v, t) in enumerate(stored):
        r_val, s_val = (value, v) if dirn > 0 else (v, value)
        if not (sub.a.contains(r_val) and sub.c.contains(s_val)):
            continue
        if isinstance(sub, BandJoin):
            s_key, r_key = (k, key) if dirn > 0 else (key, k)
            ok = sub.b.contains(s_key - r_key)
        else:
            ok = k == key and (not isinstance(sub, WindowJoin) or abs(time - t) <= sub.w)
        if ok:
            out.append(j)
    return out


@st.composite
def _setups(draw: st.DrawFn, kind: str) -> tuple[Any, ...]:
    subs = draw(st.lists(subscriptions(kind), min_size=1, max_size=12))
    keys = st.integers(0, 6).map(float) if kind == "band" else EQUI_KEYS
    stored = draw(st.lists(st.tuples(keys, VALUES, st.integers(0, 8)), min_size=1,
                           max_size=25))
    probes = draw(st.lists(st.tuples(keys, VALUES, st.integers(8, 12)), min_size=1,
                           max_size=12))
    return subs, stored, probes, draw(st.sampled_from([1, -1]))


def _check(kind: str, name: str, setup: tuple[Any, ...], members: list[str] | None = None) -> int:
    """``match`` (one ``OneEvent`` per tuple) and ``match_many`` (all tuples as one
    ``EventRun``) of strategy ``name`` (a router limited to ``members`` when given), in
    IDENTIFY, COUNT and PAIRS, against the brute force; the pairs the brute force found."""
    subs, stored, probes, dirn = setup
    e = Engine(strategy={kind: name},
               options={"router_members": {kind: members}} if members else None)
    sids = e.subscribe_many(subs)
    own, other = ("R", "S") if dirn > 0 else ("S", "R")
    n = len(stored)
    e.restore_event_columns(other, [f"x{j}" for j in range(n)],
                            np.array([k for k, _, _ in stored]),
                            np.array([v for _, v, _ in stored]),
                            np.array([t for _, _, t in stored], dtype=np.int64),
                            np.arange(100, 100 + n, dtype=np.int64))
    index = e.kind_index(kind)
    assert index is not None and len(index) == len(subs)
    table = e.tables[other]
    slot_of = {table.slot_of[f"x{j}"]: j for j in range(n)}
    want = [{sid: _brute(sub, dirn, k, v, t, stored)
             for sid, sub in zip(sids, subs, strict=True)} for k, v, t in probes]
    want = [{q: js for q, js in w.items() if js} for w in want]
    seq = 10**6  # beyond every registration: every pair owed
    # one buffer for every call, as the engine has: its dedupe stamps keep rising while the
    # kernels' marks stay in the engine (a fresh buffer would start its stamps over and find
    # its own stamp already marked by an earlier call)
    buf = MatchBuffer()
    one = OneEvent(buf)
    for mode in (IDENTIFY, COUNT, PAIRS):
        for (k, v, t), w in zip(probes, want, strict=True):
            buf.start()
            index.match(one.set(dirn, k, v, t, seq, t, table, mode))
            q = buf.out_q[: buf.n].tolist()
            if mode == PAIRS:
                got = Counter(zip(q, [slot_of[s] for s in buf.out_s[: buf.n].tolist()],
                                  strict=True))
                assert got == Counter((qq, j) for qq, js in w.items() for j in js), (k, v)
            else:
                assert sorted(q) == sorted(w), (mode, k, v, t)
                if mode == COUNT:
                    assert {qq: int(e.cols.acc[qq]) for qq in q} == \
                        {qq: len(js) for qq, js in w.items()}
        rows = BatchRows()
        ks, vs, ts = (np.array([p[i] for p in probes]) for i in range(3))
        ts = ts.astype(np.int64)
        index.match_many(EventRun(dirn, ks.astype(np.float64), vs.astype(np.float64), ts,
                                  np.full(len(probes), seq, dtype=np.int64), ts, table,
                                  mode, buf, rows))
        ev, q, x = rows.take()
        assert (np.diff(ev) >= 0).all()  # rows in event order
        for i, w in enumerate(want):
            mine = ev == i
            if mode == PAIRS:
                got = Counter(zip(q[mine].tolist(), [slot_of[s] for s in x[mine].tolist()],
                                  strict=True))
                assert got == Counter((qq, j) for qq, js in w.items() for j in js), i
            else:
                assert sorted(q[mine].tolist()) == sorted(w), (mode, i)
                if mode == COUNT:
                    assert dict(zip(q[mine].tolist(), x[mine].tolist(), strict=True)) == \
                        {qq: len(js) for qq, js in w.items()}
    index.check_invariants()
    return sum(len(js) for w in want for js in w.values())


@pytest.mark.parametrize(("kind", "name"), ALL, ids=[n for _, n in ALL])
def test_match_and_match_many_give_the_brute_force_result(kind: str, name: str) -> None:
    """Every strategy and router, called through the interface only: per tuple, ``match``
    (one ``OneEvent``) and ``match_many`` (all tuples as one ``EventRun``) output exactly the
    brute force's affected subscriptions, pair counts and pairs, every pair owed."""
    pairs = [0]

    @harness_settings(25)
    @given(setup=_setups(kind))
    def check(setup: tuple[Any, ...]) -> None:
        pairs[0] += _check(kind, name, setup)

    check()
    assert pairs[0] > 0  # the examples formed pairs


_WINDOW_EDGE = (
    [WindowJoin(a=Range(3.0, 3.0), w=0), WindowJoin(a=Range(4.0, 6.0), w=3),
     WindowJoin(c=Range(1.0, 6.0), w=2), WindowJoin(c=Range(None, 2.0), w=2),
     WindowJoin(a=Range(4.0, None), c=Range(0.0, 3.5), w=1),
     WindowJoin(a=Range(None, 5.0), c=Range(4.0, 4.0), w=1), WindowJoin(c=Range(None, 6.0), w=0),
     WindowJoin(c=Range(0.0, 1.0), w=5), WindowJoin(a=Range(1.0, 4.0), w=1), WindowJoin(w=4),
     WindowJoin(c=Range(1.0, 4.0), w=1), WindowJoin(a=Range(1.0, 4.0), w=1)],
    [(0.0, 4.0, 7)],
    [(0.5, 3.5, 11), (2.0, 3.0, 8), (0.0, 1.0, 11), (0.0, 5.0, 10), (1.0, 2.0, 11),
     (1.0, 2.5, 11), (2.0, 6.0, 11), (1.0, 6.0, 11), (1.0, 3.0, 12), (0.3, 3.0, 9), (0.3, 0.0, 12)],
    -1)
"""Twelve window joins, one stored R tuple and eleven S tuples, one of them exactly ``w`` from
the stored one: every window strategy, and WJ-Dynamic with each member alone, mode after mode
on one engine."""


_EDGE_RUNS = [(name, None) for name in STRATEGIES["window"]] + [
    ("WJ-Dynamic", [member]) for member in STRATEGIES["window"] if member != "WJ-Dynamic"]


@pytest.mark.parametrize(("name", "members"), _EDGE_RUNS,
                         ids=[n if m is None else f"{n}-{m[0]}" for n, m in _EDGE_RUNS])
def test_window_strategies_mode_after_mode_at_the_window_edge(name: str,
                                                              members: list[str] | None) -> None:
    assert _check("window", name, _WINDOW_EDGE, members) > 0  # pairs formed, all as the brute force


@pytest.mark.parametrize("kind", ["select", "window"])
def test_own_range_scan_identify_with_an_other_range_open_above(kind: str) -> None:
    """The own-range scan (SJ-SelectFirst, WJ-SelectFirst) must not identify a subscription
    whose other range ``[1, +inf)`` holds no partner value (the only partner's value is 0)."""
    sub = SelectJoin(c=Range(1.0, None)) if kind == "select" else WindowJoin(c=Range(1.0, None))
    e = Engine(strategy={kind: "SJ-SelectFirst" if kind == "select" else "WJ-SelectFirst"})
    e.subscribe(sub)
    e.publish(Event("S", "s", 0.0, 0.0, 8))
    assert e.probe("R", 0.0, 0.0, "pairs") == 0 and e.probe("R", 0.0, 0.0, "count") == 0
    assert e.probe("R", 0.0, 0.0, "identify") == 0


# ---- the routers use the interface only ------------------------------------------------------


class _PublicOnly:
    """A member as a router may see it: any attribute but a private one."""

    def __init__(self, inner: KindIndex) -> None:
        object.__setattr__(self, "_inner", inner)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AssertionError(f"a router reached its member's private {name!r}")
        return getattr(object.__getattribute__(self, "_inner"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AssertionError(f"a router set its member's {name!r}")

    def __len__(self) -> int:
        return len(object.__getattribute__(self, "_inner"))


@harness_settings(15)
@given(subs=st.lists(st.one_of(subscriptions("band"), subscriptions("select"),
                               subscriptions("window")), min_size=1, max_size=10),
       events=st.lists(st.tuples(st.sampled_from("RS"), st.integers(0, 3).map(float), VALUES),
                       min_size=1, max_size=40),
       batch=st.booleans())
def test_routers_reach_their_members_through_public_methods_only(
        subs: list[Any], events: list[tuple[str, float, float]], batch: bool) -> None:
    """Every router's members wrapped so that a private attribute or an assignment fails:
    subscribing, matching one at a time or in runs, deleting, statistics and invariant checks
    go through, with the deliveries of a static engine (online calibration on every tuple)."""
    import hotjoin.matcher.router.learning as learning

    e = Engine(options={"router_feedback": True})
    ref = Engine(strategy={"band": "BJ-QOuter", "select": "SJ-Vanilla",
                           "window": "WJ-SelectFirst", "interval": "IJ-NestedLoop"})
    for k in KINDS:
        e.subscribe(_sample(k))  # build every router, then wrap its members
    for index in e.kinds.values():
        assert isinstance(index, Routing)
        index.members = [_PublicOnly(m) for m in index.members]
    for k in KINDS:
        ref.subscribe(_sample(k))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(learning, "FEEDBACK_EVERY", 1)
        mp.setattr(learning, "EXPLORE_EVERY", 2)
        assert e.subscribe_many(subs) == ref.subscribe_many(subs)
        cols = ([s for s, _, _ in events], [f"{s}{i}" for i, (s, _, _) in enumerate(events)],
                [k for _, k, _ in events], [v for _, _, v in events], list(range(len(events))))
        if batch:
            got, want = (x.publish_batch(*cols, output="pairs").output for x in (e, ref))
            assert Counter(zip(got.event.tolist(), got.subscription.tolist(),
                               got.r_id.tolist(), got.s_id.tolist(), strict=True)) == \
                Counter(zip(want.event.tolist(), want.subscription.tolist(),
                            want.r_id.tolist(), want.s_id.tolist(), strict=True))
        else:
            for side, i, k, v, t in zip(*cols, strict=True):
                ev = Event(side, i, k, v, t)
                assert Counter(e.publish(ev)) == Counter(ref.publish(ev))
        victim = cols[1][0]
        assert Counter(e.delete(cols[0][0], victim)) == Counter(ref.delete(cols[0][0], victim))
        e.unsubscribe(len(KINDS))
        e.check_invariants()
        assert e.memory_bytes() > 0 and e.stats()["decisions"]


# ---- the bundles share one lookup --------------------------------------------------------------


def test_one_tuple_and_one_run_look_their_keys_up_once_for_every_kind(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With select and window joins (and their routers), one tuple costs one key lookup
    (``OneEvent.group``) and one run one compiled lookup (``EventRun.keyed``)."""
    e = Engine()
    e.subscribe_many([SelectJoin(), WindowJoin(w=3)])
    e.publish_batch(["S"] * 3, ["a", "b", "c"], [1.0, 1.0, 2.0], [0.0, 1.0, 2.0], [0, 1, 2])
    ix = e.tables["S"].key_index
    assert ix is not None
    calls = Counter[str]()
    lookup, lookup_many = ix.lookup, ix.lookup_many

    def one(key: float) -> int:
        calls["one"] += 1
        return lookup(key)

    def many(keys: np.ndarray) -> np.ndarray:
        calls["many"] += 1
        return lookup_many(keys)

    monkeypatch.setattr(ix, "lookup", one)
    monkeypatch.setattr(ix, "lookup_many", many)
    assert len(e.publish(Event("R", "r", 1.0, 0.0, 2))) == 4
    assert calls == {"one": 1}
    calls.clear()
    res = e.publish_batch(["R"] * 4, ["r1", "r2", "r3", "r4"], [1.0, 2.0, 5.0, 1.0],
                          [0.0, 0.0, 0.0, 1.0], [2, 2, 2, 2], output="pairs")
    assert len(res.output) == 4 + 2 + 4 and calls == {"many": 1}


def test_event_run_keyed_lists_the_tuples_with_partners_in_order() -> None:
    e = Engine()
    e.subscribe(WindowJoin(w=1))
    e.publish_batch(["S"] * 3, ["a", "b", "c"], [1.0, 1.0, 4.0], [0.0, 1.0, 2.0], [0, 5, 9])
    table = e.tables["S"]
    keys = np.array([4.0, 2.0, 1.0, 4.0])
    run = EventRun(1, keys, np.zeros(4), np.array([9, 9, 5, 8]), np.arange(4), np.full(4, 3),
                   table, IDENTIFY, MatchBuffer(), BatchRows())
    kv = run.keyed()
    assert kv is not None and run.keyed() is kv  # looked up once
    assert kv.pos.tolist() == [0, 2, 3] and kv.keys.tolist() == [4.0, 1.0, 4.0]
    assert kv.size.tolist() == [1, 2, 1] and kv.tsize.tolist() == [1, 2, 1]
    assert kv.nows.tolist() == [3, 3, 3] and kv.times.tolist() == [9, 5, 8]
    part = run.restricted(kv.subset(np.array([1])))
    assert part.keyed() is not None and part.keyed().pos.tolist() == [2]
    none = EventRun(1, np.array([7.0]), np.zeros(1), np.zeros(1, np.int64), np.zeros(1, np.int64),
                    np.zeros(1, np.int64), table, IDENTIFY, MatchBuffer(), BatchRows())
    assert none.keyed() is None
