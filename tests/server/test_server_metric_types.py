"""Metric types of the scrape-time collectors (docs/reference/metrics.md, "Counters and gauges"): counts
of events are counters exposed as ``<name>_total``, so that ``rate()``/``increase()`` and the
alert rules in ops/prometheus/alerts.yml work on them; gauges are never named ``_total``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest

from hotjoin.server import metrics
from hotjoin.server.metrics import EngineCollector


def _scrape(topics: list[tuple[str, dict[str, Any]]]) -> CollectorRegistry:
    reg = CollectorRegistry()
    reg.register(EngineCollector(lambda: iter(topics)))
    return reg


def _worker(i: int, healthy: bool = True, seq: int = 0, memory: int = 0,
            restarts: int = 0) -> dict[str, Any]:
    return {"worker": i, "healthy": healthy, "seq": seq, "memory_bytes": memory,
            "restarts": restarts}


def test_worker_restarts_are_a_counter() -> None:
    reg = _scrape([("t", {"workers": [_worker(0, restarts=0), _worker(1, False, 7, 64, 3)]})])
    text = generate_latest(reg).decode()
    assert "# TYPE hotjoin_worker_restarts_total counter" in text
    assert 'hotjoin_worker_restarts_total{topic="t",worker="1"} 3.0' in text
    assert 'hotjoin_worker_restarts_total{topic="t",worker="0"} 0.0' in text
    assert "hotjoin_worker_restarts{" not in text  # the old gauge is gone
    assert "# TYPE hotjoin_worker_healthy gauge" in text
    assert reg.get_sample_value("hotjoin_worker_healthy", {"topic": "t", "worker": "1"}) == 0.0
    assert reg.get_sample_value("hotjoin_worker_sequence", {"topic": "t", "worker": "1"}) == 7.0
    assert reg.get_sample_value("hotjoin_worker_memory_bytes", {"topic": "t", "worker": "1"}) == 64.0


def test_no_worker_series_without_workers() -> None:
    """A topic without scale-out workers exports no worker series (the families are empty)."""
    text = generate_latest(_scrape([("t", {"seq": 5})])).decode()
    assert "hotjoin_worker_restarts_total{" not in text and "hotjoin_worker_healthy{" not in text
    assert 'hotjoin_topic_sequence{topic="t"} 5.0' in text


workers_strategy = st.lists(
    st.tuples(st.booleans(), st.integers(0, 10**9), st.integers(0, 2**40), st.integers(0, 10**6)),
    max_size=5)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "t-1", "ünï"]), workers_strategy, max_size=3))
def test_worker_series_equal_the_stats(topics: dict[str, list[tuple[bool, int, int, int]]]) -> None:
    """Every worker of every topic appears once per metric with its stats' value, and nothing
    else does (brute force: the expected samples built from the stats directly)."""
    stats = [(name, {"workers": [_worker(i, *w) for i, w in enumerate(ws)]})
             for name, ws in topics.items()]
    got: dict[tuple[str, str, str], float] = {}
    for fam in EngineCollector(lambda: iter(stats)).collect():
        for s in fam.samples:
            if s.name.startswith("hotjoin_worker_"):
                key = (s.name, s.labels["topic"], s.labels["worker"])
                assert key not in got
                got[key] = s.value
    want = {}
    for name, ws in topics.items():
        for i, (healthy, seq, memory, restarts) in enumerate(ws):
            want[("hotjoin_worker_healthy", name, str(i))] = float(healthy)
            want[("hotjoin_worker_sequence", name, str(i))] = float(seq)
            want[("hotjoin_worker_memory_bytes", name, str(i))] = float(memory)
            want[("hotjoin_worker_restarts_total", name, str(i))] = float(restarts)
    assert got == want


def test_counters_end_in_total_and_gauges_do_not(tmp_path: Path) -> None:
    """Over every family the server registers and the per-topic collector yields: a counter's
    samples are ``_total``, a gauge's name never is."""
    fams = [*metrics.REGISTRY.collect(), *EngineCollector(lambda: iter(()), tmp_path).collect()]
    kinds = {f.type for f in fams if f.name.startswith("hotjoin_")}
    assert {"counter", "gauge", "histogram"} <= kinds
    for fam in fams:
        if fam.type == "counter":
            assert not fam.name.endswith("_total"), fam.name  # the client adds the suffix
            assert all(s.name == fam.name + "_total" for s in fam.samples), fam.name
        elif fam.type == "gauge":
            assert not fam.name.endswith(("_total", "_count")), fam.name
