"""The gRPC servicers: decode a request, call the topic registry or a topic, encode the answer.

No ordering, durability or delivery logic lives here (that is ``server/topic.py``,
``server/durability.py`` and ``server/delivery.py``); a ``ServiceError`` raised below becomes
the gRPC status it names.

Every method first authorizes its caller (``server/auth.py``; the interceptor in
``server/interceptor.py`` has already authenticated it) against the request's topic, then
applies the caller's quotas (``server/quotas.py``), then does its work. Subscriptions carry
their owner, so only the owner or an admin of the topic lists, listens to or cancels them.
Refusals are counted and audited in ``_refused``; successful topic and subscription changes
are audited where they happen (``server/audit.py``).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import Any, TypeVar

import grpc
import numpy as np

from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.proto import hotjoin_pb2_grpc as rpc
from hotjoin.server import audit, metrics
from hotjoin.server.auth import AuthFailure, Principal
from hotjoin.server.batch_apply import EventStatus as BatchStatus
from hotjoin.server.convert import (
    SIDE_TO_PB,
    EventBatch,
    check_subscriber,
    decode_columns,
    match_batch_columns,
)
from hotjoin.server.delivery import (
    LINGER_MS,
    CaughtUpItem,
    GapItem,
    Item,
    Listener,
    MatchBlock,
    UnsubscribedItem,
)
from hotjoin.server.errors import InvalidArgument, OutOfRange, PermissionDenied, ServiceError
from hotjoin.server.interceptor import peer_of, session_of
from hotjoin.server.match_columns import (
    PairColumns,
    affected_wire,
    affected_wire_blocks,
    op_arrays,
    serialize_columns,
    used_ops,
)
from hotjoin.server.quotas import Quotas
from hotjoin.server.registry import DamagedTopic, TopicRegistry
from hotjoin.server.topic import ColumnsOutcome, Status, Topic

PAIRS_PER_MESSAGE = 10_000
# A columnar MatchBatch holds at most this many rows and this many pairs (~1-2 MB with ids of
# ~10 bytes): large enough that gRPC's cost per message is noise, small enough to stream.
COLUMNAR_ROWS = 65_536
COLUMNAR_PAIRS = 65_536
# field numbers of ListenResponse.matches and MatchBatch.columns (a columnar batch is written as
# wire bytes: ``_columnar_batch``)
LISTEN_MATCHES = pb.ListenResponse.DESCRIPTOR.fields_by_name["matches"].number
BATCH_COLUMNS = pb.MatchBatch.DESCRIPTOR.fields_by_name["columns"].number
PUBLISH_PIPELINE = 4  # batches of one stream applied ahead of their acknowledgement
LISTEN_POLL_SECONDS = 0.5

_STATUS = {
    "ok": pb.OK,
    "late": pb.LATE,
    "duplicate": pb.DUPLICATE,
    "invalid": pb.INVALID,
    "not_found": pb.NOT_FOUND,
}

F = TypeVar("F", bound=Callable[..., Any])

# Audit action of each RPC; the topic and subscription changes are audited whatever the outcome.
ACTIONS = {
    "CreateTopic": "topic.create", "GetTopic": "topic.get", "ListTopics": "topic.list",
    "DeleteTopic": "topic.delete", "Subscribe": "subscription.create",
    "SubscribeMany": "subscription.create", "SubscribeStream": "subscription.create",
    "Unsubscribe": "subscription.delete", "ListSubscriptions": "subscription.list",
    "Publish": "publish", "PublishStream": "publish", "DeleteEvents": "events.delete",
    "Listen": "listen", "GetTopicStats": "stats", "CommitCursors": "cursors.commit",
    "GetCursors": "cursors.get",
}
CHANGES = frozenset({"CreateTopic", "DeleteTopic", "Subscribe", "SubscribeMany", "SubscribeStream",
                     "Unsubscribe"})


def _principal(context: Any) -> Principal:
    """The caller, as the auth file says now (UNAUTHENTICATED once its token was removed)."""
    return session_of(context).current()


def _topic_of(request: Any) -> str | None:
    for name in ("topic", "name"):
        v = getattr(request, name, None)
        if isinstance(v, str):
            return v
    return None


def _refused(method: str, request: Any, context: Any, e: ServiceError) -> None:
    """Count and audit a refusal: every auth failure and denial, and any failed change."""
    if isinstance(e, PermissionDenied):
        metrics.AUTH_DENIALS.labels(e.right or "unknown").inc()
        outcome = "denied"
    elif isinstance(e, AuthFailure):
        metrics.AUTH_FAILURES.labels(e.reason).inc()
        outcome = "unauthenticated"
    elif method in CHANGES:
        outcome = "error"
    else:
        return
    audit.record(ACTIONS.get(method, method), session_of(context).principal.label, outcome,
                 topic=_topic_of(request), code=e.code, reason=e.message, peer=peer_of(context))


def _changed(context: Any, p: Principal, action: str, **fields: Any) -> None:
    audit.record(action, p.label, "ok", peer=peer_of(context), **fields)


def _unary(fn: F) -> F:
    """Turn a ``ServiceError`` of a unary handler into its gRPC status."""

    @functools.wraps(fn)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return fn(self, request, context)
        except ServiceError as e:
            _refused(fn.__name__, request, context, e)
            context.abort(grpc.StatusCode[e.code], e.message)

    return wrapper  # type: ignore[return-value]


def _unary_async(fn: F) -> F:
    """Turn a ``ServiceError`` of a coroutine handler into its gRPC status."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: Any) -> Any:
        try:
            return await fn(self, request, context)
        except ServiceError as e:
            _refused(fn.__name__, request, context, e)
            await context.abort(grpc.StatusCode[e.code], e.message)

    return wrapper  # type: ignore[return-value]


