"""The server's scale-out ``engine_factory``: it validates its options up front and builds, per
topic, the engine of the chosen scheme with the topic's options, starting no worker."""

from __future__ import annotations

import pytest

from hotjoin.server.scaleout.engine import ShardedEngine
from hotjoin.server.scaleout.factory import SCHEMES, ShardedEngineFactory
from hotjoin.server.scaleout.key_engine import KeyShardedEngine


def test_factory_validates_like_the_engine_and_starts_no_actor() -> None:
    f = ShardedEngineFactory(2)
    with pytest.raises(ValueError, match="lateness"):
        f(lateness=-1)
    with pytest.raises(ValueError, match="workers"):
        ShardedEngineFactory(0)
    eng = f(lateness=0, retention=None, strategy="auto")
    assert eng.seq == 0 and eng.watermark is None and not eng.workers_info()


@pytest.mark.parametrize("workers", [0, -1])
def test_fewer_than_one_worker_is_refused(workers: int) -> None:
    with pytest.raises(ValueError, match=rf"--workers must be >= 1, got {workers}"):
        ShardedEngineFactory(workers)


@pytest.mark.parametrize("scheme", ["", "Key", "keys", "replicated"])
def test_an_unknown_scheme_is_refused_naming_the_choices(scheme: str) -> None:
    with pytest.raises(ValueError) as err:
        ShardedEngineFactory(2, scheme=scheme)
    msg = str(err.value)
    assert msg.startswith("--scale-out-scheme must be one of subscription, key, key-replicated")
    assert repr(scheme) in msg


def test_the_factory_keeps_its_options() -> None:
    f = ShardedEngineFactory(3, ray_address="ray://head:10001", worker_cpus=0.5, scheme="key")
    assert (f.workers, f.ray_address, f.worker_cpus, f.scheme) == (3, "ray://head:10001", 0.5, "key")
    assert ShardedEngineFactory(1).scheme == "subscription" == SCHEMES[0]


@pytest.mark.parametrize(("scheme", "cls", "replicated"), [
    ("subscription", ShardedEngine, None),
    ("key", KeyShardedEngine, False),
    ("key-replicated", KeyShardedEngine, True),
])
def test_each_scheme_builds_its_engine_with_the_topic_options(
        scheme: str, cls: type, replicated: bool | None) -> None:
    f = ShardedEngineFactory(3, ray_address="auto", worker_cpus=0.25, scheme=scheme)
    eng = f(lateness=4, retention=9, strategy="auto", max_advance=1000)
    try:
        assert type(eng) is cls
        assert (eng.lateness, eng.retention, eng.max_advance) == (4, 9, 1000)
        assert (eng.n_workers, eng.ray_address, eng.worker_cpus) == (3, "auto", 0.25)
        assert eng.seq == 0 and not eng.workers_info()  # no actor started yet
        if replicated is not None:
            assert (eng._replicated is not None) is replicated
    finally:
        eng.close()


def test_each_call_builds_a_new_engine() -> None:
    f = ShardedEngineFactory(2)
    a, b = f(), f()
    try:
        assert a is not b and a.lateness == 0 and a.retention is None and a.max_advance is None
    finally:
        a.close()
        b.close()
