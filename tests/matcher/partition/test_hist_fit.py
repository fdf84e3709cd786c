"""The fitting steps of HIST-SSI (``hist_fit``) against brute-force oracles: ``pava`` is the
best increasing fit, ``lloyd`` never worsens a contiguous clustering, ``merge_smallest`` merges
neighbouring groups down to the target."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.partition import hist_fit


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-5, 5), min_size=1, max_size=25),
       st.lists(st.floats(0.1, 3), min_size=25, max_size=25))
def test_pava_is_the_best_increasing_fit(y: list[float], w: list[float]) -> None:
    """Blocks strictly increasing, weights conserved, and no increasing step function over
    the blocks' partition does better than their weighted means (they are the means)."""
    ya, wa = np.array(y), np.array(w[: len(y)])
    bv, bw, bs = hist_fit.pava(ya, wa)
    assert np.all(np.diff(bv) > 0)
    assert bs[0] == 0 and bs[-1] == len(y) and np.all(np.diff(bs) > 0)
    assert np.isclose(bw.sum(), wa.sum())
    for b in range(bv.shape[0]):
        seg = slice(bs[b], bs[b + 1])
        assert np.isclose(bv[b], np.average(ya[seg], weights=wa[seg]))
    if y == sorted(y) and len(set(y)) == len(y):  # already increasing: one block per piece
        assert bv.tolist() == pytest.approx(y)


def _cost(v: np.ndarray, w: np.ndarray, z: list[int]) -> float:
    total = 0.0
    for a, b in itertools.pairwise(z):
        m = np.average(v[a:b], weights=w[a:b])
        total += float(np.sum(w[a:b] * (v[a:b] - m) ** 2))
    return total


@settings(max_examples=150, deadline=None)
@given(st.lists(st.floats(0, 20), min_size=4, max_size=30, unique=True).map(sorted),
       st.integers(2, 4), st.data())
def test_lloyd_never_worsens_and_keeps_clusters_contiguous(v: list[float], k: int,
                                                           data: st.DataObject) -> None:
    va = np.array(v)
    w = np.ones(len(v))
    z0 = sorted(data.draw(st.sets(st.integers(1, len(v) - 1), min_size=k - 1,
                                  max_size=k - 1)))
    if len(z0) != k - 1:
        return
    z0 = [0, *z0, len(v)]
    pw, pwy, pwyy = (np.concatenate([[0.0], np.cumsum(a)]) for a in (w, w * va, w * va * va))
    z, cost = hist_fit.lloyd(va, pw, pwy, pwyy, np.array(z0, dtype=np.int64), 50)
    zl = z.tolist()
    assert zl[0] == 0 and zl[-1] == len(v) and all(a < b for a, b in itertools.pairwise(zl))
    assert cost <= _cost(va, w, z0) + 1e-6
    assert np.isclose(cost, _cost(va, w, zl), atol=1e-6)


@pytest.mark.parametrize("sizes, target", [([5, 1, 1, 7], 2), ([3], 1), ([1, 2, 3, 4], 4),
                                           ([4, 4, 4, 4], 1)])
def test_merge_smallest_merges_neighbours_into_target_groups(sizes: list[int],
                                                             target: int) -> None:
    label = hist_fit.merge_smallest(np.array(sizes), target)
    assert label.tolist() == sorted(label.tolist())          # neighbours only
    assert len(set(label.tolist())) == min(target, len(sizes))
    assert label[0] == 0 and np.all(np.diff(label) <= 1)
