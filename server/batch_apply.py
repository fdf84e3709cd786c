"""The server's one call into the engine's batch API (``TopicEngine.publish_batch``).

``apply_publish_batch`` forwards a batch of columns to ``engine.publish_batch``: the compiled
batch path of ``hotjoin.matcher.batch`` (``Engine``), or its fan-out over Ray workers
(``hotjoin.server.scaleout.engine.ShardedEngine``, ``key_engine.KeyShardedEngine``). Column checks
and statuses are the engine's. It is kept as a function of its own because it is the seam
``ops/bench/serve_path.py`` times.
"""

from __future__ import annotations

import numpy as np

from hotjoin.matcher.batch import BatchOutput, BatchResult, EventStatus
from hotjoin.matcher.contract import TopicEngine


def apply_publish_batch(
    engine: TopicEngine,
    sides: np.ndarray,
    ids: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    times: np.ndarray,
    payloads: list[bytes] | None,
    output: str,
    ends: np.ndarray | None = None,
) -> BatchResult:
    """Apply a batch in order exactly as the one-at-a-time calls would; never raises for a
    rejected event (``ValueError`` for mismatched columns or a bad ``output``, before anything
    changes). ``sides``: int8 with 0 = R, 1 = S. ``output``: pairs, affected or none. ``ends``:
    int64 interval ends (``end == time`` for a point), None when every event is a point (the
    engine is then called exactly as before interval events existed)."""
    if ends is None:
        return engine.publish_batch(sides, ids, keys, values, times, payloads, output=output)
    return engine.publish_batch(sides, ids, keys, values, times, payloads, ends=ends,
                                output=output)


__all__ = ["BatchOutput", "BatchResult", "EventStatus", "apply_publish_batch"]
