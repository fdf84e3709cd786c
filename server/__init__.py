"""hotjoin's gRPC server: orders each topic's operations, makes them durable, delivers the matches.

The matching itself is ``hotjoin.matcher``'s; this package translates between the wire
(``hotjoin.proto``) and the engine and owns nothing else but ordering, durability and delivery.
In the order an event passes through it:

- ``app.py`` assembles one server process (services, health, reflection, metrics endpoint);
  ``settings.py`` holds the frozen ``TopicSettings`` every topic opens with;
  ``interceptor.py``, ``auth.py``, ``quotas.py``, ``audit.py`` and ``rpc_metrics.py`` guard and
  count each call (``SECURITY.md``).
- ``service.py`` — the thin servicers: decode a request, call a topic, encode the answer;
  ``convert.py`` is the one translation of events and subscriptions to and from the wire
  (publish and recovery alike); ``errors.py`` maps domain errors to gRPC status codes
  (``ERRORS.md``).
- ``registry.py`` — the topics of a server and their directories; ``topic.py`` — one topic:
  the sequence and the apply path (engine, then messages, then durability, then delivery),
  composing the rooms below under one lock:
  - ``book.py`` — the subscription book (metadata and owners of live subscriptions);
  - ``messages.py`` — the engine's output as delivery records (``OpMatches``, ``Chunk``);
    ``batch_apply.py`` is the one call into the engine's batch API;
  - ``durability.py`` — event log and match log, group commit, checkpoints, compaction
    (``PERSISTENCE.md``), over ``log.py`` (framed, fsynced log), ``match_log.py`` (durable
    messages), ``checkpoint.py`` and ``snapshot.py`` (their formats) and ``recovery.py``
    (the log replayed after a restart);
  - ``delivery.py`` — the delivery hub: messages in memory and on disk, and the listeners that
    drain them; ``cursors.py`` — committed cursors.
- ``metrics.py`` declares every Prometheus metric once (``METRICS.md``); ``export.py`` writes a
  topic's log as Parquet for the Spark replay (``EXPORT.md``).
"""
