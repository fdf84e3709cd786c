"""Authentication, per-topic authorization, subscription ownership and the audit trail, end to end
over real gRPC on loopback (docs/how-to/security.md).

Principal A can never see, listen to or cancel principal B's subscriptions, before and after a
restart (log replay, compacted log, checkpoint); reloads grant and revoke, also inside open
streams; no token ever reaches a log or a metric. The fixtures and helpers here are shared by the
other ``test_server_security_*`` files (every RPC x every refusal: ``_matrix``; quotas; TLS).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_harness import engine_factory

from hotjoin.cli.main import main
from hotjoin.clients import CallError, Match
from hotjoin.clients.client import HotjoinClient, band, event
from hotjoin.server import checkpoint, metrics
from hotjoin.server.app import HotjoinServer
from hotjoin.server.auth import (
    ANONYMOUS,
    Authenticator,
    AuthFailure,
    AuthFileError,
    hash_token,
    load_auth_file,
    new_token,
    parse_auth,
)
from hotjoin.server.quotas import MAX_BATCH_EVENTS
from hotjoin.server.topic import MAX_BATCH_EVENTS as TOPIC_MAX_BATCH_EVENTS

UNAUTH, DENIED = "UNAUTHENTICATED", "PERMISSION_DENIED"

# principal -> rights per topic pattern
PRINCIPALS: dict[str, dict[str, list[str]]] = {
    "root": {"*": ["admin"]},
    "alice": {"t": ["publish", "subscribe"]},
    "bob": {"t": ["publish", "subscribe"]},
    "reader": {"t": ["subscribe"]},
    "writer": {"t": ["publish"]},
    "outsider": {"other*": ["admin"]},
}


def write_auth(path: Path, principals: dict[str, dict[str, list[str]]],
               tokens: dict[str, str] | None = None, limits: dict[str, dict[str, float]] | None = None
               ) -> dict[str, str]:
    """Write an auth file (TOML) for ``principals``; returns name -> token (new ones unless given)."""
    tokens = dict(tokens or {})
    lines = []
    for name, topics in principals.items():
        tokens.setdefault(name, new_token())
        lines.append(f'[principals."{name}"]')
        lines.append(f'tokens = ["{hash_token(tokens[name])}"]')
        lines.append("topics = { " + ", ".join(f'"{p}" = {json.dumps(r)}' for p, r in topics.items()) + " }")
        if limits and name in limits:
            lines.append("limits = { " + ", ".join(f"{k} = {v}" for k, v in limits[name].items()) + " }")
    path.write_text("\n".join(lines) + "\n")
    return {n: tokens[n] for n in principals}


class Env:
    """A server with auth on, its tokens and one client per principal."""

    def __init__(self, tmp: Path, **server_kw: Any) -> None:
        self.tmp = tmp
        self.auth_file = tmp / "auth.toml"
        self.tokens = write_auth(self.auth_file, PRINCIPALS)
        self.audit_log = tmp / "audit.jsonl"
        self.data_dir = tmp / "data"
        self.server_kw = server_kw
        self.srv = self._start()
        self.clients: dict[str, HotjoinClient] = {}

    def _start(self, port: int = 0) -> HotjoinServer:
        return HotjoinServer(data_dir=self.data_dir, port=port, auth_file=self.auth_file,
                             audit_log=self.audit_log, metrics_port=0, buffer_capacity=64,
                             engine_factory=engine_factory(), **self.server_kw).start()

    def restart(self) -> None:
        self.close_clients()
        self.srv.stop(0)
        self.srv = self._start()

    def client(self, who: str | None, token: str | None = None) -> HotjoinClient:
        """A client of principal ``who`` (None: no token; ``token`` overrides)."""
        key = f"{who}:{token}"
        if key not in self.clients:
            tok = token if token is not None else (self.tokens[who] if who else None)
            self.clients[key] = HotjoinClient(self.srv.target, timeout=20, token=tok)
        return self.clients[key]

    def close_clients(self) -> None:
        for c in self.clients.values():
            c.close()
        self.clients.clear()

    def close(self) -> None:
        self.close_clients()
        self.srv.stop(0)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path)
    yield e
    e.close()


def sample(name: str, labels: dict[str, str]) -> float:
    """The current value of one labelled sample of the server's metrics (0 when absent)."""
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def first_message(stream: Any) -> Any:
    """The first message of a Listen stream (raises the stream's error)."""
    return next(iter(stream))


