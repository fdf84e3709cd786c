"""Interval joins and interval events on both scale-out schemes, against one ``Engine``: every
outcome (statuses, errors, pairs, seqs, watermark) identical, under worker kills (recovery from
the workers' snapshots) and through ``export_state``/``load_state`` (checkpoints). The key scheme
keeps tuples placed by key while every interval join has ``B = [0, 0]`` and replicates S (the
band rule) once one pairs across keys (docs/design.md, "Interval joins"; docs/how-to/scale-out.md).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from test_engine import Twin, _canon  # noqa: E402

from hotjoin.matcher.engine import Engine  # noqa: E402
from hotjoin.matcher.errors import HotjoinError  # noqa: E402
from hotjoin.matcher.model import (  # noqa: E402
    ALLEN_RELATIONS,
    BandJoin,
    Event,
    IntervalJoin,
    Range,
    SelectJoin,
)
from hotjoin.server.scaleout.engine import ShardedEngine  # noqa: E402
from hotjoin.server.scaleout.key_engine import KeyShardedEngine  # noqa: E402


def _interval(rng: random.Random, across: bool) -> Any:
    b = Range(-1, 1) if across else Range(0, 0)
    x = rng.random()
    if x < 0.5:
        return IntervalJoin.allen(rng.choice(ALLEN_RELATIONS), b=b)
    if x < 0.8:
        return IntervalJoin.iseql("left_overlap", delta=rng.randint(0, 4), eps=rng.randint(0, 4),
                                  b=b, a=Range(0, 8))
    return IntervalJoin(b, ss=Range(-3, 3), ee=Range(None, rng.randint(-1, 4)))


def _program(twin: Twin, rng: random.Random, n_ops: int, across_at: int | None,
             kill: set[int] = frozenset()) -> None:  # type: ignore[assignment]
    """Interval subscriptions (across keys from step ``across_at`` on), select joins, point and
    interval events one at a time and in batches, deletes, results."""
    stored: dict[str, list[str]] = {"R": [], "S": []}
    live: list[int] = []
    t = 100

    def end(t0: int) -> int | None:
        return None if rng.random() < 0.4 else t0 + rng.choice((0, 1, 3, 8))

    for step in range(n_ops):
        if step in kill:
            twin.b.kill_worker(rng.randrange(twin.b.n_workers))
        across = across_at is not None and step >= across_at
        x = rng.random()
        if x < 0.1 or not live:
            subs = [_interval(rng, across and rng.random() < 0.5) for _ in range(rng.randint(1, 4))]
            if rng.random() < 0.2:
                subs.append(SelectJoin())
            live.extend(twin("subscribe_many", subs, snapshot=rng.random() < 0.3))
        elif x < 0.2 and (stored["R"] or stored["S"]):
            side = rng.choice([s for s in "RS" if stored[s]])
            eid = stored[side].pop(rng.randrange(len(stored[side])))
            twin(rng.choice(("delete_columnar", "delete_affected")), side, eid)
        elif x < 0.25:
            twin("result_columnar", rng.choice(live))
        elif x < 0.55:
            n = rng.randint(0, 8)
            sides, ids, keys, values, times, ends = [], [], [], [], [], []
            for k in range(n):
                t += rng.randint(-3, 3)
                side = rng.choice("RS")
                sides.append(side)
                ids.append(rng.choice(stored[side]) if stored[side] and rng.random() < 0.1
                           else f"{side}{step}.b{k}")
                keys.append(float(rng.randint(0, 3)))
                values.append(float(rng.randint(0, 9)))
                times.append(t)
                e = end(t)
                ends.append(t - 1 if rng.random() < 0.03 else (t if e is None else e))  # INVALID
            res = twin("publish_batch", sides, ids, keys, values, times,
                       output=rng.choice(("pairs", "affected")), ends=ends)
            for k in np.flatnonzero(res.status == 0).tolist():
                stored[sides[k]].append(ids[k])
        else:
            t += rng.randint(-3, 3)
            side = rng.choice("RS")
            ev = Event(side, f"{side}{step}", float(rng.randint(0, 3)), float(rng.randint(0, 9)),
                       t, b"", end(t))
            try:
                twin(rng.choice(("publish_columnar", "publish_affected", "publish")), ev)
                stored[side].append(ev.id)
            except HotjoinError:
                pass
        if twin.a.retention is not None:
            for s in "RS":
                stored[s] = [i for i in stored[s] if twin.a.get_event(s, i) is not None]


def _same_state(a: Any, b: Any) -> None:
    """``b`` answers every subscription's result, every stored event and the clock as ``a``."""
    assert a.seq == b.seq and a.watermark == b.watermark
    for sid in a.subs:
        assert _canon(a.result_columnar(sid)) == _canon(b.result_columnar(sid)), sid
    for side, table in a.tables.items():
        for ev, _ in table.events():
            assert b.get_event(side, ev.id) == ev


