"""Scale-out of one topic over Ray workers with the single engine's exact results (docs/how-to/scale-out.md).

Import ``hotjoin.server.scaleout.engine`` for ``ShardedEngine``; Ray itself is imported only when a
facade starts its workers.
"""
