"""``hotjoin bench KIND``: every benchmark is a sub-command, ``--plots`` is checked before any
timing starts, bad arguments are one-line errors, and the printed lines carry the figures."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from hotjoin.cli.main import CliError, main
from hotjoin.ops.bench import command

KINDS = {"band", "storage", "select", "window", "interval", "router", "memory", "batch",
         "histogram", "serve", "replay", "scaleout"}


def _kinds() -> dict[str, argparse.ArgumentParser]:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    command.register(sub)
    bench = sub.choices["bench"]
    (kinds,) = [a for a in bench._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(kinds.choices)


def test_every_benchmark_is_a_kind() -> None:
    assert set(_kinds()) == KINDS


def test_plots_are_checked_before_a_kind_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    wrapped = command._plots_checked(lambda a: ran.append("ran") or 0)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # not installed
    with pytest.raises(CliError, match=r"--plots needs matplotlib.*hotjoin\[plots\]"):
        wrapped(argparse.Namespace(plot_dir="plots"))
    assert ran == []
    assert wrapped(argparse.Namespace(plot_dir=None)) == 0 and wrapped(argparse.Namespace()) == 0
    assert ran == ["ran", "ran"]


def test_every_kind_checks_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    for name, p in _kinds().items():
        func = p.get_default("func")
        if any(a.dest == "plot_dir" for a in p._actions):
            with pytest.raises(CliError, match="--plots needs matplotlib"):
                func(argparse.Namespace(plot_dir="x"))
        else:
            assert func.__name__ == "run", name  # wrapped all the same


@pytest.mark.parametrize(("argv", "message"), [
    (["storage", "--sizes", "1,x"], "--sizes must be comma-separated integers"),
    (["serve", "--subscriptions", "ten"], "--subscriptions must be comma-separated integers"),
    (["serve", "--subscriptions", "0"], "need positive --subscriptions"),
    (["serve", "--duration", "0"], "need positive --subscriptions, --duration"),
    (["serve", "--rate", "-1"], "--rate >= 0"),
    (["serve", "--listeners", "0"], "--listeners must be at least 1"),
    (["serve", "--wire", "smoke"], "--wire must list columns and/or events"),
    (["histogram", "--buckets", "0"], "--buckets needs at least one count >= 1"),
])
def test_bad_arguments_are_one_line(argv: list[str], message: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hotjoin bench: error: ") and message in err and "\n" not in err


def test_storage_prints_and_writes_its_figures(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    js = tmp_path / "out" / "storage.json"
    assert main(["bench", "storage", "--sizes", "2000", "--inserts", "20", "--json", str(js)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("    2,000 keys: single sorted array") and out.rstrip().endswith("per insert")
    (rec,) = json.loads(js.read_text())["records"]
    assert rec["keys"] == 2000 and rec["sorted_runs_us"] > 0


def test_figure_lines() -> None:
    fig11 = command._band_line({"figure": "11", "strategy": "BJ-SSI", "us_per_update": 1.5})
    assert fig11 == "fig 11  BJ-SSI           1.50 us/update"
    line = command._band_line({"figure": "10i", "subscriptions": 1000, "tau_target": 5,
                               "strategy": "BJ-SSI", "identify_tuples_per_s": 10.0,
                               "pairs_tuples_per_s": 5.0, "affected_per_tuple": 2.0,
                               "pairs_per_tuple": 3.0})
    assert line.startswith("fig 10i  n=1000    tau=5     BJ-SSI") and " pairs         5.0/s " in line
    t1 = command._select_line({"figure": "table1", "x": "uniform", "strategy": "SJ-SSI",
                               "identify_tuples_per_s": 1.0, "count_tuples_per_s": 2.0,
                               "affected_per_tuple": 3.0, "count_vs_brute": 4.0,
                               "agrees_with_brute_force": True})
    assert t1.startswith("table1 uniform") and t1.endswith("agrees True")
    f7 = command._select_line({"figure": "7i", "x": 0.5, "subscriptions": 10, "strategy": "s",
                               "identify_tuples_per_s": 1.0, "pairs_tuples_per_s": 2.0,
                               "affected_per_tuple": 3.0, "pairs_per_tuple": 4.0})
    assert f7.startswith("fig 7i   x=0.5      n=10      s")
