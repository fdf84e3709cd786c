"""The long-lived calls of the blocking client: the batching ``Publisher`` and the ``MatchStream``.

``Publisher`` (``Client.publisher``) sends events in batches over one ``PublishStream`` call,
at most ``max_in_flight`` of them unacknowledged, and counts what the server answered.

``MatchStream`` (``Client.listen``) iterates over a Listen stream as typed items (``Match``,
``MatchBatch``, ``Gap``, ``CaughtUp``, ``Unsubscribed``), reconnecting after a dropped
connection or a server restart and resuming after the last seq it yielded per subscription.
``ColumnStream`` (``Client.listen_columns``) does the same with columnar messages
(``ListenRequest.columnar``): it yields ``MatchColumns`` decoded as numpy/Arrow views of each
message's bytes and keeps its cursors in a numpy column, so no Python object is built per match
or pair on the way from the wire to the application.

**Delivery guarantee.** Within one ``MatchStream`` every message is yielded exactly once by
(subscription, seq): reconnects resume after the last yielded seq, and a message at or below it
is dropped should one ever arrive again. Across restarts of the *application*, the stream starts
from the cursors committed on the server (``MatchStream.commit()``, or ``auto_commit=`` seconds;
``Client.commit_cursors``), so delivery is **at-least-once**: what was yielded after the last
commit is delivered again. Committing after processing each message makes it exactly-once by
seq. The server keeps every message within the topic's delivery retention on disk and answers
with a ``Gap`` only for messages beyond it (``docs/reference/persistence.md``, "Durable delivery").
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import numpy as np

from hotjoin.clients.columns import MatchColumns, columns
from hotjoin.clients.convert import EventLike, event_to_wire, listen_item_of, publish_result_of
from hotjoin.clients.errors import RETRYABLE, Cancelled, HotjoinError
from hotjoin.clients.results import EventResult, ListenItem, PublishResult
from hotjoin.proto import hotjoin_pb2 as pb

if TYPE_CHECKING:
    from hotjoin.clients.client import Client

REJECTIONS_KEPT = 10_000


class Publisher:
    """Publishes events in batches over ``PublishStream``; at most ``max_in_flight`` unacknowledged.

    ``publish(ev)`` queues one event (a ``hotjoin.Event``, or ``event(...)`` for a
    server-assigned id or time); ``publish_batch(evs)`` sends a batch now and returns a future
    of its ``PublishResult``; ``flush()`` waits until everything sent so far is acknowledged
    (durable). Counts of the acknowledged events:

    - ``accepted``: applied (stored and given a sequence number);
    - ``rejected``: every rejected event, identical duplicates included;
    - ``identical``: the identical duplicates among ``rejected``: events already stored with the
      same content (``EventResult.identical``), i.e. re-sent events with nothing left to do, as
      when a file is published again after a failure part-way;
    - ``rejections``: the ``EventResult`` of the other rejected events (late, invalid, an id held
      by another event), the ones that need attention; the first 10,000 are kept.

    ``acknowledged`` (accepted + rejected) counts the events answered, a prefix of those sent.
    A failed stream raises its typed error (``hotjoin.clients.errors``) from the next call.
    """

    def __init__(self, client: Client, topic: str, batch_size: int, linger: float,
                 max_in_flight: int) -> None:
        if batch_size < 1 or max_in_flight < 1:
            raise ValueError(f"batch_size and max_in_flight must be >= 1, got {batch_size} and "
                             f"{max_in_flight}")
        self.topic = topic
        self.batch_size = batch_size
        self.linger = linger
        self.accepted = 0
        self.rejected = 0
        self.identical = 0
        self.rejections: list[EventResult] = []
        self._buf: list[pb.Event] = []
        self._buf_since = 0.0
        self._lock = threading.Lock()
        self._slots = threading.Semaphore(max_in_flight)
        self._requests: queue.Queue[pb.PublishRequest | None] = queue.Queue()
        self._pending: queue.Queue[Future[PublishResult]] = queue.Queue()
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

    def __enter__(self) -> Publisher:
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
                result = publish_result_of(resp)
                with self._lock:
                    self.accepted += result.accepted
                    self.rejected += result.rejected
                    if result.rejected:
                        bad = result.rejections
                        same = [s for s in bad if s.identical]
                        if same:
                            self.identical += len(same)
                            bad = [s for s in bad if not s.identical]
                        if len(self.rejections) < REJECTIONS_KEPT:
                            self.rejections.extend(bad)
                self._slots.release()
                fut.set_result(result)
        except HotjoinError as e:
            self._error = e
        with self._lock:
            self._ended = True
            self._error = self._error or Cancelled(
                "the publish stream ended before every batch was acknowledged")
            while not self._pending.empty():
                fut = self._pending.get_nowait()
                fut.set_exception(self._error)
                self._slots.release()

    def publish(self, ev: EventLike) -> None:
        """Queue one event; a full batch (or one older than ``linger`` seconds) is sent."""
        self._buf.append(event_to_wire(ev))
        if len(self._buf) == 1:
            self._buf_since = time.monotonic()
        if len(self._buf) >= self.batch_size or time.monotonic() - self._buf_since >= self.linger:
            self._send_buffer()

    def _send_buffer(self) -> None:
        if self._buf:
            batch, self._buf = self._buf, []
            self.publish_batch(batch)

    def publish_batch(self, events: Sequence[EventLike]) -> Future[PublishResult]:
        """Send one batch now (blocks while ``max_in_flight`` batches are unacknowledged); a
        future of its ``PublishResult`` (one status per event)."""
        wire = [event_to_wire(e) for e in events]
        return self._send(pb.PublishRequest(topic=self.topic if self._first else "", events=wire))

    def _send(self, req: pb.PublishRequest) -> Future[PublishResult]:
        if self._error is not None:
            raise self._error
        self._slots.acquire()
        fut: Future[PublishResult] = Future()
        with self._lock:
            if self._ended:  # the stream failed meanwhile: nobody would resolve the future
                self._slots.release()
                raise self._error or Cancelled("the publish stream ended")
            self._pending.put(fut)
        self._requests.put(req)
        self._first = False
        return fut

    def publish_columns(self, sides: Any, ids: Any, keys: Any, values: Any, times: Any = None,
                        payloads: Any = None) -> Future[PublishResult]:
        """Send one batch given as columns (``hotjoin.clients.columns.columns``) now; a future
        of its ``PublishResult`` (the rejected events only, and ``first_seq..last_seq``)."""
        return self.publish_request(columns(sides, ids, keys, values, times, payloads))

    def publish_request(self, cols: pb.EventColumns) -> Future[PublishResult]:
        """Send one prebuilt ``EventColumns`` batch now (blocks while ``max_in_flight`` batches
        are unacknowledged)."""
        self._send_buffer()  # keep the order of events queued one by one
        return self._send(pb.PublishRequest(topic=self.topic if self._first else "", columns=cols))

    def flush(self, timeout: float | None = None) -> None:
        """Send what is queued and wait until every batch sent so far is acknowledged; raises
        the stream's typed error if it failed."""
        self._send_buffer()
        last: Future[PublishResult] | None = None
        for fut in list(self._pending.queue):
            last = fut
        if last is not None:
            last.result(timeout)
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        """Flush, then end the stream (also on error)."""
        try:
            self.flush()
        finally:
            self._requests.put(None)
            self._reader.join(timeout=30)


