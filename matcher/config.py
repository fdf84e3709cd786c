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

numba files a kernel's cached code by its source file, but writes into it the name its module
was imported under, and a process loading the entry imports that module again. The folders of
a checkout are importable under their own names too (``import server.delivery`` from the
checkout's root); a process that did so first left entries that a later process importing
``hotjoin.server.delivery`` outside the checkout failed to load (``ModuleNotFoundError: No module named 'server'``,
raised from the server's warm-up, ``delivery.warm_up``). A kernel's cache (:class:`OwnCache`)
therefore treats an entry it cannot import for as absent: the kernel is compiled again and the
entry rewritten under the name of the process that compiled it.

>>> from hotjoin.matcher.core import lower_bound, sorted_insert_many
>>> {k: lower_bound.targetoptions[k] for k in ("fastmath", "error_model", "inline")}
{'fastmath': False, 'error_model': 'python', 'inline': 'always'}
>>> type(sorted_insert_many._cache).__name__  # cache=True: kept on disk
'OwnCache'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

from numba import njit
from numba.core.caching import FunctionCache
from numba.core.dispatcher import Dispatcher

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

    def make(f: F) -> F:
        dispatcher = njit(**flags)(f)
        if flags.get("cache"):
            _own_cache(dispatcher)
        return dispatcher  # type: ignore[no-any-return]

    return make(fn) if fn is not None else make


class OwnCache(FunctionCache):
    """numba's on-disk cache of one kernel, except that an entry written by a process that
    imported the kernel's module under another name (one this process cannot import) is
    treated as absent rather than raised (module docstring)."""

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        try:
            return super().load_overload(sig, target_context)
        except ImportError:
            return None


def _own_cache(dispatcher: Dispatcher) -> None:
    """Give ``dispatcher`` (made with ``cache=True``) an :class:`OwnCache`. numba has no hook
    for the cache's class; ``Dispatcher.enable_caching`` sets this attribute the same way."""
    dispatcher._cache = OwnCache(dispatcher.py_func)
