"""Every example runs: the README's Python blocks, and the docstring examples of the client that
need a server (marked ``+SKIP``, so ``tests/test_packaging.py::test_doctests`` leaves them out),
each against a fresh server at ``$HOTJOIN_TARGET``. A ``print`` line's trailing comment in the
README is the output it must print."""

from __future__ import annotations

import contextlib
import doctest
import importlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULES = ["hotjoin.clients", "hotjoin.clients.client", "hotjoin.clients.aio"]


def readme_blocks() -> list[str]:
    """The README's ```python blocks, in order."""
    return re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def _expected(block: str) -> list[str]:
    """The outputs the block's ``print`` lines announce in their trailing comments."""
    return [m.group(1).strip() for m in re.finditer(r"^\s*print\(.*\)\s+#\s*(.+)$", block, re.M)]


@pytest.fixture
def target(server, monkeypatch: pytest.MonkeyPatch) -> str:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HOTJOIN_TARGET", server.target)
    return str(server.target)


def test_the_readme_has_a_client_and_an_engine_example() -> None:
    blocks = readme_blocks()
    assert any("Client()" in b for b in blocks) and any("Engine(" in b for b in blocks)


@pytest.mark.parametrize("n", range(len(readme_blocks())))
def test_readme_python_block_runs(n: int, target: str) -> None:
    block = readme_blocks()[n]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, f"README.md python block {n + 1}", "exec"), {"__name__": "readme"})
    want = _expected(block)
    assert out.getvalue().splitlines() == want


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_that_need_a_server(name: str, target: str) -> None:
    module = importlib.import_module(name)
    tests = doctest.DocTestFinder().find(module, name)
    examples = [e for t in tests for e in t.examples if e.options.get(doctest.SKIP)]
    assert examples, f"{name} shows no example against a server"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for t in tests:
        if not t.examples:
            continue
        for e in t.examples:
            e.options.pop(doctest.SKIP, None)
        t.globs = {**t.globs}
        runner.run(t)
    result = runner.summarize(verbose=False)
    assert result.failed == 0 and result.attempted >= len(examples)
