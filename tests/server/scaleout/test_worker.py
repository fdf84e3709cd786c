"""One scale-out worker (``ShardWorker``), in this process: a batch of operations gives, in
order, what the same calls give on one ``Engine``; a rejected operation comes back as an
``OpError`` value that survives pickling; snapshots rebuild the shard."""

from __future__ import annotations

import pickle
import random
from collections import Counter
from typing import Any

import pytest

from hotjoin.matcher.engine import Engine
from hotjoin.matcher.errors import (
    BatchError,
    DuplicateEventError,
    HotjoinError,
    LateEventError,
    UnknownEventError,
    UnknownSubscriptionError,
)
from hotjoin.matcher.model import Affected, BandJoin, Event, Matches, Range, SelectJoin, WindowJoin
from hotjoin.server.scaleout import worker as W

EVERYTHING = SelectJoin(a=Range(None, None), c=Range(None, None))


def _canon(out: Any) -> Any:
    """An operation's output as a comparable value: deliveries as a multiset."""
    if isinstance(out, Matches):
        return Counter((int(q), out.sign, r, s) for q, r, s in
                       zip(out.subscription_ids.tolist(), out.r_ids, out.s_ids, strict=True))
    if isinstance(out, Affected):
        return Counter(zip(out.subscription_ids.tolist(), out.counts.tolist(), strict=True))
    if isinstance(out, list) and out and not isinstance(out[0], int):
        return Counter((d.subscription_id, d.sign, d.r_id, d.s_id) for d in out)
    return out


def _sub(rng: random.Random) -> Any:
    def rng_range(lo: float, hi: float) -> Range:
        a, b = sorted((round(rng.uniform(lo, hi), 1), round(rng.uniform(lo, hi), 1)))
        return Range(a, b)
    kind = rng.choice(("select", "band", "window"))
    if kind == "select":
        return SelectJoin(a=rng_range(0, 10), c=rng_range(0, 10))
    if kind == "band":
        return BandJoin(b=rng_range(-2, 2), a=rng_range(0, 10), c=rng_range(0, 10))
    return WindowJoin(a=rng_range(0, 10), c=rng_range(0, 10), w=rng.randint(0, 5))


PUBLISH_CALL = {"pairs": "publish_columnar", "affected": "publish_affected", "list": "publish"}
DELETE_CALL = {"pairs": "delete_columnar", "affected": "delete_affected", "list": "delete"}


@pytest.mark.parametrize(("lateness", "retention", "seed"), [(0, None, 1), (3, None, 2), (2, 5, 3)])
def test_a_batch_gives_what_the_same_calls_give_on_one_engine(
        lateness: int, retention: int | None, seed: int) -> None:
    rng = random.Random(seed)
    worker = W.ShardWorker(lateness, retention, "auto")
    engine = Engine(lateness=lateness, retention=retention)
    stored: dict[str, list[str]] = {"R": [], "S": []}
    live: list[int] = []
    t = 100
    for step in range(40):
        ops: list[W.Op] = []
        calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        for k in range(rng.randint(1, 6)):
            seq = engine.seq + len(ops) + 1
            x = rng.random()
            if x < 0.15 or not live:
                subs = [_sub(rng) for _ in range(rng.randint(1, 3))]
                snap = rng.random() < 0.3
                ops.append((W.SUBSCRIBE, seq, subs, snap))
                calls.append(("subscribe_many", (subs,), {"snapshot": snap}))
            elif x < 0.2:
                sid = rng.choice(live + [10_000])  # an unknown id is rejected
                ops.append((W.UNSUBSCRIBE, seq, sid))
                calls.append(("unsubscribe", (sid,), {}))
            elif x < 0.3 and (stored["R"] or stored["S"]):
                side = rng.choice([s for s in "RS" if stored[s]])
                eid = rng.choice(stored[side])
                mode = rng.choice(("pairs", "affected", "list"))
                ops.append((W.DELETE, seq, side, eid, mode))
                calls.append((DELETE_CALL[mode], (side, eid), {}))
            else:
                t += rng.randint(-4, 3)  # sometimes late
                side = rng.choice("RS")
                eid = (rng.choice(stored[side]) if stored[side] and rng.random() < 0.1
                       else f"{side}{step}.{k}")  # sometimes a duplicate
                ev = Event(side, eid, float(rng.randint(0, 3)), round(rng.uniform(0, 10), 1), t)
                mode = rng.choice(("pairs", "affected", "list"))
                ops.append((W.PUBLISH, seq, ev, mode))
                calls.append((PUBLISH_CALL[mode], (ev,), {}))
            break  # one operation per step keeps the seqs of rejected operations aligned
        [got] = worker.apply(ops)
        name, args, kw = calls[0]
        try:
            want = getattr(engine, name)(*args, **kw)
        except (HotjoinError, ValueError, KeyError) as e:
            assert isinstance(got, W.OpError), (name, args, got)
            assert type(got.error) is type(e) and str(got.error) == str(e)
        else:
            assert not isinstance(got, W.OpError), (name, args, got.error)
            assert _canon(got) == _canon(want), (name, args)
            if name == "subscribe_many":
                live.extend(want)
            elif name == "unsubscribe":
                live.remove(args[0])
            elif name.startswith("publish"):
                stored[args[0].side].append(args[0].id)
            else:
                stored[args[0]].remove(args[1])
        for s in "RS":  # retention drops tuples on its own
            stored[s] = [i for i in stored[s] if engine.get_event(s, i) is not None]
        assert worker.engine.seq == engine.seq and worker.engine.watermark == engine.watermark
    assert worker.apply([(W.COUNT, 0)]) == [{s: len(t) for s, t in engine.tables.items()}]


