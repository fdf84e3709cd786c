"""Group member lists threaded through ``nx`` / ``pv`` columns against Python lists: ``link``
builds them, ``push_front`` and ``unlink`` change them one member at a time, ``walk`` and
``walk_column`` read them back in order, ``listed`` tells which ids an id column holds."""

from __future__ import annotations

from array import array

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.matcher.structures.member_lists import (
    link,
    listed,
    push_front,
    unlink,
    walk,
    walk_column,
)

N = 24  # member ids 0..N-1


@settings(max_examples=150, deadline=None)
@given(st.permutations(range(N)), st.lists(st.integers(0, N), max_size=4),
       st.lists(st.tuples(st.booleans(), st.integers(0, N - 1), st.integers(0, 3)),
                max_size=60),
       st.booleans())
def test_lists_match_python_lists(perm: list[int], cuts: list[int],
                                  ops: list[tuple[bool, int, int]], numpy_columns: bool) -> None:
    # link: the first ``sum`` members of the permutation, cut into groups at ``cuts``
    bounds = sorted({0, *cuts, N // 2})
    groups = [perm[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    nx, pv = np.full(N, -1, dtype=np.int64), np.full(N, -1, dtype=np.int64)
    link(nx, pv, np.array(perm, dtype=np.int64), np.array(bounds, dtype=np.int64))
    if not numpy_columns:  # the Python-side calls also take array("q") columns
        nx, pv = array("q", nx.tolist()), array("q", pv.tolist())
    free = set(perm[bounds[-1]:])
    for add, s, g in ops:
        g %= len(groups) if groups else 1
        if not groups:
            break
        if add and s in free and groups[g]:
            assert push_front(nx, pv, groups[g][0], s) == s
            groups[g].insert(0, s)
            free.discard(s)
        elif not add and any(s in members for members in groups):
            members = next(m for m in groups if s in m)
            was_head = members[0] == s
            new_head = unlink(nx, pv, s)
            members.remove(s)
            assert new_head == ((members[0] if members else -1) if was_head else None)
            free.add(s)
        for members in groups:
            if members:
                col = np.asarray(nx) if numpy_columns else nx
                got = (walk(col, members[0], len(members)) if numpy_columns
                       else walk_column(col, members[0], len(members)))
                assert got.tolist() == members
                assert int(pv[members[0]]) == -1
                assert int(nx[members[-1]]) == -1


def test_walk_column_releases_the_buffer_so_the_column_can_grow() -> None:
    nx = array("q", [1, 2, -1])
    assert walk_column(nx, 0, 3).tolist() == [0, 1, 2]
    nx.extend([-1] * 100)  # raises BufferError if a view were still exported
    assert len(nx) == 103


def test_walk_of_nothing_and_a_single_member() -> None:
    nx = np.full(3, -1, dtype=np.int64)
    assert walk(nx, 0, 0).tolist() == []
    assert walk(nx, 2, 1).tolist() == [2]


def test_unlink_of_a_lone_member_empties_its_list() -> None:
    nx, pv = np.full(2, -1, dtype=np.int64), np.full(2, -1, dtype=np.int64)
    assert unlink(nx, pv, 1) == -1


@pytest.mark.parametrize(("iid", "want"), [
    (0, True), (2, True), (1, False),  # col[1] < 0
    (3, False), (-1, False),  # out of range (a negative id is never listed)
    ("0", False), (1.0, False), (None, False),  # not an integer
    (np.int64(2), True), (True, False),  # integer-like: operator.index reads True as 1
])
def test_listed(iid: object, want: bool) -> None:
    assert listed([5, -1, 0], iid) is want
