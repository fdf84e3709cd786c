"""The interval-join kernels (``matcher/joins/interval_kernels.py``) called directly on their
bundles: IJ-NestedLoop's and IJ-SSI's rows, in PAIRS and COUNT mode and through each of IJ-SSI's
three ways (counted per member, visited by key, visited by value), equal a brute force written
from the record rows' meaning, on output columns too small for them (the out-of-room protocol);
the scratch growth keeps what it holds; the bundles have the
fields the strategies pass."""

from __future__ import annotations

from collections import Counter
from typing import Any
from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.engine import Engine
from hotjoin.matcher.joins import interval as I
from hotjoin.matcher.joins import interval_kernels as K
from hotjoin.matcher.joins.protocol import COUNT, PAIRS, BatchRows, MatchBuffer, run_kernel_many
from hotjoin.matcher.model import Event, IntervalJoin, Range

BIG = 1 << 62


def test_scratch_growth_keeps_contents() -> None:
    f = K._wider_f(np.array([1.5, 2.5, 3.5]), 2)
    i = K._wider_i(np.array([7, 8, 9]), 3)
    assert f.shape[0] > 3 and f[:2].tolist() == [1.5, 2.5]
    assert i.shape[0] > 3 and i[:3].tolist() == [7, 8, 9]


def test_bundles_have_the_fields_the_strategies_pass() -> None:
    e = Engine(strategy={"interval": "IJ-SSI"})
    e.subscribe(IntervalJoin.allen("overlaps", b=Range(0, 1)))
    table = e.tables["S"]
    assert len(I._partners(table)) == len(K.Partners._fields)
    assert len(I._subs(e.kind_index("interval").cols)) == len(K.Subs._fields)
    assert len(I._empty_stage(3)) == len(K.ValueStage._fields)
    assert K.Partners._fields[-2:] == ("latest_time", "latest_end")


def _ranges(draw: st.DrawFn, lo: int, hi: int) -> Range:
    if draw(st.integers(0, 3)) == 0:
        return Range()
    a = draw(st.one_of(st.none(), st.integers(lo, hi)))
    b = draw(st.one_of(st.none(), st.integers(lo, hi)))
    if a is not None and b is not None and a > b:
        a, b = b, a
    return Range(a, b)


@st.composite
def setups(draw: st.DrawFn) -> tuple[list[IntervalJoin], list[tuple[float, float, int, int]],
                                     list[tuple[float, float, int, int]]]:
    subs = []
    for _ in range(draw(st.integers(1, 24))):
        b = _ranges(draw, -2, 2)
        a, c = _ranges(draw, 0, 3), _ranges(draw, 0, 3)
        if draw(st.booleans()):
            name = draw(st.sampled_from(["before", "after", "overlaps", "during", "equals",
                                         "meets", "contains"]))
            subs.append(IntervalJoin.allen(name, b=b, a=a, c=c))
        else:
            subs.append(IntervalJoin(b, a, c, *(_ranges(draw, -6, 6) for _ in range(4))))

    def tuples(n: int) -> list[tuple[float, float, int, int]]:
        out = []
        for _ in range(n):
            t = draw(st.integers(0, 12))
            out.append((float(draw(st.integers(0, 4))), float(draw(st.integers(0, 3))), t,
                        t + draw(st.sampled_from([0, 0, 1, 3, 8]))))
        return out

    return subs, tuples(draw(st.integers(0, 30))), tuples(draw(st.integers(1, 5)))


def _brute(subs: list[IntervalJoin], stored: list[tuple[float, float, int, int]],
           probe: tuple[float, float, int, int]) -> Counter[tuple[int, int]]:
    """(subscription, stored index) of every pair an incoming R tuple ``probe`` forms."""
    def inside(x: float, r: Range) -> bool:
        return (r.lo is None or r.lo <= x) and (r.hi is None or x <= r.hi)

    rk, rv, rt, re = probe
    got: Counter[tuple[int, int]] = Counter()
    for q, s in enumerate(subs):
        for j, (sk, sv, st_, se) in enumerate(stored):
            if (inside(sk - rk, s.b) and inside(rv, s.a) and inside(sv, s.c)
                    and inside(st_ - rt, s.ss) and inside(st_ - re, s.se)
                    and inside(se - rt, s.es) and inside(se - re, s.ee)):
                got[(q, j)] += 1
    return got


@given(setup=setups(), ratio=st.sampled_from([0, 1 << 40]), stage=st.booleans())
@settings(max_examples=150, deadline=None)
def test_kernels_equal_brute_force(setup: Any, ratio: int, stage: bool) -> None:
    """Both kernels, every way of IJ-SSI's (per member with ``ratio`` large, per partner with
    0; a value stage in every group or where the estimate says), PAIRS and COUNT."""
    subs, stored, probes = setup
    e = Engine(strategy={"interval": "IJ-SSI"}, lateness=1 << 40)
    qids = np.array(e.subscribe_many(subs), dtype=np.int64)
    ix = e.kind_index("interval")
    assert isinstance(ix, I.StabbingIndex)
    with patch.object(I, "STAGE_MIN", 0), patch.object(I, "STAGE_GAIN", 0.0 if stage else 1.0):
        ix.rebuild()
    for j, (k, v, t, en) in enumerate(stored):
        e.publish(Event("S", f"s{j}", k, v, t, end=en))
    table = e.tables["S"]
    slot_of = {table.slot_of[f"s{j}"]: j for j in range(len(stored))}
    groups = (ix.points, ix.gstart, ix.gsize, ix.gbound, ix.hi_q, ix.hi_v, ix.lo_q, ix.lo_v,
              ix.hi_own, ix.lo_own, ix._live)
    pk, pv, pt, pe = (np.array(c) for c in zip(*probes, strict=True))
    incoming = (pk.astype(np.float64), pv.astype(np.float64), pt.astype(np.int64),
                pe.astype(np.int64), np.full(len(probes), e.seq + 1, dtype=np.int64))
    want = [_brute(subs, stored, p) for p in probes]
    for mode in (PAIRS, COUNT):
        for name in ("nested", "ssi"):
            rows, buf = BatchRows(), MatchBuffer()
            rows.e, rows.q, rows.x = (np.empty(4, dtype=np.int64) for _ in range(3))  # tight
            buf.stamp = stamp0 = int(ix.cols.mark.max())
            room = 0 if mode == PAIRS else qids.shape[0] + 16
            if name == "nested":
                head = (qids, I._partners(table), I._subs(ix.cols), incoming, (1, mode))
                kernel = K.nested_many
            else:
                head = (groups, tuple(ix.stage), I._partners(table), I._subs(ix.cols), incoming,
                        (1, mode), ratio)
                kernel = K.ssi_many
            run_kernel_many(kernel, head, len(probes), buf, rows, room)
            # one stamp per event; a PAIRS event redone on grown rows takes another
            assert (buf.stamp == stamp0 + len(probes) if mode == COUNT
                    else buf.stamp >= stamp0 + len(probes))
            oe, oq, ox, n = rows.e, rows.q, rows.x, rows.n
            for i in range(len(probes)):
                at = oe[:n] == i
                if mode == PAIRS:
                    got = Counter((int(q), slot_of[int(x)]) for q, x in
                                  zip(oq[:n][at], ox[:n][at], strict=True))
                    assert got == want[i], (name, i)
                else:
                    per: Counter[int] = Counter()
                    for q, _ in want[i].elements():
                        per[q] += 1
                    got_c = {int(q): int(x) for q, x in zip(oq[:n][at], ox[:n][at], strict=True)}
                    assert got_c == dict(per), (name, i)
