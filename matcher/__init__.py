"""hotjoin's matching engine: stabbing-set index with hotspot tracking (paper 004).

The server (``server/``) and the Spark replay (``ops/``) both drive this package through
:class:`Engine`; nothing here imports network or Spark code.

The names below are re-exported lazily (PEP 562): ``from hotjoin.matcher import Range`` loads
only ``matcher/model.py`` (numpy, no numba), ``from hotjoin.matcher import Engine`` loads the
engine and its compiled kernels. So the client library, which speaks the engine's value types
(``Range``, ``Event``, ``SelectJoin``, ``BandJoin``, ``WindowJoin``, ``IntervalJoin``), never pays for numba.

>>> import hotjoin.matcher as m
>>> m.Range(0, 1).contains(1.0), "Engine" in dir(m)
(True, True)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> the submodule that defines it (imported on first access).
_EXPORTS: dict[str, str] = {
    "BatchOutput": "batch", "BatchResult": "batch", "EventStatus": "batch",
    "Engine": "engine",
    "BatchError": "errors", "DuplicateEventError": "errors", "HotjoinError": "errors",
    "LateEventError": "errors", "UnknownEventError": "errors",
    "UnknownSubscriptionError": "errors",
    "Affected": "model", "BandJoin": "model", "Delivery": "model", "Event": "model",
    "IntervalJoin": "model", "Matches": "model", "Range": "model", "SelectJoin": "model", "Subscription": "model",
    "WindowJoin": "model",
}

__all__ = [
    "Affected", "BandJoin", "BatchError", "BatchOutput", "BatchResult", "Delivery",
    "DuplicateEventError", "Engine", "Event", "EventStatus", "HotjoinError", "IntervalJoin",
    "LateEventError", "Matches", "Range", "SelectJoin", "Subscription", "UnknownEventError",
    "UnknownSubscriptionError", "WindowJoin",
]

if TYPE_CHECKING:  # for type checkers and IDEs; at run time __getattr__ imports on demand
    from hotjoin.matcher.batch import BatchOutput, BatchResult, EventStatus
    from hotjoin.matcher.engine import Engine
    from hotjoin.matcher.errors import (
        BatchError,
        DuplicateEventError,
        HotjoinError,
        LateEventError,
        UnknownEventError,
        UnknownSubscriptionError,
    )
    from hotjoin.matcher.model import (
        Affected,
        BandJoin,
        Delivery,
        Event,
        IntervalJoin,
        Matches,
        Range,
        SelectJoin,
        Subscription,
        WindowJoin,
    )


def __getattr__(name: str) -> Any:
    """Import the submodule defining ``name`` on first access (PEP 562); O(1) afterwards, as
    the value is cached in the module's namespace."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hotjoin.matcher' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"hotjoin.matcher.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, lazy exports included (for ``dir()`` and completion)."""
    return sorted(set(globals()) | set(__all__))
