"""The ``hotjoin`` command line: one console command with sub-commands.

Each sub-command lives in its own module under ``cli/commands`` (or comes from a
``hotjoin.commands`` entry point) and exposes ``register(subparsers) -> None``. Only the module of
the sub-command being run is imported to build the parser (all of them for ``hotjoin --help`` or
an unknown command), so a sub-command's heavy imports (numba, pyspark) are paid only by the
command that needs them: ``hotjoin stats`` loads the client, not the engine.

Conventions every sub-command follows (docs/how-to/cli.md): results go to stdout as JSON,
progress and errors to stderr; a user error is one line ``hotjoin CMD: error: ...`` and exit
code 2, a failed operation (a server error, rejected events) exit code 1, and a reader that
goes away (``hotjoin listen | head``) ends the command quietly with 141 (128 + SIGPIPE), as
other Unix tools do. ``--help`` shows every option's default.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

# Sub-commands in the order `hotjoin --help` lists them: built-in ones by module; the others
# come from the ``hotjoin.commands`` entry points (the ops tooling: bench, replay, calibrate), so
# this package never imports ``hotjoin.ops``.
COMMANDS: tuple[str, ...] = (
    "demo", "bench", "serve", "auth", "topic", "subscribe", "unsubscribe", "subscriptions",
    "publish", "delete", "listen", "stats", "cursors", "export", "restore", "replay", "calibrate",
)
BUILT_IN = frozenset({"demo", "serve", "auth", "topic", "subscribe", "unsubscribe",
                      "subscriptions", "publish", "delete", "listen", "stats", "cursors", "export",
                      "restore"})
ENTRY_POINTS = "hotjoin.commands"


def command_modules(only: str | None = None) -> list[str]:
    """The modules of every sub-command (``register(subparsers)`` each), in ``COMMANDS`` order,
    then any other ``hotjoin.commands`` entry point by name; with ``only``, the module of that
    sub-command alone (none when it is unknown)."""
    from importlib.metadata import entry_points

    if only in BUILT_IN:
        return [f"hotjoin.cli.commands.{only}"]
    plugins = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINTS)}
    if only is not None:
        return [plugins[only]] if only in plugins else []
    out = []
    for name in COMMANDS:
        if name in BUILT_IN:
            out.append(f"hotjoin.cli.commands.{name}")
        elif name in plugins:
            out.append(plugins.pop(name))
    return out + [plugins[k] for k in sorted(plugins)]


# Options taking a range LO:HI, whose value may start with "-" (``--b -2.5:2.5``).
RANGE_OPTIONS = frozenset({"--a", "--b", "--c"})
_NEGATIVE_VALUE = re.compile(r"^-(\d|\.\d|inf)")
SIGPIPE_EXIT = 141


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows every option's default (``0`` included; not ``None``, ``False``, ``""`` or ``[]``,
    which mean "off", nor a default the help text already states); descriptions keep their line
    breaks."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        d = action.default
        off = d is None or d is False or d is argparse.SUPPRESS or (isinstance(d, str | list) and not d)
        if off or "default" in text or not action.option_strings:
            return text
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (no usage block) and whose help shows
    defaults; sub-parsers inherit it."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def add_argument(self, *args: object, **kwargs: object) -> argparse.Action:  # type: ignore[override]
        """Options without help text still show their default in ``--help``."""
        if (args and str(args[0]).startswith("-") and "help" not in kwargs
                and kwargs.get("action") not in ("store_true", "store_false", "help", "version")
                and kwargs.get("default") not in (None, "", [], ())):
            kwargs["help"] = "(default: %(default)s)"
        return super().add_argument(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def version() -> str:
    """The installed distribution's version."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("hotjoin")
    except PackageNotFoundError:  # running from a checkout that is not installed
        return "unknown"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``hotjoin`` parser with every sub-command, or with ``command``'s alone when it names
    one (``""``: none, enough for ``--version``)."""
    parser = Parser(
        prog="hotjoin",
        description="hotjoin: continuous-join pub/sub server (stabbing-set index with hotspots)",
        epilog="`hotjoin COMMAND --help` lists a command's options with their defaults.",
    )
    parser.add_argument("--version", action="version", version=f"hotjoin {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    if command == "":
        modules: list[str] = []
    else:  # an unknown command: all of them, so that the error lists the choices
        modules = (command_modules(command) if command else []) or command_modules()
    for name in modules:
        importlib.import_module(name).register(sub)
    return parser


def normalise_argv(argv: Sequence[str]) -> list[str]:
    """``--b -2.5:2.5`` → ``--b=-2.5:2.5``: argparse would take ``-2.5:2.5`` for an option."""
    out: list[str] = []
    it = iter(argv)
    for tok in it:
        if tok in RANGE_OPTIONS:
            nxt = next(it, None)
            if nxt is not None and _NEGATIVE_VALUE.match(nxt):
                out.append(f"{tok}={nxt}")
                continue
            out.append(tok)
            if nxt is not None:
                out.append(nxt)
            continue
        out.append(tok)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen sub-command; returns the process exit code.

    A sub-command raising ``CliError`` exits with its code and a one-line message on stderr.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    # gRPC's C core logs e.g. failed TLS handshakes on stderr, beside our one line: clients say
    # what went wrong themselves; the server keeps gRPC's errors (GRPC_VERBOSITY overrides both).
    # Set before the parser is built: building it imports the sub-commands' modules, and any of
    # them may load gRPC, which reads the variable once.
    command = next((a for a in argv if not a.startswith("-")), "")
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR" if command in ("serve", "demo") else "NONE")
    if command:
        parser = build_parser(command)
    elif "--version" in argv and not {"-h", "--help"} & set(argv):
        parser = build_parser("")
    else:
        parser = build_parser()
    args = parser.parse_args(normalise_argv(argv))
    try:
        rc = args.func(args)
    except CliError as e:
        print(f"hotjoin {args.command}: error: {e}", file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _silence_stdout()
        return SIGPIPE_EXIT
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        return SIGPIPE_EXIT
    return int(rc or 0)


def _silence_stdout() -> None:
    """The reader of stdout went away: point stdout at /dev/null so that the interpreter's own
    flush at exit does not raise again (Python docs, "Note on SIGPIPE")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (e.g. captured in tests)
        pass


class CliError(Exception):
    """A user-facing failure: printed as one line, exits with ``code``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


if __name__ == "__main__":  # ``python -m hotjoin.cli.main``: the commands raise the imported
    from hotjoin.cli.main import main as _main  # module's CliError, not this copy's

    sys.exit(_main())
