"""Asyncio client of the hotjoin gRPC API (``grpc.aio``), beside the blocking ``HotjoinClient``.

>>> async def main() -> None:                                          # doctest: +SKIP
...     async with AsyncHotjoinClient("127.0.0.1:50051") as hj:
...         await hj.create_topic("t")
...         await hj.subscribe("t", band(b=(-1, 1), subscriber="me", delivery="affected"))
...         await hj.publish_columns("t", ["R", "S"], ["r1", "s1"], [1.0, 1.5], [0.0, 0.0], [5, 6])
...         async for m in hj.listen_columns("t", subscriber="me"):
...             print(m.subscription_id, m.count)

The same messages and builders as ``clients/client.py`` (``columns``, ``select``, ``band``,
``window``, ``event``). ``publish_stream`` pipelines batches over one ``PublishStream`` call and
yields their acknowledgements in order. Listening here does not reconnect by itself (the
blocking ``MatchStream`` does); a caller resumes by passing the cursors it has seen.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from hotjoin.clients.client import CHANNEL_OPTIONS, MatchColumns, _read, columns
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.proto import hotjoin_pb2_grpc as rpc


class AsyncHotjoinClient:
    """Asyncio client of one hotjoin server (one ``grpc.aio`` channel); use ``async with``."""

    def __init__(self, target: str = "127.0.0.1:50051", timeout: float | None = 60.0, *,
                 token: str | None = None, tls: bool = False, tls_ca: str | Path | None = None,
                 tls_cert: str | Path | None = None, tls_key: str | Path | None = None,
                 server_name: str | None = None) -> None:
        self.target = target
        self.timeout = timeout
        opts = list(CHANNEL_OPTIONS)
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("mutual TLS needs both a client certificate and its key (tls_cert and tls_key)")
        if tls or tls_ca is not None or tls_cert is not None:
            creds = grpc.ssl_channel_credentials(
                root_certificates=_read(tls_ca, "TLS CA file"), private_key=_read(tls_key, "TLS client key"),
                certificate_chain=_read(tls_cert, "TLS client certificate"))
            if server_name:
                opts.append(("grpc.ssl_target_name_override", server_name))
            self.channel = grpc.aio.secure_channel(target, creds, options=opts)
        else:
            self.channel = grpc.aio.insecure_channel(target, options=opts)
        self._md = (("authorization", f"Bearer {token}"),) if token else None
        self.topics = rpc.TopicServiceStub(self.channel)
        self.subscriptions = rpc.SubscriptionServiceStub(self.channel)
        self.publishing = rpc.PublishServiceStub(self.channel)
        self.listening = rpc.ListenServiceStub(self.channel)
        self.stats_stub = rpc.StatsServiceStub(self.channel)

    async def __aenter__(self) -> AsyncHotjoinClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.channel.close()

    async def wait_ready(self, timeout: float = 10.0) -> None:
        """Wait until the server accepts connections."""
        import asyncio

        await asyncio.wait_for(self.channel.channel_ready(), timeout)

    # topics
    async def create_topic(self, name: str, lateness: int = 0, retention: int | None = None,
                           strategy: Mapping[str, str] | None = None, *,
                           max_advance: int | None = None) -> pb.Topic:
        """Create topic ``name`` (as ``HotjoinClient.create_topic``; ``max_advance`` None: the
        server's default, one day in milliseconds; 0: no bound)."""
        req = pb.CreateTopicRequest(name=name, lateness=lateness, strategy=dict(strategy or {}))
        if retention is not None:
            req.retention = retention
        if max_advance is not None:
            req.max_advance = max_advance
        return await self.topics.CreateTopic(req, timeout=self.timeout, metadata=self._md)

    async def get_topic(self, name: str) -> pb.Topic:
        return await self.topics.GetTopic(pb.GetTopicRequest(name=name), timeout=self.timeout, metadata=self._md)

    async def delete_topic(self, name: str) -> None:
        await self.topics.DeleteTopic(pb.DeleteTopicRequest(name=name), timeout=self.timeout, metadata=self._md)

    # subscriptions
    async def subscribe(self, topic: str, spec: pb.SubscriptionSpec) -> int:
        sub = await self.subscriptions.Subscribe(pb.SubscribeRequest(topic=topic, spec=spec),
                                                 timeout=self.timeout, metadata=self._md)
        return int(sub.subscription_id)

    async def subscribe_many(self, topic: str, specs: Sequence[pb.SubscriptionSpec]) -> list[int]:
        resp = await self.subscriptions.SubscribeMany(pb.SubscribeManyRequest(topic=topic, specs=specs),
                                                      timeout=self.timeout, metadata=self._md)
        return list(resp.subscription_ids)

    async def unsubscribe(self, topic: str, subscription_id: int) -> int:
        resp = await self.subscriptions.Unsubscribe(
            pb.UnsubscribeRequest(topic=topic, subscription_id=subscription_id), timeout=self.timeout,
            metadata=self._md)
        return int(resp.seq)

    # publishing
    async def publish(self, topic: str, events: Sequence[pb.Event]) -> pb.PublishResponse:
        """One batch, one message per event; returns once durable."""
        return await self.publishing.Publish(pb.PublishRequest(topic=topic, events=events),
                                             timeout=self.timeout, metadata=self._md)

    async def publish_columns(self, topic: str, sides: Any, ids: Any, keys: Any, values: Any,
                              times: Any = None, payloads: Any = None) -> pb.PublishResponse:
        """One batch as columns (``clients.client.columns``); returns once durable."""
        req = pb.PublishRequest(topic=topic, columns=columns(sides, ids, keys, values, times, payloads))
        return await self.publishing.Publish(req, timeout=self.timeout, metadata=self._md)

    async def delete_events(self, topic: str, refs: Sequence[pb.EventRef]) -> pb.DeleteEventsResponse:
        return await self.publishing.DeleteEvents(pb.DeleteEventsRequest(topic=topic, events=refs),
                                                  timeout=self.timeout, metadata=self._md)

    async def publish_stream(self, topic: str,
                             batches: AsyncIterable[pb.EventColumns | Sequence[pb.Event]]
                             ) -> AsyncIterator[pb.PublishResponse]:
        """Stream batches (``EventColumns`` or lists of ``Event``) over one ``PublishStream``;
        yields one acknowledgement per batch, in order, each once its batch is durable."""

        async def requests() -> AsyncIterator[pb.PublishRequest]:
            first = True
            async for b in batches:
                name = topic if first else ""
                first = False
                if isinstance(b, pb.EventColumns):
                    yield pb.PublishRequest(topic=name, columns=b)
                else:
                    yield pb.PublishRequest(topic=name, events=b)

        call = self.publishing.PublishStream(requests(), metadata=self._md)
        async for resp in call:
            yield resp

    # listening
    async def listen(self, topic: str, subscriber: str = "", subscription_ids: Iterable[int] = (),
                     cursors: Mapping[int, int] | None = None, from_latest: bool = False,
                     batch: bool = False, batch_pairs: bool = False) -> AsyncIterator[pb.ListenResponse]:
        """The Listen stream's messages as they come (``batch``: ``MatchBatch`` messages;
        ``batch_pairs``: PAIRS messages in them too)."""
        req = pb.ListenRequest(topic=topic, subscriber=subscriber, subscription_ids=list(subscription_ids),
                               from_latest=from_latest, batch=batch, batch_pairs=batch_pairs,
                               cursors=[pb.Cursor(subscription_id=s, after_seq=q)
                                        for s, q in (cursors or {}).items()])
        call = self.listening.Listen(req, metadata=self._md)
        try:
            async for resp in call:
                yield resp
        finally:
            call.cancel()

    async def listen_columns(self, topic: str, subscriber: str = "", subscription_ids: Iterable[int] = (),
                             cursors: Mapping[int, int] | None = None, from_latest: bool = False
                             ) -> AsyncIterator[MatchColumns | pb.ListenResponse]:
        """Matches as ``MatchColumns`` (numpy; ``.to_arrow()``), other messages as they come.

        A PAIRS message split into parts (``more``) is yielded part by part here.
        """
        async for resp in self.listen(topic, subscriber, subscription_ids, cursors, from_latest, batch=True,
                                      batch_pairs=True):
            kind = resp.WhichOneof("message")
            if kind == "matches":
                yield MatchColumns.of_batch(resp.matches)
            elif kind == "match":
                yield MatchColumns.of_match(resp.match)
            else:
                yield resp

    async def stats(self, topic: str) -> pb.TopicStats:
        return await self.stats_stub.GetTopicStats(pb.TopicStatsRequest(topic=topic), timeout=self.timeout,
                                                   metadata=self._md)


__all__ = ["AsyncHotjoinClient"]
