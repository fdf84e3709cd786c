"""The architecture as a test: the folders' layers point one way and no modules import each other
in a cycle (README, "Layout").

Layers, lowest first: ``proto`` (the wire) → ``matcher`` (the engine) → ``server`` (order,
durability, delivery; the scale-out runtime) → ``clients`` (the Python client library) → ``cli``
(the ``hotjoin`` command) → ``ops`` (benchmarks, Spark replay, load tests). A module may import
its own layer and the ones below, at module level or inside a function alike; the ops tooling
reaches the command line only through the ``hotjoin.commands`` entry points.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {"proto": 0, "matcher": 1, "server": 2, "clients": 3, "cli": 4, "ops": 5}


def _sources() -> dict[str, Path]:
    """Module name → file of every hand-written module of the layered folders."""
    out = {}
    for folder in LAYERS:
        for f in (ROOT / folder).rglob("*.py"):
            if f.name.endswith(("_pb2.py", "_pb2_grpc.py")):
                continue
            rel = f.relative_to(ROOT / folder).with_suffix("").parts
            if rel[-1] == "__init__":
                rel = rel[:-1]
            out[".".join(("hotjoin", folder, *rel))] = f
    return out


def _imports(tree: ast.AST, everywhere: bool) -> list[tuple[int, str, list[str]]]:
    """``(line, module, names)`` of the absolute imports of ``tree`` (module level only unless
    ``everywhere``)."""
    nodes = ast.walk(tree) if everywhere else iter(tree.body)  # type: ignore[attr-defined]
    out = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.lineno, node.module, [a.name for a in node.names]))
    return out


def test_layers_point_one_way() -> None:
    upward = []
    for name, path in _sources().items():
        layer = LAYERS[name.split(".")[1]]
        for line, module, _ in _imports(ast.parse(path.read_text()), everywhere=True):
            parts = module.split(".")
            if parts[0] == "hotjoin" and len(parts) > 1 and LAYERS.get(parts[1], -1) > layer:
                upward.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert not upward, "imports that run back up the layers:\n" + "\n".join(upward)


def test_no_module_level_import_cycles() -> None:
    mods = _sources()
    graph = {name: set() for name in mods}
    for name, path in mods.items():
        for _, module, names in _imports(ast.parse(path.read_text()), everywhere=False):
            targets = [module, *(f"{module}.{n}" for n in names)]
            graph[name].update(t for t in targets if t in mods and t != name)
    cycles = _strongly_connected(graph)
    assert not cycles, f"modules importing each other: {cycles}"


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: the components of more than one module."""
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


@pytest.mark.parametrize("graph, cycles", [
    ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
])
def test_the_cycle_check_finds_cycles(graph: dict[str, set[str]], cycles: list[list[str]]) -> None:
    assert _strongly_connected(graph) == cycles


def test_matcher_imports_no_network_spark_or_ray() -> None:
    banned = ("grpc", "pyspark", "ray", "hotjoin.proto")
    found = [f"{p.relative_to(ROOT)}:{line} {m}" for name, p in _sources().items()
             if name.startswith("hotjoin.matcher")
             for line, m, _ in _imports(ast.parse(p.read_text()), everywhere=True)
             if m.split(".")[0] in banned or m.startswith("hotjoin.proto")]
    assert not found, found
