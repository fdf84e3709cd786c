"""Prometheus metrics: the families of docs/reference/metrics.md on /metrics, and a real Prometheus scraping them."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_harness import engine_factory

from hotjoin.clients import NotFound
from hotjoin.clients.client import HotjoinClient, band, event
from hotjoin.server.app import HotjoinServer
from hotjoin.server.settings import DeliveryOptions

TOPIC = "m"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[HotjoinServer, HotjoinClient]]:
    global TOPIC
    TOPIC = f"m{uuid.uuid4().hex[:8]}"
    # messages in memory only (delivery retention 0), so capacity 2 evicts and a gap is counted
    srv = HotjoinServer(data_dir=tmp_path / "d", port=0, metrics_port=0, buffer_capacity=2,
                        engine_factory=engine_factory(),
                        delivery=DeliveryOptions(retention_bytes=0)).start()
    c = HotjoinClient(srv.target)
    c.create_topic(TOPIC, lateness=0)
    sid = c.subscribe(TOPIC, band((-1, 1), subscriber="x"))
    c.publish(TOPIC, [event("R", "r", 0.0, 0.0, time=10), event("S", "s", 0.5, 0.0, time=10),
                    event("S", "late", 0.5, 0.0, time=1), event("S", "s", 0.5, 0.0, time=11)])
    c.publish(TOPIC, [event("S", f"s{i}", 0.5, 0.0, time=20) for i in range(5)])
    stream = c.listen(TOPIC, subscription_ids=[sid])
    for msg in stream:
        if msg.kind == "caught_up":
            break
    stream.cancel()
    yield srv, c
    c.close()
    srv.stop(0)


def _scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def test_metric_families(served: tuple[HotjoinServer, HotjoinClient]) -> None:
    srv, _ = served
    text = _scrape(srv.metrics_port)  # type: ignore[arg-type]
    for line in [
        f'hotjoin_events_published_total{{topic="{TOPIC}"}} 7.0',
        f'hotjoin_events_rejected_total{{reason="late",topic="{TOPIC}"}} 1.0',
        f'hotjoin_events_rejected_total{{reason="duplicate",topic="{TOPIC}"}} 1.0',
        f'hotjoin_matches_total{{topic="{TOPIC}"}} 6.0',
        f'hotjoin_listener_gaps_total{{topic="{TOPIC}"}} 1.0',
        f'hotjoin_deliveries_total{{topic="{TOPIC}"}} 2.0',
        f'hotjoin_subscriptions{{kind="band",topic="{TOPIC}"}} 1.0',
        f'hotjoin_stored_tuples{{side="S",topic="{TOPIC}"}} 6.0',
        f'hotjoin_publish_to_match_seconds_count{{topic="{TOPIC}"}} 7.0',
        f'hotjoin_publish_to_delivery_seconds_count{{topic="{TOPIC}"}} 2.0',
        f'hotjoin_publish_duration_seconds_count{{topic="{TOPIC}"}} 2.0',
    ]:
        assert line in text, line
    # the router (strategy "auto") decided once per matched band tuple: the six S tuples that
    # met a stored R tuple ("late" and the duplicate "s" were rejected before matching)
    decided = [line for line in text.splitlines()
               if line.startswith("hotjoin_router_decisions_total{") and f'topic="{TOPIC}"' in line]
    if engine_factory().__name__ == "Engine":
        assert sum(float(line.rsplit(" ", 1)[1]) for line in decided) == 6.0, decided
        assert any('strategy="BJ-' in line for line in decided)
        corr = [line for line in text.splitlines()
                if line.startswith("hotjoin_router_correction{") and f'topic="{TOPIC}"' in line]
        assert any('strategy="BJ-SSI"' in line and 'side="R"' in line for line in corr), corr
        assert all(float(line.rsplit(" ", 1)[1]) > 0 for line in corr), corr
    if shutil.which("promtool"):
        lint = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True)
        assert lint.returncode == 0, lint.stdout.decode() + lint.stderr.decode()


def _values(text: str) -> dict[str, float]:
    """``series -> value`` of an exposition (comments skipped)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            out[series] = float(value)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(shutil.which("prometheus") is None,
                    reason="Prometheus is not installed (apt-get install -y prometheus; see docs/getting-started/install.md)")
