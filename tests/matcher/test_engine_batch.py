"""The Engine's columnar batch calls (server fast paths) against their one-object-at-a-time forms."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from hotjoin.matcher import BandJoin, Engine, Event, Range, SelectJoin, WindowJoin
from hotjoin.matcher.errors import DuplicateEventError


def _subs(rnd: random.Random, n: int) -> list:
    out = []
    for i in range(n):
        a = sorted(rnd.uniform(0, 10) for _ in range(2))
        c = sorted(rnd.uniform(0, 10) for _ in range(2))
        kind = i % 3
        if kind == 0:
            out.append(SelectJoin(Range(*a), Range(*c)))
        elif kind == 1:
            out.append(BandJoin(Range(-1.5, 1.5), Range(*a), Range(*c)))
        else:
            out.append(WindowJoin(Range(*a), Range(*c), w=rnd.randint(0, 20)))
    return out


def _events(rnd: random.Random, n: int, prefix: str) -> list[Event]:
    return [Event(rnd.choice("RS"), f"{prefix}{i}", float(rnd.randint(0, 12)), round(rnd.uniform(0, 10), 2),
                  rnd.randint(0, 50), b"p%d" % i if i % 4 == 0 else b"") for i in range(n)]


def _restore(engine: Engine, evs: list[Event], first_seq: int) -> None:
    for side in "RS":
        mine = [(e, first_seq + i) for i, e in enumerate(evs) if e.side == side]
        engine.restore_event_columns(
            side, [e.id for e, _ in mine], np.array([e.key for e, _ in mine]),
            np.array([e.value for e, _ in mine]), np.array([e.time for e, _ in mine], dtype=np.int64),
            np.array([s for _, s in mine], dtype=np.int64), [e.payload for e, _ in mine])
    engine.restore_clock(first_seq + len(evs) - 1, max(e.time for e in evs))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_restore_event_columns_equals_publish_many_without_matching(seed: int) -> None:
    """Replay as columns reaches the state ``publish_many(match=False)`` reaches: later operations
    deliver the same pairs with the same seqs (stored tuples keep their original seqs)."""
    rnd = random.Random(seed)
    subs = _subs(rnd, 30)
    evs = _events(rnd, 300, "e")
    ref, got = Engine(lateness=100), Engine(lateness=100)
    for e in (ref, got):
        e.subscribe_many(subs[:20])
    ref.publish_many(evs, match=False)
    _restore(got, evs, 21)
    assert (ref.seq, ref.watermark) == (got.seq, got.watermark)
    for side in "RS":
        assert sorted((e.id, e.key, e.value, e.time, e.payload, s) for e, s in ref.tables[side].events()) == \
            sorted((e.id, e.key, e.value, e.time, e.payload, s) for e, s in got.tables[side].events())
    got.check_invariants()
    for e in (ref, got):
        e.subscribe_many(subs[20:], snapshot=True)
    for sid in range(len(subs)):
        assert Counter(ref.result(sid)) == Counter(got.result(sid))
    later = _events(random.Random(seed + 10), 100, "x")
    for ev in later:
        a, b = ref.publish_columnar(ev), got.publish_columnar(ev)
        assert sorted(zip(a.subscription_ids.tolist(), a.r_ids, a.s_ids, strict=True)) == \
            sorted(zip(b.subscription_ids.tolist(), b.r_ids, b.s_ids, strict=True))
    for ev in evs[:50]:
        a, b = ref.delete_affected(ev.side, ev.id), got.delete_affected(ev.side, ev.id)
        assert dict(zip(a.subscription_ids.tolist(), a.counts.tolist(), strict=True)) == \
            dict(zip(b.subscription_ids.tolist(), b.counts.tolist(), strict=True))
    got.check_invariants()


def test_restore_event_columns_validates_all_or_nothing() -> None:
    e = Engine()
    e.restore_event_columns("S", ["a"], np.array([1.0]), np.array([0.0]), np.array([0]), np.array([1]))
    with pytest.raises(DuplicateEventError):
        e.restore_event_columns("S", ["b", "a"], np.array([1.0, 2.0]), np.zeros(2), np.zeros(2), np.arange(2))
    with pytest.raises(ValueError):
        e.restore_event_columns("S", ["c", "c"], np.array([1.0, 2.0]), np.zeros(2), np.zeros(2), np.arange(2))
    with pytest.raises(ValueError):
        e.restore_event_columns("S", ["d"], np.array([np.nan]), np.zeros(1), np.zeros(1), np.arange(1))
    with pytest.raises(ValueError):
        e.restore_event_columns("S", ["d", "e"], np.array([1.0]), np.zeros(1), np.zeros(1), np.arange(1))
    assert sorted(e.tables["S"].slot_of) == ["a"]
    e.check_invariants()
