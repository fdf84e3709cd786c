"""``hotjoin demo --data-dir DIR``: a relative DIR is where the command runs, kept afterwards, and
the banner names it as an absolute path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HOTJOIN = str(Path(sys.executable).parent / "hotjoin")


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
