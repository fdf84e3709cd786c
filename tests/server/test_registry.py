"""The topic registry: creates, finds, lists and deletes topics, validates names and options
before anything is written, and reopens the topics of a data directory."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_harness import engine_factory

from hotjoin.server.errors import AlreadyExists, InvalidArgument, NotFound
from hotjoin.server.records import DamagedFileError
from hotjoin.server.registry import (
    DEFAULT_MAX_ADVANCE,
    TopicRegistry,
    check_topic_name,
    read_options,
    write_options,
)
from hotjoin.server.settings import TopicSettings


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[TopicRegistry]:
    reg = TopicRegistry(tmp_path / "data", TopicSettings(engine_factory=engine_factory(), sync=False))
    yield reg
    reg.close()


@pytest.mark.parametrize("name", ["t", "a.b_c-1", "x" * 128])
def test_valid_topic_names(name: str) -> None:
    assert check_topic_name(name) == name


@pytest.mark.parametrize(("name", "message"), [
    ("", "topic name is required"), (".", "invalid topic name"), ("..", "invalid topic name"),
    ("a/b", "invalid topic name"), ("x" * 129, "invalid topic name"), ("t\n", "invalid topic name"),
    ("t ", "invalid topic name"),
])
def test_invalid_topic_names_are_refused(name: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        check_topic_name(name)


def test_options_written_are_read_back_only_in_their_topic_directory(tmp_path: Path) -> None:
    d = tmp_path / "t"
    d.mkdir()
    write_options(d, {"name": "t", "lateness": 3, "retention": None})
    assert read_options(d)["lateness"] == 3
    assert json.loads((d / "topic.json").read_text())["name"] == "t"
    assert not (d / "topic.json.tmp").exists()
    other = tmp_path / "u"
    other.mkdir()
    write_options(other, {"name": "t"})
    with pytest.raises(DamagedFileError, match="names topic 't', but lies in the directory of 'u'"):
        read_options(other)


def test_create_get_list_delete(registry: TopicRegistry, tmp_path: Path) -> None:
    t = registry.create("orders", lateness=2, retention=None, strategy={})
    assert registry.get("orders") is t
    assert [x.info()["name"] for x in registry.list()] == ["orders"]
    opts = read_options(tmp_path / "data" / "topics" / "orders")
    assert (opts["lateness"], opts["retention"], opts["max_advance"]) == (2, None, DEFAULT_MAX_ADVANCE)
    with pytest.raises(AlreadyExists, match="topic 'orders' already exists"):
        registry.create("orders", lateness=0, retention=None, strategy={})
    registry.delete("orders")
    with pytest.raises(NotFound, match="unknown topic 'orders'"):
        registry.get("orders")
    assert registry.list() == [] and not (tmp_path / "data" / "topics" / "orders").exists()


@pytest.mark.parametrize(("kw", "message"), [
    ({"lateness": -1}, "lateness must be >= 0"),
    ({"retention": 2**61 + 1}, "retention must be >= 0 and <= 2\\^61"),
    ({"max_advance": -5}, "max_advance must be >= 0"),
    ({"delivery_retention_bytes": -1}, "delivery_retention_bytes must be >= 0"),
    ({"delivery_retention_ms": -2}, "delivery_retention_ms must be >= 0 or -1"),
    ({"strategy": {"nope": "x"}}, "unknown subscription kind 'nope'"),
])
def test_bad_options_are_refused_and_nothing_is_written(registry: TopicRegistry, tmp_path: Path,
                                                       kw: dict, message: str) -> None:
    args = {"lateness": 0, "retention": None, "strategy": {}} | kw
    with pytest.raises(InvalidArgument, match=message):
        registry.create("t", **args)
    assert registry.list() == [] and not (tmp_path / "data" / "topics" / "t").exists()


def test_topics_are_reopened_from_the_data_directory(tmp_path: Path) -> None:
    settings = TopicSettings(engine_factory=engine_factory(), sync=False)
    reg = TopicRegistry(tmp_path / "data", settings)
    reg.create("a", lateness=1, retention=10, strategy={})
    reg.create("b", lateness=0, retention=None, strategy={}, max_advance=0)
    reg.close()
    (tmp_path / "data" / "topics" / "half").mkdir()  # a create that crashed before its options
    reg = TopicRegistry(tmp_path / "data", settings)
    try:
        infos = {t.info()["name"]: t.info() for t in reg.list()}
        assert sorted(infos) == ["a", "b"] and reg.damaged() == []
        assert (infos["a"]["lateness"], infos["a"]["retention"]) == (1, 10)
        assert not (tmp_path / "data" / "topics" / "half").exists()
    finally:
        reg.close()
