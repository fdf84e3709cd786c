"""The blocking client of the hotjoin gRPC API (``proto/hotjoin/v1/hotjoin.proto``).

One ``Client`` holds one gRPC channel and is thread-safe. It speaks the engine's vocabulary —
``SelectJoin``, ``BandJoin``, ``WindowJoin``, ``Range``, ``Event`` — with subscription options as
keyword arguments, returns the frozen dataclasses of ``hotjoin.clients.results`` and raises the
typed errors of ``hotjoin.clients.errors``. A complete example is in ``hotjoin.clients``; with a
server at ``$HOTJOIN_TARGET`` (else 127.0.0.1:50051):

>>> from hotjoin import BandJoin, Client, Event, Range
>>> with Client() as hj:                                            # doctest: +SKIP
...     _ = hj.create_topic("client-doc")
...     sid = hj.subscribe("client-doc", BandJoin(b=Range(-1, 1)), subscriber="doc")
...     r = hj.publish("client-doc", [Event("S", "s1", 1.5, 0.0, time=1),
...                                   Event("R", "r1", 1.0, 0.0, time=2)])
...     print(r.accepted, [s.code for s in r.statuses])
...     print(next(iter(hj.listen("client-doc", subscriber="doc"))).pairs)
2 ['OK', 'OK']
(('r1', 's1'),)

A server with security turned on (``docs/how-to/security.md``) takes ``token=`` (sent as
``authorization: Bearer <token>`` on every call) and ``tls_ca=`` (the CA that signed the
server's certificate; ``tls=True`` alone uses the system's roots), plus ``tls_cert=`` and
``tls_key=`` for mutual TLS and ``server_name=`` when the certificate's name differs from the
target's host.

The wire helpers of earlier versions (``band``, ``select``, ``window``, ``event``, ``ref``,
``columns``, ``MatchColumns``, ``MatchStream``, ...) are importable from here as before; they
live in ``convert.py``, ``columns.py`` and ``streams.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc

from hotjoin.clients.channel import CHANNEL_OPTIONS, BearerToken, make_channel
from hotjoin.clients.columns import MatchColumns, columns, columns_from_arrow
from hotjoin.clients.convert import (
    STATUS_NAMES,
    EventLike,
    RefLike,
    SpecLike,
    band,
    batch_rows,
    commit_request,
    create_topic_request,
    cursors_of,
    delete_result_of,
    event,
    event_to_wire,
    listen_request,
    publish_result_of,
    ref,
    ref_to_wire,
    rng,
    select,
    spec_to_wire,
    stats_of,
    subscription_of,
    topic_of,
    window,
)
from hotjoin.clients.errors import Unavailable
from hotjoin.clients.results import (
    CaughtUp,
    Cursors,
    DeleteResult,
    Gap,
    PublishResult,
    SubscriptionInfo,
    Topic,
    TopicStats,
    Unsubscribed,
)
from hotjoin.clients.streams import BatchingPublisher, ColumnStream, MatchStream, Publisher
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.proto import hotjoin_pb2_grpc as rpc

DEFAULT_TARGET = "127.0.0.1:50051"
TARGET_ENV = "HOTJOIN_TARGET"
SUBSCRIBE_CHUNK = 50_000


def default_target() -> str:
    """``$HOTJOIN_TARGET`` when set, else ``127.0.0.1:50051`` (what ``hotjoin`` uses too)."""
    return os.environ.get(TARGET_ENV) or DEFAULT_TARGET


class Client:
    """Blocking client of one hotjoin server; thread-safe (one gRPC channel). Use it as a
    context manager, or call ``close()``.

    ``target``: ``HOST:PORT`` (None: ``$HOTJOIN_TARGET``, else 127.0.0.1:50051); ``timeout``:
    seconds per unary call (None: no deadline). Security options: module docstring. The raw
    gRPC stubs are ``topics``, ``subscriptions``, ``publishing``, ``listening`` and
    ``stats_stub`` (their errors are typed too); the methods below need none of them.
    """

    def __init__(self, target: str | None = None, timeout: float | None = 60.0, *,
                 token: str | None = None, tls: bool = False, tls_ca: str | Path | None = None,
                 tls_cert: str | Path | None = None, tls_key: str | Path | None = None,
                 server_name: str | None = None) -> None:
        self.target = target or default_target()
        self.timeout = timeout
        self.channel = make_channel(self.target, token=token, tls=tls, tls_ca=tls_ca,
                                    tls_cert=tls_cert, tls_key=tls_key, server_name=server_name)
        self.topics = rpc.TopicServiceStub(self.channel)
        self.subscriptions = rpc.SubscriptionServiceStub(self.channel)
        self.publishing = rpc.PublishServiceStub(self.channel)
        self.listening = rpc.ListenServiceStub(self.channel)
        self.stats_stub = rpc.StatsServiceStub(self.channel)

    def __repr__(self) -> str:
        return f"Client({self.target!r})"

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel: open streams end, later calls fail. Idempotent."""
        self.channel.close()

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Block until the server accepts connections; ``Unavailable`` after ``timeout`` s."""
        try:
            grpc.channel_ready_future(self.channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            raise Unavailable(f"no connection to {self.target} within {timeout:g} s") from None

    # ---- topics -------------------------------------------------------------------------------

    def create_topic(self, name: str, lateness: int = 0, retention: int | None = None,
                     strategy: Mapping[str, str] | None = None, *,
                     delivery_retention_bytes: int | None = None,
                     delivery_retention_ms: int | None = None,
                     max_advance: int | None = None) -> Topic:
        """Create topic ``name`` and return it; ``AlreadyExists`` if it exists.

        ``lateness``: allowed disorder in event-time units; ``retention``: drop tuples older
        than the watermark minus it (None: keep until deleted); ``strategy``: engine strategy per
        join kind (e.g. ``{"band": "BJ-SSI"}``; default ``"auto"``); the delivery retention of
        its match log (``docs/reference/persistence.md``); ``max_advance``: how far (event-time units)
        one event may move the topic's clock beyond the largest event time seen, an event
        further ahead being rejected INVALID. Options left None take the server's defaults
        (``max_advance``: 86400000, one day in milliseconds; 0: no bound).
        """
        req = create_topic_request(name, lateness, retention, strategy, delivery_retention_bytes,
                                   delivery_retention_ms, max_advance)
        return topic_of(self.topics.CreateTopic(req, timeout=self.timeout))

    def get_topic(self, name: str) -> Topic:
        """Topic ``name`` with its options and last seq; ``NotFound`` if it does not exist."""
        return topic_of(self.topics.GetTopic(pb.GetTopicRequest(name=name), timeout=self.timeout))

    def list_topics(self) -> list[Topic]:
        """Every topic (damaged ones included, with their ``damaged`` reason)."""
        resp = self.topics.ListTopics(pb.ListTopicsRequest(), timeout=self.timeout)
        return [topic_of(t) for t in resp.topics]

    def delete_topic(self, name: str) -> None:
        """Delete topic ``name`` with its data; ``NotFound`` if it does not exist."""
        self.topics.DeleteTopic(pb.DeleteTopicRequest(name=name), timeout=self.timeout)

    # ---- subscriptions ------------------------------------------------------------------------

    def subscribe(self, topic: str, spec: SpecLike, *, subscriber: str | None = None,
                  delivery: str | None = None, snapshot: bool | None = None) -> int:
        """Register one subscription and return its id.

        ``spec``: a ``SelectJoin``, ``BandJoin``, ``WindowJoin`` or ``IntervalJoin``; ``subscriber``: the name
        ``listen(subscriber=...)`` receives its matches under; ``delivery``: ``"pairs"`` (one
        message per operation listing the pairs) or ``"affected"`` (the pair count only);
        ``snapshot``: deliver the pairs already in the result first. Left None: no subscriber,
        ``"pairs"``, no snapshot (or, for a spec built with ``band(...)`` etc., its own).
        """
        wire = spec_to_wire(spec, subscriber=subscriber, delivery=delivery, snapshot=snapshot)
        sub = self.subscriptions.Subscribe(pb.SubscribeRequest(topic=topic, spec=wire),
                                           timeout=self.timeout)
        return int(sub.subscription_id)

    def subscribe_many(self, topic: str, specs: Sequence[SpecLike], *,
                       subscriber: str | None = None, delivery: str | None = None,
                       snapshot: bool | None = None, chunk: int = SUBSCRIBE_CHUNK) -> list[int]:
        """Register many subscriptions atomically (all or none), with the same options as
        ``subscribe`` for each, streamed in messages of ``chunk``; their ids, in order."""
        wire = [spec_to_wire(s, subscriber=subscriber, delivery=delivery, snapshot=snapshot)
                for s in specs]
        if len(wire) <= chunk:
            resp = self.subscriptions.SubscribeMany(pb.SubscribeManyRequest(topic=topic, specs=wire),
                                                    timeout=self.timeout)
        else:
            reqs = (pb.SubscribeManyRequest(topic=topic if i == 0 else "", specs=wire[i: i + chunk])
                    for i in range(0, len(wire), chunk))
            resp = self.subscriptions.SubscribeStream(reqs, timeout=self.timeout)
        return [int(i) for i in resp.subscription_ids]

    def unsubscribe(self, topic: str, subscription_id: int) -> int:
        """Cancel a subscription (its listeners get ``Unsubscribed``); the seq it took.
        ``NotFound`` for an unknown id."""
        resp = self.subscriptions.Unsubscribe(
            pb.UnsubscribeRequest(topic=topic, subscription_id=subscription_id), timeout=self.timeout)
        return int(resp.seq)

    def list_subscriptions(self, topic: str, subscriber: str = "",
                           page_size: int = 10_000) -> Iterator[SubscriptionInfo]:
        """Every live subscription (of ``subscriber`` when set), fetched page by page."""
        after: int | None = None
        while True:
            req = pb.ListSubscriptionsRequest(topic=topic, subscriber=subscriber, page_size=page_size)
            if after is not None:
                req.after_id = after
            resp = self.subscriptions.ListSubscriptions(req, timeout=self.timeout)
            for s in resp.subscriptions:
                yield subscription_of(s)
            if not resp.more or not resp.subscriptions:
                return
            after = resp.subscriptions[-1].subscription_id

    # ---- events -------------------------------------------------------------------------------

    def publish(self, topic: str, events: Iterable[EventLike]) -> PublishResult:
        """Publish one batch of ``Event`` (or ``event(...)`` for a server-assigned id or time);
        returns once the applied events are durable, with one ``EventResult`` per event.

        A rejected event (late, duplicate, invalid) is a status, not an error: the others are
        applied. Errors are for the batch as a whole (``NotFound`` topic, ...).
        """
        req = pb.PublishRequest(topic=topic, events=[event_to_wire(e) for e in events])
        return publish_result_of(self.publishing.Publish(req, timeout=self.timeout))

    def publish_columns(self, topic: str, sides: Any, ids: Any, keys: Any, values: Any,
                        times: Any = None, payloads: Any = None, ends: Any = None) -> PublishResult:
        """Publish one batch given as columns (numpy, lists or Arrow; ``columns``); returns once
        durable.

        The result lists only the rejected events (``statuses``, each with its ``index``); the
        accepted ones took the consecutive seqs ``first_seq..last_seq`` in batch order, and
        ``assigned`` maps the index of an event sent with an empty id to its new id. ``ends``:
        interval ends (``Event.end``; None: every event a point).
        """
        req = pb.PublishRequest(topic=topic, columns=columns(sides, ids, keys, values, times,
                                                             payloads, ends))
        return publish_result_of(self.publishing.Publish(req, timeout=self.timeout))

    def delete_events(self, topic: str, refs: Iterable[RefLike]) -> DeleteResult:
        """Delete stored events, each named ``EventRef(side, id)`` or ``(side, id)``: every pair
        they formed is delivered again with sign −1. One status per event (``NOT_FOUND`` for an
        event not stored)."""
        req = pb.DeleteEventsRequest(topic=topic, events=[ref_to_wire(r) for r in refs])
        return delete_result_of(self.publishing.DeleteEvents(req, timeout=self.timeout))

    def publisher(self, topic: str, batch_size: int = 1000, linger: float = 0.002,
                  max_in_flight: int = 8) -> Publisher:
        """A batching ``Publisher`` over the streaming RPC, for high rates (use as a context
        manager: leaving it flushes)."""
        return Publisher(self, topic, batch_size, linger, max_in_flight)

    # ---- listening ----------------------------------------------------------------------------

    def listen(self, topic: str, subscriber: str = "", subscription_ids: Iterable[int] = (),
               cursors: Mapping[int, int] | None = None, from_latest: bool = False,
               reconnect: bool = True, retry_delay: float = 0.2, batch: bool = False,
               batch_pairs: bool = False, auto_commit: float | None = None,
               ignore_committed: bool = False, after_seq: int | None = None) -> MatchStream:
        """An iterator over the matches of ``subscriber``'s subscriptions (and/or of
        ``subscription_ids``) that resumes after reconnects (``MatchStream``).

        It yields ``Match`` (one subscription, one operation), ``Gap`` (messages no longer
        retained), ``CaughtUp`` (everything retained has been yielded, once per connection) and
        ``Unsubscribed``; test ``item.kind`` or ``isinstance``.

        Where a subscription starts: its entry in ``cursors`` (``{id: after seq}``), else its
        committed cursor on the server (unless ``ignore_committed``), else ``after_seq`` (None:
        its first retained message), or the next operation with ``from_latest``. With
        ``auto_commit`` the positions of processed messages (those before the one the
        application asks for next) are committed at most every ``auto_commit`` seconds and when
        the iteration ends.

        With ``batch`` the server packs matches without pairs into ``MatchBatch`` items (columns;
        ``.rows()`` gives the ``Match`` of each): one gRPC message for thousands of matches.
        With ``batch_pairs`` as well, PAIRS matches of up to 10,000 pairs come in them too.
        Cursors, gaps and resume work the same way.
        """
        req = listen_request(topic, subscriber, subscription_ids, None, from_latest, batch,
                             batch_pairs, ignore_committed, after_seq)
        return MatchStream(self, req, dict(cursors or {}), reconnect, retry_delay, auto_commit)

    def listen_columns(self, topic: str, subscriber: str = "", subscription_ids: Iterable[int] = (),
                       cursors: Mapping[int, int] | None = None, from_latest: bool = False,
                       reconnect: bool = True, retry_delay: float = 0.2,
                       after_seq: int | None = None,
                       ) -> Iterator[MatchColumns | Gap | CaughtUp | Unsubscribed]:
        """The matches as columns (``ListenRequest.columnar``): each batch (and each large PAIRS
        match) as a ``MatchColumns`` of numpy views and Arrow arrays of the message's bytes
        (``.to_arrow()`` for an Arrow record batch), no object per match or pair; ``Gap``,
        ``CaughtUp`` and ``Unsubscribed`` as they come. Resume and reconnect as ``listen``
        (``ColumnStream``; ``cancel()`` ends it from another thread)."""
        req = listen_request(topic, subscriber, subscription_ids, None, from_latest, True, True,
                             False, after_seq)
        return ColumnStream(self, req, dict(cursors or {}), reconnect, retry_delay)

    def commit_cursors(self, topic: str, cursors: Mapping[int, int] | None = None,
                       subscriber: str = "", after_seq: int | None = None) -> int:
        """Commit processed positions ``{subscription id: seq}`` (and/or ``after_seq`` for every
        subscription of ``subscriber``), like Kafka consumer offsets: a later ``listen`` starts
        after them. Durable on return; returns how many were committed. ``OutOfRange`` for a
        position beyond the topic's seq."""
        req = commit_request(topic, cursors, subscriber, after_seq)
        return int(self.listening.CommitCursors(req, timeout=self.timeout).committed)

    def get_cursors(self, topic: str, subscriber: str = "",
                    subscription_ids: Iterable[int] = ()) -> Cursors:
        """Committed positions, lag and backlog of the topic's live subscriptions (of
        ``subscriber`` and/or ``subscription_ids`` when given)."""
        req = pb.GetCursorsRequest(topic=topic, subscriber=subscriber,
                                   subscription_ids=list(subscription_ids))
        return cursors_of(self.listening.GetCursors(req, timeout=self.timeout))

    # ---- stats --------------------------------------------------------------------------------

    def stats(self, topic: str) -> TopicStats:
        """The topic's sizes, τ, hotspots, router decisions, listeners and delivery figures."""
        return stats_of(self.stats_stub.GetTopicStats(pb.TopicStatsRequest(topic=topic),
                                                      timeout=self.timeout))


HotjoinClient = Client
"""The former name of ``Client``."""

__all__ = [
    "BatchingPublisher", "BearerToken", "CHANNEL_OPTIONS", "Client", "HotjoinClient",
    "MatchColumns", "MatchStream", "Publisher", "STATUS_NAMES", "band", "batch_rows", "columns",
    "columns_from_arrow", "default_target", "event", "make_channel", "ref", "rng", "select",
    "window",
]
