"""Band kernels on tables large enough for sampled searches, two runs and every output mode."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from hotjoin.matcher import BandJoin, Engine, Event, Range
from hotjoin.matcher.joins.band import BAND_STRATEGIES


def _engine(name: str, seed: int, selections: bool,
            churn: bool = True) -> tuple[Engine, list[Event]]:
    rng = np.random.default_rng(seed)
    e = Engine(strategy={"band": name}, options={"alpha": 0.05})
    subs = []
    for _ in range(300):
        c = float(rng.integers(-20, 20))
        sub = BandJoin(b=Range(c - rng.integers(0, 3), c + rng.integers(0, 3)))
        if selections and rng.random() < 0.3:
            sub = BandJoin(b=sub.b, a=Range(0, float(rng.integers(0, 50))),
                           c=Range(float(rng.integers(0, 50)), None))
        subs.append(sub)
    e.subscribe_many(subs[:200])
    for s in subs[200:]:
        e.subscribe(s)
    # S: a bulk-loaded main run (sampled) plus a delta run of recent inserts, some deleted
    main = [Event("S", f"s{i}", float(rng.integers(0, 200)), float(rng.integers(0, 100)), i)
            for i in range(3000)]
    e.restore_events(main, list(range(e.seq + 1, e.seq + 3001)))
    e.restore_clock(e.seq + 3000, 2999)
    for i in range(3000, 3150 if churn else 3000):
        e.publish(Event("S", f"s{i}", float(rng.integers(0, 200)), float(rng.integers(0, 100)), i))
    for i in range(0, 3150 if churn else 0, 20):
        e.delete("S", f"s{i}")
    order = e.tables["S"].order
    if churn:
        assert order.n_main > 64 * 2 and order.n_delta > 0 and order.n_dead > 0
    else:
        assert order.n_delta == 0 and order.n_dead == 0
    probes = [Event("R", f"r{i}", float(rng.integers(0, 200)), float(rng.integers(0, 100)),
                    4000 + i) for i in range(40)]
    return e, probes


@pytest.mark.parametrize("selections", [False, True], ids=["plain", "selections"])
def test_all_modes_and_strategies_agree_on_large_tables(selections: bool) -> None:
    engines = {n: _engine(n, 5, selections) for n in BAND_STRATEGIES}
    ref_name = "BJ-QOuter"
    total = 0
    for i in range(40):
        outs = {}
        for name, (e, probes) in engines.items():
            ev = probes[i]
            n_ident = e.probe("R", ev.key, ev.value, "identify")
            ident = set(e._buf.out_q[: e._buf.n].tolist())
            assert len(ident) == n_ident, (name, "identify must not repeat a subscription")
            n_pairs = e.probe("R", ev.key, ev.value, "pairs")
            m = e.publish_columnar(ev)
            assert len(m) == n_pairs
            pairs = Counter(m.deliveries())
            per_sub = Counter(d.subscription_id for d in pairs.elements())
            assert ident == set(per_sub), name
            outs[name] = pairs
        assert all(o == outs[ref_name] for o in outs.values()), i
        total += len(outs[ref_name])
    assert total > 1000
    # COUNT mode on deletes, against the pairs
    for name, (e, _) in engines.items():
        twin = _engine(name, 5, selections)[0]
        for p in _engine(name, 5, selections)[1]:
            twin.publish(p)
        for sid in ("s1", "s2", "s3", "s3149", "s3101"):
            aff = e.delete_affected("S", sid)
            lost = Counter(d.subscription_id for d in twin.delete("S", sid))
            assert dict(zip(aff.subscription_ids.tolist(), (-aff.counts).tolist(),
                            strict=True)) == dict(lost), name


@pytest.mark.parametrize("selections", [False, True], ids=["plain", "selections"])
def test_counts_on_a_clean_table_equal_the_pairs(selections: bool) -> None:
    """A clean run (no deletes) takes COUNT's two-binary-search path; it must equal the walk."""
    for name in ("BJ-SSI", "BJ-Hotspot", "BJ-QOuter"):
        e, probes = _engine(name, 9, selections, churn=False)
        twin, _ = _engine(name, 9, selections, churn=False)
        total = 0
        for ev in probes[:15]:
            aff = e.publish_affected(ev)
            pairs = Counter(d.subscription_id for d in twin.publish(ev))
            assert dict(zip(aff.subscription_ids.tolist(), aff.counts.tolist(),
                            strict=True)) == dict(pairs), name
            total += sum(pairs.values())
        assert total > 1000


