"""What the client returns: small frozen dataclasses, never protobuf messages.

Calls return ``Topic``, ``SubscriptionInfo``, ``PublishResult`` (with one ``EventResult`` per
event), ``DeleteResult``, ``Cursors`` (of ``CommittedCursor``) and ``TopicStats``; a listener
yields ``Match``, ``MatchBatch``, ``Gap``, ``CaughtUp`` and ``Unsubscribed``, each with a
``kind`` naming it (or test it with ``isinstance``). Field names are those of
``proto/hotjoin/v1/hotjoin.proto``; an optional field the server left unset is ``None``, a side
is ``"R"`` or ``"S"``, a status code its name (``"OK"``, ``"LATE"``, ...).

Each result keeps the message it was decoded from in ``wire`` (left out of ``repr`` and of
comparisons): what ``hotjoin`` prints as JSON; application code needs none of it.

>>> r = PublishResult(statuses=(EventResult("OK", "r1", 4), EventResult("LATE", "r2", reason="late")),
...                   accepted=1, rejected=1)
>>> [s.id for s in r.rejections], r.statuses[0].ok
(['r2'], True)
>>> m = Match(subscription_id=0, seq=4, sign=1, count=1, pairs=(("r1", "s1"),), op="publish",
...           event=EventRef("R", "r1"))
>>> m.kind, m.pairs[0], m.event.id
('match', ('r1', 's1'), 'r1')
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from hotjoin.clients.columns import MatchColumns
    from hotjoin.matcher.model import BandJoin, SelectJoin, WindowJoin


def _wire() -> Any:
    return field(default=None, repr=False, compare=False)


# ---- topics and subscriptions ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Topic:
    """A topic and its options (``hotjoin topic get``): allowed disorder ``lateness``,
    tuple ``retention`` (None: until deleted), ``strategy`` per join kind, last applied ``seq``,
    delivery retention of its match log (``docs/reference/persistence.md``), ``max_advance`` (0: no
    bound) and ``damaged`` (the reason, empty for a healthy topic)."""

    name: str
    lateness: int = 0
    retention: int | None = None
    strategy: Mapping[str, str] = field(default_factory=dict)
    seq: int = 0
    delivery_retention_bytes: int = 0
    delivery_retention_ms: int = 0
    max_advance: int = 0
    damaged: str = ""
    wire: Any = _wire()


@dataclass(frozen=True, slots=True)
class SubscriptionInfo:
    """A live subscription (``list_subscriptions``): its id, the join as the engine's type
    (``SelectJoin``, ``BandJoin``, ``WindowJoin``), subscriber, ``delivery`` (``"pairs"`` or
    ``"affected"``), ``snapshot`` and the topic seq it was registered at."""

    subscription_id: int
    spec: SelectJoin | BandJoin | WindowJoin
    subscriber: str = ""
    delivery: str = "pairs"
    snapshot: bool = False
    registered_seq: int = 0
    wire: Any = _wire()

    @property
    def kind(self) -> str:
        """The join kind: ``"select"``, ``"band"`` or ``"window"``."""
        return str(self.spec.kind)


# ---- publishing ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EventResult:
    """The server's answer for one event: ``code`` (``"OK"``, ``"LATE"``, ``"DUPLICATE"``,
    ``"INVALID"``, ``"NOT_FOUND"``), the event ``id`` (the assigned one for an empty id), the
    ``seq`` it took (0 when rejected), the ``reason`` of a rejection, its ``index`` in the batch
    and, for a DUPLICATE, whether the stored event is ``identical`` (a re-sent event)."""

    code: str
    id: str = ""
    seq: int = 0
    reason: str = ""
    index: int = 0
    identical: bool = False

    @property
    def ok(self) -> bool:
        """Whether the event was applied."""
        return self.code == "OK"


@dataclass(frozen=True, slots=True)
class PublishResult:
    """The answer to one published batch, once its applied events are durable.

    ``statuses``: one per event for a batch of events; for a columnar batch the rejected events
    only (each with its ``index``), the accepted ones having taken the consecutive seqs
    ``first_seq..last_seq`` in batch order. ``assigned``: batch index → the id the server gave
    an event sent with an empty id (columnar batches).
    """

    statuses: tuple[EventResult, ...] = ()
    accepted: int = 0
    rejected: int = 0
    first_seq: int = 0
    last_seq: int = 0
    assigned: Mapping[int, str] = field(default_factory=dict)
    wire: Any = _wire()

    @property
    def rejections(self) -> list[EventResult]:
        """The statuses of the rejected events (identical duplicates included)."""
        return [s for s in self.statuses if s.code != "OK"]


@dataclass(frozen=True, slots=True)
class DeleteResult:
    """The answer to ``delete_events``: one status per event (``"OK"`` or ``"NOT_FOUND"``)."""

    statuses: tuple[EventResult, ...] = ()
    wire: Any = _wire()

    @property
    def deleted(self) -> int:
        """How many events were deleted."""
        return sum(s.code == "OK" for s in self.statuses)

    @property
    def rejections(self) -> list[EventResult]:
        """The statuses of the events not deleted."""
        return [s for s in self.statuses if s.code != "OK"]


# ---- cursors and stats --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommittedCursor:
    """One subscription's committed position (None: never committed) and its ``lag`` behind its
    newest message, with the messages (and bytes) owed to it that no listener has received."""

    subscription_id: int
    subscriber: str = ""
    committed_seq: int | None = None
    lag: int | None = None
    pending_messages: int = 0
    pending_bytes: int = 0
    newest_seq: int = 0
    wire: Any = _wire()


@dataclass(frozen=True, slots=True)
class Cursors:
    """The topic's sequence number and its subscriptions' ``CommittedCursor`` (``get_cursors``)."""

    seq: int
    cursors: tuple[CommittedCursor, ...] = ()
    wire: Any = _wire()

    def __iter__(self) -> Iterator[CommittedCursor]:
        return iter(self.cursors)

    def __len__(self) -> int:
        return len(self.cursors)


@dataclass(frozen=True, slots=True)
class DeliveryStats:
    """Undelivered messages in memory and on disk, and the committed cursors (aggregated)."""

    buffer_bytes: int = 0
    buffer_limit_bytes: int = 0
    buffer_messages: int = 0
    match_log_bytes: int = 0
    retained_from_seq: int = 0
    committed_cursors: int = 0
    cursor_lag_sum: int = 0
    cursor_lag_max: int = 0


@dataclass(frozen=True, slots=True)
class WorkerStats:
    """One scale-out worker (``hotjoin serve --workers N``; docs/how-to/scale-out.md)."""

    worker: int
    healthy: bool = True
    seq: int = 0
    lag: int = 0
    memory_bytes: int = 0
    restarts: int = 0
    subscriptions: int = 0


@dataclass(frozen=True, slots=True)
class TopicStats:
    """A topic's sizes and engine figures (``hotjoin stats``): stored ``tuples`` per side, live
    ``subscriptions``, stabbing number ``tau`` and ``hotspots`` per kind, router ``decisions``
    per strategy, attached ``listeners``, delivery figures and scale-out workers."""

    topic: str
    seq: int = 0
    watermark: int | None = None
    tuples: Mapping[str, int] = field(default_factory=dict)
    subscriptions: Mapping[str, int] = field(default_factory=dict)
    tau: Mapping[str, int] = field(default_factory=dict)
    hotspots: Mapping[str, int] = field(default_factory=dict)
    decisions: Mapping[str, int] = field(default_factory=dict)
    listeners: int = 0
    delivery: DeliveryStats = field(default_factory=DeliveryStats)
    workers: tuple[WorkerStats, ...] = ()
    scale_out_scheme: str = ""
    wire: Any = _wire()


# ---- what a listener yields ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EventRef:
    """An event by side (``"R"`` or ``"S"``) and id: what ``delete_events`` takes and what a
    ``Match`` names as its trigger."""

    side: str
    id: str


@dataclass(frozen=True, slots=True)
class Match:
    """What one operation changed in one subscription's result: ``count`` pairs gained
    (``sign`` +1: publish, snapshot) or lost (−1: delete) at topic ``seq``; ``pairs`` lists them
    as ``(r_id, s_id)`` for a PAIRS subscription (empty for AFFECTED). ``event`` is the event
    that triggered it (None for a snapshot); ``seq`` is the subscription's resume cursor."""

    kind: ClassVar[str] = "match"

    subscription_id: int
    seq: int
    sign: int = 1
    count: int = 0
    pairs: tuple[tuple[str, str], ...] = ()
    op: str = ""
    event: EventRef | None = None
    received_unix_nanos: int = 0
    wire: Any = _wire()


