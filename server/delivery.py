"""Delivery: a bounded buffer per subscription and listeners that drain them (SPEC §4, Listen).

Every message of subscription q is what one operation of the topic changed in q's result; its
``seq`` is the topic sequence number of that operation, so seqs are strictly increasing per
subscription and a listener resumes "after seq n" exactly. A publisher only *appends* to
buffers (O(1) per message, never waiting for a listener); each buffer keeps the newest
``capacity`` messages (and at most ``max_pairs`` pairs) and remembers ``lost_upto``, the seq of the
newest message it had to evict. A listener asking for messages after ``n < lost_upto`` is sent an
explicit ``Gap(n+1 .. lost_upto)`` and then everything still buffered — nothing is dropped
silently. Messages are not kept across a server restart: a subscription registered before the
restart starts with ``lost_upto`` = the restart's seq.

Listeners are woken through a per-listener dirty set (the subscriptions that got messages since
its last drain), so a listener of a subscriber with 500,000 subscriptions does work only for the
ones that changed. Complexity: ``push`` O(listeners of q); ``Listener.next_batch`` O(messages
returned + dirty subscriptions).

>>> hub = DeliveryHub(capacity=2, boot_seq=0)
>>> hub.add_subscription(0, "alice", registered_seq=1)
>>> for seq in (2, 3, 4):
...     hub.push_many([(0, Msg(seq, 1, 1))])
>>> lis = hub.listen("alice", [], {}, default_after_seq=0, from_latest=False, current_seq=4)
>>> [type(i).__name__ for i in lis.next_batch(0)]
['GapItem', 'MatchItem', 'MatchItem', 'CaughtUpItem']
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np


class Msg:
    """One message of one subscription: an operation's effect on its result."""

    __slots__ = ("seq", "sign", "count", "r_ids", "s_ids", "op", "side", "event_id", "received_ns")

    def __init__(
        self,
        seq: int,
        sign: int,
        count: int,
        r_ids: np.ndarray | None = None,
        s_ids: np.ndarray | None = None,
        op: str = "publish",
        side: str = "",
        event_id: str = "",
        received_ns: int = 0,
    ) -> None:
        self.seq, self.sign, self.count = seq, sign, count
        self.r_ids, self.s_ids = r_ids, s_ids
        self.op, self.side, self.event_id, self.received_ns = op, side, event_id, received_ns


@dataclass(slots=True)
class MatchItem:
    subscription_id: int
    msg: Msg


@dataclass(slots=True)
class GapItem:
    subscription_id: int
    from_seq: int
    to_seq: int
    reason: str


@dataclass(slots=True)
class UnsubscribedItem:
    subscription_id: int
    seq: int


@dataclass(slots=True)
class CaughtUpItem:
    seq: int


Item = MatchItem | GapItem | UnsubscribedItem | CaughtUpItem


@dataclass(slots=True)
class _Buffer:
    """The bounded buffer of one subscription."""

    registered_seq: int
    subscriber: str
    lost_upto: int = 0
    lost_reason: str = ""
    msgs: deque[Msg] | None = None
    pairs: int = 0
    unsubscribed_seq: int = 0
    listeners: list[Listener] = field(default_factory=list)


