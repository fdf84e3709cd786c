"""Differential tests of ``ShardedEngine`` (server/scaleout) against one ``Engine`` (docs/design.md#scale-out).

Random operation sequences (subscribe, bulk subscribe with and without snapshot, unsubscribe,
publish in all three output forms and as batches, delete, late and duplicate events, lateness and
retention, select / band / window joins) run on a single engine and on the facade with 2 Ray
workers; every operation must give the same outcome: the same error, the same deliveries as a
multiset with the same subscription ids, the same seq and watermark. Worker kills in the middle
of the sequence must change nothing. One local Ray instance serves the whole module.
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from typing import Any

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from hotjoin.matcher.batch import BatchResult  # noqa: E402
from hotjoin.matcher.engine import Engine  # noqa: E402
from hotjoin.matcher.errors import HotjoinError  # noqa: E402
from hotjoin.matcher.model import (  # noqa: E402
    Affected,
    BandJoin,
    Event,
    Matches,
    Range,
    SelectJoin,
    WindowJoin,
)
from hotjoin.server.scaleout.engine import ShardedEngine  # noqa: E402
from hotjoin.server.scaleout.factory import ShardedEngineFactory  # noqa: E402
from hotjoin.server.scaleout.worker import OpError  # noqa: E402

CLI = "import sys; from hotjoin.cli.main import main; sys.exit(main(sys.argv[1:]))"


def _canon(out: Any) -> Counter[tuple[Any, ...]]:
    """Output as a multiset: pairs (sid, sign, r, s), or (sid, count) for the affected form."""
    if isinstance(out, Matches):
        return Counter((int(q), out.sign, r, s) for q, r, s in
                       zip(out.subscription_ids.tolist(), out.r_ids, out.s_ids, strict=True))
    if isinstance(out, Affected):
        return Counter((int(q), int(c)) for q, c in
                       zip(out.subscription_ids.tolist(), out.counts.tolist(), strict=True))
    if isinstance(out, list) and all(isinstance(x, int) for x in out):
        return Counter({("ids", tuple(out)): 1})
    if isinstance(out, list):
        return Counter((d.subscription_id, d.sign, d.r_id, d.s_id) for d in out)
    if isinstance(out, BatchResult):  # publish_batch: statuses, seqs, reasons and output rows
        o = out.output
        m = len(o.event)
        r = o.r_id.tolist() if o.r_id is not None else [None] * m
        sd = o.s_id.tolist() if o.s_id is not None else [None] * m
        rows: Counter[tuple[Any, ...]] = Counter(zip(
            o.event.tolist(), o.subscription.tolist(), o.sign.tolist(), o.count.tolist(), r, sd,
            strict=True))
        rows[("status", tuple(out.status.tolist()), tuple(out.seq.tolist()),
              tuple(sorted(out.reasons.items())))] += 1
        return rows
    return Counter({("value", repr(out)): 1})


def _range(rng: random.Random, lo: float, hi: float) -> Range:
    a, b = sorted((rng.uniform(lo, hi), rng.uniform(lo, hi)))
    return Range(None if rng.random() < 0.2 else round(a, 1), None if rng.random() < 0.2 else round(b, 1))


def _sub(rng: random.Random, kinds: tuple[str, ...] = ("select", "band", "window")) -> Any:
    kind = rng.choice(kinds)
    if kind == "select":
        return SelectJoin(a=_range(rng, 0, 10), c=_range(rng, 0, 10))
    if kind == "band":
        return BandJoin(b=_range(rng, -3, 3), a=_range(rng, 0, 10), c=_range(rng, 0, 10))
    return WindowJoin(a=_range(rng, 0, 10), c=_range(rng, 0, 10), w=rng.randint(0, 6))


class Twin:
    """Apply every call to the single engine and to the facade; assert identical outcomes."""

    def __init__(self, single: Engine, sharded: ShardedEngine) -> None:
        self.a, self.b = single, sharded
        self.calls = 0

    def __call__(self, name: str, *args: Any, **kw: Any) -> Any:
        self.calls += 1
        ea = eb = None
        ra = rb = None
        try:
            ra = getattr(self.a, name)(*args, **kw)
        except (HotjoinError, ValueError) as e:
            ea = e
        try:
            rb = getattr(self.b, name)(*args, **kw)
        except (HotjoinError, ValueError) as e:
            eb = e
        where = f"call #{self.calls} {name}{args!r}"
        assert type(ea) is type(eb), f"{where}: single raised {ea!r}, sharded {eb!r}"
        if ea is not None:
            assert str(ea) == str(eb), where
        else:
            assert _canon(ra) == _canon(rb), f"{where}: outputs differ"
        assert self.a.seq == self.b.seq, f"{where}: seq {self.a.seq} != {self.b.seq}"
        assert self.a.watermark == self.b.watermark, where
        return ra


def _program(twin: Twin, rng: random.Random, n_ops: int, kill: Any = None,
             kinds: tuple[str, ...] = ("select", "band", "window")) -> None:
    stored: dict[str, list[str]] = {"R": [], "S": []}
    live: list[int] = []
    t = 100
    for step in range(n_ops):
        if kill is not None and step in kill:
            twin.b.kill_worker(rng.randrange(twin.b.n_workers))
        x = rng.random()
        if x < 0.12 or not live:
            if rng.random() < 0.5:
                live.append(twin("subscribe", _sub(rng, kinds), snapshot=rng.random() < 0.3))
            else:
                live.extend(twin("subscribe_many", [_sub(rng, kinds) for _ in range(rng.randint(0, 7))],
                                 snapshot=rng.random() < 0.3))
        elif x < 0.17:
            sid = live.pop(rng.randrange(len(live)))
            twin("unsubscribe", sid)
        elif x < 0.20:
            twin("unsubscribe", 10_000)  # unknown
        elif x < 0.30 and (stored["R"] or stored["S"]):
            side = rng.choice([s for s in "RS" if stored[s]])
            eid = stored[side].pop(rng.randrange(len(stored[side])))
            twin(rng.choice(("delete_columnar", "delete_affected", "delete")), side, eid)
        elif x < 0.32:
            twin("delete_columnar", "R", "nope")
        elif x < 0.36 and live:
            twin("result_columnar", rng.choice(live))
        elif x < 0.41:  # a columnar batch: the engine's compiled path on every worker
            n = rng.randint(0, 6)
            sides, ids, keys, values, times = [], [], [], [], []
            for k in range(n):
                t += rng.randint(-4, 3)
                side = rng.choice("RS")
                eid = (rng.choice(stored[side]) if stored[side] and rng.random() < 0.1
                       else f"{side}{step}.b{k}")
                sides.append(side)
                ids.append(eid)
                keys.append(float(rng.randint(0, 5)))
                values.append(round(rng.uniform(0, 10), 1))
                times.append(t)
            res = twin("publish_batch", sides, ids, keys, values, times,
                       output=rng.choice(("pairs", "affected")))
            for k in np.flatnonzero(res.status == 0).tolist():
                stored[sides[k]].append(ids[k])
        elif x < 0.45:  # a batch: the facade's one-RPC path against one-at-a-time calls
            evs = []
            for _ in range(rng.randint(1, 6)):
                t += rng.randint(-4, 3)
                side = rng.choice("RS")
                eid = rng.choice(stored[side]) if stored[side] and rng.random() < 0.1 else f"{side}{step}.{len(evs)}"
                evs.append(Event(side, eid, float(rng.randint(0, 5)), round(rng.uniform(0, 10), 1), t))
            mode = rng.choice(("pairs", "affected"))
            got = twin.b.publish_ops(evs, mode)
            for ev, g in zip(evs, got, strict=True):
                call = twin.a.publish_columnar if mode == "pairs" else twin.a.publish_affected
                try:
                    want = call(ev)
                except HotjoinError as e:
                    assert isinstance(g, OpError) and type(g.error) is type(e), (ev, g)
                    continue
                assert not isinstance(g, OpError), (ev, g.error)
                assert _canon(want) == _canon(g), ev
                stored[ev.side].append(ev.id)
            assert twin.a.seq == twin.b.seq and twin.a.watermark == twin.b.watermark
        else:
            t += rng.randint(-4, 3)
            side = rng.choice("RS")
            eid = rng.choice(stored[side]) if stored[side] and rng.random() < 0.05 else f"{side}{step}"
            ev = Event(side, eid, float(rng.randint(0, 5)), round(rng.uniform(0, 10), 1), t)
            try:
                twin(rng.choice(("publish_columnar", "publish_affected", "publish")), ev)
                stored[side].append(eid)
            except HotjoinError:
                pass
        if twin.a.retention is not None:  # retention drops tuples silently: forget them too
            for s in "RS":
                stored[s] = [i for i in stored[s] if twin.a.get_event(s, i) is not None]


@pytest.mark.parametrize(("lateness", "retention", "seed"), [(0, None, 1), (3, None, 2), (2, 4, 3)])
def test_sharded_equals_single_engine(local_ray: Any, lateness: int, retention: int | None,
                                      seed: int) -> None:
    rng = random.Random(seed)
    twin = Twin(Engine(lateness=lateness, retention=retention),
                ShardedEngine(lateness, retention, workers=2, snapshot_every=40))
    _program(twin, rng, 200)
    info = twin.b.stats()["workers"]
    assert [w["seq"] for w in info] and all(w["healthy"] for w in info)
    assert sum(w["subscriptions"] for w in info) == len(twin.a.subs)
    twin.b.close()


def test_worker_kills_change_nothing(local_ray: Any) -> None:
    """Kill a worker several times during a random workload: the outputs stay identical."""
    rng = random.Random(7)
    sharded = ShardedEngine(2, None, workers=2, snapshot_every=25)
    twin = Twin(Engine(lateness=2), sharded)
    _program(twin, rng, 160, kill={30, 90, 91, 130})
    assert sharded.recoveries >= 3
    assert sum(w["restarts"] for w in sharded.stats()["workers"]) == sharded.recoveries
    sharded.close()


def test_replay_calls_rebuild_the_same_state(local_ray: Any) -> None:
    """The calls a topic's log replay makes (publish_many without matching, columns, clock,
    restore_subscription) leave the facade matching exactly as the engine does."""
    a, b = Engine(lateness=1), ShardedEngine(1, None, workers=2)
    twin = Twin(a, b)
    twin("subscribe_many", [SelectJoin(a=Range(0, 5), c=Range(None, None)), BandJoin(b=Range(-1, 1))])
    twin("publish_many", [Event("R", f"r{i}", float(i % 3), float(i), 10 + i) for i in range(6)],
         match=False)
    twin("publish_many", [Event("S", "x", 1.0, 1.0, 20), Event("S", "late", 1.0, 1.0, 0)], match=False)
    s0 = a.seq
    for e in (a, b):
        e.restore_event_columns("S", ["c1", "c2"], np.array([0.0, 2.0]), np.array([1.0, 2.0]),
                                np.array([30, 31]), np.array([s0 + 1, s0 + 2]), None)
        e.restore_clock(s0 + 2, 31)
        e.restore_subscription(5, WindowJoin(a=Range(None, None), c=Range(None, None), w=100), s0 + 2)
    assert a.seq == b.seq and a.watermark == b.watermark
    twin("publish_columnar", Event("R", "r9", 2.0, 1.0, 40))
    twin("delete_columnar", "S", "c1")
    twin("result_columnar", 5)
    twin("unsubscribe", 0)
    twin("publish_affected", Event("S", "s9", 2.0, 3.0, 41))
    b.close()


def test_single_process_server_imports_no_ray() -> None:
    code = ("import sys, hotjoin.server.app, hotjoin.server.topic, hotjoin.cli.main, "
            "hotjoin.cli.commands.serve, hotjoin.server.scaleout.engine; "
            "assert 'ray' not in sys.modules, 'ray imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_serve_rejects_ray_address_without_workers(tmp_path: Any) -> None:
    p = subprocess.run([sys.executable, "-c", CLI, "serve", "--data-dir",
                        str(tmp_path), "--ray-address", "auto"], capture_output=True, text=True)
    assert p.returncode != 0 and "--ray-address needs --workers" in p.stderr
    assert "Traceback" not in p.stderr


# -- the key-partitioned scheme (server/scaleout/key_engine.py) ----------------------------------
SELECT_WINDOW = ("select", "window")  # band joins (which replicate S) in the kill test and below


@pytest.mark.parametrize(("lateness", "retention", "seed"),
                         [(0, None, 11), (3, None, 12), (2, 4, 13), (0, 0, 14)])
def test_key_sharded_equals_single_engine(local_ray: Any, lateness: int, retention: int | None,
                                          seed: int) -> None:
    """Key-partitioned: every outcome (statuses, errors, pairs, seqs, watermark) as one engine,
    with lateness and retention decided on the topic's clock though each worker sees some keys."""
    from hotjoin.server.scaleout.key_engine import KeyShardedEngine

    rng = random.Random(seed)
    keyed = KeyShardedEngine(lateness, retention, workers=2, snapshot_every=40)
    keyed.pipeline_min_events = 1 + seed % 2  # batches of up to 6 events cut into 1-3 chunks
    twin = Twin(Engine(lateness=lateness, retention=retention), keyed)
    _program(twin, rng, 260, kinds=SELECT_WINDOW)
    st = keyed.stats()
    assert st["scheme"] == "key-partitioned"
    assert st["tuples"] == twin.a.stats()["tuples"]  # summed over workers: each holds some keys
    assert st["subscriptions"] == twin.a.stats()["subscriptions"]
    per_worker = [w["seq"] for w in st["workers"]]
    assert all(s <= twin.a.seq for s in per_worker)
    assert sorted((e.side, e.id, s) for e, s in keyed.stored_tuples()) == sorted(
        (e.side, e.id, s) for t in twin.a.tables.values() for e, s in t.events())
    keyed.close()


