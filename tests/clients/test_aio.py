"""The asyncio client against a live server: the same results and typed errors as the blocking
client, subscriptions streamed in chunks and listed page by page, ``publish_stream`` answering
each batch in order, and listening as typed items or as columns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest

from hotjoin.clients import (
    AlreadyExists,
    BandJoin,
    CaughtUp,
    Event,
    EventRef,
    Match,
    NotFound,
    PublishResult,
    Range,
    Unavailable,
)
from hotjoin.clients.aio import AsyncClient, AsyncHotjoinClient
from hotjoin.clients.client import TARGET_ENV, MatchColumns, band, columns, event
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.app import HotjoinServer

T = TypeVar("T")


def _with_client(server: HotjoinServer, body: Callable[[AsyncClient], Awaitable[T]]) -> T:
    async def go() -> T:
        async with AsyncClient(server.target, timeout=30) as hj:
            await hj.wait_ready(10)
            return await body(hj)

    return asyncio.run(go())


async def _until_caught_up(items: AsyncIterator[Any]) -> list[Any]:
    got = []
    async for item in items:
        got.append(item)
        if isinstance(item, CaughtUp):
            break
    await items.aclose()  # type: ignore[attr-defined]
    return got


def test_the_target_defaults_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TARGET_ENV, "example:1234")

    async def go() -> tuple[str, str, Any]:
        async with AsyncClient(token="s3cret") as c:
            return c.target, repr(c), c._kw()

    target, text, kw = asyncio.run(go())
    assert target == "example:1234" and text == "AsyncClient('example:1234')"
    assert kw["metadata"] == (("authorization", "Bearer s3cret"),) and kw["timeout"] == 60.0
    assert AsyncHotjoinClient is AsyncClient


def test_no_server_is_unavailable() -> None:
    async def go() -> None:
        async with AsyncClient("127.0.0.1:1", timeout=5) as c:
            with pytest.raises(Unavailable, match="no connection to 127.0.0.1:1 within 0.2 s"):
                await c.wait_ready(0.2)
            with pytest.raises(Unavailable):
                await c.list_topics()

    asyncio.run(go())


def test_topics_and_subscriptions(server: HotjoinServer, topic: str) -> None:
    specs = [BandJoin(b=Range(-i, i)) for i in range(1, 6)]

    async def body(hj: AsyncClient) -> None:
        made = await hj.create_topic(topic, lateness=3)
        assert made.name == topic and made.lateness == 3
        assert await hj.get_topic(topic) == made
        assert topic in [t.name for t in await hj.list_topics()]
        with pytest.raises(AlreadyExists):
            await hj.create_topic(topic)
        one = await hj.subscribe(topic, specs[0], subscriber="a", delivery="affected")
        many = await hj.subscribe_many(topic, specs, subscriber="b", chunk=2)  # streamed
        few = await hj.subscribe_many(topic, specs[:2], subscriber="b")
        listed = [s async for s in hj.list_subscriptions(topic, page_size=2)]
        assert [s.subscription_id for s in listed] == sorted([one, *many, *few])
        assert [s.spec for s in listed if s.subscription_id in many] == specs
        assert [s.subscription_id async for s in hj.list_subscriptions(topic, "a")] == [one]
        assert await hj.unsubscribe(topic, one) == (await hj.get_topic(topic)).seq
        with pytest.raises(NotFound):
            await hj.unsubscribe(topic, one)
        await hj.delete_topic(topic)
        with pytest.raises(NotFound):
            await hj.get_topic(topic)

    _with_client(server, body)


def test_pairs_cursors_and_stats(server: HotjoinServer, topic: str) -> None:
    async def body(hj: AsyncClient) -> None:
        await hj.create_topic(topic)
        sid = await hj.subscribe(topic, BandJoin(b=Range(-1, 1)), subscriber="me")
        r = await hj.publish(topic, [Event("S", "s1", 1.5, 0.0, time=1),
                                     Event("R", "r1", 1.0, 0.0, time=2)])
        assert (r.accepted, r.rejected) == (2, 0)
        d = await hj.delete_events(topic, [("S", "s1"), ("S", "nope")])
        assert d.deleted == 1 and [s.code for s in d.rejections] == ["NOT_FOUND"]
        items = await _until_caught_up(hj.listen(topic, subscriber="me"))
        matches = [m for m in items if isinstance(m, Match)]
        assert [(m.sign, m.pairs, m.event) for m in matches] == [
            (1, (("r1", "s1"),), EventRef("R", "r1")), (-1, (("r1", "s1"),), EventRef("S", "s1"))]
        assert await hj.commit_cursors(topic, {sid: matches[0].seq}) == 1
        (c,) = await hj.get_cursors(topic, subscriber="me")
        assert (c.subscription_id, c.committed_seq) == (sid, matches[0].seq)
        rest = await _until_caught_up(hj.listen(topic, subscriber="me"))
        assert [m.seq for m in rest if isinstance(m, Match)] == [matches[1].seq]
        st = await hj.stats(topic)
        assert st.topic == topic and dict(st.tuples) == {"R": 1, "S": 0}

    _with_client(server, body)


def test_asyncio_client_publishes_and_listens(server: HotjoinServer) -> None:
    async def go() -> tuple[list[PublishResult], list[tuple[int, int, int]], int]:
        async with AsyncHotjoinClient(server.target, timeout=30) as hj:
            await hj.wait_ready(10)
            await hj.create_topic("a", lateness=0)
            await hj.subscribe("a", band((-1, 1), subscriber="me", delivery="affected"))
            one = await hj.publish_columns("a", ["S", "S"], ["s1", "s2"], [1.0, 5.0], [0.0, 0.0], [1, 1])

            async def batches() -> AsyncIterator[pb.EventColumns | list[pb.Event]]:
                yield columns(["R", "R"], ["r1", "r2"], [1.5, 9.0], [0.0, 0.0], [2, 2])
                yield [event("R", "r3", 5.5, 0.0, time=3), event("R", "r3", 5.5, 0.0, time=3)]

            acks = [one] + [r async for r in hj.publish_stream("a", batches())]
            rows: list[tuple[int, int, int]] = []
            async for m in hj.listen_columns("a", subscriber="me"):
                if not isinstance(m, MatchColumns):
                    assert m.kind == "caught_up"
                    break
                rows += list(zip(m.subscription_id.tolist(), m.seq.tolist(), m.count.tolist(), strict=True))
            return acks, rows, int((await hj.stats("a")).seq)

    acks, rows, seq = asyncio.run(go())
    assert [(a.accepted, a.rejected) for a in acks] == [(2, 0), (2, 0), (1, 1)]
    assert (acks[0].first_seq, acks[0].last_seq, acks[1].first_seq, acks[1].last_seq) == (2, 3, 4, 5)
    assert [s.code for s in acks[2].statuses] == ["OK", "DUPLICATE"]  # the per-event form's answer
    assert rows == [(0, 4, 1), (0, 6, 1)] and seq == 6
