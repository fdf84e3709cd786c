"""Typed Python client of the hotjoin gRPC API (SPEC §4).

>>> with HotjoinClient("127.0.0.1:50051") as hj:                      # doctest: +SKIP
...     hj.create_topic("t", lateness=10)
...     sid = hj.subscribe("t", band(b=(-1, 1)), subscriber="me")
...     hj.publish("t", [event("R", "r1", 1.0, 0.0, time=5), event("S", "s1", 1.5, 0.0, time=6)])
...     for msg in hj.listen("t", subscriber="me"):
...         print(msg)

``publisher()`` batches events over the streaming RPC for high rates; ``listen()`` returns an
iterator over matches that reconnects after a dropped connection or a server restart and
resumes from the last sequence number it yielded per subscription; the server keeps every
message within the topic's delivery retention on disk, and answers with a ``Gap`` only for
messages beyond it.

**Delivery guarantee.** Within one ``MatchStream`` every message is yielded exactly once by
(subscription, seq): reconnects resume after the last yielded seq, and a message at or below it
is dropped should one ever arrive again. Across restarts of the *application*, the stream starts
from the cursors committed on the server (``MatchStream.commit()``, or ``auto_commit=`` seconds;
``commit_cursors``), so delivery is **at-least-once**: what was yielded after the last commit is
delivered again. Committing after processing each message makes it exactly-once by seq.

A server with security turned on (server/SECURITY.md) takes ``token=`` (sent as
``authorization: Bearer <token>`` on every call) and ``tls_ca=`` (the CA that signed the
server's certificate; ``tls=True`` alone uses the system's roots), plus ``tls_cert=`` and
``tls_key=`` for mutual TLS and ``server_name=`` when the certificate's name differs from the
target's host.
"""

from __future__ import annotations

import collections
import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.proto import hotjoin_pb2_grpc as rpc

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]
RangeLike = tuple[float | None, float | None] | pb.Range | None
RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED,
             grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)


# ---- message builders --------------------------------------------------------------------------


def rng(r: RangeLike) -> pb.Range:
    """``(lo, hi)`` with ``None`` for unbounded → ``Range``."""
    if r is None:
        return pb.Range()
    if isinstance(r, pb.Range):
        return r
    lo, hi = r
    out = pb.Range()
    if lo is not None:
        out.lo = float(lo)
    if hi is not None:
        out.hi = float(hi)
    return out


def _spec(delivery: str, snapshot: bool, subscriber: str) -> pb.SubscriptionSpec:
    mode = {"pairs": pb.PAIRS, "affected": pb.AFFECTED}[delivery.lower()]
    return pb.SubscriptionSpec(delivery=mode, snapshot=snapshot, subscriber=subscriber)


def select(a: RangeLike = None, c: RangeLike = None, *, delivery: str = "pairs", snapshot: bool = False,
           subscriber: str = "") -> pb.SubscriptionSpec:
    """A select-join subscription: r.key == s.key, r.value ∈ a, s.value ∈ c."""
    out = _spec(delivery, snapshot, subscriber)
    out.select.a.CopyFrom(rng(a))
    out.select.c.CopyFrom(rng(c))
    return out


def band(b: RangeLike = None, a: RangeLike = None, c: RangeLike = None, *, delivery: str = "pairs",
         snapshot: bool = False, subscriber: str = "") -> pb.SubscriptionSpec:
    """A band-join subscription: s.key − r.key ∈ b, r.value ∈ a, s.value ∈ c."""
    out = _spec(delivery, snapshot, subscriber)
    out.band.b.CopyFrom(rng(b))
    out.band.a.CopyFrom(rng(a))
    out.band.c.CopyFrom(rng(c))
    return out


def window(a: RangeLike = None, c: RangeLike = None, w: int = 0, *, delivery: str = "pairs",
           snapshot: bool = False, subscriber: str = "") -> pb.SubscriptionSpec:
    """A window-join subscription: select-join condition and |r.time − s.time| ≤ w."""
    out = _spec(delivery, snapshot, subscriber)
    out.window.a.CopyFrom(rng(a))
    out.window.c.CopyFrom(rng(c))
    out.window.w = int(w)
    return out


def event(side: str, id: str, key: float, value: float, time: int | None = None,
          payload: bytes = b"") -> pb.Event:
    """An event of side ``"R"`` or ``"S"``; empty id / no time: the server assigns them."""
    out = pb.Event(side={"R": pb.SIDE_R, "S": pb.SIDE_S}[side], id=id, key=key, value=value, payload=payload)
    if time is not None:
        out.time = int(time)
    return out


def _np(col: Any, dtype: Any = None) -> np.ndarray:
    """A numpy view/copy of a numpy array, list or Arrow (Chunked)Array."""
    if hasattr(col, "to_numpy") and not isinstance(col, np.ndarray):
        col = col.to_numpy(zero_copy_only=False)
    return np.asarray(col, dtype=dtype)


