"""``KeyShardedEngine``: a topic's engine over N Ray workers, *key-partitioned* (docs/how-to/scale-out.md).

Every tuple lives on the one worker its join key hashes to (both sides, one hash,
:func:`worker_of_keys`); every subscription lives on every worker. A select or window join pairs
only tuples of equal keys, so each pair is found by exactly one worker, the one holding both
tuples — the replay's exactness argument (``ops/replay/sharding.py``) made online. Each event
therefore costs one worker's matching instead of every worker's, which is what divides a
matching-bound topic's work.

Interval joins on equal keys (``B = [0, 0]``) are placed by key like select and window joins;
an interval join with any other ``B`` pairs different keys and is treated as a band join below.

Band joins pair tuples of different keys. When the first band join subscribes, every stored S
tuple is copied to every worker, and from then on S tuples go to every worker and R tuples round
robin by sequence number: each pair is still found once, by the worker holding its R tuple (the
replay's border replication, with the border at infinity since the widest band is not known in
advance). R's round robin also splits hot keys; ``replicate=True`` (``--scale-out-scheme
key-replicated``) starts a topic that way.

What must be single per topic is decided once, here, before anything is routed (README, "Design
choices"; docs/how-to/scale-out.md):

* **Admission.** The front end keeps every stored (side, id) with its time and worker
  (:class:`StoredIds`), so duplicates are found across keys and workers, and it runs the
  engine's own batch admission (``matcher.batch.admit_publish``) against them: statuses,
  sequence numbers and the running clock of the whole batch, the topic's ``max_advance``
  bound included (its workers get none: they only apply what was admitted here).
* **The clock.** Each worker gets, with each of its events, the topic's sequence number and the
  topic's largest event time after it (``Engine.publish_admitted``), so lateness, windows and
  retention are decided on the topic's watermark even though a worker sees only its keys; every
  other operation is preceded by an ``ADVANCE`` to the topic's clock.
* **Deletes and reads** go to the worker that holds the id; subscribe, unsubscribe and the
  snapshot's result go to every worker, whose subscription ids therefore agree.

Recovery, batches of operations, health and stats are those of ``ShardedEngine`` (snapshot +
tail per worker). No Ray import at module level.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from hotjoin.matcher.batch import (
    TIME_MAX,
    TIME_MIN,
    BatchOutput,
    BatchResult,
    EventStatus,
    admit_publish,
    check_output,
    empty_output,
    publish_columns,
    rejection_reasons,
)
from hotjoin.matcher.errors import (
    BatchError,
    DuplicateEventError,
    EventTooFarAheadError,
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
    Range,
    SelectJoin,
    Subscription,
    WindowJoin,
    check_side,
    empty_matches,
)
from hotjoin.server.errors import Unavailable
from hotjoin.server.scaleout import worker as W
from hotjoin.server.scaleout.engine import (
    SNAPSHOT_EVERY,
    ShardedEngine,
    checked_subscriptions,
    empty_state,
    merge_rows,
)

log = logging.getLogger("hotjoin.scaleout")

PIPELINE_CHUNKS = 3
"""A publish batch is cut into up to this many chunks, sent to the workers at once: the front end
merges chunk c's rows while the workers match chunk c + 1 (``ShardedEngine.apply_chunks``)."""
PIPELINE_MIN_EVENTS = 128  # accepted events per chunk at least (each chunk is one RPC per worker)

ALL = -2
"""Owner code of a tuple stored on every worker (the replicated side, see ``KeyShardedEngine``)."""
REPLICATED_SIDE = 1  # S: once a band join subscribes, S tuples are stored on every worker


def pairs_across_keys(sub: Any) -> bool:
    """Whether ``sub`` pairs tuples of different keys (a band join, or an interval join whose
    ``B`` is not ``[0, 0]``): the S side must then be on every worker.

    >>> pairs_across_keys(IntervalJoin.allen("overlaps", b=Range(0, 0)))
    False
    >>> pairs_across_keys(IntervalJoin.allen("overlaps", b=Range(-1, 1)))
    True
    """
    if isinstance(sub, BandJoin):
        return True
    return isinstance(sub, IntervalJoin) and sub.b != Range(0, 0)


def worker_of_keys(keys: np.ndarray, workers: int) -> np.ndarray:
    """The worker of each join key: a 64-bit mix (splitmix64's finaliser) of the key's bits.

    ``-0.0`` and ``0.0`` are equal keys and get the same worker. Deterministic across processes
    and restarts (no Python ``hash``), so a restarted front end routes a key where it went before.

    >>> w = worker_of_keys(np.array([0.0, -0.0, 7.0, 7.0]), 3)
    >>> bool(w[0] == w[1] and w[2] == w[3]), bool(((w >= 0) & (w < 3)).all())
    (True, True)
    """
    b = (np.asarray(keys, dtype=np.float64) + 0.0).view(np.uint64).copy()
    b ^= b >> np.uint64(33)
    b *= np.uint64(0xFF51AFD7ED558CCD)
    b ^= b >> np.uint64(33)
    b *= np.uint64(0xC4CEB9FE1A85EC53)
    b ^= b >> np.uint64(33)
    return (b % np.uint64(workers)).astype(np.int64)


