"""The engine contract: what a topic of the server needs of its matching engine (``TopicEngine``).

A topic (``server/topic.py`` and the rooms it composes: durability, recovery, checkpoints,
compaction, the batch seam) drives its engine only through the members of :class:`TopicEngine`,
and builds it only through an :class:`EngineFactory`. Every implementation gives the results of
one :class:`~hotjoin.matcher.engine.Engine` — the same statuses, sequence numbers, watermark,
subscription ids and pairs — and every call that raises changes nothing (two documented
exceptions: ``publish_many`` keeps the events before the rejected one, and a malformed
``load_state`` input may leave part of it loaded). The implementations:

* ``hotjoin.matcher.Engine`` — one process (the default ``engine_factory``);
* ``hotjoin.server.scaleout.engine.ShardedEngine`` — subscription-partitioned over Ray workers;
* ``hotjoin.server.scaleout.key_engine.KeyShardedEngine`` — key-partitioned over Ray workers
  (docs/how-to/scale-out.md; built by ``hotjoin.server.scaleout.factory.ShardedEngineFactory``).

The state format of ``export_state`` / ``load_state`` (server checkpoints, scale-out snapshots,
the head of a compacted log; docs/reference/persistence.md) is part of the contract:
:func:`subscription_columns` and :func:`subscriptions_from_columns` convert its subscription
columns from and to ``Subscription`` objects.

**Interval tuples and interval joins** (``Event.end``, ``IntervalJoin``; docs/design.md). The
one-process ``Engine`` carries each tuple's end wherever it carries its time:
``publish_batch(..., *, ends=None)``, ``publish_admitted(..., *, ends=None)``,
``restore_event_columns(..., payloads=None, *, ends=None)``, ``probe(..., end=None)``,
``probe_batch(..., *, ends=None)`` (None: points, ``end == time``), ``get_event`` (an ``Event``
with its ``end``), and the state: ``export_state()["ends"][side]`` (int64, the rows of
``tuples[side]``; a state without it holds points only) and the subscription columns'
:data:`INTERVAL_COLUMNS` (``ss_lo … ee_hi``, float64, ±inf unbounded, 0 for the other kinds; a
state without them holds no interval join). The members below keep their point-only
signatures until every implementation takes ``ends``; a caller that publishes intervals uses
the keyword. Retention drops a tuple once its end (not its time) falls behind the watermark by
more than the retention; an identical duplicate has the same end too. ``tests/matcher/test_contract.py`` checks every
implementation against this module. Nothing here imports network, Spark or Ray code.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence, Sized
from typing import Any, Protocol, runtime_checkable

import numpy as np

from hotjoin.matcher.batch import BatchResult
from hotjoin.matcher.model import (
    ENDPOINTS,
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
)
from hotjoin.matcher.subscriptions import INTERVAL_COLUMNS, KIND_CODE, interval_columns

SUBSCRIPTION_COLUMNS = ("sid", "kind", "a_lo", "a_hi", "b_lo", "b_hi", "c_lo", "c_hi", "w", "reg",
                        "snap")
"""The subscription columns of the state (``export_state()["subs"]``): id (increasing), kind code
(0 select, 1 band, 2 window, 3 interval), the range bounds (±inf where unbounded; B is 0 unless
a band or interval join), the window ``w`` (0 unless a window join), the registration seq and
the snapshot flag. Interval joins add :data:`INTERVAL_COLUMNS` (module docstring)."""

STATS_KEYS = ("seq", "watermark", "tuples", "subscriptions", "strategies", "tau", "hotspots",
              "decisions", "band", "select", "window")
"""The keys every ``stats()`` answer holds (the server's stats RPC and metrics read them;
docs/reference/metrics.md). A scale-out engine adds ``scheme`` and ``workers``."""


@runtime_checkable
class TopicEngine(Protocol):
    """One topic's state and operations in one total order, as the server drives it.

    Every accepted operation takes the next sequence number; a rejected one raises (or, in a
    batch, gets a status) and changes nothing, the sequence counter included.
    """

    @property
    def seq(self) -> int:
        """Sequence number of the last applied operation (0 before the first). Never raises."""
        ...

    @property
    def watermark(self) -> int | None:
        """The largest published event time minus ``lateness``; None before the first publish.
        Never raises."""
        ...

    @property
    def lateness(self) -> int:
        """The topic's lateness (event-time units, >= 0), as given to the factory."""
        ...

    @property
    def tables(self) -> Mapping[str, Sized]:
        """The stored tuples of each side ("R", "S"). The contract promises only
        ``len(tables[side])``: the number of tuples stored on that side now (O(1) for
        ``Engine``; one round trip to the workers for a scale-out engine, which answers with a
        snapshot of the counts). Never raises (a scale-out engine whose workers cannot be
        reached raises the server's ``Unavailable``)."""
        ...

    # -- events ------------------------------------------------------------------------------
    def publish_columnar(self, ev: Event) -> Matches:
        """Insert ``ev``; returns the +1 pairs it forms, one row per (subscription, pair).

        Raises ``DuplicateEventError`` (the id is stored on its side; checked first),
        ``LateEventError`` (time below the watermark) or ``ValueError`` (not an ``Event``, or
        more than ``max_advance`` ahead of the largest time); a raise changes nothing."""
        ...

    def publish_affected(self, ev: Event) -> Affected:
        """Insert ``ev``; returns each affected subscription with its number of new pairs
        (ascending subscription ids). Raises as ``publish_columnar``, changing nothing."""
        ...

    def publish_many(self, events: Iterable[Event], match: bool = True) -> list[Delivery]:
        """Publish in order; returns the +1 deliveries (``[]`` with ``match=False``: only the
        state changes, as when a log is replayed). The first rejected event raises
        ``BatchError(index, cause)``; the events before it stay applied, nothing after it is."""
        ...

    def publish_batch(self, sides: Any, ids: Any, keys: Any, values: Any, times: Any,
                      payloads: Any = None, *, output: str = "affected") -> BatchResult:
        """Publish a batch of columns exactly as ``publish`` one at a time in input order; a
        rejected event gets its status (LATE, DUPLICATE, INVALID) and reason, takes no
        sequence number and changes nothing. ``output``: "pairs", "affected" or "none".
        Raises ``ValueError`` for columns of different lengths or an unknown ``output``, before
        anything changes."""
        ...

    def delete(self, side: str, event_id: str, match: bool = True) -> list[Delivery]:
        """Remove a stored tuple; returns a −1 delivery for each pair a subscription had
        received (``[]`` with ``match=False``: state only, as when a log is replayed). Raises
        ``UnknownEventError`` (not stored) or ``ValueError`` (bad side, empty id), changing
        nothing."""
        ...

    def delete_columnar(self, side: str, event_id: str) -> Matches:
        """``delete`` with the −1 pairs as columns. Raises as ``delete``, changing nothing."""
        ...

    def delete_affected(self, side: str, event_id: str) -> Affected:
        """``delete`` with each affected subscription and its (negative) pair count. Raises as
        ``delete``, changing nothing."""
        ...

    def get_event(self, side: str, event_id: str) -> Event | None:
        """The stored event of ``side`` with ``event_id``, or None. Read only; raises
        ``ValueError`` for a side other than "R" or "S"."""
        ...

    # -- subscriptions -----------------------------------------------------------------------
    def subscribe_many(self, subs: Iterable[Subscription], snapshot: bool = False) -> list[int]:
        """Register ``subs`` in order, all or nothing; returns their ids (consecutive, never
        reused), each taking the next sequence number. ``snapshot``: each is also owed its
        current result (``result_columnar``). Raises ``ValueError`` (not a subscription) or the
        index's own error (``NotImplementedError`` for an unsupported one); a raise changes
        nothing."""
        ...

    def undo_subscribe(self, sids: np.ndarray, seq0: int) -> None:
        """Roll back the newest subscriptions ``sids`` (ascending; no other operation since
        they were registered) and set the sequence counter back to ``seq0``: their ids are
        handed out again. The server calls it when a later part of one subscribe request fails
        (all or nothing). Never raises for such ids."""
        ...

    def unsubscribe(self, sid: int) -> None:
        """Remove subscription ``sid`` (takes a sequence number, delivers nothing). Raises
        ``UnknownSubscriptionError`` for an id not registered, changing nothing."""
        ...

    def subscription(self, sid: int) -> Subscription:
        """The live subscription ``sid``. Read only; raises ``UnknownSubscriptionError``."""
        ...

    def result_columnar(self, sid: int) -> Matches:
        """Subscription ``sid``'s current result over the stored tuples, as +1 pairs (what a
        snapshot subscription is owed). Read only; raises ``UnknownSubscriptionError``."""
        ...

    # -- restore (server restart) --------------------------------------------------------------
    def restore_clock(self, seq: int, max_time: int | None) -> None:
        """Set the sequence counter and the largest event time seen (after restored tuples;
        expires nothing). Never raises for ints."""
        ...

    def restore_event_columns(self, side: str, ids: list[str], keys: np.ndarray,
                              values: np.ndarray, times: np.ndarray, seqs: np.ndarray,
                              payloads: list[bytes] | None = None) -> None:
        """Store new tuples of one side from columns with their original sequence numbers,
        without matching, watermark or retention (a log replay; ``restore_clock`` follows).
        Validated first, all or nothing: raises ``ValueError`` (columns of different lengths,
        non-finite key or value, empty or repeated id) or ``DuplicateEventError`` (an id
        already stored), changing nothing."""
        ...

    def export_state(self) -> dict[str, Any]:
        """Everything results depend on, as copies: ``seq``, ``max_time`` (None before the first
        publish), ``next_sid`` (the next subscription id), ``subs`` (the live subscriptions as
        the columns of ``SUBSCRIPTION_COLUMNS``, ids increasing) and ``tuples`` ("R" and "S" →
        ``(ids, keys, values, times, seqs, payloads)``, rows in no particular order). Read only
        (a scale-out engine first brings its workers to the topic's clock)."""
        ...

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Load ``export_state``'s output into this empty engine (made by a factory with the
        exporter's options): indexes are built anew, nothing is matched. Raises ``ValueError``,
        changing nothing, when the engine is not empty (a subscription id handed out or a tuple
        stored). A malformed state raises ``ValueError`` too, possibly after part of it was
        loaded: the caller drops that engine (docs/reference/persistence.md: an unusable checkpoint is
        set aside and the whole log replayed into a new one)."""
        ...

    # -- introspection ---------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Counters and gauges: at least the keys of ``STATS_KEYS`` (``tuples`` and
        ``subscriptions`` per side / kind, ``tau``, ``hotspots`` per kind, router ``decisions``,
        each kind's strategy stats with its ``corrections``). Read only."""
        ...


