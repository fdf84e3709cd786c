"""The Prometheus files in ops/prometheus: config and rules pass ``promtool check``, the alert
rules pass their unit tests (``promtool test rules alerts_test.yml``), and ``set-targets``
changes the scrape targets. Skipped only when promtool is missing (``scripts/setup --test``
installs the Debian ``prometheus`` package, which has it)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROM = ROOT / "ops" / "prometheus"
pytestmark = pytest.mark.skipif(shutil.which("promtool") is None,
                                reason="promtool is missing (scripts/setup --test installs prometheus)")


def promtool(*args: str, cwd: Path = PROM) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_config_and_rules_are_valid() -> None:
    for args in (("check", "config", "prometheus.yml"), ("check", "rules", "alerts.yml")):
        p = promtool(*args)
        assert p.returncode == 0, p.stdout + p.stderr


def test_alert_rule_unit_tests_pass() -> None:
    p = promtool("test", "rules", "alerts_test.yml")
    assert p.returncode == 0 and "SUCCESS" in p.stdout, p.stdout + p.stderr


def test_rule_tests_can_fail(tmp_path: Path) -> None:
    """The unit tests check something: a wrong expected annotation makes promtool fail."""
    shutil.copy(PROM / "alerts.yml", tmp_path / "alerts.yml")
    text = (PROM / "alerts_test.yml").read_text()
    assert "p99 publish latency 248ms" in text
    (tmp_path / "t.yml").write_text(text.replace("p99 publish latency 248ms", "p99 publish latency 1s"))
    p = promtool("test", "rules", "t.yml", cwd=tmp_path)
    assert p.returncode != 0 and "HotjoinSlowPublish" in p.stdout + p.stderr


def test_every_alert_has_a_unit_test() -> None:
    import re

    alerts = set(re.findall(r"^\s*- alert: (\w+)", (PROM / "alerts.yml").read_text(), re.M))
    tested = set(re.findall(r"alertname: (\w+)", (PROM / "alerts_test.yml").read_text()))
    assert alerts and alerts == tested, (alerts, tested)


def test_set_targets_parameterises_the_scrape(tmp_path: Path) -> None:
    work = tmp_path / "prometheus"
    shutil.copytree(PROM, work)
    p = subprocess.run([str(work / "set-targets"), "10.0.0.5:9464", "db-2.example:19464"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    sd = json.loads((work / "targets" / "hotjoin.json").read_text())
    assert sd == [{"targets": ["10.0.0.5:9464", "db-2.example:19464"], "labels": {}}]
    assert promtool("check", "config", "prometheus.yml", cwd=work).returncode == 0
    bad = subprocess.run([str(work / "set-targets"), "no-port"], capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert json.loads((work / "targets" / "hotjoin.json").read_text()) == sd  # unchanged