def _concat_outputs(parts: list[BatchOutput], output: str) -> BatchOutput:
    """Chunk outputs (each in event order, chunks in event order) as one output."""
    parts = [p for p in parts if len(p.event)]
    if not parts:
        return empty_output(output)
    if len(parts) == 1:
        return parts[0]

    def cat(name: str) -> Any:
        return np.concatenate([getattr(p, name) for p in parts])

    pairs = parts[0].r_id is not None
    return BatchOutput(cat("event"), cat("subscription"), cat("sign"), cat("count"),
                       cat("r_id") if pairs else None, cat("s_id") if pairs else None)


class StoredIds:
    """One side's stored ids, with each tuple's time and worker: the front end's admission table.

    Offers what ``batch.admit_publish`` reads of a base table (``slot_of``, ``times`` and
    ``ends``). Entries that retention has dropped on the workers stay until the next compaction;
    every reader treats an entry whose *end* (its time, for a point) is older than the retention
    limit as gone, as the admission kernel does.
    """

    def __init__(self) -> None:
        self.slot_of: dict[str, int] = {}
        self.times = np.zeros(1024, dtype=np.int64)
        self.ends = np.zeros(1024, dtype=np.int64)
        self.owner = np.zeros(1024, dtype=np.int32)
        self.n = 0  # slots used (live, deleted and expired ones)
        self._compact_at = 4096

    def __len__(self) -> int:
        return len(self.slot_of)

    def add(self, ids: Sequence[str], times: np.ndarray, owners: np.ndarray,
            ends: np.ndarray | None = None) -> None:
        """Record accepted tuples (an id seen again replaces its entry: retention dropped it);
        ``ends`` None: points."""
        m = len(ids)
        need = self.n + m
        if need > self.times.shape[0]:
            cap = max(need, 2 * self.times.shape[0])
            self.times = np.concatenate([self.times[: self.n], np.zeros(cap - self.n, np.int64)])
            self.ends = np.concatenate([self.ends[: self.n], np.zeros(cap - self.n, np.int64)])
            self.owner = np.concatenate([self.owner[: self.n], np.zeros(cap - self.n, np.int32)])
        self.times[self.n:need] = times
        self.ends[self.n:need] = times if ends is None else ends
        self.owner[self.n:need] = owners
        self.slot_of.update(zip(ids, range(self.n, need), strict=True))
        self.n = need

    def find(self, event_id: str, limit: int | None) -> int:
        """The worker storing ``event_id``, or -1 (never stored, deleted, or older than ``limit``)."""
        slot = self.slot_of.get(event_id)
        if slot is None or (limit is not None and int(self.ends[slot]) < limit):
            return -1
        return int(self.owner[slot])

    def time_of(self, event_id: str) -> int | None:
        slot = self.slot_of.get(event_id)
        return None if slot is None else int(self.times[slot])

    def end_of(self, event_id: str) -> int | None:
        """The stored tuple's end (its time for a point; what retention compares), or None."""
        slot = self.slot_of.get(event_id)
        return None if slot is None else int(self.ends[slot])

    def remove(self, event_id: str) -> None:
        self.slot_of.pop(event_id, None)

    def compact(self, limit: int | None) -> None:
        """Drop expired entries and reclaim the slots of removed ones, once the slots used have
        doubled since the last compaction (amortised O(1) per insert)."""
        if self.n < self._compact_at:
            return
        keep = [(i, s) for i, s in self.slot_of.items()
                if limit is None or int(self.ends[s]) >= limit]
        slots = np.fromiter((s for _, s in keep), dtype=np.int64, count=len(keep))
        times, ends, owner = self.times[slots], self.ends[slots], self.owner[slots]
        self.slot_of = {i: k for k, (i, _) in enumerate(keep)}
        cap = max(1024, 2 * len(keep))
        self.times = np.zeros(cap, dtype=np.int64)
        self.ends = np.zeros(cap, dtype=np.int64)
        self.owner = np.zeros(cap, dtype=np.int32)
        self.times[: len(keep)] = times
        self.ends[: len(keep)] = ends
        self.owner[: len(keep)] = owner
        self.n = len(keep)
        self._compact_at = max(4096, 2 * self.n)

    def nbytes(self) -> int:
        """Rough memory: the arrays plus ~100 B per dict entry (key string not counted)."""
        return int(self.times.nbytes + self.ends.nbytes + self.owner.nbytes
                   + 100 * len(self.slot_of))


