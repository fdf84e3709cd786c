"""``hotjoin demo`` end to end with small sizes: server child process, subscribe, publish, listen."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_demo_runs_end_to_end_and_prints_matches(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hotjoin.cli.main", "demo", "--subscriptions", "2000", "--stored", "1000",
         "--events", "300", "--affected", "20", "--show", "5", "--port", "0", "--metrics-port", "0",
         "--data-dir", str(tmp_path / "data")],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert out.count("listener: sub ") >= 1
    received = next(line for line in out.splitlines() if line.startswith("listener received"))
    assert int(received.split()[2]) > 0
    assert "published 300 R tuples" in out and "tau {" in out and "hotspots {" in out
    assert "server stopped (exit code 0)" in out
    assert (tmp_path / "data" / "topics" / "demo" / "log").exists()