def _sparse_engine(name: str, offset: float) -> tuple[Engine, list[Event]]:
    """Narrow bands in 6 clusters over sparse float keys, both sides bulk-loaded (sampled main
    runs with occupancy bitmaps), then probes of both sides, a third of them placed exactly at
    a stored key plus a cluster's offset so that they pair; ``offset`` moves every key far
    from 0, where ``b + lo`` rounds (the bitmap's query must still not hide a key)."""
    rng = np.random.default_rng(11)
    centres = np.array([-30.0, -12.5, 0.0, 7.25, 19.0, 40.0])
    subs = []
    for i in range(240):
        c = float(centres[i % 6])
        subs.append(BandJoin(b=Range(c - float(rng.uniform(0, 0.05)),
                                     c + float(rng.uniform(0, 0.05)))))
    e = Engine(strategy={"band": name}, options={"alpha": 0.05})
    e.subscribe_many(subs)
    keys = {s: offset + np.round(rng.uniform(0, 2000, 1500), 3) for s in "RS"}
    stored = [Event(s, f"{s}{i}", float(k), 0.0, i) for s in "RS"
              for i, k in enumerate(keys[s].tolist())]
    e.restore_events(stored, list(range(1, len(stored) + 1)))
    e.restore_clock(len(stored), 1500)
    for s in "RS":
        assert e.tables[s].order.n_main == 1500 and e.tables[s].order.main_cells[0].shape[0]
    probes = []
    for i in range(300):
        side = "R" if i % 2 else "S"
        other = keys["S" if side == "R" else "R"]
        if i % 3 == 0:  # exactly a stored partner's key minus (R) or plus (S) a centre
            c = float(centres[rng.integers(0, 6)])
            k = float(other[rng.integers(0, other.shape[0])])
            key = k - c if side == "R" else k + c
        else:
            key = offset + float(rng.uniform(-50, 2050))
        probes.append(Event(side, f"p{i}", key, 0.0, 1500 + i))
    return e, probes


@pytest.mark.parametrize("offset", [0.0, 1e12], ids=["near-0", "far-1e12"])
def test_sparse_keys_and_narrow_bands_on_bitmapped_runs(offset: float) -> None:
    """BJ-SSI and BJ-Hotspot skip groups by the main runs' occupancy bitmaps (R and S probes:
    both directions); every strategy, batched and one at a time, must give BJ-QOuter's pairs
    (QOuter searches every band and reads no bitmap)."""
    ref: list[Counter] = []
    e, probes = _sparse_engine("BJ-QOuter", offset)
    for p in probes:
        ref.append(Counter(e.publish(p)))
    assert sum(len(c) for c in ref) > 200  # the probes pair, on both sides
    assert sum(len(c) for c, p in zip(ref, probes, strict=True) if p.side == "S") > 50
    for name in BAND_STRATEGIES:
        one, probes = _sparse_engine(name, offset)
        for i, p in enumerate(probes):
            assert Counter(one.publish(p)) == ref[i], (name, i)
        batch, probes = _sparse_engine(name, offset)
        res = batch.publish_batch([p.side for p in probes], [p.id for p in probes],
                                  [p.key for p in probes], [p.value for p in probes],
                                  [p.time for p in probes], output="pairs")
        got = [Counter() for _ in probes]
        out = res.output
        for ev, q, sign, r, s in zip(out.event.tolist(), out.subscription.tolist(),
                                     out.sign.tolist(), out.r_id.tolist(), out.s_id.tolist(),
                                     strict=True):
            got[ev][(q, sign, r, s)] += 1
        want = [Counter({(d.subscription_id, d.sign, d.r_id, d.s_id): n for d, n in c.items()})
                for c in ref]
        assert got == want, name
