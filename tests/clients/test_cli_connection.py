"""What ``hotjoin`` says when a connection fails: each TLS cause its own one line (no client
certificate for a mutual-TLS server, an untrusted server certificate, TLS against plaintext and
the reverse, a name mismatch), and ``listen --commit`` commits what it knows when it ends."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from certs import CA, Pair
from server_harness import engine_factory

from hotjoin.cli.commands.common import tls_cause
from hotjoin.cli.main import main
from hotjoin.clients import BandJoin, Client, Range
from hotjoin.server.app import HotjoinServer, TlsFiles

HOTJOIN = str(Path(sys.executable).parent / "hotjoin")


class Pki:
    def __init__(self, tmp: Path) -> None:
        self.ca = CA.create(tmp / "pki")
        self.server = self.ca.issue("localhost", server=True)
        self.client = self.ca.issue("client", server=False)
        self.other_ca = CA.create(tmp / "other", "other CA")
        self.other_client: Pair = self.other_ca.issue("intruder", server=False)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@contextlib.contextmanager
def serving(tmp: Path, tls: TlsFiles | None) -> Iterator[str]:
    """One in-process server (plaintext, TLS or mutual TLS) at a time: its target."""
    srv = HotjoinServer(data_dir=tmp, port=0, engine_factory=engine_factory(), tls=tls).start()
    try:
        yield srv.target
    finally:
        srv.stop(0)


def _one_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("hotjoin topic: error: UNAVAILABLE"), err
    return err


def test_each_tls_cause_has_its_own_line(pki: Pki, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    ca, other = str(pki.ca.pair.cert), str(pki.other_ca.pair.cert)
    mtls = ["--tls-ca", ca]
    cases = {  # server -> {cause: (connection options, what the line must say)}
        "tls": {
            "plaintext client, TLS server": ([], "the server speaks TLS and this client does not: pass --tls-ca"),
            "untrusted server certificate": (["--tls-ca", other], "not signed by a CA this client trusts "
                                             "(CERTIFICATE_VERIFY_FAILED)"),
            "name mismatch": (["--tls-ca", ca, "--server-name", "db.example"], "does not name the target's host"),
        },
        "plain": {
            "TLS client, plaintext server": (["--tls-ca", ca], "the server does not speak TLS (plaintext)"),
        },
        "mtls": {
            "no client certificate, mutual TLS": (mtls, "for a client without a certificate: pass --tls-cert "
                                                  "and --tls-key"),
            "foreign client certificate, mutual TLS": (
                [*mtls, "--tls-cert", str(pki.other_client.cert), "--tls-key", str(pki.other_client.key)],
                "for a client certificate no CA it trusts signed"),
        },
    }
    tls = {"plain": None, "tls": TlsFiles(pki.server.cert, pki.server.key),
           "mtls": TlsFiles(pki.server.cert, pki.server.key, client_ca=pki.ca.pair.cert)}
    lines = {}
    for kind, causes in cases.items():
        with serving(tmp_path / kind, tls[kind]) as target:
            for name, (conn, needle) in causes.items():
                err = _one_line(capsys, "topic", "list", "--target", target, *conn)
                assert needle in err, (name, err)
                lines[name] = err.split("[", 1)[0]
            if kind == "mtls":  # and the right settings work
                assert main(["topic", "list", "--target", target, *mtls, "--tls-cert",
                             str(pki.client.cert), "--tls-key", str(pki.client.key)]) == 0
                capsys.readouterr()
    assert len(set(lines.values())) == len(lines), "every cause says something of its own"


def test_a_refused_connection_is_not_blamed_on_tls() -> None:
    assert tls_cause("failed to connect to all addresses: Connection refused", True, False) is None
    assert tls_cause("failed to connect: Socket closed", False, False).startswith("the server speaks TLS")


# ---- listen --commit ---------------------------------------------------------------------------


def _listen_then_interrupt(c: Client, target: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """``hotjoin listen ARGV`` until the server counts it as a listener and it printed what it
    prints at start (its caught_up line, unless --matches-only), then SIGINT (as Ctrl-C)."""
    deadline = time.monotonic() + 60
    while c.stats(argv[0]).listeners and time.monotonic() < deadline:  # the previous one is gone
        time.sleep(0.05)
    env = {**os.environ, "HOTJOIN_TARGET": target}
    p = subprocess.Popen([HOTJOIN, "listen", *argv], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(p.stdout.readline, "")),  # type: ignore[union-attr]
                              daemon=True)
    reader.start()
    quiet = "--matches-only" in argv
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (
            c.stats(argv[0]).listeners >= 1 and (quiet or any('"caught_up"' in x for x in lines))):
        time.sleep(0.05)
    time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    err = p.stderr.read() if p.stderr else ""  # type: ignore[union-attr]
    p.wait(60)
    reader.join(10)
    return subprocess.CompletedProcess(p.args, p.returncode, "".join(lines), err)


def test_listen_commit_with_no_message_commits_what_it_knows(tmp_path: Path) -> None:
    srv = HotjoinServer(data_dir=tmp_path / "d", port=0, engine_factory=engine_factory()).start()
    try:
        with Client(srv.target, timeout=30) as c:
            c.create_topic("t")
            a = c.subscribe("t", BandJoin(b=Range(-1, 1)), subscriber="me")
            b = c.subscribe("t", BandJoin(b=Range(-1, 1)), subscriber="me")
            c.subscribe("t", BandJoin(b=Range(5, 6)), subscriber="other")  # seq 3
            p = _listen_then_interrupt(c, srv.target, "t", "--subscriber", "me", "--commit")
            assert p.returncode == 130 and "Traceback" not in p.stderr, p.stderr
            assert [json.loads(x) for x in p.stdout.splitlines()] == [{"caught_up": {"seq": 3}}]
            assert "nothing to commit" in p.stderr
            assert all(x.committed_seq is None for x in c.get_cursors("t").cursors)
            p = _listen_then_interrupt(c, srv.target, "t", "--subscriber", "me", "--commit",
                                       "--after", "2", "--matches-only")
            assert p.returncode == 130 and p.stdout == "", (p.stdout, p.stderr)
            assert "committed seq 2 (--after) for 2 subscription(s)" in p.stderr
            cur = {x.subscription_id: x.committed_seq for x in c.get_cursors("t").cursors}
            assert cur == {a: 2, b: 2, 2: None}
            p = _listen_then_interrupt(c, srv.target, "t", "--id", str(a), "--commit", "--after", "3",
                                       "--ignore-committed")
            assert p.returncode == 130 and "committed" not in p.stderr, p.stderr
            cur = {x.subscription_id: x.committed_seq for x in c.get_cursors("t").cursors}
            assert cur == {a: 3, b: 2, 2: None}, "--id with --after: the stream's own cursor"
    finally:
        srv.stop(0)
