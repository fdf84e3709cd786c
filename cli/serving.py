"""Start and stop ``hotjoin serve`` in a child process: the one helper the demo, the benchmarks
and the tests share (``python -m hotjoin.cli serve``, so the child runs the installed command
exactly as a user would).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path


def free_port(preferred: int, exclude: int | None = None) -> tuple[int, bool]:
    """``preferred`` if it can be bound on loopback, else a free port other than ``exclude`` (a
    port picked before but not yet bound: the kernel may hand it out again): ``(port,
    is_preferred)``."""
    for port in (preferred, 0, 0, 0):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            got = s.getsockname()[1]
            if got == exclude:
                continue
            return got, port == preferred or preferred == 0
    raise OSError("no free loopback port")


def start_server(data_dir: Path, port: int, metrics_port: int, log_path: Path,
                 extra: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
    """``hotjoin serve`` in a child process (its output goes to ``log_path``)."""
    cmd = [sys.executable, "-m", "hotjoin.cli", "serve", "--data-dir", str(data_dir),
           "--port", str(port), "--metrics-port", str(metrics_port), *extra]
    with open(log_path, "ab") as log:  # runs where the caller runs: relative paths stay its own
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def stop_server(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
    """SIGTERM (clean shutdown), then SIGKILL after ``timeout`` s; returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return int(proc.returncode)