def test_key_sharded_worker_kills_change_nothing(local_ray: Any) -> None:
    from hotjoin.server.scaleout.key_engine import KeyShardedEngine

    rng = random.Random(17)
    keyed = KeyShardedEngine(2, 6, workers=2, snapshot_every=25)
    keyed.pipeline_min_events = 1  # kills meet pipelined chunks too
    twin = Twin(Engine(lateness=2, retention=6), keyed)
    _program(twin, rng, 180, kill={30, 90, 91, 150})  # band joins too: S replicated mid-way
    assert keyed._replicated is not None
    assert keyed.recoveries >= 3
    keyed.close()


def test_key_sharded_routes_each_event_to_one_worker(local_ray: Any) -> None:
    """Each tuple is stored on exactly one worker, the one its key hashes to; -0.0 and 0.0 are
    one key; a band join replicates the S tuples to every worker, results unchanged."""
    from hotjoin.server.scaleout.key_engine import KeyShardedEngine, worker_of_keys

    keyed = KeyShardedEngine(0, None, workers=2)
    single = Engine()
    twin = Twin(single, keyed)
    twin("subscribe", SelectJoin())
    keys = [float(k) for k in range(40)] + [-0.0, 0.0]
    res = twin("publish_batch", ["R"] * len(keys), [f"r{i}" for i in range(len(keys))], keys,
               [1.0] * len(keys), list(range(len(keys))), output="pairs")
    assert res.status.tolist() == [0] * len(keys)
    twin("publish_batch", ["S", "S"], ["s0", "s1"], [0.0, -0.0], [1.0, 1.0], [50, 51],
         output="pairs")  # each S pairs with both zero-key R tuples
    own = worker_of_keys(np.array(keys), 2)
    assert set(own.tolist()) == {0, 1}
    stored = [w["stats"]["tuples"]["R"] for w in keyed.refresh_status()]
    assert stored == [int((own == 0).sum()), int((own == 1).sum())]
    # a duplicate id under another key is found across workers (the front end's id table)
    twin("publish_batch", ["R"], ["r0"], [39.0], [1.0], [60])
    twin("publish_columnar", Event("R", "r1", 7.0, 1.0, 61))
    twin("subscribe", BandJoin(b=Range(-2, 2)), snapshot=True)  # S now on every worker
    assert [w["stats"]["tuples"]["S"] for w in keyed.refresh_status()] == [2, 2]
    assert keyed.stats()["tuples"] == single.stats()["tuples"]
    twin("publish_batch", ["S", "R", "S"], ["s2", "r99", "s3"], [5.0, 6.0, 7.0], [1.0] * 3,
         [70, 71, 72], output="affected")
    twin("delete_affected", "S", "s2")
    twin("result_columnar", 1)
    keyed.close()


