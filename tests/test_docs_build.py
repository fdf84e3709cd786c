"""The documentation site builds with every warning an error (``mkdocs.yml``: ``strict``, link,
anchor and nav validation), and its generated reference pages say what the code says.

The build runs in-process into a temporary folder (about ten seconds), so a broken link, a page
missing from the nav, a bad anchor or a docstring mkdocstrings cannot render fails the suite.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


@cache
def hooks() -> ModuleType:
    """``scripts/docs_hooks.py``, imported by path (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_hooks"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built strictly into a temporary folder."""
    pytest.importorskip("mkdocs",
                        reason="the docs extra is not installed: pip install -e '.[docs]'")
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    out = tmp_path_factory.mktemp("site")
    config = load_config(str(ROOT / "mkdocs.yml"), site_dir=str(out), strict=True)
    config.plugins.on_startup(command="build", dirty=False)
    try:
        build(config)  # raises on the first warning under strict
    finally:
        config.plugins.on_shutdown()
    return out


def test_site_builds_strictly(site: Path) -> None:
    assert (site / "index.html").is_file()
    for page in ("reference/cli", "reference/wire-api", "reference/python-api", "design",
                 "benchmarks/router", "reference/persistence", "changelog"):
        assert (site / page / "index.html").is_file(), page


def test_cli_reference_lists_every_command_and_option(site: Path) -> None:
    """Every command line of the real parser has its section, with each of its options."""
    html = (site / "reference" / "cli" / "index.html").read_text()
    for name, parser in hooks().command_parsers():
        anchor = "hotjoin-" + name.replace(" ", "-") if name else "hotjoin"
        assert f'id="{anchor}"' in html, name
        section = html.split(f'id="{anchor}"', 1)[1]
        for action in parser._actions:
            for opt in action.option_strings:
                if opt.startswith("--") and action.help != "==SUPPRESS==":
                    assert opt in section, f"hotjoin {name}: {opt}"


def test_wire_reference_names_every_rpc_and_message() -> None:
    text = (ROOT / "proto" / "hotjoin" / "v1" / "hotjoin.proto").read_text()
    page = hooks().wire_reference(text)
    for rpc in re.findall(r"^\s*rpc\s+(\w+)", text, re.M):
        assert f"| `{rpc}` |" in page, rpc
    for kind, name in re.findall(r"^(message|enum)\s+(\w+)", text, re.M):
        assert f"{kind} `{name}`" in page, name


def test_proto_parser_keeps_comments_and_nesting() -> None:
    proto = hooks().parse_proto(
        "// The API.\n\nsyntax = \"proto3\";\n\n// ---- data ----\n\n// A range.\n"
        "message Range {\n  // lower\n  optional double lo = 1;\n  message Inner {\n"
        "    int64 x = 1;\n  }\n  map<string, string> m = 2;\n}\n"
        "// Calls.\nservice S {\n  // one call\n  rpc Get(stream Range) returns (Range);\n}\n")
    assert proto["intro"] == "The API."
    by_name = {b["name"]: b for b in proto["blocks"]}
    assert set(by_name) == {"Range", "Range.Inner", "S"}
    assert by_name["Range"]["section"] == "data" and by_name["Range"]["comment"] == "A range."
    assert [(f["name"], f["label"], f["comment"]) for f in by_name["Range"]["members"]] == [
        ("lo", "optional", "lower"), ("m", "", "")]
    assert by_name["S"]["members"] == [{"name": "Get", "comment": "one call",
                                        "request": "stream Range", "response": "Range"}]


def test_every_docs_page_is_in_the_nav() -> None:
    """A Markdown file under docs/ that no nav entry names is an orphan (strict mode warns too;
    this names it)."""
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    missing = sorted(p for p in pages if p not in nav)
    assert not missing, missing


def test_benchmark_pages_are_what_their_results_files_give() -> None:
    """``scripts/bench-docs --check``: every family page is regenerated from its results file."""
    from importlib.machinery import SourceFileLoader

    loader = SourceFileLoader("bench_docs", str(ROOT / "scripts" / "bench-docs"))
    spec = importlib.util.spec_from_loader("bench_docs", loader)
    assert spec
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    assert module.main(["--check"]) == 0
    for family in module.FAMILIES:
        data = module.load(family)
        assert data["figures"], family
        for fig in data["figures"]:
            assert fig.get("machine"), f"{family}/{fig['id']}: no machine"
            text = (fig.get("command") or "") + (fig.get("table") or "")
            cited = re.sub(r"docs/[\w/.-]+\.md", "", text)  # a page cited, not written
            assert "docs/" not in re.sub(r"docs/benchmarks/\w", "", cited.replace(
                "docs/plots", "")), f"{family}/{fig['id']}: a command writes into docs/"


def test_docs_pages_close_every_code_fence_and_cite_no_commits() -> None:
    """Every Markdown page closes the code blocks it opens (an unclosed fence turns the rest of
    the page into code, which the strict build does not flag), and no page cites a commit: the
    docs show current results, history is git's and the CHANGELOG's."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        text = page.read_text()
        fences = [ln for ln in text.splitlines() if ln.lstrip().startswith("```")]
        assert len(fences) % 2 == 0, f"{page.relative_to(ROOT)}: an unclosed code fence"
        commits = re.findall(r"`[0-9a-f]{7,40}`", text)
        assert not commits, f"{page.relative_to(ROOT)} cites commits {commits}"


def test_doctests_of_the_hooks() -> None:
    import doctest

    result = doctest.testmod(hooks())
    assert result.attempted >= 1 and result.failed == 0
