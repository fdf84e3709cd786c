"""The server's heap policy: bulk loads freeze the long-lived objects (``server/heap.py``)."""

from __future__ import annotations

import gc
from pathlib import Path

from hotjoin.matcher.model import Range, SelectJoin
from hotjoin.server.convert import SubMeta, encode_spec
from hotjoin.server.heap import FREEZE_AFTER
from hotjoin.server.topic import Topic


def _specs(n: int) -> list:
    return [encode_spec(SelectJoin(Range(i, i + 10.0), Range(0.0, 5.0)), SubMeta(True, False, "h", 0))
            for i in range(n)]


def _topic(root: Path) -> Topic:
    (root / "t").mkdir(exist_ok=True)
    return Topic("t", 0, None, {}, root / "t")


def test_a_bulk_subscribe_freezes_and_a_small_one_does_not(tmp_path: Path) -> None:
    topic = _topic(tmp_path)
    try:
        gc.unfreeze()
        topic.subscribe(_specs(FREEZE_AFTER - 1), 0)
        assert gc.get_freeze_count() == 0
        topic.subscribe(_specs(FREEZE_AFTER), 0)
        frozen = gc.get_freeze_count()
        assert frozen > 0
        # the registered subscriptions still work after the freeze
        assert len(topic.list_subscriptions("", None, 10_000)[0]) == 2 * FREEZE_AFTER - 1
    finally:
        topic.close()
        gc.unfreeze()


def test_a_restored_topic_is_frozen(tmp_path: Path) -> None:
    topic = _topic(tmp_path)
    topic.subscribe(_specs(10), 0)
    topic.close()
    gc.unfreeze()
    again = _topic(tmp_path)
    try:
        assert gc.get_freeze_count() > 0
        assert len(again.list_subscriptions("", None, 100)[0]) == 10
    finally:
        again.close()
        gc.unfreeze()
