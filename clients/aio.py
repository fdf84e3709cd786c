"""The asyncio client of the hotjoin gRPC API (``grpc.aio``): the blocking ``Client``'s surface,
awaited.

Every method of ``Client`` is here under the same name with the same arguments, results (the
dataclasses of ``hotjoin.clients.results``) and typed errors (``hotjoin.clients.errors``),
except ``publisher``: ``publish_stream`` pipelines batches over one ``PublishStream`` call and
yields their ``PublishResult`` in order. ``list_subscriptions``, ``listen`` and
``listen_columns`` are async iterators. With a server at ``$HOTJOIN_TARGET`` (else
127.0.0.1:50051):

>>> import asyncio
>>> from hotjoin import AsyncClient, BandJoin, Range
>>> async def main() -> None:
...     async with AsyncClient() as hj:
...         await hj.create_topic("aio-doc")
...         await hj.subscribe("aio-doc", BandJoin(b=Range(-1, 1)), subscriber="me",
...                            delivery="affected")
...         await hj.publish_columns("aio-doc", ["S", "R"], ["s1", "r1"], [1.5, 1.0], [0.0, 0.0],
...                                  [5, 6])
...         async for m in hj.listen_columns("aio-doc", subscriber="me"):
...             print(m.subscription_id.tolist(), m.count.tolist())
...             break
>>> asyncio.run(main())                                              # doctest: +SKIP
[0] [1]

Listening here does not reconnect by itself (the blocking ``MatchStream`` does): a caller
resumes by passing the cursors it has seen, or commits them (``commit_cursors``) and listens
again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import grpc
import grpc.aio

from hotjoin.clients.channel import CHANNEL_OPTIONS, credentials
from hotjoin.clients.client import SUBSCRIBE_CHUNK, default_target
from hotjoin.clients.columns import MatchColumns, columns
from hotjoin.clients.convert import (
    EventLike,
    RefLike,
    SpecLike,
    columns_item,
    commit_request,
    create_topic_request,
    cursors_of,
    delete_result_of,
    event_to_wire,
    listen_item_of,
    listen_request,
    publish_result_of,
    ref_to_wire,
    spec_to_wire,
    stats_of,
    subscription_of,
    topic_of,
)
from hotjoin.clients.errors import Unavailable, from_rpc_error
from hotjoin.clients.results import (
    CaughtUp,
    Cursors,
    DeleteResult,
    Gap,
    ListenItem,
    PublishResult,
    SubscriptionInfo,
    Topic,
    TopicStats,
    Unsubscribed,
)
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.proto import hotjoin_pb2_grpc as rpc

T = TypeVar("T")


async def _typed(call: Awaitable[T]) -> T:
    """The call's answer, or its typed error raised (never a raw ``grpc.RpcError``)."""
    try:
        return await call
    except grpc.RpcError as e:
        raise from_rpc_error(e) from None


