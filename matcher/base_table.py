"""Stored tuples of one stream side: columns by slot, a key order, an id map and an expiry queue.

A tuple lives in a *slot*: ``keys[slot]``, ``values[slot]``, ``times[slot]``, ``ends[slot]``
(the interval's end, ``== times[slot]`` for a point), ``seqs[slot]`` are numpy columns the join
kernels read directly, ``alive[slot]`` says whether it is stored. The key
order is a :class:`~matcher.structures.sorted_runs.SortedRuns` over slots (paper 004 §3.1
assumes a B-tree on ``S(B)``). A deleted slot is reused only after the key order has merged it
away, so a kernel never meets a slot that was reused under it. Expiry by retention
(``matcher/oracle.py`` states the rule: a tuple goes once its *end* falls behind, which for a
point is its time) pops an end-ordered heap with lazy deletion: O(log n) per stored tuple.

Equi-joins (select and window joins, §3.2–3.3) also need the tuples of one join key sorted by
value and by time: ``enable_key_index()`` builds a
:class:`~matcher.structures.key_index.KeyIndex` once (O(n log n)) and from then on it is
maintained on every insert, remove and bulk load. A topic with only band joins never builds it
and pays nothing for it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from hotjoin.matcher.model import Event, Side
from hotjoin.matcher.structures.key_index import KeyIndex
from hotjoin.matcher.structures.sorted_runs import SortedRuns

_NO_TIME = -(1 << 63)  # ``latest_time`` of a table that never stored a tuple


def _empty_payloads(n: int) -> np.ndarray:
    out = np.empty(n, dtype=object)
    out.fill(b"")
    return out


class TableArrays(NamedTuple):
    """The per-slot columns a kernel reads of the other side's table: liveness, values (A or
    C) and sequence numbers (the owed test: ``matcher/oracle.py``)."""

    alive: np.ndarray
    values: np.ndarray
    seqs: np.ndarray


class BaseTable:
    """The stored tuples of side R or S with O(√n) amortised insert/delete and key-ordered scans."""

    def __init__(self, side: Side, capacity: int = 1024, track_expiry: bool = True,
                 key_order: bool = True) -> None:
        self.side = side
        self.keys = np.zeros(capacity, dtype=np.float64)
        self.values = np.zeros(capacity, dtype=np.float64)
        self.times = np.zeros(capacity, dtype=np.int64)
        self.ends = np.zeros(capacity, dtype=np.int64)
        self.seqs = np.zeros(capacity, dtype=np.int64)
        self.alive = np.zeros(capacity, dtype=np.bool_)
        # object columns: a batch stores and reads them with one fancy-indexing call each
        self.ids: np.ndarray = np.full(capacity, None, dtype=object)
        self.payloads: np.ndarray = _empty_payloads(capacity)
        self.slot_of: dict[str, int] = {}
        #: the tuples in key order (band joins scan key ranges of it); with ``key_order=False``
        #: not kept until ``enable_key_order`` (a topic without band joins saves ~0.07 µs per
        #: stored tuple of the batch path, measured, and by layout 16 bytes per tuple: a
        #: float64 key and an int64 slot)
        self.order = SortedRuns()
        self.key_ordered = key_order
        self._next_slot = 0
        self._free: list[int] = []
        self._pending_free: list[int] = []
        self._merges_seen = 0
        self._expiry: list[tuple[int, int, int]] = []  # (end, seq, slot)
        #: False for a topic without retention: no expiry queue is kept (nothing ever expires)
        self.track_expiry = track_expiry
        self.key_index: KeyIndex | None = None
        #: the largest start time and end of any tuple stored so far: upper bounds a kernel
        #: may skip work by (a delete or an expiry does not lower them)
        self.latest_time = _NO_TIME
        self.latest_end = _NO_TIME

    # -- size and lookup -------------------------------------------------------------------
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The table as a kernel bundle: :class:`TableArrays`' fields as a plain tuple (see
        ``matcher.joins.protocol``: kernels name it back)."""
        return (self.alive, self.values, self.seqs)

    def __len__(self) -> int:
        return len(self.slot_of)

    def __contains__(self, event_id: str) -> bool:
        return event_id in self.slot_of

    def event(self, event_id: str) -> Event | None:
        slot = self.slot_of.get(event_id)
        if slot is None:
            return None
        return self._event_at(slot)

    def _event_at(self, slot: int) -> Event:
        return Event(self.side, self.ids[slot] or "", float(self.keys[slot]),
                     float(self.values[slot]), int(self.times[slot]), self.payloads[slot],
                     int(self.ends[slot]))

    def events(self) -> Iterator[tuple[Event, int]]:
        """Every stored tuple with its sequence number, in slot order."""
        for slot in self.slot_of.values():
            yield self._event_at(slot), int(self.seqs[slot])

    def ids_of(self, slots: np.ndarray) -> np.ndarray:
        """Object array of the ids stored at ``slots`` (one reference per pair, no new str)."""
        return self.ids[slots]

    # -- updates ---------------------------------------------------------------------------
    def _grow(self) -> None:
        cap = 2 * self.keys.shape[0]
        for name in ("keys", "values", "times", "ends", "seqs", "alive"):
            old = getattr(self, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[: old.shape[0]] = old
            setattr(self, name, new)
        extra = cap - self.ids.shape[0]
        self.ids = np.concatenate([self.ids, np.full(extra, None, dtype=object)])
        self.payloads = np.concatenate([self.payloads, _empty_payloads(extra)])

    def _take_slot(self) -> int:
        if self._free:
            return self._free.pop()
        if self._next_slot == self.keys.shape[0]:
            self._grow()
        slot = self._next_slot
        self._next_slot += 1
        return slot

    def _sync_free(self) -> None:
        """Slots deleted before the last merge of the key order are no longer referenced (and
        none is referenced while no key order is kept)."""
        if not self.key_ordered:
            self._free.extend(self._pending_free)
            self._pending_free.clear()
        elif self.order.merges != self._merges_seen:
            self._merges_seen = self.order.merges
            self._free.extend(self._pending_free)
            self._pending_free.clear()

    def insert(self, ev: Event, seq: int) -> int:
        """Store ``ev`` (its id must be new on this side); returns its slot."""
        slot = self._take_slot()
        self.keys[slot] = ev.key
        self.values[slot] = ev.value
        self.times[slot] = ev.time
        end = ev.time if ev.end is None else ev.end
        self.ends[slot] = end
        self.latest_time = max(self.latest_time, int(ev.time))
        self.latest_end = max(self.latest_end, int(end))
        self.seqs[slot] = seq
        self.alive[slot] = True
        self.ids[slot] = ev.id
        self.payloads[slot] = bytes(ev.payload)
        self.slot_of[ev.id] = slot
        if self.key_ordered:
            self.order.insert(ev.key, slot, self.alive)
        self._sync_free()
        if self.track_expiry:
            heapq.heappush(self._expiry, (end, seq, slot))
        if self.key_index is not None:
            self.key_index.add(float(ev.key), float(ev.value), int(ev.time), slot)
        return slot

    def remove(self, event_id: str) -> int:
        """Remove a stored tuple by id (KeyError if absent); returns the freed slot."""
        slot = self.slot_of.pop(event_id)
        if self.key_index is not None:
            self.key_index.remove(float(self.keys[slot]), float(self.values[slot]),
                                  int(self.times[slot]), slot)
        self.alive[slot] = False
        self.ids[slot] = None
        self.payloads[slot] = b""
        self._pending_free.append(slot)
        if self.key_ordered:
            self.order.mark_dead(self.alive)
        self._sync_free()
        return slot

    def expire_before(self, limit: int) -> list[int]:
        """Drop every stored tuple with ``end < limit`` (retention; a point's end is its time);
        returns their old slots.

        Needs ``track_expiry`` (the engine sets it exactly when its topic has a retention)."""
        dropped: list[int] = []
        heap = self._expiry
        while heap and heap[0][0] < limit:
            _, seq, slot = heapq.heappop(heap)
            if self.alive[slot] and self.seqs[slot] == seq:
                ev_id = self.ids[slot]
                assert ev_id is not None
                self.remove(ev_id)
                dropped.append(slot)
        return dropped

    def next_expiry(self) -> int | None:
        """The earliest end of a stored tuple (the next one retention drops), or None when
        nothing is stored; stale queue entries are discarded on the way. Needs ``track_expiry``."""
        heap = self._expiry
        while heap:
            _, seq, slot = heap[0]
            if self.alive[slot] and self.seqs[slot] == seq:
                return int(heap[0][0])
            heapq.heappop(heap)
        return None

    def bulk_load(self, events: list[Event], seqs: list[int]) -> None:
        """Store many new tuples at once (restore, replay); one O(n log n) re-sort of the key order."""
        for ev, seq in zip(events, seqs, strict=True):
            slot = self._take_slot()
            self.keys[slot] = ev.key
            self.values[slot] = ev.value
            self.times[slot] = ev.time
            end = ev.time if ev.end is None else ev.end
            self.ends[slot] = end
            self.latest_time = max(self.latest_time, int(ev.time))
            self.latest_end = max(self.latest_end, int(end))
            self.seqs[slot] = seq
            self.alive[slot] = True
            self.ids[slot] = ev.id
            self.payloads[slot] = bytes(ev.payload)
            self.slot_of[ev.id] = slot
            if self.track_expiry:
                self._expiry.append((end, seq, slot))
        heapq.heapify(self._expiry)
        self._reorder()
        self._sync_free()
        if self.key_index is not None:
            old, self.key_index = self.key_index, None
            new = self.enable_key_index(old.by_time is not None)
            new.succeed(old)

    def _store_columns(self, ids: list[str], keys: np.ndarray, values: np.ndarray,
                       times: np.ndarray, seqs: np.ndarray,
                       payloads: list[bytes] | None, ends: np.ndarray) -> np.ndarray:
        """Write n new tuples into free slots (reused first, as ``_take_slot`` does); their slots."""
        n = len(ids)
        reuse = min(n, len(self._free))
        taken = self._free[len(self._free) - reuse:][::-1]
        del self._free[len(self._free) - reuse:]
        rest = n - reuse
        while self._next_slot + rest > self.keys.shape[0]:
            self._grow()
        slots = np.empty(n, dtype=np.int64)
        slots[:reuse] = taken
        slots[reuse:] = np.arange(self._next_slot, self._next_slot + rest, dtype=np.int64)
        self._next_slot += rest
        self.keys[slots] = keys
        self.values[slots] = values
        self.times[slots] = times
        self.ends[slots] = ends
        if n:
            self.latest_time = max(self.latest_time, int(np.max(times)))
            self.latest_end = max(self.latest_end, int(np.max(ends)))
        self.seqs[slots] = seqs
        self.alive[slots] = True
        col = np.empty(n, dtype=object)
        col[:] = ids
        self.ids[slots] = col
        if payloads is not None:
            col[:] = [p if type(p) is bytes else bytes(p) for p in payloads]
            self.payloads[slots] = col
        self.slot_of.update(zip(ids, slots.tolist(), strict=True))
        return slots

    def insert_many(self, ids: list[str], keys: np.ndarray, values: np.ndarray,
                    times: np.ndarray, seqs: np.ndarray,
                    payloads: list[bytes] | None = None,
                    ends: np.ndarray | None = None) -> np.ndarray:
        """Store n new tuples at once (ids distinct and new on this side); returns their slots.
        ``ends``: the intervals' ends (None: points, ``ends = times``).

        The state afterwards is the state n ``insert`` calls reach (the batch path, ``matcher/apply.py``):
        one pass over the columns, one key-order insert per tuple into the delta run, one
        compiled key-index insert for all. O(n (log n + √N)) for N stored tuples.
        """
        n = len(ids)
        if n == 0:
            return np.empty(0, dtype=np.int64)
        keys = np.ascontiguousarray(keys, dtype=np.float64)
        values = np.ascontiguousarray(values, dtype=np.float64)
        times = np.ascontiguousarray(times, dtype=np.int64)
        seqs = np.ascontiguousarray(seqs, dtype=np.int64)
        ends = times if ends is None else np.ascontiguousarray(ends, dtype=np.int64)
        slots = self._store_columns(ids, keys, values, times, seqs, payloads, ends)
        if self.key_ordered:
            self.order.insert_many(keys, slots, self.alive)
        self._sync_free()
        heap = self._expiry
        if self.track_expiry:
            items = zip(ends.tolist(), seqs.tolist(), slots.tolist(), strict=True)
            if n > len(heap) // 8:
                heap.extend(items)
                heapq.heapify(heap)
            else:
                for item in items:
                    heapq.heappush(heap, item)
        if self.key_index is not None:
            self.key_index.add_many(keys, values, times, slots)
        return slots

    def load_columns(self, ids: list[str], keys: np.ndarray, values: np.ndarray,
                     times: np.ndarray, seqs: np.ndarray,
                     payloads: list[bytes] | None = None,
                     ends: np.ndarray | None = None) -> np.ndarray:
        """Store n new tuples and rebuild the key order and key index once (restore, replay).

        Like ``bulk_load`` but from columns: O((N + n) log(N + n)); the caller has checked the
        ids (distinct, new on this side) and the ends (None: points). Returns the slots.
        """
        ends = times if ends is None else ends
        slots = self._store_columns(ids, keys, values, times, seqs, payloads, ends)
        if self.track_expiry:
            self._expiry.extend(zip(np.asarray(ends).tolist(), np.asarray(seqs).tolist(),
                                    slots.tolist(), strict=True))
        heapq.heapify(self._expiry)
        self._reorder()
        self._sync_free()
        if self.key_index is not None:
            old, self.key_index = self.key_index, None
            new = self.enable_key_index(old.by_time is not None)
            new.succeed(old)
        return slots

    def _reorder(self) -> None:
        """Rebuild the key order from the live tuples (bulk loads), when one is kept."""
        if self.key_ordered:
            live = self.live_slots()
            self.order.bulk_load(self.keys[live], live)
            self.order.merges += 1

    def enable_key_order(self) -> None:
        """Keep the tuples in key order from now on (the first band join); O(n log n) once.

        >>> t = BaseTable("S", key_order=False)
        >>> _ = t.insert(Event("S", "a", 2.0, 0.0, 0), 1); _ = t.insert(Event("S", "b", 1.0, 0.0, 0), 2)
        >>> t.enable_key_order(); t.order.items(t.alive)
        [(1.0, 1), (2.0, 0)]
        """
        if self.key_ordered:
            return
        self.order = SortedRuns()
        self.key_ordered = True
        self._reorder()
        self._merges_seen = self.order.merges  # slots freed from now on wait for a merge

    def enable_key_index(self, time_order: bool = True) -> KeyIndex:
        """Build (once) and return the per-join-key index of the stored tuples; O(n log n).

        ``time_order``: also keep each key's tuples by time (window joins need it); asked for
        later, it is added then."""
        ix = self.key_index
        if ix is None:
            ix = KeyIndex(time_order)
            live = self.live_slots()
            ix.bulk(self.keys[live], self.values[live], self.times[live], live)
            self.key_index = ix
        elif time_order and ix.by_time is None:
            live = self.live_slots()
            ix.enable_time_order(self.keys[live], self.times[live], live)
        return ix

    def live_columns(self) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[bytes]]:
        """Copies of the stored tuples as columns ``(ids, keys, values, times, seqs, payloads)``
        (any order): what ``load_columns`` takes back. O(n) numpy work plus the id and payload
        lists."""
        ids = list(self.slot_of.keys())
        slots = np.fromiter(self.slot_of.values(), dtype=np.int64, count=len(ids))
        return (ids, self.keys[slots], self.values[slots], self.times[slots], self.seqs[slots],
                self.payloads[slots].tolist())

    def live_ends(self) -> np.ndarray:
        """The stored tuples' ends (int64; ``== times`` for points), in the row order of
        :meth:`live_columns` (both follow the id map's order; nothing may change between the
        two calls)."""
        slots = np.fromiter(self.slot_of.values(), dtype=np.int64, count=len(self.slot_of))
        return self.ends[slots]

    def live_slots(self) -> np.ndarray:
        return np.fromiter(self.slot_of.values(), dtype=np.int64, count=len(self.slot_of))

    def memory_bytes(self) -> int:
        """Approximate resident bytes of the numpy columns and the key order."""
        cols = sum(getattr(self, n).nbytes
                   for n in ("keys", "values", "times", "ends", "seqs", "alive"))
        o = self.order
        if self.key_index is not None:
            cols += self.key_index.memory_bytes()
        return (cols + o.main_keys.nbytes + o.main_pays.nbytes + o.delta_keys.nbytes
                + o.delta_pays.nbytes + o.main_sample.nbytes + o.main_cells[0].nbytes)
