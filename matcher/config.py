"""The numba configuration of every compiled kernel, in one place (as ``stumpy/config.py``).

Every kernel of the engine (and the three of ``server/convert.py``) is compiled with
:data:`JIT` through the :func:`kernel` decorator; no module restates numba's flags. A kernel
that needs different flags says so at its decorator with one of the named override sets below,
never with loose keywords, so the reason is written once here:

* :data:`INLINE` — a small helper called inside another kernel's loop (a search, a
  predicate, a sorted insert) is inlined by numba into its caller's IR: no call, and the
  caller's loop keeps its values in registers. In a kernel with numba's runtime each *array*
  argument of an inlined helper still costs a reference count per call (an atomic increment
  and decrement; ``joins/protocol.py``, "reference counting"): ~13 ns per node when the
  interval tree's descent took its three arrays, ~15 ns per affected subscription in BJ-SSI.
  So a helper in a hot loop takes scalars, or its caller runs without the runtime:
* :data:`NO_NRT` — a kernel that allocates nothing runs without numba's runtime
  (``_nrt=False``): its arrays are borrowed from the caller for the call's duration and
  nothing is counted, neither its own arguments nor those of the helpers it inlines (~30 %
  of BJ-SSI's probe, ``docs/benchmarks/batch.md``; the structures' inserts and stabbing
  queries, which inline ``matcher/core.py``'s searches). Such a kernel cannot allocate, so
  it cannot grow a buffer either: it follows the out-of-room protocol of
  :mod:`matcher.core`. It may call other kernels, which count their own references.

The flags' values are numba's defaults made explicit, plus ``cache=True`` (compiled code is
kept on disk beside the module, ``__pycache__/*.nbi|nbc``, and loaded by the next process;
``matcher/warmup.py`` loads every kernel at start-up). numba keys a cached kernel on its own
file only: a kernel that inlines or calls one from another module keeps the old code of that
one until its own file changes, which is why kernels take other modules' tunables as
arguments and why a change to :mod:`matcher.core` needs the caches of its callers cleared
(``find matcher server -name '*.nb[ic]' -delete``).

>>> from hotjoin.matcher.core import lower_bound, sorted_insert_many
>>> {k: lower_bound.targetoptions[k] for k in ("fastmath", "error_model", "inline")}
{'fastmath': False, 'error_model': 'python', 'inline': 'always'}
>>> type(sorted_insert_many._cache).__name__  # cache=True: kept on disk
'FunctionCache'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

from numba import njit

__all__ = ["INLINE", "JIT", "NO_NRT", "kernel"]

JIT: dict[str, Any] = {
    "cache": True,          # compiled code kept on disk, loaded by the next process
    "nogil": False,         # kernels run under the GIL (the engine is single-threaded per topic)
    "fastmath": False,      # exact IEEE arithmetic: results are compared bit for bit
    "error_model": "python",  # division by zero raises, as in Python
}
"""The flags every kernel is compiled with (numba's defaults but ``cache``)."""

INLINE: dict[str, Any] = {"inline": "always"}
"""Override for a helper inlined into its callers' hot loops (module docstring)."""

NO_NRT: dict[str, Any] = {"_nrt": False}
"""Override for a batch kernel compiled without numba's runtime (module docstring)."""

F = TypeVar("F", bound=Callable[..., Any])


@overload
def kernel(fn: F) -> F: ...


@overload
def kernel(fn: None = None, **overrides: Any) -> Callable[[F], F]: ...


def kernel(fn: F | None = None, **overrides: Any) -> F | Callable[[F], F]:
    """``njit(**JIT)``, or with ``overrides`` (:data:`INLINE`, :data:`NO_NRT`) on top.

    Used bare (``@kernel``) or called (``@kernel(**INLINE)``); returns numba's dispatcher.
    """
    flags = {**JIT, **overrides}
    if fn is not None:
        return njit(**flags)(fn)
    return njit(**flags)  # type: ignore[no-any-return]