def test_operations_of_other_shards_are_skipped_over_keeping_the_seq() -> None:
    w = W.ShardWorker(0, None, "auto")
    out = w.apply([(W.SUBSCRIBE, 1, [EVERYTHING], False),
                   (W.PUBLISH, 5, Event("R", "r1", 1.0, 2.0, 10), "list"),
                   (W.PUBLISH, 9, Event("S", "s1", 1.0, 3.0, 11), "list")])
    assert out[0] == [0] and out[1] == []
    assert [(d.subscription_id, d.sign, d.r_id, d.s_id) for d in out[2]] == [(0, 1, "r1", "s1")]
    assert w.engine.seq == 9
    stored = dict((ev.id, seq) for ev, seq in w.apply([(W.STORED, 0)])[0])
    assert stored == {"r1": 5, "s1": 9}


def test_a_rejected_operation_is_a_value_in_place_and_the_batch_goes_on() -> None:
    w = W.ShardWorker(0, None, "auto")
    out = w.apply([(W.SUBSCRIBE, 1, [EVERYTHING], False),
                   (W.PUBLISH, 2, Event("R", "r1", 1.0, 2.0, 10), "pairs"),
                   (W.PUBLISH, 3, Event("R", "r1", 1.0, 2.0, 10), "pairs"),  # duplicate
                   (W.DELETE, 3, "S", "nope", "list"),                    # unknown
                   (W.UNSUBSCRIBE, 3, 7),                                 # unknown
                   ("bogus", 3),                                          # unknown kind
                   (W.PUBLISH, 3, Event("S", "s1", 1.0, 3.0, 11), "pairs")])
    errors = [type(o.error) if isinstance(o, W.OpError) else None for o in out]
    assert errors == [None, None, DuplicateEventError, UnknownEventError,
                      UnknownSubscriptionError, ValueError, None]
    assert "unknown operation kind 'bogus'" in str(out[5].error)
    assert _canon(out[6]) == Counter({(0, 1, "r1", "s1"): 1})
    assert w.apply([(W.COUNT, 0)]) == [{"R": 1, "S": 1}]
    st = w.status()
    assert (st["applied"], st["seq"], st["subscriptions"]) == (8, 3, 1)
    assert st["cpu_seconds"] >= 0 and st["memory_bytes"] > 0


@pytest.mark.parametrize("error", [
    LateEventError("R", "r1", 3, 7),
    DuplicateEventError("S", "s1"),
    UnknownEventError("R", "x"),
    UnknownSubscriptionError(12),
    BatchError(4, DuplicateEventError("R", "r9")),
    ValueError("plain"),
], ids=lambda e: type(e).__name__)
def test_an_op_error_survives_pickling_with_its_type_message_and_fields(error: Exception) -> None:
    back = pickle.loads(pickle.dumps(W.OpError(error)))
    assert isinstance(back, W.OpError)
    assert type(back.error) is type(error)
    assert str(back.error) == str(error) and back.error.args == error.args
    assert vars(back.error).keys() == vars(error).keys()
    for k, v in vars(error).items():
        got = getattr(back.error, k)
        if isinstance(v, BaseException):  # BatchError.cause
            assert type(got) is type(v) and str(got) == str(v) and vars(got) == vars(v)
        else:
            assert got == v


def test_a_snapshot_rebuilds_the_shard() -> None:
    w = W.ShardWorker(1, None, "auto")
    w.apply([(W.SUBSCRIBE, 1, [EVERYTHING, BandJoin(b=Range(-1, 1), a=Range(0, 5),
                                                     c=Range(0, 5))], False),
             (W.PUBLISH, 2, Event("R", "r1", 1.0, 2.0, 10), "list"),
             (W.PUBLISH, 3, Event("S", "s1", 1.5, 3.0, 11), "list")])
    copy = W.ShardWorker(1, None, "auto", state=w.snapshot())
    seq = w.engine.seq
    assert copy.engine.seq == seq and copy.engine.watermark == w.engine.watermark == 10
    assert copy.apply([(W.COUNT, 0)]) == w.apply([(W.COUNT, 0)]) == [{"R": 1, "S": 1}]
    ops = [(W.PUBLISH, seq + 1, Event("S", "s2", 1.0, 1.0, 12), "pairs"),
           (W.DELETE, seq + 2, "R", "r1", "pairs")]
    want = [_canon(x) for x in w.apply(ops)]
    assert [_canon(x) for x in copy.apply(ops)] == want
    assert want[0] == Counter({(0, 1, "r1", "s2"): 1, (1, 1, "r1", "s2"): 1})
    # the select join pairs equal keys only; the band join also keys 0.5 apart (r1, s1)
    assert want[1] == Counter({(1, -1, "r1", "s1"): 1, (0, -1, "r1", "s2"): 1,
                               (1, -1, "r1", "s2"): 1})
    assert copy.applied == 3  # a restored shard counts only its own operations (a read, 2 changes)


def test_reads_are_not_kept_for_recovery() -> None:
    reads = {W.RESULT, W.GET_EVENT, W.STORED, W.EXPORT, W.EXPORT_SUBS, W.EXPORT_TUPLES, W.COUNT}
    assert not reads & W.MUTATING
    assert {W.PUBLISH, W.DELETE, W.SUBSCRIBE, W.UNSUBSCRIBE, W.UNDO_SUB} <= W.MUTATING
