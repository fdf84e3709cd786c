"""``hotjoin auth token|hash|check`` (``cli/commands/auth.py``): a fresh token whose printed
auth-file lines parse back and hold only its hash, the token written 0600 when asked, ``hash``
from stdin, ``check`` listing rights and never a hash; bad grants and files are one line."""

from __future__ import annotations

import io
import json
import stat
import tomllib
from pathlib import Path

import pytest

from hotjoin.cli.main import main
from hotjoin.server.auth import hash_token, parse_auth


def test_token_prints_the_token_and_lines_with_its_hash_only(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["auth", "token", "--name", "alice", "--grant", "trades=publish, subscribe",
                 "--grant", "trades=admin", "--grant", "*=subscribe"]) == 0
    out, err = capsys.readouterr()
    token, toml = out.split("\n", 1)
    assert token.startswith("hj_") and token not in toml and "not stored anywhere" in err
    table = parse_auth(tomllib.loads(toml))
    alice = table.principals["alice"]
    assert alice.is_admin("trades") and alice.rights("other") == {"subscribe"}
    assert list(table.by_digest.values()) == [alice]
    assert hash_token(token) in toml


def test_token_as_json_and_to_a_private_file(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "alice.token"
    assert main(["auth", "token", "--name", "alice", "--json", "--token-out", str(out_file)]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert "token" not in rec and rec["name"] == "alice"
    token = out_file.read_text().strip()
    assert rec["token_hash"] == hash_token(token) and rec["toml"].startswith('[principals."alice"]')
    assert stat.S_IMODE(out_file.stat().st_mode) == 0o600
    assert main(["auth", "token", "--name", "bob", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["token_hash"] == hash_token(rec["token"])


@pytest.mark.parametrize(("argv", "words"), [
    (["--name", "alice", "--grant", "trades"], "--grant must look like TOPIC=RIGHT"),
    (["--name", "alice", "--grant", "=publish"], "--grant must look like TOPIC=RIGHT"),
    (["--name", "alice", "--grant", "t=read"], "unknown right(s) ['read']"),
    (["--name", "not a name"], "bad principal name"),
])
def test_bad_token_requests_are_one_line(argv: list[str], words: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["auth", "token", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hotjoin auth: error: ") and words in err and err.count("\n") == 1


def test_hash_reads_the_token_from_stdin(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("secret\n"))
    assert main(["auth", "hash"]) == 0
    assert capsys.readouterr().out == hash_token("secret") + "\n"
    monkeypatch.setattr("sys.stdin", io.StringIO("secret\n"))
    assert main(["auth", "hash", "--name", "alice"]) == 0
    assert parse_auth(tomllib.loads(capsys.readouterr().out)).principals["alice"]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    assert main(["auth", "hash"]) == 2
    assert "no token on stdin" in capsys.readouterr().err


def test_check_lists_rights_and_never_a_hash(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "auth.toml"
    digest = hash_token("t")
    f.write_text(f'[principals.alice]\ntokens = ["{digest}"]\ntopics = {{ "t*" = ["publish"] }}\n'
                 "limits = { publish_rate = 5 }\n")
    assert main(["auth", "check", str(f)]) == 0
    out = capsys.readouterr().out
    assert json.loads(out) == {"ok": True, "tokens": 1, "principals": {
        "alice": {"topics": {"t*": ["publish"]}, "limits": {"publish_rate": 5}}}}
    assert digest[7:] not in out
    f.write_text("[principals.alice]\n")
    assert main(["auth", "check", str(f)]) == 1
    err = capsys.readouterr().err
    assert "needs 'tokens'" in err and err.count("\n") == 1
