"""Every compiled kernel of a server process, loaded or compiled at once:
``python -m hotjoin.server.kernels``, which ``scripts/setup`` runs after installing.

numba keeps each compiled kernel in an on-disk cache (``__pycache__`` beside its module) and
compiles a kernel that has no cached copy on its first call in a process. A server loads its
kernels in a background thread at start-up and serves meanwhile (``matcher/warmup.py``). From
the cache that takes about 2 s; with the cache empty, as on a fresh install, that thread
compiles for minutes beside the server's own work: the first events wait for the kernels they
need, and a server stopped meanwhile waits for the kernel being compiled and leaves the rest
uncompiled for the next start. Filling the cache once at install time means every server,
benchmark and test process starts from cached kernels.

    $ python -m hotjoin.server.kernels
    kernels: the engine's (every kind and strategy) ...
    kernels: the engine's: band BJ-QOuter (1/20)
    ...
    kernels: the engine's in 1.9 s; delivery and the wire ...
    kernels: all loaded or compiled in 2.1 s (numba's on-disk cache)
"""

from __future__ import annotations

import os
import sys
import time

from hotjoin.matcher.warmup import warm_up_kernels
from hotjoin.server import convert, delivery, messages


def warm_up_server() -> None:
    """Load (or compile) the server's own kernels: delivery's passes, the chunk builder and the
    wire encoders. The engine's are :func:`hotjoin.matcher.warmup.warm_up_kernels`."""
    delivery.warm_up()
    messages.warm_up()
    convert.warm_up()


def main() -> int:
    """Load or compile every kernel, saying what it does (minutes on a fresh install)."""
    t0 = time.perf_counter()
    print("kernels: the engine's (every kind and strategy) ...", flush=True)
    warm_up_kernels(lambda step: print(f"kernels: the engine's: {step}", flush=True))
    print(f"kernels: the engine's in {time.perf_counter() - t0:.1f} s; delivery and the wire ...",
          flush=True)
    warm_up_server()
    print(f"kernels: all loaded or compiled in {time.perf_counter() - t0:.1f} s (numba's on-disk "
          "cache)", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # piped into a reader that stopped (``| head``): no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
