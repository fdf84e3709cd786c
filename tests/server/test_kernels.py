"""``python -m hotjoin.server.kernels`` (what ``scripts/setup`` runs): every kernel of a server
process loaded or compiled in one go into numba's on-disk cache, saying so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from numba.core.dispatcher import Dispatcher

from hotjoin.matcher.engine import STRATEGIES
from hotjoin.server import convert, delivery, match_columns, messages


def test_the_module_loads_every_kernel_and_says_what_it_does() -> None:
    out = subprocess.run([sys.executable, "-m", "hotjoin.server.kernels"], check=True,
                         capture_output=True, text=True, timeout=1800)
    lines = out.stdout.strip().splitlines()
    steps = [(kind, name) for kind, names in STRATEGIES.items() for name in names]
    assert lines[0] == "kernels: the engine's (every kind and strategy) ..."
    assert lines[1:-2] == [f"kernels: the engine's: {kind} {name} ({k}/{len(steps)})"
                           for k, (kind, name) in enumerate(steps, 1)]
    assert lines[-2].startswith("kernels: the engine's in ") and lines[-2].endswith(
        " s; delivery and the wire ...")
    assert lines[-1].startswith("kernels: all loaded or compiled in ")
    assert out.stderr == ""


def test_the_module_piped_into_a_reader_that_stops_exits_without_a_traceback() -> None:
    p = subprocess.Popen([sys.executable, "-m", "hotjoin.server.kernels"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.readline()
    p.stdout.close()  # as ``| head -1`` does
    err = p.stderr.read().decode()
    assert p.wait(1800) == 141 and "Traceback" not in err, err


def test_warm_up_server_fills_the_cache_with_every_delivery_and_wire_kernel(tmp_path: Path) -> None:
    # an empty cache of its own (NUMBA_CACHE_DIR): everything is compiled and written there
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c",
                    "from hotjoin.server.kernels import warm_up_server; warm_up_server()"],
                   check=True, env=env, timeout=1800, cwd=tmp_path)
    cached = {p.name.rsplit("-", 1)[0] for p in tmp_path.rglob("*.nbi")}
    defined = {f"{m.__name__.rsplit('.', 1)[1]}.{v.py_func.__name__}"
               for m in (convert, delivery, match_columns, messages)
               for v in vars(m).values()
               if isinstance(v, Dispatcher) and v.py_func.__module__ == m.__name__}
    assert "delivery._pick_kernel" in defined and "messages._affected_kernel" in defined
    assert cached == defined
