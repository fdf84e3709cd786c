"""``hotjoin ... --help`` reads cleanly: every command that talks to a server lists the connection
options, every option with a value shows its default, no markup or doubled ``%`` leaks through,
and ``topic show`` is what the help promises (``get`` still works)."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from hotjoin.cli.main import main

CONNECTED = [["topic"], ["topic", "create"], ["topic", "list"], ["topic", "show"],
             ["topic", "delete"], ["subscribe"], ["unsubscribe"], ["subscriptions"], ["publish"],
             ["delete"], ["listen"], ["stats"], ["cursors"], ["restore"]]
EVERY = [*CONNECTED, ["demo"], ["serve"], ["auth"], ["export"], ["topic", "inspect"],
         ["topic", "repair"], ["calibrate"], ["replay"], ["bench"]]


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The help text ``main`` prints (read from ``sys.stdout`` itself, so it does not depend on
    which capture owns the process's stdout at that moment)."""
    out = io.StringIO()
    with pytest.raises(SystemExit) as e, contextlib.redirect_stdout(out):
        main([*argv, "--help"])
    assert e.value.code == 0
    return out.getvalue()


@pytest.mark.parametrize("argv", CONNECTED, ids=" ".join)
def test_connection_options_in_every_client_command(argv: list[str],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, *argv)
    for option in ("--target", "--token-file", "--tls", "--tls-ca", "--tls-cert", "--tls-key",
                   "--server-name"):
        assert option in text, (argv, option)
    assert "connection (docs/how-to/security.md)" in text
    assert re.search(r"--target TARGET\s+server address HOST:PORT .*\(default: [\d.:]+\)",
                     " ".join(text.split()))


@pytest.mark.parametrize("argv", EVERY, ids=" ".join)
def test_help_renders_cleanly(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, *argv)
    assert "%%" not in text and "``" not in text and "(default: )" not in text, text
    assert "SPEC" not in text and "(default: None)" not in text


def test_every_valued_option_shows_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    text = " ".join(_help(capsys, "topic", "create").split())
    assert "--lateness LATENESS allowed disorder L (event-time units) (default: 0)" in text
    listen = " ".join(_help(capsys, "listen").split())
    assert "--count COUNT stop after this many matches (0: never) (default: 0)" in listen
    assert "--subscriber SUBSCRIBER every subscription of this subscriber (or give --id)" in listen
    demo = " ".join(_help(capsys, "demo").split())
    for option in ("--subscriptions SUBSCRIPTIONS subscriptions registered (default: 20000)",
                   "--port PORT gRPC port (a free one when it is taken) (default: 50051)"):
        assert option in demo


def test_listen_documents_its_control_lines(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, "listen")
    for line in ('{"caught_up": {"seq": N}}', '{"gap":', '{"unsubscribed":', "--matches-only"):
        assert line in text


def test_calibrate_says_95_percent(capsys: pytest.CaptureFixture[str]) -> None:
    assert "95% intervals" in " ".join(_help(capsys, "calibrate").split())


def test_topic_show_is_documented_and_get_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    topic = _help(capsys, "topic")
    assert "show" in topic and re.search(r"^\s+show\s+show one topic", topic, re.M)
    assert not re.search(r"^\s+get\b", topic, re.M), "get is accepted, not advertised"
    assert "create, list, show or delete topics" in _help(capsys)
    assert "show one topic" in topic
    get = _help(capsys, "topic", "get")
    assert "--target" in get
