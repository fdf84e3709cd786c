"""Group member lists threaded through two flat columns (``nx``, ``pv``): O(1) join and leave.

The stabbing partition (paper 004 App. A.1) and the hotspot tracker (§2.2) keep, per group,
the list of its members. A Python set per group costs ~60–100 bytes per member plus a dict
entry per member for its group; here a member is an index (a slot or an interval id) into
columns the caller owns, ``nx[i]`` / ``pv[i]`` its neighbours (−1 at the ends), and the group
keeps only its head and count. A whole group is read or written by one compiled pass.

>>> import numpy as np
>>> nx, pv = np.full(6, -1), np.full(6, -1)
>>> link(nx, pv, np.array([4, 1, 5, 0]), np.array([0, 3, 4]))   # groups [4, 1, 5] and [0]
>>> walk(nx, 4, 3).tolist(), walk(nx, 0, 1).tolist(), int(pv[5])
([4, 1, 5], [0], 1)
>>> unlink(nx, pv, 4), walk(nx, 1, 2).tolist()     # 4 was the head: the new head is 1
(1, [1, 5])
"""

from __future__ import annotations

import operator
from collections.abc import MutableSequence, Sequence

import numpy as np

from hotjoin.matcher.config import kernel


def listed(col: Sequence[int], iid: object) -> bool:
    """Whether ``col[iid] >= 0`` for an id column indexed by non-negative integers (a missing
    or non-integer id is not listed)."""
    try:
        i = operator.index(iid)  # type: ignore[arg-type]
    except TypeError:
        return False
    return 0 <= i < len(col) and col[i] >= 0


def push_front(nx: MutableSequence[int], pv: MutableSequence[int], head: int, s: int) -> int:
    """Put ``s`` in front of the (non-empty) list starting at ``head``; returns the new head,
    ``s``. O(1)."""
    nx[s] = head
    pv[s] = -1
    pv[head] = s
    return s


def unlink(nx: MutableSequence[int], pv: MutableSequence[int], s: int) -> int | None:
    """Take ``s`` out of its list (one member at a time, from Python: ``array`` columns or
    numpy arrays); returns the list's new head when ``s`` was the head, else None. O(1)."""
    n, p = nx[s], pv[s]
    if n >= 0:
        pv[n] = p
    if p >= 0:
        nx[p] = n
        return None
    return int(n)


@kernel
def walk(nx: np.ndarray, head: int, count: int) -> np.ndarray:
    """The ``count`` members of the list starting at ``head``, in list order. O(count)."""
    out = np.empty(count, dtype=np.int64)
    s = head
    for i in range(count):
        out[i] = s
        s = nx[s]
    return out


def walk_column(nx: Sequence[int], head: int, count: int) -> np.ndarray:
    """:func:`walk` over an ``array("q")`` column (the buffer is released before returning,
    so the column may grow again)."""
    view = np.frombuffer(nx, np.int64)  # type: ignore[call-overload]
    out = walk(view, head, count)
    del view
    return out


@kernel
def link(nx: np.ndarray, pv: np.ndarray, members: np.ndarray, bounds: np.ndarray) -> None:
    """Chain ``members[bounds[j] : bounds[j + 1]]`` into one list per group j (heads are
    ``members[bounds[j]]``). O(len(members))."""
    for j in range(bounds.shape[0] - 1):
        a, b = bounds[j], bounds[j + 1]
        for i in range(a, b):
            s = members[i]
            pv[s] = members[i - 1] if i > a else -1
            nx[s] = members[i + 1] if i + 1 < b else -1
