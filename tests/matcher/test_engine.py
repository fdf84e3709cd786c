"""The Engine API (``matcher/engine.py``): output forms agree, errors leave no trace, options are
validated."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from hotjoin.matcher import (
    BandJoin,
    BatchError,
    DuplicateEventError,
    Engine,
    Event,
    LateEventError,
    Range,
    SelectJoin,
    UnknownEventError,
    UnknownSubscriptionError,
)
from hotjoin.matcher.joins.band import BAND_STRATEGIES

STRATS = [{"band": s} for s in BAND_STRATEGIES]


def _state(e: Engine) -> tuple:
    """Everything observable about an engine's state."""
    return (e.seq, e.watermark, sorted(e.tables["R"].slot_of), sorted(e.tables["S"].slot_of),
            sorted(e.subs), [Counter(e.result(s)) for s in sorted(e.subs)])


def _loaded(strategy: dict[str, str], **kw) -> Engine:
    e = Engine(strategy=strategy, options={"alpha": 0.3}, **kw)
    e.subscribe(BandJoin(b=Range(-1, 1)))
    e.subscribe(BandJoin(b=Range(0, 0), a=Range(0, 5)))
    e.subscribe(BandJoin(b=Range(None, 2), c=Range(3, None)), snapshot=True)
    for i in range(6):
        e.publish(Event("S", f"s{i}", float(i), float(i), 10 + i))
    return e


@pytest.mark.parametrize("strategy", STRATS, ids=BAND_STRATEGIES)
def test_three_output_forms_agree(strategy: dict[str, str]) -> None:
    a, b, c = _loaded(strategy), _loaded(strategy), _loaded(strategy)
    ev = Event("R", "r1", 2.0, 1.0, 20)
    pairs = Counter(a.publish(ev))
    cols = b.publish_columnar(ev)
    aff = c.publish_affected(ev)
    assert pairs and pairs == Counter(cols.deliveries())
    per_sub = Counter(d.subscription_id for d in pairs.elements())
    assert dict(zip(aff.subscription_ids.tolist(), aff.counts.tolist(), strict=True)) == per_sub
    # deletes: same agreement, negative signs
    dl = Counter(a.delete("S", "s2"))
    dc = b.delete_columnar("S", "s2")
    da = c.delete_affected("S", "s2")
    assert all(d.sign == -1 for d in dl) and dl == Counter(dc.deliveries())
    lost = Counter(d.subscription_id for d in dl.elements())
    assert dict(zip(da.subscription_ids.tolist(), da.counts.tolist(), strict=True)) == \
        {q: -n for q, n in lost.items()}


@pytest.mark.parametrize("strategy", STRATS, ids=BAND_STRATEGIES)
def test_rejections_change_nothing(strategy: dict[str, str]) -> None:
    e = _loaded(strategy, lateness=2)
    before = _state(e)
    with pytest.raises(DuplicateEventError):
        e.publish(Event("S", "s1", 9.0, 9.0, 30))
    with pytest.raises(LateEventError):
        e.publish(Event("R", "late", 1.0, 1.0, 12))  # W = 15 - 2 = 13
    with pytest.raises(UnknownEventError):
        e.delete("R", "nope")
    with pytest.raises(ValueError):
        e.delete("X", "s1")
    with pytest.raises(UnknownSubscriptionError):
        e.unsubscribe(99)
    with pytest.raises(ValueError):
        e.publish("not an event")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        e.subscribe(Range(0, 1))  # type: ignore[arg-type]
    assert _state(e) == before
    e.publish(Event("R", "ok", 1.0, 1.0, 13))  # exactly at the watermark: accepted
    assert e.seq == before[0] + 1


