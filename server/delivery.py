"""Delivery: the messages of a topic kept as columns, in memory and (durably) on disk, and the
listeners that drain them.

Every message of subscription q is what one operation of the topic changed in q's result; its
``seq`` is the topic sequence number of that operation, so seqs are strictly increasing per
subscription and a listener resumes "after seq n" exactly.

**Storage.** A publisher appends one ``Chunk`` per durable batch: columns ``sids``, ``seqs``,
``signs``, ``counts``, ``ops`` (index into the chunk's operation table: op, side, event id,
received time) and, for PAIRS messages only, the pairs of each row as ``PairColumns`` (Arrow id
arrays and one offset per row, ``server/match_columns.py``). Nothing is built per message or
pair in Python on this path: a push numbers each row per subscription (its ordinal, pairs and
bytes before it) in one compiled pass, a drain selects a listener's rows with vectorised masks
and their pairs with one Arrow ``take`` (or a slice), and the Listen stream encodes the selection
from array slices. Chunks form one ring per topic, in seq order, bounded in **bytes**
(``buffer_bytes``; ``row_bytes`` is the estimate per message).

**Durable mode** (a ``MatchLog`` as ``store``, ``server/match_log.py``; the default with a data
directory). Every chunk was written to the match log before it is pushed, so the ring is only a
cache: a listener whose cursors lie before the ring (it is slow, or the server restarted) reads
the match log from disk (``_drain_disk``, outside the lock) with the same masks and switches back
to the ring once everything after its position is there (``dseq >= evicted_upto``). Messages are
lost only to the log's retention, which raises ``lost_upto[q]`` (``dropped``); a listener behind
it gets an explicit ``Gap``.

**Memory-only mode** (no store): per-subscription bounds, exactly as a deque per subscription
would keep them. Subscription q's buffer holds its newest ``capacity`` messages and, of PAIRS
messages, at most ``max_pairs`` pairs (the newest message is always kept). Because eviction always
removes the oldest, the kept messages at any moment are a *suffix* of q's messages, decided by two
counters per subscription: ``total[q]`` (messages ever pushed) and ``ptotal[q]`` (pairs ever
pushed); each row remembers its ordinal and its pairs-before. A row is kept iff ``ordinal >=
total[q] − capacity`` and (it is q's newest or ``ptotal[q] − pairs_before <= max_pairs``). A
listener asking for messages that are not kept gets an explicit ``Gap`` first, never a silent
loss. A chunk leaving the ring raises ``lost_upto[q]`` of its subscriptions, which is also how a
restart's lost history is recorded (``lost_upto = boot_seq``).

**Listeners** keep a cursor per subscription (a numpy column, −1 = not listening) and a position
in the ring. A drain scans the chunks after its position with vectorised masks (attached, seq >
cursor, kept), so a listener of a subscriber with 500,000 subscriptions pays per message
delivered, not per subscription; it takes at most ``max_batch`` messages (65,536 by default:
a drain covers a whole match-log record of a batch, which is then read once) and about
``listener_bytes`` (the listener's backlog in memory; one larger message goes alone). A publisher
never waits for a listener. Complexity: ``push`` O(rows); ``drain`` O(rows scanned + gaps
reported).

>>> hub = DeliveryHub(capacity=2, boot_seq=0)
>>> hub.add_subscription(0, "alice", registered_seq=1)
>>> for seq in (2, 3, 4):
...     hub.push(Chunk.build([OpMatches(seq, 1, "publish", "R", f"r{seq}", 0, np.array([0]), np.array([1]))]))
>>> lis = hub.listen("alice", [], {}, default_after_seq=0, from_latest=False, current_seq=4)
>>> out = lis.next_batch(0)
>>> [type(i).__name__ for i in out]
['GapItem', 'MatchBlock', 'MatchBlock', 'CaughtUpItem']
>>> out[0].from_seq, out[0].to_seq, [s for b in out[1:3] for s in b.seqs.tolist()]
(1, 2, [3, 4])
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from hotjoin.matcher.config import kernel
from hotjoin.server import match_columns
from hotjoin.server.match_columns import PairColumns, pair_columns
from hotjoin.server.match_log import DamagedRecordError, MatchLog

log = logging.getLogger("hotjoin.delivery")
# The delivery kernels run without the interpreter lock: every array they write (a listener's
# cursors, the per-subscription counters) is the hub's, written only under its ``_lock``, which
# every caller holds; so while one thread counts a push or picks a listener's rows, the other
# (the event loop's streams, a publish) runs Python.
UNLOCKED = {"nogil": True}
_EMPTY_I64 = np.zeros(0, dtype=np.int64)
# a listener by subscriber name reads only its subscriber's rows (``Chunk.rows_of``) of a ring
# chunk with more rows than this after its position; below it one vectorised look at them all
BY_NAME_MIN_ROWS = 256
# ... and, in a chunk without pairs, takes them in one compiled pass (``_take_rows``) when they
# are at most this many: always, as set (tests lower it to reach the vectorised steps, which
# chunks with pairs take)
PICK_MAX_ROWS = 1 << 62
EVICTED = "evicted from the subscription's bounded buffer (slow or absent listener)"
LISTENER_BYTES = 4 << 20  # per drain of one listener: its backlog in the server's memory
LINGER_MS = 50  # the longest a Listen stream waits before a drain while the server is saturated
PARTS_BYTES = 64 << 20  # match-log records kept between the drains that read them in parts
BUFFER_BYTES = 256 << 20  # the messages of one topic kept in memory


class OpMatches(NamedTuple):
    """One operation's messages, the part of a chunk that ``Chunk.build`` takes: the operation
    (``seq``, its ``sign`` +1/−1, ``op`` name, event ``side`` and ``event_id``, when it was
    received), a row per affected subscription (``sids``, ``counts`` — signed counts win over
    ``sign``), and for PAIRS rows either ``pairs`` (row → ``(r_ids, s_ids)``) or ``flat``: the
    same pairs as ``(rows, r_ids, s_ids)`` arrays, rows increasing, each row's run of pairs
    ``abs(counts[row])`` long (a PAIRS message's count is its number of pairs)."""

    seq: int
    sign: int
    op: str
    side: str
    event_id: str
    received_ns: int
    sids: np.ndarray
    counts: np.ndarray
    pairs: dict[int, tuple[np.ndarray, np.ndarray]] | None = None
    flat: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None


class Chunk:
    """The messages of one batch of operations, as columns (rows in seq order); the pairs of
    PAIRS messages as ``PairColumns`` (``pcols``), never an object per message."""

    __slots__ = ("sids", "seqs", "signs", "counts", "ops", "op_table", "pcols", "ords", "pbefore",
                 "start", "n_pairs", "first_seq", "last_seq", "nbytes", "bbefore", "_rb",
                 "_byq")

    def __init__(self, sids: np.ndarray, seqs: np.ndarray, signs: np.ndarray, counts: np.ndarray,
                 ops: np.ndarray, op_table: Any,
                 pairs: PairColumns | dict[int, tuple[np.ndarray, np.ndarray]] | None) -> None:
        self.sids, self.seqs, self.signs, self.counts = sids, seqs, signs, counts
        self.ops, self.op_table = ops, op_table
        self.pcols = pair_columns(int(sids.shape[0]), pairs)
        self.ords = _EMPTY_I64
        self.pbefore: np.ndarray | None = None
        self.start = 0
        self.n_pairs = 0
        # the operations' seq range (set by ``build``; rows may be filtered later) and its size
        self.first_seq = int(seqs[0]) if seqs.shape[0] else 0
        self.last_seq = int(seqs[-1]) if seqs.shape[0] else 0
        self.nbytes = 0
        self._rb: np.ndarray | None = None
        self._byq: tuple[np.ndarray, dict[int, tuple[int, int]]] | None = None
        # set by ``DeliveryHub.push``: each row's subscription's estimated bytes pushed before it
        # (the backlog in bytes); None when that is ROW_BYTES × its ordinal for every row (no
        # pairs so far: the common case costs no memory)
        self.bbefore: np.ndarray | None = None

    @property
    def pairs(self) -> dict[int, tuple[np.ndarray, np.ndarray]] | None:
        """The per-message form of the pairs, ``row -> (r_ids, s_ids)`` (built on access)."""
        return None if self.pcols is None else self.pcols.as_dict()

    def row_bytes(self) -> np.ndarray:
        """``row_bytes`` of this chunk, computed once (its rows do not change once pushed)."""
        if self._rb is None or self._rb.shape[0] != len(self):
            self._rb = row_bytes(self)
        return self._rb

    def rows_of(self, code: int, subcode: np.ndarray) -> np.ndarray:
        """The rows (increasing) of the subscriptions whose subscriber has ``code``
        (``subcode``: the code per subscription id). The grouping (one stable argsort of the
        rows' codes, and where each code's run starts and ends) is made on the first call and
        kept: O(rows log rows) once per chunk, then a lookup per call (a hundred listeners of
        a fan-out topic each ask every chunk once).

        >>> ch = Chunk(np.array([3, 1, 3, 2]), np.arange(4), np.ones(4, np.int8),
        ...            np.ones(4, np.int64), np.zeros(4, np.int32), [], None)
        >>> sub = np.array([-1, 7, 7, 0])
        >>> ch.rows_of(7, sub).tolist(), ch.rows_of(0, sub).tolist(), ch.rows_of(5, sub).tolist()
        ([1, 3], [0, 2], [])
        """
        if self._byq is None or self._byq[0].shape[0] != len(self):
            codes = subcode[self.sids]
            order = np.argsort(codes, kind="stable")
            sc = codes[order]  # sorted: a code's run is between two changes of code
            cuts = np.flatnonzero(np.r_[True, sc[1:] != sc[:-1], True]).tolist()
            runs = {} if not sc.shape[0] else {
                int(sc[a]): (a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True)}
            self._byq = (order, runs)
        order, runs = self._byq
        ab = runs.get(code)
        return order[:0] if ab is None else order[ab[0]:ab[1]]

    def columns(self) -> tuple[Any, ...]:
        """The chunk as plain columns (what the match log stores)."""
        return (self.sids, self.seqs, self.signs, self.counts, self.ops, self.op_table, self.pcols)

    @staticmethod
    def from_columns(cols: tuple[Any, ...], first_seq: int, last_seq: int) -> Chunk:
        ch = Chunk(*cols)
        ch.first_seq, ch.last_seq = first_seq, last_seq
        ch.nbytes = int(ch.row_bytes().sum()) + OP_BYTES * len(ch.op_table)
        return ch

    def __len__(self) -> int:
        return int(self.sids.shape[0])

    def seal(self, first_seq: int, last_seq: int) -> Chunk:
        """Set the operations' seq range and the memory estimate of a chunk built from columns
        (the columnar publish path); ``build`` does the same for per-operation parts."""
        self.first_seq, self.last_seq = int(first_seq), int(last_seq)
        self.nbytes = int(self.row_bytes().sum()) + OP_BYTES * len(self.op_table)
        return self

    @staticmethod
    def build(parts: Sequence[OpMatches]) -> Chunk:
        """One chunk from per-operation parts (``OpMatches``), rows in the parts' order."""
        op_table = [(p.op, p.side, p.event_id, p.received_ns) for p in parts]
        lens = [len(p.sids) for p in parts]
        n = sum(lens)
        sids = np.concatenate([p.sids for p in parts]).astype(np.int64, copy=False) if parts else _EMPTY_I64
        counts = np.concatenate([p.counts for p in parts]).astype(np.int64, copy=False) if parts else _EMPTY_I64
        seqs = np.repeat(np.array([p.seq for p in parts], dtype=np.int64), lens)
        base_sign = np.repeat(np.array([p.sign for p in parts], dtype=np.int8), lens)
        signs = np.where(counts > 0, 1, np.where(counts < 0, -1, base_sign)).astype(np.int8)
        ops = np.repeat(np.arange(len(parts), dtype=np.int32), lens)
        frows: list[np.ndarray] = []
        fr: list[Any] = []
        fs: list[Any] = []
        off = 0
        for p, ln in zip(parts, lens, strict=True):
            flat = p.flat
            if flat is None and p.pairs:
                rows = sorted(p.pairs)
                flat = (np.array(rows, dtype=np.int64),
                        np.concatenate([np.asarray(p.pairs[r][0], dtype=object) for r in rows]),
                        np.concatenate([np.asarray(p.pairs[r][1], dtype=object) for r in rows]))
            if flat is not None and len(flat[0]):
                frows.append(np.asarray(flat[0], dtype=np.int64) + off)
                fr.append(np.asarray(flat[1], dtype=object))
                fs.append(np.asarray(flat[2], dtype=object))
            off += ln
        assert off == n
        pcols = None
        counts = np.abs(counts)
        if frows:
            rows = np.concatenate(frows)
            pcols = PairColumns.of_flat(n, rows, counts[rows], np.concatenate(fr), np.concatenate(fs))
        ch = Chunk(sids, seqs, signs, counts, ops, op_table, pcols)
        if parts:
            ch.first_seq, ch.last_seq = int(parts[0].seq), int(parts[-1].seq)
        ch.nbytes = int(ch.row_bytes().sum()) + OP_BYTES * len(op_table)
        return ch


# Memory estimate of a buffered message (documented in docs/reference/persistence.md): its columns and
# array slots; a PAIRS message also its pair offset and slack, plus per pair the two ids in Arrow
# string arrays (two int32 offsets and the UTF-8 bytes: ids of up to ~16 bytes each); per
# operation its table entry (tuple, event id, op name). tests/server/test_delivery_memory.py
# checks the estimate against tracemalloc and Arrow's allocator.
ROW_BYTES = 48
PAIRS_ROW_BYTES = 16
PAIR_BYTES = 40
OP_BYTES = 160


def row_bytes(ch: Chunk | MatchBlock) -> np.ndarray:
    """Estimated bytes of each message (row) of a chunk or block."""
    out = np.full(len(ch), ROW_BYTES, dtype=np.int64)
    if ch.pcols is not None:
        lens = ch.pcols.lengths()
        out += np.where(lens > 0, PAIRS_ROW_BYTES + PAIR_BYTES * lens, 0)
    return out


class MatchBlock:
    """Delivered messages as columns; row i belongs to operation ``op_table[ops[i]]``; the
    pairs of PAIRS rows as ``PairColumns`` (``pcols``; None: no row has pairs)."""

    __slots__ = ("sids", "seqs", "signs", "counts", "ops", "op_table", "pcols")

    def __init__(self, sids: np.ndarray, seqs: np.ndarray, signs: np.ndarray, counts: np.ndarray,
                 ops: np.ndarray, op_table: Any,
                 pairs: PairColumns | dict[int, tuple[np.ndarray, np.ndarray]] | None) -> None:
        self.sids, self.seqs, self.signs, self.counts = sids, seqs, signs, counts
        self.ops, self.op_table = ops, op_table
        self.pcols = pair_columns(int(sids.shape[0]), pairs)

    @property
    def pairs(self) -> dict[int, tuple[np.ndarray, np.ndarray]] | None:
        """The per-message form of the pairs, ``row -> (r_ids, s_ids)`` (built on access)."""
        return None if self.pcols is None else self.pcols.as_dict()

    def __len__(self) -> int:
        return int(self.sids.shape[0])


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


Item = MatchBlock | GapItem | UnsubscribedItem | CaughtUpItem


# The backlog's columns per subscription (``DeliveryHub`` docstring) and their initial value:
# newest seq; sent seq (high-water); so / bbso: ordinal after, and bytes through, the newest
# message sent from memory; btotal: bytes pushed; pending / pbytes: the counts (kept up to date
# in durable mode, recomputed from the boundaries memory-only); uncounted: messages with seq <=
# it do not count (boot_seq; a Gap to X raises it to X, or to the ring's edge when X is
# before it); lo / bblo: ordinal and bytes before of the oldest kept message (with a match log:
# of the oldest in the ring); lopos: its row-index position (memory-only; -1: none kept);
# lastg: row-index position of the last row of q's newest group (memory-only; -1: none).
_BACKLOG = (("_newest", 0), ("_sent", 0), ("_so", 0), ("_bbso", 0), ("_btotal", 0),
            ("_pending", 0), ("_pbytes", 0), ("_uncounted", 0), ("_lo", 0), ("_bblo", 0),
            ("_lopos", -1), ("_lastg", -1))


def _grow(a: np.ndarray, n: int, fill: int) -> np.ndarray:
    if n <= a.shape[0]:
        return a
    out = np.full(max(n, 2 * a.shape[0], 1024), fill, dtype=a.dtype)
    out[: a.shape[0]] = a
    return out


class DeliveryHub:
    """The buffers and listeners of one topic. Thread-safe; publishers never block on listeners.

    **Backlog** (``backlog``, ``subscriber_backlog``; ``GetCursors`` and the per-subscriber
    metrics, docs/reference/metrics.md). Per subscription q, as numpy columns beside ``total``:

    - ``newest[q]``: seq of q's newest message pushed since the server started (or read back
      from the match log by a listener, so that after a restart it is known again once a
      listener has read q's messages);
    - ``sent[q]``: the highest seq of q any listener was handed, from memory or from disk. A
      message counts as sent once a listener was handed it *or a later message of q*: messages
      a listener skipped (its cursor was past them) are no longer owed, as in Kafka, where lag
      is measured from the consumer's position;
    - ``pending[q]`` / ``pending_bytes[q]``: messages of q pushed since the server started (and
      their ``row_bytes``) with seq > ``sent[q]`` that are still kept. Two listeners on q do not
      count a message twice; messages pushed before the start (seq <= ``boot_seq``) never count.

    Memory-only, the kept messages of q are a suffix of its messages (see above) and so are the
    unsent ones, so pending is exact: ``total[q] − max(lo[q], so[q])`` messages, where ``lo`` is
    the ordinal of q's oldest kept message and ``so`` the one after the newest sent; the bytes
    likewise from each row's cumulative ``bbefore``. ``lo`` moves when a push evicts q's oldest
    messages (count or pairs bound) or a chunk leaves the ring: a row index (positions of the
    ring's rows, each chunk's rows grouped by subscription, each group linked to q's next group;
    40 bytes per position, a power of two >= the ring's rows) finds q's new oldest kept message
    in one vectorised step per group passed: at most ``capacity`` + 1 steps in one push and
    amortised O(1) per chunk pushed (each group passed is one an earlier push made), never a
    step per message.

    With a match log, messages leave only by retention. A listener handed a row from memory sets
    q's pending exactly (``total − so``: every later message of q is in the ring); one handed rows
    read back from disk subtracts those rows only, so messages it skipped on disk stay counted
    until a listener is handed a newer message of q from memory. A ``Gap`` for q up to seq X
    recomputes q's pending from the ring's rows of q with seq > X, exact when X >= the ring's
    first seq − 1; otherwise q's messages still on disk before the ring stop counting (an
    undercount that ends, as above, once q's messages are sent from memory). Retention alone
    does not change pending until a listener of q is told of the gap. Unsubscribing drops q's
    counts. Costs: ``push`` O(rows) vectorised (``np.add.at``/``np.maximum.at``, reusing the
    sort by subscription it already makes); a drain O(rows handed); a ``Gap`` with a match log
    O(1) per subscription, plus one pass over the ring's chunks up to X when X lies in the ring;
    ``backlog`` O(ids asked), ``subscriber_backlog`` O(live subscriptions) vectorised.
    """

    def __init__(
        self,
        capacity: int = 1024,
        max_pairs: int = 100_000,
        boot_seq: int = 0,
        on_gap: Callable[[int], None] | None = None,
        on_deliver: Callable[[list[Item]], None] | None = None,
        max_rows: int = 2_000_000,
        store: MatchLog | None = None,
        buffer_bytes: int = BUFFER_BYTES,
        listener_bytes: int = LISTENER_BYTES,
    ) -> None:
        self.capacity = capacity
        self.max_pairs = max_pairs
        self.max_rows = max_rows
        self.boot_seq = boot_seq
        # With a durable match log (server/match_log.py) memory is only a cache: a chunk leaving
        # the ring, and a message beyond a subscription's count bounds, is read back from disk;
        # only the log's retention loses messages. Without one the ring is all there is.
        self.store = store
        self.buffer_bytes = buffer_bytes
        self.listener_bytes = listener_bytes
        self._lost_before = boot_seq if store is None else store.retained_from - 1
        self._released = boot_seq  # last seq of the newest chunk handed to ``push``
        self._evicted_upto = boot_seq  # last seq of the newest chunk no longer in the ring
        self._ring_bytes = 0
        self._on_gap = on_gap
        self._on_deliver = on_deliver
        self._lock = threading.Lock()
        # per subscription id (columns; ``exists`` false for ids never registered or gone)
        self._exists = np.zeros(0, dtype=bool)
        self._registered = np.zeros(0, dtype=np.int64)
        self._unsub = np.zeros(0, dtype=np.int64)
        self._lost = np.zeros(0, dtype=np.int64)
        self._total = np.zeros(0, dtype=np.int64)
        self._ptotal = np.zeros(0, dtype=np.int64)
        # the backlog (class docstring; ``_BACKLOG`` says what each column holds)
        z = np.zeros(0, dtype=np.int64)
        self._newest, self._sent, self._so, self._bbso, self._btotal = z, z, z, z, z
        self._pending, self._pbytes, self._uncounted, self._lo, self._bblo = z, z, z, z, z
        self._lopos, self._lastg = z, z
        # memory-only row index, a circular buffer over the ring's global row positions: per
        # position (rows of a chunk grouped by subscription) its ordinal, bytes and pairs before
        # it, the end of its group and, at a group's last row, the position of q's next group
        self._ix_size = 0
        self._ix_ord, self._ix_bbef, self._ix_pbef, self._ix_gend, self._ix_next = z, z, z, z, z
        self._subscriber_of: list[str] = []
        # subscriber name -> code, and the code per subscription id (-1: none): a chunk's rows
        # grouped by it (``Chunk.rows_of``) let a listener by subscriber name visit only its
        # own rows when many listeners share a topic (fan-out)
        self._codes: dict[str, int] = {}
        self._subcode = np.zeros(0, dtype=np.int32)
        self._owner_of: list[str] = []  # owner principal per id ("" without auth)
        self._by_subscriber: dict[str, array[int]] = {}
        self._subscriber_listeners: dict[str, list[Listener]] = {}
        self._ring: list[Chunk] = []
        self._starts: list[int] = []  # ring[i].start, for the binary search of a drain
        self._ring_rows = 0
        self._ring_pairs = 0
        self._end = 0  # global row index after the last pushed row
        self._last_seq = boot_seq
        self.listeners: set[Listener] = set()
        # match-log records listeners stopped inside, by first seq (``_keep_part``)
        self._parts: OrderedDict[int, Chunk] = OrderedDict()
        self._parts_bytes = 0
        self.closed = False
        self.close_code, self.close_message = "", ""

    @property
    def size(self) -> int:
        return int(self._exists.shape[0])

    def _ensure(self, n: int) -> None:
        if n > self._exists.shape[0]:
            self._exists = _grow(self._exists, n, 0)
            self._registered = _grow(self._registered, n, 0)
            self._unsub = _grow(self._unsub, n, 0)
            self._lost = _grow(self._lost, n, 0)
            self._total = _grow(self._total, n, 0)
            self._ptotal = _grow(self._ptotal, n, 0)
            self._subcode = _grow(self._subcode, n, -1)
            for name, fill in _BACKLOG:
                setattr(self, name, _grow(getattr(self, name), n, fill))

    # ---- subscriptions ----------------------------------------------------------------------

    def add_subscription(self, sid: int, subscriber: str, registered_seq: int, owner: str = "") -> None:
        """Create q's buffer and attach the listeners of its subscriber (they see it from now)."""
        self.add_subscriptions([(sid, subscriber, registered_seq, owner)])

    def add_subscriptions(self, items: Iterable[tuple[int, str, int] | tuple[int, str, int, str]]) -> None:
        """``(sid, subscriber, registered_seq[, owner])`` each; a subscriber's listeners that are
        restricted to an owner attach only that owner's subscriptions. The per-subscription
        columns are written as arrays (a restart registers every subscription at once)."""
        items = list(items)
        if not items:
            return
        sids = np.fromiter((it[0] for it in items), dtype=np.int64, count=len(items))
        regs = np.fromiter((it[2] for it in items), dtype=np.int64, count=len(items))
        with self._lock:
            top = int(sids.max()) + 1
            self._ensure(top)
            self._exists[sids] = True
            self._registered[sids] = regs
            self._unsub[sids] = 0
            self._total[sids] = 0
            self._ptotal[sids] = 0
            for name, fill in _BACKLOG:
                getattr(self, name)[sids] = fill
            self._uncounted[sids] = self.boot_seq
            lb = self._lost_before
            self._lost[sids] = np.where(regs <= lb, lb, 0)
            if len(self._subscriber_of) < top:
                self._subscriber_of.extend([""] * (top - len(self._subscriber_of)))
            by_subscriber: dict[str, list[int]] = {}
            for item, sid in zip(items, sids.tolist(), strict=True):
                subscriber = item[1]
                self._subscriber_of[sid] = subscriber
                self._subcode[sid] = self._codes.setdefault(subscriber, len(self._codes))
                if len(item) > 3 and item[3]:  # ids are never reused: an unset slot means ""
                    if len(self._owner_of) <= sid:
                        self._owner_of.extend([""] * (sid + 1 - len(self._owner_of)))
                    self._owner_of[sid] = item[3]  # type: ignore[misc]
                by_subscriber.setdefault(subscriber, []).append(sid)
            for subscriber, ids in by_subscriber.items():
                self._by_subscriber.setdefault(subscriber, array("q")).extend(ids)
                listeners = self._subscriber_listeners.get(subscriber, ())
                if not listeners:
                    continue
                for sid in ids:
                    owner = self._owner_of[sid] if sid < len(self._owner_of) else ""
                    reg = int(self._registered[sid])
                    for lis in listeners:
                        if lis.owner is None or lis.owner == owner:
                            lis._attach(sid, reg - 1)

    def remove_subscription(self, sid: int, seq: int) -> None:
        """Mark q unsubscribed at ``seq``: listeners get an ``Unsubscribed`` after its messages."""
        with self._lock:
            if sid >= self.size or not self._exists[sid]:
                return
            self._unsub[sid] = seq
            self._pending[sid] = self._pbytes[sid] = 0  # its backlog no longer counts
            attached = False
            for lis in self.listeners:
                if lis._attached(sid):
                    lis.unsub_pending[sid] = seq
                    lis.wake.set()
                    attached = True
            lst = self._by_subscriber.get(self._subscriber_of[sid])
            if lst is not None:
                with contextlib.suppress(ValueError):
                    del lst[lst.index(sid)]
            if not attached:
                self._exists[sid] = False

    def has(self, sid: int) -> bool:
        return 0 <= sid < self.size and bool(self._exists[sid])

    def owner_of(self, sid: int) -> str:
        """The owner principal of subscription ``sid`` ("" without auth or when unknown)."""
        return self._owner_of[sid] if 0 <= sid < len(self._owner_of) else ""

    # ---- publishing side ----------------------------------------------------------------------

    def push(self, chunk: Chunk) -> None:
        """Append a chunk (rows in seq order, after every earlier chunk). Never blocks long."""
        n = len(chunk)
        if n == 0:
            return
        with self._lock:
            self._released = max(self._released, chunk.last_seq)
            sids = chunk.sids
            live = self._exists[sids] if sids.max() < self.size else None
            if live is None or not live.all():
                if live is None:
                    live = np.zeros(n, dtype=bool)
                    ok = sids < self.size
                    live[ok] = self._exists[sids[ok]]
                if not live.any():
                    return
                _filter(chunk, live)
                sids = chunk.sids
                n = len(chunk)
            if self.store is not None:
                self._count_pushed_durable(chunk)
            else:
                self._number_rows(chunk)
            chunk.start = self._end
            self._end += n
            self._last_seq = int(chunk.seqs[-1])
            self._ring.append(chunk)
            self._starts.append(chunk.start)
            self._ring_rows += n
            self._ring_pairs += chunk.n_pairs
            self._ring_bytes += chunk.nbytes
            durable = self.store is not None
            while len(self._ring) > 1 and (
                    self._ring_bytes > self.buffer_bytes
                    or (not durable and (self._ring_rows > self.max_rows
                                         or self._ring_pairs > self.max_pairs * 64))):
                old = self._ring.pop(0)
                self._starts.pop(0)
                self._ring_rows -= len(old)
                self._ring_pairs -= old.n_pairs
                self._ring_bytes -= old.nbytes
                self._evicted_upto = max(self._evicted_upto, old.last_seq)
                if not durable:
                    np.maximum.at(self._lost, old.sids, old.seqs)
                self._count_evicted(old)
            for lis in self.listeners:
                lis.wake.set()

    def _count_pushed_durable(self, chunk: Chunk) -> None:
        """With a match log: number a chunk's rows per subscription (ordinal, pairs and bytes
        before each row) and count them in the backlog, in one compiled pass over the rows
        (``_push_kernel``), no sort. Call with the lock held; O(rows)."""
        n = len(chunk)
        rb = chunk.row_bytes()
        npairs = chunk.pcols.lengths() if chunk.pcols is not None else _EMPTY_I64
        ords = np.empty(n, dtype=np.int64)
        bbefore = np.empty(n, dtype=np.int64)
        pbefore = np.empty(n if npairs.shape[0] else 0, dtype=np.int64)
        uniform = _push_kernel(np.ascontiguousarray(chunk.sids, dtype=np.int64),
                               np.ascontiguousarray(chunk.seqs, dtype=np.int64), rb, npairs,
                               self._total, self._ptotal, self._btotal, self._newest,
                               self._pending, self._pbytes, ords, pbefore, bbefore)
        chunk.ords = ords
        if npairs.shape[0]:
            chunk.pbefore = pbefore
            chunk.n_pairs = int(npairs.sum())
        if not uniform:  # (else the bytes before each row are ROW_BYTES × its ordinal)
            chunk.bbefore = bbefore

    def _number_rows(self, chunk: Chunk) -> None:
        """Memory-only: ordinals, pairs before and the backlog of a chunk's rows, through the
        sort by subscription the row index needs (``_count_pushed``). Lock held; O(rows log)."""
        sids = chunk.sids
        n = len(chunk)
        # ordinal of each row among its subscription's messages (rows of one sid in order)
        order = np.argsort(sids, kind="stable")
        ss = sids[order]
        first = np.empty(n, dtype=bool)  # a group of one subscription's rows starts
        first[0] = True
        np.not_equal(ss[1:], ss[:-1], out=first[1:])
        idx = np.arange(n)
        grp_start = np.maximum.accumulate(np.where(first, idx, 0))
        rank = np.empty(n, dtype=np.int64)
        rank[order] = idx - grp_start
        chunk.ords = self._total[sids] + rank
        np.add.at(self._total, sids, 1)
        if chunk.pcols is not None:
            npairs = chunk.pcols.lengths()
            cum = np.cumsum(npairs[order])
            grp_first_cum = np.maximum.accumulate(np.where(first, cum - npairs[order], 0))
            before = np.empty(n, dtype=np.int64)
            before[order] = cum - npairs[order] - grp_first_cum
            chunk.pbefore = self._ptotal[sids] + before
            np.add.at(self._ptotal, sids, npairs)
            chunk.n_pairs = int(npairs.sum())
        else:  # a row without pairs is still bounded by later pairs
            pb = self._ptotal[sids]
            chunk.pbefore = pb if pb.any() else np.broadcast_to(np.int64(0), (n,))
        chunk.start = self._end
        self._count_pushed(chunk, order, first)

    def close(self, code: str = "NOT_FOUND", message: str = "the topic was deleted") -> None:
        """The topic is gone or the server stops: end every listener with this status."""
        with self._lock:
            self.closed = True
            self.close_code, self.close_message = code, message
            for lis in list(self.listeners):
                lis.closed = True
                lis.wake.set()

    # ---- backlog (class docstring) --------------------------------------------------------------

    def _count_pushed(self, chunk: Chunk, order: np.ndarray, first: np.ndarray) -> None:
        """Count a pushed chunk (filtered; ``ords``, ``pbefore`` and ``start`` set) in the backlog:
        each row's bytes before it (``bbefore``), q's newest seq and bytes and, with a match log,
        its pending counts; memory-only, index its rows and move q's oldest kept message past
        what the count and pairs bounds now evict. Call with the lock held; O(rows)."""
        sids, n = chunk.sids, len(chunk)
        rb = chunk.row_bytes()
        ss = sids[order]
        rbs = rb[order]
        excl = np.cumsum(rbs) - rbs
        grp0 = np.maximum.accumulate(np.where(first, excl, 0))  # excl at each group's start
        bb_sorted = self._btotal[ss] + excl - grp0
        ords_sorted = chunk.ords[order]
        if not np.array_equal(bb_sorted, ROW_BYTES * ords_sorted):
            chunk.bbefore = np.empty(n, dtype=np.int64)
            chunk.bbefore[order] = bb_sorted
        np.add.at(self._btotal, sids, rb)
        np.maximum.at(self._newest, sids, chunk.seqs)
        if self.store is not None:
            np.add.at(self._pending, sids, 1)
            np.add.at(self._pbytes, sids, rb)
            return
        # memory-only: the row index (positions start .. start+n-1, rows grouped by subscription)
        start = chunk.start
        ring0 = self._ring[0].start if self._ring else start
        if start + n - ring0 > self._ix_size:
            self._ix_grow(start + n - ring0, ring0, start)
        mask = self._ix_size - 1
        gs = np.flatnonzero(first)
        ge = np.append(gs[1:], n)
        u = ss[gs]
        slots = (start + np.arange(n)) & mask
        self._ix_ord[slots] = ords_sorted
        self._ix_bbef[slots] = bb_sorted
        self._ix_pbef[slots] = 0 if chunk.pbefore is None else chunk.pbefore[order]
        self._ix_gend[slots] = np.repeat(start + ge, ge - gs)
        self._ix_next[slots] = -1
        last = self._lastg[u]
        linked = last >= ring0  # q's previous group is still in the ring: link it to this one
        self._ix_next[last[linked] & mask] = start + gs[linked]
        self._lastg[u] = start + ge - 1
        none = self._lopos[u] < 0  # nothing of q was kept: its oldest kept row is its first here
        if none.any():
            q, g = u[none], gs[none]
            self._lopos[q] = start + g
            self._lo[q] = self._ix_ord[(start + g) & mask]
            self._bblo[q] = bb_sorted[g]
        self._advance(u)
        self._refresh(u)

    def _ix_grow(self, need: int, ring0: int, start: int) -> None:
        """Make the row index (a power of two of positions) hold ``need`` positions, keeping
        those of the ring (``ring0`` .. ``start``)."""
        old_mask = self._ix_size - 1
        size = 1 << max(need - 1, 4095, 2 * self._ix_size - 1).bit_length()
        pos = np.arange(ring0, start)
        for name in ("_ix_ord", "_ix_bbef", "_ix_pbef", "_ix_gend", "_ix_next"):
            col = np.zeros(size, dtype=np.int64)
            if pos.size:
                col[pos & (size - 1)] = getattr(self, name)[pos & old_mask]
            setattr(self, name, col)
        self._ix_size = size

    def _advance(self, u: np.ndarray) -> None:
        """Memory-only: move each subscription of ``u`` (distinct, each with a kept row) to its
        oldest row the bounds keep: ordinal >= total − capacity and (its newest, or at most
        ``max_pairs`` pairs from it on), a condition that holds on a suffix of q's rows. Per
        group passed one vectorised step (at most ``capacity`` + 1 in one push, amortised O(1):
        each group passed is one an earlier push made); within the last group the ordinal bound
        is arithmetic (a group's ordinals are consecutive) and the pairs bound a vectorised
        binary search."""
        tot = self._total[u]
        omin = tot - self.capacity
        pmin = self._ptotal[u] - self.max_pairs
        pairs = bool((pmin > 0).any())  # else the pairs bound keeps everything
        move = self._lo[u] < omin
        if pairs:
            move |= pmin > 0
        if not move.any():
            return
        u, omin, pmin, newest = u[move], omin[move], pmin[move], tot[move] - 1
        mask = self._ix_size - 1
        ix_ord, ix_pbef, ix_gend = self._ix_ord, self._ix_pbef, self._ix_gend
        pos = self._lopos[u]
        act = np.arange(u.size)
        while act.size:
            p = pos[act]
            pm = p & mask
            gend = ix_gend[pm]
            x = p + np.maximum(omin[act] - ix_ord[pm], 0)  # the first to meet the count bound
            ok = x < gend
            if pairs:
                xm = np.minimum(x, gend - 1) & mask
                lm = (gend - 1) & mask
                nw, pb = newest[act], pmin[act]
                inside = ok
                ok = inside & ((ix_ord[xm] == nw) | (ix_pbef[xm] >= pb))
                later = inside & ~ok & ((ix_ord[lm] == nw) | (ix_pbef[lm] >= pb))
                if later.any():  # the pairs bound holds further on in this group
                    lo, hi = x[later], gend[later] - 1
                    lnw, lpb = nw[later], pb[later]
                    while (open_ := lo < hi).any():
                        mid = (lo + hi) // 2
                        c = (ix_pbef[mid & mask] >= lpb) | (ix_ord[mid & mask] == lnw)
                        hi = np.where(open_ & c, mid, hi)
                        lo = np.where(open_ & ~c, mid + 1, lo)
                    x[later] = lo
                    ok |= later
            pos[act[ok]] = x[ok]
            nok = ~ok
            if not nok.any():
                break
            act = act[nok]
            nxt = self._ix_next[(gend[nok] - 1) & mask]
            # q's newest row always qualifies, so a next group exists; -1 would be a defect:
            # fall back to q's newest group rather than loop
            pos[act] = np.where(nxt >= 0, nxt, self._lastg[u[act]])
        self._lopos[u] = pos
        self._lo[u] = ix_ord[pos & mask]
        self._bblo[u] = self._ix_bbef[pos & mask]

    def _count_evicted(self, old: Chunk) -> None:
        """A chunk left the ring. Memory-only its messages are lost: each subscription whose
        oldest kept row was in it moves to its next group (or keeps nothing). With a match log
        they remain on disk; ``lo`` then tracks q's oldest message in the ring."""
        if len(old) == 0:
            return
        if self.store is not None:
            _evicted_kernel(np.ascontiguousarray(old.sids, dtype=np.int64), old.ords,
                            _bbefore(old) + old.row_bytes(), self._lo, self._bblo)
            return
        # its groups of rows per subscription, as ``_count_pushed`` laid them out
        n = len(old)
        ss = old.sids[np.argsort(old.sids, kind="stable")]
        gs = np.flatnonzero(np.append(True, ss[1:] != ss[:-1]))
        g, gl = ss[gs], old.start + np.append(gs[1:], n) - 1
        mask = self._ix_size - 1
        lp = self._lopos[g]
        hit = (lp >= 0) & (lp <= gl)
        q = g[hit]
        nxt = self._ix_next[gl[hit] & mask]
        has = nxt >= 0
        self._lopos[q] = np.where(has, nxt, -1)
        self._lo[q] = np.where(has, self._ix_ord[nxt & mask], self._total[q])
        self._bblo[q] = np.where(has, self._ix_bbef[nxt & mask], self._btotal[q])
        gone = self._lastg[g] == gl
        self._lastg[g[gone]] = -1
        self._refresh(q)

    def _refresh(self, q: np.ndarray) -> None:
        """Memory-only: the pending counts of ``q`` from its boundaries (exact)."""
        self._pending[q] = np.maximum(self._total[q] - np.maximum(self._lo[q], self._so[q]), 0)
        self._pbytes[q] = np.maximum(self._btotal[q] - np.maximum(self._bblo[q], self._bbso[q]), 0)

    def _count_sent(self, ch: Chunk, rows: np.ndarray, rs: np.ndarray, rq: np.ndarray,
                    sizes: np.ndarray, disk: bool) -> None:
        """Rows ``rows`` of ``ch`` (subscriptions ``rs``, seqs ``rq``, bytes ``sizes``) are handed
        to a listener: raise q's sent and newest seqs and lower its pending counts. O(rows)."""
        if not disk:  # from the ring: one compiled pass (``_sent_kernel``)
            _sent_kernel(rs, rq, ch.ords[rows] + 1, _bbefore(ch, rows) + sizes, self._so,
                         self._bbso, self._sent, self._pending, self._pbytes, self._total,
                         self._btotal, self.store is not None)
            if self.store is None:
                self._refresh(rs)
            return
        # read back from the match log: no ordinals, so the rows not counted as sent yet are
        # subtracted (rows read back after a restart make their subscription's newest known)
        _sent_disk_kernel(rs, rq, np.ascontiguousarray(sizes, dtype=np.int64), self._newest,
                          self._sent, self._uncounted, self._pending, self._pbytes)

    def _recount(self, gap: dict[int, list[int]]) -> None:
        """With a match log: a listener is about to be told that q's messages up to
        ``gap[q][1]`` (X) are lost (before it is handed anything of this drain). Recount q's
        pending from its messages in the ring with seq > X: exact when X >= the ring's first
        seq − 1 (one pass over the ring's chunks up to X), else all of q's messages in the ring
        (O(1)) while those still on disk before the ring stop counting."""
        sids = np.fromiter(gap.keys(), dtype=np.int64, count=len(gap))
        upto = np.fromiter((g[1] for g in gap.values()), dtype=np.int64, count=len(gap))
        hit = upto > np.maximum(self._sent[sids], self._uncounted[sids])  # counted ones lost
        if not hit.any():
            return
        sids, upto = sids[hit], upto[hit]
        edge = self._evicted_upto
        self._uncounted[sids] = np.maximum(self._uncounted[sids], np.maximum(upto, edge))
        cnt = self._total[sids] - self._lo[sids]  # q's messages in the ring
        byt = self._btotal[sids] - self._bblo[sids]
        inner = upto > edge  # the gap reaches into the ring: take off q's ring rows <= X
        if inner.any():
            loc = np.full(self.size, -1, dtype=np.int64)
            loc[sids[inner]] = np.flatnonzero(inner)
            top = int(upto[inner].max())
            for ch in self._ring:
                if ch.first_seq > top:
                    break
                li = loc[ch.sids]
                m = li >= 0
                m[m] = ch.seqs[m] <= upto[li[m]]
                if m.any():
                    np.subtract.at(cnt, li[m], 1)
                    np.subtract.at(byt, li[m], ch.row_bytes()[m])
        self._pending[sids] = np.maximum(cnt, 0)
        self._pbytes[sids] = np.maximum(byt, 0)

    def backlog(self, sids: Sequence[int] | np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(pending messages, pending bytes, newest seq)`` of each subscription id (class
        docstring); 0 for ids unknown or unsubscribed. O(len(sids)), vectorised.

        >>> hub = DeliveryHub(boot_seq=0)
        >>> hub.add_subscriptions([(0, "a", 1), (1, "b", 2)])
        >>> one = np.array([1])
        >>> hub.push(Chunk.build([OpMatches(3, 1, "publish", "R", "r", 0, np.array([0]), one)]))
        >>> [a.tolist() for a in hub.backlog([0, 1, 7])]
        [[1, 0, 0], [48, 0, 0], [3, 0, 0]]
        """
        ids = np.asarray(sids, dtype=np.int64).reshape(-1)
        with self._lock:
            n = self.size
            ok = (ids >= 0) & (ids < n)
            if not ok.any():
                z = np.zeros(ids.size, dtype=np.int64)
                return z, z.copy(), z.copy()
            s = np.where(ok, ids, 0)
            live = ok & self._exists[s] & (self._unsub[s] == 0)
            return (np.where(live, self._pending[s], 0), np.where(live, self._pbytes[s], 0),
                    np.where(ok, self._newest[s], 0))

    def subscriber_backlog(self, committed: dict[int, int]
                           ) -> dict[str, tuple[int, int, int | None]]:
        """Per subscriber name with live subscriptions: ``(pending messages, pending bytes,
        largest committed lag or None)`` summed (the lag: maximised) over its subscriptions; the
        lag of a subscription with a committed position c (``committed``: sid -> c) is
        max(0, newest − c). One vectorised pass (``np.bincount`` over a subscriber index), a
        Python step per subscriber name, none per subscription.

        >>> hub = DeliveryHub(boot_seq=0)
        >>> hub.add_subscriptions([(0, "a", 1), (1, "a", 2), (2, "b", 3)])
        >>> two = np.array([0, 1])
        >>> hub.push(Chunk.build([OpMatches(4, 1, "publish", "R", "r", 0, two, np.ones(2))]))
        >>> hub.subscriber_backlog({0: 1})
        {'a': (2, 96, 3), 'b': (0, 0, None)}
        """
        with self._lock:
            names = [name for name, ids in self._by_subscriber.items() if len(ids)]
            parts = [np.frombuffer(self._by_subscriber[name], dtype=np.int64) for name in names]
            lens = np.fromiter((p.size for p in parts), dtype=np.int64, count=len(parts))
            sids = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
            del parts  # release the views before a later unsubscribe resizes an array
            pend, pbytes, newest = self._pending[sids], self._pbytes[sids], self._newest[sids]
            size = self.size
        k = len(names)
        who = np.repeat(np.arange(k), lens)
        msgs = np.bincount(who, weights=pend, minlength=k)
        nbytes = np.bincount(who, weights=pbytes, minlength=k)
        lag = np.full(k, -1, dtype=np.int64)
        if committed and sids.size:
            cs = np.fromiter(committed.keys(), dtype=np.int64, count=len(committed))
            cv = np.fromiter(committed.values(), dtype=np.int64, count=len(committed))
            pos = np.full(size, -1, dtype=np.int64)
            ok = (cs >= 0) & (cs < size)
            pos[cs[ok]] = cv[ok]
            c = pos[sids]
            has = c >= 0
            np.maximum.at(lag, who[has], np.maximum(newest[has] - c[has], 0))
        return {name: (int(msgs[i]), int(nbytes[i]), None if lag[i] < 0 else int(lag[i]))
                for i, name in enumerate(names)}

    # ---- listening side -----------------------------------------------------------------------

    def listen(
        self,
        subscriber: str,
        subscription_ids: list[int],
        cursors: dict[int, int],
        default_after_seq: int,
        from_latest: bool,
        current_seq: int,
        max_batch: int = 65_536,
        owner: str | None = None,
    ) -> Listener:
        """Attach a listener to ``subscription_ids`` and (when set) every subscription of
        ``subscriber`` — of ``owner`` only, when set, now and later; raises ``KeyError(sid)`` for
        an unknown subscription id and ``PermissionError(sid)`` for an id of another owner."""
        lis = Listener(self, subscriber, current_seq, max_batch, owner)
        lis.by_name = bool(subscriber) and not subscription_ids  # its rows: its subscriber's
        with self._lock:
            wanted = set(subscription_ids)
            for sid in wanted:
                if not self.has(sid):
                    raise KeyError(sid)
                if owner is not None and self.owner_of(sid) != owner:
                    raise PermissionError(sid)
            if subscriber:
                mine = self._by_subscriber.get(subscriber, ())
                if owner is None:
                    wanted.update(mine)
                else:
                    wanted.update(sid for sid in mine if self.owner_of(sid) == owner)
                self._subscriber_listeners.setdefault(subscriber, []).append(lis)
            start = current_seq if from_latest else default_after_seq
            lis.cur = np.full(max(self.size, 1), -1, dtype=np.int64)
            low = current_seq
            for sid in wanted:
                c = cursors.get(sid, start)
                lis.cur[sid] = c
                low = min(low, c)
                if self._unsub[sid]:
                    lis.unsub_pending[sid] = int(self._unsub[sid])
            # scan the ring from its start only when some cursor is behind the newest message
            lis.pos = self._ring[0].start if self._ring and low < self._last_seq else self._end
            self.listeners.add(lis)
            lis.wake.set()
        return lis

    def _detach(self, lis: Listener) -> None:
        with self._lock:
            self.listeners.discard(lis)
            lst = self._subscriber_listeners.get(lis.subscriber)
            if lst is not None:
                if lis in lst:
                    lst.remove(lis)
                if not lst:
                    del self._subscriber_listeners[lis.subscriber]
            for sid in lis.unsub_pending:
                if not any(other._attached(sid) for other in self.listeners):
                    self._exists[sid] = False

    def _reason(self, to_seq: int) -> str:
        if self.store is not None:
            return (f"beyond the topic's delivery retention (messages up to seq {to_seq} are no "
                    f"longer kept; retention starts at seq {self.store.retained_from})")
        if to_seq <= self.boot_seq:
            return f"messages before the server restart at seq {self.boot_seq} are not retained"
        return EVICTED

    def dropped(self, upto_seq: int, sids: np.ndarray | None) -> None:
        """The match log's retention deleted every message up to ``upto_seq`` of ``sids`` (None:
        of every subscription registered by then); listeners behind it get a ``Gap``."""
        with self._lock:
            n = self.size
            if sids is None:
                hit = np.flatnonzero(self._registered[:n] <= upto_seq)
            else:
                hit = sids[sids < n]
            if hit.size:
                self._lost[hit] = np.maximum(self._lost[hit], upto_seq)

    def buffer_stats(self) -> tuple[int, int, int]:
        """``(bytes, messages, chunks)`` held in memory (the ring)."""
        with self._lock:
            return self._ring_bytes, self._ring_rows, len(self._ring)

    def _gaps_of_lost(self, lis: Listener, gap: dict[int, list[int]]) -> None:
        """Report (and skip) every attached subscription's messages that are lost for good."""
        cur = lis.cur
        att = np.flatnonzero(cur[: self.size] >= 0)
        lost = self._lost[att]
        behind = att[lost > cur[att]]
        for sid in behind.tolist():
            lo = max(int(cur[sid]) + 1, int(self._registered[sid]))
            hi = int(self._lost[sid])
            if lo <= hi:
                g = gap.get(sid)
                gap[sid] = [lo, hi] if g is None else [min(g[0], lo), max(g[1], hi)]
            cur[sid] = hi
        if self.store is not None and behind.size:  # (memory-only, eviction took them off)
            self._recount({sid: gap[sid] for sid in behind.tolist() if sid in gap})

    def _take_chunk(self, ch: Chunk, lo: int, lis: Listener, budget: list[int],
                    gap: dict[int, list[int]], blocks: list[Item], bounded: bool,
                    disk: bool = False) -> int:
        """``_take`` over ``ch`` from row ``lo``, window after window, until the chunk or the
        budget ends; returns the row to resume at (the chunk's length: all of it)."""
        n = ch.sids.shape[0]
        while True:
            lo = self._take(ch, lo, lis, budget, gap, blocks, bounded, disk)
            if lo >= n or budget[0] <= 0 or budget[1] <= 0:
                return lo

    def _take(self, ch: Chunk, lo: int, lis: Listener, budget: list[int], gap: dict[int, list[int]],
              blocks: list[Item], bounded: bool, disk: bool = False) -> int:
        """Rows of ``ch`` in a window from ``lo`` that ``lis`` wants, within ``budget``
        ([messages, bytes, taken so far]); ``disk``: ``ch`` was read back from the match log.
        Appends them as one block and returns the row after the last one taken (or the
        window's end). The window (a few times the budget's messages) keeps a drain's cost
        proportional to what it takes, not to the chunk, when a large chunk is drained in many
        small steps."""
        cur = lis.cur
        if lis.by_name and not bounded and not disk and ch.sids.shape[0] - lo > BY_NAME_MIN_ROWS:
            # only the rows of the listener's subscriber (an index made once per chunk)
            n = ch.sids.shape[0]
            code = self._codes.get(lis.subscriber, -2)
            cand = ch.rows_of(code, self._subcode)
            if ch.pcols is None and cand.shape[0] <= PICK_MAX_ROWS:
                return self._take_rows(ch, cand, lo, lis, budget, blocks)
            cand = cand[np.searchsorted(cand, lo):]
            c = cur[ch.sids[cand]]
            rows = cand[(c >= 0) & (ch.seqs[cand] > c)] - lo
            if rows.size == 0:
                return n
            return self._hand(ch, lo, n, rows, lis, budget, blocks, disk)
        n = min(ch.sids.shape[0], lo + max(4 * budget[0], 1 << 15))
        if disk and not bounded and ch.pcols is None and n - lo <= PICK_MAX_ROWS:
            return self._take_disk_rows(ch, lo, n, lis, budget, blocks)
        sids = ch.sids[lo:n]
        seqs = ch.seqs[lo:n]
        c = cur[sids]
        m = (c >= 0) & (seqs > c)
        if not m.any():
            return n
        if bounded:
            cap, max_pairs = self.capacity, self.max_pairs
            total, ptotal = self._total, self._ptotal
            keep = ch.ords[lo:n] >= total[sids] - cap
            if ch.pbefore is not None:
                newest = ch.ords[lo:n] == total[sids] - 1
                keep &= newest | (ptotal[sids] - ch.pbefore[lo:n] <= max_pairs)
            lost_rows = np.flatnonzero(m & ~keep)
            for r in lost_rows.tolist():  # seq order
                sid = int(sids[r])
                seq = int(seqs[r])
                g = gap.get(sid)
                if g is None:
                    gap[sid] = [max(int(cur[sid]) + 1, int(self._registered[sid])), seq]
                else:
                    g[1] = max(g[1], seq)
                cur[sid] = max(int(cur[sid]), seq)
            m &= keep
        return self._hand(ch, lo, n, np.flatnonzero(m), lis, budget, blocks, disk)

    def _take_rows(self, ch: Chunk, cand: np.ndarray, lo: int, lis: Listener, budget: list[int],
                   blocks: list[Item]) -> int:
        """``_take`` of a listener by subscriber name over a ring chunk without pairs (every row
        ``ROW_BYTES``), with a match log, over its subscriber's rows there (``cand``): the rows
        after ``lo`` it has not had, up to the budget, picked, counted as sent, its cursors
        advanced and the block's columns gathered in one compiled pass (``_pick_kernel``). A
        fan-out topic's listeners each take about a hundred rows of every chunk, where a dozen
        NumPy steps of fixed cost each outweighed the rows; a listener of every subscription of
        an output-heavy topic takes 245,000 rows a batch, where the steps' gathers and masks
        cost ~40 % more CPU per message (``python -m hotjoin.ops.bench.serve_path --catch-up
        --affected 264 --subscriptions 50000 --stored 50000 --events 4000``, live: 30-33 M
        messages per CPU second against 22-23 M)."""
        bb = _EMPTY_I64 if ch.bbefore is None else ch.bbefore
        picked = _pick_kernel(
            cand, lo, lis.cur, ch.sids, ch.seqs, ch.signs, ch.counts, ch.ops, _row_cap(budget),
            ch.ords, bb, ch.bbefore is not None, self._so, self._bbso, self._sent,
            self._pending, self._pbytes, self._total, self._btotal)
        return _picked(ch, picked, ch.sids.shape[0], budget, blocks)

    def _take_disk_rows(self, ch: Chunk, lo: int, n: int, lis: Listener, budget: list[int],
                        blocks: list[Item]) -> int:
        """``_take`` over rows ``lo`` to ``n`` of a chunk without pairs read back from the match
        log (a listener catching up): the rows it has not had, up to the budget, picked, counted
        as sent, its cursors advanced and the block's columns gathered in one compiled pass
        (``_pick_disk_kernel``), as ``_take_rows`` does from the ring, so that catching up costs
        what live delivery does per message."""
        picked = _pick_disk_kernel(
            lo, n, lis.cur, ch.sids, ch.seqs, ch.signs, ch.counts, ch.ops, _row_cap(budget),
            self._newest, self._sent, self._uncounted, self._pending, self._pbytes)
        return _picked(ch, picked, n, budget, blocks)

    def _hand(self, ch: Chunk, lo: int, n: int, rows: np.ndarray, lis: Listener,
              budget: list[int], blocks: list[Item], disk: bool) -> int:
        """Hand ``lis`` the rows ``lo + rows`` of ``ch`` that fit ``budget`` (``_take``); returns
        the row to resume at (``n``: everything up to it was looked at)."""
        cur = lis.cur
        end = n
        if rows.size:
            sizes = (ch.row_bytes()[rows + lo] if ch.pcols is not None
                     else np.full(rows.size, ROW_BYTES))
            fit = int(np.searchsorted(np.cumsum(sizes), budget[1], side="right"))
            take = min(rows.size, budget[0], fit)
            if take == 0:
                if budget[2]:  # the drain is full: resume at this row next time
                    budget[1] = 0
                    return lo + int(rows[0])
                take = 1  # a message bigger than the whole budget still goes, alone
            budget[2] += take
            if take < rows.size:
                rows = rows[:take]
                end = lo + int(rows[-1]) + 1
            budget[0] -= rows.size
            budget[1] -= int(sizes[: rows.size].sum())
            abs_rows = rows + lo
            rs = np.ascontiguousarray(ch.sids[abs_rows], dtype=np.int64)
            rq = np.ascontiguousarray(ch.seqs[abs_rows], dtype=np.int64)
            _advance_kernel(cur, rs, rq)
            self._count_sent(ch, abs_rows, rs, rq, sizes[: rows.size], disk)
            pcols = None if ch.pcols is None else ch.pcols.take(abs_rows)
            blocks.append(MatchBlock(rs, rq, ch.signs[abs_rows], ch.counts[abs_rows],
                                     ch.ops[abs_rows], ch.op_table, pcols))
        return end

    def _finish(self, lis: Listener, gap: dict[int, list[int]], blocks: list[Item], at_end: bool
                ) -> tuple[list[Item], int]:
        """Gaps first (a subscription's gap precedes its messages), then the blocks, then the
        pending ``Unsubscribed`` once the listener is at the end. Call with the lock held."""
        out: list[Item] = [GapItem(sid, lo, hi, self._reason(hi)) for sid, (lo, hi) in gap.items()]
        gaps = len(out)
        out += blocks
        if at_end and lis.unsub_pending:
            for sid, seq in list(lis.unsub_pending.items()):
                out.append(UnsubscribedItem(sid, seq))
                lis.cur[sid] = -1
                del lis.unsub_pending[sid]
                if not any(o._attached(sid) for o in self.listeners):
                    self._exists[sid] = False
        if not at_end:
            lis.wake.set()
        return out, gaps

    def _emit(self, lis: Listener, out: list[Item], gaps: int, at_end: bool) -> list[Item]:
        if gaps and self._on_gap is not None:
            self._on_gap(gaps)
        if not lis.caught_up and at_end:
            lis.caught_up = True
            out.append(CaughtUpItem(lis.start_seq))
        if out and self._on_deliver is not None:
            self._on_deliver(out)
        return out

    def _drain(self, lis: Listener) -> list[Item]:
        """Take up to ``lis.max_batch`` messages (and about ``listener_bytes``) after the
        listener's cursors: from the ring, or from the match log while the listener is behind it."""
        if lis.on_disk:
            return self._drain_disk(lis)
        gap: dict[int, list[int]] = {}  # sid -> [from, to]: one Gap per subscription and drain
        blocks: list[Item] = []
        durable = self.store is not None
        with self._lock:
            if self.closed:
                lis.closed = True
                return []
            lis.wake.clear()
            if lis.cur.shape[0] < self.size:
                lis.cur = _grow(lis.cur, self.size, -1)
            cur = lis.cur
            ring_start = self._ring[0].start if self._ring else self._end
            if not lis.checked or lis.pos < ring_start:
                # first drain, or the listener fell behind the ring
                if durable:
                    if not lis.checked:
                        att = np.flatnonzero(cur[: self.size] >= 0)
                        start = np.maximum(cur[att], self._registered[att] - 1)
                        lis.dseq = int(start.min()) if att.size else self._released
                    lis.checked = True
                    if lis.dseq < self._evicted_upto:  # it needs what left the ring: read the disk
                        lis.on_disk = True
                        lis.wake.set()
                        return []
                self._gaps_of_lost(lis, gap)  # report every lost range
                lis.checked = True
                lis.pos = max(lis.pos, ring_start)
            budget = [lis.max_batch, self.listener_bytes, 0]
            first = max(bisect.bisect_right(self._starts, lis.pos) - 1, 0)
            for i in range(first, len(self._ring)):
                ch = self._ring[i]
                end = ch.start + ch.sids.shape[0]
                if end <= lis.pos:
                    continue
                if budget[0] <= 0 or budget[1] <= 0:
                    break
                stop = self._take_chunk(ch, lis.pos - ch.start, lis, budget, gap, blocks,
                                        not durable)
                lis.pos = ch.start + stop
                lis.dseq = ch.last_seq if lis.pos >= end else ch.first_seq - 1
                if lis.pos < end:  # the drain is full inside this chunk
                    break
            at_end = lis.pos >= self._end
            out, gaps = self._finish(lis, gap, blocks, at_end)
        return self._emit(lis, out, gaps, at_end)

    def _drain_disk(self, lis: Listener) -> list[Item]:
        """Catch up from the match log: records after ``lis.dseq`` up to the last released seq;
        switches back to the ring once everything after ``lis.dseq`` is in it."""
        gap: dict[int, list[int]] = {}
        blocks: list[Item] = []
        with self._lock:
            if self.closed:
                lis.closed = True
                return []
            lis.wake.clear()
            upto = self._released
        # the rest of a record a drain stopped inside resumes at its row (an output-heavy
        # batch's record holds several drains' worth of messages), from the hub's cache of such
        # records when it still holds it, else read again
        part, lis.part = lis.part, None
        if part is not None and part[0] != lis.dseq + 1:
            part = None
        with self._lock:
            ch = None if part is None else self._parts.get(part[0])
            if ch is not None:
                self._parts.move_to_end(part[0])
        if ch is not None:
            recs, reached = [(ch, part[1])], ch.last_seq
        else:
            recs, reached = self._read_disk(lis, upto)
            if part is not None and recs and recs[0][0].first_seq == part[0]:
                recs[0] = (recs[0][0], part[1])
        with self._lock:
            if lis.cur.shape[0] < self.size:
                lis.cur = _grow(lis.cur, self.size, -1)
            self._gaps_of_lost(lis, gap)  # after the read: retention may have run meanwhile
            budget = [lis.max_batch, self.listener_bytes, 0]
            for ch, row in recs:
                if budget[0] <= 0 or budget[1] <= 0:
                    break
                stop = self._take_chunk(ch, row, lis, budget, gap, blocks, False, disk=True)
                lis.dseq = ch.last_seq if stop >= len(ch) else ch.first_seq - 1
                if stop < len(ch):
                    lis.part = (ch.first_seq, stop)
                    self._keep_part(ch)
                    break
                self._drop_part(ch)
            else:
                if not recs or recs[-1][0].last_seq >= reached:
                    lis.dseq = max(lis.dseq, reached)
            if lis.dseq >= self._evicted_upto:  # everything after dseq is in the ring
                lis.on_disk = False
                lis.part = None
                k = bisect.bisect_right([c.first_seq for c in self._ring], lis.dseq)
                lis.pos = self._ring[k].start if k < len(self._ring) else self._end
            out, gaps = self._finish(lis, gap, blocks, False)
            lis.wake.set()
        return self._emit(lis, out, gaps, False)

    def _keep_part(self, ch: Chunk) -> None:
        """Keep a record read back in part for the next drains (of any listener), the least
        recently used ones dropped beyond ``PARTS_BYTES`` (the newest always stays). Call with
        the lock held."""
        if ch.first_seq in self._parts:
            self._parts.move_to_end(ch.first_seq)
            return
        self._parts[ch.first_seq] = ch
        self._parts_bytes += ch.nbytes
        while len(self._parts) > 1 and self._parts_bytes > PARTS_BYTES:
            _, old = self._parts.popitem(last=False)
            self._parts_bytes -= old.nbytes

    def _drop_part(self, ch: Chunk) -> None:
        """A listener read ``ch`` to its end: its memory goes back for the next records (a
        listener behind it on the same record reads it again). Call with the lock held."""
        if self._parts.pop(ch.first_seq, None) is not None:
            self._parts_bytes -= ch.nbytes

    def _read_disk(self, lis: Listener, upto: int) -> tuple[list[tuple[Chunk, int]], int]:
        """The match log's records after ``lis.dseq`` up to ``upto``, about a drain's bytes of
        them, as ``(chunk, 0)``, and the seq the read covers (``upto``, or the last seq of an
        unreadable record: a record that fails its checksum costs only its own seqs, anything
        else the rest; the listener gets a Gap rather than a failed stream)."""
        assert self.store is not None
        try:
            recs = self.store.read(lis.dseq, upto, self.listener_bytes)
        except Exception as e:
            bad = min(e.last_seq, upto) if isinstance(e, DamagedRecordError) else upto
            log.error("match log unreadable after seq %d (%s); reporting a gap up to %d",
                      lis.dseq, e, bad)
            with self._lock:
                att = np.flatnonzero(lis.cur[: self.size] >= 0)
                hit = att[lis.cur[att] < bad]
                self._lost[hit] = np.maximum(self._lost[hit], bad)
            return [], bad
        return [(Chunk.from_columns(cols, first, last), 0) for first, last, cols in recs], upto


@kernel(**UNLOCKED)
def _push_kernel(sids: np.ndarray, seqs: np.ndarray, rb: np.ndarray, npairs: np.ndarray,
                 total: np.ndarray, ptotal: np.ndarray, btotal: np.ndarray, newest: np.ndarray,
                 pending: np.ndarray, pbytes: np.ndarray, ords: np.ndarray, pbefore: np.ndarray,
                 bbefore: np.ndarray) -> bool:
    """Per row of a pushed chunk, in row (seq) order: its ordinal, pairs and bytes before it
    among its subscription's messages, and the subscription's counters after it (``npairs``
    empty: no row has pairs). Returns whether every row's bytes before it are ``ROW_BYTES`` ×
    its ordinal (so ``Chunk.bbefore`` need not be kept). One pass, O(rows)."""
    with_pairs = npairs.shape[0] > 0
    uniform = True
    for i in range(sids.shape[0]):
        q = sids[i]
        ords[i] = total[q]
        total[q] += 1
        bbefore[i] = btotal[q]
        uniform &= btotal[q] == ROW_BYTES * ords[i]
        btotal[q] += rb[i]
        if with_pairs:
            pbefore[i] = ptotal[q]
            ptotal[q] += npairs[i]
        if seqs[i] > newest[q]:
            newest[q] = seqs[i]
        pending[q] += 1
        pbytes[q] += rb[i]
    return uniform


@kernel(**UNLOCKED)
def _sent_kernel(rs: np.ndarray, rq: np.ndarray, ords1: np.ndarray, bbend: np.ndarray,
                 so: np.ndarray, bbso: np.ndarray, sent: np.ndarray, pending: np.ndarray,
                 pbytes: np.ndarray, total: np.ndarray, btotal: np.ndarray, exact: bool) -> None:
    """Rows handed to a listener from the ring (subscriptions ``rs``, seqs ``rq``, ordinals
    after ``ords1``, bytes through ``bbend``; q's rows in seq order, so each of these grows
    along q's rows): raise each subscription's so, bbso and sent and, with a match log
    (``exact``), set its pending counts from its newest row sent (``DeliveryHub`` docstring,
    backlog). The ring's rows were counted in ``newest`` when pushed. One pass, O(rows)."""
    for i in range(rs.shape[0]):
        q = rs[i]
        if ords1[i] > so[q]:
            so[q] = ords1[i]
        if bbend[i] > bbso[q]:
            bbso[q] = bbend[i]
        if rq[i] > sent[q]:  # q's newest sent message so far (the last one of q here wins)
            sent[q] = rq[i]
            if exact:
                pending[q] = max(total[q] - so[q], 0)
                pbytes[q] = max(btotal[q] - bbso[q], 0)


@kernel(**UNLOCKED)
def _wanted_rows(cand: np.ndarray, use_cand: bool, a: int, b: int, cur: np.ndarray,
                 sids: np.ndarray, seqs: np.ndarray, cap: int, resume: int
                 ) -> tuple[np.ndarray, int]:
    """The first ``cap`` rows a listener wants (cursor ``cur[q] >= 0`` and seq after it) among
    rows ``cand[a:b]`` (``use_cand``) or ``a`` to ``b - 1``, and the row to resume at:
    ``resume`` when every row was looked at, else the row after the last one taken, or the
    first one wanted when ``cap`` is 0. One call per pick (not per row: ``_pick_kernel``)."""
    picked = np.empty(max(min(cap, b - a), 0), dtype=np.int64)
    got = 0
    for j in range(a, b):
        r = cand[j] if use_cand else j
        c = cur[sids[r]]
        if c >= 0 and seqs[r] > c:
            if got == cap:
                resume = r if got == 0 else picked[got - 1] + 1
                break
            picked[got] = r
            got += 1
    return picked[:got], resume


@kernel(**UNLOCKED)
def _gather_rows(picked: np.ndarray, cur: np.ndarray, sids: np.ndarray, seqs: np.ndarray,
                 signs: np.ndarray, counts: np.ndarray, ops: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The block of rows ``picked``: their sids, seqs, signs, counts and operations, with the
    listener's cursors advanced past them. One call per pick."""
    got = picked.shape[0]
    rs = np.empty(got, dtype=np.int64)
    rq = np.empty(got, dtype=np.int64)
    sg = np.empty(got, dtype=signs.dtype)
    cn = np.empty(got, dtype=counts.dtype)
    op = np.empty(got, dtype=ops.dtype)
    for i in range(got):
        r = picked[i]
        q = sids[r]
        rs[i], rq[i], sg[i], cn[i], op[i] = q, seqs[r], signs[r], counts[r], ops[r]
        if seqs[r] > cur[q]:
            cur[q] = seqs[r]
    return rs, rq, sg, cn, op


@kernel(**UNLOCKED)
def _pick_kernel(cand: np.ndarray, lo: int, cur: np.ndarray, sids: np.ndarray, seqs: np.ndarray,
                 signs: np.ndarray, counts: np.ndarray, ops: np.ndarray, cap: int,
                 ords: np.ndarray, bbefore: np.ndarray, has_bb: bool, so: np.ndarray,
                 bbso: np.ndarray, sent: np.ndarray, pending: np.ndarray, pbytes: np.ndarray,
                 total: np.ndarray, btotal: np.ndarray
                 ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``DeliveryHub._take_rows``' pass over rows ``cand`` (increasing) from row ``lo``: the
    first ``cap`` rows the listener wants (``_wanted_rows``), their subscriptions counted as
    sent (``_sent_kernel``, exact; ``bbefore``: ``Chunk.bbefore`` when ``has_bb``, else
    ``ROW_BYTES`` × ordinal) and cursors advanced; each step one call over the picked rows.
    Returns the row to resume at (the chunk's length: all of it looked at) and the taken rows'
    sids, seqs, signs, counts and operations. O(log rows + len(cand))."""
    picked, resume = _wanted_rows(cand, True, np.searchsorted(cand, lo), cand.shape[0], cur, sids,
                                  seqs, cap, sids.shape[0])
    rs, rq, sg, cn, op = _gather_rows(picked, cur, sids, seqs, signs, counts, ops)
    po = ords[picked]
    before = bbefore[picked] if has_bb else ROW_BYTES * po
    _sent_kernel(rs, rq, po + 1, before + ROW_BYTES, so, bbso, sent, pending, pbytes, total,
                 btotal, True)
    return resume, rs, rq, sg, cn, op


@kernel(**UNLOCKED)
def _pick_disk_kernel(lo: int, end: int, cur: np.ndarray, sids: np.ndarray, seqs: np.ndarray,
                      signs: np.ndarray, counts: np.ndarray, ops: np.ndarray, cap: int,
                      newest: np.ndarray, sent: np.ndarray, uncounted: np.ndarray,
                      pending: np.ndarray, pbytes: np.ndarray
                      ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``DeliveryHub._take_disk_rows``' pass over rows ``lo`` to ``end`` of a chunk read back
    from the match log: the first ``cap`` rows the listener wants (``_wanted_rows``), counted
    as sent (``_sent_disk_kernel``, every row ``ROW_BYTES``) and cursors advanced.
    Returns the row to resume at (``end``: all looked at) and the taken rows' sids, seqs,
    signs, counts and operations. O(end - lo)."""
    picked, resume = _wanted_rows(sids[:0], False, lo, end, cur, sids, seqs, cap, end)
    rs, rq, sg, cn, op = _gather_rows(picked, cur, sids, seqs, signs, counts, ops)
    _sent_disk_kernel(rs, rq, np.full(rs.shape[0], ROW_BYTES, dtype=np.int64), newest, sent,
                      uncounted, pending, pbytes)
    return resume, rs, rq, sg, cn, op


@kernel(**UNLOCKED)
def _sent_disk_kernel(rs: np.ndarray, rq: np.ndarray, sizes: np.ndarray, newest: np.ndarray,
                      sent: np.ndarray, uncounted: np.ndarray, pending: np.ndarray,
                      pbytes: np.ndarray) -> None:
    """Rows read back from the match log handed to a listener (q's rows in seq order): raise
    q's newest and sent seqs and take each row q had not sent yet (after ``sent`` and
    ``uncounted``) off its pending counts, which stay ≥ 0. One pass, O(rows)."""
    for i in range(rs.shape[0]):
        q = rs[i]
        if rq[i] > newest[q]:
            newest[q] = rq[i]
        if rq[i] > sent[q] and rq[i] > uncounted[q]:
            pending[q] = max(pending[q] - 1, 0)
            pbytes[q] = max(pbytes[q] - sizes[i], 0)
        if rq[i] > sent[q]:
            sent[q] = rq[i]


@kernel(**UNLOCKED)
def _evicted_kernel(sids: np.ndarray, ords: np.ndarray, bend: np.ndarray, lo: np.ndarray,
                    bblo: np.ndarray) -> None:
    """Rows that left the ring (durable): raise each subscription's ordinal and bytes of its
    oldest message in the ring past them (``lo``, ``bblo``). One pass, O(rows)."""
    for i in range(sids.shape[0]):
        q = sids[i]
        if ords[i] + 1 > lo[q]:
            lo[q] = ords[i] + 1
        if bend[i] > bblo[q]:
            bblo[q] = bend[i]


@kernel(**UNLOCKED)
def _advance_kernel(cur: np.ndarray, rs: np.ndarray, rq: np.ndarray) -> None:
    """A listener's cursors after rows ``rs``/``rq``: ``cur[q] = max(cur[q], seq)``."""
    for i in range(rs.shape[0]):
        q = rs[i]
        if rq[i] > cur[q]:
            cur[q] = rq[i]


def _row_cap(budget: list[int]) -> int:
    """How many rows without pairs (``ROW_BYTES`` each) fit a drain's ``budget`` ([messages,
    bytes, taken so far]); at least one when nothing was taken yet (a message bigger than the
    whole budget still goes, alone)."""
    cap = min(budget[0], budget[1] // ROW_BYTES)
    if cap <= 0 and not budget[2]:
        cap = 1
    return max(cap, 0)


def _picked(ch: Chunk, picked: tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                     np.ndarray], n: int, budget: list[int],
            blocks: list[Item]) -> int:
    """Account for a compiled pick of rows without pairs (``_pick_kernel``, ``_pick_disk_kernel``:
    the row to resume at and the block's columns) in ``budget`` and ``blocks``; returns the row
    to resume at. Nothing taken before row ``n`` means the drain is full."""
    resume, rs, rq, sg, cn, op = picked
    got = rs.shape[0]
    if got == 0:
        if resume < n:  # the drain is full: resume at this row next time
            budget[1] = 0
        return resume
    budget[0] -= got
    budget[1] -= got * ROW_BYTES
    budget[2] += got
    blocks.append(MatchBlock(rs, rq, sg, cn, op, ch.op_table, None))
    return resume


def _bbefore(ch: Chunk, rows: np.ndarray | None = None) -> np.ndarray:
    """The bytes pushed to each row's subscription before it (``Chunk.bbefore``), of ``rows``."""
    if ch.bbefore is None:
        return ROW_BYTES * (ch.ords if rows is None else ch.ords[rows])
    return ch.bbefore if rows is None else ch.bbefore[rows]


def _filter(chunk: Chunk, keep: np.ndarray) -> None:
    """Drop the rows of subscriptions that are gone (``keep`` false)."""
    idx = np.flatnonzero(keep)
    if chunk.pcols is not None:
        chunk.pcols = chunk.pcols.take(idx)
    chunk.sids, chunk.seqs = chunk.sids[idx], chunk.seqs[idx]
    chunk.signs, chunk.counts, chunk.ops = chunk.signs[idx], chunk.counts[idx], chunk.ops[idx]


class Wake(threading.Event):
    """A listener's "messages are waiting" flag. ``notify``, when set, is called when the flag
    goes from clear to set (from any thread): how a Listen stream on an event loop hears of new
    messages without a thread waiting for it. A ``set`` of a flag already set calls nothing:
    the stream has been told and looks at the flag before it waits again, and the drain that
    clears it reads the ring after (every chunk is in the ring before its wakes are set), so a
    topic with a hundred listeners does not hand its event loop a hundred callbacks per batch
    while they linger. ``at``: when it was last set while clear (monotonic seconds), so the
    stream knows how long messages have waited.

    >>> calls = []
    >>> w = Wake(); w.notify = lambda: calls.append(1)
    >>> w.set(); w.set(); w.clear(); w.set()
    >>> len(calls)
    2
    """

    def __init__(self) -> None:
        super().__init__()
        self.notify: Callable[[], object] | None = None
        self.at = 0.0

    def set(self) -> None:
        if self.is_set():
            return
        self.at = time.monotonic()
        super().set()
        notify = self.notify
        if notify is not None:
            notify()


class Listener:
    """One Listen stream's view of its subscriptions: cursors (a column) and a ring position."""

    def __init__(self, hub: DeliveryHub, subscriber: str, start_seq: int, max_batch: int,
                 owner: str | None = None) -> None:
        self.hub = hub
        self.subscriber = subscriber
        self.owner = owner  # None: every owner's subscriptions of ``subscriber``
        self.start_seq = start_seq
        self.max_batch = max_batch
        self.cur = np.zeros(0, dtype=np.int64)
        self.pos = 0
        self.checked = False
        self.unsub_pending: dict[int, int] = {}
        self.wake = Wake()
        self.closed = False
        self.caught_up = False
        self.on_disk = False  # reading the match log (behind the ring)
        self.dseq = 0  # every message with seq <= dseq that it wants was delivered
        self.by_name = False  # listens to its subscriber's subscriptions only (no explicit ids)
        self.part: tuple[int, int] | None = None  # a match-log record read in part: first seq, next row

    def _attached(self, sid: int) -> bool:
        return sid < self.cur.shape[0] and self.cur[sid] >= 0

    def _attach(self, sid: int, cursor: int) -> None:
        if self.cur.shape[0] <= sid:
            self.cur = _grow(self.cur, sid + 1, -1)
        self.cur[sid] = cursor
        self.wake.set()

    def next_batch(self, timeout: float) -> list[Item]:
        """Wait up to ``timeout`` s for messages and return them (empty on timeout or close)."""
        if not self.wake.wait(timeout):
            return []
        return self.take()

    def take(self) -> list[Item]:
        """The messages waiting now, without waiting (empty when none or closed)."""
        if self.closed or not self.wake.is_set():
            return []
        return self.hub._drain(self)

    def close(self) -> None:
        """Detach from the hub (the stream ended)."""
        self.closed = True
        self.hub._detach(self)


def warm_up() -> None:
    """Load the compiled passes of delivery (pushing, sending from the ring and from the match
    log, advancing cursors) on one-row arrays, so the first delivered batch does not."""
    z = np.zeros(1, dtype=np.int64)
    _push_kernel(z, z, z, _EMPTY_I64, z.copy(), z.copy(), z.copy(), z.copy(), z.copy(), z.copy(),
                 z.copy(), z.copy(), z.copy())
    _sent_kernel(z, z, z, z, z.copy(), z.copy(), z.copy(), z.copy(), z.copy(), z, z, True)
    _sent_disk_kernel(z, z, z, z.copy(), z.copy(), z, z.copy(), z.copy())
    # a record read back is parsed from a view of the bytes read: its columns are read-only
    # but for the operation indexes (converted to int32, match_log.decode)
    ro = [z.copy(), z.copy(), z.astype(np.int8), z.copy()]
    for a in ro:
        a.flags.writeable = False
    _pick_disk_kernel(0, 1, z.copy(), *ro, z.astype(np.int32), 1, z.copy(), z.copy(), z, z.copy(),
                      z.copy())
    _evicted_kernel(z, z, z, z.copy(), z.copy())
    _advance_kernel(z.copy(), z, z)
    for ops in (z.astype(np.int32), z.astype(np.uint32)):  # batch chunks, chunks read back
        _pick_kernel(z, 0, z.copy(), z, z, z.astype(np.int8), z, ops, 1, z, z, True, z.copy(),
                     z.copy(), z.copy(), z.copy(), z.copy(), z, z)
    match_columns.warm_up()


def now_ns() -> int:
    return time.time_ns()
