"""hotjoin: a publish/subscribe server for continuous joins (paper 004, "Input-Sensitive
Scalable Continuous Join Query Processing").

The repository's top-level folders install under this one namespace:

- ``hotjoin.proto``    (``proto/``)    what crosses the wire: the gRPC API and its generated code;
- ``hotjoin.server``   (``server/``)   order, durability and delivery of one topic's operations;
- ``hotjoin.matcher``  (``matcher/``)  who is affected: the engine of paper 004, no network code;
- ``hotjoin.clients``  (``clients/``)  the Python client library (blocking and asyncio);
- ``hotjoin.cli``      (``cli/``)      the ``hotjoin`` command;
- ``hotjoin.ops``      (``ops/``)      Spark replay, benchmarks, load tests, Prometheus files.

The client and the engine API are re-exported here, lazily (PEP 562): ``from hotjoin import
Client`` loads the client library only (grpc, protobuf, numpy; no numba, Spark or Ray), and
``from hotjoin import Engine`` loads the engine with its compiled kernels.

>>> from hotjoin import Engine, Event, Range, BandJoin
>>> engine = Engine()
>>> sid = engine.subscribe(BandJoin(b=Range(-1.0, 1.0)))
>>> _ = engine.publish(Event(side="S", id="s1", key=10.0, value=0.0, time=1))
>>> engine.publish(Event(side="R", id="r1", key=9.5, value=0.0, time=2))
[Delivery(subscription_id=0, sign=1, r_id='r1', s_id='s1')]

The same ``BandJoin``, ``Range`` and ``Event`` are what the client sends
(docs/how-to/python-client.md; ``hotjoin.clients``).
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

# numba highlights its error messages with colorama, which swaps sys.stdout and sys.stderr for
# wrappers and back, from whichever thread builds a message, including the kernels' background
# warm-up (matcher/warmup.py) while other threads print: output went to a stale stream. Set
# before numba is first imported; its message colours are off by default anyway.
os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")

# name -> the module that defines it (imported on first access).
_EXPORTS: dict[str, str] = {
    **{name: "hotjoin.matcher" for name in (
        "Affected", "BandJoin", "BatchError", "BatchOutput", "BatchResult", "Delivery",
        "DuplicateEventError", "Engine", "Event", "EventStatus", "HotjoinError", "IntervalJoin",
        "LateEventError", "Matches", "Range", "SelectJoin", "Subscription", "UnknownEventError",
        "UnknownSubscriptionError", "WindowJoin")},
    **{name: "hotjoin.clients" for name in ("AsyncClient", "Client", "HotjoinClient")},
}

__all__ = [
    "Affected", "AsyncClient", "BandJoin", "BatchError", "BatchOutput", "BatchResult", "Client",
    "Delivery", "DuplicateEventError", "Engine", "Event", "EventStatus", "HotjoinClient",
    "HotjoinError", "IntervalJoin", "LateEventError", "Matches", "Range", "SelectJoin", "Subscription",
    "UnknownEventError", "UnknownSubscriptionError", "WindowJoin",
]
_PACKAGES = frozenset({"proto", "server", "matcher", "clients", "cli", "ops"})

if TYPE_CHECKING:  # for type checkers and IDEs; at run time __getattr__ imports on demand
    from hotjoin.clients import AsyncClient, Client, HotjoinClient
    from hotjoin.matcher import (
        Affected,
        BandJoin,
        BatchError,
        BatchOutput,
        BatchResult,
        Delivery,
        DuplicateEventError,
        Engine,
        Event,
        EventStatus,
        HotjoinError,
        IntervalJoin,
        LateEventError,
        Matches,
        Range,
        SelectJoin,
        Subscription,
        UnknownEventError,
        UnknownSubscriptionError,
        WindowJoin,
    )


def __getattr__(name: str) -> Any:
    """Import what defines ``name`` on first access (PEP 562); cached afterwards."""
    if name in _PACKAGES:  # ``import hotjoin; hotjoin.matcher`` works as before
        return importlib.import_module(f"hotjoin.{name}")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hotjoin' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, lazy exports included (for ``dir()`` and completion)."""
    return sorted(set(globals()) | set(__all__))