@runtime_checkable
class EngineFactory(Protocol):
    """What builds a topic's engine (``TopicSettings.engine_factory``): ``Engine`` itself, or
    ``ShardedEngineFactory``. Raises ``ValueError`` for a bad option (the server answers
    INVALID_ARGUMENT and creates nothing)."""

    def __call__(self, *, lateness: int, retention: int | None,
                 strategy: str | Mapping[str, str], max_advance: int | None) -> TopicEngine:
        """A new, empty engine with the topic's options (``max_advance`` None: no bound)."""
        ...


def subscription_columns(sids: Sequence[int], subs: Sequence[Subscription],
                         regs: Sequence[int], snaps: Sequence[bool]) -> dict[str, np.ndarray]:
    """The state's subscription columns (``SUBSCRIPTION_COLUMNS``) of the given subscriptions,
    ids ``sids`` (increasing), registered at ``regs`` with snapshot flags ``snaps``. O(n).

    >>> cols = subscription_columns([3], [BandJoin(b=Range(-1, 1))], [7], [False])
    >>> int(cols["kind"][0]), float(cols["b_hi"][0]), float(cols["a_lo"][0]), int(cols["reg"][0])
    (1, 1.0, -inf, 7)
    """
    n = len(subs)
    if not (len(sids) == len(regs) == len(snaps) == n):
        raise ValueError("subscription_columns: columns of different lengths")

    def bounds(ranges: list[Range]) -> tuple[np.ndarray, np.ndarray]:
        lo = np.array([-math.inf if r.lo is None else r.lo for r in ranges], dtype=np.float64)
        hi = np.array([math.inf if r.hi is None else r.hi for r in ranges], dtype=np.float64)
        return lo, hi

    zero = Range(0.0, 0.0)
    cols: dict[str, np.ndarray] = {
        "sid": np.asarray(sids, dtype=np.int64).reshape(-1),
        "kind": np.array([KIND_CODE[s.kind] for s in subs], dtype=np.int8)}
    cols["a_lo"], cols["a_hi"] = bounds([s.a for s in subs])
    cols["b_lo"], cols["b_hi"] = bounds([s.b if isinstance(s, (BandJoin, IntervalJoin)) else zero
                                         for s in subs])
    cols["c_lo"], cols["c_hi"] = bounds([s.c for s in subs])
    cols["w"] = np.array([s.w if isinstance(s, WindowJoin) else 0 for s in subs], dtype=np.int64)
    cols["reg"] = np.asarray(regs, dtype=np.int64).reshape(-1)
    cols["snap"] = np.asarray(snaps, dtype=np.bool_).reshape(-1)
    cols.update(interval_columns(list(subs)))
    return cols


