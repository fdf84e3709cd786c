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
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def walk(nx: np.ndarray, head: int, count: int) -> np.ndarray:
    """The ``count`` members of the list starting at ``head``, in list order. O(count)."""
    out = np.empty(count, dtype=np.int64)
    s = head
    for i in range(count):
        out[i] = s
        s = nx[s]
    return out


@njit(cache=True)
def link(nx: np.ndarray, pv: np.ndarray, members: np.ndarray, bounds: np.ndarray) -> None:
    """Chain ``members[bounds[j] : bounds[j + 1]]`` into one list per group j (heads are
    ``members[bounds[j]]``). O(len(members))."""
    for j in range(bounds.shape[0] - 1):
        a, b = bounds[j], bounds[j + 1]
        for i in range(a, b):
            s = members[i]
            pv[s] = members[i - 1] if i > a else -1
            nx[s] = members[i + 1] if i + 1 < b else -1
