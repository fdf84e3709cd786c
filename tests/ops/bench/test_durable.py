"""Smoke runs of ``python -m hotjoin.ops.bench.durable``: the record codec, and one tiny
durable-against-memory-only comparison through two servers."""

from __future__ import annotations

import json
import subprocess
import sys


def _run(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "hotjoin.ops.bench.durable", *args],
                         capture_output=True, text=True, timeout=600, check=True)
    return out.stdout.strip().splitlines()


def test_durable_codec_smoke() -> None:
    recs = [json.loads(line) for line in _run("--codec") if line.startswith("{")]
    sizes = {r["messages"]: r["bytes_per_message"] for r in recs if "messages" in r}
    assert sizes["AFFECTED"] > 0 and sizes["PAIRS, 10 pairs"] > sizes["PAIRS, 1 pair"] > sizes["AFFECTED"]


def test_durable_against_memory_only_smoke() -> None:
    lines = _run("--subscriptions", "500", "--stored", "300", "--duration", "1", "--deliveries", "affected",
                 "--rates", "0", "--no-listener", "--repeat", "1")
    rows = [ln for ln in lines if ln.startswith("| affected")]
    assert len(rows) == 1
    durable, memory = (float(x) for x in rows[0].split("|")[3:5])
    assert durable > 0 and memory > 0
    assert float(rows[0].split("|")[9]) > 0  # the same run's NumPy brute force (docs/benchmarks/index.md#same-run-references)
    assert any('"contender": "numpy_reference"' in ln for ln in lines)
