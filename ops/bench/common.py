"""Shared benchmark plumbing: machine description, progress lines, interleaved timing, output.

Strategies are always timed side by side in one run: the events of a point are cut into
chunks and every strategy processes chunk ``c`` before any processes chunk ``c + 1`` (in a
rotating order), so a noisy neighbour on a shared machine slows all of them alike.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hotjoin.matcher.router.calibrate import (
    machine as machine,  # re-exported: what the figures ran on
)


class Progress:
    """One-line progress on stderr for long runs (a line per step when stderr is not a tty)."""

    def __init__(self, total: int, label: str) -> None:
        self.total, self.label, self.done, self.t0 = total, label, 0, time.perf_counter()
        self.tty = sys.stderr.isatty()

    def step(self, what: str) -> None:
        self.done += 1
        el = time.perf_counter() - self.t0
        msg = f"[{self.label}] {self.done}/{self.total} {what} ({el:.0f}s)"
        if self.tty:
            print("\r" + msg.ljust(100), end="", file=sys.stderr, flush=True)
        else:
            print(msg, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.tty:
            print(file=sys.stderr)


def interleaved(runners: dict[str, Callable[[int, int], int]], n_items: int,
                budget_s: float, chunks: int = 5, min_items: int = 2,
                after: dict[str, Callable[[], None]] | None = None) -> dict[str, dict[str, float]]:
    """Time ``runner(lo, hi)`` (processes items lo..hi-1, returns work done) for each strategy.

    Items are cut into ``chunks``; a strategy stops taking chunks once it has used
    ``budget_s`` seconds (so a slow baseline is measured on fewer items, never skipped).
    ``after[name]()``, when given, runs after each of that runner's chunks, outside the clock
    (checking the outputs a runner kept). Returns per strategy: items, seconds, items/s, and
    the summed work counter.
    """
    names = list(runners)
    bounds = np.linspace(0, n_items, chunks + 1).astype(int)
    res = {n: {"items": 0, "seconds": 0.0, "work": 0} for n in names}
    for c in range(chunks):
        order = names[c % len(names):] + names[: c % len(names)]
        for name in order:
            r = res[name]
            if r["seconds"] >= budget_s and r["items"] >= min_items:
                continue
            lo, hi = int(bounds[c]), int(bounds[c + 1])
            if r["seconds"] >= budget_s / chunks * 2 and r["items"] < min_items:
                hi = min(hi, lo + min_items)
            t = time.perf_counter()
            r["work"] += runners[name](lo, hi)
            r["seconds"] += time.perf_counter() - t
            r["items"] += hi - lo
            if after is not None and name in after:
                after[name]()
    for r in res.values():
        r["per_second"] = r["items"] / r["seconds"] if r["seconds"] > 0 else float("nan")
    return res


def write_json(path: str | Path, payload: dict[str, Any]) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(payload, indent=1, default=float))


def plot_lines(path: str | Path, title: str, xlabel: str, ylabel: str,
               series: dict[str, tuple[Sequence[float], Sequence[float]]],
               logx: bool = True, logy: bool = True) -> None:
    """One line per strategy (matplotlib, Agg backend, PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, (xs, ys) in series.items():
        ax.plot(xs, ys, marker="o", label=name)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_bars(path: str | Path, title: str, ylabel: str, values: dict[str, float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6.4, 1.1 * len(values)), 4.6))
    ax.bar(list(values), list(values.values()), color="tab:blue")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.tick_params(axis="x", labelrotation=25)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
    for i, v in enumerate(values.values()):
        ax.annotate(f"{v:,.0f}" if v >= 100 else f"{v:.2f}", (i, v), ha="center", va="bottom",
                    fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
