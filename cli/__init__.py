"""The ``hotjoin`` command line (``cli/main.py``) and its sub-commands (``cli/commands/``).

One console command, ``hotjoin``, with sub-commands: ``serve`` runs the server; ``topic``,
``subscribe``, ``publish``, ``listen``, ``cursors``, ``stats`` … talk to a running one through the
client library (``hotjoin.clients``); ``export``, ``restore`` and ``topic inspect|repair`` work on
a data directory. ``serving.py`` starts and stops ``hotjoin serve`` in a child process for the
demo, the benchmarks and the tests. The ops tooling (``bench``, ``replay``, ``calibrate``) adds
its sub-commands through the ``hotjoin.commands`` entry points, so this package imports nothing
from ``hotjoin.ops``: layers point one way (proto → matcher → server → clients, cli → ops).
"""
