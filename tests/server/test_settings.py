"""The server-wide topic options: one frozen value whose defaults are the documented bounds."""

from __future__ import annotations

import dataclasses

import pytest

from hotjoin.matcher.engine import Engine
from hotjoin.server import delivery, match_log, settings
from hotjoin.server.settings import DEFAULT_SETTINGS, DeliveryOptions, TopicSettings


def test_delivery_defaults_are_the_match_log_and_buffer_bounds() -> None:
    d = DeliveryOptions()
    assert d.retention_bytes == match_log.RETENTION_BYTES
    assert d.retention_ms == match_log.RETENTION_MS
    assert d.segment_bytes == match_log.SEGMENT_BYTES
    assert d.buffer_bytes == delivery.BUFFER_BYTES
    assert d.listener_bytes == delivery.LISTENER_BYTES


def test_topic_defaults() -> None:
    s = TopicSettings()
    assert s.engine_factory is Engine
    assert (s.buffer_capacity, s.buffer_max_pairs, s.sync) == (1024, 100_000, True)
    assert s.compact_min_bytes == settings.COMPACT_MIN_BYTES == 64 * 1024 * 1024
    assert s.compact_ratio == settings.COMPACT_RATIO == 2.0
    assert s.compact_all is False
    assert s.checkpoint_min_ops == settings.CHECKPOINT_MIN_OPS == 200_000
    assert s.delivery == DeliveryOptions()
    assert s == DEFAULT_SETTINGS


@pytest.mark.parametrize("obj,field,value", [
    (TopicSettings(), "sync", False),
    (TopicSettings(), "buffer_capacity", 1),
    (DeliveryOptions(), "retention_bytes", 0),
])
def test_options_are_frozen(obj: object, field: str, value: object) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(obj, field, value)
    with pytest.raises((AttributeError, TypeError)):
        obj.unknown = 1  # type: ignore[attr-defined]  # slots: no new attributes


def test_replace_changes_one_option_and_keeps_the_rest() -> None:
    s = dataclasses.replace(DEFAULT_SETTINGS, sync=False,
                            delivery=DeliveryOptions(retention_bytes=0))
    assert s.sync is False and s.delivery.retention_bytes == 0
    assert s.delivery.segment_bytes == match_log.SEGMENT_BYTES
    assert dataclasses.replace(s, sync=True, delivery=DeliveryOptions()) == DEFAULT_SETTINGS
    assert DEFAULT_SETTINGS.sync is True  # the shared default is untouched


def test_equal_options_hash_equal() -> None:
    assert hash(TopicSettings()) == hash(DEFAULT_SETTINGS)
    assert {DeliveryOptions(), DeliveryOptions()} == {DeliveryOptions()}
    assert DeliveryOptions(retention_ms=-1) != DeliveryOptions(retention_ms=0)
