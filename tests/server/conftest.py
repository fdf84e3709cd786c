"""Fixtures: an in-process hotjoin server on a free loopback port, and a client of it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from server_harness import engine_factory

from hotjoin.clients.client import HotjoinClient
from hotjoin.server.app import HotjoinServer


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def server(data_dir: Path) -> Iterator[HotjoinServer]:
    srv = HotjoinServer(data_dir=data_dir, port=0, buffer_capacity=64, engine_factory=engine_factory()).start()
    yield srv
    srv.stop(0)


@pytest.fixture
def client(server: HotjoinServer) -> Iterator[HotjoinClient]:
    with HotjoinClient(server.target, timeout=30) as c:
        yield c