BatchingPublisher = Publisher
"""The former name of ``Publisher``."""


class _ListenCall:
    """What ``MatchStream`` and ``ColumnStream`` share: one Listen call after another, each
    resuming after the subscriptions' ``cursors`` (a subclass keeps them), until the iteration
    ends or a status is not worth a reconnect; the parts of a split PAIRS message joined."""

    cursors: Any  # {subscription id: last seq yielded}: the subclass's

    def __init__(self, client: Client, request: pb.ListenRequest, reconnect: bool,
                 retry_delay: float) -> None:
        self.client = client
        self.request = request
        self.reconnect = reconnect
        self.retry_delay = retry_delay
        self.reconnects = 0
        self.duplicates = 0  # messages at or below a cursor that were dropped (should stay 0)
        self.caught_up: int | None = None  # the seq of the first CaughtUp yielded
        self._call: Any = None
        self._cancelled = False
        self._start_seq: int | None = None

    def cancel(self) -> None:
        """End the iteration (from any thread): the current call is cancelled, no reconnect."""
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

    def _responses(self) -> Iterator[pb.ListenResponse]:
        """The server's responses across reconnects: a split PAIRS ``Match`` comes as one
        response once its last part arrived; a reconnect asks again after the cursors as they
        stand (so what was not yet yielded is sent again, what was is not), and a ``from
        latest`` stream resumes after the seq its first ``CaughtUp`` gave."""
        while not self._cancelled:
            partial: pb.Match | None = None
            self._call = self.client.listening.Listen(self._next_request())
            try:
                for resp in self._call:
                    kind = resp.WhichOneof("message")
                    if kind == "match" and (resp.match.more or partial is not None):
                        if partial is None:
                            partial = pb.Match()
                            partial.CopyFrom(resp.match)
                        else:
                            partial.pairs.extend(resp.match.pairs)
                        if resp.match.more:
                            continue
                        partial.more = False
                        resp, partial = pb.ListenResponse(match=partial), None
                    elif kind == "caught_up":
                        if self._start_seq is None:
                            self._start_seq = resp.caught_up.seq
                        if self.caught_up is None:
                            self.caught_up = resp.caught_up.seq
                    yield resp
                return
            except HotjoinError as e:
                code = getattr(e, "code", "")
                if self._cancelled or not self.reconnect or code not in RETRYABLE:
                    if self._cancelled:
                        return
                    raise
                self.reconnects += 1
                time.sleep(self.retry_delay)


