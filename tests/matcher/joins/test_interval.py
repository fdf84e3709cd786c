"""Interval joins (``IntervalJoin``, ``Event.end``): every strategy and the router give the brute
force's deliveries (``matcher/oracle.py``), one at a time and through ``publish_batch`` in
random batch splits, with deletes, lateness, retention by end, snapshots, every preset and raw
endpoint ranges, point and interval tuples mixed, and interval joins mixed with the other kinds
on one engine; batches validate ``Event.end``, and exactly one Allen relation's subscription gets
each pair. The presets' tables and the models' validation are pinned in ``tests/matcher/test_model.py``.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hotjoin.matcher.batch import EventStatus
from hotjoin.matcher.engine import Engine
from hotjoin.matcher.errors import DuplicateEventError, LateEventError, UnknownEventError
from hotjoin.matcher.joins import interval as interval_module
from hotjoin.matcher.model import (
    ALLEN_RELATIONS,
    BandJoin,
    Event,
    IntervalJoin,
    Range,
    SelectJoin,
    WindowJoin,
)
from hotjoin.matcher.oracle import OracleEngine
from hotjoin.matcher.workload import interval_workload

EXAMPLES = int(os.environ.get("HOTJOIN_HYPOTHESIS_EXAMPLES", "0") or 0)


def examples(default: int) -> settings:
    return settings(max_examples=EXAMPLES or default, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


# the contract's table: preset -> (SS, SE, ES, EE), None = unbounded


STRATEGIES = ["IJ-NestedLoop", "IJ-SSI", "IJ-Dynamic", "auto"]


@pytest.fixture(params=[pytest.param((s, m), id=f"{s}-rebuild{m}")
                        for s in STRATEGIES for m in (0, 2, 32)
                        if not (s == "IJ-NestedLoop" and m != 32)])
def config(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A strategy, with IJ-SSI's rebuild threshold lowered so that small programs build
    stabbing groups (0: nearly every change rebuilds, every group has a value stage and
    meets its partners one by one; 2: some members wait pending, a group has a value stage
    where the estimate says so, and AFFECTED output is counted member by member), whatever
    the groups' sizes."""
    name, rebuild = request.param
    monkeypatch.setattr(interval_module, "REBUILD_MIN", rebuild)
    if rebuild < 32:
        monkeypatch.setattr(interval_module, "STAGE_MIN", 0)
    if rebuild == 0:
        monkeypatch.setattr(interval_module, "STAGE_GAIN", 0.0)
        monkeypatch.setattr(interval_module, "COUNT_RATIO", 0)
    if rebuild == 2:
        monkeypatch.setattr(interval_module, "COUNT_RATIO", 1 << 40)
    return name


def make(strategy: str, lateness: int = 0, retention: int | None = None) -> Engine:
    return Engine(lateness=lateness, retention=retention,
                  strategy="auto" if strategy == "auto" else {"interval": strategy})


# ---- validation and Allen's relations through the engine ----------------------------------------


def test_batch_end_validation_rejects_and_changes_nothing() -> None:
    e = Engine()
    e.subscribe(IntervalJoin(Range(0, 0)))
    res = e.publish_batch(["R", "R", "R", "S"], ["a", "b", "c", "d"], [0.0] * 4, [0.0] * 4,
                          [5, 5, 5, 5], ends=[4, 2**61 + 1, 5.5, 9], output="pairs")
    assert res.status.tolist() == [EventStatus.INVALID] * 3 + [EventStatus.OK]
    assert res.reasons[0] == "event end 4 is before its time 5"
    assert "event end must be an integer" in res.reasons[1]
    assert "event end must be an integer" in res.reasons[2]
    assert e.seq == 2 and e.get_event("R", "a") is None and e.get_event("S", "d").end == 9
    with pytest.raises(ValueError, match="different lengths"):
        e.publish_batch(["R"], ["x"], [0.0], [0.0], [1], ends=[1, 2])
    assert e.seq == 2


@given(st.integers(-5, 5), st.integers(0, 6), st.integers(-5, 5), st.integers(0, 6))
@examples(200)
def test_exactly_one_allen_relation_holds_property(a: int, la: int, c: int, lc: int) -> None:
    """The same for every small pair, through the engine: one relation's subscription gets the
    pair (lengths ≥ 1), the engine agreeing with the oracle's predicate."""
    e = Engine(lateness=100)
    sids = e.subscribe_many([IntervalJoin.allen(n, b=Range(0, 0)) for n in ALLEN_RELATIONS])
    e.publish(Event("S", "s", 1.0, 0.0, c, end=c + lc + 1))
    got = e.publish(Event("R", "r", 1.0, 0.0, a, end=a + la + 1))
    assert len(got) == 1 and got[0].subscription_id in sids


