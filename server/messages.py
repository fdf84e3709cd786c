"""What each subscription is owed: the engine's output of an operation or batch as delivery records.

The engine answers an operation with who is affected (``Matches``: pairs; ``Affected``: signed
counts) and a columnar batch with ``BatchOutput``; the delivery hub takes one ``Chunk`` per
durable batch, built from one ``OpMatches`` per operation (``server/delivery.py``). This module
is the translation between the two, one row per (operation, affected subscription): PAIRS rows
carry their pairs (as ``PairColumns``: Arrow id arrays and offsets, no object per message or
pair), AFFECTED rows (``SubscriptionBook.affected``) only the signed count. It also
counts what it builds and what listeners receive (matches, messages, deliveries and the
publish-to-delivery latency, ``server/metrics.py``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from hotjoin.matcher.batch import BatchOutput
from hotjoin.matcher.config import kernel
from hotjoin.matcher.model import Affected, Matches
from hotjoin.server import metrics
from hotjoin.server.book import SubscriptionBook
from hotjoin.server.delivery import Chunk, Item, MatchBlock, OpMatches
from hotjoin.server.match_columns import (
    OpTable,
    PairColumns,
    WireOps,
    ids_array,
    used_ops,
    wire_ops,
)

_SIDE_OF_CODE = np.array(["R", "S"], dtype=object)


class OpColumns:
    """The operation table of a columnar chunk (``Chunk.op_table``) without a tuple per event:
    entry k is ``("publish", sides[k], ids[k], received_ns)``, built on access."""

    __slots__ = ("sides", "ids", "received_ns", "_wire")

    def __init__(self, sides: np.ndarray, ids: np.ndarray, received_ns: int) -> None:
        self.sides, self.ids, self.received_ns = sides, ids, received_ns
        self._wire: WireOps | None = None

    def wire(self) -> WireOps:
        """The whole table as ``WireOps``, made once (every listener's drain shares it)."""
        if self._wire is None:
            k = len(self.ids)
            self._wire = wire_ops(np.zeros(k, dtype=np.uint8),
                                  np.where(self.sides == "R", 1, 2).astype(np.uint8),
                                  np.full(k, self.received_ns, dtype=np.int64), self.ids)
        return self._wire

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, k: int) -> tuple[str, str, str, int]:
        return ("publish", self.sides[k], self.ids[k], self.received_ns)

    def __iter__(self) -> Iterator[tuple[str, str, str, int]]:
        return (self[k] for k in range(len(self)))

    def received(self, ops: np.ndarray) -> np.ndarray:
        """Receive times (Unix ns) of rows with operation indexes ``ops``."""
        return np.full(len(ops), self.received_ns, dtype=np.int64)

    def arrays(self, used: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, pa.Array]:
        """Operations ``used`` as columns: kind codes (0 publish), wire side codes, receive
        times and event ids (Arrow), vectorised (``op_arrays``)."""
        w = self.wire()
        return w.kinds[used], w.sides[used], w.rns[used], ids_array(self.ids[used])


