"""Every shell command the documentation shows is checked: it parses, it runs, or it says why not.

The shell blocks (```bash / ```sh / ```shell) of the README and of every page of the site
(``docs/**/*.md`` and the files the site includes) are read and split into simple commands:

* every ``hotjoin …`` command must parse with the real command-line parser (imported, no
  subprocess): a renamed option or sub-command fails here;
* every ``python -m MODULE`` names a module that exists, every ``scripts/…`` a script;
* the blocks of the pages listed in ``RUN_PAGES`` run for real, in order, in a temporary folder
  holding a copy of ``examples/``, against a test server served in-process (their ``hotjoin
  serve`` lines are that server; ``kill``/``wait``/``sleep`` lines are skipped); the README's
  walk-through runs in ``tests/clients/test_cli_journey.py``;
* any other block that runs something a test cannot give cheaply — a cluster, root, Spark, a
  container, a long benchmark, network tools — starts with a visible marker line
  ``# needs: WHAT`` (e.g. ``# needs: root``), which this test accepts.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Pages whose blocks run for real, in order, against one served test server per page.
RUN_PAGES = ("docs/getting-started/quickstart.md", "docs/getting-started/tutorial.md")
#: Files of the site that are not under docs/ (included with pymdownx.snippets).
INCLUDED = ("server/PERSISTENCE.md", "CHANGELOG.md")
#: Programs whose blocks need a marker: they need more than a test can give cheaply.
HEAVY = {"ray", "openssl", "podman", "docker", "sudo", "apt-get", "prometheus", "promtool",
         "pip", "pip3", "systemctl", "useradd", "curl", "mkdocs", "spark-submit"}
#: ``hotjoin`` sub-commands that need a marker (long runs, Spark, the demo's whole workload).
HEAVY_COMMANDS = {"bench", "replay", "calibrate", "demo"}
_SHELL_OPS = {"&&", "||", "|", ";", "&", "(", ")", ";;"}
_REDIRECTS = {">", ">>", "<", "2>", "2>&1", "&>", ">&"}
_MARKER = re.compile(r"^\s*#\s*needs:\s*\S", re.M)


@dataclass(frozen=True)
class Block:
    """One shell block of a page."""

    page: str
    line: int
    text: str

    @property
    def marked(self) -> bool:
        """Whether the block carries a ``# needs: …`` marker."""
        return bool(_MARKER.search(self.text))

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[str]:
    """The README and every page of the site, as repository paths."""
    docs = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").rglob("*.md"))
    return ["README.md", *docs, *(p for p in INCLUDED if (ROOT / p).is_file())]


def blocks_of(page: str) -> list[Block]:
    """The shell blocks of ``page``, with the line each starts on."""
    text = (ROOT / page).read_text()
    out = []
    for m in re.finditer(r"^```(?:bash|sh|shell|console)[^\n]*\n(.*?)^```", text, re.M | re.S):
        out.append(Block(page, text.count("\n", 0, m.start()) + 2, m.group(1)))
    return out


def all_blocks() -> list[Block]:
    """Every shell block of the documentation."""
    return [b for p in pages() for b in blocks_of(p)]


def logical_lines(text: str) -> list[str]:
    """The block's command lines: continuations joined, comment-only and empty lines dropped.

    >>> logical_lines("a \\\\\\n  b   # c\\n# only a comment\\n\\nd")
    ['a    b   # c', 'd']
    """
    out, cur = [], ""
    for raw in text.splitlines():
        if raw.rstrip().endswith("\\"):
            cur += raw.rstrip()[:-1] + " "
            continue
        line = (cur + raw).strip()
        cur = ""
        if line and not line.startswith("#"):
            out.append(line)
    if cur.strip():
        out.append(cur.strip())
    return out