# ---- random programs against the oracle --------------------------------------------------------

KEYS = st.sampled_from([0.0, 1.0, 2.0, 3.5])
VALUES = st.sampled_from([0.0, 1.0, 2.0])


@st.composite
def endpoint_ranges(draw: st.DrawFn) -> Range:
    if draw(st.integers(0, 3)) == 0:
        return Range()
    lo = draw(st.one_of(st.none(), st.integers(-12, 12)))
    hi = draw(st.one_of(st.none(), st.integers(-12, 12)))
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    return Range(lo, hi)


@st.composite
def value_ranges(draw: st.DrawFn) -> Range:
    if draw(st.integers(0, 2)):
        return Range()
    lo = draw(st.sampled_from([None, 0.0, 1.0]))
    hi = draw(st.sampled_from([None, 1.0, 2.0]))
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    return Range(lo, hi)


@st.composite
def key_ranges(draw: st.DrawFn) -> Range:
    lo = draw(st.sampled_from([None, -2.5, -1.0, 0.0, 1.0]))
    hi = draw(st.sampled_from([None, 0.0, 1.0, 2.0, 3.5]))
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    return Range(lo, hi)


@st.composite
def interval_joins(draw: st.DrawFn) -> IntervalJoin:
    b, a, c = draw(key_ranges()), draw(value_ranges()), draw(value_ranges())
    pick = draw(st.integers(0, 2))
    if pick == 0:
        return IntervalJoin.allen(draw(st.sampled_from(ALLEN_RELATIONS)), b=b, a=a, c=c)
    if pick == 1:
        name = draw(st.sampled_from(["start_preceding", "end_following", "before",
                                     "left_overlap", "during"]))
        d = draw(st.integers(1 if name == "before" else 0, 8))
        eps = draw(st.integers(0, 8))
        return IntervalJoin.iseql(name, delta=d, eps=eps, b=b, a=a, c=c)
    return IntervalJoin(b, a, c, *(draw(endpoint_ranges()) for _ in range(4)))


@st.composite
def any_subscription(draw: st.DrawFn, mixed: bool) -> Any:
    k = draw(st.integers(0, 5)) if mixed else 0
    if k == 3:
        return SelectJoin(draw(value_ranges()), draw(value_ranges()))
    if k == 4:
        return BandJoin(draw(key_ranges()), draw(value_ranges()), draw(value_ranges()))
    if k == 5:
        return WindowJoin(draw(value_ranges()), draw(value_ranges()), draw(st.integers(0, 6)))
    return draw(interval_joins())


@dataclass
class Pub:
    side: str
    id: str
    key: float
    value: float
    time: int
    end: int | None

    def event(self) -> Event:
        return Event(self.side, self.id, self.key, self.value, self.time, end=self.end)


@st.composite
def programs(draw: st.DrawFn, mixed: bool = False) -> tuple[int, int | None, list[Any]]:
    lateness = draw(st.sampled_from([0, 3, 40]))
    retention = draw(st.sampled_from([None, None, 0, 6]))
    ops: list[Any] = [("sub", draw(any_subscription(mixed)), False)
                      for _ in range(draw(st.integers(1, 6)))]
    ids: list[tuple[str, str]] = []
    for i in range(draw(st.integers(4, 26))):
        k = draw(st.integers(0, 9))
        if k <= 6:
            side = draw(st.sampled_from("RS"))
            if ids and draw(st.integers(0, 12)) == 0:  # a duplicate id
                side, eid = draw(st.sampled_from(ids))
            else:
                eid = f"{side.lower()}{i}"
                ids.append((side, eid))
            t = draw(st.integers(0, 16))
            length = draw(st.sampled_from([None, 0, 0, 1, 2, 3, 5, 9, 20]))
            ops.append(Pub(side, eid, draw(KEYS), draw(VALUES), t,
                           None if length is None else t + length))
        elif k == 7 and ids:
            ops.append(("del",) + draw(st.sampled_from(ids)))
        elif k == 8:
            ops.append(("sub", draw(any_subscription(mixed)), draw(st.booleans())))
        else:
            ops.append(("unsub", draw(st.integers(0, 8))))
    return lateness, retention, ops


