"""The engine contract (``hotjoin.matcher.contract``): every engine a topic can run on keeps it.

One parametrized fixture builds each implementation: ``matcher.Engine``; ``ShardedEngine`` and
``KeyShardedEngine`` with 2 Ray workers (one local Ray for the module, skipped where Ray cannot
start); and the same two front ends over in-process workers (``ShardWorker`` objects, no Ray:
the same admission, routing, id maps and merges), cheap enough for hypothesis. Checked:

* ``isinstance(e, TopicEngine)``, and every member of the contract on every implementation,
  methods with a signature compatible with the contract's (``inspect.signature``), factories too;
* one scripted sequence (bulk subscribe, batches with rejections, single publishes, duplicates
  and late events, deletes in every form, unsubscribe, snapshot results, ``undo_subscribe``,
  ``publish_many`` with and without matching, stats and stored counts, ``export_state`` /
  ``load_state`` round trip and refusal, the ``restore_*`` calls and their refusals) whose
  transcript is the same on every implementation and, for the operations the brute-force
  ``OracleEngine`` has, the oracle's;
* random programs (hypothesis) of those operations, ``undo_subscribe`` and state round trips
  included, against the oracle;
* statically: ``server/`` reaches its engine only through the contract (no ``hasattr`` /
  ``getattr`` on an engine, no attribute outside the contract).
"""

from __future__ import annotations

import ast
import inspect
import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.batch import BatchOutput, BatchResult, EventStatus, empty_output
from hotjoin.matcher.contract import (
    STATS_KEYS,
    SUBSCRIPTION_COLUMNS,
    EngineFactory,
    TopicEngine,
)
from hotjoin.matcher.engine import Engine
from hotjoin.matcher.errors import (
    BatchError,
    DuplicateEventError,
    HotjoinError,
    LateEventError,
    UnknownSubscriptionError,
)
from hotjoin.matcher.model import (
    Affected,
    BandJoin,
    Delivery,
    Event,
    Matches,
    Range,
    SelectJoin,
    WindowJoin,
)
from hotjoin.matcher.oracle import OracleEngine
from hotjoin.server.scaleout import worker as W
from hotjoin.server.scaleout.engine import ShardedEngine, _Shard
from hotjoin.server.scaleout.factory import ShardedEngineFactory
from hotjoin.server.scaleout.key_engine import KeyShardedEngine

ROOT = Path(__file__).resolve().parents[2]
MEMBERS = {n: v for n, v in vars(TopicEngine).items() if not n.startswith("_")}
LOCAL_KINDS = ["engine", "sharded-local", "key-local", "key-replicated-local"]
RAY_KINDS = ["sharded-ray", "key-ray"]


# ---- the implementations --------------------------------------------------------------------


