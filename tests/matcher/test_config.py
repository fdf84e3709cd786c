"""``matcher.config``: every compiled kernel of the engine (and of ``server/convert.py``) is
built with the one flag set ``JIT``; the only overrides are the named sets ``INLINE`` and
``NO_NRT``, and ``kernel`` applies them on top of ``JIT``."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba.core.dispatcher import Dispatcher

from hotjoin.matcher.config import INLINE, JIT, NO_NRT, kernel

_DEFAULTS = {"nogil": False, "fastmath": False, "error_model": "python"}
"""numba's defaults for the flags :data:`~matcher.config.JIT` states (a decorator that omits
one compiles with these)."""


def _kernels() -> dict[str, Dispatcher]:
    import hotjoin.matcher as pkg

    names = ["hotjoin.server.convert"]
    names += [m.name for m in pkgutil.walk_packages(pkg.__path__, "hotjoin.matcher.")]
    out: dict[str, Dispatcher] = {}
    for name in names:
        for val in vars(importlib.import_module(name)).values():
            if isinstance(val, Dispatcher):
                out[f"{val.py_func.__module__}.{val.py_func.__qualname__}"] = val
    return out


def test_every_kernel_is_compiled_with_the_one_configuration() -> None:
    """Flags as ``config.JIT`` (cached on disk, exact arithmetic); the only overrides are
    ``config.INLINE`` and ``config.NO_NRT``."""
    kernels = _kernels()
    assert len(kernels) > 80
    for name, d in kernels.items():
        opts = {**_DEFAULTS, **d.targetoptions}
        assert {k: opts[k] for k in _DEFAULTS} == {k: JIT[k] for k in _DEFAULTS}, name
        assert type(d._cache).__name__ == "OwnCache", name  # cache=True (on disk, config.OwnCache)
        extra = set(d.targetoptions) - set(JIT) - {"nopython", "boundscheck"}
        assert extra <= {"inline", "_nrt"}, (name, extra)
        assert d.targetoptions.get("inline", "always") == "always", name
        assert d.targetoptions.get("_nrt", False) is False, name


def test_kernel_bare_and_called_compile_with_jit_and_the_overrides_on_top() -> None:
    """Bare, ``kernel`` caches on disk; the kernels compiled here add ``cache=False`` so that
    no test function is cached beside the tests."""
    def add_one(x: float) -> float:
        return x + 1.0

    assert type(kernel(add_one)._cache).__name__ == "OwnCache"  # cache=True (on disk)
    plain = kernel(cache=False)(add_one)
    inlined = kernel(**INLINE, cache=False)(add_one)
    no_runtime = kernel(**NO_NRT, cache=False)(add_one)
    for d in (plain, inlined, no_runtime):
        assert isinstance(d, Dispatcher)
        assert d(2.0) == 3.0
        assert {k: d.targetoptions[k] for k in JIT if k != "cache"} == {
            k: v for k, v in JIT.items() if k != "cache"}
    assert "inline" not in plain.targetoptions and "_nrt" not in plain.targetoptions
    assert inlined.targetoptions["inline"] == "always"
    assert no_runtime.targetoptions["_nrt"] is False


def test_error_model_python_raises_on_division_by_zero() -> None:
    """Exact Python semantics: a kernel dividing by zero raises instead of returning inf."""
    def divide(a: float, b: float) -> float:
        return a / b

    compiled = kernel(cache=False)(divide)
    assert compiled(1.0, 4.0) == 0.25
    with pytest.raises(ZeroDivisionError):
        compiled(np.float64(1.0), np.float64(0.0))


def test_no_engine_module_restates_numba_flags() -> None:
    """The engine's and the server's modules compile through ``config.kernel`` only: none
    calls numba's ``njit``/``jit`` itself (the benchmarks' baselines, written as a user would,
    may)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    offenders = [str(p.relative_to(root)) for folder in ("matcher", "server")
                 for p in sorted((root / folder).rglob("*.py"))
                 if p.name != "config.py" and ("@njit" in p.read_text()
                                               or "@jit" in p.read_text()
                                               or "from numba import njit" in p.read_text())]
    assert not offenders, offenders


_MODULE = '''
from hotjoin.matcher.config import kernel


@kernel
def twice(x):
    return 2 * x
'''


def _call_twice(root: Path, module: str, path: Path) -> subprocess.CompletedProcess[str]:
    code = f"import sys; sys.path.insert(0, {str(path)!r}); import {module} as m; print(m.twice(21))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=root, check=False)


def test_a_kernel_cached_under_another_module_name_is_compiled_again(tmp_path: Path) -> None:
    """A process that imported a kernel's module under one name (a checkout's folder, ``kern``)
    leaves cached code that a process importing it as ``pkg.kern`` cannot load (numba imports
    the writer's module name again): the kernel is compiled again instead of failing, and its
    cache serves both names afterwards."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "kern.py").write_text(_MODULE)
    first = _call_twice(tmp_path, "kern", pkg)  # imported by its folder's name
    assert first.returncode == 0 and first.stdout.strip() == "42", first.stderr
    assert list((pkg / "__pycache__").glob("kern.twice-*.nbi"))  # its code is cached
    for _ in range(2):  # compiled again, then loaded from the entry it rewrote
        again = _call_twice(tmp_path, "pkg.kern", tmp_path)
        assert again.returncode == 0 and again.stdout.strip() == "42", again.stderr
    assert _call_twice(tmp_path, "kern", pkg).stdout.strip() == "42"