class MessageBuilder:
    """Builds a topic's delivery records from engine output and counts them (topic lock held,
    except ``observe_delivery``, which the hub calls as listeners drain)."""

    def __init__(self, topic: str, book: SubscriptionBook) -> None:
        self._book = book
        self._m_matches = metrics.MATCHES.labels(topic)
        self._m_messages = metrics.MESSAGES.labels(topic)
        self._m_deliveries = metrics.DELIVERIES.labels(topic)
        self._m_to_delivery = metrics.PUBLISH_TO_DELIVERY.labels(topic)

    def of_operation(self, out: Matches | Affected, seq: int, sign: int, op: str, side: str, eid: str,
                     received_ns: int, sink: list[OpMatches]) -> None:
        """One operation's engine output as one part of a chunk: a row per affected subscription."""
        n = len(out)
        if n == 0:
            return
        if isinstance(out, Affected):
            counts = out.counts
            self._m_matches.inc(int(np.abs(counts).sum()))
            self._m_messages.inc(n)
            sink.append(OpMatches(seq, sign, op, side, eid, received_ns, out.subscription_ids, counts))
            return
        self._m_matches.inc(n)
        sids = out.subscription_ids
        order = np.argsort(sids, kind="stable")
        uniq, starts, counts = np.unique(sids[order], return_index=True, return_counts=True)
        wanted = ~self._book.affected[uniq]
        flat = None
        if wanted.any():
            flat = _flat_pairs(wanted, counts, out.r_ids[order], out.s_ids[order])
        sink.append(OpMatches(seq, sign, op, side, eid, received_ns, uniq, counts * sign, None, flat))
        self._m_messages.inc(len(uniq))

    def of_snapshot(self, result: Matches, sid: int, seq: int, received_ns: int,
                    sink: list[OpMatches]) -> None:
        """The snapshot message of subscription ``sid`` registered at ``seq``: its whole current
        ``result`` (``Engine.result_columnar``) with sign +1, as one part of a chunk."""
        if len(result) == 0:
            return
        flat = (None if self._book.affected[sid]
                else (np.zeros(1, dtype=np.int64), result.r_ids, result.s_ids))
        sink.append(OpMatches(seq, 1, "snapshot", "", "", received_ns, np.array([sid], dtype=np.int64),
                              np.array([len(result)], dtype=np.int64), None, flat))

    def of_batch(self, out: BatchOutput, take: np.ndarray, seq: np.ndarray, side_code: np.ndarray,
                 ids: np.ndarray, received_ns: int) -> Chunk | None:
        """The delivery chunk of a batch's columnar output: one row per (event, subscription),
        rows in seq order; PAIRS rows carry their pairs, AFFECTED rows only the signed count.
        ``take``: the batch index of each event the engine saw; ``seq``, ``side_code``, ``ids``:
        by batch index."""
        m = len(out.event)
        if m == 0:
            return None
        if out.r_id is None:  # affected output: one row per (event, subscription) already
            made = _affected_chunk(out, take, seq, side_code, ids, received_ns)
            if made is not None:
                self._m_matches.inc(made.matches)
                self._m_messages.inc(m)
                return made.chunk
        ev = take[out.event]  # batch index of each output row's event
        sids = np.asarray(out.subscription, dtype=np.int64)
        pcols = None
        if out.r_id is None:  # rows not in event order
            counts = np.asarray(out.count, dtype=np.int64)
            self._m_matches.inc(int(np.abs(counts).sum()))
        else:
            self._m_matches.inc(m)
            # the engine emits pairs by event, then subscription: sort only when they are not
            step_ev, step_q = ev[1:] - ev[:-1], sids[1:] - sids[:-1]
            order = None
            if not bool(((step_ev > 0) | ((step_ev == 0) & (step_q >= 0))).all()):
                order = _group_order(ev, sids)
                ev, sids = ev[order], sids[order]
            starts = np.flatnonzero(np.r_[True, (ev[1:] != ev[:-1]) | (sids[1:] != sids[:-1])])
            lens = np.diff(np.r_[starts, m])
            sign = np.asarray(out.sign, dtype=np.int64)
            sign = (sign if order is None else sign[order])[starts]
            ev, sids, counts = ev[starts], sids[starts], lens * sign
            wanted = ~self._book.affected[sids]
            if wanted.any():
                rows = np.flatnonzero(wanted)
                pcols = PairColumns.of_flat(len(sids), rows, lens[rows],
                                            *_pair_ids(wanted, lens, order, out.r_id, out.s_id))
        used, op_index = used_ops(ev)  # ev is in seq (batch) order: O(rows), no sort
        signs = np.where(counts < 0, -1, 1).astype(np.int8)
        table = OpColumns(_SIDE_OF_CODE[side_code[used]], ids[used], received_ns)
        self._m_messages.inc(len(sids))
        return Chunk(sids, seq[ev], signs, np.abs(counts), op_index.astype(np.int32), table, pcols)

    def observe_delivery(self, items: list[Item]) -> None:
        """Count the messages a listener received and their publish-to-delivery latency."""
        now = time.time_ns()
        n = 0
        for it in items:
            if isinstance(it, MatchBlock):
                n += len(it)
                table = it.op_table
                if isinstance(table, OpColumns):  # one receive time for the whole batch
                    self._m_to_delivery.observe((now - table.received_ns) / 1e9, len(it))
                    continue
                if isinstance(table, OpTable):
                    rns = table.received(it.ops)
                else:
                    rns = np.array([o[3] for o in table], dtype=np.int64)[it.ops]
                self._m_to_delivery.observe_many((now - rns) / 1e9)
        if n:
            self._m_deliveries.inc(n)


class _Affected(NamedTuple):
    chunk: Chunk
    matches: int  # the pairs the rows count


