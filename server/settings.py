"""The options every topic of a server opens with, as one frozen object (``TopicSettings``).

They come from the command line (``hotjoin serve``) through ``HotjoinServer`` and
``TopicRegistry`` to each ``Topic`` unchanged; a topic's own options (lateness, retention,
strategy, delivery retention) live in its ``topic.json`` instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from hotjoin.matcher.contract import EngineFactory
from hotjoin.matcher.engine import Engine
from hotjoin.server.delivery import BUFFER_BYTES, LINGER_MS, LISTENER_BYTES
from hotjoin.server.match_log import RETENTION_BYTES, RETENTION_MS, SEGMENT_BYTES

COMPACT_MIN_BYTES = 64 << 20
COMPACT_RATIO = 2.0
CHECKPOINT_MIN_OPS = 200_000


@dataclass(frozen=True, slots=True)
class DeliveryOptions:
    """Delivery bounds of a topic (docs/reference/persistence.md "Durable delivery"): the match log's
    retention (``retention_bytes`` 0 turns the match log off: messages live in memory only;
    ``retention_ms`` −1: no time limit), its segment size, the memory ring's and one listener
    drain's bytes, and ``linger_ms``: the longest a Listen stream waits before a drain while the
    server is saturated (0: never; docs/explanation/choices.md, "Delivery under load")."""

    retention_bytes: int = RETENTION_BYTES
    retention_ms: int = RETENTION_MS
    segment_bytes: int = SEGMENT_BYTES
    buffer_bytes: int = BUFFER_BYTES
    listener_bytes: int = LISTENER_BYTES
    linger_ms: int = LINGER_MS


@dataclass(frozen=True, slots=True)
class TopicSettings:
    """The server-wide options every topic opens with: one object from the command line through
    ``HotjoinServer`` and ``TopicRegistry`` to ``Topic``.

    ``engine_factory`` builds each topic's engine (an ``EngineFactory`` of
    ``hotjoin.matcher.contract``: ``matcher.Engine``, or ``ShardedEngineFactory``); ``sync``: fsync
    the log (group commit); ``buffer_capacity`` / ``buffer_max_pairs``: per-subscription bounds
    when messages live in memory only; ``compact_*`` and ``checkpoint_min_ops``: log compaction and
    checkpoints (docs/reference/persistence.md); ``delivery``: the match log's and buffers' bounds.
    """

    engine_factory: EngineFactory = Engine
    buffer_capacity: int = 1024
    buffer_max_pairs: int = 100_000
    sync: bool = True
    compact_min_bytes: int = COMPACT_MIN_BYTES
    compact_ratio: float = COMPACT_RATIO
    compact_all: bool = False
    checkpoint_min_ops: int = CHECKPOINT_MIN_OPS
    delivery: DeliveryOptions = DeliveryOptions()


DEFAULT_SETTINGS = TopicSettings()

__all__ = ["DEFAULT_SETTINGS", "DeliveryOptions", "EngineFactory", "TopicSettings"]
