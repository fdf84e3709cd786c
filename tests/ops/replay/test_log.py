"""Random topic logs for the replay tests, with what each subscription received (the oracle).

``random_log`` plays the server: every operation goes through ``matcher.oracle.OracleEngine``
first, and only the ones it accepts are logged (late and duplicate events take no seq and never
reach an export, as online). Each logged operation's deliveries are recorded with its seq:
publish +1, delete −1, snapshot +1 at registration. The result is written in the export format
(``ops.replay.log.write_export``), optionally *compacted* at a seq: the stored tuples and live
subscriptions at that seq with their original seqs, then the later operations only.

Knobs cover: every kind (interval joins with interval events of random lengths among points, on
equal keys and on key bands), deletes, disorder within lateness (and late
events that are rejected), retention, a hot key holding most events, subscribe / unsubscribe
inside the log (bulk runs, snapshot), keys on which IEEE subtraction is inexact (0.1, 0.2, 0.3).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hotjoin.matcher.model import (
    ALLEN_RELATIONS,
    BandJoin,
    Event,
    IntervalJoin,
    Range,
    SelectJoin,
    Subscription,
    WindowJoin,
)
from hotjoin.matcher.oracle import OracleEngine
from hotjoin.ops.replay.log import TopicOptions, write_export
from hotjoin.ops.replay.sharding import ShardPlan

Row = tuple[int, int, str, str, int]  # subscription_id, sign, r_id, s_id, seq

IEEE_KEYS = (0.0, 0.1, 0.2, 0.3, 0.30000000000000004, 0.5, 1.0, 1.1, 2.2, 3.3, -0.0, 7.0)
INT_KEYS = tuple(float(k) for k in range(8))
BAND_BOUNDS = (-0.2, -0.1, 0.0, 0.1, 0.2, 0.30000000000000004, 1.0, 1.1, 2.2)


@dataclass
class GeneratedLog:
    """An export's columns plus the oracle's deliveries."""

    options: TopicOptions
    events: dict[str, list[Any]] = field(default_factory=lambda: {
        c: [] for c in ("seq", "op", "side", "id", "key", "value", "time", "end")})
    subs: dict[int, dict[str, Any]] = field(default_factory=dict)
    expected: list[Row] = field(default_factory=list)
    affected: set[int] = field(default_factory=set)
    compact_state: tuple[int, list[tuple[Event, int]], list[int]] | None = None

    def write(self, out_dir: Path, compacted: bool = False) -> Path:
        """Write the export; ``compacted``: as a log compacted at the recorded cut."""
        events = self.events
        subs = dict(self.subs)
        options = self.options
        if compacted:
            assert self.compact_state is not None
            cut, stored, live = self.compact_state
            keep = [i for i, s in enumerate(events["seq"]) if s > cut]
            events = {c: [v[i] for i in keep] for c, v in events.items()}
            for ev, seq in stored:
                for c, v in (("seq", seq), ("op", "publish"), ("side", ev.side), ("id", ev.id),
                             ("key", ev.key), ("value", ev.value), ("time", ev.time),
                             ("end", None if ev.end == ev.time else ev.end)):
                    events[c].append(v)
            subs = {sid: row for sid, row in subs.items()
                    if row["registered_seq"] > cut or sid in live}
            options = TopicOptions(options.name, options.lateness, options.retention,
                                   options.strategy, cut)
        cols = ("subscription_id", "kind", "a_lo", "a_hi", "b_lo", "b_hi", "c_lo", "c_hi", "w",
                "delivery", "snapshot", "subscriber", "registered_seq", "unsubscribed_seq",
                "ss_lo", "ss_hi", "se_lo", "se_hi", "es_lo", "es_hi", "ee_lo", "ee_hi", "preset")
        sub_cols = {c: [subs[s][c] for s in sorted(subs)] for c in cols}
        return write_export(out_dir, options, events, sub_cols)

    def expected_after(self, cut: int | None = None) -> Counter[Row]:
        return Counter(r for r in self.expected if cut is None or r[4] > cut)


def _range(rnd: random.Random, lo: float, hi: float) -> Range:
    a, b = sorted(round(rnd.uniform(lo, hi), 1) for _ in range(2))
    return Range(None if rnd.random() < 0.15 else a, None if rnd.random() < 0.15 else b)


def _sub(rnd: random.Random, kind: str) -> Subscription:
    a, c = _range(rnd, 0, 10), _range(rnd, 0, 10)
    if kind == "band":
        b0, b1 = sorted(rnd.choice(BAND_BOUNDS) for _ in range(2))
        if rnd.random() < 0.5:  # integer-ish band ends too
            b0, b1 = sorted(float(rnd.randint(-3, 3)) for _ in range(2))
        return BandJoin(b=Range(b0, b1), a=a, c=c)
    if kind == "select":
        return SelectJoin(a=a, c=c)
    if kind == "interval":
        b = Range(0, 0) if rnd.random() < 0.5 else Range(*sorted(rnd.choice(BAND_BOUNDS)
                                                                   for _ in range(2)))
        r = rnd.random()
        if r < 0.5:
            return IntervalJoin.allen(rnd.choice(ALLEN_RELATIONS), b=b, a=a, c=c)
        if r < 0.8:
            name = rnd.choice(("start_preceding", "end_following", "before", "left_overlap",
                               "during"))
            return IntervalJoin.iseql(name, delta=rnd.randint(1, 5), eps=rnd.randint(0, 5),
                                      b=b, a=a, c=c)
        lo = rnd.randint(-5, 3)
        return IntervalJoin(b, a, c, ss=Range(lo, lo + rnd.randint(0, 6)),
                            ee=Range(None, rnd.randint(-2, 8)))
    return WindowJoin(a=a, c=c, w=rnd.randint(0, 6))


def _sub_row(sid: int, sub: Subscription, snapshot: bool, delivery: str, seq: int) -> dict[str, Any]:
    b = sub.b if isinstance(sub, BandJoin | IntervalJoin) else Range()
    iv = isinstance(sub, IntervalJoin)
    ends = {f"{e}_{x}": getattr(getattr(sub, e), x) if iv else None
            for e in ("ss", "se", "es", "ee") for x in ("lo", "hi")}
    return {"subscription_id": sid, "kind": sub.kind, "a_lo": sub.a.lo, "a_hi": sub.a.hi,
            "b_lo": b.lo, "b_hi": b.hi, "c_lo": sub.c.lo, "c_hi": sub.c.hi,
            "w": sub.w if isinstance(sub, WindowJoin) else None, "delivery": delivery,
            "snapshot": snapshot, "subscriber": "t", "registered_seq": seq,
            "unsubscribed_seq": None, **ends, "preset": sub.preset if iv else None}


def random_log(seed: int, kinds: tuple[str, ...] = ("band", "select", "window"), n_ops: int = 150,
               lateness: int = 2, retention: int | None = None, hot: float = 0.0,
               keys: tuple[float, ...] | None = None, cut_at: float | None = None,
               id_pool: int = 25) -> GeneratedLog:
    """A random log of about ``n_ops`` attempted operations (see the module docstring).

    ``hot``: probability that an event takes the hot key ``keys[1]``; ``cut_at``: fraction of the
    operations after which the state is recorded for a compacted export.
    """
    rnd = random.Random(seed)
    if keys is None:
        keys = IEEE_KEYS if "band" in kinds else INT_KEYS
    oracle = OracleEngine(lateness, retention)
    log = GeneratedLog(TopicOptions("t", lateness, retention, {}, None))
    clock = 0
    cut_step = None if cut_at is None else int(n_ops * cut_at)
    for step in range(n_ops):
        if step == cut_step:
            stored = [(st.event, st.seq) for side in "RS" for st in oracle._stored[side].values()]
            log.compact_state = (oracle.seq, stored, list(oracle.subscriptions()))
        r = rnd.random()
        if r < 0.1 or step < 2:
            snap = rnd.random() < 0.25
            run = [_sub(rnd, rnd.choice(kinds)) for _ in range(rnd.choice((1, 1, 2, 4)))]
            for sub in run:
                sid = oracle.subscribe(sub, snapshot=snap)
                delivery = "affected" if rnd.random() < 0.3 else "pairs"
                if delivery == "affected":
                    log.affected.add(sid)
                log.subs[sid] = _sub_row(sid, sub, snap, delivery, oracle.seq)
                if snap:
                    log.expected += [(d.subscription_id, 1, d.r_id, d.s_id, oracle.seq)
                                     for d in oracle.result(sid)]
        elif r < 0.8:
            side = rnd.choice("RS")
            clock += rnd.randint(-1, 3)
            t = clock - rnd.randint(0, lateness + 2)  # now and then later than the lateness
            key = keys[1] if rnd.random() < hot else rnd.choice(keys)
            length = (rnd.choice((None, 0, 1, 2, 4, 9)) if "interval" in kinds else None)
            ev = Event(side, f"{side.lower()}{rnd.randint(0, id_pool)}", key,
                       round(rnd.uniform(0, 10), 1), t, b"", None if length is None else t + length)
            try:
                out = oracle.publish(ev)
            except Exception:  # late or duplicate: the server rejects it, the log never sees it
                continue
            for c, v in (("seq", oracle.seq), ("op", "publish"), ("side", side), ("id", ev.id),
                         ("key", ev.key), ("value", ev.value), ("time", t),
                         ("end", None if ev.end == t else ev.end)):
                log.events[c].append(v)
            log.expected += [(d.subscription_id, 1, d.r_id, d.s_id, oracle.seq) for d in out]
        elif r < 0.93:
            side = rnd.choice("RS")
            stored_ids = sorted(oracle.stored(side))
            if not stored_ids:
                continue
            eid = rnd.choice(stored_ids)
            out = oracle.delete(side, eid)
            for c, v in (("seq", oracle.seq), ("op", "delete"), ("side", side), ("id", eid),
                         ("key", None), ("value", None), ("time", None), ("end", None)):
                log.events[c].append(v)
            log.expected += [(d.subscription_id, -1, d.r_id, d.s_id, oracle.seq) for d in out]
        else:
            live = sorted(oracle.subscriptions())
            if not live:
                continue
            sid = rnd.choice(live)
            oracle.unsubscribe(sid)
            log.subs[sid]["unsubscribed_seq"] = oracle.seq
    return log


def edge_case_log(tmp_path: Path) -> tuple[Path, Counter]:
    """r keys sit exactly on the boundary 1.0; s − r equals a band end exactly (and, with 0.1 /
    0.3, differs from the real difference in the last bit)."""
    oracle = OracleEngine(lateness=0)
    subs = [BandJoin(b=Range(0.5, 1.0)), BandJoin(b=Range(-1.0, -0.5)), BandJoin(b=Range(0.2, 0.2)),
            BandJoin(b=Range(0.19999999999999998, 0.19999999999999998)),
            SelectJoin(a=Range(None, None), c=Range(None, None))]
    rows: dict[str, list] = {c: [] for c in ("seq", "op", "side", "id", "key", "value", "time")}
    sub_rows = []
    for sub in subs:
        sid = oracle.subscribe(sub)
        b = sub.b if isinstance(sub, BandJoin) else Range()
        sub_rows.append((sid, sub.kind, b.lo, b.hi, oracle.seq))
    expected: Counter = Counter()
    events = [("R", "r_at", 1.0), ("S", "s_hi", 2.0), ("S", "s_lo", 0.0), ("S", "s_mid", 1.5),
              ("S", "s_eq", 1.0), ("R", "r_below", math.nextafter(1.0, 0.0)),
              ("S", "s_just", math.nextafter(2.0, 3.0)), ("R", "r01", 0.1), ("S", "s03", 0.3),
              ("R", "r_far", 9.0), ("S", "s_far", 10.0)]
    for t, (side, eid, key) in enumerate(events):
        for d in oracle.publish(Event(side, eid, key, 1.0, t)):
            expected[(d.subscription_id, 1, d.r_id, d.s_id, oracle.seq)] += 1
        for c, v in zip(rows, (oracle.seq, "publish", side, eid, key, 1.0, t), strict=True):
            rows[c].append(v)
    for side, eid in (("R", "r_at"), ("S", "s_hi")):
        for d in oracle.delete(side, eid):
            expected[(d.subscription_id, -1, d.r_id, d.s_id, oracle.seq)] += 1
        for c, v in zip(rows, (oracle.seq, "delete", side, eid, None, None, None), strict=True):
            rows[c].append(v)
    assert any(r[0] == 0 and r[2] == "r_at" and r[3] == "s_hi" for r in expected)  # 2 − 1 = 1.0
    assert any(r[0] == 1 and r[2] == "r_at" and r[3] == "s_lo" for r in expected)  # 0 − 1 = −1.0
    cols = ("subscription_id", "kind", "b_lo", "b_hi", "registered_seq")
    subs_cols: dict[str, list] = {c: [r[i] for r in sub_rows] for i, c in enumerate(cols)}
    n = len(sub_rows)
    for c in ("a_lo", "a_hi", "c_lo", "c_hi", "w", "unsubscribed_seq"):
        subs_cols[c] = [None] * n
    subs_cols.update(delivery=["pairs"] * n, snapshot=[False] * n, subscriber=["t"] * n)
    return write_export(tmp_path / "edge", TopicOptions("t", 0, None), rows, subs_cols), expected


def edge_plan() -> ShardPlan:
    """Boundaries exactly at 1.0 (an r key) and at 2.0 (an s key); band hull [−1, 1]."""
    return ShardPlan(bounds=np.array([-math.inf, 1.0, 2.0]), interval_unit=np.array([0, 1, 2]),
                     unit_first=np.array([0, 1, 2]), unit_k=np.ones(3, dtype=np.int64),
                     unit_split=np.zeros(3, dtype=np.int64), hull=(-1.0, 1.0),
                     hot_keys=np.empty(0))


def as_rows(table: Any) -> Counter[Row]:
    """The replay's output (an Arrow table) as a multiset of rows."""
    d = table.to_pydict()
    return Counter(zip(d["subscription_id"], d["sign"], d["r_id"], d["s_id"], d["seq"],
                       strict=True))


def test_random_log_covers_every_operation(tmp_path: Path) -> None:
    """The generator itself: all operation kinds, rejected events left out, a readable export."""
    from hotjoin.ops.replay.log import DELETE, PUBLISH, SUBSCRIBE, UNSUBSCRIBE, read_export

    g = random_log(3, n_ops=400, retention=6, hot=0.3, cut_at=0.5)
    d = g.write(tmp_path / "x")
    log = read_export(d / "events.parquet", d / "subscriptions.parquet")
    kinds = set(log.ops.kind.tolist())
    assert {PUBLISH, DELETE, SUBSCRIBE, UNSUBSCRIBE} <= kinds
    assert list(log.ops.seq) == sorted(log.ops.seq)
    assert any(r[1] == -1 for r in g.expected) and any(r[1] == 1 for r in g.expected)
    # seqs are dense: every accepted operation took one, nothing else did
    assert list(log.ops.seq) == list(range(1, len(log.ops) + 1))
    c = g.write(tmp_path / "c", compacted=True)
    clog = read_export(c / "events.parquet", c / "subscriptions.parquet")
    assert clog.options.compacted_at_seq == g.compact_state[0]
    assert clog.n_restored == len(g.compact_state[1])

