"""hotjoin's matching engine: stabbing-set index with hotspot tracking (paper 004).

The server (``server/``) and the Spark replay (``ops/``) both drive this package through
:class:`Engine`; nothing here imports network or Spark code.
"""

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
    Matches,
    Range,
    SelectJoin,
    WindowJoin,
)

__all__ = [
    "Affected", "BandJoin", "BatchError", "BatchOutput", "BatchResult", "Delivery",
    "DuplicateEventError", "Engine", "Event", "EventStatus", "HotjoinError", "LateEventError",
    "Matches", "Range", "SelectJoin", "UnknownEventError", "UnknownSubscriptionError",
    "WindowJoin",
]
