"""What the client sub-commands share (``cli/commands/common.py``): ``LO:HI`` ranges against a
reference parser, the bearer token's sources in order, the connection options (environment
default, hidden, after an action), one-line errors with TLS advice, and the JSON form of
protobuf messages (int64 as numbers, zero values kept, fields in ``.proto`` order)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.cli.commands import common
from hotjoin.cli.commands.common import (
    DEFAULT_TARGET,
    TARGET_ENV,
    TOKEN_ENV,
    add_target,
    message_dict,
    parse_range,
    range_arg,
    rpc_error_line,
    rpc_errors,
    tls_cause,
    token_of,
)
from hotjoin.cli.main import CliError
from hotjoin.clients.errors import NotFound, Unavailable
from hotjoin.proto import hotjoin_pb2 as pb

SIDE = st.one_of(st.just(""), st.just(" "), st.floats(allow_nan=True).map(repr),
                 st.sampled_from(["x", "1e3", "-0", "inf", "-inf", "nan", " 2 "]))


def _reference(text: str) -> tuple[float | None, float | None] | str:
    """The range ``text`` means, or "error"."""
    if ":" not in text:
        return "error"
    lo_s, hi_s = text.split(":", 1)
    out = []
    for s in (lo_s, hi_s):
        if not s.strip():
            out.append(None)
            continue
        try:
            x = float(s)
        except ValueError:
            return "error"
        if math.isnan(x):
            return "error"
        out.append(x)
    lo, hi = out
    if lo is not None and hi is not None and lo > hi:
        return "error"
    return lo, hi


@given(SIDE, SIDE, st.sampled_from([":", ""]))
def test_parse_range_against_a_reference(lo: str, hi: str, sep: str) -> None:
    text = f"{lo}{sep}{hi}"
    want = _reference(text)
    if want == "error":
        with pytest.raises(argparse.ArgumentTypeError) as e:
            parse_range(text)
        assert repr(text) in str(e.value) or "LO:HI" in str(e.value)
    else:
        assert parse_range(text) == want == range_arg(text)


def test_parse_range_boundaries() -> None:
    assert parse_range(None) is None
    assert parse_range(":") == (None, None)
    assert parse_range("2:2") == (2.0, 2.0)  # a point
    assert parse_range("-inf:inf") == (-math.inf, math.inf)
    with pytest.raises(argparse.ArgumentTypeError, match="lower bound 3 > upper bound 2"):
        parse_range("3:2")
    with pytest.raises(argparse.ArgumentTypeError, match="upper bound 'x' is not a number"):
        parse_range("1:x")


def _ns(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(**kw)


def test_token_sources_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "token"
    f.write_text("  from-file\n")
    monkeypatch.setenv(TOKEN_ENV, "from-env")
    assert token_of(_ns(token="given", token_file=f)) == "given"
    assert token_of(_ns(token=None, token_file=f)) == "from-file"
    assert token_of(_ns(token=None, token_file=None)) == "from-env"
    monkeypatch.delenv(TOKEN_ENV)
    assert token_of(_ns()) is None
    f.write_text("\n")
    with pytest.raises(CliError, match="is empty"):
        token_of(_ns(token_file=f))
    with pytest.raises(CliError, match="cannot read --token-file"):
        token_of(_ns(token_file=tmp_path / "missing"))


def _parser(**kw: bool) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_target(p, **kw)
    return p


def test_target_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TARGET_ENV, raising=False)
    assert _parser().parse_args([]).target == DEFAULT_TARGET
    monkeypatch.setenv(TARGET_ENV, "h:1")
    args = _parser().parse_args(["--tls", "--token-file", "t"])
    assert (args.target, args.tls, args.token_file) == ("h:1", True, Path("t"))
    assert "--target" in _parser().format_help()
    hidden = _parser(hidden=True)
    assert "--target" not in hidden.format_help()
    assert not hasattr(hidden.parse_args([]), "target")  # left to a value given before
    after = _parser(after_action=True)
    assert "(default: h:1)" in after.format_help()
    assert not hasattr(after.parse_args([]), "target")


@pytest.mark.parametrize(("details", "uses_tls", "cert", "words"), [
    ("failed to connect: Connection refused", True, False, None),
    ("Ssl handshake failed: CERTIFICATE_VERIFY_FAILED", True, False, "--tls-ca"),
    ("peer name localhost is not in peer certificate", True, False, "--server-name"),
    ("tlsv13 alert certificate required", True, False, "pass --tls-cert and --tls-key"),
    ("tlsv13 alert certificate required", True, True, "refused this one"),
    ("WRONG_VERSION_NUMBER", True, False, "does not speak TLS"),
    ("Socket closed", False, False, "speaks TLS and this client does not"),
    ("Socket closed", True, True, "check --tls-cert/--tls-key"),
    ("Socket closed", True, False, "client without a certificate"),
    ("deadline exceeded", True, False, None),
])
def test_tls_causes(details: str, uses_tls: bool, cert: bool, words: str | None) -> None:
    cause = tls_cause(details, uses_tls, cert)
    assert (cause is None) if words is None else (words in cause)  # type: ignore[operator]


def test_error_lines() -> None:
    args = _ns(target="h:9", tls=False, tls_ca=None, tls_cert=None)
    assert rpc_error_line(NotFound("no topic 't'\n  (really)"), args) == (
        "NOT_FOUND: no topic 't' (really)")
    line = rpc_error_line(Unavailable("failed to connect: Connection refused"), args)
    assert line.startswith("UNAVAILABLE: cannot connect to h:9") and "hotjoin serve" in line
    line = rpc_error_line(Unavailable("Socket closed"), args)
    assert line.startswith("UNAVAILABLE: no connection to h:9: the server speaks TLS")
    assert rpc_error_line(NotFound("x" * 2000), args) == "NOT_FOUND: " + "x" * 500


def test_rpc_errors_turn_call_errors_into_exit_code_1() -> None:
    @rpc_errors
    def failing(args: argparse.Namespace) -> int:
        raise NotFound("no topic 't'")

    with pytest.raises(CliError) as e:
        failing(_ns(target="h:9"))
    assert e.value.code == 1 and str(e.value) == "NOT_FOUND: no topic 't'"
    assert rpc_errors(lambda args: 5)(_ns()) == 5


def test_message_dict_prints_int64_as_numbers_in_field_order() -> None:
    msg = pb.TopicStats(topic="t", seq=2 ** 62, tuples={"R": 2 ** 40, "S": 0})
    d = message_dict(msg)
    assert d["seq"] == 2 ** 62 and d["tuples"] == {"R": 2 ** 40, "S": 0}
    names = [f.name for f in pb.TopicStats.DESCRIPTOR.fields]
    assert list(d) == [n for n in names if n in d]  # the .proto's order
    assert json.loads(json.dumps(d)) == d
    zero = message_dict(pb.TopicStats())
    assert zero["seq"] == 0 and zero["topic"] == ""  # zero values kept


def test_client_reports_unusable_tls_files(tmp_path: Path) -> None:
    args = _ns(target="127.0.0.1:1", token=None, token_file=None, tls=False,
               tls_ca=tmp_path / "missing-ca.pem", tls_cert=None, tls_key=None, server_name=None)
    with pytest.raises(CliError) as e:
        common.client(args)
    assert "missing-ca.pem" in str(e.value) and "\n" not in str(e.value)
