"""The tests mirror the source: every module with code has its own test module.

A source module ``<folder>/<path>/<name>.py`` (outside ``tests/``; not generated ``_pb2`` code, an
``__init__`` or a ``__main__``) that defines at least one function or class is tested by
``tests/<folder>/<path>/test_<name>.py``, which holds at least one test. A new module without
one fails here. The exceptions are written down in ``ALLOWED``, each with a one-line reason
saying where the module is tested on purpose instead (none today).

Test modules also get distinct import names: ``tests/`` is not a package, so pytest imports two
files named ``test_x.py`` in two folders both as ``test_x`` and stops with "import file
mismatch" unless one of them sits in a package (a folder with ``__init__.py``, as ``tests/cli/``,
``tests/clients/``, ``tests/matcher/`` and ``tests/ops/`` with their sub-folders do).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("proto", "matcher", "server", "clients", "cli", "ops")

# module (path from the repository root) -> why it has no mirrored test module of its own.
# Empty: every module has one.
ALLOWED: dict[str, str] = {
}


def _has_code(path: Path) -> bool:
    """Whether the module defines a function or a class at its top level."""
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return any(isinstance(node, defs) for node in ast.parse(path.read_text()).body)


def source_modules() -> list[str]:
    """Paths (from the repository root) of the hand-written modules that define code."""
    out = []
    for folder in FOLDERS:
        for f in sorted((ROOT / folder).rglob("*.py")):
            if f.name.endswith(("_pb2.py", "_pb2_grpc.py")) or f.name in ("__init__.py",
                                                                          "__main__.py"):
                continue
            if _has_code(f):
                out.append(f.relative_to(ROOT).as_posix())
    return out


def mirrored(module: str) -> Path:
    """The test module that mirrors ``module``.

    >>> mirrored("server/quotas.py").relative_to(ROOT).as_posix()
    'tests/server/test_quotas.py'
    >>> mirrored("matcher/router/band.py").relative_to(ROOT).as_posix()
    'tests/matcher/router/test_band.py'
    """
    path = Path(module)
    return ROOT / "tests" / path.parent / f"test_{path.name}"


def _holds_a_test(path: Path) -> bool:
    """Whether the file defines a ``test_*`` function or a ``Test*`` class (at any depth)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
                "test"):
            return True
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            return True
    return False


def import_name(test_file: Path) -> str:
    """The name pytest's default ("prepend") import mode gives ``test_file``: its stem, prefixed
    by the folders above it that are packages (hold an ``__init__.py``).

    >>> import_name(ROOT / "tests" / "test_layers.py")
    'test_layers'
    """
    parts = [test_file.stem]
    folder = test_file.parent
    while (folder / "__init__.py").exists():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts)


def test_every_module_with_code_has_a_mirrored_test_module() -> None:
    missing = [m for m in source_modules() if m not in ALLOWED and not mirrored(m).exists()]
    assert not missing, (
        "modules without their test module (tests/<folder>/test_<module>.py; or list one in "
        "ALLOWED with the reason it is tested elsewhere):\n"
        + "\n".join(f"  {m} -> {mirrored(m).relative_to(ROOT)}" for m in missing))


def test_each_mirrored_test_module_holds_tests() -> None:
    empty = [mirrored(m).relative_to(ROOT).as_posix() for m in source_modules()
             if mirrored(m).exists() and not _holds_a_test(mirrored(m))]
    assert not empty, f"test modules without a test: {empty}"


def test_the_exceptions_are_current_and_explained() -> None:
    modules = set(source_modules())
    for name, reason in ALLOWED.items():
        assert name in modules, f"ALLOWED lists {name}, which is no module with code"
        assert reason.strip() and "\n" not in reason, f"ALLOWED[{name!r}]: give a one-line reason"


def test_test_modules_have_distinct_import_names() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for f in sorted((ROOT / "tests").rglob("test_*.py")):
        by_name[import_name(f)].append(f.relative_to(ROOT).as_posix())
    clashes = {name: files for name, files in by_name.items() if len(files) > 1}
    assert not clashes, ("test modules pytest would import under one name (put one in a package "
                         f"folder, with an __init__.py): {clashes}")
