"""Every query of the Grafana dashboard (ops/grafana/hotjoin.json) against a real Prometheus
scraping a real server during a workload: each one parses and returns series.

The dashboard's variables are replaced as Grafana would with "All" selected (``$topic`` and
``$instance`` by ``.*``, ``$job`` by ``hotjoin``) and ``$__rate_interval`` by 5 s (the scrape
interval here is 1 s).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_harness import engine_factory

from hotjoin.clients.client import HotjoinClient, band, event
from hotjoin.server.app import HotjoinServer

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "ops" / "grafana" / "hotjoin.json"
TOPIC = "dash"


def dashboard_queries() -> list[tuple[str, str]]:
    """``(panel title, expr)`` of every target of every panel."""
    dash = json.loads(DASHBOARD.read_text())
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["expr"]))
    return out


def grafana_substitute(expr: str) -> str:
    return (expr.replace("$__rate_interval", "5s").replace("$topic", ".*")
            .replace("$instance", ".*").replace("$job", "hotjoin"))


def test_dashboard_is_well_formed() -> None:
    dash = json.loads(DASHBOARD.read_text())
    titles = " ".join(p["title"] for p in dash["panels"]).lower()
    for subject in ("published", "latency", "delivery", "gap", "τ", "hotspot", "router", "memory",
                    "disk", "rpc"):
        assert subject in titles, subject
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    assert {v["name"] for v in dash["templating"]["list"]} == {"job", "instance", "topic"}
    assert all(t["datasource"]["uid"] == "${DS_PROMETHEUS}" for p in dash["panels"]
               for t in p.get("targets", []))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def workload(tmp_path: Path) -> Iterator[HotjoinServer]:
    """A server with a band join, a listener that falls behind (gaps), and a publisher sending
    matching, late and duplicate events until the test ends."""
    srv = HotjoinServer(data_dir=tmp_path / "d", port=0, metrics_port=0, buffer_capacity=4,
                        engine_factory=engine_factory()).start()
    c = HotjoinClient(srv.target, timeout=30)
    c.create_topic(TOPIC, lateness=5)
    sid = c.subscribe(TOPIC, band((-1, 1), subscriber="x"))
    stop = threading.Event()

    def publish() -> None:
        t = 100
        while not stop.is_set():
            t += 10
            evs = [event("R", f"r{t}", float(t % 7), 0.0, time=t), event("S", f"s{t}", float(t % 7) + 0.5, 0.0, time=t),
                   event("S", f"late{t}", 1.0, 0.0, time=t - 100), event("R", f"r{t}", 0.0, 0.0, time=t)]
            c.publish(TOPIC, evs)
            stop.wait(0.2)

    def listen() -> None:  # resumes from the start each time: the buffer of 4 has moved on (gaps)
        while not stop.is_set():
            stream = c.listen(TOPIC, subscription_ids=[sid], cursors={sid: 0}, reconnect=False)
            try:
                for msg in stream:
                    if stop.is_set() or msg.kind == "caught_up":
                        break
            finally:
                stream.cancel()
            stop.wait(0.5)

    threads = [threading.Thread(target=f, daemon=True) for f in (publish, listen)]
    for th in threads:
        th.start()
    try:
        yield srv
    finally:
        stop.set()
        for th in threads:
            th.join(10)
        c.close()
        srv.stop(0)


@pytest.mark.skipif(shutil.which("prometheus") is None,
                    reason="Prometheus is not installed (scripts/setup --test installs it)")
def test_every_dashboard_query_returns_data(workload: HotjoinServer, tmp_path: Path) -> None:
    web = _free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: hotjoin\n    static_configs: [{{targets: ['127.0.0.1:{workload.metrics_port}']}}]\n")
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{web}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    router = engine_factory().__name__ == "Engine"  # the oracle stand-in has no router
    # scale-out worker series exist only under `hotjoin serve --workers N`: here their queries
    # must parse; tests/server/scaleout checks the series themselves
    parse_only = {(title, grafana_substitute(expr)) for title, expr in dashboard_queries()
                  if "hotjoin_worker_" in expr}
    pending = {(title, grafana_substitute(expr)) for title, expr in dashboard_queries()
               if router or "router" not in expr} - parse_only
    errors: dict[str, str] = {}
    try:
        deadline = time.monotonic() + 120
        while (pending or parse_only) and time.monotonic() < deadline:
            for title, q in sorted(pending | parse_only):
                url = f"http://127.0.0.1:{web}/api/v1/query?" + urllib.parse.urlencode({"query": q})
                try:
                    body = json.loads(urllib.request.urlopen(url, timeout=5).read())
                except urllib.error.HTTPError as e:  # 400: the query does not parse
                    errors[q] = e.read().decode()
                    pending.discard((title, q))
                    parse_only.discard((title, q))
                    continue
                except OSError:
                    break  # Prometheus is still starting
                assert body["status"] == "success", body
                parse_only.discard((title, q))
                if body["data"]["result"]:
                    pending.discard((title, q))
            time.sleep(1)
    finally:
        proc.terminate()
        proc.wait(10)
    assert not errors, errors
    assert not pending, f"queries without data after 120 s: {sorted(pending)}"
    assert not parse_only, f"queries Prometheus never answered: {sorted(parse_only)}"
