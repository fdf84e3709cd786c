"""Packaging files: license and metadata, the constraints file that pins every
dependency (and that this environment matches), build outputs ignored, deployment recipes that
refer to files which exist."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins() -> dict[str, str]:
    out = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and version, f"not an exact pin: {line!r}"
            out[_norm(name)] = version
    return out


def test_license_and_metadata() -> None:
    assert "Apache License" in (ROOT / "LICENSE").read_text()[:200]
    assert "Version 2.0, January 2004" in (ROOT / "LICENSE").read_text()[:300]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert project["urls"]["Homepage"].startswith("https://")
    meta = importlib.metadata.metadata("hotjoin")
    assert meta["License-Expression"] == "Apache-2.0"


def test_constraints_pin_every_dependency_and_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += [r for r in extra if not r.startswith("hotjoin[")]
    pins = _pins()
    missing = [r for r in reqs if _norm(re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0]) not in pins]
    assert not missing, f"constraints.txt lacks {missing}; run scripts/lock"


def test_environment_has_the_locked_versions() -> None:
    """scripts/setup installs with -c constraints.txt: what is installed is what is pinned."""
    pins = _pins()
    wrong = {}
    for name, version in pins.items():
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            wrong[name] = (version, None)
            continue
        if have != version:
            wrong[name] = (version, have)
    assert not wrong, f"installed versions differ from constraints.txt (pinned, installed): {wrong}"
    assert "-c constraints.txt" in (ROOT / "scripts" / "setup").read_text()


def test_matplotlib_is_an_optional_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(r.startswith("matplotlib") for r in project["dependencies"])
    assert any(r.startswith("matplotlib") for r in project["optional-dependencies"]["plots"])
    assert "plots" in project["optional-dependencies"]["all"][0]  # hotjoin[replay,ray,plots]
    assert "hotjoin[all]" in project["optional-dependencies"]["test"]


def test_build_outputs_are_ignored() -> None:
    ignored = (ROOT / ".gitignore").read_text().splitlines()
    assert "/build/" in ignored and "/dist/" in ignored


def test_deployment_recipes_refer_to_existing_files() -> None:
    unit = (ROOT / "ops" / "deploy" / "hotjoin.service").read_text()
    assert re.search(r"^ExecStart=\S*hotjoin serve ", unit, re.M)
    assert "KillSignal=SIGTERM" in unit and "ExecReload=/bin/kill -HUP $MAINPID" in unit
    recipe = (ROOT / "ops" / "deploy" / "Containerfile").read_text()
    copied = set()
    for src in re.findall(r"^COPY (?!--from)(.+) \S+$", recipe, re.M):
        for path in src.split():
            assert (ROOT / path).exists(), f"Containerfile copies {path}, which does not exist"
            copied.add(path.rstrip("/"))
    import tomllib

    dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    missing = set(dirs.values()) - copied
    assert not missing, f"Containerfile misses the package folders {sorted(missing)}"


def test_readme_stands_alone() -> None:
    """No link out of the repository; every local path the README names exists."""
    text = (ROOT / "README.md").read_text()
    assert "../" not in text
    for path in set(re.findall(r"`((?:ops|server|examples|scripts|docs|matcher|clients|proto)/[\w./-]+)`", text)):
        if "*" not in path:
            assert (ROOT / path.rstrip("/")).exists(), path
