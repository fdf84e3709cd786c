"""Fixtures of the client tests: an in-process server on a free loopback port, and both clients.

``api`` parametrizes a test over the blocking ``Client`` and the ``AsyncClient``
(``tests/client_harness.py``): one test body checks both surfaces.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_harness import Api
from server_harness import engine_factory

from hotjoin.server.app import HotjoinServer

_names = itertools.count()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[HotjoinServer]:
    srv = HotjoinServer(data_dir=tmp_path / "data", port=0, buffer_capacity=64,
                        engine_factory=engine_factory()).start()
    yield srv
    srv.stop(0)


@pytest.fixture
def topic() -> str:
    """A topic name no other test of the run uses."""
    return f"t{next(_names)}"


@pytest.fixture(params=["sync", "aio"])
def api(request: pytest.FixtureRequest, server: HotjoinServer) -> Iterator[Api]:
    """The blocking and the asyncio client of ``server``, one per parametrized run."""
    a = Api(request.param, server.target)
    yield a
    a.close()
