"""Helpers shared by the client sub-commands: connection options, error reporting, JSON output.

Connection options (docs/how-to/security.md): ``--target`` (default ``$HOTJOIN_TARGET``, else
127.0.0.1:50051); ``--token-file`` or the environment
variable ``HOTJOIN_TOKEN`` (``--token`` works too but shows the token in the process list);
``--tls`` / ``--tls-ca`` for a TLS server, ``--tls-cert`` + ``--tls-key`` for mutual TLS,
``--server-name`` when the certificate's name differs from the target's host.

Output: every command prints protobuf messages the same way (``message_dict``): field names in
snake_case as in the ``.proto``, fields at their zero value kept (subscription 0 has its
``subscription_id``), 64-bit integers as JSON numbers (protobuf's JSON mapping prints them as
strings, which no shell tool expects), bytes as base64 (the mapping's rule).
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_TARGET = "127.0.0.1:50051"
TOKEN_ENV = "HOTJOIN_TOKEN"
TARGET_ENV = "HOTJOIN_TARGET"


def add_target(p: argparse.ArgumentParser, hidden: bool = False, after_action: bool = False) -> None:
    """``--target`` and the security options, as one group of ``p``'s help.

    ``after_action``: the options of a sub-action (``hotjoin topic create ...``), listed in its
    help too and leaving a value given before the action alone when absent; ``hidden``: the
    same, left out of the help.
    """
    group = p.add_argument_group("connection (docs/how-to/security.md)")
    target_default = os.environ.get(TARGET_ENV) or DEFAULT_TARGET

    def add(*names: str, help: str, **kw: Any) -> None:
        if hidden or after_action:
            default = kw.get("default")
            kw["default"] = argparse.SUPPRESS
            if after_action and default not in (None, False):
                help = f"{help} (default: {default})"
        group.add_argument(*names, help=argparse.SUPPRESS if hidden else help, **kw)

    add("--target", default=target_default,
        help=f"server address HOST:PORT (environment: {TARGET_ENV})")
    add("--token-file", type=Path, default=None,
        help=f"file holding the bearer token (default: the environment variable {TOKEN_ENV})")
    add("--token", default=None, help="bearer token (visible to other local users in the process "
        f"list: prefer --token-file or {TOKEN_ENV})")
    add("--tls", action="store_true", default=False,
        help="connect with TLS, trusting the system's CA certificates (default: plaintext)")
    add("--tls-ca", type=Path, default=None, help="connect with TLS, trusting this CA certificate (PEM)")
    add("--tls-cert", type=Path, default=None, help="client certificate for mutual TLS (PEM)")
    add("--tls-key", type=Path, default=None, help="the client certificate's private key (PEM)")
    add("--server-name", default=None,
        help="name to verify the server's certificate against (default: the target's host)")


def _uses_tls(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "tls", False) or getattr(args, "tls_ca", None)
                or getattr(args, "tls_cert", None))


# What gRPC's (BoringSSL's) connection errors say, lower-cased, per cause.
_UNTRUSTED = ("certificate_verify_failed", "certificate verify failed", "unable to get local issuer",
              "self signed certificate", "self-signed certificate")
_NAME_MISMATCH = ("peer name", "hostname", "subject alternative name", "does not match")
_CLIENT_CERT = ("certificate_required", "certificate required", "handshake_failure",
                "bad_certificate", "unknown_ca", "peer did not return a certificate")
_PLAINTEXT_SERVER = ("wrong_version_number", "wrong version number", "packet_length_too_long",
                     "record_layer_failure", "http_request")
_REFUSED = ("refused", "no route", "resolution", "dns", "name or service not known")
_CLOSED = ("socket closed", "connection reset", "end of file", "eof", "broken pipe",
           "handshake", "ssl", "tls")


def tls_cause(details: str, uses_tls: bool, client_cert: bool) -> str | None:
    """What a failed connection's ``details`` say went wrong with TLS, as advice, or None when
    they point elsewhere (e.g. a refused connection).

    >>> tls_cause("Ssl handshake failed: ... CERTIFICATE_VERIFY_FAILED", True, False)[:36]
    "the server's certificate is not sign"
    >>> tls_cause("Socket closed", False, False)[:30]
    'the server speaks TLS and this'
    >>> print(tls_cause("connection refused", False, False))
    None
    """
    low = details.lower()
    if any(w in low for w in _REFUSED):
        return None
    if uses_tls and any(w in low for w in _UNTRUSTED):
        return ("the server's certificate is not signed by a CA this client trusts "
                "(CERTIFICATE_VERIFY_FAILED): pass --tls-ca with the CA that signed it")
    if uses_tls and any(w in low for w in _NAME_MISMATCH):
        return ("the server's certificate does not name the target's host: connect by a name it "
                "lists, or pass --server-name NAME")
    if uses_tls and any(w in low for w in _CLIENT_CERT):
        return ("the server requires a client certificate (mutual TLS) and refused this one"
                + ("" if client_cert else ": pass --tls-cert and --tls-key"))
    if uses_tls and any(w in low for w in _PLAINTEXT_SERVER):
        return ("the server does not speak TLS (plaintext): drop --tls/--tls-ca/--tls-cert, "
                "or start it with --tls-cert/--tls-key")
    if not uses_tls and any(w in low for w in _CLOSED):
        return ("the server speaks TLS and this client does not: pass --tls-ca CA.crt (or --tls "
                "for the system's CAs), and --tls-cert/--tls-key if it asks for client "
                "certificates")
    if uses_tls and any(w in low for w in _CLOSED):
        if client_cert:
            return ("the server closed the connection during the TLS handshake, as a mutual-TLS "
                    "server does for a client certificate no CA it trusts signed: check "
                    "--tls-cert/--tls-key")
        return ("the server closed the connection during the TLS handshake, as a mutual-TLS "
                "server does for a client without a certificate: pass --tls-cert and --tls-key")
    return None


def rpc_error_line(e: Any, args: argparse.Namespace) -> str:
    """One line for a failed call: the status and the server's message, and for a connection
    that could not be set up, what went wrong (address, each TLS cause) and what to check.

    ``e`` is a typed client error (``hotjoin.clients.errors``; ``.code``, ``.message``).
    """
    code = getattr(e, "code", "UNKNOWN")
    if callable(code):  # a raw grpc.RpcError (from code that bypassed the client)
        code, details = code().name, (e.details() or "")
    else:
        details = getattr(e, "message", "") or str(e)
    details = details.strip()
    if code == "UNAVAILABLE":
        target = getattr(args, "target", DEFAULT_TARGET)
        low = details.lower()
        cause = tls_cause(details, _uses_tls(args), getattr(args, "tls_cert", None) is not None)
        if cause is not None:
            return f"UNAVAILABLE: no connection to {target}: {cause} [{_one_line(details)}]"
        if any(w in low for w in _REFUSED):
            return (f"UNAVAILABLE: cannot connect to {target} (is `hotjoin serve` running there? "
                    f"--target sets the address)")
    return f"{code}: {_one_line(details)}"


def _one_line(text: str) -> str:
    return " ".join(text.split())[:500]


def rpc_errors(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Report a failed call (a typed client error) as a one-line ``CliError`` (status code and
    message), exit code 1."""

    def wrapper(args: argparse.Namespace) -> int:
        from hotjoin.cli.main import CliError
        from hotjoin.clients.errors import CallError

        try:
            return fn(args)
        except CallError as e:
            raise CliError(rpc_error_line(e, args), code=1) from None

    return wrapper