@dataclass(frozen=True, slots=True)
class Operation:
    """The operation rows of a ``MatchBatch`` refer to (shared by every subscription it hit)."""

    op: str
    event: EventRef | None = None
    received_unix_nanos: int = 0


class MatchBatch:
    """Many matches in one message (``listen(batch=True)``), as columns: row ``i`` is
    subscription ``subscription_ids[i]``'s match at ``seqs[i]`` with ``signs[i]`` and
    ``counts[i]``, triggered by ``ops[op_index[i]]``; with ``batch_pairs`` its pairs are the next
    ``pair_counts[i]`` entries of ``r_ids``/``s_ids``.

    The columns are read-only sequences read straight from the message (no Python object per
    row); ``rows()`` (or iterating) gives one ``Match`` per row, ``columns()`` numpy arrays. A
    columnar message (``ListenRequest.columnar``) answers the same properties with numpy
    arrays over its bytes.
    """

    kind: ClassVar[str] = "matches"
    __slots__ = ("wire",)

    def __init__(self, wire: Any) -> None:
        self.wire = wire

    def __repr__(self) -> str:
        return f"MatchBatch({len(self)} rows)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MatchBatch) and self.wire == other.wire

    __hash__ = None  # type: ignore[assignment]

    def __len__(self) -> int:
        if self.wire.HasField("columns"):
            return len(self.wire.columns.subscription_ids) // 8
        return len(self.wire.subscription_ids)

    def __iter__(self) -> Iterator[Match]:
        return iter(self.rows())

    def _col(self, name: str) -> Any:
        """A row column of either form: the repeated field, or the columnar message's array."""
        if not self.wire.HasField("columns"):
            return getattr(self.wire, name)
        c = self.columns()
        if name == "op_index":
            return c.pair_row[:0] if len(c) == 0 else _op_index(self.wire.columns)
        if name == "pair_counts":
            off = c.pair_offsets
            return off[1:] - off[:-1] if len(c.pair_row) else c.pair_row[:0]
        return {"subscription_ids": c.subscription_id, "seqs": c.seq, "signs": c.sign,
                "counts": c.count, "r_ids": c.r_id, "s_ids": c.s_id}[name]

    @property
    def subscription_ids(self) -> Sequence[int]:
        """Row i's subscription."""
        return self._col("subscription_ids")  # type: ignore[no-any-return]

    @property
    def seqs(self) -> Sequence[int]:
        """Row i's topic sequence number (its subscription's resume cursor)."""
        return self._col("seqs")  # type: ignore[no-any-return]

    @property
    def signs(self) -> Sequence[int]:
        """Row i's sign: +1 gained, −1 lost."""
        return self._col("signs")  # type: ignore[no-any-return]

    @property
    def counts(self) -> Sequence[int]:
        """Row i's number of pairs."""
        return self._col("counts")  # type: ignore[no-any-return]

    @property
    def op_index(self) -> Sequence[int]:
        """Row i's operation, an index into ``ops``."""
        return self._col("op_index")  # type: ignore[no-any-return]

    @property
    def ops(self) -> tuple[Operation, ...]:
        """The operations the rows refer to."""
        if self.wire.HasField("columns"):
            c = self.wire.columns
            kinds = ("publish", "delete", "snapshot")
            eids = self.columns()._opcols[3].to_pylist()  # noqa: SLF001
            return tuple(Operation(kinds[k], EventRef("RS"[sd - 1], e) if sd in (1, 2) else None,
                                   int(t))
                         for k, sd, e, t in zip(c.op_kinds, c.op_sides, eids,
                                                _i64(c.op_received_unix_nanos), strict=True))
        from hotjoin.clients.convert import operation_of

        return tuple(operation_of(o) for o in self.wire.ops)

    @property
    def pair_counts(self) -> Sequence[int]:
        """Row i's number of pairs among ``r_ids``/``s_ids`` (empty without ``batch_pairs``)."""
        return self._col("pair_counts")  # type: ignore[no-any-return]

    @property
    def r_ids(self) -> Sequence[str]:
        """The pairs' R ids, row after row."""
        return self._col("r_ids")  # type: ignore[no-any-return]

    @property
    def s_ids(self) -> Sequence[str]:
        """The pairs' S ids, row after row."""
        return self._col("s_ids")  # type: ignore[no-any-return]

    def rows(self) -> list[Match]:
        """One ``Match`` per row, in order (a convenience: one Python object per row)."""
        if self.wire.HasField("columns"):
            return _column_rows(self.columns())
        from hotjoin.clients.convert import batch_rows

        return batch_rows(self.wire)

    def columns(self) -> MatchColumns:
        """The rows as numpy columns (``MatchColumns``; ``.to_arrow()`` for Arrow)."""
        from hotjoin.clients.columns import MatchColumns

        return MatchColumns.of_batch(self.wire)