def test_real_prometheus_scrapes_hotjoin(served: tuple[HotjoinServer, HotjoinClient], tmp_path: Path) -> None:
    srv, _ = served
    web = _free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: hotjoin\n    static_configs: [{{targets: ['127.0.0.1:{srv.metrics_port}']}}]\n"
    )
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{web}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        q = urllib.parse.urlencode({"query": f'hotjoin_events_published_total{{topic="{TOPIC}"}}'})
        deadline = time.monotonic() + 60
        result: list = []
        while time.monotonic() < deadline:
            try:
                body = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{web}/api/v1/query?{q}", timeout=5).read())
                result = body["data"]["result"]
                if result:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        assert result, "Prometheus never scraped hotjoin"
        assert result[0]["metric"]["job"] == "hotjoin"
        assert float(result[0]["value"][1]) == 7.0
    finally:
        proc.terminate()
        proc.wait(10)


def test_process_build_rpc_and_storage_metrics(served: tuple[HotjoinServer, HotjoinClient]) -> None:
    """Process metrics, build info, per-RPC counts and latency by method and status
    code, bytes on disk, buckets past 10 s, and no ``_created`` series."""
    srv, c = served
    before = _values(_scrape(srv.metrics_port))  # type: ignore[arg-type]
    with pytest.raises(NotFound):
        c.stats("no-such-topic")
    c.publish(TOPIC, [event("R", "rpc1", 5.0, 0.0, time=30)])
    text = _scrape(srv.metrics_port)  # type: ignore[arg-type]
    after = _values(text)
    lines = text.splitlines()

    def delta(series: str) -> float:
        return after.get(series, 0.0) - before.get(series, 0.0)

    for prefix in ("process_resident_memory_bytes ", "process_cpu_seconds_total ",
                   "process_open_fds ", "python_info{"):
        assert any(line.startswith(prefix) for line in lines), prefix
    build = [line for line in lines if line.startswith("hotjoin_build_info{")]
    assert len(build) == 1 and build[0].endswith(" 1.0") and 'version="' in build[0], build
    # counters are per process (other tests' servers count too): compare before and after
    assert delta('hotjoin_rpc_requests_total{code="OK",method="PublishService/Publish"}') == 1
    assert delta('hotjoin_rpc_requests_total{code="NOT_FOUND",method="StatsService/GetTopicStats"}') == 1
    assert delta('hotjoin_rpc_duration_seconds_count{method="PublishService/Publish"}') == 1
    # Listen streams are counted when they end, not timed; the one above was cancelled
    assert any(line.startswith('hotjoin_rpc_requests_total{code="CANCELLED",method="ListenService/Listen"}')
               or line.startswith('hotjoin_rpc_requests_total{code="OK",method="ListenService/Listen"}')
               for line in lines), [x for x in lines if "Listen" in x]
    assert not any(line.startswith('hotjoin_rpc_duration_seconds_count{method="ListenService/Listen"')
                   for line in lines)
    log_bytes = [line for line in lines
                 if line.startswith(f'hotjoin_storage_bytes{{kind="log",topic="{TOPIC}"}}')]
    assert len(log_bytes) == 1 and float(log_bytes[0].rsplit(" ", 1)[1]) > 0, log_bytes
    assert f'hotjoin_publish_to_delivery_seconds_bucket{{le="60.0",topic="{TOPIC}"}} 2.0' in lines
    assert f'hotjoin_publish_to_delivery_seconds_bucket{{le="120.0",topic="{TOPIC}"}} 2.0' in lines
    assert not [line for line in lines if "_created" in line]
