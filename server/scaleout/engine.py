"""``ShardedEngine``: the engine contract of one topic, matched by N Ray actors (docs/how-to/scale-out.md).

It implements ``hotjoin.matcher.contract.TopicEngine`` with the results of one ``Engine``.

Scheme: *subscription-partitioned*. Every operation that changes the tuples (publish, delete,
restore) goes to every shard; each subscription lives on one shard, and subscribe / unsubscribe go
to that shard only. Every shard therefore stores the same tuples and sees the same watermark, and
takes each operation at its topic-wide sequence number (``worker.ShardWorker`` skips the numbers of
operations it does not see with ``Engine.advance_clock``). A pair (r, s) for subscription q is
found exactly by q's shard, by the unchanged engine, at the same sequence number as in a single
engine; the facade maps the shard-local subscription ids of the output to the topic's ids and
merges the shards' output of one operation. Results are identical, as a multiset per subscription
with sequence numbers, to a single ``Engine`` (tests/server/scaleout/test_engine.py checks it differentially).

Batches. ``apply_many`` sends a whole batch of operations to each actor in one RPC, all actors at
once, and waits for all; the one-at-a-time calls of ``Engine`` are batches of one.

Recovery. The facade keeps, per shard, the ObjectRef of its last confirmed snapshot (the
engine's state as columns, ``Engine.export_state``, held in Ray's object store, owned by this
process) and the tail of operations sent since.
When an actor dies (``RayActorError``), the facade creates a new actor from the snapshot, replays
the tail, and sends the failed batch again; its result is the one the dead actor would have given,
since every shard is a deterministic function of its operations. Nothing is delivered twice: the
front end only ever sees the result of a completed call. Meanwhile the caller (the topic, under its
lock) blocks; publishers queue behind the lock (docs/how-to/scale-out.md, "Recovery").

No Ray import at module level: ``hotjoin.server`` never imports this module unless ``--workers``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hotjoin.matcher.batch import BatchOutput, BatchResult
from hotjoin.matcher.contract import (
    SUBSCRIPTION_COLUMNS,
    subscription_columns,
    subscriptions_from_columns,
)
from hotjoin.matcher.engine import Engine
from hotjoin.matcher.errors import (
    BatchError,
    DuplicateEventError,
    LateEventError,
    UnknownSubscriptionError,
)
from hotjoin.matcher.model import (
    Affected,
    BandJoin,
    Delivery,
    Event,
    IntervalJoin,
    Matches,
    SelectJoin,
    Subscription,
    WindowJoin,
    empty_matches,
)
from hotjoin.matcher.subscriptions import INTERVAL_COLUMNS
from hotjoin.server.errors import Unavailable
from hotjoin.server.scaleout import worker as W

log = logging.getLogger("hotjoin.scaleout")

SNAPSHOT_EVERY = 20_000  # operations (a bulk one counts its items) in a shard's tail before a snapshot


def ensure_ray(address: str | None = None, num_cpus: int | None = None) -> Any:
    """Connect to Ray once per process: ``address`` (e.g. ``"auto"``) or a new local instance."""
    import ray

    if not ray.is_initialized():
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "configure_logging": False}
        if address:
            ray.init(address=address, **kw)
        else:
            ray.init(num_cpus=num_cpus or os.cpu_count() or 1, **kw)
    return ray


class StoredCount:
    """One side's number of stored tuples, as ``TopicEngine.tables`` promises it (``len`` only):
    a scale-out engine's tuples live in its workers, so it answers with counts, not tables."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = int(n)

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"StoredCount({self.n})"


def empty_state(seq: int = 0, max_time: int | None = None, next_sid: int = 0) -> dict[str, Any]:
    """The ``export_state`` of an engine without subscriptions or tuples."""
    def no_tuples() -> tuple[Any, ...]:
        return ([], np.zeros(0, np.float64), np.zeros(0, np.float64), np.zeros(0, np.int64),
                np.zeros(0, np.int64), [])

    return {"seq": int(seq), "max_time": max_time, "next_sid": int(next_sid),
            "subs": subscription_columns([], [], [], []),
            "tuples": {"R": no_tuples(), "S": no_tuples()}}


def checked_subscriptions(state: Mapping[str, Any]) -> tuple[dict[str, np.ndarray],
                                                             list[Subscription], int]:
    """The subscription columns of a ``load_state`` input, their ``Subscription`` objects and
    the next subscription id, checked before any worker moves: ``ValueError`` for a missing
    column, columns of different lengths, ids not increasing or negative, a bad kind or range."""
    try:
        cols = {k: np.asarray(state["subs"][k]) for k in SUBSCRIPTION_COLUMNS}
        cols.update({k: np.asarray(state["subs"][k]) for k in INTERVAL_COLUMNS
                     if k in state["subs"]})  # absent in states without interval joins
    except KeyError as x:
        raise ValueError(f"load_state: the state has no subscription column {x.args[0]!r}") from None
    sids = cols["sid"].astype(np.int64)
    n = sids.shape[0]
    if any(c.shape != (n,) for c in cols.values()):
        raise ValueError("load_state: subscription columns of different lengths")
    if n and (int(sids[0]) < 0 or bool((np.diff(sids) <= 0).any())):
        raise ValueError("restore_subscription_columns: ids must increase and be new")
    cols["sid"] = sids
    subs = subscriptions_from_columns(cols)
    next_sid = max(int(state["next_sid"]), int(sids[-1]) + 1 if n else 0)
    return cols, subs, next_sid


