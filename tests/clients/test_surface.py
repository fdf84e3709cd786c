"""The product surface: one import, the same methods on both clients, docstrings everywhere, a
light ``import hotjoin.clients`` (no numba, Spark or Ray)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest

import hotjoin
import hotjoin.clients
from hotjoin.clients import AsyncClient, Client, MatchStream, Publisher

HEAVY = ("numba", "llvmlite", "pyspark", "ray", "hotjoin.matcher.engine", "hotjoin.server")


def _loaded_after(code: str) -> list[str]:
    """The heavy modules a fresh interpreter holds after running ``code``."""
    probe = (f"{code}\nimport json, sys\n"
             f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY[:4]!r} "
             f"or m.startswith({HEAVY[4:]!r}))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("code", [
    "import hotjoin.clients",
    "from hotjoin import Client, AsyncClient, BandJoin, Range, Event, SelectJoin, WindowJoin",
    "import hotjoin.matcher.model, hotjoin.matcher.errors",
    "from hotjoin.matcher import Range, Event, Delivery, Subscription",
    "import hotjoin; hotjoin.Client; dir(hotjoin)",
])
def test_the_client_loads_no_engine_spark_or_ray(code: str) -> None:
    assert _loaded_after(code) == []


def test_importtime_of_the_client_names_no_engine() -> None:
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "import hotjoin.clients"],
                         capture_output=True, text=True, timeout=120)
    modules = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    assert "hotjoin.clients" in modules and "grpc" in modules
    assert not {m for m in modules if m.split(".")[0] in ("numba", "llvmlite", "pyspark", "ray")}


def test_one_obvious_import() -> None:
    from hotjoin import AsyncClient as A
    from hotjoin import Client as C
    from hotjoin import HotjoinClient as H
    from hotjoin.clients.aio import AsyncHotjoinClient
    from hotjoin.clients.client import HotjoinClient

    assert C is Client is H is HotjoinClient and A is AsyncClient is AsyncHotjoinClient
    assert hotjoin.clients.__doc__ and ">>> from hotjoin import" in hotjoin.clients.__doc__
    for name in hotjoin.clients.__all__:
        assert hasattr(hotjoin.clients, name), name
    for pkg in (hotjoin, hotjoin.matcher):
        for name in pkg.__all__:
            assert getattr(pkg, name) is not None and name in dir(pkg), name
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        hotjoin.Nope  # noqa: B018
    assert hotjoin.matcher.Engine.__module__ == "hotjoin.matcher.engine"


def _public(cls: type) -> dict[str, object]:
    return {n: m for n, m in vars(cls).items() if not n.startswith("_") and callable(m)}


def test_both_clients_have_the_same_methods_and_arguments() -> None:
    sync, aio = _public(Client), _public(AsyncClient)
    assert set(sync) - {"publisher"} == set(aio) - {"publish_stream"}
    for name in set(sync) & set(aio):
        s, a = inspect.signature(sync[name]), inspect.signature(aio[name])  # type: ignore[arg-type]
        skip = {"reconnect", "retry_delay", "auto_commit"}  # the blocking MatchStream's own
        sp = [p for p in s.parameters.values() if p.name not in skip]
        ap = [p for p in a.parameters.values() if p.name not in skip]
        assert [(p.name, p.kind, p.default) for p in sp] == [(p.name, p.kind, p.default) for p in ap], name
        assert inspect.iscoroutinefunction(aio[name]) or inspect.isasyncgenfunction(aio[name]), name


@pytest.mark.parametrize("cls", [Client, AsyncClient, Publisher, MatchStream])
def test_every_public_method_has_a_docstring(cls: type) -> None:
    assert cls.__doc__
    missing = [n for n, m in _public(cls).items() if not (m.__doc__ or "").strip()]  # type: ignore[attr-defined]
    assert not missing, f"{cls.__name__}: no docstring on {missing}"