def _audit(env: Env) -> list[dict[str, Any]]:
    return [json.loads(line) for line in env.audit_log.read_text().splitlines() if line.strip()]


def test_rights_grant_what_they_say(env: Env) -> None:
    """Each right allows exactly its RPCs; admin implies publish and subscribe; '*' prefixes."""
    root, reader, writer, outsider = (env.client(n) for n in ("root", "reader", "writer", "outsider"))
    root.create_topic("t")
    outsider.create_topic("other-1")  # admin on other*
    assert [t.name for t in outsider.list_topics()] == ["other-1"]
    assert sorted(t.name for t in root.list_topics()) == ["other-1", "t"]
    sid = reader.subscribe("t", band((-1, 1), subscriber="r"))
    assert writer.publish("t", [event("R", "a", 0.0, 0.0, time=1), event("S", "b", 0.5, 0.0, time=1)]).accepted == 2
    assert reader.stats("t").tuples["R"] == 1 and writer.get_topic("t").seq == 3
    assert root.publish("t", [event("R", "c", 0.0, 0.0, time=2)]).accepted == 1  # admin implies publish
    msgs = []
    for m in root.listen("t", subscription_ids=[sid], reconnect=False):  # admin may listen to it
        msgs.append(m)
        if m.kind == "caught_up":
            break
    assert [m.count for m in msgs if m.kind == "match"] == [1, 1]
    with pytest.raises(CallError) as err:
        outsider.create_topic("t2")
    assert err.value.code == DENIED and "'admin' right on topic 't2'" in err.value.message
    outsider.delete_topic("other-1")
    assert [t.name for t in root.list_topics()] == ["t"]


# ---- ownership ------------------------------------------------------------------------------


def _until_caught_up(stream: Any, timeout: float = 10.0) -> list[Match]:
    """Every match a new stream gets before its ``caught_up`` message (then cancelled)."""
    got: list[Match] = []
    timer = threading.Timer(timeout, stream.cancel)
    timer.start()
    try:
        for m in stream:
            kind = m.kind
            if kind == "match":
                got.append(m)
            elif kind == "caught_up":
                return got
    finally:
        timer.cancel()
        stream.cancel()
    raise AssertionError("no caught_up message in time")


def _drain(stream: Any, n_matches: int, timeout: float = 10.0) -> list[Match]:
    """The first ``n_matches`` matches of a stream (cancelled after), or fail on timeout."""
    got: list[Match] = []
    timer = threading.Timer(timeout, stream.cancel)
    timer.start()
    try:
        for m in stream:
            if m.kind == "match":
                got.append(m)
                if len(got) >= n_matches:
                    break
    finally:
        timer.cancel()
        stream.cancel()
    return got


def _owned_setup(env: Env) -> tuple[int, int]:
    root, alice, bob = env.client("root"), env.client("alice"), env.client("bob")
    root.create_topic("t", lateness=1000)
    a = alice.subscribe("t", band((-1, 1), subscriber="shared"))
    b = bob.subscribe("t", band((-1, 1), subscriber="shared"))
    return a, b


