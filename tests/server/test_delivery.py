"""The delivery hub's backlog per subscription: newest seq, pending messages and their bytes
(``DeliveryHub`` docstring, docs/reference/metrics.md), against a brute-force oracle.

The oracle keeps every pushed message as ``(sid, seq, pairs)`` and the seqs handed to listeners
per subscription. A message is pending when its seq is above the newest seq handed for its
subscription and it is still kept: memory-only, by the per-subscription bounds (a deque of
``capacity`` messages and ``max_pairs`` pairs, newest always kept) and the ring's own bounds
(simulated chunk by chunk); with a match log, until retention loses it.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hotjoin.server import delivery
from hotjoin.server.delivery import (
    OP_BYTES,
    PAIR_BYTES,
    PAIRS_ROW_BYTES,
    ROW_BYTES,
    Chunk,
    DeliveryHub,
    GapItem,
    Listener,
    MatchBlock,
    OpMatches,
)
from hotjoin.server.match_log import MatchLog, encode
from hotjoin.server.messages import OpColumns

N_SUBS = 4
PAIRS_SUBS = (0, 1)  # PAIRS subscriptions; 2 and 3 get AFFECTED messages (no pairs)


def _bytes(pairs: int) -> int:
    """The estimate of one message, computed here independently of ``row_bytes``."""
    return ROW_BYTES + (PAIRS_ROW_BYTES + PAIR_BYTES * pairs if pairs else 0)


@dataclass
class Oracle:
    """Every pushed message and what was handed out, kept as plain Python lists."""

    capacity: int
    max_pairs: int
    buffer_bytes: int
    max_rows: int
    durable: bool
    # sid -> [(seq, pairs, chunk)]; the ring as [(chunk, bytes, rows, pairs)]
    rows: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)
    sent: dict[int, set[int]] = field(default_factory=dict)
    ring: list[tuple[int, int, int, int]] = field(default_factory=list)
    popped: set[int] = field(default_factory=set)
    gone: set[int] = field(default_factory=set)

    def push(self, chunk_id: int, ops: list[tuple[int, dict[int, int]]]) -> None:
        nbytes = nrows = npairs = 0
        for seq, rows in ops:
            for sid, pairs in sorted(rows.items()):
                self.rows.setdefault(sid, []).append((seq, pairs, chunk_id))
                nbytes += _bytes(pairs)
                nrows += 1
                npairs += pairs
        self.ring.append((chunk_id, nbytes + OP_BYTES * len(ops), nrows, npairs))
        while len(self.ring) > 1 and (
                sum(c[1] for c in self.ring) > self.buffer_bytes
                or (not self.durable and (sum(c[2] for c in self.ring) > self.max_rows
                                          or sum(c[3] for c in self.ring) > self.max_pairs * 64))):
            self.popped.add(self.ring.pop(0)[0])

    def kept(self, sid: int) -> list[tuple[int, int]]:
        """``(seq, pairs)`` of the messages of ``sid`` the server still holds (deque semantics)."""
        rows = self.rows.get(sid, [])
        if self.durable:
            return [(q, p) for q, p, _ in rows]
        total, ptotal = len(rows), sum(p for _, p, _ in rows)
        out, before = [], 0
        for i, (seq, pairs, chunk) in enumerate(rows):
            if (i >= total - self.capacity and (i == total - 1 or ptotal - before <= self.max_pairs)
                    and chunk not in self.popped):
                out.append((seq, pairs))
            before += pairs
        return out

    def expected(self, sid: int) -> tuple[int, int, int]:
        """``(pending, pending bytes, newest seq)`` of ``sid``."""
        newest = max((q for q, _, _ in self.rows.get(sid, [])), default=0)
        if sid in self.gone:
            return 0, 0, newest
        high = max(self.sent.get(sid, ()), default=0)
        owed = [(q, p) for q, p in self.kept(sid) if q > high]
        return len(owed), sum(_bytes(p) for _, p in owed), newest

    def handed(self, items: list) -> None:
        for it in items:
            if isinstance(it, MatchBlock):
                for sid, seq in zip(it.sids.tolist(), it.seqs.tolist(), strict=True):
                    self.sent.setdefault(sid, set()).add(seq)


def _chunk(ops: list[tuple[int, dict[int, int]]]) -> Chunk:
    parts = []
    for seq, rows in ops:
        sids = sorted(rows)
        pairs = {i: (np.array([f"r{seq}.{j}" for j in range(rows[s])], dtype=object),
                     np.array([f"s{seq}"] * rows[s], dtype=object))
                 for i, s in enumerate(sids) if rows[s]}
        parts.append(OpMatches(seq, 1, "publish", "S", f"s{seq}", 0, np.array(sids, dtype=np.int64),
                               np.array([max(rows[s], 1) for s in sids], dtype=np.int64),
                               pairs or None))
    return Chunk.build(parts)


def _state(hub: DeliveryHub) -> list[tuple[int, int, int]]:
    pend, nbytes, newest = hub.backlog(list(range(N_SUBS)))
    return list(zip(pend.tolist(), nbytes.tolist(), newest.tolist(), strict=True))


# one op: the subscriptions it affects and the pairs of each (0 pairs: no pairs for that row;
# PAIRS subscriptions mostly get pairs, AFFECTED ones never)
op_rows = st.dictionaries(st.integers(0, N_SUBS - 1), st.integers(0, 5), min_size=1,
                          max_size=N_SUBS)
action = st.one_of(
    st.tuples(st.just("push"), st.lists(op_rows, min_size=1, max_size=3)),
    st.tuples(st.just("listen"), st.dictionaries(st.integers(0, N_SUBS - 1), st.integers(0, 40),
                                                 max_size=N_SUBS),
              st.integers(1, 6)),
    st.tuples(st.just("drain"), st.integers(0, 1)),
    st.tuples(st.just("close"), st.integers(0, 1)),
    st.tuples(st.just("unsubscribe"), st.integers(0, N_SUBS - 1)),
)


def _run(actions: list, hub: DeliveryHub, oracle: Oracle, store: MatchLog | None,
         cursors: bool, exact: bool) -> int:
    """Apply ``actions`` to the hub and the oracle; returns the last seq. After each action the
    hub's backlog equals the oracle's (``exact``) or is at least it: with a match log, messages
    a listener skipped (its cursor was past them) while reading the disk stay counted until a
    newer message of the subscription is sent from memory. ``cursors``: listeners start at the
    action's cursors, else after each subscription's registration."""
    seq = N_SUBS
    listeners: list[Listener | None] = [None, None]
    for k, act in enumerate(actions):
        kind = act[0]
        if kind == "push":
            ops = []
            for rows in act[1]:
                rows = {s: (p if s in PAIRS_SUBS else 0) for s, p in rows.items()
                        if s not in oracle.gone}
                if rows:
                    seq += 1
                    ops.append((seq, rows))
            if not ops:
                continue
            ch = _chunk(ops)
            if store is not None:
                store.append(ch.first_seq, ch.last_seq, encode(ch.columns()))
            hub.push(ch)
            oracle.push(k, ops)
        elif kind == "listen":
            slot = k % 2
            if listeners[slot] is None:
                start = {s: min(c, seq) for s, c in act[1].items()} if cursors else {}
                listeners[slot] = hub.listen("a", [], start, 0, False, current_seq=seq,
                                             max_batch=act[2])
        elif kind == "drain":
            lis = listeners[act[1]]
            if lis is not None:
                oracle.handed(lis.next_batch(0))
        elif kind == "close":
            lis = listeners[act[1]]
            if lis is not None:
                lis.close()
                listeners[act[1]] = None
        elif kind == "unsubscribe" and act[1] not in oracle.gone:
            seq += 1
            hub.remove_subscription(act[1], seq)
            oracle.gone.add(act[1])
        got = _state(hub)
        want = [oracle.expected(s) for s in range(N_SUBS)]
        if exact:
            assert got == want, (k, act)
        else:
            assert [g[2] for g in got] == [w[2] for w in want], (k, act)
            assert all(g[0] >= w[0] and g[1] >= w[1] for g, w in zip(got, want, strict=True)), \
                (k, act, got, want)
    for lis in listeners:
        if lis is not None:
            lis.close()
    return seq


# how a listener by subscriber name reads a ring chunk: its rows in one compiled pass; its rows
# through vectorised steps; one vectorised look at every row of the chunk
READS = {"compiled": (-1, 1 << 60), "by name": (-1, -1), "every row": (1 << 60, 0)}


@contextlib.contextmanager
def _reads(how: str) -> Iterator[None]:
    old = delivery.BY_NAME_MIN_ROWS, delivery.PICK_MAX_ROWS
    delivery.BY_NAME_MIN_ROWS, delivery.PICK_MAX_ROWS = READS[how]
    try:
        yield
    finally:
        delivery.BY_NAME_MIN_ROWS, delivery.PICK_MAX_ROWS = old


bounds = {"capacity": st.integers(1, 6), "max_pairs": st.integers(1, 12),
          "buffer_bytes": st.integers(300, 6000), "max_rows": st.integers(1, 30),
          "listener_bytes": st.integers(1, 2000)}


@settings(max_examples=200, deadline=None)
@given(actions=st.lists(action, min_size=1, max_size=40), **bounds)
def test_memory_only_backlog_is_exact_after_every_step(
        actions: list, capacity: int, max_pairs: int, buffer_bytes: int, max_rows: int,
        listener_bytes: int) -> None:
    """Memory-only the counts are exact after every push (evicting by count, by pairs and from
    the ring), drain (any cursors and budgets, two listeners on the same subscriptions), close
    and unsubscribe."""
    hub = DeliveryHub(capacity=capacity, max_pairs=max_pairs, boot_seq=0, max_rows=max_rows,
                      buffer_bytes=buffer_bytes, listener_bytes=listener_bytes)
    for sid in range(N_SUBS):
        hub.add_subscription(sid, "a", registered_seq=sid + 1)
    oracle = Oracle(capacity, max_pairs, buffer_bytes, max_rows, durable=False)
    _run(actions, hub, oracle, None, cursors=True, exact=True)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=st.lists(action, min_size=1, max_size=40), buffer_bytes=st.integers(300, 6000),
       listener_bytes=st.integers(1, 2000), cursors=st.booleans(),
       reads=st.sampled_from(list(READS)))
def test_durable_backlog_against_the_oracle(tmp_path_factory: pytest.TempPathFactory, actions: list,
                                            buffer_bytes: int, listener_bytes: int,
                                            cursors: bool, reads: str) -> None:
    """With a match log (a small ring, so listeners read the disk): exact after every step when
    listeners start after each subscription's registration; with arbitrary cursors never below
    the truth, and exact again once a listener is sent a newer message of each from memory.
    ``reads``: how the listener reads each ring chunk (``READS``: the paths of large chunks, or
    the one of small ones)."""
    with _reads(reads):
        _durable_backlog(tmp_path_factory, actions, buffer_bytes, listener_bytes, cursors)


def _durable_backlog(tmp_path_factory: pytest.TempPathFactory, actions: list, buffer_bytes: int,
                     listener_bytes: int, cursors: bool) -> None:
    ml = MatchLog(tmp_path_factory.mktemp("ml"), log_seq=0, sync=False)
    hub = DeliveryHub(boot_seq=0, store=ml, buffer_bytes=buffer_bytes,
                      listener_bytes=listener_bytes)
    for sid in range(N_SUBS):
        hub.add_subscription(sid, "a", registered_seq=sid + 1)
    oracle = Oracle(0, 0, buffer_bytes, 0, durable=True)
    seq = _run(actions, hub, oracle, ml, cursors=cursors, exact=not cursors)
    # drain everything, then one more message for each live subscription, sent from memory
    lis = hub.listen("a", [], {}, 0, False, current_seq=seq)
    while lis.wake.is_set():
        oracle.handed(lis.next_batch(0))
    live = [s for s in range(N_SUBS) if s not in oracle.gone]
    if live:
        ops = [(seq + 1, {s: (1 if s in PAIRS_SUBS else 0) for s in live})]
        ch = _chunk(ops)
        ml.append(ch.first_seq, ch.last_seq, encode(ch.columns()))
        hub.push(ch)
        oracle.push(len(actions), ops)
        assert _state(hub) == [oracle.expected(s) for s in range(N_SUBS)] or cursors
        while lis.wake.is_set():
            oracle.handed(lis.next_batch(0))
    assert _state(hub) == [oracle.expected(s) for s in range(N_SUBS)]
    assert all(p == 0 for p, _, _ in _state(hub))
    lis.close()
    ml.close()


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_way_of_reading_a_chunk_hands_out_the_same(
        tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    """Listeners by subscriber name over large chunks (hundreds of rows, AFFECTED and PAIRS,
    several subscribers, budgets of any size, drains at any point, cursors of any value): taking
    a subscriber's rows in one compiled pass (pick, count as sent, advance), through vectorised
    steps over its rows, or by one vectorised look at every row of the chunk hands out the same
    items in the same order and leaves the same backlog."""
    n_subs = 600
    names, owner, plan = _draw_plan(data, n_subs, names=4, pairs_subs=30, pushes=4, listeners=3)
    budgets = [(data.draw(st.integers(1, 400)), data.draw(st.integers(1, 30_000)))
                for _ in range(3)]
    cursors, heard = _draw_listeners(data, n_subs, names, 3)

    def run(how: str) -> tuple[list, list]:
        ml = MatchLog(tmp_path_factory.mktemp("ml"), log_seq=0, sync=False)
        out: list = []
        with _reads(how):
            hubs = []
            for k in range(3):
                hub = DeliveryHub(boot_seq=0, store=ml, listener_bytes=budgets[k][1])
                hub.add_subscriptions([(q, f"n{owner[q]}", 1) for q in range(n_subs)])
                hubs.append(hub)
            # one hub per listener (the bytes budget is the hub's), the same pushes to each
            lis = [hubs[k].listen(f"n{heard[k]}", [], cursors[k], 1, False, current_seq=1,
                                  max_batch=budgets[k][0]) for k in range(3)]
            for ops, drains in plan:
                for hub in hubs:
                    hub.push(_chunk(ops))
                for k in drains:
                    out.append((k, _items(lis[k].next_batch(0))))
            for k in range(3):
                while lis[k].wake.is_set():
                    out.append((k, _items(lis[k].next_batch(0))))
                lis[k].close()
        ml.close()
        return out, [[a.tolist() for a in h.backlog(list(range(n_subs)))] for h in hubs]

    assert run("compiled") == run("by name") == run("every row")


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_catching_up_from_the_log_hands_out_the_same_either_way(
        tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    """Listeners catching up from the match log (a ring of a few hundred bytes, so every chunk
    but the newest is read back; AFFECTED rows, some subscriptions PAIRS, budgets of any size,
    drains at any point, cursors of any value, several subscribers): taking a read-back chunk's
    rows in one compiled pass (pick, count as sent, advance) and through the vectorised steps
    hand out the same items in the same order and leave the same backlog. Each hub has two
    listeners of the subscriber, so a message counts as sent once, whoever takes it first."""
    n_subs = 300
    names, owner, plan = _draw_plan(data, n_subs, names=3, pairs_subs=3, pushes=5, listeners=4)
    budgets = [(data.draw(st.integers(1, 300)), data.draw(st.integers(1, 20_000)))
               for _ in range(2)]
    cursors, heard = _draw_listeners(data, n_subs, names, 2)

    def run(how: str) -> tuple[list, list]:
        out: list = []
        hubs = []
        with _reads(how):
            for k in range(2):  # one hub and match log per listener (the bytes budget is the hub's)
                ml = MatchLog(tmp_path_factory.mktemp("ml"), log_seq=0, sync=False)
                hub = DeliveryHub(boot_seq=0, store=ml, listener_bytes=budgets[k][1],
                                  buffer_bytes=200)
                hub.add_subscriptions([(q, f"n{owner[q]}", 1) for q in range(n_subs)])
                hubs.append((hub, ml))
            lis = [hubs[k % 2][0].listen(f"n{heard[k % 2]}", [], cursors[k % 2] if k < 2 else {}, 1,
                                         False, current_seq=1, max_batch=budgets[k % 2][0])
                   for k in range(4)]
            for ops, drains in plan:
                for hub, ml in hubs:
                    ch = _chunk(ops)
                    ml.append(ch.first_seq, ch.last_seq, encode(ch.columns()))
                    hub.push(ch)
                for k in drains:
                    out.append((k, _items(lis[k].next_batch(0))))
            for k in range(4):
                while lis[k].wake.is_set():
                    out.append((k, _items(lis[k].next_batch(0))))
                lis[k].close()
        backlog = [[a.tolist() for a in h.backlog(list(range(n_subs)))] for h, _ in hubs]
        for _, ml in hubs:
            ml.close()
        return out, backlog

    assert run("compiled") == run("by name")


@pytest.mark.parametrize("how", ["compiled", "by name"])
def test_a_message_read_back_twice_counts_as_sent_once(tmp_path: Path, how: str) -> None:
    """Two listeners of one subscriber catching up from the match log, one message at a time:
    the second taking what the first already took leaves the backlog as it was."""
    ml = MatchLog(tmp_path, log_seq=0, sync=False)
    hub = DeliveryHub(boot_seq=0, store=ml, buffer_bytes=100)
    hub.add_subscriptions([(0, "a", 1), (1, "a", 1)])
    for seq in range(2, 6):
        ch = _one(seq, (0, 1))
        ml.append(ch.first_seq, ch.last_seq, encode(ch.columns()))
        hub.push(ch)
    with _reads(how):
        first, second = (hub.listen("a", [], {}, 1, False, current_seq=1, max_batch=2)
                         for _ in range(2))
        taken = []
        for lis in (first, second):
            items: list = []
            while not any(isinstance(b, MatchBlock) for b in items):  # (the first may switch to disk)
                items += lis.next_batch(0)
            taken.append([(int(q), int(s)) for b in items if isinstance(b, MatchBlock)
                          for q, s in zip(b.sids, b.seqs, strict=True)])
            assert hub.backlog([0, 1])[0].tolist() == [3, 3]
        assert taken[0] == taken[1] == [(0, 2), (1, 2)]
        first.close()
        second.close()
    ml.close()


def _draw_plan(data: st.DataObject, n_subs: int, names: int, pairs_subs: int, pushes: int,
               listeners: int) -> tuple[int, list[int], list]:
    """Subscribers (up to ``names``), each subscription's owner, and the pushes: ``(ops, the
    listeners that drain after the push)``, every operation hitting any subscriptions, PAIRS
    ones (up to ``pairs_subs`` of them) with two pairs each."""
    n_names = data.draw(st.integers(1, names))
    owner = data.draw(st.lists(st.integers(0, n_names - 1), min_size=n_subs, max_size=n_subs))
    with_pairs = set(data.draw(st.lists(st.integers(0, n_subs - 1), max_size=pairs_subs)))
    plan = []
    seq = 1
    for _ in range(data.draw(st.integers(1, pushes))):
        ops = []
        for _ in range(data.draw(st.integers(1, 3))):
            hit = data.draw(st.lists(st.integers(0, n_subs - 1), min_size=1, max_size=n_subs,
                                     unique=True))
            seq += 1
            ops.append((seq, {q: (2 if q in with_pairs else 0) for q in hit}))
        plan.append((ops, data.draw(st.lists(st.integers(0, listeners - 1), max_size=4))))
    return n_names, owner, plan


def _draw_listeners(data: st.DataObject, n_subs: int, names: int, k: int
                    ) -> tuple[list[dict[int, int]], list[int]]:
    """``k`` listeners' starting cursors (a few subscriptions, any value) and subscribers."""
    cursors = [{q: data.draw(st.integers(0, 6)) for q in
                data.draw(st.lists(st.integers(0, n_subs - 1), max_size=5))} for _ in range(k)]
    return cursors, [data.draw(st.integers(0, names - 1)) for _ in range(k)]


