"""Generated workloads (``clients/loadgen.py``): deterministic per seed, specs that slice
consistently, stored and incoming tuples with the promised ids, sides and times, the same tuples
as messages and as columns, and band or select workloads whose incoming tuples affect about the
asked number of subscriptions when an engine runs them."""

from __future__ import annotations

import numpy as np
import pytest

from hotjoin.clients.loadgen import (
    KINDS,
    Workload,
    incoming_columns,
    incoming_events,
    pick_strategy,
    stored_columns,
    stored_events,
    subscription_specs,
)
from hotjoin.matcher import BandJoin, Engine, Event, Range, SelectJoin
from hotjoin.proto import hotjoin_pb2 as pb


@pytest.mark.parametrize("kind", KINDS)
def test_specs_are_deterministic_and_slice_consistently(kind: str) -> None:
    w = Workload(kind=kind, subscriptions=300, stored=200, affected=5.0, delivery="affected",
                 subscriber="me", window=7)
    specs = subscription_specs(w)
    assert len(specs) == 300 and specs == subscription_specs(w)
    assert subscription_specs(w, 0, 120) + subscription_specs(w, 120) == specs
    assert all(s.delivery == pb.AFFECTED and s.subscriber == "me" for s in specs)
    assert {s.WhichOneof("kind") for s in specs} == {kind}
    if kind == "window":
        assert {s.window.w for s in specs} == {7}
    assert subscription_specs(Workload(kind=kind, subscriptions=50, seed=2), 0, 10) != specs[:10]


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown kind 'spatial'; choose one of band, select"):
        subscription_specs(Workload(kind="spatial", subscriptions=3))


def test_stored_and_incoming_tuples_as_messages_and_columns() -> None:
    w = Workload(kind="select", subscriptions=100, stored=250, affected=3.0)
    batches = list(stored_events(w, batch=100))
    assert [len(b) for b in batches] == [100, 100, 50]
    flat = [e for b in batches for e in b]
    assert [e.id for e in flat] == [f"s{i}" for i in range(250)]
    assert {e.side for e in flat} == {pb.SIDE_S} and {e.time for e in flat} == {0}
    cols = list(stored_columns(w, batch=100, time=4))
    assert [c.ids for c in cols] == [[e.id for e in b] for b in batches]
    assert [k for c in cols for k in c.keys] == [e.key for e in flat]
    assert {t for c in cols for t in c.times} == {4} and cols[0].sides == bytes([pb.SIDE_S]) * 100
    inc = [e for b in incoming_events(w, 30, stream=2, batch=7) for e in b]
    assert [e.id for e in inc] == [f"r2-{i}" for i in range(30)]
    assert {e.side for e in inc} == {pb.SIDE_R} and {e.time for e in inc} == {1}
    icols = list(incoming_columns(w, 30, stream=2, batch=30))
    assert list(icols[0].keys) == [e.key for e in inc]
    other = [e.key for b in incoming_events(w, 30, stream=3) for e in b]
    assert other != [e.key for e in inc]  # each publisher stream its own tuples


def _range(r: pb.Range) -> Range:
    return Range(r.lo if r.HasField("lo") else None, r.hi if r.HasField("hi") else None)


@pytest.mark.parametrize("kind", ["band", "select"])
def test_incoming_tuples_affect_about_the_asked_number(kind: str) -> None:
    w = Workload(kind=kind, subscriptions=2000, stored=1000, affected=20.0)
    e = Engine(strategy=pick_strategy(kind))
    for s in subscription_specs(w):
        if kind == "band":
            e.subscribe(BandJoin(b=_range(s.band.b)))
        else:
            e.subscribe(SelectJoin(a=_range(s.select.a), c=_range(s.select.c)))
    for batch in stored_events(w):
        for m in batch:
            e.publish(Event("S", m.id, m.key, m.value, m.time))
    affected = []
    for batch in incoming_events(w, 200):
        for m in batch:
            affected.append(len({d.subscription_id for d in e.publish(
                Event("R", m.id, m.key, m.value, m.time))}))
        break
    mean = float(np.mean(affected))
    assert w.affected / 3 <= mean <= w.affected * 3, mean
