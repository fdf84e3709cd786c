"""``hotjoin auth token|hash|check``: make bearer tokens and check auth files (docs/how-to/security.md).

``hotjoin auth token --name alice --grant trades=publish,subscribe`` prints a fresh random token
(for the client; it is stored nowhere) and the auth-file lines holding only its SHA-256 hash, so
nobody ever hashes a token by hand. ``hash`` hashes an existing token read from stdin, ``check``
validates an auth file and lists its principals' rights (never any hash).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("auth", help="make bearer tokens and check auth files",
                       description="Bearer tokens and auth files for `hotjoin serve --auth-file`.")
    asub = p.add_subparsers(dest="action", required=True)
    t = asub.add_parser("token", help="generate a token and the auth-file lines with its hash")
    t.add_argument("--name", required=True, help="principal name (letters, digits, . _ @ -)")
    t.add_argument("--grant", action="append", default=[], metavar="TOPIC=RIGHT[,RIGHT]",
                   help="rights on a topic, '*' or a 'prefix*' (admin, publish, subscribe; repeatable)")
    t.add_argument("--token-out", type=Path,
                   help="write the token to this file (mode 0600) instead of printing it")
    t.add_argument("--json", action="store_true", help="print {name, token, token_hash, toml} as JSON")
    h = asub.add_parser("hash", help="print the auth-file hash of a token read from stdin")
    h.add_argument("--name", help="also print the auth-file lines for this principal")
    c = asub.add_parser("check", help="validate an auth file and list its principals' rights")
    c.add_argument("file", type=Path)
    p.set_defaults(func=run)


def _grants(specs: list[str]) -> dict[str, list[str]]:
    from hotjoin.cli.main import CliError

    out: dict[str, list[str]] = {}
    for spec in specs:
        topic, sep, rights = spec.partition("=")
        if not sep or not topic or not rights:
            raise CliError(f"--grant must look like TOPIC=RIGHT[,RIGHT], got {spec!r}")
        out.setdefault(topic, []).extend(r.strip() for r in rights.split(",") if r.strip())
    return out


def run(args: argparse.Namespace) -> int:
    from hotjoin.cli.main import CliError
    from hotjoin.server.auth import (
        AuthFileError,
        auth_file_snippet,
        hash_token,
        load_auth_file,
        new_token,
    )

    if args.action == "check":
        try:
            table = load_auth_file(args.file)
        except AuthFileError as e:
            raise CliError(str(e), code=1) from None
        out = {name: {"topics": {g.pattern: sorted(g.rights) for g in p.grants},
                      "limits": dict(p.limits)}
               for name, p in table.principals.items()}
        print(json.dumps({"ok": True, "principals": out, "tokens": len(table.by_digest)}, indent=2))
        return 0
    if args.action == "hash":
        token = sys.stdin.readline().strip()
        if not token:
            raise CliError("no token on stdin")
        digest = hash_token(token)
        print(auth_file_snippet(args.name, digest, {}) if args.name else digest, end="" if args.name else "\n")
        return 0
    token = new_token()
    digest = hash_token(token)
    try:
        snippet = auth_file_snippet(args.name, digest, _grants(args.grant))
    except ValueError as e:
        raise CliError(str(e)) from None
    if args.token_out is not None:
        fd = os.open(args.token_out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
    if args.json:
        rec = {"name": args.name, "token_hash": digest, "toml": snippet}
        if args.token_out is None:
            rec["token"] = token
        print(json.dumps(rec, indent=2))
        return 0
    if args.token_out is None:
        print(f"# token for {args.name!r}: give it to the client (--token-file or HOTJOIN_TOKEN); "
              "it is not stored anywhere and cannot be recovered", file=sys.stderr)
        print(token)
    else:
        print(f"# token for {args.name!r} written to {args.token_out}", file=sys.stderr)
    print("# add to the auth file, then send the server SIGHUP:", file=sys.stderr)
    print(snippet, end="")
    return 0
