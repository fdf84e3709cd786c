"""``hotjoin serve`` (``cli/commands/serve.py``) up to the point where it would serve: every
option combination it refuses is one line naming the option, before a port is bound or the data
directory touched; the quota options become ``Limits``; a port in use is named; a shutdown that
finishes in time exits 0. Serving end to end: ``tests/server/test_server_cli.py`` and the
client tests."""

from __future__ import annotations

import argparse
import socket
import threading
from pathlib import Path

import pytest

from hotjoin.cli.commands import serve
from hotjoin.cli.main import CliError, build_parser, main
from hotjoin.server.quotas import Limits


def _args(*argv: str) -> argparse.Namespace:
    return build_parser("serve").parse_args(["serve", *argv])


@pytest.mark.parametrize(("argv", "words"), [
    (["--workers", "-1"], "--workers must be >= 0"),
    (["--ray-address", "ray://h:1"], "--ray-address needs --workers N"),
    (["--scale-out-scheme", "key"], "--scale-out-scheme needs --workers N"),
    (["--tls-cert", "c.pem"], "TLS needs both --tls-cert and --tls-key"),
    (["--tls-key", "k.pem"], "TLS needs both --tls-cert and --tls-key"),
    (["--tls-client-ca", "ca.pem"], "--tls-client-ca (mutual TLS) needs --tls-cert"),
    (["--delivery-retention-bytes", "-1"], "--delivery-retention-bytes must be >= 0"),
    (["--delivery-buffer-bytes", "-1"], "--delivery-buffer-bytes must be >= 0"),
    (["--listener-max-bytes", "-1"], "--listener-max-bytes must be >= 0"),
    (["--listen-linger-ms", "-1"], "--listen-linger-ms must be >= 0"),
    (["--delivery-retention-ms", "-2"], "--delivery-retention-ms must be >= 0 or -1"),
    (["--delivery-segment-bytes", "0"], "--delivery-segment-bytes > 0"),
    (["--max-batch-events", "10001"], "batch_events may be at most 10000"),
    (["--publish-rate", "-1"], "limit publish_rate must be >= 0"),
    (["--host", "0.0.0.0"], "refusing to listen on non-loopback address"),
])
def test_refusals_are_one_line_and_touch_nothing(tmp_path: Path, argv: list[str], words: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    assert main(["serve", "--data-dir", str(data), "--port", "0", "--metrics-port", "-1",
                 *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hotjoin serve: error: ") and words in err and err.count("\n") == 1
    assert not data.exists()


@pytest.mark.parametrize("option", ["--port", "--metrics-port"])
def test_a_port_in_use_is_named(tmp_path: Path, option: str,
                                capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        ports = {"--port": "0", "--metrics-port": "-1", option: str(port)}
        assert main(["serve", "--data-dir", str(tmp_path / "d"), *[x for kv in ports.items()
                                                                   for x in kv]]) == 1
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "address already in use" in err
    assert f"({option} chooses another" in err


def test_limits_of_the_quota_options() -> None:
    got = serve.limits_of(_args("--max-workers", "8", "--max-message-bytes", "100",
                                "--max-batch-events", "50", "--max-subscriptions", "3",
                                "--publish-rate", "2.5", "--publish-burst", "10"))
    assert got == Limits(message_bytes=100, batch_events=50, subscriptions=3, listeners=4,
                         streams=2, publish_rate=2.5, publish_burst=10.0)
    got = serve.limits_of(_args("--max-listeners", "1", "--max-streams", "0"))
    assert (got.listeners, got.streams) == (1, 0)
    assert serve.limits_of(_args()) == Limits.for_workers(64)


def test_check_port_skips_port_zero() -> None:
    serve._check_port("127.0.0.1", 0, "gRPC", "--port")  # the OS picks: nothing to check


def test_require_ray_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real = builtins.__import__

    def no_ray(name: str, *a: object, **k: object) -> object:
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real(name, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(CliError, match=r"pip install 'hotjoin\[ray\]'"):
        serve.require_ray()


def test_a_shutdown_in_time_exits_0() -> None:
    stopped = threading.Event()

    class Server:
        def stop(self, grace: float) -> None:
            assert grace == pytest.approx(0.8)
            stopped.set()

    assert serve._shut_down(Server(), 1.0) == 0 and stopped.is_set()


def test_the_linger_flag_defaults_to_the_servers_own_default() -> None:
    """The command line spells the default without importing the server (``--help`` stays
    quick): it must be ``delivery.LINGER_MS``."""
    from hotjoin.server.delivery import LINGER_MS

    assert _args().listen_linger_ms == LINGER_MS
