"""MkDocs hooks of the documentation site (``mkdocs.yml``, ``hooks:``): the reference pages that
are generated from the code, so that they cannot drift from it.

* ``reference/cli.md``: every ``hotjoin`` command and sub-command with its ``--help`` text, from
  the real argparse parsers (``hotjoin.cli.main.build_parser``, the ``hotjoin.commands`` entry
  points included).
* ``reference/wire-api.md``: every service, RPC, message, enum and field of
  ``proto/hotjoin/v1/hotjoin.proto`` with the comments written beside them.

Both functions are plain and importable (``tests/test_docs_build.py`` checks them directly):
``cli_reference()`` and ``wire_reference(proto_text)`` return Markdown.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROTO = ROOT / "proto" / "hotjoin" / "v1" / "hotjoin.proto"
#: Width of the help text in the CLI reference: fixed, so that the page does not depend on the
#: terminal of whoever builds the site.
HELP_WIDTH = 100


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """The sub-parsers of ``parser`` in the order they were registered."""
    out: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:  # noqa: SLF001 - argparse keeps sub-parsers only here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # aliases point at the same parser
                    seen.add(id(sub))
                    out.append((name, sub))
    return out


def command_parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command line the ``hotjoin`` parser accepts, as ``("topic create", parser)``, depth
    first in registration order, starting with ``("", the top-level parser)``."""
    from hotjoin.cli.main import build_parser

    out: list[tuple[str, argparse.ArgumentParser]] = []

    def walk(prefix: str, p: argparse.ArgumentParser) -> None:
        out.append((prefix, p))
        for name, sub in _subcommands(p):
            walk(f"{prefix} {name}".strip(), sub)

    walk("", build_parser())
    return out


def _help(parser: argparse.ArgumentParser) -> str:
    """``parser``'s ``--help`` text at ``HELP_WIDTH`` columns."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(HELP_WIDTH)
    try:
        return parser.format_help().rstrip()
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def cli_reference() -> str:
    """The CLI reference page: one section per command with its ``--help`` text."""
    parsers = command_parsers()
    lines = ["# Command line reference", "",
             "Generated from the `hotjoin` command's own argument parsers when the site is built "
             "(`scripts/docs_hooks.py`), so it lists exactly what `hotjoin COMMAND --help` "
             "prints. Conventions shared by every command (output, exit codes, connection "
             "options) are in the [CLI guide](../how-to/cli.md).", ""]
    lines += ["| command | what it does |", "|---|---|"]
    for name, p in parsers[1:]:
        desc = " ".join((p.description or "").split())
        desc = desc.split(". ", 1)[0].rstrip(".")  # the first sentence
        desc = desc.replace("|", "/").replace("[", "\\[").replace("]", "\\]")
        anchor = "hotjoin-" + name.replace(" ", "-")
        lines.append(f"| [`hotjoin {name}`](#{anchor}) | {desc} |")
    lines.append("")
    for name, p in parsers:
        title = f"hotjoin {name}".strip()
        anchor = "hotjoin-" + name.replace(" ", "-") if name else "hotjoin"
        level = "#" * min(2 + name.count(" "), 4)
        lines += [f"{level} `{title}` {{#{anchor}}}", "", "```text", _help(p), "```", ""]
    return "\n".join(lines)


# ---- wire API -----------------------------------------------------------------------------

_SECTION = re.compile(r"^//\s*-{2,}\s*(.*?)\s*-*\s*$")
_BLOCK = re.compile(r"^(service|message|enum)\s+(\w+)\s*\{\s*(\})?")
_RPC = re.compile(
    r"^rpc\s+(\w+)\s*\(\s*(stream\s+)?(\w+)\s*\)\s*returns\s*\(\s*(stream\s+)?(\w+)\s*\)")
_FIELD = re.compile(
    r"^(?:(optional|repeated)\s+)?(map<[^>]+>|[\w.]+)\s+(\w+)\s*=\s*(\d+)")
_ENUM_VALUE = re.compile(r"^(\w+)\s*=\s*(-?\d+)")


def _cell(text: str) -> str:
    """``text`` fit for one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def parse_proto(text: str) -> dict[str, Any]:
    """The proto file as ``{"intro": str, "blocks": [...]}``; each block is a service, message or
    enum with its comment, its section and its members (RPCs, fields, values) with theirs.

    >>> p = parse_proto(
    ...     "// API\\n\\n// A range.\\nmessage R {\\n  // low\\n  double lo = 1;\\n}\\n")
    >>> p["intro"], p["blocks"][0]["name"], p["blocks"][0]["members"][0]["name"]
    ('API', 'R', 'lo')
    """
    intro: list[str] = []
    blocks: list[dict[str, Any]] = []
    stack: list[dict[str, Any]] = []
    pending: list[str] = []
    section = ""
    header_done = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            if not header_done and pending:
                intro, pending, header_done = pending, [], True
            continue
        if m := _SECTION.match(line):
            section, pending = m.group(1), []
            header_done = True
            continue
        if line.startswith("//"):
            pending.append(line[2:].strip())
            continue
        header_done = True
        comment = " ".join(pending).strip()
        pending = []
        if m := _BLOCK.match(line):
            block = {"kind": m.group(1), "name": m.group(2), "comment": comment,
                     "section": section, "members": []}
            if stack and stack[-1]["kind"] == "message":
                block["name"] = f"{stack[-1]['name']}.{block['name']}"
            blocks.append(block)
            if not m.group(3):
                stack.append(block)
            continue
        if line.startswith("}"):
            if stack:
                stack.pop()
            continue
        if not stack:
            continue
        cur = stack[-1]
        if cur["kind"] == "service" and (m := _RPC.match(line)):
            cur["members"].append({"name": m.group(1), "comment": comment,
                                   "request": ("stream " if m.group(2) else "") + m.group(3),
                                   "response": ("stream " if m.group(4) else "") + m.group(5)})
        elif cur["kind"] == "enum" and (m := _ENUM_VALUE.match(line)):
            cur["members"].append({"name": m.group(1), "number": m.group(2), "comment": comment})
        elif cur["kind"] == "message" and line.startswith("oneof "):
            cur["members"].append({"name": line.split()[1], "type": "oneof", "number": "",
                                   "label": "", "comment": comment})
        elif cur["kind"] == "message" and (m := _FIELD.match(line)):
            cur["members"].append({"label": m.group(1) or "", "type": m.group(2),
                                   "name": m.group(3), "number": m.group(4), "comment": comment})
    return {"intro": " ".join(intro), "blocks": blocks}