def _i64(b: bytes) -> list[int]:
    import numpy as np

    return np.frombuffer(b, dtype="<i8").tolist()  # type: ignore[no-any-return]


def _op_index(c: Any) -> Any:
    import numpy as np

    return np.frombuffer(c.op_index, dtype="<u4")


def _column_rows(c: MatchColumns) -> list[Match]:
    """One ``Match`` per row of columns (built only when asked for)."""
    off = c.pair_offsets.tolist()
    r, s = c.r_id.tolist(), c.s_id.tolist()
    out = []
    for i, (sid, seq, sign, count, op, side, eid, rns) in enumerate(zip(
            c.subscription_id.tolist(), c.seq.tolist(), c.sign.tolist(), c.count.tolist(),
            c.op.tolist(), c.event_side.tolist(), c.event_id.tolist(),
            c.received_unix_nanos.tolist(), strict=True)):
        a, b = off[i], off[i + 1]
        out.append(Match(subscription_id=sid, seq=seq, sign=sign, count=count,
                         pairs=tuple(zip(r[a:b], s[a:b], strict=True)), op=op,
                         event=EventRef(side, eid) if side else None, received_unix_nanos=rns))
    return out


@dataclass(frozen=True, slots=True)
class Gap:
    """Messages ``from_seq..to_seq`` of a subscription are no longer retained (evicted or beyond
    the topic's delivery retention; ``docs/reference/persistence.md``); ``reason`` says which."""

    kind: ClassVar[str] = "gap"

    subscription_id: int
    from_seq: int
    to_seq: int
    reason: str = ""
    wire: Any = _wire()


@dataclass(frozen=True, slots=True)
class CaughtUp:
    """The listener has received everything retained when it started, up to topic ``seq``
    (sent once per connection); live matches follow."""

    kind: ClassVar[str] = "caught_up"

    seq: int
    wire: Any = _wire()


@dataclass(frozen=True, slots=True)
class Unsubscribed:
    """The subscription was removed at ``seq``; no more messages follow for it."""

    kind: ClassVar[str] = "unsubscribed"

    subscription_id: int
    seq: int
    wire: Any = _wire()


ListenItem = Match | MatchBatch | Gap | CaughtUp | Unsubscribed
"""Anything ``Client.listen`` yields."""

__all__ = [
    "CaughtUp", "CommittedCursor", "Cursors", "DeleteResult", "DeliveryStats", "EventRef",
    "EventResult", "Gap", "ListenItem", "Match", "MatchBatch", "Operation", "PublishResult",
    "SubscriptionInfo", "Topic", "TopicStats", "Unsubscribed", "WorkerStats",
]