class MatchStream(_ListenCall):
    """Iterate over a Listen stream as typed items; reconnects and resumes from the last seq per
    subscription (module docstring: delivery guarantee).

    Parts of a split PAIRS message are joined, so each yielded ``Match`` is complete and
    ``cursors[sid]`` is exactly the seq of the last message yielded for ``sid``; ``processed``
    holds the positions of the messages before the last one yielded (the application asked for
    the next one, so it is done with them), which ``commit()`` commits. ``cancel()`` ends the
    iteration from another thread. A status that is not worth a reconnect (``NOT_FOUND``,
    ``PERMISSION_DENIED``, ...), or any status with ``reconnect=False``, is raised as its typed
    error.
    """

    def __init__(self, client: Client, request: pb.ListenRequest, cursors: dict[int, int],
                 reconnect: bool, retry_delay: float, auto_commit: float | None = None) -> None:
        super().__init__(client, request, reconnect, retry_delay)
        self.cursors = cursors
        self.processed: dict[int, int] = {}
        self.auto_commit = auto_commit
        self._committed_at = time.monotonic()
        self._committed: dict[int, int] = {}
        # no cursor is above this, so a batch whose seqs all exceed it holds no duplicate
        self._top = max(cursors.values(), default=-1)

    def commit(self, include_last: bool = False) -> int:
        """Commit the processed positions (with ``include_last`` also the last yielded message);
        returns how many subscriptions were committed (0: nothing new to commit)."""
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
            except HotjoinError:  # retried at the next interval; never fails the iteration
                self._committed_at = time.monotonic()

    def __iter__(self) -> Iterator[ListenItem]:
        try:
            for resp in self._iterate():
                yield listen_item_of(resp)
        finally:
            if self.auto_commit is not None:
                with contextlib.suppress(HotjoinError, ValueError):
                    self.commit()

    def _iterate(self) -> Iterator[pb.ListenResponse]:
        cursors, processed = self.cursors, self.processed
        for resp in self._responses():
            kind = resp.WhichOneof("message")
            done: Iterable[tuple[int, int]] = ()
            if kind == "match":
                m = resp.match
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
            yield resp
            processed.update(done)  # the application asked for the next message
            self._maybe_commit()

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
        pcounts = list(mb.pair_counts)
        starts = [0]
        for c in pcounts:
            starts.append(starts[-1] + c)
        for i in keep:
            out.subscription_ids.append(mb.subscription_ids[i])
            out.seqs.append(mb.seqs[i])
            out.signs.append(mb.signs[i])
            out.counts.append(mb.counts[i])
            out.op_index.append(mb.op_index[i])
            if pcounts:  # the row's pairs go with it (batch_pairs)
                out.pair_counts.append(pcounts[i])
                out.r_ids.extend(mb.r_ids[starts[i]:starts[i + 1]])
                out.s_ids.extend(mb.s_ids[starts[i]:starts[i + 1]])
        return pb.ListenResponse(matches=out), [rows[i] for i in keep]


