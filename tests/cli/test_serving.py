"""Starting and stopping ``hotjoin serve`` in a child process (``cli/serving.py``): a free port
is the preferred one when it can be bound and never the excluded one; a child is stopped with
SIGTERM, and killed when it ignores it; a started server serves on the given port and stops
cleanly."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc

from hotjoin.cli.serving import free_port, start_server, stop_server


def test_the_preferred_port_when_free_else_another_never_the_excluded_one() -> None:
    port, preferred = free_port(0)
    assert preferred and port > 0
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        busy = held.getsockname()[1]
        got, is_preferred = free_port(busy)
        assert got != busy and not is_preferred
        other, _ = free_port(busy, exclude=got)
        assert other not in (busy, got)
    with socket.socket() as s:  # what it returned can be bound
        s.bind(("127.0.0.1", other))


def _child(code: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    return proc


def test_stop_sends_sigterm_then_kills_after_the_timeout() -> None:
    polite = _child("import time; print('ready', flush=True); time.sleep(60)")
    assert stop_server(polite) == -15
    assert stop_server(polite) == -15  # a stopped child: its exit code again
    stubborn = _child("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                      "print('ready', flush=True); time.sleep(60)")
    t0 = time.monotonic()
    assert stop_server(stubborn, timeout=0.5) == -9
    assert time.monotonic() - t0 < 20


def test_a_started_server_serves_on_its_port_and_stops_cleanly(tmp_path: Path) -> None:
    port, _ = free_port(0)
    metrics, _ = free_port(0, exclude=port)
    log = tmp_path / "serve.log"
    proc = start_server(tmp_path / "data", port, metrics, log)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=120)
        assert proc.poll() is None
    finally:
        code = stop_server(proc)
    assert code == 0, log.read_text()
    assert (tmp_path / "data").is_dir()