def wire_reference(text: str) -> str:
    """The wire API page from the ``.proto`` source ``text``."""
    proto = parse_proto(text)
    names = {b["name"] for b in proto["blocks"]}
    lines = ["# Wire API reference", "",
             "Generated from `proto/hotjoin/v1/hotjoin.proto` (package `hotjoin.v1`) when the "
             "site is built; the comments are the ones written in the `.proto`. What each RPC "
             "answers on bad input: [errors](errors.md); the semantics behind the messages: "
             "[design](../design.md).", ""]
    if proto["intro"]:
        lines += [f"> {proto['intro']}", ""]

    def link(t: str) -> str:
        base = t.removeprefix("stream ")
        pre = "stream " if t.startswith("stream ") else ""
        return f"{pre}[`{base}`](#{base.lower().replace('.', '')})" if base in names \
            else f"{pre}`{base}`"

    services = [b for b in proto["blocks"] if b["kind"] == "service"]
    lines += ["## Services", ""]
    for s in services:
        lines += [f"### `{s['name']}` {{#{s['name'].lower()}}}", ""]
        if s["comment"]:
            lines += [s["comment"], ""]
        lines += ["| RPC | request | response | notes |", "|---|---|---|---|"]
        lines += [f"| `{r['name']}` | {link(r['request'])} | {link(r['response'])} | "
                  f"{_cell(r['comment'])} |" for r in s["members"]]
        lines.append("")
    section = None
    lines += ["## Messages and enums", ""]
    for b in proto["blocks"]:
        if b["kind"] == "service":
            continue
        if b["section"] and b["section"] != section:
            section = b["section"]
            lines += [f"### {section[:1].upper()}{section[1:]}", ""]
        anchor = b["name"].lower().replace(".", "")
        lines += [f"#### {b['kind']} `{b['name']}` {{#{anchor}}}", ""]
        if b["comment"]:
            lines += [b["comment"], ""]
        if not b["members"]:
            lines += ["(no fields)", ""]
            continue
        if b["kind"] == "enum":
            lines += ["| value | number | meaning |", "|---|---|---|"]
            lines += [f"| `{v['name']}` | {v['number']} | {_cell(v['comment'])} |"
                      for v in b["members"]]
        else:
            lines += ["| field | type | # | meaning |", "|---|---|---|---|"]
            for f in b["members"]:
                typ = (f["label"] + " " if f["label"] else "") + (
                    link(f["type"]) if f["type"] in names else f"`{f['type']}`")
                lines.append(f"| `{f['name']}` | {typ} | {f['number']} | {_cell(f['comment'])} |")
        lines.append("")
    return "\n".join(lines)


# ---- MkDocs hook ---------------------------------------------------------------------------

def on_files(files: Any, config: Any) -> Any:  # pragma: no cover - exercised by the site build
    """Add the generated reference pages to the site's files."""
    from mkdocs.structure.files import File

    pages = {"reference/cli.md": cli_reference(),
             "reference/wire-api.md": wire_reference(PROTO.read_text())}
    for uri, content in pages.items():
        existing = files.get_file_from_path(uri)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, uri, content=content))
    return files


def source_tree() -> Path:
    """A folder holding ``hotjoin/`` as the installed namespace looks (symbolic links to the
    repository's top-level folders, after ``pyproject.toml``'s package-dir mapping), for
    mkdocstrings to read the sources statically: an editable install maps ``hotjoin.clients``
    to ``clients/``, which a static reader does not follow."""
    import tempfile
    import tomllib

    dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"]
    import atexit
    import shutil

    top = Path(tempfile.mkdtemp(prefix="hotjoin-docs-src-"))
    atexit.register(shutil.rmtree, top, True)
    pkg = top / "hotjoin"
    pkg.mkdir()
    for entry in (ROOT / dirs["hotjoin"]).iterdir():
        (pkg / entry.name).symlink_to(entry)
    for name, folder in dirs.items():
        if name != "hotjoin":
            (pkg / name.split(".", 1)[1]).symlink_to(ROOT / folder)
    return top


def _first(func: Any) -> Any:
    """Run the hook before the plugins' own ``on_config`` (mkdocstrings reads its handler
    options there)."""
    try:
        from mkdocs.plugins import event_priority
    except ImportError:  # imported without MkDocs (the tests of the generators)
        return func
    return event_priority(100)(func)


@_first
def on_config(config: Any) -> Any:  # pragma: no cover - exercised by the site build
    """Point mkdocstrings at ``source_tree()``."""
    plugin = config["plugins"].get("mkdocstrings")
    if plugin is not None:
        python = plugin.config["handlers"].setdefault("python", {})
        python["paths"] = [str(source_tree())]
    return config