def simple_commands(line: str, env: dict[str, str]) -> list[list[str]]:
    """The simple commands of one shell line, as argument lists: variables of ``env``
    expanded, command substitutions replaced by a placeholder, redirections and leading
    ``NAME=value`` assignments (which are recorded in ``env``) removed.

    >>> simple_commands('X=1 hotjoin a $T | head > out; cd d && echo "$(cat f)"', {"T": "-v"})
    [['hotjoin', 'a', '-v'], ['head'], ['cd', 'd'], ['echo', 'X']]
    """
    line = re.sub(r"[<>]\((?:[^()]|\([^()]*\))*\)", "X", line)  # process substitution
    line = re.sub(r"\$\((?:[^()]|\([^()]*\))*\)", "X", line)  # command substitution
    line = re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), "X"), line)
    lex = shlex.shlex(line, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = "#"
    words = list(lex)
    cmds: list[list[str]] = [[]]
    skip = False
    for w in words:
        if skip:
            skip = False
            continue
        if w in _SHELL_OPS:
            cmds.append([])
        elif w in _REDIRECTS or (w.endswith(">") and w.rstrip(">").isdigit()):
            skip = True
        else:
            cmds[-1].append(w)
    out = []
    for c in cmds:
        while c and re.match(r"^[A-Za-z_]\w*=", c[0]):
            name, _, value = c.pop(0).partition("=")
            env[name] = value
        if c and c[0] == "export" and len(c) > 1 and "=" in c[1]:
            name, _, value = c[1].partition("=")
            env[name] = value
            continue
        if c:
            out.append(c)
    return out


def is_hotjoin(argv: list[str]) -> bool:
    """Whether ``argv`` runs the ``hotjoin`` command (from the PATH or a virtualenv)."""
    return bool(argv) and (argv[0] == "hotjoin" or argv[0].endswith("/bin/hotjoin"))


def commands_of(block: Block) -> Iterator[list[str]]:
    """Every simple command of ``block``, in order."""
    env: dict[str, str] = {}
    for line in logical_lines(block.text):
        yield from simple_commands(line, env)


def parse_hotjoin(argv: list[str]) -> None:
    """Parse a ``hotjoin`` command line with the real parser; raises AssertionError with the
    parser's message when it does not parse."""
    from hotjoin.cli.main import build_parser, normalise_argv

    args = argv[1:]
    command = next((a for a in args if not a.startswith("-")), "")
    parser = build_parser(command or None)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(normalise_argv(args))
        except SystemExit as e:
            if e.code not in (0, None):
                raise AssertionError(f"{shlex.join(argv)}: {err.getvalue().strip()}") from None


def _program(argv: list[str]) -> str:
    return Path(argv[0]).name


def heavy_reason(argv: list[str]) -> str | None:
    """Why ``argv`` needs a marker, or None when a test can parse or run it cheaply."""
    prog = _program(argv)
    if prog in HEAVY:
        return prog
    if is_hotjoin(argv):
        sub = next((a for a in argv[1:] if not a.startswith("-")), "")
        if sub in HEAVY_COMMANDS and "--help" not in argv and "-h" not in argv:
            return f"hotjoin {sub}"
        if sub == "serve" and "--workers" in argv:
            return "hotjoin serve --workers (Ray)"
    if argv[0] in ("./scripts/run", "./scripts/test", "scripts/setup", "./scripts/setup"):
        return argv[0]
    return None


BLOCKS = all_blocks()


def test_the_docs_have_shell_blocks() -> None:
    assert len(BLOCKS) > 20
    assert any(str(b).startswith("docs/getting-started/quickstart.md") for b in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS, ids=str)
def test_block_parses_and_is_runnable_or_marked(block: Block) -> None:
    """Each ``hotjoin`` command parses; modules and scripts exist; heavy blocks are marked."""
    heavy = []
    for argv in commands_of(block):
        if is_hotjoin(argv):
            parse_hotjoin(argv)
        elif argv[:2] in (["python", "-m"], ["python3", "-m"]) or (
                len(argv) > 2 and argv[0].endswith("/python") and argv[1] == "-m"):
            module = argv[2]
            assert importlib.util.find_spec(module) is not None, f"{block}: no module {module}"
            heavy.append(f"python -m {module}")
            continue
        elif re.match(r"^(\./)?scripts/", argv[0]):
            assert (ROOT / argv[0]).is_file(), f"{block}: no script {argv[0]}"
        if reason := heavy_reason(argv):
            heavy.append(reason)
    in_run_page = block.page in RUN_PAGES
    if heavy and not in_run_page and not block.marked:
        pytest.fail(f"{block}: runs {sorted(set(heavy))}; mark the block with a line "
                    "'# needs: WHAT' or make it cheap")


# ---- the pages that run for real -----------------------------------------------------------

_SKIPPED_WHEN_RUN = {"kill", "wait", "sleep"}


def _run_line(line: str, argv: list[str] | None, cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run one command line: a lone ``hotjoin`` command (``argv``) in-process, anything else
    (pipes, redirections, other programs) through ``bash`` with the virtualenv on the PATH."""
    if argv is not None:
        from hotjoin.cli.main import main

        out, err = io.StringIO(), io.StringIO()
        old = Path.cwd()
        os.chdir(cwd)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    rc = main(argv[1:])
                except SystemExit as e:
                    rc = int(e.code or 0)
        finally:
            os.chdir(old)
        return rc, err.getvalue()
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    proc = subprocess.run(["bash", "-c", line], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **env, "PATH": path}, timeout=120)
    return proc.returncode, proc.stderr


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A test server on a free port (``HOTJOIN_TARGET`` points at it) and a working folder
    holding a copy of ``examples/``."""
    from server_harness import engine_factory

    from hotjoin.server.app import HotjoinServer

    srv = HotjoinServer(data_dir=tmp_path / "server-data", port=0, buffer_capacity=64,
                        engine_factory=engine_factory()).start()
    monkeypatch.setenv("HOTJOIN_TARGET", srv.target)
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(ROOT / "examples", work / "examples")
    try:
        yield work
    finally:
        srv.stop(0)


@pytest.mark.parametrize("page", RUN_PAGES)
def test_page_runs_as_written(page: str, served: Path) -> None:
    """The page's blocks, in order, each command exiting 0; blocks marked ``# needs:`` and the
    lines a served test server stands in for are skipped."""
    ran = 0
    env = {"HOTJOIN_TARGET": os.environ["HOTJOIN_TARGET"]}
    for block in blocks_of(page):
        if block.marked:
            continue
        names: dict[str, str] = {}
        for line in logical_lines(block.text):
            cmds = simple_commands(line, names)
            if not cmds or any(
                    _program(c) in _SKIPPED_WHEN_RUN or heavy_reason(c)
                    or (is_hotjoin(c) and "serve" in c[1:2]) for c in cmds):
                continue
            alone = len(cmds) == 1 and is_hotjoin(cmds[0]) and not re.search(r"[|<>;&$`]", line)
            rc, err = _run_line(line, cmds[0] if alone else None, served, env)
            assert rc == 0, f"{block}: {line} exited {rc}: {err.strip()[-500:]}"
            ran += 1
    assert ran >= 5, f"{page}: only {ran} commands ran"


def test_doctests_of_this_module() -> None:
    """The examples in this module's docstrings (the shell splitting) hold."""
    import doctest

    result = doctest.testmod(sys.modules[__name__])
    assert result.attempted >= 2 and result.failed == 0