def counter(ds: Any) -> Counter[tuple[int, int, str, str]]:
    return Counter((int(d.subscription_id), int(d.sign), d.r_id, d.s_id) for d in ds)


def _try(fn: Any) -> tuple[str | None, Any]:
    try:
        return None, fn()
    except (ValueError, LateEventError, DuplicateEventError, UnknownEventError) as exc:
        return type(exc).__name__, None


def _rows(out: Any, sign: int) -> Counter[tuple[int, int, str, str]]:
    return Counter((int(q), sign, r, s) for q, r, s in
                   zip(out.subscription.tolist(), out.r_id.tolist(), out.s_id.tolist(),
                       strict=True))


def check_results(e: Engine, o: OracleEngine) -> None:
    for sid in o.subscriptions():
        assert counter(e.result(sid)) == counter(o.result(sid)), sid


def run_one_at_a_time(strategy: str, prog: tuple[int, int | None, list[Any]]) -> Engine:
    """The program one operation at a time on the engine and the oracle in lockstep."""
    lateness, retention, ops = prog
    e, o = make(strategy, lateness, retention), OracleEngine(lateness, retention)
    for op in ops:
        if isinstance(op, Pub):
            ev = op.event()
            err, got = _try(lambda ev=ev: e.publish(ev))
            oerr, want = _try(lambda ev=ev: o.publish(ev))
            assert err == oerr, (op, err, oerr)
            if err is None:
                assert counter(got) == counter(want), op
        elif op[0] == "del":
            err, got = _try(lambda op=op: e.delete(op[1], op[2]))
            oerr, want = _try(lambda op=op: o.delete(op[1], op[2]))
            assert err == oerr
            if err is None:
                assert counter(got) == counter(want), op
        elif op[0] == "sub":
            assert e.subscribe(op[1], op[2]) == o.subscribe(op[1], op[2])
        elif op[1] in o.subscriptions():
            e.unsubscribe(op[1])
            o.unsubscribe(op[1])
        assert (e.seq, e.watermark) == (o.seq, o.watermark)
        e.check_invariants()
    check_results(e, o)
    for side in "RS":
        assert {i: e.get_event(side, i) for i in o.stored(side)} == o.stored(side)
        assert len(e.tables[side]) == len(o.stored(side))
    return e


def run_batched(strategy: str, prog: tuple[int, int | None, list[Any]], cuts: list[int],
                output: str) -> None:
    """The program with consecutive publishes as ``publish_batch`` calls cut at ``cuts``
    (deletes through ``delete_batch``), against the oracle one at a time."""
    lateness, retention, ops = prog
    e, o = make(strategy, lateness, retention), OracleEngine(lateness, retention)
    pending: list[Pub] = []
    cut_at = set(cuts)

    def flush() -> None:
        if not pending:
            return
        res = e.publish_batch([p.side for p in pending], [p.id for p in pending],
                              [p.key for p in pending], [p.value for p in pending],
                              [p.time for p in pending],
                              ends=[p.time if p.end is None else p.end for p in pending],
                              output=output)
        want: Counter[tuple[int, int, str, str]] = Counter()
        per: Counter[tuple[int, int]] = Counter()
        for i, p in enumerate(pending):
            err, got = _try(lambda p=p: o.publish(p.event()))
            ok = res.status[i] == EventStatus.OK
            assert ok == (err is None), (p, err, res.status[i], res.reasons.get(i))
            if err == "LateEventError":
                assert res.status[i] == EventStatus.LATE
            if err == "DuplicateEventError":
                assert res.status[i] == EventStatus.DUPLICATE
            for d in got or []:
                want[(d.subscription_id, 1, d.r_id, d.s_id)] += 1
                per[(i, d.subscription_id)] += 1
        if output == "pairs":
            assert _rows(res.output, 1) == want
        else:
            got_aff = Counter({(int(ev), int(q)): int(c) for ev, q, c in
                               zip(res.output.event.tolist(), res.output.subscription.tolist(),
                                   res.output.count.tolist(), strict=True)})
            assert got_aff == per
        pending.clear()

    for k, op in enumerate(ops):
        if isinstance(op, Pub):
            pending.append(op)
            if k in cut_at:
                flush()
            continue
        flush()
        if op[0] == "del":
            res = e.delete_batch([op[1]], [op[2]], output="pairs")
            err, want = _try(lambda op=op: o.delete(op[1], op[2]))
            assert (res.status[0] == EventStatus.OK) == (err is None)
            if err is None:
                got = Counter((int(q), -1, r, s) for q, r, s in zip(
                    res.output.subscription.tolist(), res.output.r_id.tolist(),
                    res.output.s_id.tolist(), strict=True))
                assert got == counter(want)
        elif op[0] == "sub":
            assert e.subscribe(op[1], op[2]) == o.subscribe(op[1], op[2])
        elif op[1] in o.subscriptions():
            e.unsubscribe(op[1])
            o.unsubscribe(op[1])
        e.check_invariants()
    flush()
    assert (e.seq, e.watermark) == (o.seq, o.watermark)
    check_results(e, o)