def columns(sides: Any, ids: Any, keys: Any, values: Any, times: Any = None,
            payloads: Any = None) -> pb.EventColumns:
    """A columnar batch (``PublishRequest.columns``) from numpy arrays, lists or Arrow arrays.

    ``sides``: ``"R"``/``"S"`` strings, or integers with 0 = R and 1 = S (any other value is sent
    as an invalid side, which the server rejects for that event only). ``ids``: strings, empty
    for a server-assigned id. ``times``: None = the server's clock for every event. ``payloads``:
    bytes per event or None. Built with C-level conversions, no Python object per event beyond
    the id strings. A column of another length than ``ids`` is sent as it is and rejected by the
    server (INVALID_ARGUMENT, nothing applied).
    """
    s = _np(sides)
    if s.dtype.kind in "iu":
        code = np.where((s == 0) | (s == 1), s + 1, 0).astype(np.uint8)
    else:
        code = np.zeros(len(s), dtype=np.uint8)
        code[s == "R"] = pb.SIDE_R
        code[s == "S"] = pb.SIDE_S
    id_col = _np(ids, object)
    id_col = np.where(np.equal(id_col, None), "", id_col)  # None: a server-assigned id
    out = pb.EventColumns(sides=code.tobytes(), ids=id_col.astype(str).tolist(),
                          keys=_np(keys, np.float64).tolist(), values=_np(values, np.float64).tolist())
    if times is not None:
        out.times.extend(_np(times, np.int64).tolist())
    if payloads is not None:
        pl = payloads.to_pylist() if hasattr(payloads, "to_pylist") else list(payloads)
        if any(pl):
            out.payloads.extend(b"" if p is None else bytes(p) for p in pl)
    return out


def columns_from_arrow(batch: Any) -> pb.EventColumns:
    """``columns`` of an Arrow record batch or table with columns side, id, key, value and
    optionally time and payload (a null time or id: server-assigned)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = set(batch.schema.names)
    missing = {"side", "key", "value"} - names
    if missing:
        raise ValueError(f"missing column(s): {', '.join(sorted(missing))}")
    n = batch.num_rows
    ids = (pc.fill_null(batch.column("id").cast(pa.string()), "") if "id" in names
           else pa.array([""] * n))
    times = None
    if "time" in names:
        t = batch.column("time")
        if t.null_count == n:
            times = None
        elif t.null_count:
            raise ValueError("column time: either every event has a time or none (server clock)")
        else:
            times = t.cast(pa.int64())
    payloads = None
    if "payload" in names:
        payloads = pc.fill_null(batch.column("payload").cast(pa.binary()), b"")
    return columns(batch.column("side").cast(pa.string()), ids, batch.column("key").cast(pa.float64()),
                   batch.column("value").cast(pa.float64()), times, payloads)


def ref(side: str, id: str) -> pb.EventRef:
    return pb.EventRef(side={"R": pb.SIDE_R, "S": pb.SIDE_S}[side], id=id)


STATUS_NAMES = {v: k for k, v in pb.EventStatusCode.items()}


# ---- connection security -----------------------------------------------------------------------


class _CallDetails(
    collections.namedtuple("_CallDetails", ("method", "timeout", "metadata", "credentials",
                                            "wait_for_ready", "compression")),
    grpc.ClientCallDetails,
):
    pass


class BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                  grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds ``authorization: Bearer <token>`` to every call (plaintext and TLS channels alike)."""

    def __init__(self, token: str) -> None:
        self._entry = ("authorization", f"Bearer {token}")

    def __repr__(self) -> str:  # never print the token
        return "BearerToken(<redacted>)"

    def _details(self, d: grpc.ClientCallDetails) -> _CallDetails:
        md = [*(d.metadata or ()), self._entry]
        return _CallDetails(d.method, d.timeout, md, d.credentials, getattr(d, "wait_for_ready", None),
                            getattr(d, "compression", None))

    def intercept_unary_unary(self, continuation: Callable[..., Any], details: grpc.ClientCallDetails,
                              request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Callable[..., Any], details: grpc.ClientCallDetails,
                               request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation: Callable[..., Any], details: grpc.ClientCallDetails,
                               request_iterator: Any) -> Any:
        return continuation(self._details(details), request_iterator)

    def intercept_stream_stream(self, continuation: Callable[..., Any], details: grpc.ClientCallDetails,
                                request_iterator: Any) -> Any:
        return continuation(self._details(details), request_iterator)


