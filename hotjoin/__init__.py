"""hotjoin: a publish/subscribe server for continuous joins (paper 004, "Input-Sensitive
Scalable Continuous Join Query Processing").

The repository's top-level folders install under this one namespace:

- ``hotjoin.proto``    (``proto/``)    what crosses the wire: the gRPC API and its generated code;
- ``hotjoin.server``   (``server/``)   order, durability and delivery of one topic's operations;
- ``hotjoin.matcher``  (``matcher/``)  who is affected: the engine of paper 004, no network code;
- ``hotjoin.clients``  (``clients/``)  the Python client library and the ``hotjoin`` command;
- ``hotjoin.ops``      (``ops/``)      Spark replay, benchmarks, load tests, Prometheus files.

The engine API of SPEC §7 is re-exported here:

>>> from hotjoin import Engine, Event, Range, BandJoin
>>> engine = Engine()
>>> sid = engine.subscribe(BandJoin(b=Range(-1.0, 1.0)))
>>> _ = engine.publish(Event(side="S", id="s1", key=10.0, value=0.0, time=1))
>>> engine.publish(Event(side="R", id="r1", key=9.5, value=0.0, time=2))
[Delivery(subscription_id=0, sign=1, r_id='r1', s_id='s1')]
"""

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
    LateEventError,
    Matches,
    Range,
    SelectJoin,
    UnknownEventError,
    UnknownSubscriptionError,
    WindowJoin,
)

__all__ = [
    "Affected", "BandJoin", "BatchError", "BatchOutput", "BatchResult", "Delivery",
    "DuplicateEventError", "Engine", "Event", "EventStatus", "HotjoinError", "LateEventError",
    "Matches", "Range", "SelectJoin", "UnknownEventError", "UnknownSubscriptionError",
    "WindowJoin",
]