@given(prog=programs())
@examples(60)
def test_one_at_a_time_matches_oracle(config: str, prog: Any) -> None:
    run_one_at_a_time(config, prog)


@given(prog=programs(mixed=True))
@examples(40)
def test_mixed_kinds_match_oracle(config: str, prog: Any) -> None:
    """Interval joins beside select, band and window joins on one engine."""
    run_one_at_a_time(config, prog)


@given(prog=programs(mixed=True), cuts=st.lists(st.integers(0, 40), max_size=8),
       output=st.sampled_from(["pairs", "affected"]))
@examples(50)
def test_batches_match_oracle(config: str, prog: Any, cuts: list[int], output: str) -> None:
    run_batched(config, prog, cuts, output)


@given(prog=programs(mixed=True))
@examples(15)
def test_state_round_trip(config: str, prog: Any) -> None:
    """``export_state`` / ``load_state`` keep ends, endpoint ranges and results."""
    e = run_one_at_a_time(config, prog)
    f = make(config, e.lateness, e.retention)
    f.load_state(e.export_state())
    for sid, sub in e.subscriptions():
        assert f.subscription(sid) == sub
        assert counter(f.result(sid)) == counter(e.result(sid))
    for side in "RS":
        for i in e.tables[side].slot_of:
            assert f.get_event(side, i) == e.get_event(side, i)


# ---- boundaries --------------------------------------------------------------------------------


def test_touching_ranges_and_zero_parameters(config: str) -> None:
    """δ = 0, ε = 0, end == time, ranges touching at one point, on every strategy."""
    e, o = make(config, lateness=100), OracleEngine(lateness=100)
    subs = [IntervalJoin.iseql("start_preceding", delta=0, b=Range(0, 0)),
            IntervalJoin.iseql("end_following", eps=0, b=Range(0, 0)),
            IntervalJoin.iseql("left_overlap", delta=0, eps=0, b=Range(0, 0)),
            IntervalJoin.iseql("during", delta=0, eps=0, b=Range(0, 0)),
            IntervalJoin.iseql("before", delta=1, b=Range(0, 0)),
            IntervalJoin.allen("meets", b=Range(0, 0)),
            IntervalJoin.allen("equals", b=Range(0, 0)),
            IntervalJoin(Range(0, 0), ss=Range(-3, 3))]  # a window join, w = 3
    for s in subs:
        assert e.subscribe(s) == o.subscribe(s)
    evs = [Event("S", "s1", 1.0, 0.0, 10, end=10), Event("S", "s2", 1.0, 0.0, 10, end=14),
           Event("R", "r1", 1.0, 0.0, 10, end=10), Event("R", "r2", 1.0, 0.0, 6, end=10),
           Event("R", "r3", 1.0, 0.0, 9, end=9), Event("S", "s3", 1.0, 0.0, 13),
           Event("R", "r4", 1.0, 0.0, 7, end=13), Event("R", "r5", 2.0, 0.0, 10)]
    for ev in evs:
        assert counter(e.publish(ev)) == counter(o.publish(ev)), ev
    check_results(e, o)
    # hand-checked: r1 = [10, 10] and s1 = [10, 10] are equal, meet, start_preceding(0) ...
    got = {(d.subscription_id, d.r_id, d.s_id) for sid in range(len(subs))
           for d in e.result(sid)}
    assert (6, "r1", "s1") in got and (5, "r2", "s1") in got and (0, "r1", "s2") in got
    assert (4, "r3", "s1") in got and (7, "r4", "s1") in got and (7, "r2", "s3") not in got


