"""``hotjoin demo`` end to end with small sizes (a server child process, subscribe, publish,
listen) and its ``--data-dir``: a relative DIR is where the command runs, kept afterwards, and
the banner names it as an absolute path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
HOTJOIN = str(Path(sys.executable).parent / "hotjoin")


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


def test_demo_data_dir_is_relative_to_where_it_runs(tmp_path: Path) -> None:
    p = subprocess.run(
        [HOTJOIN, "demo", "--subscriptions", "200", "--stored", "100", "--events", "50",
         "--show", "0", "--port", "0", "--metrics-port", "0", "--data-dir", "demo-data"],
        cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"data in {tmp_path / 'demo-data'}" in p.stdout.splitlines()[0]
    assert (tmp_path / "demo-data" / "topics" / "demo" / "log").is_file(), "kept where it ran"
    assert [x.name for x in tmp_path.iterdir() if x.name.startswith("demo-server-")], \
        "the server's log lies beside the data directory"