class ColumnStream(_ListenCall):
    """Iterate over a columnar Listen stream: ``MatchColumns`` for matches, and ``Gap``,
    ``CaughtUp``, ``Unsubscribed`` as they come; reconnects and resumes after the last seq
    yielded per subscription, exactly as ``MatchStream`` (module docstring: delivery guarantee).

    Cursors live in a numpy column indexed by subscription id (−1: none); a batch is checked
    against them with one vectorised comparison and advances them with one ``np.maximum.at``,
    so the cost per match is a few nanoseconds of numpy, not a Python step. ``cursors`` gives
    them as a dict. The rare rows at or below a cursor (never expected from the server) are
    dropped and counted in ``duplicates``.
    """

    def __init__(self, client: Client, request: pb.ListenRequest, cursors: dict[int, int],
                 reconnect: bool, retry_delay: float) -> None:
        super().__init__(client, request, reconnect, retry_delay)
        request.columnar = True
        top = max(cursors, default=-1) + 1
        self._cur = np.full(max(top, 1024), -1, dtype=np.int64)
        for sid, seq in cursors.items():
            self._cur[sid] = seq
        self._items: Iterator[Any] | None = None

    @property
    def cursors(self) -> dict[int, int]:
        """The last seq yielded per subscription (``{id: seq}``)."""
        at = np.flatnonzero(self._cur >= 0)
        return dict(zip(at.tolist(), self._cur[at].tolist(), strict=True))

    def _grow(self, top: int) -> None:
        if top >= self._cur.shape[0]:
            cur = np.full(max(top + 1, 2 * self._cur.shape[0]), -1, dtype=np.int64)
            cur[: self._cur.shape[0]] = self._cur
            self._cur = cur

    def _fresh(self, m: MatchColumns) -> MatchColumns | None:
        """``m`` without rows at or below their cursor (None: nothing left); advances cursors."""
        if len(m) == 0:
            return None
        sids, seqs = m.subscription_id, m.seq
        self._grow(int(sids.max()))
        ok = seqs > self._cur[sids]
        if not ok.all():
            self.duplicates += int((~ok).sum())
            if not ok.any():
                return None
            m = m.take(np.flatnonzero(ok))
            sids, seqs = m.subscription_id, m.seq
        np.maximum.at(self._cur, sids, seqs)
        return m

    def __iter__(self) -> ColumnStream:
        return self

    def __next__(self) -> Any:
        if self._items is None:
            self._items = self._run()
        return next(self._items)

    def _run(self) -> Iterator[Any]:
        from hotjoin.clients.convert import columns_item

        for resp in self._responses():
            kind = resp.WhichOneof("message")
            if kind == "matches" or kind == "match":
                m = self._fresh(MatchColumns.of_batch(resp.matches) if kind == "matches"
                                else MatchColumns.of_match(resp.match))
                if m is not None:
                    yield m
                continue
            if kind == "gap":
                g = resp.gap
                self._grow(g.subscription_id)
                self._cur[g.subscription_id] = max(int(self._cur[g.subscription_id]), g.to_seq)
            elif kind == "unsubscribed":
                sid = resp.unsubscribed.subscription_id
                if sid < self._cur.shape[0]:
                    self._cur[sid] = -1
            yield columns_item(listen_item_of(resp))


__all__ = ["BatchingPublisher", "ColumnStream", "MatchStream", "Publisher"]
