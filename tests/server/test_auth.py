"""Principals, tokens and rights (``server/auth.py``) as units: rights are the union of the
matching grants (against a brute-force pattern match), admin implies every right, the auth
file's validation names what is wrong in one line, ``authenticate`` reads exactly one bearer
token, a reload revokes a session's token, and the snippet ``hotjoin auth token`` prints parses
back. Through the wire: ``test_server_security*.py``."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hotjoin.server.auth import (
    ANONYMOUS,
    RIGHTS,
    TOKEN_PREFIX,
    Authenticator,
    AuthFailure,
    AuthFileError,
    Grant,
    Principal,
    Session,
    auth_file_snippet,
    hash_token,
    load_auth_file,
    new_token,
    parse_auth,
)
from hotjoin.server.errors import PermissionDenied

TOPICS = ["trades", "trades.eu", "trade", "orders", "t", ""]
PATTERNS = ["*", "trades", "trades*", "trades.*", "t*", "orders", "x"]


def _pattern_holds(pattern: str, topic: str) -> bool:
    if pattern == "*":
        return True
    if pattern.endswith("*"):
        return topic[: len(pattern) - 1] == pattern[:-1]
    return topic == pattern


@given(st.lists(st.tuples(st.sampled_from(PATTERNS),
                          st.sets(st.sampled_from(RIGHTS))), max_size=5),
       st.sampled_from(TOPICS))
def test_rights_are_the_union_of_the_matching_grants(grants: list[tuple[str, set[str]]],
                                                     topic: str) -> None:
    p = Principal("alice", tuple(Grant(pat, frozenset(r)) for pat, r in grants))
    union = set().union(*(r for pat, r in grants if _pattern_holds(pat, topic)))
    want = set(RIGHTS) if "admin" in union else union
    assert p.rights(topic) == want
    assert p.may_see(topic) == bool(want) and p.is_admin(topic) == ("admin" in want)
    for right in RIGHTS:
        if right in want:
            p.require(topic, right, "do it")
        else:
            with pytest.raises(PermissionDenied) as e:
                p.require(topic, right, "do it")
            assert f"lacks the {right!r} right on topic {topic!r}" in str(e.value)
    if not want:
        with pytest.raises(PermissionDenied, match="has no right on topic"):
            p.require_any(topic, "list it")


def test_anonymous_is_unrestricted() -> None:
    assert ANONYMOUS.rights("anything") == frozenset(RIGHTS)
    assert (ANONYMOUS.label, ANONYMOUS.owner) == ("anonymous", "")


def test_tokens_and_hashes() -> None:
    a, b = new_token(), new_token()
    assert a != b and a.startswith(TOKEN_PREFIX) and len(a) > 40
    assert hash_token("password") == (
        "sha256:5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8")


def _file(**principals: Any) -> dict[str, Any]:
    return {"principals": principals}


GOOD = {"tokens": [hash_token("t1")], "topics": {"trades": ["publish"], "*": ["subscribe"]},
        "limits": {"publish_rate": 5}}


def test_a_valid_table() -> None:
    table = parse_auth(_file(alice=GOOD, bob={"token": hash_token("t2")}))
    alice = table.principals["alice"]
    assert alice.limits == {"publish_rate": 5} and alice.rights("trades") == {"publish",
                                                                             "subscribe"}
    assert table.principals["bob"].rights("trades") == frozenset()
    assert len(table.by_digest) == 2


@pytest.mark.parametrize(("data", "words"), [
    ([], "expected a table"),
    ({"principals": {}, "users": {}}, "unknown top-level key"),
    ({"principals": []}, "must be a table"),
    (_file(**{"bad name!": GOOD}), "names are 1-128 characters"),
    (_file(alice="x"), "expected a table"),
    (_file(alice={**GOOD, "role": "x"}), "unknown key(s) ['role']"),
    (_file(alice={"topics": {}}), "needs 'tokens'"),
    (_file(alice={**GOOD, "topics": []}), "'topics' must map"),
    (_file(alice={**GOOD, "topics": {"a b": ["publish"]}}), "bad topic pattern"),
    (_file(alice={**GOOD, "topics": {"t": "publish"}}), "must be a list"),
    (_file(alice={**GOOD, "topics": {"t": ["read"]}}), "unknown right(s) ['read']"),
    (_file(alice={**GOOD, "limits": []}), "'limits' must be a table"),
    (_file(alice={**GOOD, "limits": {"speed": 1}}), "unknown limit 'speed'"),
    (_file(alice={**GOOD, "limits": {"streams": -1}}), "must be a number >= 0"),
    (_file(alice={**GOOD, "limits": {"streams": True}}), "must be a number >= 0"),
    (_file(alice={**GOOD, "tokens": ["t1"]}), "not the token itself"),
    (_file(alice={**GOOD, "tokens": [hash_token("t1").upper()]}), "not the token itself"),
    (_file(alice=GOOD, bob=GOOD), "listed twice"),
])
def test_each_mistake_is_one_line_naming_it(data: Any, words: str) -> None:
    with pytest.raises(AuthFileError) as e:
        parse_auth(data, "auth.toml")
    msg = str(e.value)
    assert msg.startswith("auth.toml: ") and words in msg and "\n" not in msg


def test_load_toml_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "auth.toml"
    toml.write_text(auth_file_snippet("alice", hash_token("t1"), {"trades*": ["publish"]}))
    assert load_auth_file(toml).principals["alice"].has("trades.eu", "publish")
    js = tmp_path / "auth.json"
    js.write_text(json.dumps(_file(alice=GOOD)))
    assert "alice" in load_auth_file(js).principals
    js.write_text("{")
    with pytest.raises(AuthFileError, match="not valid JSON"):
        load_auth_file(js)
    toml.write_text("[[[")
    with pytest.raises(AuthFileError, match="not valid TOML"):
        load_auth_file(toml)
    with pytest.raises(AuthFileError, match="cannot read the auth file"):
        load_auth_file(tmp_path / "missing.toml")


@pytest.fixture
def authenticator(tmp_path: Path) -> Authenticator:
    path = tmp_path / "auth.json"
    path.write_text(json.dumps(_file(alice=GOOD)))
    return Authenticator(path)


@pytest.mark.parametrize(("metadata", "reason"), [
    (None, "missing"), ([], "missing"), ([("other", "x")], "missing"),
    ([("authorization", "Basic abc")], "malformed"),
    ([("authorization", "Bearer")], "malformed"), ([("authorization", "Bearer  ")], "malformed"),
    ([("authorization", "Bearer t1"), ("authorization", "Bearer t1")], "malformed"),
    ([("authorization", "Bearer nope")], "invalid"),
])
def test_authenticate_refusals(authenticator: Authenticator, metadata: Any, reason: str) -> None:
    with pytest.raises(AuthFailure) as e:
        authenticator.authenticate(metadata)
    assert e.value.reason == reason and "t1" not in str(e.value) and "alice" not in str(e.value)


@pytest.mark.parametrize("value", ["Bearer t1", "bearer t1", "  BEARER   t1 ", b"Bearer t1"])
def test_authenticate_reads_the_bearer_token(authenticator: Authenticator,
                                             value: str | bytes) -> None:
    principal, digest = authenticator.authenticate([("authorization", value)])
    assert principal.name == "alice" and authenticator.resolve(digest) is principal


def test_a_reload_revokes_or_updates_a_session(authenticator: Authenticator) -> None:
    principal, digest = authenticator.authenticate([("authorization", "Bearer t1")])
    session = Session(principal, authenticator, digest)
    assert session.current() is principal
    changed = {**GOOD, "topics": {"orders": ["admin"]}}
    authenticator.path.write_text(json.dumps(_file(alice=changed)))
    authenticator.reload()
    assert session.current().is_admin("orders") and not session.current().has("trades",
                                                                               "publish")
    authenticator.path.write_text(json.dumps(_file(bob={"tokens": [hash_token("t9")]})))
    authenticator.reload()
    with pytest.raises(AuthFailure) as e:
        session.current()
    assert e.value.reason == "revoked"
    authenticator.path.write_text("{broken")
    generation = authenticator.generation
    with pytest.raises(AuthFileError):
        authenticator.reload()
    assert authenticator.generation == generation and "bob" in authenticator.principals
    assert Session(ANONYMOUS).current() is ANONYMOUS


def test_the_snippet_parses_back(tmp_path: Path) -> None:
    text = auth_file_snippet("ops@corp", hash_token("x"), {"*": ["subscribe", "subscribe"],
                                                           "trades": ["admin"]})
    table = parse_auth(tomllib.loads(text))
    p = table.principals["ops@corp"]
    assert p.rights("other") == {"subscribe"} and p.is_admin("trades")
    assert "topics" not in auth_file_snippet("a", hash_token("x"), {})
    for args in (("bad name", {}), ("a", {"a b": ["publish"]}), ("a", {"t": ["read"]})):
        with pytest.raises(ValueError):
            auth_file_snippet(args[0], hash_token("x"), args[1])  # type: ignore[arg-type]
