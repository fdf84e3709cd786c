"""The ``hotjoin`` entry point (``cli/main.py``) as a unit: negative range values are glued to
their option (against a token-by-token reference), only the chosen sub-command's module is
imported, errors are one line with exit code 2, and a sub-command's ``CliError``, Ctrl-C and a
closed stdout map to their exit codes (docs/how-to/cli.md). Each command's help:
``tests/clients/test_cli_help.py``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.cli import main as main_module
from hotjoin.cli.main import (
    BUILT_IN,
    COMMANDS,
    RANGE_OPTIONS,
    SIGPIPE_EXIT,
    CliError,
    Parser,
    build_parser,
    command_modules,
    main,
    normalise_argv,
    version,
)

TOKENS = st.sampled_from(["--a", "--b", "--c", "--d", "-2.5:2.5", "-.5:1", "-inf:0", "1:2",
                          "-x", "--table", "topic", ":3", "-3:"])


def _reference(argv: list[str]) -> list[str]:
    """Token by token: a range option followed by a value starting like a negative number
    becomes one ``--opt=value`` token; everything else is kept."""
    out, i = [], 0
    while i < len(argv):
        tok = argv[i]
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if tok in RANGE_OPTIONS and nxt is not None and (
                nxt[:2] in {f"-{d}" for d in "0123456789."} or nxt.startswith("-inf")):
            out.append(f"{tok}={nxt}")
            i += 2
            continue
        if tok in RANGE_OPTIONS and nxt is not None:
            out += [tok, nxt]
            i += 2
            continue
        out.append(tok)
        i += 1
    return out


@given(st.lists(TOKENS, max_size=10))
def test_normalise_argv_glues_negative_ranges_to_their_option(argv: list[str]) -> None:
    assert normalise_argv(argv) == _reference(argv)


def test_normalise_argv_examples() -> None:
    assert normalise_argv(["--b", "-2.5:2.5", "--a", "0:1"]) == ["--b=-2.5:2.5", "--a", "0:1"]
    assert normalise_argv(["--c"]) == ["--c"]  # a dangling option is argparse's to report
    assert normalise_argv(["--b", "--a", "-1:1"]) == ["--b", "--a", "-1:1"]  # --a is b's value


def test_command_modules_one_or_all() -> None:
    assert command_modules("stats") == ["hotjoin.cli.commands.stats"]
    assert command_modules("no-such-command") == []
    every = command_modules()
    assert every[: len(BUILT_IN)] != [] and len(every) == len(set(every))
    built = [m.rsplit(".", 1)[1] for m in every if m.startswith("hotjoin.cli.commands.")]
    assert built == [c for c in COMMANDS if c in BUILT_IN]  # in the order --help lists them


def test_only_the_chosen_command_is_registered() -> None:
    sub = next(a for a in build_parser("stats")._actions
               if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == ["stats"]
    assert not any(isinstance(a, argparse._SubParsersAction) and a.choices
                   for a in build_parser("")._actions)


def test_a_parse_error_is_one_line_with_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["no-such-command"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hotjoin: error: ") and err.endswith("(see hotjoin --help)")
    assert "\n" not in err and "stats" in err  # the choices are listed


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"hotjoin {version()}"


def test_help_shows_defaults_but_not_off_values() -> None:
    p = Parser(prog="x")
    p.add_argument("--n", type=int, default=0)
    p.add_argument("--m", type=int, default=5, help="m things")
    p.add_argument("--name", default="", help="a name")
    p.add_argument("--flag", action="store_true")
    p.add_argument("--path", default=None, help="where")
    text = p.format_help()
    assert "(default: 0)" in text and "m things (default: 5)" in text and "where" in text
    assert text.count("default") == 2


def test_an_option_without_help_and_an_empty_default_shows_no_default() -> None:
    p = Parser(prog="x")
    p.add_argument("--name", default="")
    assert "default" not in p.format_help()


def _with_command(monkeypatch: pytest.MonkeyPatch, run: Callable[[argparse.Namespace], int]
                  ) -> None:
    """Make ``hotjoin fake`` a sub-command running ``run``."""
    def build(command: str | None = None) -> argparse.ArgumentParser:
        parser = Parser(prog="hotjoin")
        sub = parser.add_subparsers(dest="command", parser_class=Parser)
        sub.add_parser("fake").set_defaults(func=run)
        return parser

    monkeypatch.setattr(main_module, "build_parser", build)


def test_exit_codes(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def raise_(exc: BaseException) -> Callable[[argparse.Namespace], int]:
        def run(args: argparse.Namespace) -> int:
            raise exc
        return run

    _with_command(monkeypatch, lambda args: 0)
    assert main(["fake"]) == 0
    _with_command(monkeypatch, lambda args: None)  # type: ignore[arg-type, return-value]
    assert main(["fake"]) == 0
    _with_command(monkeypatch, lambda args: 3)
    assert main(["fake"]) == 3
    _with_command(monkeypatch, raise_(CliError("no such topic 't'", code=1)))
    assert main(["fake"]) == 1
    assert capsys.readouterr().err == "hotjoin fake: error: no such topic 't'\n"
    _with_command(monkeypatch, raise_(CliError("bad option")))
    assert main(["fake"]) == 2
    _with_command(monkeypatch, raise_(KeyboardInterrupt()))
    assert main(["fake"]) == 130
    _with_command(monkeypatch, raise_(BrokenPipeError()))
    assert main(["fake"]) == SIGPIPE_EXIT == 141


def test_the_grpc_log_level_is_set_per_command(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_command(monkeypatch, lambda args: 0)
    monkeypatch.delenv("GRPC_VERBOSITY", raising=False)
    main(["fake"])
    assert main_module.os.environ["GRPC_VERBOSITY"] == "NONE"
    monkeypatch.setenv("GRPC_VERBOSITY", "DEBUG")  # the user's choice wins
    main(["fake"])
    assert main_module.os.environ["GRPC_VERBOSITY"] == "DEBUG"


def test_argv_defaults_to_the_process_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_command(monkeypatch, lambda args: 7)
    monkeypatch.setattr(sys, "argv", ["hotjoin", "fake"])
    assert main() == 7
