"""Benchmark plumbing: interleaved timing gives every strategy the same chunks in a rotating
order (or, past its time budget, the fewest items it must measure), progress lines, JSON output
and the plots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.ops.bench.common import (
    Progress,
    interleaved,
    machine,
    plot_bars,
    plot_lines,
    write_json,
)


@given(n_items=st.integers(0, 200), chunks=st.integers(1, 8), names=st.integers(1, 4))
def test_within_budget_every_strategy_processes_every_chunk_in_rotation(
        n_items: int, chunks: int, names: int) -> None:
    calls: list[tuple[str, int, int]] = []
    checked: list[str] = []

    def runner(name: str):  # type: ignore[no-untyped-def]
        def run(lo: int, hi: int) -> int:
            calls.append((name, lo, hi))
            return 2 * (hi - lo)
        return run

    keys = [f"s{i}" for i in range(names)]
    res = interleaved({k: runner(k) for k in keys}, n_items, budget_s=1e9, chunks=chunks,
                      after={keys[0]: lambda: checked.append(keys[0])})
    assert len(calls) == chunks * names
    for c in range(chunks):
        batch = calls[c * names:(c + 1) * names]
        assert [n for n, _, _ in batch] == keys[c % names:] + keys[:c % names]
        assert len({(lo, hi) for _, lo, hi in batch}) == 1
    for k in keys:
        spans = [(lo, hi) for n, lo, hi in calls if n == k]
        assert spans[0][0] == 0 and spans[-1][1] == n_items
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
        assert res[k]["items"] == n_items and res[k]["work"] == 2 * n_items
        assert res[k]["seconds"] >= 0.0
    assert checked == [keys[0]] * chunks


def test_past_its_budget_a_strategy_measures_the_fewest_items() -> None:
    calls: list[tuple[int, int]] = []

    def run(lo: int, hi: int) -> int:
        calls.append((lo, hi))
        return 1

    res = interleaved({"slow": run}, 1000, budget_s=0.0, chunks=5, min_items=3)
    assert calls == [(0, 3)], "no time at all: min_items of the first chunk, then nothing"
    assert res["slow"]["items"] == 3 and res["slow"]["work"] == 1
    assert res["slow"]["per_second"] > 0


def test_progress_lines(capsys: pytest.CaptureFixture[str]) -> None:
    p = Progress(2, "fig")
    p.tty = False
    p.step("first")
    p.step("second")
    p.close()
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" (")[0] for line in lines] == ["[fig] 1/2 first", "[fig] 2/2 second"]
    p = Progress(1, "tty")
    p.tty = True
    p.step("only")
    p.close()
    err = capsys.readouterr().err
    assert err.startswith("\r[tty] 1/1 only") and err.endswith("\n")


def test_write_json_makes_its_folder_and_writes_numpy_floats(tmp_path: Path) -> None:
    import numpy as np

    path = tmp_path / "a" / "b" / "r.json"
    write_json(path, {"x": np.float32(1.5), "m": machine()})
    back = json.loads(path.read_text())
    assert back["x"] == 1.5 and isinstance(back["m"], dict) and back["m"]


def test_plots_are_pngs(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    plot_lines(tmp_path / "l" / "lines.png", "t", "x", "y", {"a": ([1, 10], [1, 100]),
                                                              "b": ([1, 10], [2, 20])})
    plot_bars(tmp_path / "b" / "bars.png", "t", "y", {"a": 1234.0, "b": 0.5})
    for f in (tmp_path / "l" / "lines.png", tmp_path / "b" / "bars.png"):
        assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
