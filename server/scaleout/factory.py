"""The server's ``engine_factory`` for ``hotjoin serve --workers N``: one scale-out engine per
topic, of the scheme ``--scale-out-scheme`` names (docs/how-to/scale-out.md). It is the one module that
knows both engines, so ``engine.py`` and ``key_engine.py`` import each other nowhere."""

from __future__ import annotations

from collections.abc import Mapping

from hotjoin.server.scaleout.engine import ShardedEngine
from hotjoin.server.scaleout.key_engine import KeyShardedEngine

SCHEMES = ("subscription", "key", "key-replicated")
"""``--scale-out-scheme``: subscription-partitioned (every worker stores every tuple and a share
of the subscriptions), key-partitioned (every worker holds every subscription; tuples by join key,
S replicated once a band join subscribes), or key-replicated (S replicated from the start, R
spread round robin: hot keys split)."""


class ShardedEngineFactory:
    """``engine_factory`` for the server (an ``EngineFactory`` of ``hotjoin.matcher.contract``):
    each topic gets a scale-out engine of ``workers``, a ``TopicEngine`` like ``Engine``."""

    def __init__(self, workers: int, ray_address: str | None = None, worker_cpus: float = 0,
                 scheme: str = "subscription") -> None:
        if workers < 1:
            raise ValueError(f"--workers must be >= 1, got {workers}")
        if scheme not in SCHEMES:
            raise ValueError(f"--scale-out-scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")
        self.workers = workers
        self.ray_address = ray_address
        self.worker_cpus = worker_cpus
        self.scheme = scheme

    def __call__(self, lateness: int = 0, retention: int | None = None,
                 strategy: str | Mapping[str, str] = "auto",
                 max_advance: int | None = None) -> ShardedEngine:
        """A topic's scale-out engine with the topic's options (as ``Engine``'s)."""
        if self.scheme != "subscription":
            return KeyShardedEngine(lateness, retention, strategy, workers=self.workers,
                                    ray_address=self.ray_address, worker_cpus=self.worker_cpus,
                                    replicate=self.scheme == "key-replicated",
                                    max_advance=max_advance)
        return ShardedEngine(lateness, retention, strategy, workers=self.workers,
                             ray_address=self.ray_address, worker_cpus=self.worker_cpus,
                             max_advance=max_advance)