def _check_isolation(env: Env, a: int, b: int) -> None:
    """Bob can never see, listen to or cancel alice's subscription ``a``; alice can."""
    root, alice, bob = env.client("root"), env.client("alice"), env.client("bob")
    assert [s.subscription_id for s in bob.list_subscriptions("t")] == [b]
    assert [s.subscription_id for s in bob.list_subscriptions("t", subscriber="shared")] == [b]
    assert [s.subscription_id for s in alice.list_subscriptions("t")] == [a]
    assert sorted(s.subscription_id for s in root.list_subscriptions("t")) == sorted([a, b])
    for kw in ({"subscription_ids": [a]}, {"subscriber": "shared", "cursors": {a: 0}}):
        with pytest.raises(CallError) as err:
            first_message(bob.listen("t", reconnect=False, **kw))
        assert err.value.code == DENIED and f"subscription {a} " in err.value.message
        assert "'admin' right" in err.value.message
    with pytest.raises(CallError) as err:
        bob.unsubscribe("t", a)
    assert err.value.code == DENIED and "belongs to another principal" in err.value.message
    assert a in [s.subscription_id for s in alice.list_subscriptions("t")], "the refused cancel changed nothing"


def test_principals_cannot_touch_each_others_subscriptions(env: Env) -> None:
    a, b = _owned_setup(env)
    root, alice, bob = env.client("root"), env.client("alice"), env.client("bob")
    _check_isolation(env, a, b)
    # Listen by the shared subscriber name: each principal gets only its own subscription's matches
    bob_stream = bob.listen("t", subscriber="shared")
    alice_stream = alice.listen("t", subscriber="shared")
    late = alice.subscribe("t", band((-1, 1), subscriber="shared"))  # registered while bob listens
    root.publish("t", [event("R", "r1", 1.0, 0.0, time=10), event("S", "s1", 1.5, 0.0, time=11)])
    assert {m.subscription_id for m in _drain(alice_stream, 2)} == {a, late}
    assert [m.subscription_id for m in _drain(bob_stream, 1)] == [b]
    # everything buffered, replayed from the start: bob's listener holds only bob's matches
    root.publish("t", [event("S", "s2", 1.2, 0.0, time=12)])
    assert [m.subscription_id for m in _until_caught_up(bob.listen("t", subscriber="shared"))] == [b, b]
    mine = _until_caught_up(alice.listen("t", subscriber="shared"))
    assert sorted(m.subscription_id for m in mine) == sorted([a, a, late, late])
    # the admin may cancel alice's subscription; alice may cancel her own
    root.unsubscribe("t", a)
    alice.unsubscribe("t", late)
    assert list(alice.list_subscriptions("t")) == []
    actions = [(r["action"], r["principal"], r["outcome"]) for r in _audit(env)]
    assert ("subscription.delete", "bob", "denied") in actions
    assert ("subscription.delete", "root", "ok") in actions
    assert ("subscription.create", "alice", "ok") in actions


