"""Every RPC with no token, a wrong token and a valid token lacking the right, over real gRPC on
loopback: each answers with the right status code (and a message naming the missing right, never
a principal), is counted in the auth metrics, and changes nothing (docs/how-to/security.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from test_server_security import PRINCIPALS, Env, first_message, sample

from hotjoin.clients import PermissionDenied, Unauthenticated
from hotjoin.clients.client import HotjoinClient, band, event, ref
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.proto import hotjoin_pb2_grpc as rpc

UNAUTH, DENIED = "UNAUTHENTICATED", "PERMISSION_DENIED"


def _reflect(c: HotjoinClient) -> Any:
    stub = reflection_pb2_grpc.ServerReflectionStub(c.channel)
    return list(stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]),
                                          timeout=10))


def _publish_stream(c: HotjoinClient) -> Any:
    return list(c.publishing.PublishStream(
        iter([pb.PublishRequest(topic="t", events=[event("R", "ps1", 1.0, 0.0, time=50)])]), timeout=10))


# (RPC, call, right it needs, a principal lacking it or None when no right is needed)
RPCS: list[tuple[str, Callable[[HotjoinClient], Any], str, str | None]] = [
    ("CreateTopic", lambda c: c.create_topic("newtopic"), "admin", "alice"),
    ("GetTopic", lambda c: c.get_topic("t"), "any", "outsider"),
    ("ListTopics", lambda c: c.list_topics(), "", None),
    ("DeleteTopic", lambda c: c.delete_topic("t"), "admin", "alice"),
    ("Subscribe", lambda c: c.subscribe("t", band((-1, 1), subscriber="x")), "subscribe", "writer"),
    ("SubscribeMany", lambda c: c.subscribe_many("t", [band((-1, 1))] * 2), "subscribe", "writer"),
    ("SubscribeStream", lambda c: c.subscribe_many("t", [band((-1, 1))] * 3, chunk=1), "subscribe", "writer"),
    ("Unsubscribe", lambda c: c.unsubscribe("t", 0), "subscribe", "writer"),
    ("ListSubscriptions", lambda c: list(c.list_subscriptions("t")), "subscribe", "writer"),
    ("Publish", lambda c: c.publish("t", [event("R", "p1", 1.0, 0.0, time=50)]), "publish", "reader"),
    ("PublishStream", _publish_stream, "publish", "reader"),
    ("DeleteEvents", lambda c: c.delete_events("t", [ref("R", "r1")]), "publish", "reader"),
    ("Listen", lambda c: first_message(c.listen("t", subscriber="a", reconnect=False)), "subscribe", "writer"),
    ("GetTopicStats", lambda c: c.stats("t"), "any", "outsider"),
    ("CommitCursors", lambda c: c.commit_cursors("t", {0: 1}), "subscribe", "writer"),
    ("GetCursors", lambda c: c.get_cursors("t"), "subscribe", "writer"),
    ("Reflection", _reflect, "", None),
]
MODES = ("no token", "wrong token", "lacking right")


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """One server for the matrix: topic t with alice's subscription 0 and one stored tuple."""
    e = Env(tmp_path_factory.mktemp("matrix"))
    root, alice = e.client("root"), e.client("alice")
    root.create_topic("t", lateness=5)
    assert alice.subscribe("t", band((-1, 1), subscriber="a")) == 0
    assert alice.publish("t", [event("R", "r1", 1.0, 0.0, time=100)]).accepted == 1
    yield e
    e.close()


def _state(e: Env) -> tuple[Any, ...]:
    """Everything a refused request must leave unchanged (read as the admin)."""
    root = e.client("root")
    topics = sorted((t.name, t.seq) for t in root.list_topics())
    subs = [(s.subscription_id, s.subscriber) for s in root.list_subscriptions("t")]
    st = root.stats("t")
    committed = [(c.subscription_id, c.committed_seq) for c in root.get_cursors("t").cursors]
    return topics, subs, dict(st.tuples), st.listeners, committed


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rpc,call,right,lacking", RPCS, ids=[r[0] for r in RPCS])
def test_every_rpc_refused(shared: Env, rpc: str, call: Callable[[HotjoinClient], Any], right: str,
                           lacking: str | None, mode: str) -> None:
    before = _state(shared)
    if mode == "lacking right":
        c = shared.client(lacking) if lacking else None
        if c is None:  # ListTopics and reflection need no right: a valid token gets an answer
            out = call(shared.client("outsider"))
            if rpc == "ListTopics":
                assert out == [], "a principal without rights on t must not see it"
            else:
                assert out and out[0].list_services_response.service
            assert _state(shared) == before
            return
        reason = "any" if right == "any" else right
        failures_before = sample("hotjoin_auth_denials_total", {"right": reason})
        with pytest.raises(PermissionDenied) as err:
            call(c)
        assert err.value.code == DENIED, err.value.message
        if right == "any":
            assert "has no right on topic 't'" in err.value.message
        else:
            assert f"lacks the '{right}' right on topic" in err.value.message
        assert sample("hotjoin_auth_denials_total", {"right": reason}) == failures_before + 1
    else:
        wrong = "hj_" + "x" * 43
        c = shared.client(None) if mode == "no token" else shared.client(None, token=wrong)
        reason = "missing" if mode == "no token" else "invalid"
        failures_before = sample("hotjoin_auth_failures_total", {"reason": reason})
        with pytest.raises(Unauthenticated) as err:
            call(c)
        assert err.value.code == UNAUTH, err.value.message
        details = err.value.message
        if mode == "wrong token":
            assert details == "invalid token"
        else:
            assert details.startswith("missing credentials") and "Bearer <token>" in details
        assert not any(name in details for name in PRINCIPALS), "no hint of which principals exist"
        assert sample("hotjoin_auth_failures_total", {"reason": reason}) == failures_before + 1
    assert _state(shared) == before, f"a refused {rpc} changed the server"


def test_malformed_header_and_health_without_token(shared: Env) -> None:
    channel = grpc.insecure_channel(shared.srv.target)
    try:
        stub = rpc.TopicServiceStub(channel)
        with pytest.raises(grpc.RpcError) as err:
            stub.ListTopics(pb.ListTopicsRequest(), metadata=[("authorization", "Basic abc")], timeout=10)
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED and "malformed" in err.value.details()
        health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert health.status == health_pb2.HealthCheckResponse.SERVING  # health checking needs no token
    finally:
        channel.close()