class DeliveryHub:
    """The buffers and listeners of one topic. Thread-safe; publishers never block on listeners."""

    def __init__(
        self,
        capacity: int = 1024,
        max_pairs: int = 100_000,
        boot_seq: int = 0,
        on_gap: Callable[[int], None] | None = None,
        on_deliver: Callable[[list[Item]], None] | None = None,
    ) -> None:
        self.capacity = capacity
        self.max_pairs = max_pairs
        self.boot_seq = boot_seq
        self._on_gap = on_gap
        self._on_deliver = on_deliver
        self._lock = threading.Lock()
        self._buffers: dict[int, _Buffer] = {}
        self._subscriber_listeners: dict[str, list[Listener]] = {}
        self.listeners: set[Listener] = set()
        self.closed = False
        self.close_code, self.close_message = "", ""

    # ---- subscriptions ----------------------------------------------------------------------

    def add_subscription(self, sid: int, subscriber: str, registered_seq: int) -> None:
        """Create q's buffer and attach the listeners of its subscriber (they see it from now)."""
        buf = _Buffer(registered_seq, subscriber)
        if registered_seq <= self.boot_seq:
            buf.lost_upto = self.boot_seq
            buf.lost_reason = f"messages before the server restart at seq {self.boot_seq} are not retained"
        with self._lock:
            self._buffers[sid] = buf
            for lis in self._subscriber_listeners.get(subscriber, ()):
                lis._attach(sid, registered_seq - 1)
                buf.listeners.append(lis)

    def add_subscriptions(self, items: Iterable[tuple[int, str, int]]) -> None:
        for sid, subscriber, seq in items:
            self.add_subscription(sid, subscriber, seq)

    def remove_subscription(self, sid: int, seq: int) -> None:
        """Mark q unsubscribed at ``seq``: listeners get an ``Unsubscribed`` after its messages."""
        with self._lock:
            buf = self._buffers.get(sid)
            if buf is None:
                return
            buf.unsubscribed_seq = seq
            for lis in buf.listeners:
                lis._mark(sid)
            if not buf.listeners:
                del self._buffers[sid]

    def has(self, sid: int) -> bool:
        return sid in self._buffers

    # ---- publishing side ----------------------------------------------------------------------

    def push_many(self, items: list[tuple[int, Msg]]) -> None:
        """Append messages (in seq order); evict the oldest beyond the bounds. Never blocks long."""
        if not items:
            return
        cap, max_pairs = self.capacity, self.max_pairs
        with self._lock:
            buffers = self._buffers
            for sid, msg in items:
                buf = buffers.get(sid)
                if buf is None:
                    continue
                msgs = buf.msgs
                if msgs is None:
                    msgs = buf.msgs = deque()
                msgs.append(msg)
                if msg.r_ids is not None:
                    buf.pairs += msg.count
                while len(msgs) > cap or (buf.pairs > max_pairs and len(msgs) > 1):
                    old = msgs.popleft()
                    if old.r_ids is not None:
                        buf.pairs -= old.count
                    buf.lost_upto = old.seq
                    buf.lost_reason = "evicted from the subscription's bounded buffer (slow or absent listener)"
                for lis in buf.listeners:
                    lis._mark(sid)

    def close(self, code: str = "NOT_FOUND", message: str = "the topic was deleted") -> None:
        """The topic is gone or the server stops: end every listener with this status."""
        with self._lock:
            self.closed = True
            self.close_code, self.close_message = code, message
            for lis in list(self.listeners):
                lis.closed = True
                lis.wake.set()

    # ---- listening side -----------------------------------------------------------------------

    def listen(
        self,
        subscriber: str,
        subscription_ids: list[int],
        cursors: dict[int, int],
        default_after_seq: int,
        from_latest: bool,
        current_seq: int,
        max_batch: int = 4096,
    ) -> Listener:
        """Attach a listener to ``subscription_ids`` and (when set) every subscription of
        ``subscriber``; raises ``KeyError(sid)`` for an unknown subscription id."""
        lis = Listener(self, subscriber, current_seq, max_batch)
        with self._lock:
            wanted = set(subscription_ids)
            for sid in wanted:
                if sid not in self._buffers:
                    raise KeyError(sid)
            if subscriber:
                wanted.update(s for s, b in self._buffers.items() if b.subscriber == subscriber)
                self._subscriber_listeners.setdefault(subscriber, []).append(lis)
            start = current_seq if from_latest else default_after_seq
            for sid in wanted:
                buf = self._buffers[sid]
                lis._attach(sid, cursors.get(sid, start))
                buf.listeners.append(lis)
            self.listeners.add(lis)
        return lis

    def _detach(self, lis: Listener) -> None:
        with self._lock:
            self.listeners.discard(lis)
            if lis.subscriber in self._subscriber_listeners:
                lst = self._subscriber_listeners[lis.subscriber]
                if lis in lst:
                    lst.remove(lis)
                if not lst:
                    del self._subscriber_listeners[lis.subscriber]
            for sid in list(lis.cursors):
                buf = self._buffers.get(sid)
                if buf is not None and lis in buf.listeners:
                    buf.listeners.remove(lis)
                    if buf.unsubscribed_seq and not buf.listeners:
                        del self._buffers[sid]

    def _drain(self, lis: Listener) -> list[Item]:
        """Take up to ``lis.max_batch`` messages of its dirty subscriptions, in seq order."""
        out: list[Item] = []
        budget = lis.max_batch
        gaps = 0
        with self._lock:
            if self.closed:
                lis.closed = True
                return out
            pending = lis.pending
            while pending and budget > 0:
                sid = pending.pop()
                buf = self._buffers.get(sid)
                if buf is None:
                    lis.cursors.pop(sid, None)
                    continue
                cur = lis.cursors.get(sid, 0)
                if cur < buf.lost_upto:
                    lo = max(cur + 1, buf.registered_seq)
                    if lo <= buf.lost_upto:
                        out.append(GapItem(sid, lo, buf.lost_upto, buf.lost_reason))
                        gaps += 1
                    cur = buf.lost_upto
                taken: list[Msg] = []
                if buf.msgs:
                    for m in reversed(buf.msgs):
                        if m.seq <= cur:
                            break
                        taken.append(m)
                    taken.reverse()
                if len(taken) > budget:
                    taken = taken[:budget]
                    pending.add(sid)
                budget -= len(taken)
                out.extend(MatchItem(sid, m) for m in taken)
                if taken:
                    cur = taken[-1].seq
                lis.cursors[sid] = cur
                if buf.unsubscribed_seq and sid not in pending:
                    out.append(UnsubscribedItem(sid, buf.unsubscribed_seq))
                    lis.cursors.pop(sid, None)
                    buf.listeners.remove(lis)
                    if not buf.listeners:
                        del self._buffers[sid]
            if not pending:
                lis.wake.clear()
        out.sort(key=_item_seq)
        if gaps and self._on_gap is not None:
            self._on_gap(gaps)
        if not lis.caught_up and not lis.pending:
            lis.caught_up = True
            out.append(CaughtUpItem(lis.start_seq))
        if out and self._on_deliver is not None:
            self._on_deliver(out)
        return out


