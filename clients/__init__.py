"""The Python client library of hotjoin: ``Client`` (blocking) and ``AsyncClient`` (asyncio).

One vocabulary with the engine: subscriptions are ``SelectJoin``, ``BandJoin``,
``WindowJoin`` and ``IntervalJoin`` (with its ``allen``/``iseql`` presets) over ``Range`` (their
options ``subscriber``, ``delivery`` and ``snapshot`` are keyword arguments), events are
``Event`` (an interval event with ``end``); all of them import from ``hotjoin`` without loading
the engine's compiled kernels. Results are small frozen dataclasses (``hotjoin.clients.results``),
errors one hierarchy (``hotjoin.clients.errors``: ``NotFound``, ``AlreadyExists``,
``Unavailable``, ... each with ``.code`` and ``.message``, rooted in ``HotjoinError``).

A complete example against a server at ``$HOTJOIN_TARGET`` (else 127.0.0.1:50051; start one
with ``hotjoin serve``):

>>> from hotjoin import BandJoin, Client, Event, Range
>>> from hotjoin.clients import AlreadyExists, CaughtUp, Match
>>> hj = Client()                                                    # doctest: +SKIP
>>> hj.create_topic("quotes", lateness=10).name                      # doctest: +SKIP
'quotes'
>>> try:                                                             # doctest: +SKIP
...     hj.create_topic("quotes")
... except AlreadyExists as e:
...     print(e.code)
ALREADY_EXISTS
>>> sid = hj.subscribe("quotes", BandJoin(b=Range(-1, 1)), subscriber="me")  # doctest: +SKIP
>>> result = hj.publish("quotes", [                                  # doctest: +SKIP
...     Event(side="S", id="s1", key=10.0, value=0.0, time=1),
...     Event(side="R", id="r1", key=9.5, value=0.0, time=2),
...     Event(side="R", id="r0", key=9.0, value=0.0, time=-50)])     # too late: rejected
>>> result.accepted, [(s.id, s.code) for s in result.rejections]      # doctest: +SKIP
(2, [('r0', 'LATE')])
>>> for item in hj.listen("quotes", subscriber="me"):                # doctest: +SKIP
...     if isinstance(item, Match):
...         print(item.subscription_id == sid, item.sign, item.pairs)
...     elif isinstance(item, CaughtUp):
...         break
True 1 (('r1', 's1'),)
>>> hj.close()                                                       # doctest: +SKIP

``listen`` reconnects and resumes by itself; ``listen(..., auto_commit=1.0)`` commits processed
positions on the server, so the next run starts after them (at-least-once;
``hotjoin.clients.streams``). ``publisher()`` streams batches for high rates,
``publish_columns``/``listen_columns`` take and give numpy or Arrow columns
(``hotjoin.clients.columns``). The examples marked ``+SKIP`` need a server: the test suite runs
them against one (``tests/clients/test_examples.py``).

Modules: ``client`` (``Client``), ``aio`` (``AsyncClient``), ``streams`` (``Publisher``,
``MatchStream``), ``convert`` (engine types ⇄ wire; the wire helpers ``band``, ``event``, ...),
``columns``, ``results``, ``errors``, ``channel`` (TLS, token, typed errors).
"""

from hotjoin.clients.aio import AsyncClient, AsyncHotjoinClient
from hotjoin.clients.client import Client, HotjoinClient
from hotjoin.clients.columns import MatchColumns, columns, columns_from_arrow
from hotjoin.clients.convert import band, event, ref, select, window
from hotjoin.clients.errors import (
    Aborted,
    AlreadyExists,
    CallError,
    Cancelled,
    DataLoss,
    DeadlineExceeded,
    FailedPrecondition,
    HotjoinError,
    Internal,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    Unknown,
)
from hotjoin.clients.results import (
    CaughtUp,
    CommittedCursor,
    Cursors,
    DeleteResult,
    DeliveryStats,
    EventRef,
    EventResult,
    Gap,
    ListenItem,
    Match,
    MatchBatch,
    Operation,
    PublishResult,
    SubscriptionInfo,
    Topic,
    TopicStats,
    Unsubscribed,
    WorkerStats,
)
from hotjoin.clients.streams import MatchStream, Publisher
from hotjoin.matcher.model import BandJoin, Event, IntervalJoin, Range, SelectJoin, WindowJoin

__all__ = [
    # clients
    "AsyncClient", "AsyncHotjoinClient", "Client", "HotjoinClient", "MatchStream", "Publisher",
    # the engine's value types the client speaks
    "BandJoin", "Event", "IntervalJoin", "Range", "SelectJoin", "WindowJoin",
    # results and listen items
    "CaughtUp", "CommittedCursor", "Cursors", "DeleteResult", "DeliveryStats", "EventRef",
    "EventResult", "Gap", "ListenItem", "Match", "MatchBatch", "MatchColumns", "Operation",
    "PublishResult", "SubscriptionInfo", "Topic", "TopicStats", "Unsubscribed", "WorkerStats",
    # errors
    "Aborted", "AlreadyExists", "CallError", "Cancelled", "DataLoss", "DeadlineExceeded",
    "FailedPrecondition", "HotjoinError", "Internal", "InvalidArgument", "NotFound",
    "OutOfRange", "PermissionDenied", "ResourceExhausted", "Unauthenticated", "Unavailable",
    "Unimplemented", "Unknown",
    # wire conveniences
    "band", "columns", "columns_from_arrow", "event", "ref", "select", "window",
]