def parse_range(text: str | None) -> tuple[float | None, float | None] | None:
    """``"lo:hi"`` with either side empty for unbounded; ``None`` stays unbounded.

    Raises ``argparse.ArgumentTypeError`` with what was wrong (usable as an argparse ``type``).
    """
    if text is None:
        return None
    lo_s, sep, hi_s = text.partition(":")
    if not sep:
        raise argparse.ArgumentTypeError(
            f"a range is LO:HI (either side may be empty for unbounded), got {text!r}")

    def bound(s: str, which: str) -> float | None:
        if not s.strip():
            return None
        try:
            x = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"range {text!r}: {which} bound {s.strip()!r} is not a number") from None
        if math.isnan(x):
            raise argparse.ArgumentTypeError(f"range {text!r}: {which} bound is NaN")
        return x

    lo, hi = bound(lo_s, "lower"), bound(hi_s, "upper")
    if lo is not None and hi is not None and lo > hi:
        raise argparse.ArgumentTypeError(f"range {text!r}: lower bound {lo:g} > upper bound {hi:g}")
    return lo, hi


def range_arg(text: str) -> tuple[float | None, float | None]:
    """argparse ``type`` for a ``LO:HI`` option."""
    r = parse_range(text)
    assert r is not None
    return r


def token_of(args: argparse.Namespace) -> str | None:
    """The bearer token: ``--token``, else ``--token-file``, else ``$HOTJOIN_TOKEN``."""
    from hotjoin.cli.main import CliError

    if getattr(args, "token", None):
        return str(args.token)
    path = getattr(args, "token_file", None)
    if path is not None:
        try:
            token = Path(path).read_text().strip()
        except OSError as e:
            raise CliError(f"cannot read --token-file {path}: {e.strerror}") from None
        if not token:
            raise CliError(f"--token-file {path} is empty")
        return token
    return os.environ.get(TOKEN_ENV) or None