@dataclass
class _Shard:
    """The facade's view of one worker: its actor, snapshot + tail, and id maps."""

    actor: Any = None
    snapshot: Any = None          # ObjectRef of the last confirmed snapshot (None: empty engine)
    pending: Any = None           # (ref, tail length it covers): confirmed by the next good call
    tail: list[W.Op] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)  # per tail op: subscriptions / tuples it holds
    weight: int = 0
    l2g: np.ndarray = field(default_factory=lambda: np.zeros(1024, dtype=np.int64))
    n_local: int = 0              # next shard-local subscription id
    live: int = 0                 # live subscriptions on this shard
    restarts: int = 0
    last_recovery_s: float = 0.0
    healthy: bool = True
    status: dict[str, Any] = field(default_factory=dict)  # last status() reply


class ShardedEngine:
    """A topic's engine whose matching runs in ``workers`` Ray actors (subscription shards)."""

    scheme = "subscription-partitioned"

    def __init__(self, lateness: int = 0, retention: int | None = None,
                 strategy: str | Mapping[str, str] = "auto", *, workers: int = 2,
                 ray_address: str | None = None, worker_cpus: float = 0,
                 snapshot_every: int = SNAPSHOT_EVERY, max_advance: int | None = None) -> None:
        # validates lateness, retention, strategy and max_advance exactly as the engine does,
        # starting no actor
        probe = Engine(lateness=lateness, retention=retention, strategy=strategy,
                       max_advance=max_advance)
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.lateness = probe.lateness
        self.retention = probe.retention
        self.max_advance = probe.max_advance
        # every worker stores every tuple and admits every event with the engine's own checks,
        # so each applies the bound (on the same clock); the key-partitioned front end admits
        # events itself and gives its workers None
        self._worker_max_advance = self.max_advance
        self.strategy_names = dict(probe.strategy_names)
        self._strategy = strategy if isinstance(strategy, str) else dict(strategy)
        self.n_workers = int(workers)
        self.ray_address = ray_address
        self.worker_cpus = worker_cpus
        self.snapshot_every = snapshot_every
        self._seq = 0
        self._max_time: int | None = None
        self.subs: dict[int, Subscription] = {}
        self._g2s = np.zeros(1024, dtype=np.int32)  # global id -> shard
        self._g2l = np.zeros(1024, dtype=np.int64)  # global id -> shard-local id
        self._next_gid = 0
        self._shards: list[_Shard] = []
        self._lock = threading.RLock()  # the topic serialises calls; stats() may come from a scrape
        self.recoveries = 0
        self._broken = ""

    # -- Ray plumbing -----------------------------------------------------------------------
    def _started(self) -> list[_Shard]:
        if not self._shards:
            ray = ensure_ray(self.ray_address)
            self._remote = ray.remote(W.ShardWorker)
            self._shards = [_Shard() for _ in range(self.n_workers)]
            for sh in self._shards:
                sh.actor = self._new_actor(None)
        return self._shards

    def _new_actor(self, state: Any) -> Any:
        return self._remote.options(num_cpus=self.worker_cpus, scheduling_strategy="SPREAD",
                                    max_restarts=0).remote(
            self.lateness, self.retention, self._strategy, state, self._worker_max_advance)

    def apply_many(self, batches: Mapping[int, Sequence[W.Op]]) -> dict[int, list[Any]]:
        """Send each shard its batch in one RPC (all shards at once); their results, in order.

        A shard whose actor died is rebuilt from its snapshot and tail, and the batch re-sent.
        """
        import ray
        from ray.exceptions import RayActorError

        with self._lock:
            if self._broken:
                raise Unavailable(f"{self._broken}; the topic is unavailable until the server restarts")
            shards = self._started()
            refs: dict[int, Any] = {}
            for i, ops in batches.items():
                sh = shards[i]
                refs[i] = sh.actor.apply.remote(list(ops))
            out: dict[int, list[Any]] = {}
            for i, ref in refs.items():
                sh = shards[i]
                try:
                    out[i] = ray.get(ref)
                except RayActorError:
                    out[i] = self._recover(i, batches[i])
                self._after_call(i, batches[i])
            return out

    def apply_chunks(self, chunks: Sequence[Mapping[int, Sequence[W.Op]]],
                     consume: Callable[[int, dict[int, list[Any]]], None]) -> None:
        """Pipeline: send every chunk's batches at once (each actor runs its calls in order), then
        hand chunk c's results to ``consume(c, results)`` as they come, so the caller works on
        chunk c while the workers compute chunk c + 1.

        A shard found dead is rebuilt from its snapshot and tail (which holds the chunks already
        consumed) and the failed chunk re-sent; its later chunks, sent to the dead actor, are sent
        again to the new one. Snapshots start only after the last chunk: a snapshot queued behind
        calls already sent would cover more than the tail says.
        """
        import ray
        from ray.exceptions import RayActorError

        with self._lock:
            if self._broken:
                raise Unavailable(f"{self._broken}; the topic is unavailable until the server restarts")
            shards = self._started()
            sent = [{i: (shards[i].actor, shards[i].actor.apply.remote(list(ops)))
                     for i, ops in ch.items()} for ch in chunks]
            last = len(chunks) - 1
            for c, ch in enumerate(chunks):
                out: dict[int, list[Any]] = {}
                for i, ops in ch.items():
                    actor, ref = sent[c][i]
                    try:
                        out[i] = ray.get(ref)
                    except RayActorError:
                        if shards[i].actor is actor:  # this chunk met the crash: rebuild
                            out[i] = self._recover(i, ops)
                        else:  # rebuilt for an earlier chunk: this call went to the dead actor
                            try:
                                out[i] = ray.get(shards[i].actor.apply.remote(list(ops)))
                            except RayActorError:
                                out[i] = self._recover(i, ops)
                    self._after_call(i, ops, snapshot=c == last)
                consume(c, out)

    def _after_call(self, i: int, ops: Sequence[W.Op], snapshot: bool = True) -> None:
        """Record a completed batch in the tail; confirm / start snapshots."""
        sh = self._shards[i]
        if sh.pending is not None:  # the actor answered a call made after the snapshot
            ref, n = sh.pending
            sh.snapshot, sh.pending = ref, None
            del sh.tail[:n]
            sh.weight -= sum(sh.weights[:n])
            del sh.weights[:n]
        for op in ops:
            if op[0] in W.MUTATING:
                sh.tail.append(op)
                wt = _weight(op)
                sh.weights.append(wt)
                sh.weight += wt
        # a snapshot copies the shard's whole state (mostly its subscriptions): take one once
        # the tail holds as many items, so its cost stays O(1) per operation
        if snapshot and sh.pending is None and sh.weight >= max(self.snapshot_every, sh.live):
            sh.pending = (sh.actor.snapshot.remote(), len(sh.tail))

    def _recover(self, i: int, batch: Sequence[W.Op]) -> list[Any]:
        """Re-create shard ``i`` from its snapshot plus tail, then apply ``batch``; its results."""
        import ray
        from ray.exceptions import RayActorError

        sh = self._shards[i]
        t0 = time.perf_counter()
        sh.healthy = False
        for attempt in range(5):
            sh.pending = None  # a snapshot the dead actor was taking is not trusted
            try:
                sh.actor = self._new_actor(sh.snapshot)
                if sh.tail:  # state only: the tail's output was delivered before the crash
                    ray.get(sh.actor.apply.remote([_quiet(op) for op in sh.tail]))
                res = ray.get(sh.actor.apply.remote(list(batch)))
            except RayActorError as e:
                log.warning("scale-out shard %d: restart attempt %d failed: %s", i, attempt + 1,
                            str(e).splitlines()[0])
                time.sleep(0.2 * (attempt + 1))
                continue
            sh.restarts += 1
            self.recoveries += 1
            sh.healthy = True
            sh.last_recovery_s = time.perf_counter() - t0
            log.warning("scale-out shard %d restarted from its snapshot + %d operations in %.2fs",
                        i, len(sh.tail), sh.last_recovery_s)
            return res
        self._broken = f"scale-out worker {i} could not be restarted"
        raise Unavailable(f"{self._broken}; the topic is unavailable until the server restarts")

    def worker_pids(self) -> list[int]:
        """Process ids of the actors (tests kill them to exercise recovery)."""
        import ray

        return [ray.get(sh.actor.pid.remote()) for sh in self._started()]

    def kill_worker(self, i: int) -> None:
        """Kill shard ``i``'s actor (as a crash would); the next call restarts it."""
        import ray
        from ray.exceptions import GetTimeoutError, RayActorError

        with self._lock:  # between two calls, as a crash seen by the next call
            actor = self._started()[i].actor
            ray.kill(actor, no_restart=True)
            # ray.kill is asynchronous: a call sent at once may still be served by the dying
            # actor, so wait until the actor is seen dead (the next call then always recovers)
            deadline = time.monotonic() + 30.0
            while time.monotonic() < deadline:
                try:
                    ray.get(actor.pid.remote(), timeout=1.0)
                except RayActorError:
                    return
                except GetTimeoutError:
                    pass
                time.sleep(0.02)

    def close(self) -> None:
        """Stop the actors (topic deleted or server stopping)."""
        import ray

        with self._lock:
            for sh in self._shards:
                with contextlib.suppress(Exception):  # already dead
                    ray.kill(sh.actor, no_restart=True)
            self._shards = []

    # -- helpers ----------------------------------------------------------------------------
    def _all(self, op: W.Op) -> Any:
        """Apply ``op`` on every shard; raise its error or return shard 0's result plus all."""
        res = self.apply_many({i: [op] for i in range(self.n_workers)})
        first = res[0][0]
        if isinstance(first, W.OpError):
            raise first.error
        return [res[i][0] for i in range(self.n_workers)]

    def _merge(self, parts: list[Any], sign: int) -> Matches | Affected | list[Delivery]:
        """One operation's output of every shard, with topic-wide subscription ids."""
        if isinstance(parts[0], list):
            return [Delivery(int(self._shards[i].l2g[d.subscription_id]), d.sign, d.r_id, d.s_id)
                    for i, p in enumerate(parts) for d in p]
        if isinstance(parts[0], Affected):
            q = np.concatenate([self._shards[i].l2g[p.subscription_ids] for i, p in enumerate(parts)])
            c = np.concatenate([p.counts for p in parts])
            order = np.argsort(q, kind="stable")
            return Affected(q[order], c[order])
        nonempty = [(i, p) for i, p in enumerate(parts) if len(p)]
        if not nonempty:
            return empty_matches(sign)
        if len(nonempty) == 1:
            i, p = nonempty[0]
            return Matches(self._shards[i].l2g[p.subscription_ids], p.sign, p.r_ids, p.s_ids)
        q = np.concatenate([self._shards[i].l2g[p.subscription_ids] for i, p in nonempty])
        r = np.concatenate([p.r_ids for _, p in nonempty])
        s = np.concatenate([p.s_ids for _, p in nonempty])
        return Matches(q, nonempty[0][1].sign, r, s)

    def _where(self, gid: int) -> tuple[int, int]:
        if not isinstance(gid, (int, np.integer)) or gid not in self.subs:
            raise UnknownSubscriptionError(gid)
        return int(self._g2s[gid]), int(self._g2l[gid])

    def _place(self, shard: int, locals_: Sequence[int], gids: Sequence[int]) -> None:
        sh = self._shards[shard]
        n = max(max(locals_) + 1, sh.n_local)
        while n > sh.l2g.shape[0]:
            sh.l2g = np.concatenate([sh.l2g, np.zeros_like(sh.l2g)])
        g = np.asarray(gids, dtype=np.int64)
        sh.l2g[np.asarray(locals_, dtype=np.int64)] = g
        sh.n_local = n
        sh.live += len(gids)
        top = int(g.max()) + 1
        while top > self._g2s.shape[0]:
            self._g2s = np.concatenate([self._g2s, np.zeros_like(self._g2s)])
            self._g2l = np.concatenate([self._g2l, np.zeros_like(self._g2l)])
        self._g2s[g] = shard
        self._g2l[g] = np.asarray(locals_, dtype=np.int64)

    # -- clock ------------------------------------------------------------------------------
    @property
    def seq(self) -> int:
        return self._seq

    @property
    def watermark(self) -> int | None:
        return None if self._max_time is None else self._max_time - self.lateness

    # -- publish / delete -------------------------------------------------------------------
    def publish_ops(self, events: Sequence[Event], mode: str = "pairs") -> list[Any]:
        """Publish a batch in order, one RPC per shard; per event its merged output or ``OpError``.

        The batch entry point: each event's outcome is exactly that of ``publish_columnar``
        (mode "pairs"), ``publish_affected`` ("affected") or ``publish`` ("list") called in order.
        Only the first operation carries its seq; the others take the next one if accepted, as in
        the engine (every shard sees every publish, so they all agree on which are rejected).
        """
        if not events:
            return []
        ops: list[W.Op] = [(W.PUBLISH, self._seq + 1 if k == 0 else None, ev, mode)
                           for k, ev in enumerate(events)]
        res = self.apply_many({i: ops for i in range(self.n_workers)})
        out: list[Any] = []
        for k, ev in enumerate(events):
            first = res[0][k]
            if isinstance(first, W.OpError):
                out.append(first)
                continue
            self._seq += 1
            if self._max_time is None or ev.time > self._max_time:
                self._max_time = ev.time
            out.append(self._merge([res[i][k] for i in range(self.n_workers)], 1))
        return out

    def publish_batch(self, sides: Any, ids: Any, keys: Any, values: Any, times: Any,
                      payloads: Any = None, *, ends: Any = None,
                      output: str = "affected") -> BatchResult:
        """``Engine.publish_batch`` over the shards: the batch crosses to every worker in one RPC
        and each applies it with the engine's compiled batch path. Every shard stores every
        tuple, so all agree on statuses and sequence numbers; the output rows of the shards
        (each its own subscriptions) are merged in event order with topic-wide ids. ``ends``:
        interval ends as ``Engine.publish_batch``'s."""
        res = self._all((W.PUBLISH_BATCH, self._seq + 1, sides, ids, keys, values, times,
                         payloads, output, ends))
        first: BatchResult = res[0]
        ok = first.status == 0
        n_ok = int(ok.sum())
        if n_ok:
            self._seq += n_ok
            t = int(np.asarray(times, dtype=np.int64)[ok].max())
            if self._max_time is None or t > self._max_time:
                self._max_time = t
        parts = [(r.output.event, self._shards[i].l2g[r.output.subscription], r.output)
                 for i, r in enumerate(res) if len(r.output.event)]
        if not parts:
            return first
        return BatchResult(first.status, first.seq, first.reasons, merge_rows(parts))

    def _publish_one(self, ev: Event, mode: str) -> Any:
        got = self.publish_ops([ev], mode)[0]
        if isinstance(got, W.OpError):
            raise got.error
        return got

    def publish(self, ev: Event) -> list[Delivery]:
        return self._publish_one(ev, "list")

    def publish_columnar(self, ev: Event) -> Matches:
        return self._publish_one(ev, "pairs")

    def publish_affected(self, ev: Event) -> Affected:
        return self._publish_one(ev, "affected")

    def publish_many(self, events: Iterable[Event], match: bool = True) -> list[Delivery]:
        """As ``Engine.publish_many``; without matching it is one operation per shard."""
        events = list(events)
        if match:
            out: list[Delivery] = []
            for i, ev in enumerate(events):
                try:
                    out += self.publish(ev)
                except (ValueError, LateEventError, DuplicateEventError) as e:  # as Engine does
                    raise BatchError(i, e) from e
            return out
        if not events:
            return []
        res = self.apply_many({i: [(W.PUBLISH_MANY, self._seq + 1, events)]
                               for i in range(self.n_workers)})
        first = res[0][0]
        n = len(events)
        if isinstance(first, W.OpError) and isinstance(first.error, BatchError):
            n = first.error.index
        for ev in events[:n]:
            if self._max_time is None or ev.time > self._max_time:
                self._max_time = ev.time
        self._seq += n
        if isinstance(first, W.OpError):
            raise first.error
        return []

    def _delete(self, side: str, event_id: str, mode: str) -> Any:
        res = self.apply_many({i: [(W.DELETE, self._seq + 1, side, event_id, mode)]
                               for i in range(self.n_workers)})
        first = res[0][0]
        if isinstance(first, W.OpError):
            raise first.error
        self._seq += 1
        if mode == "none":
            return []
        return self._merge([res[i][0] for i in range(self.n_workers)], -1)

    def delete(self, side: str, event_id: str, match: bool = True) -> list[Delivery]:
        return self._delete(side, event_id, "list" if match else "none")

    def delete_columnar(self, side: str, event_id: str) -> Matches:
        return self._delete(side, event_id, "pairs")

    def delete_affected(self, side: str, event_id: str) -> Affected:
        return self._delete(side, event_id, "affected")

    def get_event(self, side: str, event_id: str) -> Event | None:
        res = self.apply_many({0: [(W.GET_EVENT, 0, side, event_id)]})[0][0]
        if isinstance(res, W.OpError):
            raise res.error
        return res

    # -- subscriptions ----------------------------------------------------------------------
    def subscribe(self, sub: Subscription, snapshot: bool = False) -> int:
        return self.subscribe_many([sub], snapshot=snapshot)[0]

    def subscribe_many(self, subs: Iterable[Subscription], snapshot: bool = False) -> list[int]:
        """Register in order (all or nothing); the batch is cut into contiguous runs, one per
        shard, the least loaded shards first, so each shard's run has consecutive seqs."""
        subs = list(subs)
        for s in subs:  # the engine's own validation (Engine._index_for), before any shard moves
            if not isinstance(s, (BandJoin, SelectJoin, WindowJoin, IntervalJoin)):
                raise ValueError(f"not a subscription: {type(s).__name__}")
        if not subs:
            return []
        shards = self._started()
        n = len(subs)
        order = sorted(range(self.n_workers), key=lambda i: (shards[i].live, i))
        k = len(order) if n >= len(order) else n
        bounds = [n * j // k for j in range(k + 1)]
        batches: dict[int, list[W.Op]] = {}
        runs: dict[int, tuple[int, int]] = {}
        for j in range(k):
            lo, hi = bounds[j], bounds[j + 1]
            if lo < hi:
                batches[order[j]] = [(W.SUBSCRIBE, self._seq + 1 + lo, subs[lo:hi], bool(snapshot))]
                runs[order[j]] = (lo, hi)
        res = self.apply_many(batches)
        failed = sorted((runs[i][0], i) for i in runs if isinstance(res[i][0], W.OpError))
        if failed:  # an index refused one: all or nothing, as the engine's own subscribe_many
            # (a refusing shard undid its run but kept the seq it was aligned to; both go back)
            undo = self.apply_many({i: [(W.UNDO_SUB, 0, [] if isinstance(res[i][0], W.OpError)
                                         else list(res[i][0]), self._seq)] for i in runs})
            for i in runs:
                if isinstance(undo[i][0], W.OpError):
                    self._broken = (f"scale-out shard {i} could not roll back a refused "
                                    f"subscription batch ({undo[i][0].error})")
                    log.error("%s", self._broken)
            raise res[failed[0][1]][0].error
        g0 = self._next_gid
        for i, (lo, hi) in runs.items():
            self._place(i, res[i][0], range(g0 + lo, g0 + hi))
        gids = list(range(g0, g0 + n))
        for g, s in zip(gids, subs, strict=True):
            self.subs[g] = s
        self._next_gid += n
        self._seq += n
        return gids

    def undo_subscribe(self, sids: np.ndarray, seq0: int) -> None:
        """``Engine.undo_subscribe`` over the shards: each shard rolls back its share of ``sids``
        (its newest local ids) and every shard's sequence goes back to ``seq0``; the facade
        forgets the ids and hands them out again."""
        sids = np.asarray(sids, dtype=np.int64).reshape(-1)
        gids = [g for g in sids.tolist() if g in self.subs]
        if self._shards:
            mine: dict[int, list[int]] = {i: [] for i in range(self.n_workers)}
            for g in gids:
                mine[int(self._g2s[g])].append(int(self._g2l[g]))
            res = self.apply_many({i: [(W.UNDO_SUB, 0, sorted(ls), int(seq0))]
                                   for i, ls in mine.items()})
            for i, ls in mine.items():
                self._checked(res[i][0])
                if ls:
                    self._shards[i].n_local = min(ls)
                    self._shards[i].live -= len(ls)
        for g in gids:
            del self.subs[g]
        if sids.shape[0]:
            self._next_gid = int(sids[0])
        self._seq = int(seq0)

    def unsubscribe(self, sid: int) -> None:
        shard, local = self._where(sid)
        res = self.apply_many({shard: [(W.UNSUBSCRIBE, self._seq + 1, local)]})[shard][0]
        if isinstance(res, W.OpError):
            raise res.error
        self._seq += 1
        del self.subs[sid]
        self._shards[shard].live -= 1

    def subscription(self, sid: int) -> Subscription:
        try:
            return self.subs[sid]
        except (KeyError, TypeError):
            raise UnknownSubscriptionError(sid) from None

    def subscriptions(self) -> Iterator[tuple[int, Subscription]]:
        return iter(list(self.subs.items()))

    def result_columnar(self, sid: int) -> Matches:
        shard, local = self._where(sid)
        res = self.apply_many({shard: [(W.RESULT, 0, local)]})[shard][0]
        if isinstance(res, W.OpError):
            raise res.error
        return Matches(np.full(len(res), sid, dtype=np.int64), res.sign, res.r_ids, res.s_ids)

    def result(self, sid: int) -> list[Delivery]:
        return self.result_columnar(sid).deliveries()

    # -- restore (server restart) -------------------------------------------------------------
    def restore_clock(self, seq: int, max_time: int | None) -> None:
        self._all((W.RESTORE_CLOCK, int(seq), max_time))
        self._seq = int(seq)
        self._max_time = None if max_time is None else int(max_time)

    def restore_event_columns(self, side: str, ids: list[str], keys: np.ndarray, values: np.ndarray,
                              times: np.ndarray, seqs: np.ndarray,
                              payloads: list[bytes] | None = None, *,
                              ends: np.ndarray | None = None) -> None:
        self._all((W.RESTORE_COLUMNS, 0, side, list(ids), np.asarray(keys), np.asarray(values),
                   np.asarray(times), np.asarray(seqs), payloads,
                   None if ends is None else np.asarray(ends)))

    def restore_events(self, events: list[Event], seqs: list[int]) -> None:
        self._all((W.RESTORE_EVENTS, 0, list(events), list(seqs)))

    def restore_subscription(self, sid: int, sub: Subscription, reg_seq: int,
                             snapshot: bool = False) -> None:
        """``Engine.restore_subscription``: topic subscription ``sid`` on the least loaded shard."""
        if sid < self._next_gid:
            raise ValueError(f"subscription id {sid} is not above the last id {self._next_gid - 1}")
        shards = self._started()
        i = min(range(self.n_workers), key=lambda j: (shards[j].live, j))
        local = shards[i].n_local
        res = self.apply_many({i: [(W.RESTORE_SUB, 0, local, sub, int(reg_seq), bool(snapshot))]})[i][0]
        if isinstance(res, W.OpError):
            raise res.error
        self._place(i, [local], [sid])
        self.subs[sid] = sub
        self._next_gid = sid + 1

    # -- state as columns (server checkpoints; TopicEngine.export_state / load_state) ----------
    def export_state(self) -> dict[str, Any]:
        """``Engine.export_state`` of the topic: the tuples of shard 0 (every shard stores
        all), the subscriptions of every shard under their topic ids, the facade's clock and
        next id. One round trip to every shard; an engine that never started its workers
        answers from the facade alone."""
        if not self._shards:
            return empty_state(self._seq, self._max_time, self._next_gid)
        res = self.apply_many({i: [(W.EXPORT if i == 0 else W.EXPORT_SUBS, 0)]
                               for i in range(self.n_workers)})
        first = self._checked(res[0][0])
        parts = [first["subs"], *(self._checked(res[i][0]) for i in range(1, self.n_workers))]
        names = [*SUBSCRIPTION_COLUMNS, *(k for k in INTERVAL_COLUMNS if k in parts[0])]
        subs = {k: np.concatenate([p[k] for p in parts]) for k in names}
        subs["sid"] = np.concatenate([self._shards[i].l2g[p["sid"]] for i, p in enumerate(parts)])
        order = np.argsort(subs["sid"], kind="stable")
        return {"seq": self._seq, "max_time": self._max_time, "next_sid": self._next_gid,
                "subs": {k: v[order] for k, v in subs.items()},
                "tuples": {side: first["tuples"][side] for side in ("R", "S")},
                "ends": first.get("ends") or {}}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """``Engine.load_state``: the subscriptions are dealt to the shards in contiguous runs
        of ids (balanced), every shard gets every tuple; one round trip. ``ValueError``,
        changing nothing, when this engine is not empty or the subscription columns are
        malformed; when a shard refuses its part (malformed tuples) every worker is dropped,
        so the engine is empty again, and the shard's ``ValueError`` is raised."""
        self._check_empty()
        cols, subs, next_sid = checked_subscriptions(state)
        seq, mt = int(state["seq"]), state["max_time"]
        n, k = len(subs), self.n_workers
        bounds = [n * j // k for j in range(k + 1)]
        self._started()
        batches: dict[int, list[W.Op]] = {}
        for i in range(k):
            lo, hi = bounds[i], bounds[i + 1]
            part = {c: v[lo:hi] for c, v in cols.items()}
            part["sid"] = np.arange(hi - lo, dtype=np.int64)  # shard-local ids
            batches[i] = [(W.LOAD_STATE, 0, {"seq": seq, "max_time": mt, "next_sid": hi - lo,
                                             "subs": part, "tuples": state["tuples"],
                                             "ends": state.get("ends") or {}})]
        self._load(batches)
        sids = cols["sid"].tolist()
        for i in range(k):
            lo, hi = bounds[i], bounds[i + 1]
            if hi > lo:
                self._place(i, range(hi - lo), sids[lo:hi])
        self.subs = dict(zip(sids, subs, strict=True))
        self._next_gid = next_sid
        self._seq = seq
        self._max_time = None if mt is None else int(mt)

    def _check_empty(self) -> None:
        """``ValueError`` unless no subscription id was handed out and no tuple is stored."""
        if self._next_gid or self.subs or (self._shards and sum(self._stored_counts().values())):
            raise ValueError("load_state needs an empty engine")

    def _load(self, batches: Mapping[int, Sequence[W.Op]]) -> None:
        """Send every worker its ``LOAD_STATE``; if one refuses, drop them all (the engine is
        empty again) and raise its error."""
        res = self.apply_many(batches)
        bad = [res[i][0] for i in sorted(res) if isinstance(res[i][0], W.OpError)]
        if bad:
            self.close()
            raise bad[0].error

    @property
    def tables(self) -> dict[str, StoredCount]:
        """The stored tuples per side as counts (``TopicEngine.tables``: only ``len`` is
        promised); one round trip, none before the workers start."""
        counts = self._stored_counts() if self._shards else {}
        return {side: StoredCount(counts.get(side, 0)) for side in ("R", "S")}

    def _stored_counts(self) -> dict[str, int]:
        """Stored tuples per side: shard 0's (every shard stores every tuple)."""
        return dict(self._checked(self.apply_many({0: [(W.COUNT, 0)]})[0][0]))

    def _checked(self, res: Any) -> Any:
        """A worker's result, or its engine error raised."""
        if isinstance(res, W.OpError):
            raise res.error
        return res

    def stored_tuples(self) -> list[tuple[Event, int]]:
        """Every stored tuple with its seq (from shard 0: every shard stores all)."""
        res = self.apply_many({0: [(W.STORED, 0)]})[0][0]
        if isinstance(res, W.OpError):
            raise res.error
        return res

    # -- introspection ----------------------------------------------------------------------
    def refresh_status(self) -> list[dict[str, Any]]:
        """Ask every worker for its status (one RPC each); a dead one is restarted (snapshot +
        tail) and reported unhealthy only if that fails or it does not answer within 10 s."""
        import ray
        from ray.exceptions import RayActorError

        with self._lock:
            shards = self._started()
            refs = [sh.actor.status.remote() for sh in shards]
            for i, (sh, ref) in enumerate(zip(shards, refs, strict=True)):
                try:
                    sh.status = ray.get(ref, timeout=10)
                    sh.healthy = True
                except RayActorError:  # found dead while idle: restart it now, not at the next call
                    try:
                        self._recover(i, [])
                        sh.status = ray.get(sh.actor.status.remote(), timeout=10)
                    except (Unavailable, RayActorError, ray.exceptions.GetTimeoutError):
                        sh.healthy = False
                except ray.exceptions.GetTimeoutError:
                    sh.healthy = False
            return [sh.status for sh in shards]

    def workers_info(self) -> list[dict[str, Any]]:
        """Per worker: health, last sequence applied, lag behind the topic, memory, restarts."""
        out = []
        for i, sh in enumerate(self._shards):
            st = sh.status
            seq = int(st.get("seq", 0))
            out.append({"worker": i, "healthy": bool(sh.healthy), "pid": st.get("pid", 0),
                        "seq": seq, "lag": max(self._seq - seq, 0),
                        "memory_bytes": int(st.get("memory_bytes", 0)),
                        "subscriptions": sh.live, "restarts": sh.restarts,
                        "tail_ops": len(sh.tail), "last_recovery_seconds": sh.last_recovery_s})
        return out

    def stats(self) -> dict[str, Any]:
        """Engine stats merged over the shards, plus ``workers`` (health, lag, memory)."""
        sts = [s.get("stats", {}) for s in self.refresh_status()]
        first = sts[0] if sts else {}
        tuples, subs = self._merge_counts(sts)
        tau: dict[str, int] = {}
        hot: dict[str, int] = {}
        dec: dict[str, int] = {}
        for st in sts:
            for k, v in st.get("tau", {}).items():
                tau[k] = max(tau.get(k, 0), int(v))
            for k, v in st.get("hotspots", {}).items():
                hot[k] = hot.get(k, 0) + int(v)
            for k, v in st.get("decisions", {}).items():
                dec[k] = dec.get(k, 0) + int(v)
        return {"seq": self._seq, "watermark": self.watermark,
                "tuples": tuples,
                "subscriptions": subs, "strategies": dict(self.strategy_names),
                "tau": tau, "hotspots": hot, "decisions": dec,
                "band": first.get("band", {}), "select": first.get("select", {}),
                "window": first.get("window", {}),
                "scheme": self.scheme, "workers": self.workers_info()}

    def _merge_counts(self, sts: list[dict[str, Any]]) -> tuple[dict[str, int], dict[str, int]]:
        """Tuples from worker 0 (each holds all); subscriptions summed (each holds some)."""
        first = sts[0] if sts else {}
        subs: dict[str, int] = {}
        for st in sts:
            for k, v in st.get("subscriptions", {}).items():
                subs[k] = subs.get(k, 0) + int(v)
        return dict(first.get("tuples", {"R": 0, "S": 0})), subs

    def memory_bytes(self) -> int:
        return sum(int(s.get("memory_bytes", 0)) for s in self.refresh_status())

    def __getstate__(self) -> dict[str, Any]:
        # the shards' state lives in the actors: a checkpoint takes export_state() instead
        raise TypeError("a ShardedEngine is not picklable: its state lives in its Ray actors")


def merge_rows(parts: Sequence[tuple[np.ndarray, np.ndarray, BatchOutput]]) -> BatchOutput:
    """Several workers' rows of one batch as one output in event order. Each part: its rows'
    batch event indexes (ascending), their topic subscription ids, and the worker's output
    (sign, count, pair ids). A stable sort of runs already sorted: a merge."""
    if len(parts) == 1:
        ev, sub, o = parts[0]
        return BatchOutput(ev, sub, o.sign, o.count, o.r_id, o.s_id)
    ev = np.concatenate([p[0] for p in parts])
    order = np.argsort(ev, kind="stable")

    def cat(cols: list[Any]) -> Any:
        return np.concatenate(cols)[order]

    pairs = parts[0][2].r_id is not None
    return BatchOutput(ev[order], cat([p[1] for p in parts]), cat([p[2].sign for p in parts]),
                       cat([p[2].count for p in parts]),
                       cat([p[2].r_id for p in parts]) if pairs else None,
                       cat([p[2].s_id for p in parts]) if pairs else None)


_OUTPUT_AT = {W.PUBLISH: 3, W.DELETE: 4, W.PUBLISH_BATCH: 8, W.PUBLISH_ADMITTED: 10}
"""Where each publish or delete operation holds its output mode (``worker``'s op layouts; the
batch publishes carry their optional ``ends`` after it)."""


def _quiet(op: W.Op) -> W.Op:
    """``op`` with its output switched off, for replaying a tail: a state-only publish or
    delete leaves the same tuples, clock and subscriptions and skips the matching."""
    at = _OUTPUT_AT.get(op[0])
    if at is None:
        return op
    return (*op[:at], "none", *op[at + 1:])


def _weight(op: W.Op) -> int:
    """Replay work of one tail operation: the subscriptions or tuples it carries."""
    if op[0] in (W.SUBSCRIBE, W.PUBLISH_MANY, W.RESTORE_EVENTS):
        return max(len(op[2]), 1)
    if op[0] in (W.RESTORE_COLUMNS, W.PUBLISH_ADMITTED, W.PUBLISH_BATCH):
        return max(len(op[3]), 1)
    if op[0] == W.LOAD_STATE:
        st = op[2]
        return max(len(st["subs"]["sid"]) + sum(len(t[0]) for t in st["tuples"].values()), 1)
    return 1
