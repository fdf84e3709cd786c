"""The repository speaks of the product: no work diary, no citations of documents that do not
ship, and no module paths that no longer exist.

Every tracked text file (``git ls-files``) is read, and so is every tracked path name:

* no work-log references (a numbered session, issue or item of a tracker) and no citation of a
  specification file that is not in the repository; the design document is ``docs/design.md``,
  cited by its section anchors;
* every repository path named in the docs (README, ``docs/``, CHANGELOG) and in docstrings and
  comments (``matcher/core.py``, ``cli/commands/``, ``server/*.md``) exists, and so does every
  dotted module named there (``hotjoin.clients.client.HotjoinClient``, ``python -m
  hotjoin.ops.bench.memory``): imported and resolved attribute by attribute.

The patterns are built from pieces so that this file does not match itself.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Work-log references: the words session, issue (also with ``#``) or item followed by a number,
#: and a specification cited by section sign or by file name. Case-insensitive for the first
#: three. (This file names them only in its own finder tests.)
SELF = "tests/test_repository_text.py"
S, ISS = "sess" + "ion", "iss" + "ue"  # the words, spelled so that this file names no work log
_DIARY = re.compile(
    r"\bsessions?[ _-]?\d+|\bissues? ?#?\d+|\bitems? \d+", re.IGNORECASE)
_SPEC = re.compile("SPEC" + r"(?: ?\u00a7|\.md)")

#: The top-level folders a repository path may start with.
_TOP = ("cli", "clients", "matcher", "server", "ops", "proto", "tests", "docs", "scripts",
        "examples")
_PATH = re.compile(r"(?<![\w./$~-])((?:" + "|".join(_TOP) + r")/[\w.*/-]*[\w*/])")
#: Dotted module names: prefixed ``hotjoin.x.y`` anywhere, or ``x.y`` of a top-level package in
#: docstrings and comments.
_MOD_PREFIXED = re.compile(r"(?<![\w./-])(hotjoin(?:\.[A-Za-z_]\w*)+)")
_MOD_BARE = re.compile(r"(?<![\w./-])((?:matcher|server|clients|cli|ops)(?:\.[A-Za-z_]\w*)+)")
#: A dotted word that names a file, not a module (``server.key``, ``hotjoin.proto``).
_FILE_SUFFIX = re.compile(
    r"\.(py|md|json|jsonl|toml|proto|txt|csv|sh|png|yml|yaml|service|crt|csr|key|pem|log|"
    r"parquet|arrow|bin|lock|pid|tmp|gz)$")

#: Dotted names that are not Python modules: the entry-point group of ``hotjoin`` subcommands,
#: the wire package of ``proto/hotjoin/v1/hotjoin.proto`` and the audit logger's name.
_NOT_MODULES = frozenset({"hotjoin.commands", "hotjoin.v1", "hotjoin.audit"})

#: A path with a placeholder segment in capitals (``docs/benchmarks/FAMILY.json``).
_PLACEHOLDER = re.compile(r"/[A-Z][A-Z_]+(?:[./]|$)")

_TEXT_SUFFIXES = (".py", ".md", ".toml", ".yml", ".yaml", ".json", ".txt", ".cfg", ".ini",
                  ".service", ".proto", ".pyi", ".csv", ".jsonl", ".sh", ".rules", ".j2")


@cache
def tracked() -> tuple[str, ...]:
    """The tracked files that exist in the work tree (a deleted, not yet committed file is not
    text to check)."""
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split("\n")
    return tuple(f for f in out if f and (ROOT / f).is_file())


def _read(path: str) -> str | None:
    """The file's text, or None for binary files."""
    data = (ROOT / path).read_bytes()
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def text_files() -> list[str]:
    """Tracked files read as text: known text suffixes and extensionless scripts."""
    return [f for f in tracked()
            if f.endswith(_TEXT_SUFFIXES) or f.startswith(("scripts/", ".ci/"))
            or "." not in Path(f).name]


