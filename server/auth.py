"""Principals, bearer tokens and per-topic rights, read from ``--auth-file`` (docs/how-to/security.md).

The auth file (TOML, or JSON when it ends in ``.json``) lists principals. Each has one or more
token *hashes* (``sha256:<64 hex>``, never the token itself), rights per topic pattern and
optional quota overrides::

    [principals.alice]
    tokens = ["sha256:5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"]
    topics = { "trades" = ["publish", "subscribe"], "*" = ["subscribe"] }
    limits = { publish_rate = 5000 }

A topic pattern is a topic name, ``*`` (every topic) or a prefix ending in ``*`` (``trades.*``);
a principal's rights on a topic are the union over the patterns that match it, and ``admin``
implies ``publish`` and ``subscribe``. Tokens are random 256-bit strings (``new_token``), so one
SHA-256 is as hard to invert as the token is to guess: a slow password hash (bcrypt) would add
nothing but ~100 ms to every RPC. No grpc import: ``server/interceptor.py`` reads the metadata
and the servicers call ``Principal.require``.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import threading
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hotjoin.server.errors import PermissionDenied, Unauthenticated
from hotjoin.server.quotas import LIMIT_FIELDS

RIGHTS = ("admin", "publish", "subscribe")
HASH_PREFIX = "sha256:"
TOKEN_PREFIX = "hj_"
METADATA_KEY = "authorization"
ANONYMOUS_LABEL = "anonymous"

_NAME = re.compile(r"^[A-Za-z0-9._@-]{1,128}$")
_PATTERN = re.compile(r"^(\*|[A-Za-z0-9._-]{1,128}\*?)$")
_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")
_PRINCIPAL_KEYS = {"token", "tokens", "topics", "limits"}

FAILURE_MESSAGES = {
    "missing": "missing credentials: this server requires the metadata 'authorization: Bearer <token>'",
    "malformed": "malformed authorization metadata: expected 'Bearer <token>'",
    "invalid": "invalid token",
    "revoked": "the token is no longer valid (the auth file was reloaded)",
}


def new_token() -> str:
    """A fresh bearer token: ``hj_`` + 256 random bits, URL-safe base64."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The auth-file form of a token: ``sha256:<hex digest of its UTF-8 bytes>``."""
    return HASH_PREFIX + hashlib.sha256(token.encode()).hexdigest()


class AuthFailure(Unauthenticated):
    """UNAUTHENTICATED with a ``reason`` (missing, malformed, invalid, revoked) for the metrics;
    the message never says which principals or tokens exist."""

    def __init__(self, reason: str) -> None:
        super().__init__(FAILURE_MESSAGES[reason])
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Grant:
    """Rights on the topics a pattern matches (a name, ``*``, or a prefix ending in ``*``)."""

    pattern: str
    rights: frozenset[str]

    def matches(self, topic: str) -> bool:
        p = self.pattern
        if p.endswith("*"):
            return topic.startswith(p[:-1])
        return p == topic


@dataclass(frozen=True)
class Principal:
    """Who is calling, and what they may do; ``unrestricted`` is the caller of a server without
    ``--auth-file`` (every right, owner name ``""``)."""

    name: str
    grants: tuple[Grant, ...] = ()
    limits: Mapping[str, float] = field(default_factory=dict)
    unrestricted: bool = False

    @property
    def label(self) -> str:
        """The name shown in logs and metrics (``anonymous`` without auth)."""
        return self.name or ANONYMOUS_LABEL

    @property
    def owner(self) -> str:
        """The owner recorded on the subscriptions this principal creates."""
        return self.name

    def rights(self, topic: str) -> frozenset[str]:
        """Union of the grants matching ``topic``; admin implies every right."""
        if self.unrestricted:
            return frozenset(RIGHTS)
        out: set[str] = set()
        for g in self.grants:
            if g.matches(topic):
                out |= g.rights
        return frozenset(RIGHTS) if "admin" in out else frozenset(out)

    def has(self, topic: str, right: str) -> bool:
        return right in self.rights(topic)

    def is_admin(self, topic: str) -> bool:
        return self.has(topic, "admin")

    def may_see(self, topic: str) -> bool:
        """Any right on the topic lets a principal see that it exists (list, get, stats)."""
        return bool(self.rights(topic))

    def require(self, topic: str, right: str, action: str) -> None:
        """Raise ``PermissionDenied`` naming the missing right unless the principal has it."""
        if not self.has(topic, right):
            raise PermissionDenied(
                f"principal {self.label!r} lacks the {right!r} right on topic {topic!r} "
                f"(needed to {action})", right)

    def require_any(self, topic: str, action: str) -> None:
        if not self.may_see(topic):
            raise PermissionDenied(
                f"principal {self.label!r} has no right on topic {topic!r} "
                f"(needed to {action}: one of admin, publish, subscribe)", "any")