def _items(items: list) -> list:
    return [(type(it).__name__, it.sids.tolist(), it.seqs.tolist(), it.signs.tolist(),
             it.counts.tolist(), it.ops.tolist(),
             None if it.pcols is None else it.pcols.offsets.tolist())
            if isinstance(it, MatchBlock) else repr(it) for it in items]


# ---- durable: gaps, restart ------------------------------------------------------------------


def _one(seq: int, sids: tuple[int, ...] = (0,)) -> Chunk:
    return _chunk([(seq, {s: 0 for s in sids})])


def _drain_all(lis: Listener) -> tuple[list[GapItem], list[tuple[int, int]]]:
    gaps: list[GapItem] = []
    got: list[tuple[int, int]] = []
    while lis.wake.is_set():
        for it in lis.next_batch(0):
            if isinstance(it, GapItem):
                gaps.append(it)
            elif isinstance(it, MatchBlock):
                got += list(zip(it.sids.tolist(), it.seqs.tolist(), strict=True))
    return gaps, got


@pytest.mark.parametrize("ring", ["holds the gap", "starts after the gap"])
def test_a_retention_gap_recounts_from_the_ring(tmp_path: Path, ring: str) -> None:
    """Retention drops messages; pending changes only once a listener of q is told. When the
    ring reaches back to the gap the recount is exact; otherwise q's messages on disk before the
    ring no longer count (documented undercount) and the count is exact again from memory."""
    ml = MatchLog(tmp_path, log_seq=0, retention_bytes=4096, segment_bytes=512, sync=False)
    hub = DeliveryHub(boot_seq=0, store=ml, listener_bytes=1 << 20,
                      buffer_bytes=1 << 30 if ring == "holds the gap" else 1000)
    ml.on_drop = hub.dropped
    hub.add_subscriptions([(0, "a", 1), (1, "b", 2)])
    for seq in range(3, 203):
        ch = _one(seq, (0, 1) if seq % 2 else (0,))
        ml.append(ch.first_seq, ch.last_seq, encode(ch.columns()))
        hub.push(ch)
    x = ml.retained_from - 1
    assert x > 2, "retention dropped something"
    assert hub.backlog([0, 1])[0].tolist() == [200, 100]  # nobody was told yet
    lis = hub.listen("a", [], {}, 0, False, current_seq=202, max_batch=1)
    items: list = []
    while not any(isinstance(b, MatchBlock) for b in items):  # (the first may switch to disk)
        items += lis.next_batch(0)
    assert isinstance(items[0], GapItem) and (items[0].from_seq, items[0].to_seq) == (1, x)
    sent = max(b.seqs.max() for b in items if isinstance(b, MatchBlock))
    edge = hub._evicted_upto
    if ring == "holds the gap":
        assert edge <= x
        assert hub.backlog([0])[0][0] == 202 - max(x, sent)  # exact
    else:
        assert edge > x
        in_ring = 202 - edge  # q's messages still in memory only
        assert hub.backlog([0])[0][0] == in_ring
        assert hub.backlog([0])[1][0] == ROW_BYTES * in_ring
    gaps, got = _drain_all(lis)
    assert gaps == [] and [q for _, q in got] == list(range(sent + 1, 203))
    assert hub.backlog([0, 1])[0].tolist() == [0, 100]  # b was never told: unchanged
    lis.close()
    ml.close()


