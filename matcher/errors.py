"""Errors the engine raises (``docs/design.md``, engine API). None of them leaves a trace in the engine's state."""

from __future__ import annotations


class HotjoinError(Exception):
    """Base class of the engine's own errors."""


class LateEventError(HotjoinError):
    """The event's time is below the topic watermark W = max time − lateness
    (``docs/design.md``, semantics)."""

    def __init__(self, side: str, event_id: str, time: int, watermark: int) -> None:
        super().__init__(
            f"event {side}/{event_id} is late: time {time} < watermark {watermark}"
        )
        self.side, self.event_id, self.time, self.watermark = side, event_id, time, watermark


class DuplicateEventError(HotjoinError):
    """An event with this id is already stored on this side (``docs/design.md``,
    duplicates)."""

    def __init__(self, side: str, event_id: str) -> None:
        super().__init__(f"event {side}/{event_id} already exists")
        self.side, self.event_id = side, event_id


class EventTooFarAheadError(HotjoinError, ValueError):
    """The event's time lies more than the topic's ``max_advance`` beyond the largest event time
    seen: it would move the clock (and the watermark) so far that later events become late.

    A ``ValueError``, so the server answers INVALID with this message (``docs/reference/errors.md``).
    """

    def __init__(self, time: int, max_time: int, max_advance: int) -> None:
        super().__init__(ahead_reason(time, max_time, max_advance))
        self.time, self.max_time, self.max_advance = time, max_time, max_advance


def ahead_reason(time: int, max_time: int, max_advance: int) -> str:
    """The one-line reason of an event rejected by ``max_advance`` (both publish paths use it).

    >>> print(ahead_reason(1800000000000, 5, 86400000))  # doctest: +NORMALIZE_WHITESPACE
    event time 1800000000000 is more than 86400000 ahead of the topic's largest event time 5
    (max_advance); nothing changed
    """
    return (f"event time {time} is more than {max_advance} ahead of the topic's largest event "
            f"time {max_time} (max_advance); nothing changed")


class UnknownEventError(HotjoinError, KeyError):
    """Delete of an id that is not stored on that side."""

    def __init__(self, side: str, event_id: str) -> None:
        super().__init__(f"no stored event {side}/{event_id}")
        self.side, self.event_id = side, event_id

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class UnknownSubscriptionError(HotjoinError, KeyError):
    """Unsubscribe or result of a subscription id the engine does not hold."""

    def __init__(self, subscription_id: int) -> None:
        super().__init__(f"no subscription {subscription_id}")
        self.subscription_id = subscription_id

    def __str__(self) -> str:
        return str(self.args[0])


class BatchError(HotjoinError):
    """A ``publish_many`` batch stopped at event ``index``; events before it were applied."""

    def __init__(self, index: int, cause: Exception) -> None:
        super().__init__(f"event #{index} of the batch failed: {cause}")
        self.index, self.cause = index, cause