ANONYMOUS = Principal("", unrestricted=True)


class AuthFileError(ValueError):
    """The auth file cannot be used; the message names the file and what is wrong."""


@dataclass(frozen=True)
class AuthTable:
    """One loaded auth file: principals by name and by the SHA-256 digest of each token."""

    principals: Mapping[str, Principal]
    by_digest: Mapping[bytes, Principal]


def parse_auth(data: Any, source: str = "auth file") -> AuthTable:
    """Validate a decoded auth file (see the module docstring); raises ``AuthFileError``."""

    def bad(msg: str) -> AuthFileError:
        return AuthFileError(f"{source}: {msg}")

    if not isinstance(data, Mapping):
        raise bad("expected a table with a 'principals' table")
    unknown = set(data) - {"principals"}
    if unknown:
        raise bad(f"unknown top-level key(s) {sorted(unknown)}; only 'principals' is allowed")
    principals = data.get("principals", {})
    if not isinstance(principals, Mapping):
        raise bad("'principals' must be a table of principal name -> settings")
    by_name: dict[str, Principal] = {}
    by_digest: dict[bytes, Principal] = {}
    for name, spec in principals.items():
        where = f"principal {name!r}"
        if not isinstance(name, str) or not _NAME.match(name):
            raise bad(f"{where}: names are 1-128 characters of letters, digits, '.', '_', '@', '-'")
        if not isinstance(spec, Mapping):
            raise bad(f"{where}: expected a table")
        extra = set(spec) - _PRINCIPAL_KEYS
        if extra:
            raise bad(f"{where}: unknown key(s) {sorted(extra)}; allowed: {sorted(_PRINCIPAL_KEYS)}")
        hashes = list(spec.get("tokens", []))
        if "token" in spec:
            hashes.append(spec["token"])
        if not hashes:
            raise bad(f"{where}: needs 'tokens' (a list of sha256:<hex> hashes; see `hotjoin auth token`)")
        grants: list[Grant] = []
        topics = spec.get("topics", {})
        if not isinstance(topics, Mapping):
            raise bad(f"{where}: 'topics' must map topic patterns to lists of rights")
        for pattern, rights in topics.items():
            if not isinstance(pattern, str) or not _PATTERN.match(pattern):
                raise bad(f"{where}: bad topic pattern {pattern!r} (a topic name, '*', or a prefix ending in '*')")
            if isinstance(rights, str) or not isinstance(rights, list):
                raise bad(f"{where}: rights of {pattern!r} must be a list, e.g. [\"publish\"]")
            wrong = [r for r in rights if r not in RIGHTS]
            if wrong:
                raise bad(f"{where}: unknown right(s) {wrong} on {pattern!r}; rights are {', '.join(RIGHTS)}")
            grants.append(Grant(pattern, frozenset(rights)))
        limits = spec.get("limits", {})
        if not isinstance(limits, Mapping):
            raise bad(f"{where}: 'limits' must be a table")
        for k, v in limits.items():
            if k not in LIMIT_FIELDS:
                raise bad(f"{where}: unknown limit {k!r}; limits are {', '.join(LIMIT_FIELDS)}")
            if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
                raise bad(f"{where}: limit {k!r} must be a number >= 0 (0 = unlimited)")
        principal = Principal(name, tuple(grants), dict(limits))
        by_name[name] = principal
        for h in hashes:
            if not isinstance(h, str) or not _HASH.match(h):
                raise bad(f"{where}: token hashes look like 'sha256:<64 lowercase hex>' "
                          "(the output of `hotjoin auth token`), not the token itself")
            digest = bytes.fromhex(h[len(HASH_PREFIX):])
            if digest in by_digest:
                raise bad(f"{where}: a token hash is listed twice (tokens must be unique)")
            by_digest[digest] = principal
    return AuthTable(by_name, by_digest)


