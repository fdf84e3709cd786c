"""Transport security end to end over real gRPC on loopback: TLS refuses plaintext clients, mutual
TLS refuses clients without a certificate signed by its CA, non-loopback binds need TLS and auth
(or an explicit --allow-insecure), and ``hotjoin serve`` + the CLI work with TLS, tokens and a
SIGHUP reload (docs/how-to/security.md). Certificates are generated per test (tests/server/certs.py).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from certs import CA
from server_harness import engine_factory
from test_server_security import PRINCIPALS, write_auth

from hotjoin.cli.main import main
from hotjoin.clients import Unauthenticated, Unavailable
from hotjoin.clients.client import HotjoinClient, band
from hotjoin.server.app import HotjoinServer, TlsFiles, is_loopback
from hotjoin.server.auth import hash_token

ROOT = Path(__file__).resolve().parents[2]


class Pki:
    """A CA with a server and a client certificate, and an unrelated CA with its own client."""

    def __init__(self, tmp: Path) -> None:
        self.ca = CA.create(tmp / "pki")
        self.server = self.ca.issue("localhost", server=True)
        self.client = self.ca.issue("client", server=False)
        self.other_ca = CA.create(tmp / "other", "other CA")
        self.other_client = self.other_ca.issue("intruder", server=False)


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path)


def _server(tmp: Path, tls: TlsFiles, **kw: object) -> HotjoinServer:
    return HotjoinServer(data_dir=tmp / "data", port=0, tls=tls, engine_factory=engine_factory(),
                         **kw).start()  # type: ignore[arg-type]


def _refused(c: HotjoinClient) -> None:
    with pytest.raises(Unavailable) as err:
        c.list_topics()
    assert err.value.code == "UNAVAILABLE", err.value.message


def test_tls_refuses_plaintext_and_untrusted(tmp_path: Path, pki: Pki) -> None:
    srv = _server(tmp_path, TlsFiles(pki.server.cert, pki.server.key))
    try:
        with HotjoinClient(srv.target, timeout=10, tls_ca=pki.ca.pair.cert) as ok:
            ok.create_topic("t")
            assert [t.name for t in ok.list_topics()] == ["t"]
        with HotjoinClient(f"localhost:{srv.port}", timeout=10, tls_ca=pki.ca.pair.cert) as by_name:
            assert [t.name for t in by_name.list_topics()] == ["t"]
        with HotjoinClient(srv.target, timeout=5) as plain:  # plaintext client: no handshake, no RPC
            _refused(plain)
        with HotjoinClient(srv.target, timeout=5, tls_ca=pki.other_ca.pair.cert) as untrusting:
            _refused(untrusting)
        # a certificate that does not name the target is refused unless told which name to expect
        with HotjoinClient(srv.target, timeout=5, tls_ca=pki.ca.pair.cert, server_name="db.example") as wrong:
            _refused(wrong)
    finally:
        srv.stop(0)


def test_mutual_tls_refuses_clients_without_a_ca_signed_certificate(tmp_path: Path, pki: Pki) -> None:
    srv = _server(tmp_path, TlsFiles(pki.server.cert, pki.server.key, client_ca=pki.ca.pair.cert))
    try:
        with HotjoinClient(srv.target, timeout=10, tls_ca=pki.ca.pair.cert, tls_cert=pki.client.cert,
                           tls_key=pki.client.key) as ok:
            ok.create_topic("t")
            assert ok.subscribe("t", band((0, 1))) == 0
        with HotjoinClient(srv.target, timeout=5, tls_ca=pki.ca.pair.cert) as no_cert:
            _refused(no_cert)
        with HotjoinClient(srv.target, timeout=5, tls_ca=pki.ca.pair.cert, tls_cert=pki.other_client.cert,
                           tls_key=pki.other_client.key) as foreign:
            _refused(foreign)
        with HotjoinClient(srv.target, timeout=5) as plain:
            _refused(plain)
        with pytest.raises(ValueError, match="both a client certificate and its key"):
            HotjoinClient(srv.target, tls_ca=pki.ca.pair.cert, tls_cert=pki.client.cert)
    finally:
        srv.stop(0)


def test_non_loopback_bind_needs_tls_and_auth(tmp_path: Path, pki: Pki, caplog: pytest.LogCaptureFixture) -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.1.2.3") and not is_loopback("::")
    with pytest.raises(ValueError, match="refusing to listen on non-loopback address '0.0.0.0' without TLS and authentication"):
        HotjoinServer(data_dir=tmp_path / "a", host="0.0.0.0", port=0)
    write_auth(tmp_path / "auth.toml", PRINCIPALS)
    with pytest.raises(ValueError, match="without TLS:"):
        HotjoinServer(data_dir=tmp_path / "a", host="0.0.0.0", port=0, auth_file=tmp_path / "auth.toml")
    assert not (tmp_path / "a").exists(), "a refused start opens no topic"
    with caplog.at_level(logging.WARNING, logger="hotjoin.server"):
        srv = HotjoinServer(data_dir=tmp_path / "b", host="0.0.0.0", port=0, allow_insecure=True,
                            engine_factory=engine_factory())
        srv.stop(0)
    assert "INSECURE: listening on 0.0.0.0 without TLS and authentication" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="hotjoin.server"):
        srv = HotjoinServer(data_dir=tmp_path / "c", host="0.0.0.0", port=0, engine_factory=engine_factory(),
                            tls=TlsFiles(pki.server.cert, pki.server.key), auth_file=tmp_path / "auth.toml")
        srv.stop(0)
    assert "INSECURE" not in caplog.text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served(tmp_path: Path, pki: Pki) -> Iterator[tuple[subprocess.Popen[bytes], int, dict[str, str], Path]]:
    """``hotjoin serve`` in a child process with TLS, --auth-file and --audit-log."""
    tokens = write_auth(tmp_path / "auth.toml", PRINCIPALS)
    port = _free_port()
    log = tmp_path / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("serve_proc.py")), "--data-dir", str(tmp_path / "data"),
             "--port", str(port), "--metrics-port", "-1", "--auth-file", str(tmp_path / "auth.toml"),
             "--audit-log", str(tmp_path / "audit.jsonl"), "--tls-cert", str(pki.server.cert),
             "--tls-key", str(pki.server.key)],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc, port, tokens, tmp_path
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_serve_and_cli_with_tls_tokens_and_sighup(served: tuple[subprocess.Popen[bytes], int, dict[str, str], Path],
                                                  pki: Pki, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    proc, port, tokens, tmp = served
    target = f"127.0.0.1:{port}"
    with HotjoinClient(target, tls_ca=pki.ca.pair.cert, token=tokens["root"]) as root:
        root.wait_ready(60)
    (tmp / "root.tok").write_text(tokens["root"] + "\n")
    conn = ["--target", target, "--tls-ca", str(pki.ca.pair.cert)]
    rc, out, _ = _cli(capsys, "topic", "create", "t", *conn, "--token-file", str(tmp / "root.tok"))
    assert rc == 0 and json.loads(out)["name"] == "t"
    monkeypatch.setenv("HOTJOIN_TOKEN", tokens["alice"])
    rc, out, _ = _cli(capsys, "subscribe", *conn, "--server-name", "localhost", "t", "--kind", "band", "--b=-1:1", "--subscriber", "me")
    assert rc == 0 and json.loads(out) == {"subscription_id": 0}
    rc, _, err = _cli(capsys, "topic", "create", "u", *conn)  # alice is no admin
    assert rc == 1 and "PERMISSION_DENIED: principal 'alice' lacks the 'admin' right on topic 'u'" in err
    monkeypatch.delenv("HOTJOIN_TOKEN")
    rc, _, err = _cli(capsys, "stats", *conn, "t")
    assert rc == 1 and "UNAUTHENTICATED: missing credentials" in err
    rc, _, err = _cli(capsys, "topic", "list", *conn[:2])  # plaintext against the TLS port
    assert rc == 1 and "UNAVAILABLE" in err and "the server speaks TLS and this client does not: pass --tls-ca" in err, err
    assert len(err.strip().splitlines()) == 1, err
    # SIGHUP: carol is added and alice's token replaced, without a restart
    carol = write_auth(tmp / "auth.toml", {**PRINCIPALS, "carol": {"t": ["subscribe"]}},
                       {k: v for k, v in tokens.items() if k != "alice"})
    os.kill(proc.pid, signal.SIGHUP)
    deadline = time.monotonic() + 20
    with HotjoinClient(target, tls_ca=pki.ca.pair.cert, token=carol["carol"], timeout=10) as c:
        while True:
            try:
                assert c.stats("t").topic == "t"
                break
            except Unauthenticated:
                assert time.monotonic() < deadline
                time.sleep(0.1)
    rc, _, err = _cli(capsys, "stats", *conn, "--token", tokens["alice"], "t")
    assert rc == 1 and "UNAUTHENTICATED: invalid token" in err
    assert proc.poll() is None, "SIGHUP must not stop the server"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    audit = [json.loads(x) for x in (tmp / "audit.jsonl").read_text().splitlines()]
    assert ("topic.create", "root", "ok") in [(r["action"], r["principal"], r["outcome"]) for r in audit]
    assert [r["outcome"] for r in audit if r["action"] == "auth.reload"] == ["ok"]
    logs = (tmp / "server.log").read_text() + (tmp / "audit.jsonl").read_text()
    assert "auth file" in logs and "reloaded" in logs
    for secret in [*tokens.values(), *carol.values()]:
        assert secret not in logs and hash_token(secret)[7:] not in logs
