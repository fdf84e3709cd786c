"""The key-partitioned front end (``server/scaleout/key_engine.py``) against one ``Engine``, by
hypothesis, with in-process workers instead of Ray actors (no Ray needed): the same admission,
routing, clock, id table, replication and merge code, over random programs of publish batches
(pairs inside a batch, duplicates across keys, late events, retention moving mid-batch),
one-at-a-time publishes, ``publish_many`` with and without matching, deletes, subscribes with and
without snapshot, and unsubscribes; interval events (with ends) among points and interval joins
(on equal keys: placed by key; across keys: as band joins); tuples
placed by key throughout, S replicated when a band join subscribes mid-program, or replicated
from the start."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.engine import Engine
from hotjoin.matcher.errors import HotjoinError
from hotjoin.matcher.model import (
    ALLEN_RELATIONS,
    BandJoin,
    Event,
    IntervalJoin,
    Range,
    SelectJoin,
    WindowJoin,
)
from hotjoin.server.scaleout import worker as W
from hotjoin.server.scaleout.engine import _Shard
from hotjoin.server.scaleout.key_engine import KeyShardedEngine, StoredIds, worker_of_keys


class LocalKeyShardedEngine(KeyShardedEngine):
    """``KeyShardedEngine`` whose workers are ``ShardWorker`` objects in this process."""

    def _started(self) -> list[_Shard]:
        if not self._shards:
            self._shards = [_Shard(actor=W.ShardWorker(self.lateness, self.retention,
                                                      self._strategy))
                            for _ in range(self.n_workers)]
        return self._shards

    def apply_many(self, batches: Mapping[int, Sequence[W.Op]]) -> dict[int, list[Any]]:
        shards = self._started()
        return {i: shards[i].actor.apply(list(ops)) for i, ops in batches.items()}

    def apply_chunks(self, chunks: Sequence[Mapping[int, Sequence[W.Op]]],
                     consume: Callable[[int, dict[int, list[Any]]], None]) -> None:
        for c, ch in enumerate(chunks):
            consume(c, self.apply_many(ch))

    def refresh_status(self) -> list[dict[str, Any]]:
        return [sh.actor.status() for sh in self._started()]



def _outcome(f: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", f()
    except (HotjoinError, ValueError) as e:
        return type(e).__name__, str(e)


def _same(a: Any, b: Any) -> bool:
    from collections import Counter

    from hotjoin.matcher.batch import BatchResult
    from hotjoin.matcher.model import Affected, Matches

    def canon(x: Any) -> Any:
        if isinstance(x, BatchResult):
            o = x.output
            m = len(o.event)
            r = o.r_id.tolist() if o.r_id is not None else [None] * m
            s = o.s_id.tolist() if o.s_id is not None else [None] * m
            return (x.status.tolist(), x.seq.tolist(), sorted(x.reasons.items()),
                    Counter(zip(o.event.tolist(), o.subscription.tolist(), o.sign.tolist(),
                                o.count.tolist(), r, s, strict=True)),
                    o.event.tolist() == sorted(o.event.tolist()))
        if isinstance(x, Matches):
            return Counter(zip(x.subscription_ids.tolist(), [x.sign] * len(x), list(x.r_ids),
                               list(x.s_ids), strict=True))
        if isinstance(x, Affected):
            return Counter(zip(x.subscription_ids.tolist(), x.counts.tolist(), strict=True))
        if isinstance(x, list):
            return Counter(repr(d) for d in x)
        return x

    return canon(a) == canon(b)


@st.composite
def programs(draw: Any) -> tuple[int, int | None, int, list[tuple[Any, ...]]]:
    """Lateness, retention, workers, then the pipeline's chunk count and the operations."""
    lateness = draw(st.integers(0, 3))
    retention = draw(st.sampled_from([None, 0, 2, 5]))
    workers = draw(st.integers(1, 3))
    ops: list[tuple[Any, ...]] = [("chunks", draw(st.integers(1, 3))),
                                  ("mode", draw(st.sampled_from(["key", "band", "replicated"])))]
    for _ in range(draw(st.integers(1, 25))):
        ops.append((draw(st.sampled_from(["batch", "batch", "one", "many", "delete", "sub",
                                          "unsub"])),
                    draw(st.integers(0, 2**31))))
    return lateness, retention, workers, ops


def _sub(rng: random.Random, band: bool) -> Any:
    a = Range(float(rng.randint(0, 3)), float(rng.randint(3, 6))) if rng.random() < 0.7 else Range()
    c = Range(float(rng.randint(0, 3)), None) if rng.random() < 0.5 else Range()
    if band and rng.random() < 0.3:  # replicates S (once) on a topic placed by key
        lo = float(rng.randint(-2, 1))
        if rng.random() < 0.5:  # an interval join across keys replicates S as a band join
            return IntervalJoin.allen(rng.choice(ALLEN_RELATIONS), b=Range(lo, lo + 1), a=a, c=c)
        return BandJoin(Range(lo, lo + rng.randint(0, 3)), a, c)
    r = rng.random()
    if r < 0.3:  # on equal keys: placed by key like select and window joins
        return IntervalJoin.allen(rng.choice(ALLEN_RELATIONS), b=Range(0, 0), a=a, c=c)
    if r < 0.4:
        return IntervalJoin.iseql("left_overlap", delta=rng.randint(0, 3), eps=rng.randint(0, 3),
                                  b=Range(0, 0), a=a, c=c)
    return SelectJoin(a, c) if rng.random() < 0.5 else WindowJoin(a, c, w=rng.randint(0, 4))


def _end(rng: random.Random, t: int) -> int | None:
    """An interval event's end now and then (None: a point)."""
    return None if rng.random() < 0.5 else t + rng.choice((0, 1, 2, 5))


