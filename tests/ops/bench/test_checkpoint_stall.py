"""Smoke run of ``python -m hotjoin.ops.bench.checkpoint_stall`` (both parts, tiny sizes)."""

from __future__ import annotations

import json
import subprocess
import sys


def test_checkpoint_stall_smoke() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "hotjoin.ops.bench.checkpoint_stall", "--subs", "2000", "--tuples", "2000",
         "--rate", "400", "--seconds", "2", "--at", "1"],
        capture_output=True, text=True, timeout=300, check=True)
    rec = json.loads(out.stdout.strip().splitlines()[-1])
    eng, srv = rec["engine"], rec["server"]
    assert eng["roundtrip_ok"] is True and eng["subs"] == 2000 and eng["capture_s"] >= 0
    assert srv["checkpoint"]["started"] is True and srv["checkpoint"]["end_unix"] >= srv["checkpoint"]["start_unix"]
    assert srv["batches"] > 0 and srv["window_max_ms"] >= srv["window_p99_ms"] > 0