def test_messages_from_before_a_restart_never_count(tmp_path: Path) -> None:
    ml = MatchLog(tmp_path, log_seq=0, sync=False)
    for seq in range(2, 11):  # the previous run
        ml.append(seq, seq, encode(_one(seq).columns()))
    hub = DeliveryHub(boot_seq=10, store=ml, buffer_bytes=1 << 20)
    hub.add_subscription(0, "a", registered_seq=1)
    assert [a.tolist() for a in hub.backlog([0])] == [[0], [0], [0]]
    lis = hub.listen("a", [], {}, 0, False, current_seq=10)
    _drain_all(lis)
    # read back from disk: newest is known again, nothing was pending
    assert [a.tolist() for a in hub.backlog([0])] == [[0], [0], [10]]
    for seq in (11, 12):
        ch = _one(seq)
        ml.append(seq, seq, encode(ch.columns()))
        hub.push(ch)
    assert [a.tolist() for a in hub.backlog([0])] == [[2], [2 * ROW_BYTES], [12]]
    assert [q for _, q in _drain_all(lis)[1]] == [11, 12]
    assert [a.tolist() for a in hub.backlog([0])] == [[0], [0], [12]]
    lis.close()
    ml.close()


def _logged(path: Path, records: int, ops_each: int) -> tuple[MatchLog, DeliveryHub, int, list[int]]:
    """A durable hub whose ring keeps only the newest chunk, with ``records`` match-log records
    of ``ops_each`` operations affecting every subscription, and a spy on the log's reads:
    ``(log, hub, last seq, the after-seq of each read)``."""
    ml = MatchLog(path, log_seq=0, sync=False)
    hub = DeliveryHub(boot_seq=0, store=ml, buffer_bytes=1)
    hub.add_subscriptions([(s, "a", 1) for s in range(N_SUBS)])
    seq = 1
    for _ in range(records):
        ch = _chunk([(seq + i, {s: 0 for s in range(N_SUBS)}) for i in range(1, ops_each + 1)])
        seq += ops_each
        ml.append(ch.first_seq, ch.last_seq, encode(ch.columns()))
        hub.push(ch)
    reads: list[int] = []
    read = ml.read
    ml.read = lambda after, upto, nbytes=8 << 20: (reads.append(after), read(after, upto, nbytes))[1]  # type: ignore[method-assign]
    return ml, hub, seq, reads