def _affected_chunk(out: BatchOutput, take: np.ndarray, seq: np.ndarray, side_code: np.ndarray,
                    ids: np.ndarray, received_ns: int) -> _Affected | None:
    """The chunk of AFFECTED output (one row per (event, subscription) already) in one compiled
    pass (``_affected_kernel``) instead of eight NumPy passes over the rows; None when the rows
    are not in event order (``of_batch`` then sorts out the operations with NumPy)."""
    m = len(out.event)
    i64 = np.int64
    sids = np.empty(m, dtype=i64)
    seqs = np.empty(m, dtype=i64)
    signs = np.empty(m, dtype=np.int8)
    counts = np.empty(m, dtype=i64)
    op_index = np.empty(m, dtype=np.int32)
    used = np.empty(m, dtype=i64)
    n_used, matches = _affected_kernel(
        np.asarray(out.event, dtype=i64), np.asarray(out.subscription, dtype=i64),
        np.asarray(out.count, dtype=i64), np.asarray(take, dtype=i64), np.asarray(seq, dtype=i64),
        sids, seqs, signs, counts, op_index, used)
    if n_used < 0:
        return None
    used = used[:n_used]
    table = OpColumns(_SIDE_OF_CODE[side_code[used]], ids[used], received_ns)
    return _Affected(Chunk(sids, seqs, signs, counts, op_index, table, None), int(matches))


@kernel(nogil=True)
def _affected_kernel(event: np.ndarray, subscription: np.ndarray, count: np.ndarray,
                     take: np.ndarray, seq: np.ndarray, sids: np.ndarray, seqs: np.ndarray,
                     signs: np.ndarray, counts: np.ndarray, op_index: np.ndarray,
                     used: np.ndarray) -> tuple[int, int]:  # pragma: no cover - compiled
    """Fill a chunk's columns from AFFECTED rows: row i is batch event ``take[event[i]]``'s
    (``used``: the distinct batch events in order, ``op_index``: the row's index into them),
    subscription, seq, sign and |count|. Returns ``(len(used), pairs counted)``, or ``(-1, 0)``
    at a row whose event comes before the previous row's (not in event order)."""
    n_used = 0
    matches = 0
    prev = -1
    for i in range(event.shape[0]):
        e = take[event[i]]
        if e != prev:
            if e < prev:
                return -1, 0
            used[n_used] = e
            n_used += 1
            prev = e
        op_index[i] = n_used - 1
        sids[i] = subscription[i]
        seqs[i] = seq[e]
        c = count[i]
        if c < 0:
            signs[i] = -1
            c = -c
        else:
            signs[i] = 1
        counts[i] = c
        matches += c
    return n_used, matches


def warm_up() -> None:
    """Load the compiled pass of ``of_batch`` on one-row arrays, so the first batch does not."""
    z = np.zeros(1, dtype=np.int64)
    _affected_kernel(z, z, z, z, z, z.copy(), z.copy(), np.zeros(1, np.int8), z.copy(),
                     np.zeros(1, np.int32), z.copy())


def _flat_pairs(wanted: np.ndarray, lens: np.ndarray, r_ids: np.ndarray, s_ids: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs of the PAIRS rows (``wanted``; row i's run is ``lens[i]`` long, runs end to
    end in the id arrays) as ``(rows, r_ids, s_ids)``: the AFFECTED rows' pairs left out by one
    mask, no step per row."""
    want = np.flatnonzero(wanted).astype(np.int64)
    if want.size < wanted.shape[0]:
        keep = np.repeat(wanted, lens)
        r_ids, s_ids = r_ids[keep], s_ids[keep]
    return want, r_ids, s_ids


def _pair_ids(wanted: np.ndarray, lens: np.ndarray, order: np.ndarray | None, r_ids: np.ndarray,
              s_ids: np.ndarray) -> tuple[pa.Array, pa.Array]:
    """The ids of the PAIRS rows' pairs (``wanted``; row i's run is ``lens[i]`` long once the
    engine's rows are in ``order``, None: as they are) as Arrow arrays, in row order. The ids
    are converted in the engine's order and then reordered by an Arrow ``take`` (a few ns per
    id, against tens for gathering the id objects); the AFFECTED rows' pairs, if any, are left
    out first."""
    if not wanted.all():
        keep = np.repeat(wanted, lens)
        idx = np.flatnonzero(keep) if order is None else order[keep]
        return ids_array(r_ids[idx]), ids_array(s_ids[idx])
    r, s = ids_array(r_ids), ids_array(s_ids)
    if order is not None:
        take = pa.array(order.astype(np.int64))
        r, s = r.take(take), s.take(take)
    return r, s


def _group_order(ev: np.ndarray, sids: np.ndarray) -> np.ndarray:
    """The stable order of rows by (event, subscription): one stable argsort of the combined
    key ``ev * (max sid + 1) + sid`` (the engine's rows come by event, so the sort runs over
    presorted runs: ~2 ms for 93,000 rows, against ~20 ms for ``np.lexsort``), or ``lexsort``
    when the key could overflow."""
    span = int(sids.max()) + 1 if sids.shape[0] else 1
    if int(ev.max()) < (1 << 62) // span:
        return np.argsort(ev.astype(np.int64) * span + sids, kind="stable")
    return np.lexsort((sids, ev))