class _InProcess:
    """Workers as ``ShardWorker`` objects in this process instead of Ray actors."""

    lateness: int
    retention: int | None
    n_workers: int
    _strategy: Any
    _worker_max_advance: int | None
    _shards: list[_Shard]

    def _started(self) -> list[_Shard]:
        if not self._shards:
            self._shards = [_Shard(actor=W.ShardWorker(self.lateness, self.retention,
                                                      self._strategy, None,
                                                      self._worker_max_advance))
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
        for sh in self._started():
            sh.status = sh.actor.status()
        return [sh.status for sh in self._shards]

    def close(self) -> None:
        self._shards = []


class LocalShardedEngine(_InProcess, ShardedEngine):
    """``ShardedEngine`` over in-process workers."""


class LocalKeyShardedEngine(_InProcess, KeyShardedEngine):
    """``KeyShardedEngine`` over in-process workers."""


def build(kind: str, lateness: int = 0, retention: int | None = None,
          max_advance: int | None = None) -> Any:
    """A new, empty engine of ``kind`` (2 workers for the scale-out ones)."""
    kw: dict[str, Any] = {"workers": 2, "max_advance": max_advance}
    if kind == "engine":
        return Engine(lateness=lateness, retention=retention, max_advance=max_advance)
    if kind == "sharded-local":
        return LocalShardedEngine(lateness, retention, **kw)
    if kind == "key-local":
        return LocalKeyShardedEngine(lateness, retention, **kw)
    if kind == "key-replicated-local":
        return LocalKeyShardedEngine(lateness, retention, replicate=True, **kw)
    if kind == "sharded-ray":
        return ShardedEngine(lateness, retention, **kw)
    if kind == "key-ray":
        return KeyShardedEngine(lateness, retention, **kw)
    raise ValueError(kind)


@pytest.fixture(params=LOCAL_KINDS + RAY_KINDS)  # the Ray ones: 6 workers each, ~15 s together
def make(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``new(lateness, retention)``: engines of one implementation, closed at the end."""
    kind = request.param
    if kind in RAY_KINDS:
        request.getfixturevalue("local_ray")
    made: list[Any] = []

    def new(lateness: int = 0, retention: int | None = None) -> Any:
        e = build(kind, lateness, retention)
        made.append(e)
        return e

    new.kind = kind  # type: ignore[attr-defined]
    yield new
    for e in made:
        if isinstance(e, ShardedEngine):
            e.close()


# ---- the oracle in the contract's call forms -------------------------------------------------


def _matches(out: list[Delivery], sign: int) -> Matches:
    return Matches(np.array([d.subscription_id for d in out], dtype=np.int64), sign,
                   np.array([d.r_id for d in out], dtype=object),
                   np.array([d.s_id for d in out], dtype=object))


def _affected(out: list[Delivery], sign: int) -> Affected:
    c = Counter(d.subscription_id for d in out)
    ids = sorted(c)
    return Affected(np.array(ids, dtype=np.int64), np.array([c[i] * sign for i in ids], np.int64))


class OracleTopic(OracleEngine):
    """``OracleEngine`` with the contract's call forms for the operations it has; the batch
    call is the one-at-a-time calls in order (the batch path's definition)."""

    def __init__(self, lateness: int = 0, retention: int | None = None) -> None:
        super().__init__(lateness, retention)

    @property
    def tables(self) -> dict[str, Any]:
        return {side: self._stored[side] for side in ("R", "S")}

    def publish_columnar(self, ev: Event) -> Matches:
        return _matches(self.publish(ev), 1)

    def publish_affected(self, ev: Event) -> Affected:
        return _affected(self.publish(ev), 1)

    def publish_many(self, events: Iterable[Event], match: bool = True) -> list[Delivery]:  # type: ignore[override]
        out = super().publish_many(events)
        return out if match else []

    def delete(self, side: str, id: str, match: bool = True) -> list[Delivery]:  # type: ignore[override]
        out = super().delete(side, id)
        return out if match else []

    def delete_columnar(self, side: str, id: str) -> Matches:
        return _matches(super().delete(side, id), -1)

    def delete_affected(self, side: str, id: str) -> Affected:
        return _affected(super().delete(side, id), -1)

    def get_event(self, side: str, id: str) -> Event | None:
        return self.stored(side).get(id)

    def subscription(self, sid: int) -> Any:
        try:
            return self.subscriptions()[sid]
        except KeyError:
            raise UnknownSubscriptionError(sid) from None

    def result_columnar(self, sid: int) -> Matches:
        return _matches(self.result(sid), 1)

    def undo_subscribe(self, sids: Sequence[int], seq0: int) -> None:
        for sid in list(sids):
            self._subs.pop(int(sid), None)
        if len(sids):
            self._next_sid = int(sids[0])
        self._seq = seq0

    def publish_batch(self, sides: Sequence[Any], ids: Sequence[str], keys: Sequence[float],
                      values: Sequence[float], times: Sequence[int],
                      payloads: Sequence[bytes] | None = None, *,
                      output: str = "affected") -> BatchResult:
        n = len(ids)
        status = np.zeros(n, dtype=np.int8)
        seq = np.zeros(n, dtype=np.int64)
        rows: list[tuple[int, Delivery]] = []
        for i in range(n):
            try:
                ev = Event(sides[i], ids[i], keys[i], values[i], int(times[i]),
                           b"" if payloads is None else payloads[i])
                got = self.publish(ev)
            except DuplicateEventError:
                status[i] = EventStatus.DUPLICATE
            except LateEventError:
                status[i] = EventStatus.LATE
            except ValueError:
                status[i] = EventStatus.INVALID
            else:
                seq[i] = self.seq
                rows += [(i, d) for d in got]
        if output == "none" or not rows:
            return BatchResult(status, seq, {}, empty_output(output))
        ev_ = np.array([i for i, _ in rows], dtype=np.int64)
        if output == "pairs":
            return BatchResult(status, seq, {}, BatchOutput(
                ev_, np.array([d.subscription_id for _, d in rows], np.int64),
                np.ones(len(rows), np.int8), np.ones(len(rows), np.int64),
                np.array([d.r_id for _, d in rows], object),
                np.array([d.s_id for _, d in rows], object)))
        c = Counter((i, d.subscription_id) for i, d in rows)
        keys_ = sorted(c)
        return BatchResult(status, seq, {}, BatchOutput(
            np.array([k[0] for k in keys_], np.int64), np.array([k[1] for k in keys_], np.int64),
            np.ones(len(keys_), np.int8), np.array([c[k] for k in keys_], np.int64)))


# ---- canonical forms of outcomes --------------------------------------------------------------


def canon(x: Any) -> Any:
    """An outcome as plain, comparable values (pairs and rows as sorted lists)."""
    if isinstance(x, Matches):
        return ("matches", sorted(zip(x.subscription_ids.tolist(), [x.sign] * len(x),
                                      list(x.r_ids), list(x.s_ids), strict=True)))
    if isinstance(x, Affected):
        return ("affected", sorted(zip(x.subscription_ids.tolist(), x.counts.tolist(),
                                       strict=True)))
    if isinstance(x, BatchResult):
        o = x.output
        m = len(o.event)
        r = o.r_id.tolist() if o.r_id is not None else [None] * m
        s = o.s_id.tolist() if o.s_id is not None else [None] * m
        rows = sorted(zip(o.event.tolist(), o.subscription.tolist(), o.sign.tolist(),
                          o.count.tolist(), r, s, strict=True))
        return ("batch", x.status.tolist(), x.seq.tolist(), sorted(x.reasons.items()), rows,
                o.event.tolist() == sorted(o.event.tolist()))
    if isinstance(x, list) and x and all(isinstance(d, Delivery) for d in x):
        return ("deliveries", sorted((d.subscription_id, d.sign, d.r_id, d.s_id) for d in x))
    if isinstance(x, tuple):
        return tuple(canon(v) for v in x)
    return x


def outcome(f: Callable[[], Any]) -> Any:
    """``f()``'s canonical result, or its error as (type, message[, index, cause type])."""
    try:
        return ("ok", canon(f()))
    except BatchError as e:
        return ("error", "BatchError", str(e), e.index, type(e.cause).__name__)
    except (HotjoinError, ValueError) as e:
        return ("error", type(e).__name__, str(e))


def coarse(x: Any) -> Any:
    """What the oracle is compared on: errors by type (and batch index), batches without
    reasons (the oracle phrases them its own way)."""
    if x[0] == "error":
        return x[:2] + x[3:]
    v = x[1]
    if isinstance(v, tuple) and v and v[0] == "batch":
        return ("ok", v[:3] + v[4:5])
    return x


def state_of(st: Mapping[str, Any]) -> Any:
    """``export_state`` output as plain values: clock, next id, subscription rows by id,
    tuples by side sorted by id (payload b"" and None alike)."""
    subs = st["subs"]
    rows = list(zip(*(np.asarray(subs[k]).tolist() for k in SUBSCRIPTION_COLUMNS), strict=True))
    tuples = {}
    for side in ("R", "S"):
        ids, keys, values, times, seqs, payloads = st["tuples"][side]
        tuples[side] = sorted(zip(list(ids), np.asarray(keys).tolist(),
                                  np.asarray(values).tolist(), np.asarray(times).tolist(),
                                  np.asarray(seqs).tolist(),
                                  [bytes(p or b"") for p in payloads], strict=True))
    return (st["seq"], st["max_time"], st["next_sid"], rows, tuples)


# ---- the contract's members -------------------------------------------------------------------


def signature_problems(proto: Callable[..., Any], impl: Callable[..., Any]) -> list[str]:
    """Why ``impl`` cannot be called as ``proto`` is: the same positional parameters in the same
    order, each contract parameter accepted the same way (keyword-only ones by keyword), its
    default kept, and no extra parameter without a default."""
    kinds = inspect.Parameter
    ps = [p for p in inspect.signature(proto).parameters.values() if p.name != "self"]
    qs = [q for q in inspect.signature(impl).parameters.values() if q.name != "self"]
    by_name = {q.name: q for q in qs}
    positional = (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
    p_pos = [p.name for p in ps if p.kind in positional]
    q_pos = [q.name for q in qs if q.kind in positional]
    out = []
    if q_pos[:len(p_pos)] != p_pos:
        out.append(f"positional parameters {q_pos} do not start with {p_pos}")
    for p in ps:
        q = by_name.get(p.name)
        if q is None:
            out.append(f"no parameter {p.name!r}")
            continue
        if p.kind == kinds.KEYWORD_ONLY and q.kind not in (kinds.KEYWORD_ONLY,
                                                           kinds.POSITIONAL_OR_KEYWORD):
            out.append(f"{p.name!r} cannot be passed by keyword")
        if p.kind == kinds.POSITIONAL_OR_KEYWORD and q.kind != kinds.POSITIONAL_OR_KEYWORD:
            out.append(f"{p.name!r} is {q.kind.name}, not positional-or-keyword")
        if p.default is not kinds.empty and (q.default is kinds.empty or q.default != p.default):
            out.append(f"{p.name!r} defaults to {q.default!r}, not {p.default!r}")
    names = {p.name for p in ps}
    for q in qs:
        if (q.name not in names and q.default is kinds.empty
                and q.kind not in (kinds.VAR_POSITIONAL, kinds.VAR_KEYWORD)):
            out.append(f"extra parameter {q.name!r} without a default")
    return out


def test_signature_check_catches_incompatible_methods() -> None:
    def proto(self: Any, side: str, event_id: str, match: bool = True) -> None: ...

    def renamed(self: Any, side: str, eid: str, match: bool = True) -> None: ...

    def no_default(self: Any, side: str, event_id: str, match: bool) -> None: ...

    def other_default(self: Any, side: str, event_id: str, match: bool = False) -> None: ...

    def extra(self: Any, side: str, event_id: str, match: bool = True, *, why: str) -> None: ...

    def fine(self: Any, side: str, event_id: str, match: bool = True, why: str = "") -> None: ...

    assert signature_problems(proto, fine) == []
    for bad in (renamed, no_default, other_default, extra):
        assert signature_problems(proto, bad), bad.__name__


def _fresh(cls: type) -> Any:
    """An instance that starts no worker."""
    return cls() if cls is Engine else cls(0, None, workers=2)


@pytest.mark.parametrize("cls", [Engine, ShardedEngine, KeyShardedEngine],
                         ids=["Engine", "ShardedEngine", "KeyShardedEngine"])
def test_every_member_with_a_compatible_signature(cls: type) -> None:
    e = _fresh(cls)
    assert isinstance(e, TopicEngine)
    assert {"seq", "watermark", "lateness", "tables", "publish_batch", "export_state",
            "load_state", "undo_subscribe", "restore_event_columns"} <= set(MEMBERS)
    for name, member in MEMBERS.items():
        assert hasattr(e, name), f"{cls.__name__} has no {name}"
        if isinstance(member, property):
            continue
        problems = signature_problems(member, getattr(cls, name))
        assert not problems, f"{cls.__name__}.{name}: {problems}"
    assert e.seq == 0 and e.watermark is None and e.lateness == 0
    assert {s: len(t) for s, t in e.tables.items()} == {"R": 0, "S": 0}


@pytest.mark.parametrize("factory", [Engine, ShardedEngineFactory(2),
                                     ShardedEngineFactory(2, scheme="key")],
                         ids=["Engine", "ShardedEngineFactory", "ShardedEngineFactory-key"])
def test_factories_keep_the_factory_contract(factory: Any) -> None:
    assert isinstance(factory, EngineFactory)
    call = factory if isinstance(factory, type) else factory.__call__
    assert signature_problems(EngineFactory.__call__, call) == []
    e = factory(lateness=2, retention=None, strategy="auto", max_advance=None)
    assert isinstance(e, TopicEngine) and e.lateness == 2 and e.seq == 0
    with pytest.raises(ValueError, match="lateness"):
        factory(lateness=-1, retention=None, strategy="auto", max_advance=None)


# ---- one scripted sequence, every implementation ----------------------------------------------

def script(e: Any, new: Callable[[], Any] | None) -> list[tuple[str, Any]]:
    """Drive ``e`` through the contract; the transcript of every step. ``new`` builds another
    engine of the same kind and options (None: stop where the oracle's calls end)."""
    out: list[tuple[str, Any]] = []

    def step(name: str, f: Callable[[], Any]) -> Any:
        out.append((name, outcome(f)))
        out.append((f"{name}/clock", (e.seq, e.watermark)))
        return out[-2][1]

    ids = step("subscribe", lambda: e.subscribe_many(
        [SelectJoin(a=Range(0, 5)), BandJoin(b=Range(-1, 1), c=Range(None, 8)),
         WindowJoin(w=3)]))[1]
    step("subscribe a non-subscription", lambda: e.subscribe_many([SelectJoin(), "x"]))
    step("batch with rejections", lambda: e.publish_batch(
        ["R", "S", "S", "R", "S", "X", "S"], ["r1", "s1", "s1", "r0", "s2", "x", "s3"],
        [1.0, 1.0, 2.0, 1.0, 2.5, 1.0, 9.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
        [10, 11, 12, 3, 13, 14, 15], output="pairs"))
    step("batch affected", lambda: e.publish_batch(
        ["R", "S", "R"], ["r2", "s4", "r2"], [2.0, 1.0, 2.0], [2.0, 1.0, 2.0], [16, 17, 17],
        output="affected"))
    step("publish_columnar", lambda: e.publish_columnar(Event("R", "r3", 2.0, 3.0, 18)))
    step("publish_affected", lambda: e.publish_affected(Event("S", "s5", 3.0, 1.0, 19, b"p")))
    step("duplicate", lambda: e.publish_affected(Event("S", "s5", 3.0, 1.0, 20)))
    step("late", lambda: e.publish_columnar(Event("R", "r4", 1.0, 1.0, 2)))
    step("get_event", lambda: (e.get_event("S", "s5"), e.get_event("R", "nope")))
    snap = step("snapshot subscription", lambda: e.subscribe_many([SelectJoin(c=Range(0, None))],
                                                                   snapshot=True))[1]
    step("its result", lambda: e.result_columnar(snap[0]))
    step("result of an unknown id", lambda: e.result_columnar(99))
    step("subscription", lambda: e.subscription(ids[1]))
    step("delete_columnar", lambda: e.delete_columnar("S", "s1"))
    step("delete_affected", lambda: e.delete_affected("R", "r1"))
    step("delete", lambda: e.delete("S", "s2"))
    step("delete an unknown id", lambda: e.delete_columnar("S", "s1"))
    step("delete a bad side", lambda: e.delete_affected("Q", "s1"))
    step("unsubscribe", lambda: e.unsubscribe(ids[0]))
    step("unsubscribe an unknown id", lambda: e.unsubscribe(ids[0]))
    seq0 = e.seq
    undone = step("subscribe to undo", lambda: e.subscribe_many([WindowJoin(w=1), SelectJoin()]))[1]
    step("undo_subscribe", lambda: e.undo_subscribe(np.array(undone, dtype=np.int64), seq0))
    step("ids handed out again", lambda: e.subscribe_many([BandJoin(b=Range(0, 2))]))
    step("publish_many stops at a duplicate", lambda: e.publish_many(
        [Event("R", "r5", 1.0, 2.0, 21), Event("R", "r5", 1.0, 2.0, 22),
         Event("S", "s6", 1.0, 1.0, 23)]))
    step("publish_many without matching", lambda: e.publish_many(
        [Event("S", "s7", 2.0, 2.0, 24), Event("R", "r6", 3.0, 3.0, 40)], match=False))
    step("delete without matching", lambda: e.delete("S", "s7", match=False))
    out.append(("stored", {side: len(t) for side, t in e.tables.items()}))
    out.append(("results", [canon(e.result_columnar(sid)) for sid in (ids[1], ids[2], snap[0])]))
    if new is None:
        return out

    st = e.stats()
    assert set(STATS_KEYS) <= set(st), set(STATS_KEYS) - set(st)
    out.append(("stats", (st["seq"], st["watermark"], st["tuples"], st["subscriptions"],
                          st["strategies"])))
    state = e.export_state()
    out.append(("export_state", state_of(state)))
    f = new()
    step("load_state", lambda: f.load_state(state))
    out.append(("loaded", (state_of(f.export_state()), f.seq, f.watermark,
                           {side: len(t) for side, t in f.tables.items()})))
    for who, x in (("exporter", e), ("loaded", f)):  # both go on alike
        out.append((f"{who} goes on", [
            outcome(lambda x=x: x.publish_batch(["S", "R", "R"], ["s8", "r7", "r8"],
                                                [2.0, 3.0, 1.0], [1.0, 2.0, 3.0], [41, 42, 3],
                                                output="pairs")),
            outcome(lambda x=x: x.subscribe_many([SelectJoin()], snapshot=True)),
            outcome(lambda x=x: x.delete_columnar("R", "r6")),
            (x.seq, x.watermark), [canon(x.result_columnar(s)) for s in (ids[1], ids[2])]]))
    before = state_of(f.export_state())
    step("load_state into a loaded engine", lambda: f.load_state(state))
    out.append(("unchanged by the refusal", state_of(f.export_state()) == before))
    g = new()
    for side in ("R", "S"):
        cols = state["tuples"][side]
        step(f"restore_event_columns {side}", lambda cols=cols, side=side: g.restore_event_columns(
            side, *cols[:5], cols[5] if any(cols[5]) else None))
    step("restore_clock", lambda: g.restore_clock(state["seq"], state["max_time"]))
    side = "R" if state["tuples"]["R"][0] else "S"
    some = state["tuples"][side]
    assert some[0], "the script leaves tuples stored"
    step("restore a stored id", lambda: g.restore_event_columns(
        side, [some[0][0]], some[1][:1], some[2][:1], some[3][:1], some[4][:1]))
    step("restore a repeated id", lambda: g.restore_event_columns(
        "S", ["n", "n"], np.zeros(2), np.zeros(2), np.zeros(2, np.int64), np.zeros(2, np.int64)))
    step("restore columns of different lengths", lambda: g.restore_event_columns(
        "S", ["m"], np.zeros(2), np.zeros(2), np.zeros(2, np.int64), np.zeros(2, np.int64)))
    step("restore an infinite key", lambda: g.restore_event_columns(
        "S", ["m"], np.array([np.inf]), np.zeros(1), np.zeros(1, np.int64),
        np.zeros(1, np.int64)))
    restored = state_of(g.export_state())
    out.append(("restored tuples and clock", (restored[0], restored[1], restored[4])))
    return out


def _script_options(kind: str) -> list[tuple[int, int | None]]:
    return [(1, 25)] if kind in RAY_KINDS else [(2, None), (1, 25), (0, 0)]


def test_scripted_sequence_is_the_same_on_every_implementation(make: Any) -> None:
    for lateness, retention in _script_options(make.kind):
        e = make(lateness, retention)
        got = script(e, lambda lateness=lateness, retention=retention: make(lateness, retention))
        want = script(Engine(lateness=lateness, retention=retention),
                      lambda lateness=lateness, retention=retention: Engine(
                          lateness=lateness, retention=retention))
        for (name, a), (name_b, b) in zip(got, want, strict=True):
            assert name == name_b
            assert a == b, f"{make.kind} lateness={lateness} retention={retention}: {name}"
        assert isinstance(e, TopicEngine)


@pytest.mark.parametrize(("lateness", "retention"), [(2, None), (1, 25), (0, 0)])
def test_scripted_sequence_equals_the_oracle(lateness: int, retention: int | None) -> None:
    got = script(Engine(lateness=lateness, retention=retention), None)
    want = script(OracleTopic(lateness, retention), None)
    for (name, a), (_, b) in zip(got, want, strict=True):
        if name in ("results", "stored") or name.endswith("/clock"):
            assert a == b, name
        else:
            assert coarse(a) == coarse(b), f"lateness={lateness} retention={retention}: {name}"


def test_the_script_checks_what_it_claims() -> None:
    """The transcript really holds refusals and outputs (a script that silently did nothing
    would compare equal everywhere)."""
    t = dict(script(Engine(lateness=2), lambda: Engine(lateness=2)))
    batch = t["batch with rejections"][1]
    assert batch[1] == [0, 0, 2, 1, 0, 3, 0] and batch[4], batch
    assert t["duplicate"][:2] == ("error", "DuplicateEventError")
    assert t["late"][:2] == ("error", "LateEventError")
    assert t["delete an unknown id"][:2] == ("error", "UnknownEventError")
    assert t["unsubscribe an unknown id"][:2] == ("error", "UnknownSubscriptionError")
    assert t["publish_many stops at a duplicate"][3] == 1
    assert t["ids handed out again"] == ("ok", t["subscribe to undo"][1][:1])
    assert t["undo_subscribe/clock"] == t["unsubscribe an unknown id/clock"]
    assert t["load_state into a loaded engine"][:2] == ("error", "ValueError")
    assert t["unchanged by the refusal"] is True
    assert t["restore a stored id"][:2] == ("error", "DuplicateEventError")
    assert t["restore a repeated id"][:2] == ("error", "ValueError")
    assert t["restore columns of different lengths"][:2] == ("error", "ValueError")
    assert t["restore an infinite key"][:2] == ("error", "ValueError")
    restored, exported = t["restored tuples and clock"], t["export_state"]
    assert restored == (exported[0], exported[1], exported[4]) and exported[4]["R"]
    assert t["exporter goes on"] == t["loaded goes on"]


@pytest.mark.parametrize("kind", ["sharded-local", "key-local"])
def test_a_subscribe_one_worker_refuses_changes_nothing(kind: str) -> None:
    """All or nothing across workers: when one worker's index refuses its share of a bulk
    subscribe, the others' shares are rolled back, and the engine goes on exactly as one
    ``Engine`` that never saw the request."""
    e, one = build(kind, 1), Engine(lateness=1)
    for x in (e, one):
        x.subscribe_many([SelectJoin()])
        x.publish_batch(["R", "S"], ["r1", "s1"], [1.0, 1.0], [1.0, 1.0], [5, 6])
    before = (state_of(e.export_state()), e.seq, e.watermark)
    refusing = e._shards[1].actor.engine

    def refuse(subs: Any, snapshot: bool = False) -> list[int]:
        raise NotImplementedError("this index cannot take it")

    refusing.subscribe_many = refuse
    with pytest.raises(NotImplementedError, match="cannot take it"):
        e.subscribe_many([BandJoin(b=Range(-1, 1)), SelectJoin(), WindowJoin(w=2),
                          SelectJoin(a=Range(0, 1))])
    del refusing.subscribe_many
    assert (state_of(e.export_state()), e.seq, e.watermark) == before
    for x in (e, one):  # the same ids, seqs and pairs from here on
        got = [outcome(lambda x=x: x.subscribe_many([BandJoin(b=Range(-1, 1)), WindowJoin(w=2)],
                                                    snapshot=True)),
               outcome(lambda x=x: x.publish_batch(["R", "S", "R"], ["r2", "s2", "r3"],
                                                   [1.0, 1.5, 2.0], [1.0, 1.0, 1.0],
                                                   [7, 8, 9], output="pairs")),
               [canon(x.result_columnar(sid)) for sid in (0, 1, 2)], x.seq]
        if x is e:
            first = got
    assert first == got and first[0] == ("ok", [1, 2])


# ---- random programs against the oracle -------------------------------------------------------


def _random_sub(rng: random.Random) -> Any:
    a = Range(float(rng.randint(0, 2)), float(rng.randint(2, 5))) if rng.random() < 0.6 else Range()
    c = Range(None, float(rng.randint(1, 5))) if rng.random() < 0.4 else Range()
    x = rng.random()
    if x < 0.35:
        lo = float(rng.randint(-2, 1))
        return BandJoin(Range(lo, lo + rng.randint(0, 2)), a, c)
    if x < 0.7:
        return SelectJoin(a, c)
    return WindowJoin(a, c, w=rng.randint(0, 4))


@st.composite
def programs(draw: Any) -> tuple[str, int, int | None, list[tuple[str, int]]]:
    kind = draw(st.sampled_from(LOCAL_KINDS))
    lateness = draw(st.integers(0, 3))
    retention = draw(st.sampled_from([None, 0, 3, 8]))
    ops = draw(st.lists(st.tuples(st.sampled_from(
        ["sub", "batch", "batch", "one", "many", "delete", "unsub", "undo", "roundtrip"]),
        st.integers(0, 2**31)), min_size=1, max_size=20))
    return kind, lateness, retention, ops


@settings(max_examples=60, deadline=None)
@given(programs())
def test_random_programs_equal_the_oracle(prog: tuple[str, int, int | None, list[Any]]) -> None:
    kind, lateness, retention, ops = prog
    e = build(kind, lateness, retention)
    o = OracleTopic(lateness, retention)
    clock = 10
    for op, seed in ops:
        rng = random.Random(seed)
        if op == "roundtrip":  # the state moves to a new engine; everything goes on the same
            f = build(kind, lateness, retention)
            f.load_state(e.export_state())
            e = f
        elif op == "undo":
            seq0 = e.seq
            subs = [_random_sub(rng) for _ in range(rng.randint(1, 3))]
            got, want = e.subscribe_many(subs), o.subscribe_many(subs)
            assert got == want
            e.undo_subscribe(np.array(got, dtype=np.int64), seq0)
            o.undo_subscribe(want, seq0)
        else:
            if op == "sub":
                args: tuple[Any, ...] = ([_random_sub(rng) for _ in range(rng.randint(0, 3))],
                                         rng.random() < 0.3)
                name = "subscribe_many"
            elif op == "unsub":
                name, args = "unsubscribe", (rng.randint(0, 8),)
            elif op == "delete":
                name = rng.choice(["delete_columnar", "delete_affected"])
                args = (rng.choice("RS"), f"e{rng.randint(0, 9)}")
            else:
                n = {"batch": rng.randint(1, 6), "one": 1, "many": rng.randint(1, 4)}[op]
                evs = []
                for _ in range(n):
                    clock += rng.randint(-2, 3)
                    evs.append((rng.choice("RS"), f"e{rng.randint(0, 9)}",
                                float(rng.randint(0, 3)), float(rng.randint(0, 5)), clock))
                if op == "batch":
                    name = "publish_batch"
                    args = tuple(list(c) for c in zip(*evs, strict=True))
                elif op == "one":
                    name = rng.choice(["publish_columnar", "publish_affected"])
                    args = (Event(*evs[0]),)
                else:
                    name, args = "publish_many", ([Event(*v) for v in evs],)
            kw = {"output": rng.choice(["pairs", "affected"])} if name == "publish_batch" else {}
            a = outcome(lambda e=e, name=name, args=args, kw=kw: getattr(e, name)(*args, **kw))
            b = outcome(lambda name=name, args=args, kw=kw: getattr(o, name)(*args, **kw))
            assert coarse(a) == coarse(b), (kind, op, args)
        assert (e.seq, e.watermark) == (o.seq, o.watermark), (kind, op)
    st_ = e.export_state()
    for side in ("R", "S"):
        assert sorted(st_["tuples"][side][0]) == sorted(o.stored(side))
        assert len(e.tables[side]) == len(o.stored(side))
    live = sorted(o.subscriptions())
    assert st_["subs"]["sid"].tolist() == live
    for sid in live:
        assert e.subscription(sid) == o.subscription(sid)
        assert canon(e.result_columnar(sid)) == canon(o.result_columnar(sid))


# ---- the server reaches its engine only through the contract ----------------------------------


def _engine_valued(node: ast.AST) -> bool:
    """``engine``, ``*.engine``, ``*._engine``: the expressions the server names its engine by."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(
        node, ast.Attribute) else ""
    return name in ("engine", "_engine")


def engine_misuses(source: str) -> list[str]:
    """``hasattr``/``getattr`` calls on an engine, and attributes of an engine outside the
    contract, in ``source``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("hasattr", "getattr") and node.args
                and _engine_valued(node.args[0])):
            out.append(f"line {node.lineno}: {node.func.id}({ast.unparse(node.args[0])}, ...)")
        if (isinstance(node, ast.Attribute) and _engine_valued(node.value)
                and node.attr not in MEMBERS):
            out.append(f"line {node.lineno}: {ast.unparse(node)} is not in the contract")
    return out


def test_the_static_check_finds_capability_probes() -> None:
    bad = ("def f(self, engine):\n"
           "    if hasattr(engine, 'undo_subscribe'):\n"
           "        engine.cols.n = 3\n"
           "    return getattr(self.engine, 'tables', None), self._engine.seq\n")
    found = engine_misuses(bad)
    assert len(found) == 3 and "hasattr" in found[0] and "engine.cols" in " ".join(found), found
    assert engine_misuses("def f(engine):\n    return engine.seq, engine.export_state()\n") == []


def test_the_server_uses_its_engine_only_through_the_contract() -> None:
    found = {str(p.relative_to(ROOT)): engine_misuses(p.read_text())
             for p in sorted((ROOT / "server").glob("*.py"))}
    assert not {k: v for k, v in found.items() if v}, found
