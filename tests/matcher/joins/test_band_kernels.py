"""The band batch kernels (``matcher/joins/band_kernels.py``: ``qouter_many``,
``merge_join_many``, ``douter_many``, ``ssi_many``) under the out-of-room protocol: with output
columns of one row, every kernel stops before an event that might not fit (IDENTIFY/COUNT) or
at the event whose PAIRS rows overflowed, and resumes on grown columns; the rows equal those of
one event at a time (``Engine.publish``), in every mode, on a table with a sampled main run, a
delta run and deleted entries."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher import BandJoin, Engine, Event, Range
from hotjoin.matcher.joins.band import BAND_STRATEGIES
from hotjoin.matcher.joins.protocol import BatchRows


def _tight(rows: BatchRows) -> None:
    """Output columns of one row: every batch kernel must stop and resume."""
    rows.e, rows.q, rows.x = (np.empty(1, dtype=np.int64) for _ in range(3))
    rows.n = 0


def _build(name: str, seed: int) -> tuple[Engine, list[Event]]:
    rng = np.random.default_rng(seed)
    e = Engine(strategy={"band": name}, options={"alpha": 0.05})
    subs = []
    for _ in range(120):
        c = float(rng.integers(-10, 10))
        sub = BandJoin(b=Range(c - float(rng.integers(0, 4)), c + float(rng.integers(0, 4))))
        if rng.random() < 0.3:
            sub = BandJoin(b=sub.b, a=Range(0.0, float(rng.integers(0, 50))),
                           c=Range(float(rng.integers(0, 50)), None))
        subs.append(sub)
    e.subscribe_many(subs)
    n = 600
    e.publish_batch(["S"] * n, [f"s{i}" for i in range(n)], rng.integers(0, 80, n) / 2,
                    rng.integers(0, 100, n).astype(float), np.arange(n), output="none")
    for i in range(0, n, 25):
        e.delete("S", f"s{i}")
    probes = [Event("R", f"r{i}", float(rng.integers(0, 80)) / 2,
                    float(rng.integers(0, 100)), n + i) for i in range(30)]
    return e, probes


def _rows(out: object) -> Counter:
    cols = [getattr(out, c) for c in ("event", "subscription", "count")]
    ids = out.s_id
    return Counter(zip(*(c.tolist() for c in cols),
                       ids.tolist() if ids is not None else [None] * len(cols[0]), strict=True))


@pytest.mark.parametrize("name", BAND_STRATEGIES)
@pytest.mark.parametrize("output", ["pairs", "affected"])
def test_batch_kernels_resume_on_grown_rows_exactly(name: str, output: str) -> None:
    tight, probes = _build(name, 3)
    loose, _ = _build(name, 3)
    _tight(tight._rows_buf)
    got = tight.publish_batch(["R"] * len(probes), [p.id for p in probes],
                              [p.key for p in probes], [p.value for p in probes],
                              [p.time for p in probes], output=output)
    want: Counter = Counter()
    for i, p in enumerate(probes):  # one at a time, on the twin engine
        res = loose.publish_batch(["R"], [p.id], [p.key], [p.value], [p.time], output=output)
        want += Counter({(i, *k[1:]): v for k, v in _rows(res.output).items()})
    assert _rows(got.output) == want
    assert sum(want.values()) > 0, "the workload must produce output"


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(BAND_STRATEGIES), st.sampled_from(["pairs", "affected"]),
       st.integers(0, 10_000))
def test_probe_batch_counts_do_not_depend_on_the_rows_room(name: str, output: str,
                                                          seed: int) -> None:
    e, probes = _build(name, seed)
    ks = np.array([p.key for p in probes])
    vs = np.array([p.value for p in probes])
    ts = np.array([p.time for p in probes], dtype=np.int64)
    roomy = e.probe_batch("R", ks, vs, ts, output=output)
    _tight(e._rows_buf)
    assert e.probe_batch("R", ks, vs, ts, output=output).tolist() == roomy.tolist()