def test_a_record_larger_than_a_drain_is_read_from_the_match_log_once(tmp_path: Path) -> None:
    """A listener catching up from the match log through a record that holds many drains'
    worth of messages reads and decodes it once and resumes at its row: every message once,
    in seq order, and the backlog counts every message it was handed."""
    ml, hub, seq, reads = _logged(tmp_path, 3, 40)  # three records of 40 operations
    lis = hub.listen("a", [], {}, 0, False, current_seq=seq, max_batch=7)
    gaps, got = _drain_all(lis)
    assert gaps == []
    assert got == [(s, q) for q in range(2, seq + 1) for s in range(N_SUBS)]
    # one read per record left the ring (the newest stays in it), not one per drain
    assert reads == [0, 41], reads
    assert hub.backlog(list(range(N_SUBS)))[0].tolist() == [0] * N_SUBS
    lis.close()
    ml.close()


def _interleaved(path: Path, monkeypatch: pytest.MonkeyPatch, parts_bytes: int
                 ) -> tuple[list[tuple[int, int]], list[tuple[int, int]], list[tuple[int, int]], int]:
    """Two listeners catching up through four records of 120 messages, b ahead of a, their
    drains interleaved: ``(want, a's messages, b's messages, match-log reads)``."""
    from hotjoin.server import delivery

    monkeypatch.setattr(delivery, "PARTS_BYTES", parts_bytes)
    ml, hub, seq, reads = _logged(path, 4, 30)
    a = hub.listen("a", [], {}, 0, False, current_seq=seq, max_batch=11)
    b = hub.listen("a", [], {}, 0, False, current_seq=seq, max_batch=7)
    got: dict[int, list[tuple[int, int]]] = {0: [], 1: []}

    def drain(k: int, lis: Listener) -> None:
        for it in lis.next_batch(0):
            assert not isinstance(it, GapItem)
            if isinstance(it, MatchBlock):
                got[k] += list(zip(it.sids.tolist(), it.seqs.tolist(), strict=True))

    for _ in range(4):  # b runs ahead of a: they stop inside different records
        drain(1, b)
    while a.wake.is_set() or b.wake.is_set():
        for k, lis in enumerate((a, b)):
            if lis.wake.is_set():
                drain(k, lis)
    a.close()
    b.close()
    ml.close()
    return [(s, q) for q in range(2, seq + 1) for s in range(N_SUBS)], got[0], got[1], len(reads)


