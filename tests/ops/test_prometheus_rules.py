"""The Prometheus files in ops/prometheus: config and rules pass ``promtool check``, the alert
rules pass their unit tests (``promtool test rules alerts_test.yml``), every metric an alert uses
is one the server declares, and ``set-targets`` changes the scrape targets. The promtool tests are
skipped only when promtool is missing (``scripts/setup --test`` installs the Debian
``prometheus`` package, which has it)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.metrics_core import Metric

ROOT = Path(__file__).resolve().parents[2]
PROM = ROOT / "ops" / "prometheus"
needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool is missing (scripts/setup --test installs prometheus)")


def promtool(*args: str, cwd: Path = PROM) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@needs_promtool
def test_config_and_rules_are_valid() -> None:
    for args in (("check", "config", "prometheus.yml"), ("check", "rules", "alerts.yml")):
        p = promtool(*args)
        assert p.returncode == 0, p.stdout + p.stderr


@needs_promtool
def test_alert_rule_unit_tests_pass() -> None:
    p = promtool("test", "rules", "alerts_test.yml")
    assert p.returncode == 0 and "SUCCESS" in p.stdout, p.stdout + p.stderr


@needs_promtool
def test_rule_tests_can_fail(tmp_path: Path) -> None:
    """The unit tests check something: a wrong expected annotation makes promtool fail."""
    shutil.copy(PROM / "alerts.yml", tmp_path / "alerts.yml")
    text = (PROM / "alerts_test.yml").read_text()
    assert "p99 publish latency 248ms" in text
    (tmp_path / "t.yml").write_text(text.replace("p99 publish latency 248ms", "p99 publish latency 1s"))
    p = promtool("test", "rules", "t.yml", cwd=tmp_path)
    assert p.returncode != 0 and "HotjoinSlowPublish" in p.stdout + p.stderr


def test_every_alert_has_a_unit_test() -> None:
    alerts = set(re.findall(r"^\s*- alert: (\w+)", (PROM / "alerts.yml").read_text(), re.M))
    tested = set(re.findall(r"alertname: (\w+)", (PROM / "alerts_test.yml").read_text()))
    assert alerts and alerts == tested, (alerts, tested)


def test_every_alert_is_tested_firing_and_quiet() -> None:
    """Each rule has an evaluation where it fires and one where it must stay quiet."""
    text = (PROM / "alerts_test.yml").read_text()
    evals = re.findall(r"alertname: (\w+)\n\s*exp_alerts:( \[\])?", text)
    quiet = {name for name, empty in evals if empty}
    firing = {name for name, empty in evals if not empty}
    alerts = set(re.findall(r"^\s*- alert: (\w+)", (PROM / "alerts.yml").read_text(), re.M))
    assert alerts - quiet == set() and alerts - firing == set(), (alerts - quiet, alerts - firing)


# Metrics that alerts.yml uses before the server code exporting them is merged (the subscriber
# backlog and committed lag per subscriber, the data directory's filesystem, storage write errors
# and damaged topics). Once merged they are found in server/metrics.py as well.
ANNOUNCED = frozenset({
    "hotjoin_data_dir_free_bytes",
    "hotjoin_data_dir_capacity_bytes",
    "hotjoin_storage_write_errors_total",
    "hotjoin_subscriber_backlog_messages",
    "hotjoin_subscriber_committed_lag",
    "hotjoin_topic_damaged",
})
_KINDS = {
    "Counter": "counter", "CounterMetricFamily": "counter",
    "Gauge": "gauge", "GaugeMetricFamily": "gauge", "Enum": "gauge",
    "Histogram": "histogram", "BatchHistogram": "histogram", "HistogramMetricFamily": "histogram",
    "Summary": "summary", "SummaryMetricFamily": "summary",
    "Info": "info", "InfoMetricFamily": "info",
}


def exposed(name: str, kind: str) -> set[str]:
    """The series names a metric of this name and kind exposes (``_created`` is turned off).

    >>> sorted(exposed("hotjoin_worker_restarts", "counter"))
    ['hotjoin_worker_restarts_total']
    >>> sorted(exposed("x_seconds", "histogram"))
    ['x_seconds_bucket', 'x_seconds_count', 'x_seconds_sum']
    """
    if kind == "counter":
        return {name.removesuffix("_total") + "_total"}
    if kind in ("histogram", "gaugehistogram"):
        return {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    if kind == "summary":
        return {name, f"{name}_sum", f"{name}_count"}
    if kind == "info":
        return {name.removesuffix("_info") + "_info"}
    return {name}


def declared_series(data_dir: Path) -> set[str]:
    """Every series name the server can expose: the metric constructors written in
    server/metrics.py with a literal name, and every family the server's collectors yield
    (the registry, and ``EngineCollector`` with ``data_dir``, which also builds names with
    f-strings; families are yielded even without any topic)."""
    from hotjoin.server import metrics

    source = (ROOT / "server" / "metrics.py").read_text()
    names: set[str] = set()
    ctor = "|".join(sorted(_KINDS, key=len, reverse=True))
    for kind, name in re.findall(rf"(?<![\w.])({ctor})\(\s*\"([a-zA-Z_:][a-zA-Z0-9_:]*)\"", source):
        names |= exposed(name, _KINDS[kind])
    families: list[Metric] = [*metrics.REGISTRY.collect(),
                              *metrics.EngineCollector(lambda: iter(()), data_dir).collect()]
    for fam in families:
        names |= exposed(fam.name, fam.type)
    return names


def rule_texts(alerts_yml: str) -> dict[str, str]:
    """Alert name → its ``expr`` and annotations (inline or ``|`` blocks), read line by line."""
    out: dict[str, str] = {}
    current, block_indent = "", -1
    for line in alerts_yml.splitlines():
        if m := re.match(r"\s*- alert: (\w+)", line):
            current, block_indent = m.group(1), -1
            out[current] = ""
            continue
        if not current or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        if block_indent >= 0 and (indent > block_indent or not line.strip()):
            out[current] += line + "\n"
            continue
        block_indent = -1
        if m := re.match(r"(\s*)(expr|summary|description): ?(.*)", line):
            if m.group(3).strip() == "|":
                block_indent = len(m.group(1))
            else:
                out[current] += m.group(3) + "\n"
    return out


def metric_names(text: str) -> set[str]:
    """The hotjoin metric names in a PromQL expression or an annotation (``hotjoin_...``;
    Prometheus' own ``up`` is not checked). Quoted label values are skipped, except inside
    PromQL shown in a description, whose names are read too.

    >>> sorted(metric_names('rate(hotjoin_gaps_total{topic="hotjoin_x"}[5m]) > 0'))
    ['hotjoin_gaps_total']
    """
    return set(re.findall(r"(?<![\w\"])(hotjoin_[a-zA-Z0-9_:]+)", text))


_names = st.from_regex(r"hotjoin_[a-z][a-z0-9_]{0,15}", fullmatch=True)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(_names, _names | st.sampled_from(["trades", "a:9464", ""]),
                          st.sampled_from(["rate(%s[5m])", "%s", "max by (topic) (%s)"])),
                min_size=1, max_size=4))
def test_metric_names_are_the_selectors(parts: list[tuple[str, str, str]]) -> None:
    """Whatever the label values look like, the names read from an expression are exactly its
    metrics (the oracle: the names it was built from)."""
    expr = " + ".join(shape % f'{name}{{topic="{value}"}}' for name, value, shape in parts)
    assert metric_names(expr) == {name for name, _, _ in parts}


def undeclared(alerts_yml: str, declared: set[str]) -> dict[str, set[str]]:
    """Alert name → the metric names it uses that the server does not declare."""
    out = {}
    for alert, text in rule_texts(alerts_yml).items():
        missing = metric_names(text) - declared - ANNOUNCED
        if missing:
            out[alert] = missing
    return out


def test_every_metric_an_alert_uses_is_declared(tmp_path: Path) -> None:
    declared = declared_series(tmp_path)
    # the worker restart count is a counter (hotjoin_worker_restarts_total), not a gauge
    assert "hotjoin_worker_restarts_total" in declared
    assert "hotjoin_worker_restarts" not in declared
    assert {"hotjoin_rpc_requests_total", "hotjoin_publish_duration_seconds_bucket",
            "hotjoin_publish_to_delivery_seconds_bucket", "hotjoin_delivery_buffer_fill_ratio",
            "hotjoin_worker_healthy"} <= declared
    text = (PROM / "alerts.yml").read_text()
    rules = rule_texts(text)
    assert len(rules) == len(re.findall(r"^\s*- alert: ", text, re.M))
    assert all("hotjoin_" in body or "up{" in body for body in rules.values()), rules
    assert undeclared(text, declared) == {}


def test_a_misspelt_metric_in_an_alert_is_caught(tmp_path: Path) -> None:
    declared = declared_series(tmp_path)
    text = (PROM / "alerts.yml").read_text()
    for good, bad in (("hotjoin_worker_healthy", "hotjoin_worker_helthy"),
                      ("hotjoin_worker_restarts_total", "hotjoin_worker_restarts"),
                      ("hotjoin_subscriber_committed_lag", "hotjoin_subscriber_commited_lag"),
                      ("hotjoin_publish_duration_seconds_bucket",
                       "hotjoin_publish_duration_seconds")):
        assert good in text, good
        found = undeclared(text.replace(good, bad), declared)
        assert found and all(names == {bad} for names in found.values()), (bad, found)


@needs_promtool
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
