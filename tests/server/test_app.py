"""Assembling a server (``server/app.py``) without serving traffic: what is refused before
anything opens (a non-loopback address without TLS and auth, bad limits, unreadable TLS or auth
files, a port in use — the data directory's lock is given back), the loopback rule, the target
string, auth reloads keeping the current file on error, and an idempotent stop
(docs/how-to/security.md). Serving end to end: ``test_server_e2e.py`` and the other server
tests."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from hotjoin.server.app import HotjoinServer, TlsFiles, is_loopback
from hotjoin.server.auth import AuthFileError, hash_token
from hotjoin.server.datadir import DataDirLock
from hotjoin.server.errors import InvalidArgument
from hotjoin.server.quotas import Limits


@pytest.mark.parametrize(("host", "want"), [
    ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("[::1]", True),
    ("localhost", True), ("0.0.0.0", False), ("::", False), ("10.1.2.3", False),
    ("8.8.8.8", False), ("no-such-host.invalid", False),
])
def test_is_loopback(host: str, want: bool) -> None:
    assert is_loopback(host) is want


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3"])
def test_a_non_loopback_address_without_tls_and_auth_is_refused_before_anything_opens(
        tmp_path: Path, host: str) -> None:
    data = tmp_path / "data"
    with pytest.raises(ValueError) as e:
        HotjoinServer(data_dir=data, host=host, port=0)
    msg = str(e.value)
    assert "without TLS and authentication" in msg and "--allow-insecure" in msg
    assert "\n" not in msg and not data.exists()  # nothing created


def test_bad_limits_and_unreadable_files_are_refused_before_anything_opens(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    with pytest.raises(InvalidArgument, match="publish_rate"):
        HotjoinServer(data_dir=data, port=0, limits=Limits(publish_rate=-1))
    with pytest.raises(ValueError, match="cannot read TLS file") as e:
        HotjoinServer(data_dir=data, port=0, tls=TlsFiles(tmp_path / "c.pem", tmp_path / "k.pem"))
    assert "c.pem" in str(e.value)
    with pytest.raises(AuthFileError, match="cannot read the auth file"):
        HotjoinServer(data_dir=data, port=0, auth_file=tmp_path / "auth.toml")
    assert not data.exists()


def test_a_port_in_use_gives_the_data_directory_back(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises((OSError, RuntimeError)):  # grpc: "Failed to bind to address"
            HotjoinServer(data_dir=tmp_path, port=port)
    DataDirLock(tmp_path).release()  # not held any more


def test_target_reload_and_stop(tmp_path: Path) -> None:
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"principals": {"alice": {"tokens": [hash_token("t")]}}}))
    server = HotjoinServer(data_dir=None, port=0, auth_file=auth)
    try:
        assert server.target == f"127.0.0.1:{server.port}" and server.port > 0
        auth.write_text("{not json")
        assert server.reload_auth() is False  # logged; the previous table stays
        assert set(server.authenticator.principals) == {"alice"}  # type: ignore[union-attr]
        auth.write_text(json.dumps({"principals": {"bob": {"tokens": [hash_token("u")]}}}))
        assert server.reload_auth() is True
        assert set(server.authenticator.principals) == {"bob"}  # type: ignore[union-attr]
    finally:
        server.stop(grace=0.1)
    server.stop(grace=0.1)  # twice: nothing more happens
    server.wait()  # returns at once once stopped


def test_without_an_auth_file_reload_says_so_and_ipv6_targets_are_bracketed() -> None:
    server = HotjoinServer(data_dir=None, host="::1", port=0)
    try:
        assert server.reload_auth() is False
        assert server.target == f"[::1]:{server.port}"
    finally:
        server.stop(grace=0.1)


def test_allow_insecure_accepts_the_risk(caplog: pytest.LogCaptureFixture) -> None:
    server = HotjoinServer(data_dir=None, host="0.0.0.0", port=0, allow_insecure=True)
    try:
        assert "INSECURE" in caplog.text
    finally:
        server.stop(grace=0.1)