def subscriptions_from_columns(cols: Mapping[str, np.ndarray]) -> list[Subscription]:
    """The ``Subscription`` objects of the state's subscription columns, in row order (±inf
    bounds become unbounded ends). Raises ``ValueError`` for an unknown kind code. O(n).

    >>> subs = [SelectJoin(a=Range(0, 5)), WindowJoin(c=Range(None, 2), w=4),
    ...         IntervalJoin.allen("meets", b=Range(0, 0))]
    >>> subscriptions_from_columns(subscription_columns([0, 1, 2], subs, [1, 2, 3],
    ...                                                 [False, True, False])) == subs
    True
    """
    def rng(lo: float, hi: float) -> Range:
        return Range(None if lo == -math.inf else lo, None if hi == math.inf else hi)

    names = ("kind", "a_lo", "a_hi", "b_lo", "b_hi", "c_lo", "c_hi", "w")
    rows = zip(*(np.asarray(cols[k]).tolist() for k in names), strict=True)
    select, band, window = KIND_CODE["select"], KIND_CODE["band"], KIND_CODE["window"]
    interval = KIND_CODE["interval"]
    has_ends = INTERVAL_COLUMNS[0] in cols
    ends = (list(zip(*(np.asarray(cols[k]).tolist() for k in INTERVAL_COLUMNS), strict=True))
            if has_ends else [])
    out: list[Subscription] = []
    for i, (kind, a_lo, a_hi, b_lo, b_hi, c_lo, c_hi, w) in enumerate(rows):
        if kind == select:
            out.append(SelectJoin(rng(a_lo, a_hi), rng(c_lo, c_hi)))
        elif kind == band:
            out.append(BandJoin(rng(b_lo, b_hi), rng(a_lo, a_hi), rng(c_lo, c_hi)))
        elif kind == window:
            out.append(WindowJoin(rng(a_lo, a_hi), rng(c_lo, c_hi), int(w)))
        elif kind == interval:
            if not has_ends:
                raise ValueError("interval subscriptions need the endpoint columns "
                                 + ", ".join(INTERVAL_COLUMNS))
            e = ends[i]
            endpoints = {name: rng(e[2 * j], e[2 * j + 1]) for j, name in enumerate(ENDPOINTS)}
            out.append(IntervalJoin(rng(b_lo, b_hi), rng(a_lo, a_hi), rng(c_lo, c_hi),
                                    **endpoints))
        else:
            raise ValueError(f"unknown subscription kind code {kind!r}")
    return out


__all__ = ["INTERVAL_COLUMNS", "STATS_KEYS", "SUBSCRIPTION_COLUMNS", "EngineFactory", "TopicEngine",
           "subscription_columns", "subscriptions_from_columns"]
