"""Between the engine's value types and the wire: specs and events out, typed results in.

Out: ``spec_to_wire`` turns the engine's ``SelectJoin``, ``BandJoin``, ``WindowJoin`` and
``IntervalJoin`` (with the subscription options ``subscriber``, ``delivery``, ``snapshot``) into
a ``SubscriptionSpec``, and back with ``spec_of``; ``event_to_wire`` an ``Event`` (an interval
event with its ``end``; a point has none on the wire). Each join kind is one row of
``JOIN_KINDS`` (its class, the ``SubscriptionSpec`` field, its range, integer, integer-range and
text parameters), read the same way in both directions, so a new kind is one more row.

>>> from hotjoin.matcher.model import IntervalJoin
>>> j = IntervalJoin.iseql("left_overlap", delta=5, eps=3, b=Range(0, 0))
>>> w = spec_to_wire(j)
>>> w.interval.ss.hi, w.interval.preset, spec_of(w) == j, spec_of(w).preset
(5, 'iseql:left_overlap(5,3)', True, 'iseql:left_overlap(5,3)')

>>> from hotjoin.matcher.model import BandJoin, Range
>>> wire = spec_to_wire(BandJoin(b=Range(-1, 1)), subscriber="me", delivery="affected")
>>> wire.WhichOneof("kind"), wire.band.b.hi, wire.subscriber
('band', 1.0, 'me')
>>> spec_of(wire) == BandJoin(b=Range(-1, 1))
True

The helpers ``select``, ``band``, ``window``, ``event`` and ``ref`` are kept as thin
conveniences that build the wire messages directly (ranges as ``(lo, hi)`` tuples; ``event``
with an empty id or no time leaves them to the server, which the engine's ``Event`` cannot
express); every client call takes them as well as the engine's types.

In: ``topic_of``, ``publish_result_of``, ``listen_item_of``, ... decode the server's answers
into the frozen dataclasses of ``hotjoin.clients.results``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hotjoin.clients.errors import InvalidArgument
from hotjoin.clients.results import (
    CaughtUp,
    CommittedCursor,
    Cursors,
    DeleteResult,
    DeliveryStats,
    EventRef,
    EventResult,
    Gap,
    ListenItem,
    Match,
    MatchBatch,
    Operation,
    PublishResult,
    SubscriptionInfo,
    Topic,
    TopicStats,
    Unsubscribed,
    WorkerStats,
)
from hotjoin.matcher.model import BandJoin, Event, IntervalJoin, Range, SelectJoin, WindowJoin
from hotjoin.proto import hotjoin_pb2 as pb

RangeLike = tuple[float | None, float | None] | Range | pb.Range | None
SIDES = {"R": pb.SIDE_R, "S": pb.SIDE_S}
SIDE_NAMES = {pb.SIDE_R: "R", pb.SIDE_S: "S"}
DELIVERY = {"pairs": pb.PAIRS, "affected": pb.AFFECTED}
DELIVERY_NAMES = {pb.PAIRS: "pairs", pb.AFFECTED: "affected", pb.DELIVERY_MODE_UNSPECIFIED: "pairs"}
STATUS_NAMES: dict[int, str] = {v: k for k, v in pb.EventStatusCode.items()}
"""Wire status number → name (``pb.OK`` → ``"OK"``)."""


@dataclass(frozen=True)
class JoinKind:
    """One kind of join as the engine and the wire spell it: the engine's class, the
    ``SubscriptionSpec`` oneof field, its ``Range`` parameters and its integer parameters."""

    cls: type
    field: str
    ranges: tuple[str, ...]
    ints: tuple[str, ...] = ()
    int_ranges: tuple[str, ...] = ()  # ``IntRange`` fields (integer bounds)
    texts: tuple[str, ...] = ()  # string fields; "" on the wire is None in the engine's type


JOIN_KINDS: tuple[JoinKind, ...] = (
    JoinKind(SelectJoin, "select", ("a", "c")),
    JoinKind(BandJoin, "band", ("b", "a", "c")),
    JoinKind(WindowJoin, "window", ("a", "c"), ("w",)),
    JoinKind(IntervalJoin, "interval", ("b", "a", "c"), (), ("ss", "se", "es", "ee"), ("preset",)),
)
_BY_CLASS = {k.cls: k for k in JOIN_KINDS}
_BY_FIELD = {k.field: k for k in JOIN_KINDS}

JoinSpec = SelectJoin | BandJoin | WindowJoin | IntervalJoin
SpecLike = JoinSpec | pb.SubscriptionSpec
EventLike = Event | pb.Event
RefLike = EventRef | tuple[str, str] | pb.EventRef


# ---- out: to the wire -------------------------------------------------------------------------


def rng(r: RangeLike) -> pb.Range:
    """A wire ``Range`` of ``(lo, hi)`` (``None`` for an unbounded side), a ``Range`` or None.

    >>> rng((None, 2.5)).HasField("lo"), rng(Range(0, 1)).hi
    (False, 1.0)
    """
    if r is None:
        return pb.Range()
    if isinstance(r, pb.Range):
        return r
    lo, hi = (r.lo, r.hi) if isinstance(r, Range) else r
    out = pb.Range()
    if lo is not None:
        out.lo = float(lo)
    if hi is not None:
        out.hi = float(hi)
    return out


def irng(r: RangeLike) -> pb.IntRange:
    """A wire ``IntRange`` (an interval join's endpoint range) of ``(lo, hi)``, a ``Range`` or
    None; the bounds must be integers (``ValueError`` otherwise).

    >>> irng((1, None)).lo, irng((1, None)).HasField("hi")
    (1, False)
    """
    if r is None:
        return pb.IntRange()
    if isinstance(r, pb.IntRange):
        return r
    lo, hi = (r.lo, r.hi) if isinstance(r, (Range, pb.Range)) else r
    out = pb.IntRange()
    for name, x in (("lo", lo), ("hi", hi)):
        if x is None or (isinstance(r, pb.Range) and not r.HasField(name)):
            continue
        if isinstance(x, bool) or not float(x).is_integer():
            raise ValueError(f"an endpoint range's bounds are integers, got {x!r}")
        setattr(out, name, int(x))
    return out


def _options(spec: pb.SubscriptionSpec, subscriber: str | None, delivery: str | None,
             snapshot: bool | None) -> None:
    if delivery is not None:
        mode = DELIVERY.get(str(delivery).lower())
        if mode is None:
            raise InvalidArgument(f"delivery must be 'pairs' or 'affected', got {delivery!r}")
        spec.delivery = mode
    if snapshot is not None:
        spec.snapshot = bool(snapshot)
    if subscriber is not None:
        if not isinstance(subscriber, str):
            raise TypeError(f"subscriber must be a string, got {type(subscriber).__name__}")
        spec.subscriber = subscriber


def spec_to_wire(spec: SpecLike, *, subscriber: str | None = None, delivery: str | None = None,
                 snapshot: bool | None = None) -> pb.SubscriptionSpec:
    """The ``SubscriptionSpec`` of a join (engine type) with its options.

    A prebuilt ``SubscriptionSpec`` (from ``band(...)`` etc.) keeps its own options except the
    ones given (not None), which replace them in a copy (without any, it is used as it is).
    Options left None take the defaults: no subscriber, ``"pairs"`` delivery, no snapshot.
    ``TypeError`` for anything else, ``InvalidArgument`` (a ``ValueError``) for a bad option.
    """
    if isinstance(spec, pb.SubscriptionSpec):
        if subscriber is None and delivery is None and snapshot is None:
            return spec  # as it is: no copy per spec of a bulk subscribe
        out = pb.SubscriptionSpec()
        out.CopyFrom(spec)
    else:
        kind = _BY_CLASS.get(type(spec))
        if kind is None:
            raise TypeError(f"a subscription is a {', '.join(k.cls.__name__ for k in JOIN_KINDS)}"
                            f" (hotjoin.matcher.model), got {type(spec).__name__}")
        out = pb.SubscriptionSpec(delivery=pb.PAIRS)
        body = getattr(out, kind.field)
        for name in kind.ranges:
            getattr(body, name).CopyFrom(rng(getattr(spec, name)))
        for name in kind.ints:
            setattr(body, name, int(getattr(spec, name)))
        for name in kind.int_ranges:
            getattr(body, name).CopyFrom(irng(getattr(spec, name)))
        for name in kind.texts:
            setattr(body, name, getattr(spec, name) or "")
        body.SetInParent()
    _options(out, subscriber, delivery, snapshot)
    return out


def event_to_wire(ev: EventLike) -> pb.Event:
    """The wire ``Event`` of an engine ``Event`` (a wire one is passed through); an interval
    event carries its ``end``, a point none.

    >>> event_to_wire(Event("R", "r1", 1.0, 2.0, 5, end=9)).end
    9
    """
    if isinstance(ev, pb.Event):
        return ev
    if not isinstance(ev, Event):
        raise TypeError(f"an event is a hotjoin Event (or event(...)), got {type(ev).__name__}")
    out = pb.Event(side=SIDES[ev.side], id=ev.id, key=ev.key, value=ev.value, time=ev.time,
                   payload=bytes(ev.payload))
    end = getattr(ev, "end", None)
    if end is not None and end != ev.time:
        out.end = int(end)
    return out


def ref_to_wire(r: RefLike) -> pb.EventRef:
    """The wire ``EventRef`` of an ``EventRef``, a ``(side, id)`` pair or an ``Event``."""
    if isinstance(r, pb.EventRef):
        return r
    if isinstance(r, (EventRef, Event)):
        side, eid = r.side, r.id
    else:
        try:
            side, eid = r
        except (TypeError, ValueError):
            raise TypeError(f"an event reference is EventRef(side, id) or a (side, id) pair, "
                            f"got {r!r}") from None
    if side not in SIDES:
        raise ValueError(f"side must be 'R' or 'S', got {side!r}")
    return pb.EventRef(side=SIDES[side], id=str(eid))


def _legacy(spec: Any, delivery: str, snapshot: bool, subscriber: str) -> pb.SubscriptionSpec:
    out = spec_to_wire(spec) if not isinstance(spec, pb.SubscriptionSpec) else spec
    _options(out, subscriber, delivery, snapshot)
    return out


def select(a: RangeLike = None, c: RangeLike = None, *, delivery: str = "pairs",
           snapshot: bool = False, subscriber: str = "") -> pb.SubscriptionSpec:
    """Convenience: the wire spec of ``SelectJoin(a, c)`` (r.key == s.key, r.value ∈ a, s.value
    ∈ c) with its options; ranges as ``(lo, hi)`` tuples."""
    out = pb.SubscriptionSpec()
    out.select.a.CopyFrom(rng(a))
    out.select.c.CopyFrom(rng(c))
    return _legacy(out, delivery, snapshot, subscriber)


def band(b: RangeLike = None, a: RangeLike = None, c: RangeLike = None, *,
         delivery: str = "pairs", snapshot: bool = False, subscriber: str = "") -> pb.SubscriptionSpec:
    """Convenience: the wire spec of ``BandJoin(b, a, c)`` (s.key − r.key ∈ b, r.value ∈ a,
    s.value ∈ c) with its options.

    >>> band((-1, 1), subscriber="me").band.b.lo
    -1.0
    """
    out = pb.SubscriptionSpec()
    out.band.b.CopyFrom(rng(b))
    out.band.a.CopyFrom(rng(a))
    out.band.c.CopyFrom(rng(c))
    return _legacy(out, delivery, snapshot, subscriber)


def window(a: RangeLike = None, c: RangeLike = None, w: int = 0, *, delivery: str = "pairs",
           snapshot: bool = False, subscriber: str = "") -> pb.SubscriptionSpec:
    """Convenience: the wire spec of ``WindowJoin(a, c, w)`` (select-join condition and
    |r.time − s.time| ≤ w) with its options."""
    out = pb.SubscriptionSpec()
    out.window.a.CopyFrom(rng(a))
    out.window.c.CopyFrom(rng(c))
    out.window.w = int(w)
    return _legacy(out, delivery, snapshot, subscriber)


def event(side: str, id: str, key: float, value: float, time: int | None = None,
          payload: bytes = b"", end: int | None = None) -> pb.Event:
    """Convenience: a wire event of side ``"R"`` or ``"S"``; an empty ``id`` or no ``time``
    leaves them to the server (its clock in milliseconds), which an ``Event`` cannot express;
    ``end``: an interval event ``[time, end]`` (None: a point).

    >>> event("R", "", 1.0, 2.0).HasField("time"), event("S", "s", 1.0, 2.0, 3, end=7).end
    (False, 7)
    """
    if side not in SIDES:
        raise ValueError(f"side must be 'R' or 'S', got {side!r}")
    out = pb.Event(side=SIDES[side], id=id, key=key, value=value, payload=payload)
    if time is not None:
        out.time = int(time)
    if end is not None:
        out.end = int(end)
    return out


def ref(side: str, id: str) -> pb.EventRef:
    """Convenience: the wire reference of stored event ``(side, id)`` (``delete_events`` also
    takes ``EventRef(side, id)`` or a plain ``(side, id)`` pair)."""
    return ref_to_wire((side, id))


# ---- requests both clients build ----------------------------------------------------------------


def create_topic_request(name: str, lateness: int = 0, retention: int | None = None,
                         strategy: Mapping[str, str] | None = None,
                         delivery_retention_bytes: int | None = None,
                         delivery_retention_ms: int | None = None,
                         max_advance: int | None = None) -> pb.CreateTopicRequest:
    """The ``CreateTopicRequest``; options left None are left to the server's defaults."""
    req = pb.CreateTopicRequest(name=name, lateness=lateness, strategy=dict(strategy or {}))
    if retention is not None:
        req.retention = retention
    if delivery_retention_bytes is not None:
        req.delivery_retention_bytes = delivery_retention_bytes
    if delivery_retention_ms is not None:
        req.delivery_retention_ms = delivery_retention_ms
    if max_advance is not None:
        req.max_advance = max_advance
    return req


def cursor_list(cursors: Mapping[int, int] | None) -> list[pb.Cursor]:
    """Wire cursors of ``{subscription id: after seq}``."""
    return [pb.Cursor(subscription_id=s, after_seq=q) for s, q in (cursors or {}).items()]


def listen_request(topic: str, subscriber: str = "", subscription_ids: Iterable[int] = (),
                   cursors: Mapping[int, int] | None = None, from_latest: bool = False,
                   batch: bool = False, batch_pairs: bool = False, ignore_committed: bool = False,
                   after_seq: int | None = None) -> pb.ListenRequest:
    """The ``ListenRequest`` (``after_seq``: where subscriptions without a cursor start)."""
    req = pb.ListenRequest(topic=topic, subscriber=subscriber, subscription_ids=list(subscription_ids),
                           from_latest=from_latest, batch=batch, batch_pairs=batch_pairs,
                           ignore_committed=ignore_committed, cursors=cursor_list(cursors))
    if after_seq is not None:
        req.default_after_seq = after_seq
    return req


def commit_request(topic: str, cursors: Mapping[int, int] | None = None, subscriber: str = "",
                   after_seq: int | None = None) -> pb.CommitCursorsRequest:
    """The ``CommitCursorsRequest``."""
    req = pb.CommitCursorsRequest(topic=topic, subscriber=subscriber, cursors=cursor_list(cursors))
    if after_seq is not None:
        req.after_seq = after_seq
    return req


def columns_item(item: ListenItem) -> Any:
    """What ``listen_columns`` yields for a listen item: matches as ``MatchColumns``, the other
    items as they are."""
    from hotjoin.clients.columns import MatchColumns

    if isinstance(item, MatchBatch):
        return MatchColumns.of_batch(item.wire)
    if isinstance(item, Match):
        return MatchColumns.of_match(item)
    return item


# ---- in: typed results of the server's answers --------------------------------------------------


def range_of(r: pb.Range) -> Range:
    """The ``Range`` of a wire range (an absent bound: unbounded)."""
    return Range(r.lo if r.HasField("lo") else None, r.hi if r.HasField("hi") else None)


def int_range_of(r: pb.IntRange) -> Range:
    """The ``Range`` (integer bounds) of a wire ``IntRange`` (an absent bound: unbounded)."""
    return Range(r.lo if r.HasField("lo") else None, r.hi if r.HasField("hi") else None)


def spec_of(spec: pb.SubscriptionSpec) -> JoinSpec:
    """The engine's join of a wire ``SubscriptionSpec`` (options left out)."""
    name = spec.WhichOneof("kind")
    kind = _BY_FIELD.get(name or "")
    if kind is None:
        raise ValueError(f"subscription spec without a known join kind ({name!r})")
    body = getattr(spec, kind.field)
    args: dict[str, Any] = {n: range_of(getattr(body, n)) for n in kind.ranges}
    args.update({n: int(getattr(body, n)) for n in kind.ints})
    args.update({n: int_range_of(getattr(body, n)) for n in kind.int_ranges})
    args.update({n: getattr(body, n) or None for n in kind.texts})
    return kind.cls(**args)  # type: ignore[no-any-return]


def topic_of(t: pb.Topic) -> Topic:
    """A ``Topic`` of the wire message."""
    return Topic(name=t.name, lateness=int(t.lateness),
                 retention=int(t.retention) if t.HasField("retention") else None,
                 strategy=dict(t.strategy), seq=int(t.seq),
                 delivery_retention_bytes=int(t.delivery_retention_bytes),
                 delivery_retention_ms=int(t.delivery_retention_ms),
                 max_advance=int(t.max_advance), damaged=t.damaged, wire=t)


def subscription_of(s: pb.Subscription) -> SubscriptionInfo:
    """A ``SubscriptionInfo`` of the wire message."""
    return SubscriptionInfo(subscription_id=int(s.subscription_id), spec=spec_of(s.spec),
                            subscriber=s.spec.subscriber,
                            delivery=DELIVERY_NAMES.get(s.spec.delivery, "pairs"),
                            snapshot=bool(s.spec.snapshot), registered_seq=int(s.registered_seq),
                            wire=s)


def status_of(s: pb.EventStatus) -> EventResult:
    """An ``EventResult`` of a wire ``EventStatus``."""
    return EventResult(code=STATUS_NAMES.get(s.code, str(s.code)), id=s.id, seq=int(s.seq),
                       reason=s.reason, index=int(s.index), identical=bool(s.identical))


def statuses_of(statuses: Iterable[pb.EventStatus]) -> tuple[EventResult, ...]:
    """``status_of`` each."""
    names = STATUS_NAMES
    return tuple(EventResult(names.get(s.code, str(s.code)), s.id, s.seq, s.reason, s.index,
                             s.identical) for s in statuses)


def publish_result_of(r: pb.PublishResponse) -> PublishResult:
    """A ``PublishResult`` of the wire answer."""
    return PublishResult(statuses=statuses_of(r.statuses), accepted=int(r.accepted),
                         rejected=int(r.rejected), first_seq=int(r.first_seq),
                         last_seq=int(r.last_seq), assigned={int(a.index): a.id for a in r.assigned},
                         wire=r)


def delete_result_of(r: pb.DeleteEventsResponse) -> DeleteResult:
    """A ``DeleteResult`` of the wire answer."""
    return DeleteResult(statuses=statuses_of(r.statuses), wire=r)


def cursors_of(r: pb.GetCursorsResponse) -> Cursors:
    """``Cursors`` of the wire answer."""
    return Cursors(seq=int(r.seq), cursors=tuple(
        CommittedCursor(subscription_id=int(c.subscription_id), subscriber=c.subscriber,
                        committed_seq=int(c.committed_seq) if c.HasField("committed_seq") else None,
                        lag=int(c.lag) if c.HasField("lag") else None,
                        pending_messages=int(c.pending_messages), pending_bytes=int(c.pending_bytes),
                        newest_seq=int(c.newest_seq), wire=c)
        for c in r.cursors), wire=r)


def stats_of(s: pb.TopicStats) -> TopicStats:
    """``TopicStats`` of the wire message."""
    d = s.delivery
    return TopicStats(
        topic=s.topic, seq=int(s.seq), watermark=int(s.watermark) if s.HasField("watermark") else None,
        tuples=dict(s.tuples), subscriptions=dict(s.subscriptions), tau=dict(s.tau),
        hotspots=dict(s.hotspots), decisions=dict(s.decisions), listeners=int(s.listeners),
        delivery=DeliveryStats(
            buffer_bytes=d.buffer_bytes, buffer_limit_bytes=d.buffer_limit_bytes,
            buffer_messages=d.buffer_messages, match_log_bytes=d.match_log_bytes,
            retained_from_seq=d.retained_from_seq, committed_cursors=d.committed_cursors,
            cursor_lag_sum=d.cursor_lag_sum, cursor_lag_max=d.cursor_lag_max),
        workers=tuple(WorkerStats(worker=w.worker, healthy=w.healthy, seq=w.seq, lag=w.lag,
                                  memory_bytes=w.memory_bytes, restarts=w.restarts,
                                  subscriptions=w.subscriptions) for w in s.workers),
        scale_out_scheme=s.scale_out_scheme, wire=s)


def event_ref_of(r: pb.EventRef) -> EventRef | None:
    """The ``EventRef`` of a wire reference; None for an empty one (a snapshot's)."""
    if not r.id and r.side not in SIDE_NAMES:
        return None
    return EventRef(SIDE_NAMES.get(r.side, ""), r.id)


def operation_of(o: pb.Operation) -> Operation:
    """An ``Operation`` of a ``MatchBatch``'s operation table."""
    return Operation(o.op, event_ref_of(o.event), int(o.received_unix_nanos))


def match_of(m: pb.Match) -> Match:
    """A ``Match`` of the wire message (a complete one: split parts are joined before)."""
    return Match(subscription_id=m.subscription_id, seq=m.seq, sign=m.sign, count=m.count,
                 pairs=tuple((p.r_id, p.s_id) for p in m.pairs), op=m.op,
                 event=event_ref_of(m.event), received_unix_nanos=m.received_unix_nanos, wire=m)


def batch_rows(mb: Any) -> list[Match]:
    """The ``Match`` of every row of a ``MatchBatch`` (typed or wire), in order.

    A convenience that builds one object per row; ``MatchBatch.columns()`` does not.
    """
    mb = getattr(mb, "wire", mb)
    ops = [operation_of(o) for o in mb.ops]
    pcounts: Sequence[int] = list(mb.pair_counts) or [0] * len(mb.subscription_ids)
    r_ids, s_ids = mb.r_ids, mb.s_ids
    out = []
    at = 0
    for sid, seq, sign, count, k, pc in zip(mb.subscription_ids, mb.seqs, mb.signs, mb.counts,
                                            mb.op_index, pcounts, strict=True):
        o = ops[k]
        pairs = tuple(zip(r_ids[at:at + pc], s_ids[at:at + pc], strict=True)) if pc else ()
        at += pc
        out.append(Match(subscription_id=sid, seq=seq, sign=sign, count=count, pairs=pairs,
                         op=o.op, event=o.event, received_unix_nanos=o.received_unix_nanos))
    return out


def listen_item_of(resp: pb.ListenResponse) -> ListenItem:
    """The typed item of one ``ListenResponse``: ``Match``, ``MatchBatch``, ``Gap``,
    ``CaughtUp`` or ``Unsubscribed``."""
    kind = resp.WhichOneof("message")
    if kind == "match":
        return match_of(resp.match)
    if kind == "matches":
        return MatchBatch(resp.matches)
    if kind == "gap":
        g = resp.gap
        return Gap(g.subscription_id, g.from_seq, g.to_seq, g.reason, wire=g)
    if kind == "caught_up":
        return CaughtUp(resp.caught_up.seq, wire=resp.caught_up)
    if kind == "unsubscribed":
        u = resp.unsubscribed
        return Unsubscribed(u.subscription_id, u.seq, wire=u)
    raise ValueError(f"a listen message of an unknown kind ({kind!r}): a newer server?")


__all__ = [
    "JOIN_KINDS", "STATUS_NAMES", "JoinKind", "band", "batch_rows", "columns_item",
    "commit_request", "create_topic_request", "cursor_list", "cursors_of", "listen_request",
    "delete_result_of", "event", "event_to_wire", "listen_item_of", "match_of",
    "publish_result_of", "ref", "ref_to_wire", "rng", "select", "spec_of", "spec_to_wire",
    "stats_of", "status_of", "subscription_of", "topic_of", "window",
]
