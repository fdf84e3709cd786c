"""Fixtures: an in-process hotjoin server on a free loopback port, a client of it, and a topic
with one subscription and one stored tuple."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from server_harness import engine_factory

from hotjoin.clients.client import HotjoinClient, band, event
from hotjoin.server.app import HotjoinServer
from hotjoin.server.settings import DeliveryOptions


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


@pytest.fixture
def memory_client(data_dir: Path) -> Iterator[HotjoinClient]:
    """A client of a server whose delivery messages live in memory only (delivery retention 0):
    the per-subscription buffer bounds (capacity 64) then decide what becomes a Gap."""
    srv = HotjoinServer(data_dir=data_dir, port=0, buffer_capacity=64, engine_factory=engine_factory(),
                        delivery=DeliveryOptions(retention_bytes=0)).start()
    with HotjoinClient(srv.target, timeout=30) as c:
        yield c
    srv.stop(0)


@pytest.fixture
def topic(client: HotjoinClient) -> HotjoinClient:
    """``client`` with topic ``t`` (lateness 5), one band subscription of subscriber ``me`` and
    one stored R tuple."""
    client.create_topic("t", lateness=5)
    client.subscribe("t", band((-1, 1), subscriber="me"))
    client.publish("t", [event("R", "r1", 1.0, 1.0, time=100)])
    return client
