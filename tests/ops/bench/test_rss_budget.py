"""Smoke run of ``python -m hotjoin.ops.bench.rss_budget`` (tiny sizes, a few seconds)."""

from __future__ import annotations

import json
import subprocess
import sys


def test_rss_budget_smoke() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "hotjoin.ops.bench.rss_budget", "--subs", "2000", "--unbounded", "2",
         "--stored", "500", "--rate", "200", "--seconds", "3", "--shutdown-timeout", "5"],
        capture_output=True, text=True, timeout=300, check=True)
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    assert rec["published"] > 0 and rec["rss_max_mib"] >= rec["rss_setup_mib"] * 0.5 > 0
    assert rec["pairs_per_event_unbounded"] == 1000 and rec["listener_messages"] > 0
    assert rec["exit_code"] == 0 and rec["sigterm_exit_s"] < 5 + 30 and not rec["traceback_in_log"]
