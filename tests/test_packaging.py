"""The repository installs under one namespace, ``hotjoin.*`` (docs/design.md#engine-api), and its doctests run."""

from __future__ import annotations

import doctest
import importlib
import importlib.metadata
import pkgutil
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOP = {"proto": "hotjoin.proto", "matcher": "hotjoin.matcher", "server": "hotjoin.server",
       "clients": "hotjoin.clients", "cli": "hotjoin.cli", "ops": "hotjoin.ops"}


def _package_dirs() -> dict[str, Path]:
    """Every folder with an ``__init__.py`` under the top-level folders, by its hotjoin name."""
    out = {"hotjoin": ROOT / "hotjoin"}
    for folder, name in TOP.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            out[".".join((name, *rel))] = init.parent
    return out


def test_every_package_folder_is_installed() -> None:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert sorted(conf["packages"]) == sorted(_package_dirs())
    assert all(name == "hotjoin" or name.startswith("hotjoin.") for name in conf["packages"])


def test_public_engine_api_from_hotjoin() -> None:
    import hotjoin.matcher
    from hotjoin import (  # noqa: F401  (the import line of docs/design.md)
        BandJoin,
        Delivery,
        DuplicateEventError,
        Engine,
        Event,
        LateEventError,
        Range,
        SelectJoin,
        UnknownEventError,
        WindowJoin,
    )

    assert Engine is hotjoin.matcher.Engine
    e = Engine()
    e.subscribe(SelectJoin(a=Range(0, 10), c=Range(None, 5)))
    e.publish(Event(side="S", id="s1", key=1.0, value=2.0, time=1))
    assert e.publish(Event(side="R", id="r1", key=1.0, value=3.0, time=2)) == [
        Delivery(subscription_id=0, sign=1, r_id="r1", s_id="s1")]


@pytest.mark.parametrize("name", ["matcher", "server", "clients", "cli", "ops"])
def test_no_top_level_package_clashes(name: str) -> None:
    """Installed, nothing but ``hotjoin`` is a top-level package of this distribution."""
    dist = importlib.metadata.distribution("hotjoin")
    top = (dist.read_text("top_level.txt") or "").split()
    assert name not in top
    mod = importlib.import_module(f"hotjoin.{name}")
    assert Path(mod.__file__).resolve().parent == (ROOT / name).resolve()


def _modules() -> list[str]:
    import hotjoin

    names = ["hotjoin"]
    for info in pkgutil.walk_packages(hotjoin.__path__, "hotjoin."):
        names.append(info.name)
    for name in TOP.values():
        pkg = importlib.import_module(name)
        for info in pkgutil.walk_packages(pkg.__path__, name + "."):
            names.append(info.name)
    return sorted(set(names))


def test_doctests() -> None:
    """Every module's doctests pass (the examples in docstrings are real)."""
    failures = attempted = 0
    skipped = ("hotjoin.ops.replay.job",)  # starts Spark on import of its doctest globals: none
    for name in _modules():
        if name.startswith(skipped) or name.endswith(".__main__"):  # runs the command on import
            continue
        mod = importlib.import_module(name)
        res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        failures += res.failed
        attempted += res.attempted
    assert failures == 0
    assert attempted > 10
