"""The server process's allocator settings: large buffers reused, not mapped afresh.

A server allocates and frees buffers of megabytes per batch: the engine's output columns, the
delivery chunk, the match-log record and, for a listener catching up, every record it reads
back. glibc's ``malloc`` serves each allocation above its mmap threshold (128 KiB at start,
raised only as such blocks are freed) with a fresh ``mmap`` and returns it with ``munmap``
when freed, so every such buffer costs a page fault per 4 KiB page touched; and it gives the
top of its heap back to the system beyond the trim threshold. Measured in process
(``python -m hotjoin.ops.bench.serve_path --catch-up --kind band --delivery pairs --affected
100 --subscriptions 20000 --stored 20000 --events 5000``): a listener catching up from the match
log received 6.2–7.1 M messages per CPU second with glibc's defaults, 11.2–11.8 M with the
settings below.

:func:`tune` fixes the thresholds, as ``mallopt(3)`` documents: blocks up to 32 MiB (glibc's
largest mmap threshold) come from the heap, and up to 128 MiB of freed heap (plus 64 MiB of
padding when the heap grows) stay mapped for reuse, so a server's resident memory may include
that much freed memory. Linux with glibc only; when the operator set any of glibc's own
``MALLOC_TOP_PAD_``, ``MALLOC_MMAP_THRESHOLD_`` or ``MALLOC_TRIM_THRESHOLD_`` environment
variables, those are left to apply (``docs/reference/configuration.md``).
"""

from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3  # glibc's malloc.h
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 128 << 20
TOP_PAD = 64 << 20
ENV = ("MALLOC_TOP_PAD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def tune() -> bool:
    """Set the thresholds of the module docstring for this process; whether they were set
    (False: not glibc, or the environment already tunes them)."""
    if not sys.platform.startswith("linux") or any(k in os.environ for k in ENV):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return all([mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1,
                mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1,
                mallopt(M_TOP_PAD, TOP_PAD) == 1])
