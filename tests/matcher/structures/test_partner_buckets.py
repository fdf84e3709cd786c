"""The partner bucket table answers exactly what binary searches over the sorted values do.

``lower``/``upper`` must equal ``np.searchsorted(..., "left"/"right")`` for every x (±inf, the
values themselves, values between close neighbours, spans that overflow a double), and
``next_partner`` must return the first value ≥ x, or NaN only where x falls in a mixed bucket.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from hotjoin.matcher.structures.partner_buckets import (
    bucket,
    build,
    lower,
    new_buckets,
    next_partner,
    upper,
)

BK = new_buckets(1 << 10)  # a small cap, so large keys get coarse buckets with mixed ones

finite = st.floats(allow_nan=False, allow_infinity=False)
# clusters of nearly equal values plus far outliers: mixed buckets on purpose
clustered = st.builds(lambda c, e: c + e, st.sampled_from([0.0, 1.0, 1e6, -3.5, 1e300]),
                      st.sampled_from([0.0, 1e-12, 2e-12, 1e-9, 0.5, 7.0]))
values = st.lists(st.one_of(finite, clustered, st.sampled_from([1e308, -1e308, 0.0, -0.0])),
                  min_size=1, max_size=300)


@njit(cache=True)
def _answers(pv: np.ndarray, base: int, xs: np.ndarray, bk: tuple) -> np.ndarray:
    size = pv.shape[0] - base
    nb, scale, pmin = build(pv, base, size, bk)
    out = np.empty((xs.shape[0], 4))
    for i in range(xs.shape[0]):
        x = xs[i]
        end = base + size
        out[i, 0] = lower(pv, end, bk.low, bk.first, bk.mult, nb, scale, pmin, x)
        out[i, 1] = upper(pv, end, bk.low, bk.first, bk.mult, nb, scale, pmin, x)
        out[i, 2] = next_partner(bk.low, bk.nxt, nb, scale, pmin, x)
        out[i, 3] = bk.mult[bucket(x, pmin, scale, nb)] < 0
    return out


@settings(max_examples=300, deadline=None)
@given(vals=values, extra=st.lists(st.one_of(finite, clustered), max_size=20),
       pad=st.integers(0, 3))
def test_lookups_equal_binary_search(vals: list[float], extra: list[float], pad: int) -> None:
    pv = np.sort(np.array(vals, dtype=np.float64))
    full = np.concatenate([np.full(pad, -np.inf), pv])  # a key's run starts at ``base``
    with np.errstate(over="ignore"):  # the neighbours of ±max are ±inf
        near = [*np.nextafter(pv, np.inf), *np.nextafter(pv, -np.inf)]
    xs = np.array([*vals, *extra, -np.inf, np.inf, 1e308, -1e308, *near], dtype=np.float64)
    got = _answers(full, pad, xs, BK)
    lo = np.searchsorted(pv, xs, "left")
    hi = np.searchsorted(pv, xs, "right")
    assert np.array_equal(got[:, 0], lo + pad)
    assert np.array_equal(got[:, 1], hi + pad)
    first_ge = np.where(lo < pv.shape[0], pv[np.minimum(lo, pv.shape[0] - 1)], np.inf)
    mixed = got[:, 3] == 1
    assert np.array_equal(got[~mixed, 2], first_ge[~mixed])
    assert np.all(np.isnan(got[mixed, 2]))


def test_a_dense_key_gets_mixed_buckets_and_stays_exact() -> None:
    """More partners than the cap allows distinct buckets for: many mixed buckets, all exact."""
    rng = np.random.default_rng(3)
    pv = np.sort(rng.uniform(0, 1, 5000))
    xs = np.concatenate([pv, rng.uniform(-0.1, 1.1, 2000)])
    got = _answers(pv, 0, xs, BK)
    assert got[:, 3].sum() > 100
    assert np.array_equal(got[:, 0], np.searchsorted(pv, xs, "left"))
    assert np.array_equal(got[:, 1], np.searchsorted(pv, xs, "right"))


def test_one_value_and_an_overflowing_span() -> None:
    for pv in (np.array([4.0, 4.0, 4.0]), np.array([-1e308, 0.0, 1e308])):
        xs = np.array([-np.inf, -1e308, 0.0, 4.0, 5.0, 1e308, np.inf])
        got = _answers(pv, 0, xs, BK)
        assert np.array_equal(got[:, 0], np.searchsorted(pv, xs, "left"))
        assert np.array_equal(got[:, 1], np.searchsorted(pv, xs, "right"))