@pytest.mark.parametrize("how", ["log replay", "compacted log", "checkpoint"])
def test_ownership_survives_restart(tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hotjoin.topic")
    env = Env(tmp_path, compact_ratio=0 if how != "compacted log" else 2.0)
    try:
        root = env.client("root")
        if how == "compacted log":
            root.create_topic("t", lateness=1000, retention=10_000)
            a = env.client("alice").subscribe("t", band((-1, 1), subscriber="shared"))
            b = env.client("bob").subscribe("t", band((-1, 1), subscriber="shared"))
            env.client("bob").unsubscribe("t", env.client("bob").subscribe("t", band((0, 1))))
            assert env.srv.registry.get("t").compact()
        else:
            a, b = _owned_setup(env)
        if how == "checkpoint":
            topic = env.srv.registry.get("t")
            topic.checkpoint_now()
            deadline = time.monotonic() + 20
            while topic.durability.checkpoints < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert topic.durability.checkpoints == 1
        env.restart()
        topic = env.srv.registry.get("t")
        assert topic.book.owners == {a: "alice", b: "bob"}
        if how == "checkpoint":
            assert "restored checkpoint at seq" in caplog.text
        elif how == "compacted log":
            assert env.srv.registry.get("t").durability.log_ops == 2  # restored from the snapshot's two records
        _check_isolation(env, a, b)
        assert topic.owned("alice") == 1 and topic.owned("bob") == 1
        env.client("alice").unsubscribe("t", a)
    finally:
        env.close()


def test_data_without_owners_still_loads(tmp_path: Path) -> None:
    """A data dir written without auth (no owners; a checkpoint without the owners key) loads;
    its subscriptions then belong to no principal: only an admin sees or cancels them."""
    data = tmp_path / "data"
    srv = HotjoinServer(data_dir=data, port=0, engine_factory=engine_factory(), compact_ratio=0).start()
    with HotjoinClient(srv.target) as c:
        c.create_topic("t")
        old = c.subscribe("t", band((-1, 1), subscriber="legacy"))
    topic = srv.registry.get("t")
    topic.checkpoint_now()
    deadline = time.monotonic() + 20
    while topic.durability.checkpoints < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    srv.stop(0)
    seq, offset, image = checkpoint.read(data / "topics" / "t")  # type: ignore[misc]
    image.owners = {}  # as written by a server before owners existed
    checkpoint.write(data / "topics" / "t", checkpoint.encode(image), seq, offset, data / "topics" / "t" / "log")
    env = Env(tmp_path)
    try:
        assert list(env.client("alice").list_subscriptions("t")) == []
        with pytest.raises(CallError) as err:
            env.client("alice").unsubscribe("t", old)
        assert err.value.code == DENIED
        assert [s.subscription_id for s in env.client("root").list_subscriptions("t")] == [old]
        assert env.srv.registry.get("t").owned("") == 1
        new = env.client("alice").subscribe("t", band((0, 1)))
        assert [s.subscription_id for s in env.client("alice").list_subscriptions("t")] == [new]
        env.client("root").unsubscribe("t", old)
    finally:
        env.close()


# ---- reload (SIGHUP path, in process) and revocation -----------------------------------------


def test_reload_revokes_and_grants_and_keeps_a_bad_file(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    root, alice = env.client("root"), env.client("alice")
    root.create_topic("t")
    sid = alice.subscribe("t", band((-1, 1), subscriber="a"))
    stream = alice.listen("t", subscription_ids=[sid], reconnect=False)
    it = iter(stream)
    assert next(it).kind == "caught_up"
    # alice loses subscribe on t: her open stream ends with PERMISSION_DENIED within a poll
    rights = {**PRINCIPALS, "alice": {"t": ["publish"]}}
    write_auth(env.auth_file, rights, env.tokens)
    assert env.srv.reload_auth()
    with pytest.raises(CallError) as err:
        next(it)
    assert err.value.code == DENIED and "'subscribe' right" in err.value.message
    assert alice.publish("t", [event("R", "x", 0.0, 0.0, time=1)]).accepted == 1
    # a broken file on reload: logged, the previous table stays in force
    good = env.auth_file.read_text()
    env.auth_file.write_text(good + '\n[principals.eve]\ntokens = ["plaintext-token"]\n')
    with caplog.at_level(logging.ERROR, logger="hotjoin.server"):
        assert not env.srv.reload_auth()
    assert "auth file reload failed, keeping the previous one" in caplog.text
    assert "plaintext-token" not in caplog.text  # the message names the key, never the value
    assert alice.publish("t", [event("R", "y", 0.0, 0.0, time=1)]).accepted == 1
    # a token removed from the file is refused from then on, also inside an open stream
    bob = env.client("bob")
    bob_stream = iter(bob.listen("t", subscriber="b", reconnect=False))
    assert next(bob_stream).kind == "caught_up"
    write_auth(env.auth_file, {k: v for k, v in rights.items() if k != "bob"}, env.tokens)
    assert env.srv.reload_auth()
    with pytest.raises(CallError) as err:
        next(bob_stream)
    assert err.value.code == UNAUTH
    with pytest.raises(CallError) as err:
        bob.list_topics()
    assert err.value.code == UNAUTH and err.value.message == "invalid token"
    reloads = [r for r in _audit(env) if r["action"] == "auth.reload"]
    assert [r["outcome"] for r in reloads] == ["ok", "error", "ok"]


# ---- audit trail, metrics, and no token anywhere ---------------------------------------------


def test_audit_lines_and_no_token_in_logs_or_metrics(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = new_token()
    root, alice, bob = env.client("root"), env.client("alice"), env.client("bob")
    root.create_topic("t")
    sid = alice.subscribe("t", band((-1, 1), subscriber="a"))
    alice.subscribe_many("t", [band((0, 1))] * 3)
    alice.publish("t", [event("R", "r", 0.0, 0.0, time=1), event("S", "s", 0.5, 0.0, time=1)])
    _drain(alice.listen("t", subscription_ids=[sid]), 1)
    for bad in (lambda: bob.unsubscribe("t", sid), lambda: env.client(None, token=wrong).list_topics(),
                lambda: env.client(None).stats("t"), lambda: bob.create_topic("u")):
        with pytest.raises(CallError):
            bad()
    alice.unsubscribe("t", sid)
    root.delete_topic("t")
    lines = _audit(env)
    for rec in lines:
        assert {"ts", "action", "principal", "outcome"} <= rec.keys()
    got = [(r["action"], r["principal"], r["outcome"]) for r in lines]
    for expected in [("topic.create", "root", "ok"), ("subscription.create", "alice", "ok"),
                     ("subscription.delete", "bob", "denied"), ("authenticate", None, "unauthenticated"),
                     ("topic.create", "bob", "denied"), ("subscription.delete", "alice", "ok"),
                     ("topic.delete", "root", "ok")]:
        assert expected in got, expected
    reasons = {r.get("reason") for r in lines if r["outcome"] == "unauthenticated"}
    assert {"missing", "invalid"} <= reasons
    many = [r for r in lines if r["action"] == "subscription.create" and r.get("count") == 3]
    assert many and many[0]["topic"] == "t"
    text = urllib.request.urlopen(f"http://127.0.0.1:{env.srv.metrics_port}/metrics", timeout=10).read().decode()
    assert 'hotjoin_auth_failures_total{reason="invalid"}' in text
    assert 'hotjoin_auth_failures_total{reason="missing"}' in text
    assert 'hotjoin_auth_denials_total{right="admin"}' in text
    secrets = [*env.tokens.values(), wrong, *(hash_token(t)[7:] for t in (*env.tokens.values(), wrong))]
    haystacks = {"audit log": env.audit_log.read_text(), "metrics": text, "server log": caplog.text}
    for where, hay in haystacks.items():
        for s in secrets:
            assert s not in hay, f"token material in the {where}"
            assert s[:16] not in hay, f"part of a token in the {where}"


# ---- the auth file and its tools --------------------------------------------------------------


def test_auth_file_rules(tmp_path: Path) -> None:
    tok = new_token()
    h = hash_token(tok)
    t = parse_auth({"principals": {"p": {"tokens": [h], "topics": {"*": ["subscribe"], "trades.*": ["admin"],
                                                                    "x": ["publish"]}}}})
    p = t.principals["p"]
    assert p.rights("trades.eu") == {"admin", "publish", "subscribe"}  # admin implies all
    assert p.rights("x") == {"publish", "subscribe"} and p.rights("y") == {"subscribe"}
    assert not p.has("trades", "admin")  # "trades.*" is a prefix "trades.", not "trades"
    assert ANONYMOUS.rights("anything") == {"admin", "publish", "subscribe"}
    for data, message in [
        ({"principals": {"p": {"tokens": [tok]}}}, "not the token itself"),
        ({"principals": {"p": {"tokens": [h], "topics": {"t": ["write"]}}}}, "unknown right(s) ['write']"),
        ({"principals": {"p": {"tokens": [h], "topic": {}}}}, "unknown key(s) ['topic']"),
        ({"principals": {"p": {"topics": {}}}}, "needs 'tokens'"),
        ({"principals": {"p": {"tokens": [h]}, "q": {"tokens": [h]}}}, "listed twice"),
        ({"principals": {"p q": {"tokens": [h]}}}, "names are 1-128"),
        ({"principals": {"p": {"tokens": [h], "topics": {"a/b": ["admin"]}}}}, "bad topic pattern"),
        ({"principals": {"p": {"tokens": [h], "limits": {"rate": 1}}}}, "unknown limit 'rate'"),
        ({"principals": {"p": {"tokens": [h], "topics": {"t": "admin"}}}}, "must be a list"),
        ({"users": {}}, "unknown top-level key"),
    ]:
        with pytest.raises(AuthFileError) as err:
            parse_auth(data)
        assert message in str(err.value)
        assert tok not in str(err.value)
    (tmp_path / "a.json").write_text(json.dumps({"principals": {"p": {"token": h, "topics": {"t": ["admin"]}}}}))
    auth = Authenticator(tmp_path / "a.json")
    p2, digest = auth.authenticate([("authorization", f"Bearer {tok}")])
    assert p2.name == "p" and auth.resolve(digest) is p2
    for md, reason in [([], "missing"), ([("authorization", "Bearer")], "malformed"),
                       ([("authorization", f"Token {tok}")], "malformed"),
                       ([("authorization", "Bearer nope")], "invalid")]:
        with pytest.raises(AuthFailure) as err2:
            auth.authenticate(md)
        assert err2.value.reason == reason
    (tmp_path / "bad.toml").write_text("[principals\n")
    with pytest.raises(AuthFileError, match="not valid TOML"):
        load_auth_file(tmp_path / "bad.toml")
    assert MAX_BATCH_EVENTS == TOPIC_MAX_BATCH_EVENTS


def test_auth_token_command_makes_a_working_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["auth", "token", "--name", "carol", "--grant", "t=publish,subscribe", "--grant", "*=subscribe"]) == 0
    out = capsys.readouterr()
    token, snippet = out.out.split("\n", 1)
    assert token.startswith("hj_") and len(token) > 40
    assert token not in snippet and hash_token(token) in snippet
    assert "not stored anywhere" in out.err
    table = parse_auth(tomllib.loads(snippet))
    assert table.principals["carol"].rights("t") == {"publish", "subscribe"}
    (tmp_path / "auth.toml").write_text(snippet)
    auth = Authenticator(tmp_path / "auth.toml")
    assert auth.authenticate([("authorization", f"Bearer {token}")])[0].name == "carol"
    # --token-out keeps the token off stdout; check lists rights and no hashes
    assert main(["auth", "token", "--name", "dave", "--grant", "t=admin", "--token-out", str(tmp_path / "d.tok")]) == 0
    snippet2 = capsys.readouterr().out
    dave = (tmp_path / "d.tok").read_text().strip()
    assert dave not in snippet2 and (tmp_path / "d.tok").stat().st_mode & 0o777 == 0o600
    (tmp_path / "auth.toml").write_text(snippet + snippet2)
    assert main(["auth", "check", str(tmp_path / "auth.toml")]) == 0
    checked = capsys.readouterr().out
    assert json.loads(checked)["principals"]["dave"]["topics"] == {"t": ["admin"]}
    assert "sha256" not in checked
    (tmp_path / "broken.toml").write_text('[principals.x]\ntokens = ["abc"]\n')
    assert main(["auth", "check", str(tmp_path / "broken.toml")]) == 1
    assert "sha256:<64 lowercase hex>" in capsys.readouterr().err
    assert main(["auth", "token", "--name", "e", "--grant", "t=root"]) == 2
    assert "unknown right" in capsys.readouterr().err