def test_listeners_reading_records_in_parts_get_every_message_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record a listener stopped inside is kept for its next drain (up to ``PARTS_BYTES``,
    the newest always); one dropped for want of room is read again and resumed at its row.
    Either way each listener gets every message once, in seq order."""
    want, a, b, kept = _interleaved(tmp_path / "kept", monkeypatch, 64 << 20)
    assert a == want and b == want
    want, a, b, dropped = _interleaved(tmp_path / "dropped", monkeypatch, 1)
    assert a == want and b == want
    assert kept < dropped, (kept, dropped)


# ---- per subscriber ---------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(names=st.lists(st.sampled_from(["", "a", "b", "c"]), min_size=1, max_size=8),
       pushes=st.lists(st.lists(st.integers(0, 7), min_size=1, max_size=4, unique=True),
                       max_size=12),
       committed=st.dictionaries(st.integers(0, 9), st.integers(0, 20), max_size=8),
       gone=st.sets(st.integers(0, 7), max_size=3), take=st.integers(0, 30))
def test_subscriber_backlog_is_the_sum_of_its_subscriptions(
        names: list[str], pushes: list[list[int]], committed: dict[int, int], gone: set[int],
        take: int) -> None:
    """Against a loop over subscriptions: messages and bytes summed, lag the largest
    max(0, newest − committed) of the committed ones (None without), unsubscribed left out."""
    hub = DeliveryHub(boot_seq=0, capacity=3)
    n = len(names)
    hub.add_subscriptions([(sid, name, 1) for sid, name in enumerate(names)])
    seq = 1
    for sids in pushes:
        seq += 1
        rows = [s for s in sids if s < n]
        if rows:
            hub.push(_one(seq, tuple(rows)))
    lis = hub.listen("", list(range(n)), {}, 0, False, current_seq=seq, max_batch=max(take, 1))
    if take:
        lis.next_batch(0)
    for sid in gone:
        if sid < n:
            seq += 1
            hub.remove_subscription(sid, seq)
    got = hub.subscriber_backlog(committed)
    want: dict[str, list] = {}
    pend, nbytes, newest = hub.backlog(list(range(n)))
    for sid, name in enumerate(names):
        if sid in gone:
            continue
        w = want.setdefault(name, [0, 0, None])
        w[0] += int(pend[sid])
        w[1] += int(nbytes[sid])
        if sid in committed:
            lag = max(0, int(newest[sid]) - committed[sid])
            w[2] = lag if w[2] is None else max(w[2], lag)
    assert got == {k: tuple(v) for k, v in want.items()}
    lis.close()


# ---- compiled passes load at start-up --------------------------------------------------------


def _delivery_workload(path: str) -> None:
    """Pushes with and without pairs, drains from the ring and from the match log, the
    repeated-field encoding of a delivered block."""
    from hotjoin.server.convert import match_batch_columns

    ml = MatchLog(Path(path), log_seq=0, sync=False)
    hub = DeliveryHub(boot_seq=0, store=ml, buffer_bytes=600)
    hub.add_subscriptions([(s, "a", 1) for s in range(N_SUBS)])
    lis = hub.listen("a", [], {}, 0, False, current_seq=1, max_batch=3)
    for seq in range(2, 30):
        ch = _chunk([(seq, {s: (seq % 3 if s in PAIRS_SUBS else 0) for s in range(N_SUBS)})])
        ml.append(ch.first_seq, ch.last_seq, encode(ch.columns()))
        hub.push(ch)
        if seq % 7 == 0:
            _drain_all(lis)
    _drain_all(lis)
    _drain_all(hub.listen("a", [], {}, 0, False, current_seq=29))  # from the match log
    match_batch_columns(ch.sids, ch.seqs, ch.signs, ch.counts, ch.ops)
    # a columnar batch's chunk (as ``MessageBuilder.of_batch`` makes it), large enough for a
    # listener by name to pick its rows in one pass, each drain encoded as Listen responses
    # (from the ring, and read back from the match log, where the columns are read-only views)
    ml2 = MatchLog(Path(path) / "columns", log_seq=0, sync=False)
    hub2 = DeliveryHub(boot_seq=0, store=ml2, buffer_bytes=1 << 16)
    hub2.add_subscriptions([(s, "a", 1) for s in range(N_SUBS)])
    live = hub2.listen("a", [], {}, 0, False, current_seq=1)
    first = 2
    for _ in range(6):
        n = 300
        ev = np.repeat(np.arange(n), N_SUBS)
        table = OpColumns(np.array(["R", "S"] * (n // 2), dtype=object),
                          np.array([f"e{k}" for k in range(n)], dtype=object), 7)
        big = Chunk(np.tile(np.arange(N_SUBS, dtype=np.int64), n), first + ev,
                    np.ones(ev.shape[0], np.int8), np.ones(ev.shape[0], np.int64),
                    ev.astype(np.int32), table, None).seal(first, first + n - 1)
        ml2.append(big.first_seq, big.last_seq, encode(big.columns()))
        hub2.push(big)
        first += n
        _drain_encoded(live)
    _drain_encoded(hub2.listen("a", [], {}, 0, False, current_seq=first - 1))


def _drain_encoded(lis: Listener) -> None:
    from hotjoin.server.service import encode_items, listen_response_bytes

    while lis.wake.is_set():
        for r in encode_items(lis.next_batch(0), columnar=True):
            listen_response_bytes(r)


def _server_overloads(warm: bool, path: Path) -> dict[str, int]:
    """In a fresh interpreter: the server's warm-up (or not), then the delivery workload; the
    server's kernels that gained overloads during the workload."""
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from numba.core.dispatcher import Dispatcher\n"
        "import test_delivery as T\n"
        "from hotjoin.server import convert, delivery, match_columns\n"
        "from hotjoin.server.kernels import warm_up_server\n"
        f"if {warm!r}: warm_up_server()\n"
        "def kernels():\n"
        "    return {f'{m.__name__}.{a}': len(v.overloads)\n"
        "            for m in (convert, delivery, match_columns)\n"
        "            for a, v in vars(m).items() if isinstance(v, Dispatcher)}\n"
        "before = kernels()\n"
        f"T._delivery_workload({str(path)!r})\n"
        "print(json.dumps({k: n - before[k] for k, n in kernels().items() if n > before[k]}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_after_the_servers_warm_up_delivery_loads_no_kernel(tmp_path: Path) -> None:
    assert _server_overloads(True, tmp_path / "warm") == {}
    cold = _server_overloads(False, tmp_path / "cold")  # the control: without it, all load
    assert set(cold) >= {"hotjoin.server.delivery._push_kernel",
                         "hotjoin.server.delivery._sent_disk_kernel",
                         "hotjoin.server.delivery._advance_kernel",
                         "hotjoin.server.delivery._evicted_kernel",
                         "hotjoin.server.delivery._pick_kernel",
                         "hotjoin.server.match_columns._affected_wire_kernel",
                         "hotjoin.server.convert._encode_batch_columns"}, cold