class AsyncClient:
    """Asyncio client of one hotjoin server (one ``grpc.aio`` channel); use ``async with``.

    Arguments as ``Client``'s: ``target`` (None: ``$HOTJOIN_TARGET``, else 127.0.0.1:50051),
    ``timeout`` per unary call, and the security options of ``docs/how-to/security.md``.
    """

    def __init__(self, target: str | None = None, timeout: float | None = 60.0, *,
                 token: str | None = None, tls: bool = False, tls_ca: str | Path | None = None,
                 tls_cert: str | Path | None = None, tls_key: str | Path | None = None,
                 server_name: str | None = None) -> None:
        self.target = target or default_target()
        self.timeout = timeout
        opts = list(CHANNEL_OPTIONS)
        creds = credentials(tls, tls_ca, tls_cert, tls_key)
        if creds is not None:
            if server_name:
                opts.append(("grpc.ssl_target_name_override", server_name))
            self.channel = grpc.aio.secure_channel(self.target, creds, options=opts)
        else:
            self.channel = grpc.aio.insecure_channel(self.target, options=opts)
        self._md = (("authorization", f"Bearer {token}"),) if token else None
        self.topics = rpc.TopicServiceStub(self.channel)
        self.subscriptions = rpc.SubscriptionServiceStub(self.channel)
        self.publishing = rpc.PublishServiceStub(self.channel)
        self.listening = rpc.ListenServiceStub(self.channel)
        self.stats_stub = rpc.StatsServiceStub(self.channel)

    def __repr__(self) -> str:
        return f"AsyncClient({self.target!r})"

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel: open streams end, later calls fail."""
        await self.channel.close()

    async def wait_ready(self, timeout: float = 10.0) -> None:
        """Wait until the server accepts connections; ``Unavailable`` after ``timeout`` s."""
        try:
            await asyncio.wait_for(self.channel.channel_ready(), timeout)
        except TimeoutError:
            raise Unavailable(f"no connection to {self.target} within {timeout:g} s") from None

    def _kw(self) -> dict[str, Any]:
        return {"timeout": self.timeout, "metadata": self._md}

    # ---- topics -------------------------------------------------------------------------------

    async def create_topic(self, name: str, lateness: int = 0, retention: int | None = None,
                           strategy: Mapping[str, str] | None = None, *,
                           delivery_retention_bytes: int | None = None,
                           delivery_retention_ms: int | None = None,
                           max_advance: int | None = None) -> Topic:
        """Create topic ``name`` and return it (``Client.create_topic``)."""
        req = create_topic_request(name, lateness, retention, strategy, delivery_retention_bytes,
                                   delivery_retention_ms, max_advance)
        return topic_of(await _typed(self.topics.CreateTopic(req, **self._kw())))

    async def get_topic(self, name: str) -> Topic:
        """Topic ``name`` (``Client.get_topic``)."""
        return topic_of(await _typed(self.topics.GetTopic(pb.GetTopicRequest(name=name), **self._kw())))

    async def list_topics(self) -> list[Topic]:
        """Every topic (``Client.list_topics``)."""
        resp = await _typed(self.topics.ListTopics(pb.ListTopicsRequest(), **self._kw()))
        return [topic_of(t) for t in resp.topics]

    async def delete_topic(self, name: str) -> None:
        """Delete topic ``name`` with its data (``Client.delete_topic``)."""
        await _typed(self.topics.DeleteTopic(pb.DeleteTopicRequest(name=name), **self._kw()))

    # ---- subscriptions ------------------------------------------------------------------------

    async def subscribe(self, topic: str, spec: SpecLike, *, subscriber: str | None = None,
                        delivery: str | None = None, snapshot: bool | None = None) -> int:
        """Register one subscription; its id (``Client.subscribe``)."""
        wire = spec_to_wire(spec, subscriber=subscriber, delivery=delivery, snapshot=snapshot)
        sub = await _typed(self.subscriptions.Subscribe(pb.SubscribeRequest(topic=topic, spec=wire),
                                                        **self._kw()))
        return int(sub.subscription_id)

    async def subscribe_many(self, topic: str, specs: Sequence[SpecLike], *,
                             subscriber: str | None = None, delivery: str | None = None,
                             snapshot: bool | None = None, chunk: int = SUBSCRIBE_CHUNK) -> list[int]:
        """Register many subscriptions atomically; their ids (``Client.subscribe_many``)."""
        wire = [spec_to_wire(s, subscriber=subscriber, delivery=delivery, snapshot=snapshot)
                for s in specs]
        if len(wire) <= chunk:
            call = self.subscriptions.SubscribeMany(pb.SubscribeManyRequest(topic=topic, specs=wire),
                                                    **self._kw())
        else:
            reqs = [pb.SubscribeManyRequest(topic=topic if i == 0 else "", specs=wire[i: i + chunk])
                    for i in range(0, len(wire), chunk)]
            call = self.subscriptions.SubscribeStream(iter(reqs), **self._kw())
        resp = await _typed(call)
        return [int(i) for i in resp.subscription_ids]

    async def unsubscribe(self, topic: str, subscription_id: int) -> int:
        """Cancel a subscription; the seq it took (``Client.unsubscribe``)."""
        resp = await _typed(self.subscriptions.Unsubscribe(
            pb.UnsubscribeRequest(topic=topic, subscription_id=subscription_id), **self._kw()))
        return int(resp.seq)

    async def list_subscriptions(self, topic: str, subscriber: str = "",
                                 page_size: int = 10_000) -> AsyncIterator[SubscriptionInfo]:
        """Every live subscription (of ``subscriber`` when set), page by page."""
        after: int | None = None
        while True:
            req = pb.ListSubscriptionsRequest(topic=topic, subscriber=subscriber, page_size=page_size)
            if after is not None:
                req.after_id = after
            resp = await _typed(self.subscriptions.ListSubscriptions(req, **self._kw()))
            for s in resp.subscriptions:
                yield subscription_of(s)
            if not resp.more or not resp.subscriptions:
                return
            after = resp.subscriptions[-1].subscription_id

    # ---- events -------------------------------------------------------------------------------

    async def publish(self, topic: str, events: Iterable[EventLike]) -> PublishResult:
        """Publish one batch of events; once durable, one status per event (``Client.publish``)."""
        req = pb.PublishRequest(topic=topic, events=[event_to_wire(e) for e in events])
        return publish_result_of(await _typed(self.publishing.Publish(req, **self._kw())))

    async def publish_columns(self, topic: str, sides: Any, ids: Any, keys: Any, values: Any,
                              times: Any = None, payloads: Any = None,
                              ends: Any = None) -> PublishResult:
        """Publish one batch as columns; once durable (``Client.publish_columns``)."""
        req = pb.PublishRequest(topic=topic, columns=columns(sides, ids, keys, values, times,
                                                             payloads, ends))
        return publish_result_of(await _typed(self.publishing.Publish(req, **self._kw())))

    async def delete_events(self, topic: str, refs: Iterable[RefLike]) -> DeleteResult:
        """Delete stored events; one status per event (``Client.delete_events``)."""
        req = pb.DeleteEventsRequest(topic=topic, events=[ref_to_wire(r) for r in refs])
        return delete_result_of(await _typed(self.publishing.DeleteEvents(req, **self._kw())))

    async def publish_stream(self, topic: str,
                             batches: AsyncIterable[pb.EventColumns | Sequence[EventLike]]
                             ) -> AsyncIterator[PublishResult]:
        """Stream batches (``columns(...)`` or sequences of events) over one ``PublishStream``;
        yields one ``PublishResult`` per batch, in order, each once its batch is durable (the
        asyncio counterpart of ``Client.publisher``)."""

        async def requests() -> AsyncIterator[pb.PublishRequest]:
            first = True
            async for b in batches:
                name = topic if first else ""
                first = False
                if isinstance(b, pb.EventColumns):
                    yield pb.PublishRequest(topic=name, columns=b)
                else:
                    yield pb.PublishRequest(topic=name, events=[event_to_wire(e) for e in b])

        call = self.publishing.PublishStream(requests(), metadata=self._md)
        try:
            async for resp in call:
                yield publish_result_of(resp)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    # ---- listening ----------------------------------------------------------------------------

    async def listen(self, topic: str, subscriber: str = "", subscription_ids: Iterable[int] = (),
                     cursors: Mapping[int, int] | None = None, from_latest: bool = False,
                     batch: bool = False, batch_pairs: bool = False,
                     ignore_committed: bool = False, after_seq: int | None = None,
                     ) -> AsyncIterator[ListenItem]:
        """The Listen stream's items as they come: ``Match``, ``MatchBatch`` (with ``batch``),
        ``Gap``, ``CaughtUp``, ``Unsubscribed`` (``Client.listen``, without reconnects; parts of
        a split PAIRS message are yielded part by part)."""
        req = listen_request(topic, subscriber, subscription_ids, cursors, from_latest, batch,
                             batch_pairs, ignore_committed, after_seq)
        call = self.listening.Listen(req, metadata=self._md)
        try:
            async for resp in call:
                yield listen_item_of(resp)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        finally:
            call.cancel()

    async def listen_columns(self, topic: str, subscriber: str = "",
                             subscription_ids: Iterable[int] = (),
                             cursors: Mapping[int, int] | None = None, from_latest: bool = False,
                             after_seq: int | None = None,
                             ) -> AsyncIterator[MatchColumns | Gap | CaughtUp | Unsubscribed]:
        """Matches as ``MatchColumns`` decoded from columnar messages (numpy views and Arrow
        arrays of the message bytes; ``.to_arrow()``), the other items as they come
        (``Client.listen_columns``, without reconnects)."""
        req = listen_request(topic, subscriber, subscription_ids, cursors, from_latest, True, True,
                             False, after_seq)
        req.columnar = True
        call = self.listening.Listen(req, metadata=self._md)
        try:
            async for resp in call:
                if resp.WhichOneof("message") == "matches":
                    yield MatchColumns.of_batch(resp.matches)
                else:
                    yield columns_item(listen_item_of(resp))
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None
        finally:
            call.cancel()

    async def commit_cursors(self, topic: str, cursors: Mapping[int, int] | None = None,
                             subscriber: str = "", after_seq: int | None = None) -> int:
        """Commit processed positions; how many were committed (``Client.commit_cursors``)."""
        req = commit_request(topic, cursors, subscriber, after_seq)
        return int((await _typed(self.listening.CommitCursors(req, **self._kw()))).committed)

    async def get_cursors(self, topic: str, subscriber: str = "",
                          subscription_ids: Iterable[int] = ()) -> Cursors:
        """Committed positions, lag and backlog (``Client.get_cursors``)."""
        req = pb.GetCursorsRequest(topic=topic, subscriber=subscriber,
                                   subscription_ids=list(subscription_ids))
        return cursors_of(await _typed(self.listening.GetCursors(req, **self._kw())))

    # ---- stats --------------------------------------------------------------------------------

    async def stats(self, topic: str) -> TopicStats:
        """The topic's statistics (``Client.stats``)."""
        return stats_of(await _typed(self.stats_stub.GetTopicStats(pb.TopicStatsRequest(topic=topic),
                                                                   **self._kw())))


AsyncHotjoinClient = AsyncClient
"""The former name of ``AsyncClient``."""

__all__ = ["AsyncClient", "AsyncHotjoinClient"]
