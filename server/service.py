"""The gRPC servicers: decode a request, call the topic registry or a topic, encode the answer.

No ordering, durability or delivery logic lives here (that is ``server/topic.py`` and
``server/delivery.py``); a ``ServiceError`` raised below becomes the gRPC status it names.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import grpc
import numpy as np

from server.convert import SIDE_TO_PB
from server.delivery import CaughtUpItem, GapItem, Item, MatchBlock, UnsubscribedItem
from server.errors import InvalidArgument, ServiceError
from server.pb import hotjoin_pb2 as pb
from server.pb import hotjoin_pb2_grpc as rpc
from server.registry import TopicRegistry
from server.topic import Status, Topic

PAIRS_PER_MESSAGE = 10_000
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


def _unary(fn: F) -> F:
    """Turn a ``ServiceError`` of a unary handler into its gRPC status."""

    @functools.wraps(fn)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            return fn(self, request, context)
        except ServiceError as e:
            context.abort(grpc.StatusCode[e.code], e.message)

    return wrapper  # type: ignore[return-value]


def _streaming(fn: F) -> F:
    """Turn a ``ServiceError`` of a response-streaming handler into its gRPC status."""

    @functools.wraps(fn)
    def wrapper(self: Any, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        try:
            yield from fn(self, request, context)
        except ServiceError as e:
            context.abort(grpc.StatusCode[e.code], e.message)

    return wrapper  # type: ignore[return-value]


def encode_topic(topic: Topic) -> pb.Topic:
    info = topic.info()
    out = pb.Topic(name=info["name"], lateness=info["lateness"], strategy=info["strategy"], seq=info["seq"])
    if info["retention"] is not None:
        out.retention = info["retention"]
    return out


def encode_statuses(statuses: list[Status]) -> list[pb.EventStatus]:
    return [pb.EventStatus(code=_STATUS[s.code], id=s.id, seq=s.seq, reason=s.reason) for s in statuses]


def encode_items(items: Iterable[Item], batch: bool = False) -> Iterator[pb.ListenResponse]:
    """Listen messages of delivery items; PAIRS messages are split into parts (``more``).

    With ``batch`` the messages without pairs of a ``MatchBlock`` go out as one ``MatchBatch``
    (columns filled by C-level ``extend``, no Python object per match).
    """
    for it in items:
        if isinstance(it, MatchBlock):
            if batch and not it.pairs:
                yield _match_batch(it)
            else:
                yield from _block_messages(it, batch)
        elif isinstance(it, GapItem):
            yield pb.ListenResponse(
                gap=pb.Gap(subscription_id=it.subscription_id, from_seq=it.from_seq, to_seq=it.to_seq, reason=it.reason)
            )
        elif isinstance(it, UnsubscribedItem):
            yield pb.ListenResponse(unsubscribed=pb.Unsubscribed(subscription_id=it.subscription_id, seq=it.seq))
        elif isinstance(it, CaughtUpItem):
            yield pb.ListenResponse(caught_up=pb.CaughtUp(seq=it.seq))


def _match_batch(b: MatchBlock) -> pb.ListenResponse:
    used, op_index = np.unique(b.ops, return_inverse=True)
    mb = pb.MatchBatch()
    mb.subscription_ids.extend(b.sids.tolist())
    mb.seqs.extend(b.seqs.tolist())
    mb.signs.extend(b.signs.tolist())
    mb.counts.extend(b.counts.tolist())
    mb.op_index.extend(op_index.tolist())
    table = b.op_table
    for k in used.tolist():
        op, side, eid, rns = table[k]
        o = mb.ops.add(op=op, received_unix_nanos=rns)
        if side:
            o.event.side, o.event.id = SIDE_TO_PB[side], eid
    return pb.ListenResponse(matches=mb)


def _block_messages(b: MatchBlock, batch: bool) -> Iterator[pb.ListenResponse]:
    """One ``Match`` per row (rows with pairs split into parts); in batch mode the runs of rows
    without pairs between them still go out as ``MatchBatch`` messages."""
    pairs = b.pairs or {}
    run: list[int] = []

    def flush() -> Iterator[pb.ListenResponse]:
        if run:
            idx = np.array(run, dtype=np.int64)
            yield _match_batch(MatchBlock(b.sids[idx], b.seqs[idx], b.signs[idx], b.counts[idx],
                                          b.ops[idx], b.op_table, None))
            run.clear()

    sids, seqs, signs, counts, ops = (b.sids.tolist(), b.seqs.tolist(), b.signs.tolist(),
                                      b.counts.tolist(), b.ops.tolist())
    for i in range(len(sids)):
        pr = pairs.get(i)
        if batch and pr is None:
            run.append(i)
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
        retention = request.retention if request.HasField("retention") else None
        topic = self.registry.create(request.name, request.lateness, retention, dict(request.strategy))
        return encode_topic(topic)

    @_unary
    def GetTopic(self, request: pb.GetTopicRequest, context: grpc.ServicerContext) -> pb.Topic:
        return encode_topic(self.registry.get(request.name))

    @_unary
    def ListTopics(self, request: pb.ListTopicsRequest, context: grpc.ServicerContext) -> pb.ListTopicsResponse:
        return pb.ListTopicsResponse(topics=[encode_topic(t) for t in self.registry.list()])

    @_unary
    def DeleteTopic(self, request: pb.DeleteTopicRequest, context: grpc.ServicerContext) -> pb.DeleteTopicResponse:
        self.registry.delete(request.name)
        return pb.DeleteTopicResponse()


class SubscriptionService(rpc.SubscriptionServiceServicer):
    def __init__(self, registry: TopicRegistry) -> None:
        self.registry = registry

    @_unary
    def Subscribe(self, request: pb.SubscribeRequest, context: grpc.ServicerContext) -> pb.Subscription:
        topic = self.registry.get(request.topic)
        if not request.HasField("spec"):
            raise InvalidArgument("spec is required")
        [(sid, seq)] = topic.subscribe([request.spec], time.time_ns())
        return pb.Subscription(subscription_id=sid, spec=request.spec, registered_seq=seq)

    @_unary
    def SubscribeMany(
        self, request: pb.SubscribeManyRequest, context: grpc.ServicerContext
    ) -> pb.SubscribeManyResponse:
        topic = self.registry.get(request.topic)
        return _subscribed(topic.subscribe(request.specs, time.time_ns()))

    @_unary
    def SubscribeStream(
        self, request_iterator: Iterator[pb.SubscribeManyRequest], context: grpc.ServicerContext
    ) -> pb.SubscribeManyResponse:
        name = ""
        specs: list[pb.SubscriptionSpec] = []
        for req in request_iterator:
            if req.topic and name and req.topic != name:
                raise InvalidArgument(f"one stream, one topic: got {req.topic!r} after {name!r}")
            name = name or req.topic
            specs.extend(req.specs)
        topic = self.registry.get(name)
        return _subscribed(topic.subscribe(specs, time.time_ns()))

    @_unary
    def Unsubscribe(self, request: pb.UnsubscribeRequest, context: grpc.ServicerContext) -> pb.UnsubscribeResponse:
        topic = self.registry.get(request.topic)
        return pb.UnsubscribeResponse(seq=topic.unsubscribe(request.subscription_id))

    @_unary
    def ListSubscriptions(
        self, request: pb.ListSubscriptionsRequest, context: grpc.ServicerContext
    ) -> pb.ListSubscriptionsResponse:
        topic = self.registry.get(request.topic)
        after = request.after_id if request.HasField("after_id") else None
        page, more = topic.list_subscriptions(request.subscriber, after, request.page_size)
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
    def __init__(self, registry: TopicRegistry) -> None:
        self.registry = registry

    def _publish(self, topic: Topic, events: Any) -> pb.PublishResponse:
        return _response(topic.publish(events, time.time_ns()))

    @_unary
    def Publish(self, request: pb.PublishRequest, context: grpc.ServicerContext) -> pb.PublishResponse:
        return self._publish(self.registry.get(request.topic), request.events)

    @_streaming
    def PublishStream(
        self, request_iterator: Iterator[pb.PublishRequest], context: grpc.ServicerContext
    ) -> Iterator[pb.PublishResponse]:
        # A reader thread applies batch k+1 (engine + log write) while batch k waits for its
        # sync; acknowledgements still go out in request order, each once its batch is durable.
        done: queue.Queue[Any] = queue.Queue(maxsize=PUBLISH_PIPELINE)
        stop = threading.Event()

        def put(item: Any) -> bool:
            while not stop.is_set():
                try:
                    done.put(item, timeout=0.2)
                    return True
                except queue.Full:
                    continue
            return False

        def reader() -> None:
            topic: Topic | None = None
            try:
                for req in request_iterator:
                    if stop.is_set():
                        return
                    if topic is None:
                        topic = self.registry.get(req.topic)
                    elif req.topic and req.topic != topic.name:
                        raise InvalidArgument(f"one stream, one topic: got {req.topic!r} after {topic.name!r}")
                    received = time.time_ns()
                    statuses, token = topic.publish_begin(req.events, received)
                    if not put((topic, statuses, token, received)):
                        topic.commit(token)  # the stream is gone: still sync and deliver
                        return
                put(None)
            except BaseException as e:  # noqa: BLE001 - handed to the responding thread
                put(e)

        context.add_callback(stop.set)
        threading.Thread(target=reader, name="hotjoin-publish-reader", daemon=True).start()
        try:
            while True:
                item = done.get()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                topic, statuses, token, received = item
                topic.commit(token)
                topic.observe_publish(received)
                yield _response(statuses)
        finally:
            stop.set()
            while True:  # batches applied but not acknowledged: still sync and deliver them
                try:
                    item = done.get_nowait()
                except queue.Empty:
                    break
                if isinstance(item, tuple):
                    item[0].commit(item[2])

    @_unary
    def DeleteEvents(self, request: pb.DeleteEventsRequest, context: grpc.ServicerContext) -> pb.DeleteEventsResponse:
        topic = self.registry.get(request.topic)
        return pb.DeleteEventsResponse(statuses=encode_statuses(topic.delete(request.events, time.time_ns())))


def _response(statuses: list[Status]) -> pb.PublishResponse:
    ok = sum(1 for s in statuses if s.code == "ok")
    return pb.PublishResponse(statuses=encode_statuses(statuses), accepted=ok, rejected=len(statuses) - ok)


class ListenService(rpc.ListenServiceServicer):
    def __init__(self, registry: TopicRegistry) -> None:
        self.registry = registry

    @_streaming
    def Listen(self, request: pb.ListenRequest, context: grpc.ServicerContext) -> Iterator[pb.ListenResponse]:
        topic = self.registry.get(request.topic)
        cursors = {c.subscription_id: c.after_seq for c in request.cursors}
        lis = topic.listen(
            request.subscriber, list(request.subscription_ids), cursors,
            request.default_after_seq, request.from_latest,
        )
        context.add_callback(lis.wake.set)
        try:
            while context.is_active():
                items = lis.next_batch(LISTEN_POLL_SECONDS)
                if lis.closed:
                    context.abort(grpc.StatusCode[topic.hub.close_code or "UNAVAILABLE"], topic.hub.close_message)
                yield from encode_items(items, request.batch)
        finally:
            lis.close()


class StatsService(rpc.StatsServiceServicer):
    def __init__(self, registry: TopicRegistry) -> None:
        self.registry = registry

    @_unary
    def GetTopicStats(self, request: pb.TopicStatsRequest, context: grpc.ServicerContext) -> pb.TopicStats:
        topic = self.registry.get(request.topic)
        st = topic.stats()
        out = pb.TopicStats(topic=topic.name, seq=st["seq"], listeners=st["listeners"])
        if st.get("watermark") is not None:
            out.watermark = st["watermark"]
        for field in ("tuples", "subscriptions", "tau", "hotspots", "decisions"):
            getattr(out, field).update({k: int(v) for k, v in st.get(field, {}).items()})
        return out


def add_services(server: grpc.Server, registry: TopicRegistry) -> list[str]:
    """Register every hotjoin servicer on ``server``; returns their full service names."""
    rpc.add_TopicServiceServicer_to_server(TopicService(registry), server)
    rpc.add_SubscriptionServiceServicer_to_server(SubscriptionService(registry), server)
    rpc.add_PublishServiceServicer_to_server(PublishService(registry), server)
    rpc.add_ListenServiceServicer_to_server(ListenService(registry), server)
    rpc.add_StatsServiceServicer_to_server(StatsService(registry), server)
    return [s.full_name for s in pb.DESCRIPTOR.services_by_name.values()]