@pytest.mark.parametrize(("scheme", "lateness", "retention", "seed"), [
    ("subscription", 3, None, 1), ("subscription", 2, 6, 2),
    ("key", 3, None, 3), ("key", 2, 6, 4),
])
def test_interval_joins_equal_one_engine(local_ray: Any, scheme: str, lateness: int,
                                         retention: int | None, seed: int) -> None:
    rng = random.Random(seed)
    # one strategy pinned on both sides: the workers of a scheme see other shares of the data
    # than the single engine, so "auto" may route them differently (the engine's own tests
    # check that every strategy gives the oracle's pairs)
    strategy = {"interval": "IJ-SSI" if seed % 2 else "IJ-NestedLoop"}
    if scheme == "key":
        sharded: Any = KeyShardedEngine(lateness, retention, strategy, workers=2,
                                        snapshot_every=40)
        sharded.pipeline_min_events = 1
    else:
        sharded = ShardedEngine(lateness, retention, strategy, workers=2, snapshot_every=40)
    twin = Twin(Engine(lateness=lateness, retention=retention, strategy=strategy), sharded)
    _program(twin, rng, 90, across_at=None)
    if scheme == "key":  # every interval join on equal keys: still placed by key
        assert sharded._replicated is None
    _program(twin, rng, 90, across_at=0, kill={40})
    if scheme == "key":  # one across keys: S replicated, as for a band join
        assert sharded._replicated is not None
    st = sharded.stats()
    assert st["subscriptions"]["interval"] == twin.a.stats()["subscriptions"]["interval"]
    # a checkpoint: the state as columns, loaded into a fresh engine of the same scheme
    state = sharded.export_state()
    assert Counter(state["subs"]["kind"].tolist()) == Counter(twin.a.export_state()["subs"]["kind"]
                                                              .tolist())
    fresh: Any = (KeyShardedEngine(lateness, retention, strategy, workers=2) if scheme == "key"
                  else ShardedEngine(lateness, retention, strategy, workers=2))
    fresh.load_state(state)
    _same_state(twin.a, fresh)
    twin2 = Twin(twin.a, fresh)
    _program(twin2, rng, 40, across_at=0)
    sharded.close()
    fresh.close()


def test_key_scheme_loads_a_state_with_interval_joins_by_key(local_ray: Any) -> None:
    """``load_state`` places tuples by key while every interval join has B = [0, 0], and
    replicates S when one does not (as for a band join)."""
    single = Engine(lateness=5)
    single.subscribe_many([IntervalJoin.allen("overlaps", b=Range(0, 0)),
                           IntervalJoin.allen("during", b=Range(0, 0))])
    for i in range(12):
        single.publish(Event("RS"[i % 2], f"e{i}", float(i % 3), 0.0, 10 + i, b"", 14 + 2 * i))
    keyed = KeyShardedEngine(5, None, workers=2)
    keyed.load_state(single.export_state())
    assert keyed._replicated is None
    _same_state(single, keyed)
    keyed.close()
    single.subscribe(IntervalJoin.allen("before", b=Range(-2, 2)))
    keyed = KeyShardedEngine(5, None, workers=2)
    keyed.load_state(single.export_state())
    assert keyed._replicated is not None
    _same_state(single, keyed)
    keyed.subscribe(BandJoin(b=Range(0, 1)))  # nothing changes for the other kinds
    keyed.close()