def client(args: argparse.Namespace) -> Any:
    """The ``Client`` the connection options describe (``CliError`` for unusable TLS files)."""
    from hotjoin.cli.main import CliError
    from hotjoin.clients.client import Client

    try:
        return Client(
            args.target, token=token_of(args), tls=bool(getattr(args, "tls", False)),
            tls_ca=getattr(args, "tls_ca", None), tls_cert=getattr(args, "tls_cert", None),
            tls_key=getattr(args, "tls_key", None), server_name=getattr(args, "server_name", None))
    except ValueError as e:
        raise CliError(str(e)) from None


_INT64_TYPES: frozenset[int] | None = None


def _int64_types() -> frozenset[int]:
    global _INT64_TYPES
    if _INT64_TYPES is None:
        from google.protobuf.descriptor import FieldDescriptor as F

        _INT64_TYPES = frozenset({F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_SINT64, F.TYPE_FIXED64,
                                  F.TYPE_SFIXED64})
    return _INT64_TYPES


def message_dict(msg: Any) -> dict[str, Any]:
    """A protobuf message as the CLI prints it: snake_case names, zero values kept, 64-bit
    integers as numbers, keys in the ``.proto``'s field order (see the module docstring)."""
    from google.protobuf.json_format import MessageToDict

    d = MessageToDict(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    return _normalise(msg.DESCRIPTOR, d)


def _normalise(desc: Any, d: dict[str, Any]) -> dict[str, Any]:
    """Turn the int64 strings of protobuf's JSON mapping back into numbers and order the keys
    as the fields are declared (the JSON mapping appends zero-valued fields at the end)."""
    from google.protobuf.descriptor import FieldDescriptor as F

    out: dict[str, Any] = {}
    for f in desc.fields:
        if f.name not in d:
            continue
        v = d[f.name]
        if f.type == F.TYPE_MESSAGE and f.message_type.GetOptions().map_entry:
            vf = f.message_type.fields_by_name["value"]
            if vf.type in _int64_types():
                v = {k: int(x) for k, x in v.items()}
            elif vf.type == F.TYPE_MESSAGE:
                v = {k: _normalise(vf.message_type, x) for k, x in v.items()}
        elif f.type == F.TYPE_MESSAGE:
            if isinstance(v, list):
                v = [_normalise(f.message_type, x) if isinstance(x, dict) else x for x in v]
            elif isinstance(v, dict):
                v = _normalise(f.message_type, v)
        elif f.type in _int64_types():
            v = [int(x) for x in v] if isinstance(v, list) else int(v)
        out[f.name] = v
    out.update((k, v) for k, v in d.items() if k not in out)  # well-known types etc.: unchanged
    return out
