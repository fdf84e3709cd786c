"""Prometheus metrics: the SPEC §4 families on /metrics, and a real Prometheus scraping them."""

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

from hotjoin.clients.client import HotjoinClient, band, event
from hotjoin.server.app import HotjoinServer
from hotjoin.server.topic import DeliveryOptions

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
        if msg.WhichOneof("message") == "caught_up":
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(shutil.which("prometheus") is None,
                    reason="Prometheus is not installed (apt-get install -y prometheus; see server/SETUP.md)")
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