def load_auth_file(path: Path) -> AuthTable:
    """Read and validate ``path`` (TOML, or JSON for ``*.json``); raises ``AuthFileError``."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise AuthFileError(f"{path}: cannot read the auth file ({e.strerror or e})") from None
    try:
        data = json.loads(raw) if path.suffix == ".json" else tomllib.loads(raw.decode())
    except (ValueError, UnicodeDecodeError) as e:
        raise AuthFileError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {e}") from None
    return parse_auth(data, str(path))


class Authenticator:
    """The current auth table of a server; ``reload`` swaps it atomically (SIGHUP)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._table = load_auth_file(path)
        self._lock = threading.Lock()
        self.generation = 0

    @property
    def principals(self) -> Mapping[str, Principal]:
        return self._table.principals

    def reload(self) -> AuthTable:
        """Load the file again; on error raise ``AuthFileError`` and keep the current table."""
        with self._lock:
            table = load_auth_file(self.path)
            self._table = table
            self.generation += 1
            return table

    def authenticate(self, metadata: Iterable[tuple[str, str | bytes]] | None) -> tuple[Principal, bytes]:
        """The principal of ``authorization: Bearer <token>`` and the token's digest, or
        ``AuthFailure``. The lookup is a dict keyed by the SHA-256 digest of the presented token:
        its timing can reveal at most how a *hash* compares, which does not help find a token
        (no constant-time comparison of secrets is involved; see docs/how-to/security.md)."""
        value: str | bytes | None = None
        for key, v in metadata or ():
            if key == METADATA_KEY:
                if value is not None:
                    raise AuthFailure("malformed")
                value = v
        if value is None:
            raise AuthFailure("missing")
        if isinstance(value, bytes):
            value = value.decode("latin-1")
        scheme, _, token = value.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthFailure("malformed")
        digest = hashlib.sha256(token.encode()).digest()
        principal = self._table.by_digest.get(digest)
        if principal is None:
            raise AuthFailure("invalid")
        return principal, digest

    def resolve(self, digest: bytes) -> Principal | None:
        """The principal that owns the token of ``digest`` in the current table, if any."""
        return self._table.by_digest.get(digest)


class Session:
    """The caller of one RPC. ``current()`` re-resolves the principal after an auth-file reload,
    so a long stream loses rights (or its token) as soon as the file says so."""

    __slots__ = ("_principal", "_auth", "_digest", "_gen")

    def __init__(self, principal: Principal, authenticator: Authenticator | None = None,
                 digest: bytes = b"") -> None:
        self._principal = principal
        self._auth = authenticator
        self._digest = digest
        self._gen = authenticator.generation if authenticator is not None else 0

    @property
    def principal(self) -> Principal:
        """The principal as last resolved (for logging; use ``current()`` to authorize)."""
        return self._principal

    def current(self) -> Principal:
        auth = self._auth
        if auth is not None and auth.generation != self._gen:
            p = auth.resolve(self._digest)
            if p is None:
                raise AuthFailure("revoked")
            self._principal, self._gen = p, auth.generation
        return self._principal


def auth_file_snippet(name: str, token_hash: str, grants: Mapping[str, Iterable[str]]) -> str:
    """The TOML lines declaring principal ``name`` with one token hash and ``grants``."""
    if not _NAME.match(name):
        raise ValueError(f"bad principal name {name!r}: 1-128 characters of letters, digits, '.', '_', '@', '-'")
    lines = [f"[principals.{json.dumps(name)}]", f"tokens = [{json.dumps(token_hash)}]"]
    if grants:
        for pattern, rights in grants.items():
            if not _PATTERN.match(pattern):
                raise ValueError(f"bad topic pattern {pattern!r}")
            wrong = [r for r in rights if r not in RIGHTS]
            if wrong:
                raise ValueError(f"unknown right(s) {wrong}; rights are {', '.join(RIGHTS)}")
        body = ", ".join(f"{json.dumps(p)} = {json.dumps(sorted(set(r)))}" for p, r in grants.items())
        lines.append(f"topics = {{ {body} }}")
    return "\n".join(lines) + "\n"