def _streaming(fn: F) -> F:
    """Turn a ``ServiceError`` of a response-streaming coroutine into its gRPC status."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: Any) -> AsyncIterator[Any]:
        try:
            async for out in fn(self, request, context):
                yield out
        except ServiceError as e:
            _refused(fn.__name__, request, context, e)
            await context.abort(grpc.StatusCode[e.code], e.message)

    return wrapper  # type: ignore[return-value]


async def _in_pool(fn: Callable[..., Any], *args: Any,
                   if_abandoned: Callable[[Any], None] | None = None) -> Any:
    """``fn(*args)`` in the server's thread pool (blocking work stays off the event loop). It
    runs to its end even when the awaiting stream is cancelled meanwhile; then ``if_abandoned``
    gets its result (to release what it opened)."""
    fut = asyncio.get_running_loop().run_in_executor(None, fn, *args)
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        if if_abandoned is not None:
            fut.add_done_callback(lambda f: _abandoned(f, if_abandoned))
        raise


def _abandoned(fut: asyncio.Future[Any], release: Callable[[Any], None]) -> None:
    if not fut.cancelled() and fut.exception() is None:
        release(fut.result())


def encode_topic(topic: Topic) -> pb.Topic:
    info = topic.info()
    out = pb.Topic(name=info["name"], lateness=info["lateness"], strategy=info["strategy"], seq=info["seq"])
    if info["retention"] is not None:
        out.retention = info["retention"]
    out.delivery_retention_bytes = topic.delivery.retention_bytes
    out.delivery_retention_ms = topic.delivery.retention_ms
    out.max_advance = info["max_advance"]  # 0: no bound
    return out


def encode_damaged(d: DamagedTopic) -> pb.Topic:
    """A damaged topic as ``ListTopics`` shows it: its name, the reason in ``damaged`` and the
    options its ``topic.json`` still gives, if any."""
    out = pb.Topic(name=d.name, damaged=d.message)
    opts = d.options or {}
    if isinstance(opts.get("lateness"), int):
        out.lateness = opts["lateness"]
    if isinstance(opts.get("retention"), int):
        out.retention = opts["retention"]
    return out


def encode_statuses(statuses: list[Status]) -> list[pb.EventStatus]:
    """The wire statuses of a per-event batch (``identical`` set on re-sent duplicates)."""
    return [pb.EventStatus(code=_STATUS[s.code], id=s.id, seq=s.seq, reason=s.reason,
                           identical=s.identical) for s in statuses]


def encode_items(items: Iterable[Item], batch: bool = False, batch_pairs: bool = False,
                 columnar: bool = False) -> Iterator[pb.ListenResponse | bytes]:
    """Listen messages of delivery items; PAIRS messages are split into parts (``more``).

    With ``batch`` the messages without pairs of a ``MatchBlock`` go out as one ``MatchBatch``
    (its row columns encoded by one compiled pass, ``convert.match_batch_columns``, no Python
    object per match); with ``batch_pairs`` too
    the PAIRS messages of up to ``PAIRS_PER_MESSAGE`` pairs, their pairs as columns. With
    ``columnar`` every block goes out as ``MatchBatch.columns`` messages (``columnar_messages``),
    already serialized (``listen_response_bytes`` passes them through); consecutive blocks
    without pairs (a drain that took rows of several chunks) as one message of up to
    ``COLUMNAR_ROWS`` rows (``affected_wire_blocks``): a response costs the server far more than
    a row (a write to the stream, tens of µs), so a listener that fell behind by some batches
    catches up in fewer, larger responses.
    """
    run: list[MatchBlock] = []
    for it in items:
        if columnar and isinstance(it, MatchBlock) and it.pcols is None and hasattr(it.op_table, "wire"):
            run.append(it)
            continue
        if run:
            yield from _joined_messages(run)
            run = []
        if isinstance(it, MatchBlock):
            if columnar:
                yield from columnar_messages(it)
            elif batch and it.pcols is None:
                yield _match_batch(it)
            else:
                yield from _block_messages(it, batch, batch_pairs and batch)
        elif isinstance(it, GapItem):
            yield pb.ListenResponse(
                gap=pb.Gap(subscription_id=it.subscription_id, from_seq=it.from_seq, to_seq=it.to_seq, reason=it.reason)
            )
        elif isinstance(it, UnsubscribedItem):
            yield pb.ListenResponse(unsubscribed=pb.Unsubscribed(subscription_id=it.subscription_id, seq=it.seq))
        elif isinstance(it, CaughtUpItem):
            yield pb.ListenResponse(caught_up=pb.CaughtUp(seq=it.seq))
    if run:
        yield from _joined_messages(run)


def _joined_messages(blocks: list[MatchBlock]) -> Iterator[bytes]:
    """Blocks without pairs whose operation tables have a wire form, as few columnar messages
    as ``COLUMNAR_ROWS`` allows: runs of whole blocks joined; a block above it on its own."""
    part: list[MatchBlock] = []
    rows = 0
    for b in [*(b for b in blocks if len(b)), None]:
        if part and (b is None or rows + len(b) > COLUMNAR_ROWS):
            if len(part) == 1:
                yield from columnar_messages(part[0])
            else:
                yield affected_wire_blocks([(p.sids, p.seqs, p.signs, p.counts, p.ops, p.op_table.wire())
                                            for p in part], (LISTEN_MATCHES, BATCH_COLUMNS))
            part, rows = [], 0
        if b is not None:
            part.append(b)
            rows += len(b)


def columnar_messages(b: MatchBlock) -> Iterator[pb.ListenResponse | bytes]:
    """A block as ``MatchBatch`` messages with ``columns`` (``server/match_columns.py``): runs of
    up to ``COLUMNAR_ROWS`` rows and ``COLUMNAR_PAIRS`` pairs, each encoded from array slices;
    a row of more than ``PAIRS_PER_MESSAGE`` pairs goes alone as split ``Match`` parts, as in
    every other form. A step per message, none per row or pair. The batches come as serialized
    ``ListenResponse`` bytes, the split parts as messages."""
    n = len(b)
    pc = b.pcols
    if pc is None:
        for a in range(0, n, COLUMNAR_ROWS):
            yield _columnar_batch(b, a, min(n, a + COLUMNAR_ROWS))
        return
    lens = pc.lengths()
    cum = pc.offsets  # cum[i]: pairs before row i
    big = np.flatnonzero(lens > PAIRS_PER_MESSAGE).tolist()
    a = 0
    for stop in [*big, n]:
        while a < stop:
            e = int(np.searchsorted(cum, cum[a] + COLUMNAR_PAIRS, side="right")) - 1
            e = max(a + 1, min(stop, e, a + COLUMNAR_ROWS))
            yield _columnar_batch(b, a, e)
            a = e
        if stop < n:  # one large PAIRS message: split Match parts
            one = np.array([stop])
            yield from _block_messages(MatchBlock(b.sids[one], b.seqs[one], b.signs[one],
                                                  b.counts[one], b.ops[one], b.op_table,
                                                  pc.take(one)), batch=False)
            a = stop + 1


def _columnar_batch(b: MatchBlock, a: int, e: int) -> bytes:
    """Rows ``a .. e-1`` of ``b`` as one columnar ``MatchBatch``: the serialized
    ``ListenResponse``, written from the array slices in one join (``serialize_columns``), or by
    one compiled pass (``affected_wire``) when the rows have no pairs and the operation table
    has a wire form (every chunk's does)."""
    ops = b.ops[a:e]
    if b.pcols is None and hasattr(b.op_table, "wire"):
        return affected_wire(b.sids[a:e], b.seqs[a:e], b.signs[a:e], b.counts[a:e], ops,
                             b.op_table.wire(), (LISTEN_MATCHES, BATCH_COLUMNS))
    used, op_index = used_ops(ops)
    pairs: PairColumns | None = None
    if b.pcols is not None:
        pairs = b.pcols.take(np.arange(a, e, dtype=np.int64))
    return serialize_columns(b.sids[a:e], b.seqs[a:e], b.signs[a:e], b.counts[a:e], op_index,
                             op_arrays(b.op_table, used), pairs, within=(LISTEN_MATCHES, BATCH_COLUMNS))


def _match_batch(b: MatchBlock) -> pb.ListenResponse:
    used, op_index = used_ops(b.ops)
    mb = match_batch_columns(b.sids, b.seqs, b.signs, b.counts, op_index)
    if b.pcols is not None:
        mb.pair_counts.extend(b.pcols.lengths().tolist())
        mb.r_ids.extend(b.pcols.r_ids.to_pylist())
        mb.s_ids.extend(b.pcols.s_ids.to_pylist())
    table = b.op_table
    for k in used.tolist():
        op, side, eid, rns = table[k]
        o = mb.ops.add(op=op, received_unix_nanos=rns)
        if side:
            o.event.side, o.event.id = SIDE_TO_PB[side], eid
    return pb.ListenResponse(matches=mb)


def _block_messages(b: MatchBlock, batch: bool, batch_pairs: bool = False) -> Iterator[pb.ListenResponse]:
    """One ``Match`` per row (rows with pairs split into parts); in batch mode the runs of rows
    without pairs between them still go out as ``MatchBatch`` messages, and with ``batch_pairs``
    rows of up to ``PAIRS_PER_MESSAGE`` pairs join the runs (a run holds at most that many pairs)."""
    pairs = b.pairs or {}
    run: list[int] = []
    run_pairs = [0]

    def flush() -> Iterator[pb.ListenResponse]:
        if run:
            idx = np.array(run, dtype=np.int64)
            sub = {k: pairs[i] for k, i in enumerate(run) if i in pairs} if run_pairs[0] else None
            yield _match_batch(MatchBlock(b.sids[idx], b.seqs[idx], b.signs[idx], b.counts[idx],
                                          b.ops[idx], b.op_table, sub or None))
            run.clear()
            run_pairs[0] = 0

    sids, seqs, signs, counts, ops = (b.sids.tolist(), b.seqs.tolist(), b.signs.tolist(),
                                      b.counts.tolist(), b.ops.tolist())
    for i in range(len(sids)):
        pr = pairs.get(i)
        if batch and pr is None:
            run.append(i)
            continue
        if batch_pairs and pr is not None and len(pr[0]) <= PAIRS_PER_MESSAGE:
            if run_pairs[0] + len(pr[0]) > PAIRS_PER_MESSAGE:
                yield from flush()
            run.append(i)
            run_pairs[0] += len(pr[0])
            continue
        yield from flush()
        op, side, eid, rns = b.op_table[ops[i]]
        base = dict(subscription_id=sids[i], seq=seqs[i], sign=signs[i], count=counts[i], op=op,
                    received_unix_nanos=rns)
        ref = pb.EventRef(side=SIDE_TO_PB[side], id=eid) if side else None
        if pr is None:
            yield pb.ListenResponse(match=pb.Match(event=ref, **base))
            continue
        n = len(pr[0])
        r_ids, s_ids = pr[0].tolist(), pr[1].tolist()
        for start in range(0, max(n, 1), PAIRS_PER_MESSAGE):
            end = min(n, start + PAIRS_PER_MESSAGE)
            pairs_pb = [pb.Pair(r_id=r, s_id=s) for r, s in zip(r_ids[start:end], s_ids[start:end], strict=True)]
            yield pb.ListenResponse(match=pb.Match(event=ref, pairs=pairs_pb, more=end < n, **base))
    yield from flush()


class TopicService(rpc.TopicServiceServicer):
    def __init__(self, registry: TopicRegistry) -> None:
        self.registry = registry

    @_unary
    def CreateTopic(self, request: pb.CreateTopicRequest, context: grpc.ServicerContext) -> pb.Topic:
        p = _principal(context)
        p.require(request.name, "admin", "create a topic")
        retention = request.retention if request.HasField("retention") else None
        topic = self.registry.create(
            request.name, request.lateness, retention, dict(request.strategy),
            **{f: getattr(request, f) for f in ("delivery_retention_bytes", "delivery_retention_ms",
                                                "max_advance")
               if request.HasField(f)})
        _changed(context, p, "topic.create", topic=request.name)
        return encode_topic(topic)

    @_unary
    def GetTopic(self, request: pb.GetTopicRequest, context: grpc.ServicerContext) -> pb.Topic:
        _principal(context).require_any(request.name, "read a topic")
        return encode_topic(self.registry.get(request.name))

    @_unary
    def ListTopics(self, request: pb.ListTopicsRequest, context: grpc.ServicerContext) -> pb.ListTopicsResponse:
        p = _principal(context)
        out = [encode_topic(t) for t in self.registry.list() if p.may_see(t.name)]
        out += [encode_damaged(d) for d in self.registry.damaged() if p.may_see(d.name)]
        out.sort(key=lambda t: t.name)
        return pb.ListTopicsResponse(topics=out)

    @_unary
    def DeleteTopic(self, request: pb.DeleteTopicRequest, context: grpc.ServicerContext) -> pb.DeleteTopicResponse:
        p = _principal(context)
        p.require(request.name, "admin", "delete a topic")
        self.registry.delete(request.name)
        _changed(context, p, "topic.delete", topic=request.name)
        return pb.DeleteTopicResponse()


class SubscriptionService(rpc.SubscriptionServiceServicer):
    def __init__(self, registry: TopicRegistry, quotas: Quotas) -> None:
        self.registry = registry
        self.quotas = quotas

    def _subscribe(self, context: Any, p: Principal, name: str,
                   specs: Any) -> list[tuple[int, int]]:
        """Register ``specs`` owned by ``p`` within its subscriptions quota; audited."""
        topic = self.registry.get(name)
        with self.quotas.subscriptions(p, len(specs)):
            out = topic.subscribe(specs, time.time_ns(), owner=p.owner)
        if out:
            _changed(context, p, "subscription.create", topic=name, first_id=out[0][0], count=len(out))
        return out

    @_unary
    def Subscribe(self, request: pb.SubscribeRequest, context: grpc.ServicerContext) -> pb.Subscription:
        p = _principal(context)
        p.require(request.topic, "subscribe", "subscribe")
        self.registry.get(request.topic)
        if not request.HasField("spec"):
            raise InvalidArgument("spec is required")
        [(sid, seq)] = self._subscribe(context, p, request.topic, [request.spec])
        return pb.Subscription(subscription_id=sid, spec=request.spec, registered_seq=seq)

    @_unary
    def SubscribeMany(
        self, request: pb.SubscribeManyRequest, context: grpc.ServicerContext
    ) -> pb.SubscribeManyResponse:
        p = _principal(context)
        p.require(request.topic, "subscribe", "subscribe")
        return _subscribed(self._subscribe(context, p, request.topic, request.specs))

    @_unary_async
    async def SubscribeStream(
        self, request_iterator: AsyncIterator[pb.SubscribeManyRequest], context: Any
    ) -> pb.SubscribeManyResponse:
        session = session_of(context)
        p = session.current()
        with self.quotas.hold(p, "streams"):
            name = ""
            specs: list[pb.SubscriptionSpec] = []
            async for req in request_iterator:
                if req.topic and name and req.topic != name:
                    raise InvalidArgument(f"one stream, one topic: got {req.topic!r} after {name!r}")
                if req.topic and not name:  # refuse early, before buffering a large stream
                    p.require(req.topic, "subscribe", "subscribe")
                name = name or req.topic
                specs.extend(req.specs)
                self.quotas.check_subscriptions(p, len(specs))
            p = session.current()
            p.require(name, "subscribe", "subscribe")
            return _subscribed(await _in_pool(self._subscribe, context, p, name, specs))

    @_unary
    def Unsubscribe(self, request: pb.UnsubscribeRequest, context: grpc.ServicerContext) -> pb.UnsubscribeResponse:
        p = _principal(context)
        p.require(request.topic, "subscribe", "cancel a subscription")
        topic = self.registry.get(request.topic)
        owner = None if p.is_admin(request.topic) else p.owner
        seq = topic.unsubscribe(request.subscription_id, owner=owner)
        _changed(context, p, "subscription.delete", topic=request.topic,
                 subscription_id=request.subscription_id)
        return pb.UnsubscribeResponse(seq=seq)

    @_unary
    def ListSubscriptions(
        self, request: pb.ListSubscriptionsRequest, context: grpc.ServicerContext
    ) -> pb.ListSubscriptionsResponse:
        p = _principal(context)
        p.require(request.topic, "subscribe", "list subscriptions")
        topic = self.registry.get(request.topic)
        after = request.after_id if request.HasField("after_id") else None
        owner = None if p.is_admin(request.topic) else p.owner
        page, more = topic.list_subscriptions(request.subscriber, after, request.page_size, owner=owner)
        return pb.ListSubscriptionsResponse(
            subscriptions=[pb.Subscription(subscription_id=i, spec=s, registered_seq=q) for i, s, q in page],
            more=more,
        )


def _subscribed(out: list[tuple[int, int]]) -> pb.SubscribeManyResponse:
    if not out:
        return pb.SubscribeManyResponse()
    return pb.SubscribeManyResponse(
        subscription_ids=[sid for sid, _ in out], first_seq=out[0][1], last_seq=out[-1][1]
    )


class PublishService(rpc.PublishServiceServicer):
    def __init__(self, registry: TopicRegistry, quotas: Quotas) -> None:
        self.registry = registry
        self.quotas = quotas

    def _admit(self, p: Principal, topic: str, n: int, action: str) -> Topic:
        """Authorize a write of ``n`` events to ``topic`` and charge them to the caller's quotas."""
        p.require(topic, "publish", action)
        t = self.registry.get(topic)
        self._charge(p, n)
        return t

    def _charge(self, p: Principal, n: int) -> None:
        self.quotas.check_batch(p, n)
        self.quotas.take_publish(p, n)

    @_unary
    def Publish(self, request: pb.PublishRequest, context: grpc.ServicerContext) -> pb.PublishResponse:
        topic = self._admit(_principal(context), request.topic, _n_events(request), "publish")
        batch = _columns_of(request)
        if batch is not None:
            return _columns_response(topic.publish_columns(batch, time.time_ns()))
        return _response(topic.publish(request.events, time.time_ns()))

    @_streaming
    async def PublishStream(
        self, request_iterator: AsyncIterator[pb.PublishRequest], context: Any
    ) -> AsyncIterator[pb.PublishResponse]:
        session = session_of(context)
        with self.quotas.hold(session.current(), "streams"):
            async for out in self._publish_stream(session, request_iterator):
                yield out

    async def _publish_stream(
        self, session: Any, request_iterator: AsyncIterator[pb.PublishRequest]
    ) -> AsyncIterator[pb.PublishResponse]:
        # A reader task applies batch k+1 (engine + log write, in the thread pool) while batch k
        # waits for its sync; acknowledgements still go out in request order, each once its
        # batch is durable. Each batch is authorized and charged to the caller's quotas before
        # it is applied. A batch once applied is synced and delivered whatever becomes of the
        # stream (``_commit_later``).
        done: asyncio.Queue[Any] = asyncio.Queue(maxsize=PUBLISH_PIPELINE)

        async def reader() -> None:
            topic: Topic | None = None
            try:
                async for req in request_iterator:
                    if topic is not None and req.topic and req.topic != topic.name:
                        raise InvalidArgument(f"one stream, one topic: got {req.topic!r} after {topic.name!r}")
                    p = session.current()
                    n = _n_events(req)
                    if topic is None:
                        topic = self._admit(p, req.topic, n, "publish")
                    else:  # every batch: rights may have been revoked by a reload meanwhile
                        p.require(topic.name, "publish", "publish")
                        self._charge(p, n)
                    batch = _columns_of(req)  # decoded only once the caller may publish
                    received = time.time_ns()
                    t = topic
                    if batch is None:
                        statuses, token = await _in_pool(
                            t.publish_begin, req.events, received,
                            if_abandoned=lambda out, t=t: _commit_later(t, out[1]))
                    else:
                        statuses, token = await _in_pool(
                            t.publish_columns_begin, batch, received,
                            if_abandoned=lambda out, t=t: _commit_later(t, out[1]))
                    item = (t, statuses, token, received)
                    try:
                        await done.put(item)
                    except asyncio.CancelledError:
                        _commit_later(t, token)  # the stream is gone: still sync and deliver
                        raise
                await done.put(None)
            except asyncio.CancelledError:
                raise
            except BaseException as e:  # noqa: BLE001 - handed to the responding side
                await done.put(e)

        task = asyncio.get_running_loop().create_task(reader())
        try:
            while True:
                item = await done.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                topic, statuses, token, received = item
                await _in_pool(topic.commit, token)
                topic.observe_publish(received)
                if isinstance(statuses, ColumnsOutcome):
                    yield _columns_response(statuses)
                else:
                    yield _response(statuses)
        finally:
            task.cancel()
            while not done.empty():  # batches applied but not acknowledged: still sync and deliver
                item = done.get_nowait()
                if isinstance(item, tuple):
                    _commit_later(item[0], item[2])

    @_unary
    def DeleteEvents(self, request: pb.DeleteEventsRequest, context: grpc.ServicerContext) -> pb.DeleteEventsResponse:
        topic = self._admit(_principal(context), request.topic, len(request.events), "delete events")
        return pb.DeleteEventsResponse(statuses=encode_statuses(topic.delete(request.events, time.time_ns())))


def _commit_later(topic: Topic, token: Any) -> None:
    """Sync and deliver an applied batch nobody waits for any more (its stream ended)."""
    asyncio.get_running_loop().run_in_executor(None, topic.commit, token)


def _response(statuses: list[Status]) -> pb.PublishResponse:
    ok = sum(1 for s in statuses if s.code == "ok")
    return pb.PublishResponse(statuses=encode_statuses(statuses), accepted=ok, rejected=len(statuses) - ok)


_CODE_TO_PB = {BatchStatus.OK: pb.OK, BatchStatus.LATE: pb.LATE, BatchStatus.DUPLICATE: pb.DUPLICATE,
               BatchStatus.INVALID: pb.INVALID, BatchStatus.NOT_FOUND: pb.NOT_FOUND}


def _n_events(request: pb.PublishRequest) -> int:
    """Events in a request of either form (for authorization and quotas, before decoding)."""
    return len(request.columns.ids) if request.HasField("columns") else len(request.events)


def _columns_of(request: pb.PublishRequest) -> EventBatch | None:
    """The request's columnar batch (None for the per-event form); ``InvalidArgument`` when it
    carries both forms or columns of different lengths."""
    if not request.HasField("columns"):
        return None
    if len(request.events):
        raise InvalidArgument("a publish request carries events or columns, not both")
    try:
        return decode_columns(request.columns)
    except ValueError as x:
        raise InvalidArgument(str(x)) from None


def _columns_response(out: ColumnsOutcome) -> pb.PublishResponse:
    """The compact answer to a columnar batch: the accepted events' seq range, the assigned ids,
    and one ``EventStatus`` (with its index) per rejected event only, ``identical`` set on the
    duplicates equal to their stored event."""
    resp = pb.PublishResponse(accepted=out.accepted, rejected=len(out.status) - out.accepted,
                              first_seq=out.first_seq, last_seq=out.last_seq)
    same = out.identical
    for i in np.flatnonzero(out.status != BatchStatus.OK).tolist():
        resp.statuses.add(code=_CODE_TO_PB[int(out.status[i])], id=out.ids[i], reason=out.reasons.get(i, ""),
                          index=i, identical=i in same)
    for i, eid in out.assigned.items():
        resp.assigned.add(index=i, id=eid)
    return resp


class Linger:
    """When a Listen stream waits before it drains (docs/explanation/choices.md, "Delivery under
    load"): a response costs the server tens of µs whatever its size (the write to the stream,
    on the event loop, under the interpreter lock), so a busy server with many listeners spent
    its time sending each of them a response per batch, and publishers waited for the lock.
    Once a stream's wakes come late (``LATE_SECONDS`` after the messages were pushed: the loop
    is busy) ``AFTER`` times in a row, it waits ``FACTOR`` times that lateness (at most
    ``max_seconds``: ``hotjoin serve --listen-linger-ms``, 0 never) before each drain, so it
    takes several batches in one response; a wake on time ends it. An isolated late wake (a collection, a checkpoint) changes nothing, an idle or
    lightly loaded server answers at once, and a stream whose last drain was full (it is behind:
    a large backlog, an output-heavy batch) drains again at once.

    >>> lg = Linger()
    >>> [lg.after(s) for s in (0.005, 0.005, 0.0001, 0.003, 0.004, 0.005, 0.02)]
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.03, 0.05]
    """

    LATE_SECONDS = 0.002
    AFTER = 3
    FACTOR = 6.0

    __slots__ = ("_late", "max_seconds")

    def __init__(self, max_seconds: float = LINGER_MS / 1000) -> None:
        self._late = 0
        self.max_seconds = max_seconds

    def after(self, lateness: float) -> float:
        """Seconds to wait before this drain, its wake handled ``lateness`` seconds late."""
        self._late = self._late + 1 if lateness > self.LATE_SECONDS else 0
        if self._late < self.AFTER or self.max_seconds <= 0:
            return 0.0
        return min(self.FACTOR * lateness, self.max_seconds)


class _Poll:
    """Sets ``ready`` every ``LISTEN_POLL_SECONDS`` until cancelled: a Listen stream looks at its
    listener (closed topic, reloaded rights) that often even when nothing is delivered. One timer
    per stream and period, where a timeout around each wait armed and cancelled one per wake."""

    def __init__(self, loop: asyncio.AbstractEventLoop, ready: asyncio.Event) -> None:
        self._loop, self._ready = loop, ready
        self._timer = loop.call_later(LISTEN_POLL_SECONDS, self._tick)

    def _tick(self) -> None:
        self._ready.set()
        self._timer = self._loop.call_later(LISTEN_POLL_SECONDS, self._tick)

    def cancel(self) -> None:
        self._timer.cancel()


class ListenService(rpc.ListenServiceServicer):
    def __init__(self, registry: TopicRegistry, quotas: Quotas) -> None:
        self.registry = registry
        self.quotas = quotas
        self.linger_seconds = registry.settings.delivery.linger_ms / 1000

    @_streaming
    async def Listen(self, request: pb.ListenRequest,
                     context: Any) -> AsyncIterator[pb.ListenResponse | bytes]:
        """A coroutine on the server's event loop: it sleeps until the hub wakes its listener
        (``Wake.notify``), takes what waits — on the loop when it comes from the ring, in the
        thread pool when it is read back from the match log — and streams it encoded."""
        session = session_of(context)
        p = session.current()
        p.require(request.topic, "subscribe", "listen")
        topic = self.registry.get(request.topic)
        admin = p.is_admin(topic.name)
        cursors = {c.subscription_id: c.after_seq for c in request.cursors}
        loop = asyncio.get_running_loop()
        with self.quotas.hold(p, "listeners"):
            lis = await _in_pool(self._open, topic, request, cursors, None if admin else p.owner,
                                 if_abandoned=Listener.close)
            ready = asyncio.Event()
            lis.wake.notify = functools.partial(loop.call_soon_threadsafe, ready.set)
            poll = _Poll(loop, ready)  # a look every LISTEN_POLL_SECONDS even without a wake
            linger = Linger(self.linger_seconds)
            behind = False  # the last drain left messages to take at once (it was full)
            try:
                while True:
                    if not lis.wake.is_set():
                        await ready.wait()
                    if lis.wake.is_set() and not behind:  # new messages, waiting since ``at``
                        pause = linger.after(time.monotonic() - lis.wake.at)
                        if pause:
                            await asyncio.sleep(pause)
                    ready.clear()
                    items = await _in_pool(lis.take) if lis.on_disk else lis.take()
                    behind = lis.wake.is_set()
                    if lis.closed:
                        await context.abort(grpc.StatusCode[topic.hub.close_code or "UNAVAILABLE"],
                                            topic.hub.close_message)
                    now = session.current()  # the auth file was reloaded: rights may be gone
                    if now is not p:
                        now.require(topic.name, "subscribe", "listen")
                        if admin:
                            now.require(topic.name, "admin", "listen to other principals' subscriptions")
                        p = now
                    for out in encode_items(items, request.batch, request.batch_pairs, request.columnar):
                        yield out
            finally:
                poll.cancel()
                lis.wake.notify = None
                lis.close()

    @staticmethod
    def _open(topic: Topic, request: pb.ListenRequest, cursors: dict[int, int],
              owner: str | None) -> Listener:
        check_listen(request, topic.info()["seq"])
        return topic.listen(request.subscriber, list(request.subscription_ids), cursors,
                            request.default_after_seq, request.from_latest, owner=owner,
                            use_committed=not request.ignore_committed)

    @_unary
    def CommitCursors(self, request: pb.CommitCursorsRequest,
                      context: grpc.ServicerContext) -> pb.CommitCursorsResponse:
        """Commit processed positions (server/cursors.py); the caller needs the right to listen."""
        p = _principal(context)
        p.require(request.topic, "subscribe", "commit cursors")
        topic = self.registry.get(request.topic)
        owner = None if p.is_admin(topic.name) else p.owner
        if request.HasField("after_seq") and not request.subscriber:
            raise InvalidArgument("after_seq commits a subscriber's subscriptions: set subscriber")
        done = topic.commit_cursors(
            {c.subscription_id: c.after_seq for c in request.cursors}, request.subscriber,
            request.after_seq if request.HasField("after_seq") else None, owner=owner)
        return pb.CommitCursorsResponse(committed=len(done))

    @_unary
    def GetCursors(self, request: pb.GetCursorsRequest,
                   context: grpc.ServicerContext) -> pb.GetCursorsResponse:
        """Committed positions, lag and backlog of live subscriptions (the caller's own unless
        admin): lag = newest seq of the subscription − committed seq (``Topic.committed``)."""
        p = _principal(context)
        p.require(request.topic, "subscribe", "read cursors")
        topic = self.registry.get(request.topic)
        owner = None if p.is_admin(topic.name) else p.owner
        seq, rows = topic.committed(request.subscriber, list(request.subscription_ids), owner=owner)
        out = pb.GetCursorsResponse(seq=seq)
        for sid, subscriber, at, lag, pending, nbytes, newest in rows:
            c = out.cursors.add(subscription_id=sid, subscriber=subscriber,
                                pending_messages=pending, pending_bytes=nbytes, newest_seq=newest)
            if at is not None:
                c.committed_seq, c.lag = at, lag
        return out


def check_listen(request: pb.ListenRequest, seq: int) -> None:
    """Refuse a Listen whose subscriber name is too long (as Subscribe does) or whose cursor lies
    beyond the topic's sequence ``seq``: OUT_OF_RANGE, since such a cursor would silently skip the
    matches of the operations up to it (docs/reference/errors.md)."""
    try:
        check_subscriber(request.subscriber)
    except ValueError as e:
        raise InvalidArgument(str(e)) from None
    if request.default_after_seq > seq:
        raise OutOfRange(f"default_after_seq {request.default_after_seq} is beyond the topic's "
                         f"sequence {seq}")
    for c in request.cursors:
        if c.after_seq > seq:
            raise OutOfRange(f"cursor after_seq {c.after_seq} of subscription {c.subscription_id} "
                             f"is beyond the topic's sequence {seq}")


class StatsService(rpc.StatsServiceServicer):
    def __init__(self, registry: TopicRegistry) -> None:
        self.registry = registry

    @_unary
    def GetTopicStats(self, request: pb.TopicStatsRequest, context: grpc.ServicerContext) -> pb.TopicStats:
        _principal(context).require_any(request.topic, "read topic stats")
        topic = self.registry.get(request.topic)
        st = topic.stats()
        out = pb.TopicStats(topic=topic.name, seq=st["seq"], listeners=st["listeners"])
        if st.get("watermark") is not None:
            out.watermark = st["watermark"]
        for field in ("tuples", "subscriptions", "tau", "hotspots", "decisions"):
            getattr(out, field).update({k: int(v) for k, v in st.get(field, {}).items()})
        if "delivery" in st:
            out.delivery.CopyFrom(pb.DeliveryStats(**st["delivery"]))
        if st.get("scheme"):
            out.scale_out_scheme = st["scheme"]
        for w in st.get("workers", ()):  # scale-out (docs/how-to/scale-out.md)
            out.workers.add(**{k: w[k] for k in ("worker", "healthy", "seq", "lag", "memory_bytes",
                                                 "restarts", "subscriptions")})
        return out


def listen_response_bytes(response: pb.ListenResponse | bytes) -> bytes:
    """Listen's response serializer: a columnar batch is already wire bytes
    (``_columnar_batch``), any other response a message."""
    return response if isinstance(response, bytes) else response.SerializeToString()


def _add_listen_service(servicer: ListenService, server: Any) -> None:
    """``add_ListenServiceServicer_to_server`` with ``listen_response_bytes`` as Listen's
    serializer."""
    handlers = {
        "Listen": grpc.unary_stream_rpc_method_handler(
            servicer.Listen, request_deserializer=pb.ListenRequest.FromString,
            response_serializer=listen_response_bytes),
        "CommitCursors": grpc.unary_unary_rpc_method_handler(
            servicer.CommitCursors, request_deserializer=pb.CommitCursorsRequest.FromString,
            response_serializer=pb.CommitCursorsResponse.SerializeToString),
        "GetCursors": grpc.unary_unary_rpc_method_handler(
            servicer.GetCursors, request_deserializer=pb.GetCursorsRequest.FromString,
            response_serializer=pb.GetCursorsResponse.SerializeToString),
    }
    name = pb.DESCRIPTOR.services_by_name["ListenService"].full_name
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(name, handlers),))
    server.add_registered_method_handlers(name, handlers)


def add_services(server: grpc.Server, registry: TopicRegistry, quotas: Quotas | None = None) -> list[str]:
    """Register every hotjoin servicer on ``server``; returns their full service names."""
    q = quotas or Quotas(owned=registry.owned)
    rpc.add_TopicServiceServicer_to_server(TopicService(registry), server)
    rpc.add_SubscriptionServiceServicer_to_server(SubscriptionService(registry, q), server)
    rpc.add_PublishServiceServicer_to_server(PublishService(registry, q), server)
    _add_listen_service(ListenService(registry, q), server)
    rpc.add_StatsServiceServicer_to_server(StatsService(registry), server)
    return [s.full_name for s in pb.DESCRIPTOR.services_by_name.values()]