def diary_mentions(text: str) -> list[str]:
    """Every work-log or specification reference in ``text``, as ``line: match``.

    >>> found = diary_mentions("measured in " + S + " 12\\nfine line\\nsee " + "SPEC" + " §3")
    >>> found == ["1: " + S + " 12", "3: " + "SPEC" + " §"]
    True
    >>> diary_mentions("sessions are fine, issues too, and 3 items")
    []
    """
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        found += [f"{n}: {m.group(0)}" for m in _DIARY.finditer(line)]
        found += [f"{n}: {m.group(0)}" for m in _SPEC.finditer(line)]
    return found


def prose_of_python(text: str) -> str:
    """The docstrings and comments of a Python source (the text a reader takes as prose); the
    code itself is left out, where ``server.target`` is an attribute, not a module."""
    parts = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT or (
                    tok.type == tokenize.STRING and tok.string.lstrip("rbuRBUfF")[:3] in
                    ('"""', "'''")):
                parts.append(tok.string)
    except (tokenize.TokenError, SyntaxError):
        return text
    return "\n".join(parts)


def _path_exists(p: str) -> bool:
    """Whether the repository path ``p`` exists: a file, a folder, a glob that matches, the
    module ``p.py``, or ``module.attribute`` written with slashes (``ops/bench/select.X``)."""
    p = p.rstrip(".")
    if "*" in p:
        return any(ROOT.glob(p.rstrip("/")))
    if (ROOT / p).exists() or (ROOT / (p + ".py")).exists():
        return True
    head, _, _ = p.rpartition(".")
    return bool(head) and (ROOT / (head + ".py")).exists()


#: Where each installed package's source lives (pyproject.toml, [tool.setuptools.package-dir]).
_PACKAGE_DIRS = {"hotjoin": "hotjoin", "hotjoin.proto": "proto", "hotjoin.matcher": "matcher",
                 "hotjoin.server": "server", "hotjoin.clients": "clients", "hotjoin.cli": "cli",
                 "hotjoin.ops": "ops"}


def _module_file(dotted: str) -> Path | None:
    """The source file of module ``dotted`` (``hotjoin.x.y``), found on disk without importing
    it (an import could fail for reasons that have nothing to do with the name)."""
    parts = dotted.split(".")
    for n in (2, 1):
        top = ".".join(parts[:n])
        if top in _PACKAGE_DIRS and len(parts) >= n:
            base = ROOT / _PACKAGE_DIRS[top]
            rest = parts[n:]
            break
    else:
        return None
    cand = base.joinpath(*rest)
    if (cand / "__init__.py").is_file():
        return cand / "__init__.py"
    if cand.with_suffix(".py").is_file() and rest:
        return cand.with_suffix(".py")
    return None