def test_drains_on_many_threads_while_pushing_get_every_message_once(tmp_path: Path) -> None:
    """The delivery kernels run without the interpreter lock (``UNLOCKED``; the hub's lock
    guards their arrays): four listeners by name drain on threads of their own while another
    thread pushes large chunks (the compiled pick path) and a late listener catches up from the
    match log. Each gets every message of its subscriber once, in seq order per subscription,
    and nothing stays pending."""
    import threading

    n_subs, names, chunks, events = 400, 4, 30, 200
    ml = MatchLog(tmp_path / "ml", log_seq=0, sync=False)
    hub = DeliveryHub(boot_seq=0, store=ml, buffer_bytes=1 << 18)
    hub.add_subscriptions([(q, f"n{q % names}", 1) for q in range(n_subs)])
    lis = [hub.listen(f"n{k}", [], {}, 1, False, current_seq=1) for k in range(names)]
    rng = np.random.default_rng(7)
    want: dict[int, list[int]] = {q: [] for q in range(n_subs)}
    got: list[list[tuple[int, int]]] = [[] for _ in range(names)]
    done = threading.Event()

    def push() -> None:
        first = 2
        for _ in range(chunks):
            ev = np.repeat(np.arange(events), 5)
            sids = rng.integers(0, n_subs, ev.shape[0])
            keep = np.unique(ev * n_subs + sids, return_index=True)[1]
            ev, sids = ev[keep], sids[keep]
            table = OpColumns(np.array(["S"] * events, dtype=object),
                              np.array([f"e{first + k}" for k in range(events)], dtype=object), 1)
            ch = Chunk(sids.astype(np.int64), first + ev, np.ones(ev.shape[0], np.int8),
                       np.ones(ev.shape[0], np.int64), ev.astype(np.int32), table,
                       None).seal(first, first + events - 1)
            for q, s in zip(ch.sids.tolist(), ch.seqs.tolist(), strict=True):
                want[q].append(s)
            ml.append(ch.first_seq, ch.last_seq, encode(ch.columns()))
            hub.push(ch)
            first += events
        done.set()

    def drain(k: int) -> None:
        while True:
            finished = done.is_set()
            for it in lis[k].next_batch(0.01):
                if isinstance(it, MatchBlock):
                    got[k] += list(zip(it.sids.tolist(), it.seqs.tolist(), strict=True))
            if finished and not lis[k].wake.is_set():
                return

    threads = [threading.Thread(target=push)] + [threading.Thread(target=drain, args=(k,))
                                                  for k in range(names)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    late = hub.listen("n0", [], {}, 1, False, current_seq=2 + chunks * events)
    caught: list[tuple[int, int]] = []
    while late.wake.is_set():
        for it in late.next_batch(0):
            if isinstance(it, MatchBlock):
                caught += list(zip(it.sids.tolist(), it.seqs.tolist(), strict=True))
    for k in range(names):
        per: dict[int, list[int]] = {}
        for q, s in got[k]:
            per.setdefault(q, []).append(s)
        assert per == {q: v for q, v in want.items() if q % names == k and v}, k
    assert sorted(caught) == sorted((q, s) for q, v in want.items() if q % names == 0 for s in v)
    pending = hub.backlog(list(range(n_subs)))[0]
    assert int(pending.sum()) == 0
    for x in [*lis, late]:
        x.close()
    ml.close()
