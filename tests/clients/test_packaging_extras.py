"""A light install: Spark, Ray and matplotlib are extras, the commands that need one say in one
line what to install, ``scripts/run`` installs no Java, and the version is one everywhere."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOTJOIN = str(Path(sys.executable).parent / "hotjoin")
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _names(reqs: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in reqs}


def test_base_install_is_what_client_engine_and_server_need() -> None:
    assert _names(PROJECT["dependencies"]) == {
        "numpy", "numba", "sortedcontainers", "grpcio", "protobuf", "grpcio-health-checking",
        "grpcio-reflection", "prometheus-client", "pyarrow"}
    extras = PROJECT["optional-dependencies"]
    assert _names(extras["replay"]) == {"pyspark"} and _names(extras["ray"]) == {"ray"}
    assert _names(extras["plots"]) == {"matplotlib"}
    assert extras["all"] == ["hotjoin[replay,ray,plots]"]
    assert "hotjoin[all]" in extras["test"]
    readme = (ROOT / "README.md").read_text()
    for extra in ("[replay]", "[ray]", "[plots]", "[all]", "[test]"):
        assert extra in readme, f"the README's dependency table names no {extra}"


def test_setup_installs_every_extra_and_java_only_for_tests() -> None:
    setup = (ROOT / "scripts" / "setup").read_text()
    assert 'extras="[all]"' in setup and 'extras="[all,test]"' in setup
    java = setup[setup.index("java_ok()"):]
    assert re.search(r'if \[ "\$\{1:-\}" = "--test" \] && ! java_ok; then', java), \
        "a Java runtime is installed by scripts/setup --test only"
    run = (ROOT / "scripts" / "run").read_text()
    assert "./scripts/setup\n" in run and "--test" not in run


def _without(module: str, tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``hotjoin ARGV`` with ``module`` hidden (a stub on PYTHONPATH that fails to import)."""
    site = tmp_path / f"no-{module}"
    site.mkdir()
    (site / f"{module}.py").write_text("raise ImportError('hidden by the test')\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([HOTJOIN, *argv], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)


def _one_line(p: subprocess.CompletedProcess[str], *needles: str) -> None:
    err = p.stderr.strip()
    assert p.returncode == 2 and "Traceback" not in err and len(err.splitlines()) == 1, (p.returncode, err)
    for n in needles:
        assert n in err, err


def test_replay_without_pyspark_says_what_to_install(tmp_path: Path) -> None:
    for name in ("events.parquet", "subscriptions.parquet", "topic.json"):
        (tmp_path / name).write_text("")
    p = _without("pyspark", tmp_path, "replay", "--events", "events.parquet", "--subscriptions",
                 "subscriptions.parquet", "--out", "out")
    _one_line(p, "hotjoin replay needs pyspark", "pip install 'hotjoin[replay]'", "--in-process")


def test_serve_workers_without_ray_says_what_to_install(tmp_path: Path) -> None:
    p = _without("ray", tmp_path, "serve", "--workers", "2", "--data-dir", "d", "--port", "0",
                 "--metrics-port", "-1")
    _one_line(p, "--workers needs Ray", "pip install 'hotjoin[ray]'")
    assert not (tmp_path / "d").exists(), "nothing was started"


def test_version_is_one_everywhere() -> None:
    """pyproject, the installed metadata, ``hotjoin --version`` and ``hotjoin_build_info``."""
    want = PROJECT["version"]
    newest = re.search(r"^## \[(\d+\.\d+\.\d+)\]", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert newest and want == newest.group(1), "the newest CHANGELOG release is the version"
    assert importlib.metadata.version("hotjoin") == want, "reinstall: pip install -e ."
    p = subprocess.run([HOTJOIN, "--version"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout == f"hotjoin {want}\n"
    from hotjoin.server import metrics

    value = metrics.REGISTRY.get_sample_value("hotjoin_build_info", {
        "version": want, "python_version": __import__("platform").python_version(),
        "grpc_version": metrics._grpc_version()})
    assert value == 1.0


def test_changelog_has_the_release_and_no_diary() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "## [0.3.0] - 2026-11-27" in text and "## [0.2.0] - 2026-11-27" in text
    assert text.index("## [0.3.0]") < text.index("## [0.2.0]") < text.index("## [0.1.0]")
    assert not re.search(r"\bsessions? \d|\bissue \d|SPEC \u00a7", text)
    for new, old in (("0.3.0", "0.2.0"), ("0.2.0", "0.1.0")):
        release = text[text.index(f"## [{new}]"):text.index(f"## [{old}]")]
        assert re.findall(r"^### (.+)$", release, re.M) == ["Added", "Changed", "Fixed"], new


@pytest.mark.parametrize("path", ["README.md", "CHANGELOG.md", "pyproject.toml", "clients", "cli",
                                  "hotjoin/__init__.py", "matcher/__init__.py", "matcher/model.py"])
def test_no_diary_in_the_product(path: str) -> None:
    files = [ROOT / path] if (ROOT / path).is_file() else sorted((ROOT / path).rglob("*.py"))
    for f in files:
        text = f.read_text()
        assert not re.search(r"\b(session|issue|item) \d+|SPEC \u00a7", text), f