def test_retention_by_end() -> None:
    """A stored interval stays while its end is within retention of the watermark."""
    e, o = Engine(retention=5), OracleEngine(retention=5)
    for x in (e, o):
        x.subscribe(IntervalJoin(Range(0, 0)))
        x.publish(Event("S", "long", 0.0, 0.0, 0, end=20))
        x.publish(Event("S", "short", 0.0, 0.0, 1, end=2))
    for t, alive in ((7, {"long", "short"}), (8, {"long"}), (25, {"long"}), (26, set())):
        for x in (e, o):
            x.publish(Event("R", f"r{t}", 0.0, 0.0, t))
        assert set(e.tables["S"].slot_of) == set(o.stored("S")) == alive, t
    # an id retention dropped may be published again, in a batch as one at a time
    res = e.publish_batch(["S"], ["long"], [0.0], [0.0], [26], ends=[40])
    assert res.status.tolist() == [EventStatus.OK]


def test_probes_carry_ends(config: str) -> None:
    e = make(config, lateness=100)
    e.subscribe(IntervalJoin.allen("during", b=Range(0, 0)))
    e.publish(Event("S", "s", 0.0, 0.0, 0, end=100))
    assert e.probe("R", 0.0, 0.0, "pairs", time=10, end=20) == 1
    assert e.probe("R", 0.0, 0.0, "pairs", time=10, end=100) == 0
    assert e.probe_batch("R", [0.0, 0.0, 1.0], [0.0] * 3, [10, 10, 10], ends=[20, 100, 20],
                         output="pairs").tolist() == [1, 0, 0]
    with pytest.raises(ValueError, match="end lies before"):
        e.probe_batch("R", [0.0], [0.0], [10], ends=[9])
    with pytest.raises(ValueError, match="probe end 9 is before its time 10"):
        e.probe("R", 0.0, 0.0, "pairs", time=10, end=9)


def test_restore_event_columns_with_ends() -> None:
    e = Engine()
    e.subscribe(IntervalJoin.allen("overlaps", b=Range(0, 0)))
    e.restore_event_columns("R", ["r"], np.array([0.0]), np.array([0.0]), np.array([0]),
                            np.array([2]), ends=np.array([10]))
    e.restore_event_columns("S", ["s"], np.array([0.0]), np.array([0.0]), np.array([5]),
                            np.array([3]), ends=np.array([20]))
    assert e.get_event("R", "r").end == 10 and len(e.result(0)) == 1
    with pytest.raises(ValueError, match="before its time"):
        e.restore_event_columns("S", ["t"], np.array([0.0]), np.array([0.0]), np.array([5]),
                                np.array([4]), ends=np.array([4]))
    assert e.get_event("S", "t") is None
    # an old state without ends loads as points
    st = e.export_state()
    del st["ends"]
    f = Engine()
    f.load_state(st)
    assert f.get_event("R", "r").end == 0 and f.result(0) == []


def test_memory_per_subscription() -> None:
    """100,000 interval subscriptions (IJ-SSI) take at most 2× the memory of as many band
    subscriptions (BJ-SSI), measured with ``Engine.memory_bytes`` (module docstring of
    ``joins/interval.py``)."""
    rng = np.random.default_rng(1)
    n = 100_000
    lo, width = rng.uniform(0, 1000, n), rng.uniform(0, 20, n)
    band = Engine(strategy={"band": "BJ-SSI"})
    inter = Engine(strategy={"interval": "IJ-SSI"})
    b0, i0 = band.memory_bytes(), inter.memory_bytes()
    band.subscribe_many([BandJoin(b=Range(a, a + w)) for a, w in zip(lo, width, strict=True)])
    inter.subscribe_many([IntervalJoin.allen("overlaps", b=Range(a, a + w))
                          for a, w in zip(lo, width, strict=True)])
    per_band = (band.memory_bytes() - b0) / n
    per_interval = (inter.memory_bytes() - i0) / n
    assert per_interval <= 2 * per_band, (per_interval, per_band)