def test_key_sharded_pipelined_batch_survives_a_dead_worker(local_ray: Any) -> None:
    """A batch cut into 3 chunks (all sent at once) meets a killed worker: the first chunk
    rebuilds it, the later chunks (sent to the dead actor) are sent again; output as one engine."""
    from hotjoin.server.scaleout.key_engine import KeyShardedEngine

    keyed = KeyShardedEngine(1, None, workers=2, snapshot_every=10)
    keyed.pipeline_min_events = 1
    twin = Twin(Engine(lateness=1), keyed)
    twin("subscribe_many", [SelectJoin(), WindowJoin(w=3), SelectJoin(a=Range(2, 6))])

    def batch(tag: str, t0: int) -> Any:
        n = 12
        return twin("publish_batch", ["R" if i % 3 else "S" for i in range(n)],
                    [f"{tag}{i}" for i in range(n)], [float(i % 5) for i in range(n)],
                    [float(i) for i in range(n)], [t0 + i // 2 for i in range(n)], output="pairs")

    batch("a", 10)
    for k in range(3):
        keyed.kill_worker(k % 2)
        res = batch(f"k{k}", 20 + 10 * k)
        assert (res.status == 0).all() and len(res.output)
    assert keyed.recoveries == 3
    keyed.close()


# -- the topic option max_advance: the same refusals as one engine ------------------------------
def _far_program(twin: Twin, rng: random.Random, n_ops: int, bound: int) -> None:
    """Publishes in every form whose times mostly creep, sometimes jump far ahead (a wrong
    clock), land exactly on the bound or one past it, or reuse a stored id (duplicate and far)."""
    twin("subscribe_many", [_sub(rng, ("select", "window")) for _ in range(4)])
    stored: dict[str, list[str]] = {"R": [], "S": []}
    t = 100

    def when() -> int:
        x = rng.random()
        if x < 0.12:
            return t + rng.choice((10**12, 1_800_000_000_000, 50 * bound))
        if x < 0.3:
            return t + bound + rng.choice((0, 1))  # t lags the clock: mostly inside the bound
        return t + rng.randint(-3, 3)

    def new_event(step: int, k: int) -> Event:
        side = rng.choice("RS")
        eid = (rng.choice(stored[side]) if stored[side] and rng.random() < 0.1
               else f"{side}{step}.{k}")
        return Event(side, eid, float(rng.randint(0, 4)), round(rng.uniform(0, 10), 1), when())

    for step in range(n_ops):
        x = rng.random()
        evs = [new_event(step, k) for k in range(rng.randint(1, 6))]
        if x < 0.4:
            res = twin("publish_batch", [e.side for e in evs], [e.id for e in evs],
                       [e.key for e in evs], [e.value for e in evs], [e.time for e in evs],
                       output=rng.choice(("pairs", "affected")))
            ok = [e for e, s in zip(evs, res.status.tolist(), strict=True) if s == 0]
        elif x < 0.55:  # the facade's one-RPC path against the engine one at a time
            mode = rng.choice(("pairs", "affected"))
            got = twin.b.publish_ops(evs, mode)
            ok = []
            for ev, g in zip(evs, got, strict=True):
                call = twin.a.publish_columnar if mode == "pairs" else twin.a.publish_affected
                try:
                    want = call(ev)
                except (HotjoinError, ValueError) as e:
                    assert isinstance(g, OpError) and type(g.error) is type(e), (ev, g)
                    assert str(g.error) == str(e)
                    continue
                assert not isinstance(g, OpError), (ev, g.error)
                assert _canon(want) == _canon(g), ev
                ok.append(ev)
            assert twin.a.seq == twin.b.seq and twin.a.watermark == twin.b.watermark
        elif x < 0.65:  # a log replay's call: stops at the first refused event
            before = twin.a.seq
            twin("publish_many", evs, match=False)
            ok = evs[: twin.a.seq - before]
        else:
            ok = []
            for ev in evs:
                try:
                    twin(rng.choice(("publish_columnar", "publish_affected", "publish")), ev)
                except HotjoinError:
                    continue
                if twin.a.get_event(ev.side, ev.id) is not None:
                    ok.append(ev)
        for ev in ok:
            stored[ev.side].append(ev.id)
        if twin.a.watermark is not None:
            t = twin.a.watermark + twin.a.lateness - rng.randint(0, 2)
        if twin.a.retention is not None:
            for s in "RS":
                stored[s] = [i for i in stored[s] if twin.a.get_event(s, i) is not None]


@pytest.mark.parametrize(("scheme", "lateness", "retention", "bound", "seed"),
                         [("subscription", 1, None, 5, 21), ("key", 2, 6, 3, 22)])
def test_max_advance_equals_single_engine(local_ray: Any, scheme: str, lateness: int,
                                          retention: int | None, bound: int, seed: int) -> None:
    """Both scale-out schemes, built by the server's factory, refuse exactly the events one
    engine refuses (INVALID with the same reason, after the duplicate and lateness checks), and
    a refused event moves no clock: statuses, errors, pairs, seqs and watermark as one engine."""
    rng = random.Random(seed)
    eng = ShardedEngineFactory(2, scheme=scheme)(lateness=lateness, retention=retention,
                                                 max_advance=bound)
    assert eng.max_advance == bound
    twin = Twin(Engine(lateness=lateness, retention=retention, max_advance=bound), eng)
    _far_program(twin, rng, 90, bound)
    eng.close()