@cache
def _names_in(path: Path) -> tuple[frozenset[str], dict[str, frozenset[str]]]:
    """The top-level names a module defines or imports, and each class's member names."""
    tree = ast.parse(path.read_text())
    top: set[str] = set()
    members: dict[str, frozenset[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            top.add(node.value)  # __all__ and lazy-import tables name their attributes as strings
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            top.add(node.name)
        if isinstance(node, ast.ClassDef):
            members[node.name] = frozenset(
                n.name if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                else t.id
                for n in node.body
                for t in ([n] if not isinstance(n, (ast.Assign, ast.AnnAssign)) else
                          (n.targets if isinstance(n, ast.Assign) else [n.target]))
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                or isinstance(t, ast.Name))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            top |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            top |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.If, ast.Try)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    top |= {(a.asname or a.name).split(".")[0] for a in sub.names}
                elif isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
                    top.add(sub.name)
                elif isinstance(sub, ast.Assign):
                    top |= {n.id for t in sub.targets for n in ast.walk(t)
                            if isinstance(n, ast.Name)}
    return frozenset(top), members


@cache
def _module_exists(name: str) -> bool:
    """Whether ``name`` (``hotjoin.``-prefixed or a bare top-level package) is a module or a
    module's attribute (a class member too), checked on the sources without importing."""
    full = name if name.startswith("hotjoin.") or name == "hotjoin" else "hotjoin." + name
    parts = full.split(".")
    for i in range(len(parts), 0, -1):
        path = _module_file(".".join(parts[:i]))
        if path is None:
            continue
        rest = parts[i:]
        if not rest:
            return True
        top, members = _names_in(path)
        if rest[0] not in top:
            return False
        return len(rest) == 1 or rest[0] not in members or rest[1] in members[rest[0]]
    return False


def stale_references(path: str, text: str) -> list[str]:
    """The repository paths and module names ``text`` (from file ``path``) names that do not
    exist. For Python files only docstrings and comments count."""
    prose = prose_of_python(text) if path.endswith(".py") else text
    bad = [p for p in {m.group(1) for m in _PATH.finditer(prose)}
           if not _path_exists(p) and not _PLACEHOLDER.search(p)]
    names = {m.group(1) for m in _MOD_PREFIXED.finditer(prose)}
    if path.endswith(".py"):
        names |= {m.group(1) for m in _MOD_BARE.finditer(prose)}
    names |= set(re.findall(r"python3? -m ([\w.]+)", prose))
    for name in names:
        name = name.rstrip(".")
        if _FILE_SUFFIX.search(name) or "." not in name or name in _NOT_MODULES:
            continue
        if not _module_exists(name):
            bad.append(name)
    return sorted(bad)


def test_no_diary_in_tracked_text() -> None:
    """No tracked text file cites a work log or a specification that does not ship."""
    offenders = {}
    for f in text_files():
        text = None if f == SELF else _read(f)
        if text is not None and (found := diary_mentions(text)):
            offenders[f] = found[:5]
    assert not offenders, "work-log references (cite docs/design.md instead):\n" + "\n".join(
        f"{f}: {found}" for f, found in sorted(offenders.items()))


def test_no_diary_in_tracked_names() -> None:
    """No tracked file is named after a work log (results files are named by what they hold)."""
    offenders = [f for f in tracked() if _DIARY.search(f) or _SPEC.search(f)]
    assert not offenders, offenders


def _prose_files() -> list[str]:
    return [f for f in text_files()
            if f.endswith((".py", ".md", ".toml", ".yml", ".yaml", ".service"))
            or f.startswith("scripts/")]


def test_named_paths_and_modules_exist() -> None:
    """Every repository path and module the docs, docstrings and comments name exists (the
    CHANGELOG names old modules on purpose: it records the renames)."""
    offenders = {}
    for f in _prose_files():
        if (f.startswith("proto/") and "_pb2" in f) or f in ("CHANGELOG.md", SELF):
            continue  # generated code; the record of renames; this file's finder examples
        text = _read(f)
        if text is not None and (bad := stale_references(f, text)):
            offenders[f] = bad
    assert not offenders, "names that do not exist:\n" + "\n".join(
        f"{f}: {bad}" for f, bad in sorted(offenders.items()))


@pytest.mark.parametrize(("text", "want"), [
    ("see `matcher/core.py`", []),
    ("see `matcher/no_such_module.py`", ["matcher/no_such_module.py"]),
    ("the pages `server/*.md`", []) if any(ROOT.glob("server/*.md")) else ("", []),
    ("`hotjoin.clients.client.HotjoinClient`", []),
    ("`hotjoin.clients.client.NoSuchThing`", ["hotjoin.clients.client.NoSuchThing"]),
    ("python -m hotjoin.nosuch.module", ["hotjoin.nosuch.module"]),
])
def test_stale_reference_finder(text: str, want: list[str]) -> None:
    """The finder itself: existing names pass, missing ones are reported."""
    assert stale_references("x.md", text) == want


def test_diary_finder_boundaries() -> None:
    """Spellings the finder must catch, and words it must leave alone."""
    caught = [f"{S} 1", f"{S.title()} 18", f"{S}18", f"-{S}12.json", f"{ISS} 16", f"{ISS.title()} #3",
              "item 5", "items 2", "SPEC" + " §4", "SPEC" + ".md"]
    for s in caught:
        assert diary_mentions(s), s
    for s in ["sessions", "issue", "an item", "SPEC", "spec" + " §4 of the paper", "the 3rd item"]:
        assert not diary_mentions(s), s


def test_doctests_of_this_module() -> None:
    import doctest
    import sys

    result = doctest.testmod(sys.modules[__name__])
    assert result.attempted >= 2 and result.failed == 0