class KeyShardedEngine(ShardedEngine):
    """A topic's engine whose tuples are partitioned by join key over ``workers`` Ray actors."""

    scheme = "key-partitioned"

    def __init__(self, lateness: int = 0, retention: int | None = None,
                 strategy: str | Mapping[str, str] = "auto", *, workers: int = 2,
                 ray_address: str | None = None, worker_cpus: float = 0,
                 snapshot_every: int = SNAPSHOT_EVERY, replicate: bool = False,
                 max_advance: int | None = None) -> None:
        super().__init__(lateness, retention, strategy, workers=workers, ray_address=ray_address,
                         worker_cpus=worker_cpus, snapshot_every=snapshot_every,
                         max_advance=max_advance)
        self._worker_max_advance = None  # admitted here, on the topic's clock (module docstring)
        self._ids = (StoredIds(), StoredIds())
        self._n_local = 0  # every worker holds every subscription under the same local id
        self._identity_ids = True  # local id == topic id for every subscription so far
        # None: both sides by key; else this side's tuples are on every worker and the other
        # side's spread by sequence number (band joins, hot keys; see the module docstring)
        self._replicated: int | None = REPLICATED_SIDE if replicate else None
        self.pipeline_chunks = PIPELINE_CHUNKS
        self.pipeline_min_events = PIPELINE_MIN_EVENTS

    # -- the topic's clock ------------------------------------------------------------------
    def _limit(self, max_time: int | None = None) -> int | None:
        """Retention limit at the topic's clock: stored tuples older than this are gone."""
        mt = self._max_time if max_time is None else max_time
        if self.retention is None or mt is None:
            return None
        return mt - self.lateness - self.retention

    def _advance_op(self) -> W.Op:
        """Bring a worker to the topic's clock before a non-publish operation."""
        return (W.ADVANCE, self._seq + 1, self._max_time)

    def _owners(self, sides: np.ndarray, keys: np.ndarray, seqs: np.ndarray) -> np.ndarray:
        """The worker of each tuple: its key's, or ``ALL`` for the replicated side and the
        sequence number's round robin for the other side once a side is replicated."""
        if self._replicated is None:
            return worker_of_keys(keys, self.n_workers)
        sides = np.asarray(sides)
        return np.where(sides == self._replicated, ALL,
                        np.asarray(seqs, dtype=np.int64) % self.n_workers)

    def _on(self, own: np.ndarray, w: int) -> np.ndarray:
        """Mask of the tuples worker ``w`` stores."""
        return (own == w) | (own == ALL)

    def _diverged(self, worker: int, err: BaseException) -> None:
        """A worker refused what the front end admitted: its state can no longer be trusted."""
        self._broken = f"scale-out worker {worker} refused an admitted operation ({err})"
        log.error("%s", self._broken)
        raise Unavailable(f"{self._broken}; the topic is unavailable until the server restarts")

    def _map(self, parts: list[Any], sign: int) -> Matches | Affected | list[Delivery]:
        """The workers' outputs of one operation (one part per worker that applied it) with
        topic-wide subscription ids; affected counts of one subscription summed over workers."""
        l2g = self._shards[0].l2g
        if isinstance(parts[0], list):
            return [Delivery(int(l2g[d.subscription_id]), d.sign, d.r_id, d.s_id)
                    for p in parts for d in p]
        if isinstance(parts[0], Affected):
            if len(parts) == 1:
                return Affected(l2g[parts[0].subscription_ids], parts[0].counts)
            q = np.concatenate([p.subscription_ids for p in parts])
            c = np.concatenate([p.counts for p in parts])
            uq, inv = np.unique(q, return_inverse=True)
            return Affected(l2g[uq], np.bincount(inv, weights=c).astype(c.dtype))
        parts = [p for p in parts if p is not None and len(p)]
        if not parts:
            return empty_matches(sign)
        return Matches(l2g[np.concatenate([p.subscription_ids for p in parts])], parts[0].sign,
                       np.concatenate([np.asarray(p.r_ids, dtype=object) for p in parts]),
                       np.concatenate([np.asarray(p.s_ids, dtype=object) for p in parts]))

    # -- publish ----------------------------------------------------------------------------
    def publish_batch(self, sides: Any, ids: Any, keys: Any, values: Any, times: Any,
                      payloads: Any = None, *, ends: Any = None,
                      output: str = "affected") -> BatchResult:
        """``Engine.publish_batch``: admitted here once for the topic, then each worker stores and
        matches the events of its keys (``Engine.publish_admitted``, one RPC per worker, all at
        once); the workers' rows are merged back in event order. ``ends``: interval ends as
        ``Engine.publish_batch``'s."""
        check_output(output)
        cols = publish_columns(sides, ids, keys, values, times, payloads, ends)
        adm = admit_publish(cols, self._ids, self.lateness, self.retention, self._max_time,
                            self._seq, self.max_advance)
        reasons = rejection_reasons(cols, adm, self.lateness, self.max_advance)
        acc = np.flatnonzero(adm.status == EventStatus.OK)
        if not acc.shape[0]:
            return BatchResult(adm.status, adm.seqs, reasons, empty_output(output))
        own = self._owners(cols.side[acc], cols.keys[acc], adm.seqs[acc])
        n_chunks = max(1, min(self.pipeline_chunks, acc.shape[0] // self.pipeline_min_events))
        bounds = [acc.shape[0] * c // n_chunks for c in range(n_chunks + 1)]
        chunks: list[dict[int, list[W.Op]]] = []
        picks: list[dict[int, np.ndarray]] = []
        for c in range(n_chunks):
            a, b = bounds[c], bounds[c + 1]
            batches: dict[int, list[W.Op]] = {}
            pick: dict[int, np.ndarray] = {}
            for w in range(self.n_workers):
                sel = acc[a:b][self._on(own[a:b], w)]
                if not sel.shape[0]:
                    continue
                sel_l = sel.tolist()
                pl = None if cols.payloads is None else [cols.payloads[i] for i in sel_l]
                batches[w] = [(W.PUBLISH_ADMITTED, int(adm.seqs[sel[0]]), cols.side[sel],
                               [cols.ids[i] for i in sel_l], cols.keys[sel], cols.values[sel],
                               cols.times[sel], pl, adm.seqs[sel], adm.maxes[sel], output,
                               None if cols.ends is None else cols.ends[sel])]
                pick[w] = sel
            chunks.append(batches)
            picks.append(pick)
        merged: list[BatchOutput] = []

        def consume(c: int, res: dict[int, list[Any]]) -> None:  # while chunk c + 1 is matched
            for w, r in res.items():
                if isinstance(r[0], W.OpError):
                    self._diverged(w, r[0].error)
            merged.append(self._merge_rows([(picks[c][w], res[w][0]) for w in chunks[c]], output))

        self.apply_chunks(chunks, consume)
        for sd in (0, 1):
            mine = cols.side[acc] == sd
            if mine.any():
                idx = acc[mine]
                self._ids[sd].add([cols.ids[i] for i in idx.tolist()], cols.times[idx], own[mine],
                                  None if cols.ends is None else cols.ends[idx])
        self._seq = adm.seq
        self._max_time = adm.max_time
        limit = self._limit()
        for t in self._ids:
            t.compact(limit)
        return BatchResult(adm.status, adm.seqs, reasons, _concat_outputs(merged, output))

    def _merge_rows(self, parts: list[tuple[np.ndarray, BatchOutput]], output: str) -> BatchOutput:
        """Workers' batch rows (event indexes local to their share, ``pick`` maps them to the
        batch's) as one output in event order (``engine.merge_rows``); once a side is
        replicated, an (event, subscription) found on several workers becomes one row."""
        l2g = None if self._identity_ids else self._shards[0].l2g
        parts = [(p[o.event], o.subscription if l2g is None else l2g[o.subscription], o)
                 for p, o in parts if len(o.event)]
        if not parts:
            return empty_output(output)
        out = merge_rows(parts)
        if out.r_id is not None or self._replicated is None or len(parts) == 1:
            return out
        ev, sub = out.event, out.subscription
        by = np.lexsort((sub, ev))
        ev, sub, sign, count = ev[by], sub[by], out.sign[by], out.count[by]
        first = np.flatnonzero(np.r_[True, (ev[1:] != ev[:-1]) | (sub[1:] != sub[:-1])])
        return BatchOutput(ev[first], sub[first], sign[first], np.add.reduceat(count, first))

    def _admit_events(self, events: Sequence[Any]) -> list[Any]:
        """The engine's admission of events one at a time (duplicate before late, then
        ``max_advance``), changing nothing: per event an ``OpError``
        (the engine's exception) or ``(worker, seq, clock before it)``."""
        seq, mt = self._seq, self._max_time
        added: dict[tuple[int, str], int] = {}
        out: list[Any] = []
        for ev in events:
            if not isinstance(ev, Event):
                out.append(W.OpError(ValueError(f"not an Event: {type(ev).__name__}")))
                continue
            sd = 0 if ev.side == "R" else 1
            t_stored = added.get((sd, ev.id))  # the stored tuple's end (retention compares it)
            if t_stored is None:
                t_stored = self._ids[sd].end_of(ev.id)
            limit = self._limit(mt)
            if t_stored is not None and (limit is None or t_stored >= limit):
                out.append(W.OpError(DuplicateEventError(ev.side, ev.id)))
                continue
            if mt is not None and ev.time < mt - self.lateness:
                out.append(W.OpError(LateEventError(ev.side, ev.id, ev.time, mt - self.lateness)))
                continue
            if self.max_advance is not None and mt is not None and ev.time - mt > self.max_advance:
                out.append(W.OpError(EventTooFarAheadError(ev.time, mt, self.max_advance)))
                continue
            seq += 1
            w = int(self._owners(np.array([sd]), np.array([ev.key]), np.array([seq]))[0])
            out.append((w, seq, mt))
            added[(sd, ev.id)] = ev.end
            if mt is None or ev.time > mt:
                mt = ev.time
        return out

    def _send_events(self, events: Sequence[Event], admitted: list[Any], mode: str) -> list[Any]:
        """Apply the admitted events on their workers (one RPC each, all at once); per event its
        mapped output or its ``OpError``."""
        batches: dict[int, list[W.Op]] = {}
        where: list[list[tuple[int, int]] | None] = []
        for ev, a in zip(events, admitted, strict=True):
            if isinstance(a, W.OpError):
                where.append(None)
                continue
            w, seq, mt = a
            at = []
            for v in (range(self.n_workers) if w == ALL else (w,)):
                ops = batches.setdefault(v, [])
                ops += [(W.ADVANCE, seq, mt), (W.PUBLISH, seq, ev, mode)]
                at.append((v, len(ops) - 1))
            where.append(at)
        res = self.apply_many(batches) if batches else {}
        for w in batches:
            bad = next((r for r in res[w] if isinstance(r, W.OpError)), None)
            if bad is not None:
                self._diverged(w, bad.error)
        out: list[Any] = []
        for ev, a, at in zip(events, admitted, where, strict=True):
            if at is None:
                out.append(a)
                continue
            w, seq, _ = a
            self._seq = seq
            if self._max_time is None or ev.time > self._max_time:
                self._max_time = ev.time
            self._ids[0 if ev.side == "R" else 1].add([ev.id], np.array([ev.time]), np.array([w]),
                                                      np.array([ev.end]))
            out.append(None if mode == "none" else self._map([res[v][k] for v, k in at], 1))
        return out

    def publish_ops(self, events: Sequence[Event], mode: str = "pairs") -> list[Any]:
        """As ``ShardedEngine.publish_ops``: each accepted event goes to its key's worker only."""
        events = list(events)
        return self._send_events(events, self._admit_events(events), mode) if events else []

    def publish_many(self, events: Iterable[Event], match: bool = True) -> list[Delivery]:
        """As ``Engine.publish_many``: the first rejected event raises ``BatchError`` (earlier ones
        stay). Without matching (a log replay) the accepted prefix goes through
        :meth:`publish_batch`, which admits it exactly as the events one at a time did."""
        events = list(events)
        admitted = self._admit_events(events)
        bad = next((i for i, a in enumerate(admitted) if isinstance(a, W.OpError)), len(events))
        out: list[Delivery] = []
        if match:
            out = [d for g in self._send_events(events[:bad], admitted[:bad], "list") for d in g]
        elif bad and all(TIME_MIN <= ev.time <= TIME_MAX for ev in events[:bad]):
            ok = events[:bad]
            ends = [e.end for e in ok]
            self.publish_batch([e.side for e in ok], [e.id for e in ok], [e.key for e in ok],
                               [e.value for e in ok], [e.time for e in ok],
                               [e.payload for e in ok], output="none",
                               ends=None if all(e.end == e.time for e in ok) else ends)
        else:  # a time beyond the batch path's ±2^61 (the one-at-a-time engine accepts it)
            self._send_events(events[:bad], admitted[:bad], "none")
        if bad < len(events):
            raise BatchError(bad, admitted[bad].error)
        return out

    # -- delete -----------------------------------------------------------------------------
    def _delete(self, side: str, event_id: str, mode: str) -> Any:
        """To the worker holding the id (an unknown or invalid one to worker 0, which raises the
        engine's own error and changes nothing)."""
        w = 0
        if side in ("R", "S") and isinstance(event_id, str):
            found = self._ids[0 if side == "R" else 1].find(event_id, self._limit())
            w = 0 if found == -1 else found  # ALL: a replicated tuple, deleted everywhere
        seq = self._seq + 1
        where = range(self.n_workers) if w == ALL else (w,)
        res = self.apply_many({v: [self._advance_op(), (W.DELETE, seq, side, event_id, mode)]
                               for v in where})
        got = [self._checked(res[v][1]) for v in where]
        self._seq = seq
        self._ids[0 if side == "R" else 1].remove(event_id)
        return [] if mode == "none" else self._map(got, -1)

    def get_event(self, side: str, event_id: str) -> Event | None:
        sd = 0 if check_side(side) == "R" else 1
        w = self._ids[sd].find(event_id, self._limit()) if isinstance(event_id, str) else -1
        if w == -1:
            return None
        w = max(w, 0)  # a replicated tuple: any worker
        return self._checked(self.apply_many({w: [(W.GET_EVENT, 0, side, event_id)]})[w][0])

    # -- subscriptions: on every worker, under the same local id ------------------------------
    def _admit_subscriptions(self, subs: Sequence[Any]) -> None:
        """The engine's own validation (``Engine._index_for``), before any worker moves; then,
        for a band join (or an interval join across keys, ``pairs_across_keys``) on a topic
        whose tuples are placed by key, the S side's replication."""
        for s in subs:
            if not isinstance(s, (BandJoin, SelectJoin, WindowJoin, IntervalJoin)):
                raise ValueError(f"not a subscription: {type(s).__name__}")
        if self._replicated is None and any(pairs_across_keys(s) for s in subs):
            self._replicate()

    def _replicate(self) -> None:
        """Copy every stored S tuple to every worker (with its seq); from now on S tuples go to
        every worker and R tuples round robin. A band join pairs different keys: with S on
        every worker each pair is still found exactly once, by the worker holding its R tuple
        (the replay's border replication with the border at infinity, ``ops/replay``)."""
        side = REPLICATED_SIDE
        name = "RS"[side]
        self._started()
        held = [[p for p in self._checked(r) if p[0].side == name]
                for r in self._to_all((W.STORED, 0))]
        batches: dict[int, list[W.Op]] = {}
        for v in range(self.n_workers):
            others = [p for w, ps in enumerate(held) if w != v for p in ps]
            if others:
                batches[v] = [(W.RESTORE_EVENTS, 0, [e for e, _ in others], [q for _, q in others])]
        res = self.apply_many(batches) if batches else {}
        for v in batches:
            if isinstance(res[v][0], W.OpError):
                self._diverged(v, res[v][0].error)
        ids = self._ids[side]
        ids.owner[: ids.n] = ALL
        self._replicated = side
        log.info("scale-out: S tuples replicated to all %d workers (%d tuples): a band join "
                 "subscribed", self.n_workers, sum(len(h) for h in held))

    def _to_all(self, op: W.Op, advance: bool = True) -> list[Any]:
        """``op`` on every worker (after bringing it to the topic's clock); the results."""
        pre = [self._advance_op()] if advance else []
        res = self.apply_many({i: [*pre, op] for i in range(self.n_workers)})
        return [res[i][len(pre)] for i in range(self.n_workers)]

    def subscribe_many(self, subs: Iterable[Subscription], snapshot: bool = False) -> list[int]:
        """Register in order on every worker (all or nothing); a band join first replicates S."""
        subs = list(subs)
        self._admit_subscriptions(subs)
        if not subs:
            return []
        self._started()
        res = self._to_all((W.SUBSCRIBE, self._seq + 1, subs, bool(snapshot)))
        errors = [r for r in res if isinstance(r, W.OpError)]
        if errors:  # an index refused one: all or nothing, as the engine's own subscribe_many
            undo = self.apply_many({w: [(W.UNDO_SUB, 0, [] if isinstance(r, W.OpError)
                                         else list(r), self._seq)] for w, r in enumerate(res)})
            for w in undo:
                if isinstance(undo[w][0], W.OpError):
                    self._diverged(w, undo[w][0].error)
            raise errors[0].error
        g0 = self._next_gid
        gids = list(range(g0, g0 + len(subs)))
        for i, locals_ in enumerate(res):
            self._place(i, locals_, gids)
        self._n_local = self._shards[0].n_local
        self._identity_ids = self._identity_ids and list(res[0]) == gids
        for g, s in zip(gids, subs, strict=True):
            self.subs[g] = s
        self._next_gid += len(subs)
        self._seq += len(subs)
        return gids

    def undo_subscribe(self, sids: np.ndarray, seq0: int) -> None:
        """``Engine.undo_subscribe`` on every worker (each holds every subscription under the
        same local id); the sequence goes back to ``seq0`` and the ids are handed out again."""
        sids = np.asarray(sids, dtype=np.int64).reshape(-1)
        gids = [g for g in sids.tolist() if g in self.subs]
        locals_ = sorted(int(self._g2l[g]) for g in gids)
        if self._shards:
            for w, r in enumerate(self._to_all((W.UNDO_SUB, 0, locals_, int(seq0)),
                                               advance=False)):
                if isinstance(r, W.OpError):
                    self._diverged(w, r.error)
        if locals_:
            self._n_local = locals_[0]
            for sh in self._shards:
                sh.n_local = locals_[0]
                sh.live -= len(locals_)
        for g in gids:
            del self.subs[g]
        if sids.shape[0]:
            self._next_gid = int(sids[0])
        self._seq = int(seq0)

    def unsubscribe(self, sid: int) -> None:
        if not isinstance(sid, (int, np.integer)) or sid not in self.subs:
            raise UnknownSubscriptionError(sid)
        local = int(self._g2l[sid])
        res = self._to_all((W.UNSUBSCRIBE, self._seq + 1, local))
        self._checked(res[0])
        self._seq += 1
        del self.subs[sid]
        for sh in self._shards:
            sh.live -= 1

    def result_columnar(self, sid: int) -> Matches:
        """The subscription's current result: every worker's pairs (each holds some keys)."""
        if not isinstance(sid, (int, np.integer)) or sid not in self.subs:
            raise UnknownSubscriptionError(sid)
        parts = [self._checked(r) for r in self._to_all((W.RESULT, 0, int(self._g2l[sid])))]
        n = sum(len(p) for p in parts)
        return Matches(np.full(n, sid, dtype=np.int64), 1,
                       np.concatenate([np.asarray(p.r_ids, dtype=object) for p in parts]),
                       np.concatenate([np.asarray(p.s_ids, dtype=object) for p in parts]))

    # -- restore (server restart) -------------------------------------------------------------
    def restore_event_columns(self, side: str, ids: list[str], keys: np.ndarray, values: np.ndarray,
                              times: np.ndarray, seqs: np.ndarray,
                              payloads: list[bytes] | None = None, *,
                              ends: np.ndarray | None = None) -> None:
        """``Engine.restore_event_columns``: checked here first exactly as the engine checks
        (each worker sees only its keys, so a duplicate of an id stored under another key is
        found only here), then each worker stores the tuples it holds. All or nothing."""
        ids = list(ids)
        keys, values = np.asarray(keys, np.float64), np.asarray(values, np.float64)
        times, seqs = np.asarray(times, np.int64), np.asarray(seqs, np.int64)
        sd = 0 if check_side(side) == "R" else 1
        n = len(ids)
        if not (keys.shape == values.shape == times.shape == seqs.shape == (n,)):
            raise ValueError("restore_event_columns: columns of different lengths")
        if payloads is not None and len(payloads) != n:
            raise ValueError("restore_event_columns: payloads of a different length")
        if ends is not None:
            ends = np.asarray(ends, np.int64)
            if ends.shape != (n,):
                raise ValueError("restore_event_columns: ends of a different length")
            if bool((ends < times).any()):
                raise ValueError("restore_event_columns: an end before its time")
        if n == 0:
            return
        if not (np.isfinite(keys).all() and np.isfinite(values).all()):
            raise ValueError("event keys and values must be finite")
        if not all(isinstance(i, str) and i for i in ids):
            raise ValueError("event ids must be non-empty strings")
        if len(set(ids)) != n:
            raise ValueError(f"duplicate ids among the restored {side} events")
        limit = self._limit()
        for i in ids:
            if self._ids[sd].find(i, limit) != -1:
                raise DuplicateEventError(side, i)
        own = self._owners(np.full(n, sd), keys, seqs)
        batches: dict[int, list[W.Op]] = {}
        for w in range(self.n_workers):
            sel = np.flatnonzero(self._on(own, w))
            sl = sel.tolist()
            batches[w] = [(W.RESTORE_COLUMNS, 0, side, [ids[i] for i in sl], keys[sel],
                           values[sel], times[sel], seqs[sel],
                           None if payloads is None else [payloads[i] for i in sl],
                           None if ends is None else ends[sel])]
        res = self.apply_many(batches)
        for w in batches:
            if isinstance(res[w][0], W.OpError):
                self._diverged(w, res[w][0].error)
        self._ids[sd].add(ids, times, own, ends)

    def restore_events(self, events: list[Event], seqs: list[int]) -> None:
        events = list(events)
        own = self._owners(np.array([0 if e.side == "R" else 1 for e in events], np.int64),
                           np.array([e.key for e in events], np.float64),
                           np.asarray(seqs, dtype=np.int64))
        batches: dict[int, list[W.Op]] = {}
        for w in range(self.n_workers):
            sel = np.flatnonzero(self._on(own, w)).tolist()
            batches[w] = [(W.RESTORE_EVENTS, 0, [events[i] for i in sel], [seqs[i] for i in sel])]
        res = self.apply_many(batches)
        for w in batches:
            self._checked(res[w][0])
        for sd, side in enumerate("RS"):
            sel = [i for i, e in enumerate(events) if e.side == side]
            if sel:
                self._ids[sd].add([events[i].id for i in sel],
                                  np.array([events[i].time for i in sel], np.int64), own[sel],
                                  np.array([events[i].end for i in sel], np.int64))

    def restore_subscription(self, sid: int, sub: Subscription, reg_seq: int,
                             snapshot: bool = False) -> None:
        """``Engine.restore_subscription``: topic subscription ``sid`` on every worker."""
        if sid < self._next_gid:
            raise ValueError(f"subscription id {sid} is not above the last id {self._next_gid - 1}")
        self._admit_subscriptions([sub])
        self._started()
        local = self._n_local
        res = self._to_all((W.RESTORE_SUB, 0, local, sub, int(reg_seq), bool(snapshot)),
                           advance=False)
        for r in res:
            self._checked(r)
        for i in range(self.n_workers):
            self._place(i, [local], [sid])
        self._n_local = local + 1
        self._identity_ids = self._identity_ids and local == sid
        self.subs[sid] = sub
        self._next_gid = sid + 1

    def stored_tuples(self) -> list[tuple[Event, int]]:
        """Every stored tuple with its seq, from all workers, in sequence order."""
        rep_side = None if self._replicated is None else "RS"[self._replicated]
        got = [p for w, r in enumerate(self._to_all((W.STORED, 0))) for p in self._checked(r)
               if w == 0 or p[0].side != rep_side]  # a replicated tuple: worker 0's copy
        got.sort(key=lambda p: p[1])
        return got

    # -- state as columns (server checkpoints; TopicEngine.export_state / load_state) ----------
    def export_state(self) -> dict[str, Any]:
        """``Engine.export_state`` of the topic: every worker brought to the topic's clock, the
        subscriptions from worker 0 (each holds all) under their topic ids, each worker's
        tuples (a replicated side's from worker 0 only), rows in sequence order. One round
        trip to every worker; none before they start."""
        if not self._shards:
            return empty_state(self._seq, self._max_time, self._next_gid)
        adv = self._advance_op()
        res = self.apply_many({w: [adv, (W.EXPORT if w == 0 else W.EXPORT_TUPLES, 0)]
                               for w in range(self.n_workers)})
        got = [self._checked(res[w][1]) for w in range(self.n_workers)]
        subs = dict(got[0]["subs"])
        subs["sid"] = self._shards[0].l2g[subs["sid"]]
        rep = None if self._replicated is None else "RS"[self._replicated]
        tuples: dict[str, tuple[Any, ...]] = {}
        ends: dict[str, np.ndarray] = {}
        first_ends = got[0].get("ends") or {}
        for side in ("R", "S"):
            parts = [(*got[0]["tuples"][side], first_ends.get(side)) if w == 0 else got[w][side]
                     for w in range(self.n_workers) if w == 0 or side != rep]
            seqs = np.concatenate([p[4] for p in parts])
            order = np.argsort(seqs, kind="stable")
            ids = [i for p in parts for i in p[0]]
            payloads = [x for p in parts for x in p[5]]
            tuples[side] = ([ids[i] for i in order.tolist()],
                            *(np.concatenate([p[c] for p in parts])[order] for c in (1, 2, 3)),
                            seqs[order], [payloads[i] for i in order.tolist()])
            ends[side] = np.concatenate([p[3] if p[6] is None else p[6] for p in parts])[order]
        return {"seq": self._seq, "max_time": self._max_time, "next_sid": self._next_gid,
                "subs": subs, "tuples": tuples, "ends": ends}

    def load_state(self, state: Mapping[str, Any]) -> None:
        """``Engine.load_state``: every worker gets every subscription under its topic id and
        the tuples of its keys (S on every worker once a band join is among the
        subscriptions); one round trip. ``ValueError``, changing nothing, when this engine is
        not empty or the subscription columns are malformed; when a worker refuses its part
        (malformed tuples) every worker is dropped, so the engine is empty again, and the
        worker's ``ValueError`` is raised."""
        self._check_empty()
        cols, subs, next_sid = checked_subscriptions(state)
        seq, mt = int(state["seq"]), state["max_time"]
        replicated = self._replicated
        if replicated is None and any(pairs_across_keys(s) for s in subs):
            replicated = REPLICATED_SIDE
        placed: dict[int, tuple[list[str], np.ndarray, np.ndarray, np.ndarray | None]] = {}
        per_worker: list[dict[str, tuple[Any, ...]]] = [{} for _ in range(self.n_workers)]
        per_worker_ends: list[dict[str, np.ndarray]] = [{} for _ in range(self.n_workers)]
        state_ends = state.get("ends") or {}
        saved, self._replicated = self._replicated, replicated  # _owners reads the placement
        try:
            for sd, side in enumerate("RS"):
                ids, keys, values, times, seqs, payloads = state["tuples"][side]
                ids, keys = list(ids), np.asarray(keys, np.float64)
                times, seqs = np.asarray(times, np.int64), np.asarray(seqs, np.int64)
                values = np.asarray(values, np.float64)
                own = self._owners(np.full(len(ids), sd), keys, seqs)
                side_ends = state_ends.get(side)
                side_ends = None if side_ends is None else np.asarray(side_ends, np.int64)
                placed[sd] = (ids, times, own, side_ends)
                for w in range(self.n_workers):
                    sel = np.flatnonzero(self._on(own, w))
                    sl = sel.tolist()
                    per_worker[w][side] = ([ids[i] for i in sl], keys[sel], values[sel],
                                           times[sel], seqs[sel], [payloads[i] for i in sl])
                    if side_ends is not None:
                        per_worker_ends[w][side] = side_ends[sel]
            self._started()
            self._load({w: [(W.LOAD_STATE, 0, {"seq": seq, "max_time": mt, "next_sid": next_sid,
                                               "subs": cols, "tuples": per_worker[w],
                                               "ends": per_worker_ends[w]})]
                        for w in range(self.n_workers)})
        except BaseException:
            self._replicated = saved
            raise
        sids = cols["sid"].tolist()
        for w in range(self.n_workers):
            if sids:
                self._place(w, sids, sids)  # local id = topic id on every worker
            self._shards[w].n_local = next_sid
        self._n_local = next_sid
        for sd, (ids, times, own, side_ends) in placed.items():
            self._ids[sd].add(ids, times, own, side_ends)
        self.subs = dict(zip(sids, subs, strict=True))
        self._next_gid = next_sid
        self._seq = seq
        self._max_time = None if mt is None else int(mt)

    def _stored_counts(self) -> dict[str, int]:
        """Stored tuples per side at the topic's clock: summed over the workers, a replicated
        side counted once (worker 0's copy)."""
        rep = None if self._replicated is None else "RS"[self._replicated]
        counts = {"R": 0, "S": 0}
        for w, r in enumerate(self._to_all((W.COUNT, 0))):
            for side, n in self._checked(r).items():
                if side != rep or w == 0:
                    counts[side] += int(n)
        return counts

    # -- introspection ----------------------------------------------------------------------
    def _merge_counts(self, sts: list[dict[str, Any]]) -> tuple[dict[str, int], dict[str, int]]:
        """Tuples summed over the workers (each holds some keys); subscriptions from worker 0
        (each holds all)."""
        tuples: dict[str, int] = {"R": 0, "S": 0}
        for st in sts:
            for k, v in st.get("tuples", {}).items():
                tuples[k] = tuples.get(k, 0) + int(v)
        first = sts[0] if sts else {}
        if self._replicated is not None and first:  # on every worker: count one copy
            name = "RS"[self._replicated]
            tuples[name] = int(first.get("tuples", {}).get(name, 0))
        return tuples, {k: int(v) for k, v in first.get("subscriptions", {}).items()}

    def memory_bytes(self) -> int:
        return super().memory_bytes() + sum(t.nbytes() for t in self._ids)