def test_value_stage_follows_the_estimate() -> None:
    """On the benchmark's workload shape (every subscription selects r's value A in a 5 %
    range, half of them s's value C too), IJ-SSI's big groups walk by the partner's value for an
    incoming S tuple (its R partner's value must lie in A: few members do) and by key for an
    incoming R tuple (A filters the members once; C is unbounded for half of them); every
    built group is in the index's invariants, and the engine agrees with IJ-NestedLoop."""
    w = interval_workload(3_000, 3_000, seed=3, key_domain=20)
    engines = {s: Engine(lateness=1 << 40, strategy={"interval": s})
               for s in ("IJ-SSI", "IJ-NestedLoop")}
    for e in engines.values():
        e.subscribe_many(w.subscriptions)
        e.publish_batch(w.sides[:2_500], w.ids[:2_500], w.keys[:2_500], w.values[:2_500],
                        w.times[:2_500], ends=w.ends[:2_500], output="none")
    ix = engines["IJ-SSI"].kind_index("interval")
    assert isinstance(ix, interval_module.StabbingIndex)
    big = ix.gsize >= interval_module.STAGE_MIN
    assert big.any()
    assert (ix.stage.num[1][big] > 0).all()  # S incoming: by the R partner's value
    assert (ix.stage.num[0] == 0).all()  # R incoming: by key
    ix.check_invariants()
    sl = slice(2_500, 3_000)
    for side in "RS":
        at = w.sides[sl] == "RS".index(side)
        args = (w.keys[sl][at], w.values[sl][at], w.times[sl][at])
        for output in ("pairs", "affected"):
            got = {s: e.probe_batch(side, *args, ends=w.ends[sl][at], output=output)
                   for s, e in engines.items()}
            assert got["IJ-SSI"].sum() > 0
            assert got["IJ-SSI"].tolist() == got["IJ-NestedLoop"].tolist()


def test_stats_and_state_columns() -> None:
    """``stats()`` counts interval joins and shows IJ-SSI's groups and the router's decisions;
    the state's subscription columns carry the endpoint ranges (``INTERVAL_COLUMNS``) and the
    contract's converters read them back."""
    from hotjoin.matcher.contract import subscription_columns, subscriptions_from_columns
    from hotjoin.matcher.subscriptions import INTERVAL_COLUMNS

    e = Engine(lateness=10)
    subs = [IntervalJoin.allen(n, b=Range(-1, 1)) for n in ALLEN_RELATIONS] + [
        IntervalJoin.iseql("left_overlap", delta=3, eps=2, b=Range(0, 0)),
        BandJoin(b=Range(0, 1))]
    e.subscribe_many(subs)
    e.publish_batch(["S", "R"], ["s", "r"], [0.0, 0.0], [0.0, 0.0], [0, 1], ends=[5, 3])
    st_ = e.stats()
    assert st_["subscriptions"]["interval"] == 14 and st_["subscriptions"]["band"] == 1
    assert st_["strategies"]["interval"] == "IJ-Dynamic"
    assert sum(st_["interval"]["decisions"].values()) == 1 and st_["tau"]["interval"] >= 1
    cols = e.subscription_columns()
    assert set(INTERVAL_COLUMNS) <= set(cols)
    at = int(np.flatnonzero(cols["sid"] == 4)[0])  # overlaps: SS [1, inf), SE (-inf, -1]
    assert (cols["ss_lo"][at], cols["ss_hi"][at], cols["se_lo"][at], cols["se_hi"][at]) == \
        (1.0, np.inf, -np.inf, -1.0)
    assert subscriptions_from_columns(cols) == subs
    assert subscriptions_from_columns(subscription_columns(
        list(range(len(subs))), subs, [1] * len(subs), [False] * len(subs))) == subs
    old = {k: v for k, v in cols.items() if k not in INTERVAL_COLUMNS}
    with pytest.raises(ValueError, match="endpoint columns"):
        Engine().restore_subscription_columns(old)


@given(w=st.integers(0, 6), a=value_ranges(), c=value_ranges(),
       events=st.lists(st.tuples(st.sampled_from("RS"), KEYS, VALUES, st.integers(0, 20),
                                 st.sampled_from([0, 0, 2, 7])), min_size=1, max_size=20))
@examples(40)
def test_a_window_join_is_an_interval_join(w: int, a: Range, c: Range,
                                           events: list[tuple[str, float, float, int, int]],
                                           ) -> None:
    """``IntervalJoin(b=[0, 0], ss=[−w, w], a, c)`` pairs exactly what ``WindowJoin(a, c, w)``
    pairs (on the tuples' start times), points and intervals alike, on one engine."""
    e = Engine(lateness=100)
    win, inter = e.subscribe_many([WindowJoin(a, c, w), IntervalJoin(Range(0, 0), a, c,
                                                                     ss=Range(-w, w))])
    for i, (side, key, value, t, length) in enumerate(events):
        got = e.publish(Event(side, f"e{i}", key, value, t, end=t + length))
        assert Counter((d.r_id, d.s_id) for d in got if d.subscription_id == win) == \
            Counter((d.r_id, d.s_id) for d in got if d.subscription_id == inter)
    assert counter(e.result(win)) == Counter(
        (win, 1, r, s) for _, _, r, s in counter(e.result(inter)))
