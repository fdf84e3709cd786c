"""The server process's heap: long-lived objects kept out of the garbage collector's way, and
free pages handed back to the OS after a bulk rebuild.

**Why.** A topic of 100,000 subscriptions holds about a million long-lived Python objects (the
book's metadata, the hub's registrations, the subscriptions themselves). CPython's full
(generation-2) collection walks all of them: 50–170 ms with the GIL held, measured in the
server under ``bench serve`` at 20,000 events/s, where one such pause delays ~1 % of the run's
events and alone set its publish→delivery p99. ``gc.freeze()`` moves every object tracked at
that moment into a permanent generation that collections skip, so after a bulk load a full
collection walks only what was created since. Objects frozen this way are still freed by
reference counting; only a reference cycle among them would outlive its last use, a bounded
cost paid once per bulk load.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc

FREEZE_AFTER = 1_000
"""Subscriptions in one request from which the server freezes the heap after registering them
(smaller requests add too few long-lived objects to matter)."""


def freeze_long_lived() -> None:
    """Collect the young generations, then freeze every object still tracked (after a restore or
    a bulk subscribe: what exists now is the long-lived state). Costs a young collection.

    >>> freeze_long_lived()
    >>> frozen = gc.get_freeze_count(); gc.unfreeze(); frozen > 0
    True
    """
    gc.collect(1)
    gc.freeze()


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the OS (glibc ``malloc_trim``; a no-op elsewhere).

    A restart bulk-builds indexes through many temporaries; without this the process keeps
    their pages (measured in process, 500,000 select joins + 1,000,000 tuples: 1,944 MiB after
    the load, 1,692 MiB after the trim, 1,783 MiB for the engine before the restart)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