def test_validation_messages_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="finite"):
        Event("R", "x", float("nan"), 1.0, 0)
    with pytest.raises(ValueError, match="finite"):
        Range(0, float("inf"))
    with pytest.raises(ValueError, match="empty range"):
        Range(2, 1)
    with pytest.raises(ValueError, match="side"):
        Event("Q", "x", 1.0, 1.0, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty"):
        Event("R", "", 1.0, 1.0, 0)
    with pytest.raises(ValueError, match="lateness"):
        Engine(lateness=-1)
    with pytest.raises(ValueError, match="retention"):
        Engine(retention=-5)
    with pytest.raises(ValueError, match="unknown band-join strategy 'BJ-Nope'"):
        Engine(strategy={"band": "BJ-Nope"})
    with pytest.raises(ValueError, match="unknown subscription kind"):
        Engine(strategy={"bands": "BJ-SSI"})


@pytest.mark.parametrize("strategy", STRATS, ids=BAND_STRATEGIES)
def test_batch_calls_equal_single_calls(strategy: dict[str, str]) -> None:
    subs = [BandJoin(b=Range(-k, k)) for k in range(5)] + [BandJoin(b=Range(1, 3), a=Range(0, 2))]
    events = [Event("S" if i % 3 else "R", f"e{i}", float(i % 4), float(i % 5), i)
              for i in range(40)]
    one = Engine(strategy=strategy, options={"alpha": 0.3})
    many = Engine(strategy=strategy, options={"alpha": 0.3})
    ids_one = [one.subscribe(s) for s in subs]
    ids_many = many.subscribe_many(subs)
    assert ids_one == ids_many and one.seq == many.seq
    out_one = Counter(d for ev in events for d in one.publish(ev))
    out_many = Counter(many.publish_many(events))
    assert out_one and out_one == out_many


def test_publish_many_stops_at_the_first_bad_event_keeping_earlier_ones() -> None:
    e = Engine()
    evs = [Event("R", "a", 1.0, 1.0, 5), Event("R", "a", 2.0, 2.0, 6), Event("R", "b", 1, 1, 7)]
    with pytest.raises(BatchError) as info:
        e.publish_many(evs)
    assert info.value.index == 1 and isinstance(info.value.cause, DuplicateEventError)
    assert "a" in e.tables["R"] and "b" not in e.tables["R"] and e.seq == 1


def test_publish_many_without_matching_restores_state() -> None:
    sub = BandJoin(b=Range(0, 1))
    live, restored = Engine(retention=5), Engine(retention=5)
    sid = live.subscribe(sub)
    assert restored.subscribe(sub) == sid
    evs = [Event("S" if i % 2 else "R", f"x{i}", float(i % 3), 0.0, i) for i in range(30)]
    live.publish_many(evs)
    assert restored.publish_many(evs, match=False) == []
    assert _state(live) == _state(restored)


def test_probe_changes_nothing_and_counts() -> None:
    e = _loaded({"band": "BJ-SSI"})
    before = _state(e)
    assert e.probe("R", 2.0, 1.0, "pairs") == len(e.publish_columnar(Event("R", "p", 2.0, 1.0, 30)))
    e2 = _loaded({"band": "BJ-SSI"})
    n_aff = e2.probe("R", 2.0, 1.0, "identify")
    assert _state(e2) == before
    affected = e2.publish_affected(Event("R", "p", 2.0, 1.0, 30))
    assert n_aff == len(affected) > 0


def test_kinds_are_built_on_first_use() -> None:
    e = Engine()
    assert e.select is None and e.window is None
    assert e.tables["R"].key_index is None  # a band-only topic never builds the key index
    e.subscribe(SelectJoin(a=Range(0, 1)))
    assert e.select is not None and e.window is None
    assert e.tables["R"].key_index is not None and e.seq == 1


def test_stats_report_sizes() -> None:
    e = _loaded({"band": "BJ-SSI"})
    st = e.stats()
    assert st["tuples"] == {"R": 0, "S": 6}
    assert st["subscriptions"]["band"] == 3
    assert st["tau"]["band"] >= 1
    assert e.memory_bytes() > 0
    assert isinstance(e.publish_identify(Event("R", "r", 1.0, 1.0, 40)), np.ndarray)


def test_restore_reproduces_state_with_original_sequence_numbers() -> None:
    live = Engine(strategy={"band": "BJ-SSI"}, retention=4)
    live.subscribe(BandJoin(b=Range(0, 1)))
    gone = live.subscribe(BandJoin(b=Range(5, 6)))
    keep = live.subscribe(BandJoin(b=Range(-1, 0)), snapshot=True)
    for i in range(20):
        live.publish(Event("S" if i % 2 else "R", f"x{i}", float(i % 3), 0.0, i))
    live.unsubscribe(gone)
    restored = Engine(strategy={"band": "BJ-SSI"}, retention=4)
    for sid, sub in sorted(live.subscriptions()):
        restored.restore_subscription(sid, sub, int(live.cols.reg[sid]), bool(live.cols.snap[sid]))
    pairs = [(ev, seq) for t in live.tables.values() for ev, seq in t.events()]
    restored.restore_events([e for e, _ in pairs], [s for _, s in pairs])
    restored.restore_clock(live.seq, 19)
    assert _state(restored) == _state(live)
    ev = Event("R", "new", 1.0, 0.0, 20)
    assert Counter(restored.publish(ev)) == Counter(live.publish(ev))
    assert Counter(restored.delete("S", "x19")) == Counter(live.delete("S", "x19"))
    assert restored.subscribe(BandJoin(b=Range(0, 0))) == live.subscribe(BandJoin(b=Range(0, 0)))
    assert keep in dict(restored.subscriptions())


@pytest.mark.parametrize("many", [False, True], ids=["subscribe", "subscribe_many"])
def test_failed_index_build_is_rolled_back(many: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A subscribe whose index build raises midway (as a histogram rebuild that fails on some
    data) leaves nothing behind: same state, same next id, and the engine keeps matching exactly
    like one that never saw the request."""
    e, ref = _loaded({"band": "BJ-SSI"}), _loaded({"band": "BJ-SSI"})
    before = _state(e)
    name = "add_many" if many else "add"
    real = getattr(e.band, name)

    def half_then_fail(q: object) -> None:
        real(q)  # the index took the subscription(s), then failed
        raise ValueError("index build failed")

    monkeypatch.setattr(e.band, name, half_then_fail)
    subs = [BandJoin(b=Range(-5, 5)), BandJoin(b=Range(0, 1))]
    with pytest.raises(ValueError, match="index build failed"):
        e.subscribe_many(subs) if many else e.subscribe(subs[0])
    monkeypatch.undo()
    assert _state(e) == before
    assert e.subscribe(BandJoin(b=Range(-2, 2))) == ref.subscribe(BandJoin(b=Range(-2, 2)))
    for i in range(4):
        ev = Event("R", f"r{i}", float(i), 1.0, 20 + i)
        assert Counter(e.publish(ev)) == Counter(ref.publish(ev))
    e.unsubscribe(0)
    ref.unsubscribe(0)
    assert _state(e) == _state(ref)
    e.check_invariants()


def test_a_window_join_after_select_joins_and_stored_tuples_matches_the_oracle() -> None:
    """Select joins keep the key index by value only; the first window join adds the by-time
    order from the tuples already stored. Its results equal the oracle's, before and after."""
    import numpy as np
    from engine_harness import multiset

    from hotjoin.matcher import Engine, Event, Range, SelectJoin, WindowJoin
    from hotjoin.matcher.oracle import OracleEngine

    rng = np.random.default_rng(7)
    engines = (Engine(), OracleEngine())
    for e in engines:
        e.subscribe(SelectJoin(Range(0.0, 50.0), Range(10.0, 60.0)))
    t = 0
    for i in range(300):  # stored on both sides, several tuples per key
        side = "S" if i % 3 else "R"
        ev = Event(side, f"{side}{i}", float(rng.integers(0, 20)), float(rng.integers(0, 80)), t)
        t += int(rng.integers(0, 3))
        assert multiset(engines[0].publish(ev)) == multiset(engines[1].publish(ev))
    assert engines[0].tables["S"].key_index.by_time is None
    for e in engines:
        e.subscribe(WindowJoin(Range(0.0, 80.0), Range(0.0, 80.0), w=40))
    assert engines[0].tables["S"].key_index.by_time is not None
    window_pairs = 0
    for i in range(300, 600):
        side = "S" if i % 2 else "R"
        ev = Event(side, f"{side}{i}", float(rng.integers(0, 20)), float(rng.integers(0, 80)), t)
        t += int(rng.integers(0, 3))
        got, want = multiset(engines[0].publish(ev)), multiset(engines[1].publish(ev))
        assert got == want
        window_pairs += sum(n for (sid, _, _, _), n in got.items() if sid == 1)
    assert window_pairs > 100  # the window join did match, old and new tuples