def _read(path: str | Path | None, what: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read {what} {path}: {e.strerror}") from None


def make_channel(target: str, *, token: str | None = None, tls: bool = False,
                 tls_ca: str | Path | None = None, tls_cert: str | Path | None = None,
                 tls_key: str | Path | None = None, server_name: str | None = None,
                 options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
    """A channel to ``target``: TLS when ``tls`` or any ``tls_*`` file is given (``tls_cert`` +
    ``tls_key`` for mutual TLS), with the bearer ``token`` on every call when set."""
    opts = [*CHANNEL_OPTIONS, *options]
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("mutual TLS needs both a client certificate and its key (tls_cert and tls_key)")
    if tls or tls_ca is not None or tls_cert is not None:
        creds = grpc.ssl_channel_credentials(
            root_certificates=_read(tls_ca, "TLS CA file"),
            private_key=_read(tls_key, "TLS client key"),
            certificate_chain=_read(tls_cert, "TLS client certificate"),
        )
        if server_name:
            opts.append(("grpc.ssl_target_name_override", server_name))
        channel = grpc.secure_channel(target, creds, options=opts)
    else:
        channel = grpc.insecure_channel(target, options=opts)
    if token:
        channel = grpc.intercept_channel(channel, BearerToken(token))
    return channel


# ---- client ------------------------------------------------------------------------------------


class HotjoinClient:
    """Blocking client of one hotjoin server; thread-safe (one gRPC channel)."""

    def __init__(self, target: str = "127.0.0.1:50051", timeout: float | None = 60.0, *,
                 token: str | None = None, tls: bool = False, tls_ca: str | Path | None = None,
                 tls_cert: str | Path | None = None, tls_key: str | Path | None = None,
                 server_name: str | None = None) -> None:
        self.target = target
        self.timeout = timeout
        self.channel = make_channel(target, token=token, tls=tls, tls_ca=tls_ca, tls_cert=tls_cert,
                                    tls_key=tls_key, server_name=server_name)
        self.topics = rpc.TopicServiceStub(self.channel)
        self.subscriptions = rpc.SubscriptionServiceStub(self.channel)
        self.publishing = rpc.PublishServiceStub(self.channel)
        self.listening = rpc.ListenServiceStub(self.channel)
        self.stats_stub = rpc.StatsServiceStub(self.channel)

    def __enter__(self) -> HotjoinClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Block until the server accepts connections."""
        grpc.channel_ready_future(self.channel).result(timeout=timeout)

    # topics
    def create_topic(self, name: str, lateness: int = 0, retention: int | None = None,
                     strategy: Mapping[str, str] | None = None, *,
                     delivery_retention_bytes: int | None = None,
                     delivery_retention_ms: int | None = None,
                     max_advance: int | None = None) -> pb.Topic:
        """Create topic ``name``; options left None take the server's defaults.

        ``max_advance``: how far (event-time units) one event may move the topic's clock beyond
        the largest event time seen; an event further ahead is rejected INVALID. None: the
        server's default (86400000, one day in milliseconds); 0: no bound.
        """
        req = pb.CreateTopicRequest(name=name, lateness=lateness, strategy=dict(strategy or {}))
        if retention is not None:
            req.retention = retention
        if delivery_retention_bytes is not None:
            req.delivery_retention_bytes = delivery_retention_bytes
        if delivery_retention_ms is not None:
            req.delivery_retention_ms = delivery_retention_ms
        if max_advance is not None:
            req.max_advance = max_advance
        return self.topics.CreateTopic(req, timeout=self.timeout)

    def get_topic(self, name: str) -> pb.Topic:
        return self.topics.GetTopic(pb.GetTopicRequest(name=name), timeout=self.timeout)

    def list_topics(self) -> list[pb.Topic]:
        return list(self.topics.ListTopics(pb.ListTopicsRequest(), timeout=self.timeout).topics)

    def delete_topic(self, name: str) -> None:
        self.topics.DeleteTopic(pb.DeleteTopicRequest(name=name), timeout=self.timeout)

    # subscriptions
    def subscribe(self, topic: str, spec: pb.SubscriptionSpec) -> int:
        """Register one subscription; returns its id."""
        return self.subscriptions.Subscribe(pb.SubscribeRequest(topic=topic, spec=spec), timeout=self.timeout).subscription_id

    def subscribe_many(self, topic: str, specs: Sequence[pb.SubscriptionSpec], chunk: int = 50_000) -> list[int]:
        """Register many subscriptions atomically, streamed in chunks; returns their ids in order."""
        if len(specs) <= chunk:
            resp = self.subscriptions.SubscribeMany(pb.SubscribeManyRequest(topic=topic, specs=specs),
                                                    timeout=self.timeout)
        else:
            reqs = (pb.SubscribeManyRequest(topic=topic if i == 0 else "", specs=specs[i : i + chunk])
                    for i in range(0, len(specs), chunk))
            resp = self.subscriptions.SubscribeStream(reqs, timeout=self.timeout)
        return list(resp.subscription_ids)

    def unsubscribe(self, topic: str, subscription_id: int) -> int:
        return self.subscriptions.Unsubscribe(
            pb.UnsubscribeRequest(topic=topic, subscription_id=subscription_id), timeout=self.timeout).seq

    def list_subscriptions(self, topic: str, subscriber: str = "", page_size: int = 10_000) -> Iterator[pb.Subscription]:
        """Every live subscription (of ``subscriber`` when set), page by page."""
        after: int | None = None
        while True:
            req = pb.ListSubscriptionsRequest(topic=topic, subscriber=subscriber, page_size=page_size)
            if after is not None:
                req.after_id = after
            resp = self.subscriptions.ListSubscriptions(req, timeout=self.timeout)
            yield from resp.subscriptions
            if not resp.more or not resp.subscriptions:
                return
            after = resp.subscriptions[-1].subscription_id

    # events
    def publish(self, topic: str, events: Sequence[pb.Event]) -> pb.PublishResponse:
        """Publish one batch; returns once durable with one status per event."""
        return self.publishing.Publish(pb.PublishRequest(topic=topic, events=events), timeout=self.timeout)

    def publish_columns(self, topic: str, sides: Any, ids: Any, keys: Any, values: Any, times: Any = None,
                        payloads: Any = None) -> pb.PublishResponse:
        """Publish one batch given as columns (see ``columns``); returns once durable.

        The response lists only the rejected events (``statuses``, each with its ``index``); the
        accepted ones took the consecutive seqs ``first_seq..last_seq`` in batch order.
        """
        req = pb.PublishRequest(topic=topic, columns=columns(sides, ids, keys, values, times, payloads))
        return self.publishing.Publish(req, timeout=self.timeout)

    def delete_events(self, topic: str, refs: Sequence[pb.EventRef]) -> pb.DeleteEventsResponse:
        return self.publishing.DeleteEvents(pb.DeleteEventsRequest(topic=topic, events=refs), timeout=self.timeout)

    def publisher(self, topic: str, batch_size: int = 1000, linger: float = 0.002,
                  max_in_flight: int = 8) -> BatchingPublisher:
        """A batching publisher over the streaming RPC (use as a context manager)."""
        return BatchingPublisher(self, topic, batch_size, linger, max_in_flight)

    # listening
    def listen(self, topic: str, subscriber: str = "", subscription_ids: Iterable[int] = (),
               cursors: Mapping[int, int] | None = None, from_latest: bool = False,
               reconnect: bool = True, retry_delay: float = 0.2, batch: bool = False,
               batch_pairs: bool = False, auto_commit: float | None = None,
               ignore_committed: bool = False) -> MatchStream:
        """An iterator over ``ListenResponse`` messages that resumes after reconnects.

        Subscriptions without an entry in ``cursors`` start after their committed cursor on the
        server (unless ``ignore_committed``), else as ``from_latest`` says. With ``auto_commit``
        the positions of processed messages (those before the one the application asks for
        next) are committed at most every ``auto_commit`` seconds and when the stream ends.

        With ``batch`` the server packs matches without pairs into ``MatchBatch`` responses
        (``WhichOneof("message") == "matches"``; expand them with ``batch_rows``): one gRPC
        message for thousands of matches instead of one each. Cursors, gaps and resume work the
        same way. With ``batch_pairs`` as well, PAIRS messages of up to 10,000 pairs come in the
        ``MatchBatch`` too, their pairs as columns (``pair_counts``, ``r_ids``, ``s_ids``).
        """
        req = pb.ListenRequest(topic=topic, subscriber=subscriber, subscription_ids=list(subscription_ids),
                               from_latest=from_latest, batch=batch, batch_pairs=batch_pairs,
                               ignore_committed=ignore_committed)
        return MatchStream(self, req, dict(cursors or {}), reconnect, retry_delay, auto_commit)

    def commit_cursors(self, topic: str, cursors: Mapping[int, int] | None = None,
                       subscriber: str = "", after_seq: int | None = None) -> int:
        """Commit processed positions ``{subscription id: seq}`` (and/or ``after_seq`` for every
        subscription of ``subscriber``); durable on return. Returns how many were committed."""
        req = pb.CommitCursorsRequest(topic=topic, subscriber=subscriber, cursors=[
            pb.Cursor(subscription_id=s, after_seq=q) for s, q in (cursors or {}).items()])
        if after_seq is not None:
            req.after_seq = after_seq
        return self.listening.CommitCursors(req, timeout=self.timeout).committed

    def get_cursors(self, topic: str, subscriber: str = "",
                    subscription_ids: Iterable[int] = ()) -> pb.GetCursorsResponse:
        """Committed positions and lag of the topic's live subscriptions."""
        return self.listening.GetCursors(pb.GetCursorsRequest(
            topic=topic, subscriber=subscriber, subscription_ids=list(subscription_ids)),
            timeout=self.timeout)

    def listen_columns(self, topic: str, subscriber: str = "", subscription_ids: Iterable[int] = (),
                       cursors: Mapping[int, int] | None = None, from_latest: bool = False,
                       reconnect: bool = True, retry_delay: float = 0.2) -> Iterator[MatchColumns | pb.ListenResponse]:
        """``listen(batch=True)`` as columns: every ``MatchBatch`` and every (complete) ``Match``
        is yielded as a ``MatchColumns`` of numpy arrays (``.to_arrow()`` for an Arrow record
        batch); gaps, unsubscriptions and caught-up markers are yielded as they come. Resume and
        reconnect as ``listen``."""
        stream = self.listen(topic, subscriber, subscription_ids, cursors, from_latest, reconnect, retry_delay,
                             batch=True, batch_pairs=True)
        for resp in stream:
            kind = resp.WhichOneof("message")
            if kind == "matches":
                yield MatchColumns.of_batch(resp.matches)
            elif kind == "match":
                yield MatchColumns.of_match(resp.match)
            else:
                yield resp

    def stats(self, topic: str) -> pb.TopicStats:
        return self.stats_stub.GetTopicStats(pb.TopicStatsRequest(topic=topic), timeout=self.timeout)


class MatchStream:
    """Iterate over a Listen stream; reconnects and resumes from the last seq per subscription.

    Parts of a split PAIRS message are joined, so each yielded ``Match`` is complete and
    ``cursors[sid]`` is exactly the seq of the last message yielded for ``sid``; ``processed``
    holds the positions of the messages before the last one yielded (the application asked for
    the next one, so it is done with them), which ``commit()`` commits. ``cancel()`` ends the
    iteration from another thread.
    """

    def __init__(self, client: HotjoinClient, request: pb.ListenRequest, cursors: dict[int, int],
                 reconnect: bool, retry_delay: float, auto_commit: float | None = None) -> None:
        self.client = client
        self.request = request
        self.cursors = cursors
        self.processed: dict[int, int] = {}
        self.reconnect = reconnect
        self.retry_delay = retry_delay
        self.auto_commit = auto_commit
        self.reconnects = 0
        self.duplicates = 0  # messages at or below a cursor that were dropped (should stay 0)
        self._call: Any = None
        self._cancelled = False
        self._start_seq: int | None = None
        self._committed_at = time.monotonic()
        self._committed: dict[int, int] = {}
        # no cursor is above this, so a batch whose seqs all exceed it holds no duplicate
        self._top = max(cursors.values(), default=-1)

    def commit(self, include_last: bool = False) -> int:
        """Commit the processed positions (with ``include_last`` also the last yielded message);
        returns how many subscriptions were committed."""
        done = self._committed
        pos = {s: q for s, q in (self.cursors if include_last else self.processed).items()
               if q > done.get(s, -1)}  # never moves a position this stream committed back
        self._committed_at = time.monotonic()
        if not pos:
            return 0
        n = self.client.commit_cursors(self.request.topic, pos)
        done.update(pos)
        return n

    def _maybe_commit(self) -> None:
        if self.auto_commit is not None and time.monotonic() - self._committed_at >= self.auto_commit:
            try:
                self.commit()
            except grpc.RpcError:  # retried at the next interval; never fails the iteration
                self._committed_at = time.monotonic()

    def cancel(self) -> None:
        self._cancelled = True
        if self._call is not None:
            self._call.cancel()

    def _next_request(self) -> pb.ListenRequest:
        req = pb.ListenRequest()
        req.CopyFrom(self.request)
        if self._start_seq is not None and req.from_latest:
            req.from_latest = False
            req.default_after_seq = self._start_seq
        del req.cursors[:]
        req.cursors.extend(pb.Cursor(subscription_id=s, after_seq=q) for s, q in self.cursors.items())
        return req

    def __iter__(self) -> Iterator[pb.ListenResponse]:
        try:
            yield from self._iterate()
        finally:
            if self.auto_commit is not None:
                with contextlib.suppress(grpc.RpcError, ValueError):
                    self.commit()

    def _iterate(self) -> Iterator[pb.ListenResponse]:
        partial: pb.Match | None = None
        cursors, processed = self.cursors, self.processed
        while not self._cancelled:
            self._call = self.client.listening.Listen(self._next_request())
            try:
                for resp in self._call:
                    kind = resp.WhichOneof("message")
                    done: Iterable[tuple[int, int]] = ()
                    if kind == "match":
                        m = resp.match
                        if m.more or partial is not None:
                            if partial is None:
                                partial = pb.Match()
                                partial.CopyFrom(m)
                            else:
                                partial.pairs.extend(m.pairs)
                            if m.more:
                                continue
                            partial.more = False
                            resp = pb.ListenResponse(match=partial)
                            m, partial = partial, None
                        if m.seq <= cursors.get(m.subscription_id, -1):
                            self.duplicates += 1  # exactly once by seq within the stream
                            continue
                        cursors[m.subscription_id] = m.seq
                        self._top = max(self._top, m.seq)
                        done = ((m.subscription_id, m.seq),)
                    elif kind == "matches":
                        mb = resp.matches
                        seqs = mb.seqs
                        if not seqs:
                            continue
                        if not self._fresh(mb.subscription_ids, seqs):  # may repeat one
                            rows = list(zip(mb.subscription_ids, seqs, strict=True))
                            if any(q <= cursors.get(s, -1) for s, q in rows):
                                resp, rows = self._dedupe(mb, rows)
                                if not rows:
                                    continue
                            cursors.update(rows)
                            done = rows
                        else:  # the common case: no per-row Python, C-level dict updates
                            cursors.update(zip(mb.subscription_ids, seqs, strict=True))
                            done = zip(mb.subscription_ids, seqs, strict=True)
                        self._top = max(self._top, max(seqs))
                    elif kind == "gap":
                        g = resp.gap
                        cursors[g.subscription_id] = max(cursors.get(g.subscription_id, 0), g.to_seq)
                        self._top = max(self._top, g.to_seq)
                        done = ((g.subscription_id, cursors[g.subscription_id]),)
                    elif kind == "unsubscribed":
                        cursors.pop(resp.unsubscribed.subscription_id, None)
                        processed.pop(resp.unsubscribed.subscription_id, None)
                    elif kind == "caught_up" and self._start_seq is None:
                        self._start_seq = resp.caught_up.seq
                    yield resp
                    processed.update(done)  # the application asked for the next message
                    self._maybe_commit()
                return
            except grpc.RpcError as e:
                partial = None
                if self._cancelled or not self.reconnect or e.code() not in RETRYABLE:
                    if self._cancelled:
                        return
                    raise
                self.reconnects += 1
                time.sleep(self.retry_delay)


    def _fresh(self, sids: Any, seqs: Any) -> bool:
        """Whether no row of a batch can be at or below its subscription's cursor, decided
        without a Python step per row: every seq above every cursor, or (an operation's rows
        split across two batches) only a few leading rows at the top seq, checked one by one."""
        top = self._top
        lo = min(seqs)
        if lo > top:
            return True
        if lo < top:
            return False
        k = 0
        n = len(seqs)
        while k < n and seqs[k] == top:
            if sids[k] in self.cursors and self.cursors[sids[k]] >= top:
                return False
            k += 1
        return k == n or min(seqs[k:]) > top

    def _dedupe(self, mb: pb.MatchBatch, rows: list[tuple[int, int]]
                ) -> tuple[pb.ListenResponse, list[tuple[int, int]]]:
        """The batch without rows at or below the cursors (never expected from the server)."""
        keep = [i for i, (s, q) in enumerate(rows) if q > self.cursors.get(s, -1)]
        self.duplicates += len(rows) - len(keep)
        out = pb.MatchBatch(ops=mb.ops)
        for i in keep:
            out.subscription_ids.append(mb.subscription_ids[i])
            out.seqs.append(mb.seqs[i])
            out.signs.append(mb.signs[i])
            out.counts.append(mb.counts[i])
            out.op_index.append(mb.op_index[i])
        return pb.ListenResponse(matches=out), [rows[i] for i in keep]


def batch_rows(mb: pb.MatchBatch) -> list[pb.Match]:
    """The ``Match`` messages a ``MatchBatch`` stands for, in order (convenience, not fast)."""
    ops = list(mb.ops)
    out = []
    pcounts = list(mb.pair_counts) or [0] * len(mb.subscription_ids)
    at = 0
    for sid, seq, sign, count, k, pc in zip(mb.subscription_ids, mb.seqs, mb.signs, mb.counts, mb.op_index,
                                            pcounts, strict=True):
        o = ops[k]
        m = pb.Match(subscription_id=sid, seq=seq, sign=sign, count=count, op=o.op,
                     received_unix_nanos=o.received_unix_nanos)
        if o.HasField("event"):
            m.event.CopyFrom(o.event)
        if pc:
            m.pairs.extend(pb.Pair(r_id=r, s_id=s) for r, s in zip(mb.r_ids[at:at + pc], mb.s_ids[at:at + pc],
                                                                     strict=True))
            at += pc
        out.append(m)
    return out


class MatchColumns:
    """Matches as columns: row i is subscription ``subscription_id[i]``'s message at ``seq[i]``
    with ``sign[i]`` and ``count[i]`` pairs, triggered by operation ``op[i]`` on event
    ``(event_side[i], event_id[i])`` received at ``received_unix_nanos[i]``. PAIRS rows carry
    their pairs: pair j belongs to row ``pair_row[j]`` and is ``(r_id[j], s_id[j])``."""

    __slots__ = ("subscription_id", "seq", "sign", "count", "op", "event_side", "event_id",
                 "received_unix_nanos", "pair_row", "r_id", "s_id")

    def __init__(self, subscription_id: np.ndarray, seq: np.ndarray, sign: np.ndarray, count: np.ndarray,
                 op: np.ndarray, event_side: np.ndarray, event_id: np.ndarray, received_unix_nanos: np.ndarray,
                 pair_row: np.ndarray, r_id: np.ndarray, s_id: np.ndarray) -> None:
        self.subscription_id, self.seq, self.sign, self.count = subscription_id, seq, sign, count
        self.op, self.event_side, self.event_id = op, event_side, event_id
        self.received_unix_nanos = received_unix_nanos
        self.pair_row, self.r_id, self.s_id = pair_row, r_id, s_id

    def __len__(self) -> int:
        return int(self.subscription_id.shape[0])

    @staticmethod
    def of_batch(mb: pb.MatchBatch) -> MatchColumns:
        """Columns of a ``MatchBatch``; the per-operation table is expanded with one take."""
        idx = np.array(mb.op_index, dtype=np.int64)
        ops = list(mb.ops)
        side = np.array([_SIDE_NAME.get(o.event.side, "") for o in ops], dtype=object)
        eid = np.array([o.event.id for o in ops], dtype=object)
        name = np.array([o.op for o in ops], dtype=object)
        rns = np.array([o.received_unix_nanos for o in ops], dtype=np.int64)
        n = len(idx)
        pair_row = (np.repeat(np.arange(n, dtype=np.int64), np.array(mb.pair_counts, dtype=np.int64))
                    if len(mb.pair_counts) else np.zeros(0, dtype=np.int64))
        r_id = np.empty(len(mb.r_ids), dtype=object)
        r_id[:] = list(mb.r_ids)
        s_id = np.empty(len(mb.s_ids), dtype=object)
        s_id[:] = list(mb.s_ids)
        return MatchColumns(np.array(mb.subscription_ids, dtype=np.int64), np.array(mb.seqs, dtype=np.int64),
                            np.array(mb.signs, dtype=np.int8), np.array(mb.counts, dtype=np.int64),
                            name[idx], side[idx], eid[idx], rns[idx], pair_row, r_id, s_id)

    @staticmethod
    def of_match(m: pb.Match) -> MatchColumns:
        """One row of a single ``Match`` (with its pairs)."""
        n = len(m.pairs)
        return MatchColumns(
            np.array([m.subscription_id], dtype=np.int64), np.array([m.seq], dtype=np.int64),
            np.array([m.sign], dtype=np.int8), np.array([m.count], dtype=np.int64),
            np.array([m.op], dtype=object), np.array([_SIDE_NAME.get(m.event.side, "")], dtype=object),
            np.array([m.event.id], dtype=object), np.array([m.received_unix_nanos], dtype=np.int64),
            np.zeros(n, dtype=np.int64), np.array([p.r_id for p in m.pairs], dtype=object),
            np.array([p.s_id for p in m.pairs], dtype=object))

    def to_arrow(self) -> Any:
        """The rows as an Arrow record batch (pairs left out; see ``pairs_arrow``)."""
        import pyarrow as pa

        return pa.record_batch(
            [pa.array(self.subscription_id), pa.array(self.seq), pa.array(self.sign), pa.array(self.count),
             pa.array(self.op, pa.string()), pa.array(self.event_side, pa.string()),
             pa.array(self.event_id, pa.string()), pa.array(self.received_unix_nanos)],
            names=["subscription_id", "seq", "sign", "count", "op", "event_side", "event_id",
                   "received_unix_nanos"])

    def pairs_arrow(self) -> Any:
        """The pairs as an Arrow record batch (subscription_id, seq, sign, r_id, s_id)."""
        import pyarrow as pa

        r = self.pair_row
        return pa.record_batch(
            [pa.array(self.subscription_id[r]), pa.array(self.seq[r]), pa.array(self.sign[r]),
             pa.array(self.r_id, pa.string()), pa.array(self.s_id, pa.string())],
            names=["subscription_id", "seq", "sign", "r_id", "s_id"])


_SIDE_NAME = {pb.SIDE_R: "R", pb.SIDE_S: "S"}


class BatchingPublisher:
    """Publishes events in batches over ``PublishStream``; at most ``max_in_flight`` unacknowledged.

    ``publish(ev)`` queues one event; ``publish_batch(evs)`` sends a batch and returns a future
    of its ``PublishResponse``; ``flush()`` waits until everything sent so far is acknowledged
    (durable). Counts of the acknowledged events:

    - ``accepted``: applied (stored and given a sequence number);
    - ``rejected``: every rejected event, identical duplicates included;
    - ``identical``: the identical duplicates among ``rejected``: events already stored with the
      same content (``EventStatus.identical``), i.e. re-sent events with nothing left to do, as
      when a file is published again after a failure part-way;
    - ``rejections``: the statuses of the other rejected events (late, invalid, an id held by
      another event), the ones that need attention; the first 10,000 are kept.

    ``acknowledged`` (accepted + rejected) counts the events answered, a prefix of those sent.
    """

    def __init__(self, client: HotjoinClient, topic: str, batch_size: int, linger: float,
                 max_in_flight: int) -> None:
        self.topic = topic
        self.batch_size = batch_size
        self.linger = linger
        self.accepted = 0
        self.rejected = 0
        self.identical = 0
        self.rejections: list[pb.EventStatus] = []
        self._buf: list[pb.Event] = []
        self._buf_since = 0.0
        self._lock = threading.Lock()
        self._slots = threading.Semaphore(max_in_flight)
        self._requests: queue.Queue[pb.PublishRequest | None] = queue.Queue()
        self._pending: queue.Queue[Future[pb.PublishResponse]] = queue.Queue()
        self._error: BaseException | None = None
        self._ended = False
        self._first = True
        self._responses = client.publishing.PublishStream(self._request_iter())
        self._reader = threading.Thread(target=self._read, name="hotjoin-publisher", daemon=True)
        self._reader.start()

    @property
    def acknowledged(self) -> int:
        """Events the server has answered (accepted or rejected): batches are acknowledged in
        order, so these are the first ``acknowledged`` events sent."""
        with self._lock:
            return self.accepted + self.rejected

    def __enter__(self) -> BatchingPublisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request_iter(self) -> Iterator[pb.PublishRequest]:
        while True:
            req = self._requests.get()
            if req is None:
                return
            yield req

    def _read(self) -> None:
        try:
            for resp in self._responses:
                fut = self._pending.get_nowait()
                with self._lock:
                    self.accepted += resp.accepted
                    self.rejected += resp.rejected
                    if resp.rejected:
                        bad = [s for s in resp.statuses if s.code != pb.OK]
                        same = [s for s in bad if s.identical]
                        if same:
                            self.identical += len(same)
                            bad = [s for s in bad if not s.identical]
                        if len(self.rejections) < 10_000:
                            self.rejections.extend(bad)
                self._slots.release()
                fut.set_result(resp)
        except grpc.RpcError as e:
            self._error = e
        with self._lock:
            self._ended = True
            self._error = self._error or RuntimeError("publish stream ended")
            while not self._pending.empty():
                fut = self._pending.get_nowait()
                fut.set_exception(self._error)
                self._slots.release()

    def publish(self, ev: pb.Event) -> None:
        """Queue one event; a full batch (or one older than ``linger``) is sent."""
        self._buf.append(ev)
        if len(self._buf) == 1:
            self._buf_since = time.monotonic()
        if len(self._buf) >= self.batch_size or time.monotonic() - self._buf_since >= self.linger:
            self._send_buffer()

    def _send_buffer(self) -> None:
        if self._buf:
            batch, self._buf = self._buf, []
            self.publish_batch(batch)

    def publish_batch(self, events: Sequence[pb.Event]) -> Future[pb.PublishResponse]:
        """Send one batch now (blocks while ``max_in_flight`` batches are unacknowledged)."""
        return self._send(pb.PublishRequest(topic=self.topic if self._first else "", events=events))

    def _send(self, req: pb.PublishRequest) -> Future[pb.PublishResponse]:
        if self._error is not None:
            raise self._error
        self._slots.acquire()
        fut: Future[pb.PublishResponse] = Future()
        with self._lock:
            if self._ended:  # the stream failed meanwhile: nobody would resolve the future
                self._slots.release()
                raise self._error or RuntimeError("publish stream ended")
            self._pending.put(fut)
        self._requests.put(req)
        self._first = False
        return fut

    def publish_columns(self, sides: Any, ids: Any, keys: Any, values: Any, times: Any = None,
                        payloads: Any = None) -> Future[pb.PublishResponse]:
        """Send one batch given as columns (see ``columns``) now; a future of its response."""
        return self.publish_request(columns(sides, ids, keys, values, times, payloads))

    def publish_request(self, cols: pb.EventColumns) -> Future[pb.PublishResponse]:
        """Send one prebuilt ``EventColumns`` batch now (blocks while ``max_in_flight`` batches
        are unacknowledged)."""
        self._send_buffer()  # keep the order of events queued one by one
        return self._send(pb.PublishRequest(topic=self.topic if self._first else "", columns=cols))

    def flush(self, timeout: float | None = None) -> None:
        """Send what is queued and wait until every batch sent so far is acknowledged."""
        self._send_buffer()
        last: Future[pb.PublishResponse] | None = None
        for fut in list(self._pending.queue):
            last = fut
        if last is not None:
            last.result(timeout)
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self._requests.put(None)
            self._reader.join(timeout=30)
