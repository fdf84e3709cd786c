"""Bulk replay of an exported topic log on Apache Spark with the same ``matcher`` engine (docs/how-to/replay.md).

``log`` reads a ``hotjoin export`` into seq-ordered operations with the topic-wide clock;
``sharding`` plans key-range shards (band replication, hot-key splits); ``worker`` runs one shard
through ``matcher.Engine``; ``job`` drives it on Spark (or in process); ``bench`` is
``hotjoin bench replay``. Design and exactness argument: ``docs/how-to/replay.md``.
"""
