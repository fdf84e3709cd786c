"""``hotjoin bench replay --quick``: the benchmark runs end to end and reports what it measured.

In process (one JVM for the whole test session: the Spark test module reuses it). The numbers of a
smoke run mean nothing; the test checks that every run replayed the whole log, delivered the same
pairs as the single-process engine (the bench itself compares the outputs) and that the ratios
the issue asks for are computed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

if shutil.which("java") is None and not __import__("os").environ.get("JAVA_HOME"):
    pytest.skip("no Java runtime (scripts/setup installs one)", allow_module_level=True)


def test_bench_replay_quick(tmp_path: Path, capsys: Any) -> None:
    from hotjoin.cli.main import main

    out = tmp_path / "replay.json"
    md = tmp_path / "replay.md"
    assert main(["bench", "replay", "--quick", "--json", str(out), "--markdown", str(md)]) == 0
    res = json.loads(out.read_text())
    runs = {r["run"]: r for r in res["records"]}
    assert set(runs) == {"single-process", "spark local[1]", "spark local[2]"}
    deliveries = {r["deliveries"] for r in runs.values()}
    assert len(deliveries) == 1 and deliveries.pop() > 1000  # same output, and a real workload
    assert all(r["events_per_s"] > 0 for r in runs.values())
    assert runs["spark local[2]"]["cells"] == 2 and runs["spark local[1]"]["cells"] == 1
    assert res["log"]["publishes"] == 20_000 and res["log"]["deletes"] > 0
    ratios = res["ratios"]
    assert ratios["speedup_1_to_2_cores"] > 0 and ratios["spark_1_core_over_single_process"] > 0
    assert "Speed-up 1 → 2 cores" in md.read_text()
    assert "| spark local[2] |" in capsys.readouterr().out