def _item_seq(item: Item) -> int:
    if isinstance(item, MatchItem):
        return item.msg.seq
    if isinstance(item, GapItem):
        return item.from_seq
    return item.seq


class Listener:
    """One Listen stream's view of its subscriptions: cursors and a dirty set."""

    def __init__(self, hub: DeliveryHub, subscriber: str, start_seq: int, max_batch: int) -> None:
        self.hub = hub
        self.subscriber = subscriber
        self.start_seq = start_seq
        self.max_batch = max_batch
        self.cursors: dict[int, int] = {}
        self.pending: set[int] = set()
        self.wake = threading.Event()
        self.closed = False
        self.caught_up = False

    def _attach(self, sid: int, cursor: int) -> None:
        self.cursors[sid] = cursor
        self.pending.add(sid)
        self.wake.set()

    def _mark(self, sid: int) -> None:
        self.pending.add(sid)
        self.wake.set()

    def next_batch(self, timeout: float) -> list[Item]:
        """Wait up to ``timeout`` s for messages and return them (empty on timeout or close)."""
        if not self.pending and not self.wake.wait(timeout):
            return []
        if self.closed:
            return []
        return self.hub._drain(self)

    def close(self) -> None:
        """Detach from the hub (the stream ended)."""
        self.closed = True
        self.hub._detach(self)


def now_ns() -> int:
    return time.time_ns()