@settings(max_examples=200, deadline=None)
@given(programs())
def test_key_front_end_equals_one_engine(prog: tuple[int, int | None, int, list[Any]]) -> None:
    lateness, retention, workers, ops = prog
    single = Engine(lateness=lateness, retention=retention)
    mode = ops[1][1]  # by key throughout; band joins mid-program; replicated from the start
    keyed = LocalKeyShardedEngine(lateness, retention, workers=workers,
                                  replicate=mode == "replicated")
    keyed.pipeline_min_events = 1  # batches cut into chunks, merged back in event order
    ids = [f"e{i}" for i in range(30)]  # duplicates happen, but most events are new
    keyed.pipeline_chunks = ops[0][1]
    live: list[int] = single.subscribe_many([SelectJoin(), WindowJoin(w=2)])  # rows in most batches
    assert keyed.subscribe_many([SelectJoin(), WindowJoin(w=2)]) == live
    clock = 0  # event times drift upward: some late events, most not
    for kind, seed in ops[2:]:
        rng = random.Random(seed)
        clock += rng.randint(0, 3)
        if kind == "batch":
            n = rng.randint(0, 12)
            cols = ([rng.choice("RS") for _ in range(n)], [rng.choice(ids) for _ in range(n)],
                    [float(rng.randint(0, 3)) * rng.choice((1, -1)) for _ in range(n)],
                    [float(rng.randint(0, 6)) for _ in range(n)],
                    [clock + rng.randint(-4, 2) for _ in range(n)])
            if n and rng.random() < 0.2:
                cols[2][rng.randrange(n)] = float("nan")  # INVALID between accepted ones
            ends = None
            if rng.random() < 0.6:
                ends = [t if (x := _end(rng, t)) is None else x for t in cols[4]]
            out = rng.choice(("pairs", "affected", "none"))
            calls = [lambda e, c=cols, o=out, en=ends: e.publish_batch(*c, output=o, ends=en)]
        elif kind == "one":
            t = clock + rng.randint(-4, 2)
            ev = Event(rng.choice("RS"), rng.choice(ids), float(rng.randint(0, 3)),
                       float(rng.randint(0, 6)), t, b"", _end(rng, t))
            name = rng.choice(("publish_columnar", "publish_affected", "publish"))
            calls = [lambda e, ev=ev, name=name: getattr(e, name)(ev)]
        elif kind == "many":  # publish_many: stops at the first rejected event
            evs = [Event(rng.choice("RS"), rng.choice(ids), float(rng.randint(0, 3)),
                         float(rng.randint(0, 6)), t, b"", _end(rng, t))
                   for t in [clock + rng.randint(-4, 2) for _ in range(rng.randint(0, 5))]]
            match = rng.random() < 0.5
            calls = [lambda e, evs=evs, m=match: e.publish_many(evs, match=m)]
        elif kind == "delete":
            side, eid = rng.choice("RS"), rng.choice(ids)
            name = rng.choice(("delete_columnar", "delete_affected", "delete"))
            calls = [lambda e, s=side, i=eid, name=name: getattr(e, name)(s, i),
                     lambda e, s=side, i=eid: e.get_event(s, i)]
        elif kind == "sub":
            subs = [_sub(rng, mode != "key") for _ in range(rng.randint(1, 3))]
            snap = rng.random() < 0.4
            calls = [lambda e, s=subs, sn=snap: e.subscribe_many(s, snapshot=sn)]
        else:
            if not live:
                continue
            sid = live.pop(rng.randrange(len(live)))
            calls = [lambda e, q=sid: e.unsubscribe(q)]
        for call in calls:
            a, b = _outcome(lambda c=call: c(single)), _outcome(lambda c=call: c(keyed))
            assert a[0] == b[0], (kind, a, b)
            assert a[0] != "ok" or _same(a[1], b[1]), (kind, a, b)
            if kind == "sub" and a[0] == "ok":
                live.extend(a[1])
                for q in a[1]:
                    assert _same(single.result_columnar(q), keyed.result_columnar(q))
            assert single.seq == keyed.seq and single.watermark == keyed.watermark
    assert sorted((e.side, e.id, s) for e, s in keyed.stored_tuples()) == sorted(
        (e.side, e.id, s) for t in single.tables.values() for e, s in t.events())
    assert keyed.stats()["tuples"] == single.stats()["tuples"]
    if mode == "key":
        assert keyed._replicated is None


def test_worker_of_keys_is_a_function_of_the_key_value() -> None:
    keys = np.array([0.0, -0.0, 1.5, -1.5, 1e300, 3.0, 3.0])
    for n in (1, 2, 3, 8):
        w = worker_of_keys(keys, n)
        assert ((w >= 0) & (w < n)).all() and w[0] == w[1] and w[5] == w[6]
    spread = np.bincount(worker_of_keys(np.arange(10_000, dtype=np.float64), 4), minlength=4)
    assert spread.min() > 2_000  # integer keys spread evenly (each worker 25 % ± a few)


def test_stored_ids_expire_by_time_and_compact() -> None:
    t = StoredIds()
    t.add([f"x{i}" for i in range(5000)], np.arange(5000), np.zeros(5000, np.int32))
    assert t.find("x10", None) == 0 and t.find("x10", 11) == -1 and t.find("nope", None) == -1
    t.remove("x20")
    assert t.find("x20", None) == -1
    t.compact(4000)  # 5000 slots >= 4096: the expired and removed go
    assert len(t) == 1000 and t.n == 1000 and t.find("x4500", 4000) == 0
    assert t.time_of("x4999") == 4999 and t.time_of("x10") is None
