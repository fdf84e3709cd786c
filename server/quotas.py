"""Per-principal quotas and limits (docs/how-to/security.md): each breach is RESOURCE_EXHAUSTED and
counts in ``hotjoin_quota_rejections_total{quota, principal}``.

| quota | what | default |
|---|---|---|
| ``message_bytes`` | size of one request message as received | 64 MiB |
| ``batch_events`` | events per ``Publish`` / ``PublishStream`` message / ``DeleteEvents`` | 10,000 |
| ``subscriptions`` | live subscriptions a principal owns, over all topics | unlimited |
| ``listeners`` | open ``Listen`` streams per principal | ``max_workers / 2`` |
| ``streams`` | open ``PublishStream`` + ``SubscribeStream`` calls per principal | ``max_workers / 4`` |
| ``publish_rate`` | events per second (publish and delete), token bucket | unlimited |
| ``publish_burst`` | bucket size in events | ``max(publish_rate, batch_events)`` |

``0`` disables a limit. Without ``--auth-file`` every caller is one principal (``anonymous``),
so the limits then apply to all callers together. An auth file may override any limit per
principal (``limits = { publish_rate = 500 }``).

**Fairness.** Nothing here queues: a principal over its rate gets RESOURCE_EXHAUSTED at once
(with the wait after which the batch would fit), before its request touches a topic lock, so a
flooding principal costs the others one bucket check per request. Stream and listener caps keep
one principal from holding every RPC worker thread (each open stream holds one).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import NoReturn, Protocol

from hotjoin.server import metrics
from hotjoin.server.errors import InvalidArgument, ResourceExhausted


class Principal(Protocol):
    """What quotas need of a caller (``hotjoin.server.auth.Principal`` is one): its owner name,
    its label for metrics and its per-principal limit overrides. A protocol, so this module does
    not import ``auth`` (which imports ``LIMIT_FIELDS`` from here)."""

    @property
    def owner(self) -> str: ...

    @property
    def label(self) -> str: ...

    @property
    def limits(self) -> Mapping[str, float]: ...

MAX_BATCH_EVENTS = 10_000  # the topic's own hard limit (server/topic.py)


@dataclass(frozen=True)
class Limits:
    """Server-wide defaults of every quota; ``0`` = unlimited (see the module table)."""

    message_bytes: int = 64 << 20
    batch_events: int = MAX_BATCH_EVENTS
    subscriptions: int = 0
    listeners: int = 32
    streams: int = 16
    publish_rate: float = 0.0
    publish_burst: float = 0.0

    @staticmethod
    def for_workers(max_workers: int, **kw: float) -> Limits:
        """Defaults scaled to the RPC worker pool: listeners ``max_workers/2``, streams ``/4``."""
        kw.setdefault("listeners", max(1, max_workers // 2))
        kw.setdefault("streams", max(1, max_workers // 4))
        return Limits(**kw)  # type: ignore[arg-type]

    def validate(self) -> Limits:
        """Raise ``InvalidArgument`` for a negative limit or a batch limit over the topic's."""
        for f in fields(self):
            if getattr(self, f.name) < 0:
                raise InvalidArgument(f"limit {f.name} must be >= 0 (0 = unlimited), got {getattr(self, f.name)}")
        if self.batch_events > MAX_BATCH_EVENTS:
            raise InvalidArgument(f"batch_events may be at most {MAX_BATCH_EVENTS} (the topic's own limit)")
        return self


LIMIT_FIELDS = tuple(f.name for f in fields(Limits))


class Quotas:
    """Checks and accounting of every quota; thread-safe. ``owned(owner)`` counts the live
    subscriptions of an owner over all topics (``TopicRegistry.owned``)."""

    def __init__(self, limits: Limits | None = None, owned: Callable[[str], int] | None = None) -> None:
        self.limits = (limits or Limits()).validate()
        self._owned = owned or (lambda _owner: 0)
        self._lock = threading.Lock()
        self._buckets: dict[str, list[float]] = {}  # owner -> [tokens, last refill (monotonic)]
        self._held: Counter[tuple[str, str]] = Counter()  # (kind, owner) -> open streams
        self._reserved: Counter[str] = Counter()  # owner -> subscriptions being registered

    def limit(self, p: Principal, name: str) -> float:
        """The principal's override of quota ``name``, else the server's."""
        v = p.limits.get(name)
        return getattr(self.limits, name) if v is None else v

    def _reject(self, p: Principal, quota: str, message: str) -> NoReturn:
        metrics.QUOTA_REJECTIONS.labels(quota, p.label).inc()
        raise ResourceExhausted(message, quota)

    def message_limit(self, p: Principal) -> int:
        return int(self.limit(p, "message_bytes"))

    def check_message(self, p: Principal, nbytes: int) -> None:
        limit = self.message_limit(p)
        if limit and nbytes > limit:
            self._reject(p, "message_bytes", f"request message of {nbytes} bytes exceeds the limit of "
                         f"{limit} bytes per message for principal {p.label!r}")

    def check_batch(self, p: Principal, n: int, what: str = "events") -> None:
        limit = int(self.limit(p, "batch_events"))
        if limit and n > limit:
            self._reject(p, "batch_events", f"batch of {n} {what} exceeds the limit of {limit} "
                         f"per request for principal {p.label!r}")

    def take_publish(self, p: Principal, n: int) -> None:
        """Take ``n`` events from the principal's token bucket, or reject at once (no queueing)."""
        rate = float(self.limit(p, "publish_rate"))
        if not rate or n <= 0:
            return
        burst = float(self.limit(p, "publish_burst")) or max(rate, float(self.limit(p, "batch_events") or MAX_BATCH_EVENTS))
        if n > burst:
            self._reject(p, "publish_rate", f"a batch of {n} events exceeds the publish burst of "
                         f"{burst:g} events of principal {p.label!r}; send smaller batches")
        now = time.monotonic()
        with self._lock:
            b = self._buckets.get(p.owner)
            if b is None:
                b = self._buckets[p.owner] = [burst, now]
            tokens = min(burst, b[0] + (now - b[1]) * rate)
            b[1] = now
            ok = tokens >= n
            b[0] = tokens - n if ok else tokens
        if not ok:
            wait = (n - tokens) / rate
            self._reject(p, "publish_rate", f"publish rate limit of {rate:g} events/s exceeded for "
                         f"principal {p.label!r}; retry in {wait:.3f}s")

    def check_subscriptions(self, p: Principal, n: int) -> None:
        """Reject when ``n`` more subscriptions would exceed the principal's limit (no reservation)."""
        limit = int(self.limit(p, "subscriptions"))
        if limit:
            with self._lock:
                have = self._owned(p.owner) + self._reserved[p.owner]
            if have + n > limit:
                self._reject(p, "subscriptions", f"principal {p.label!r} owns {have} subscriptions; "
                             f"{n} more would exceed its limit of {limit}")

    @contextlib.contextmanager
    def subscriptions(self, p: Principal, n: int) -> Iterator[None]:
        """Reserve room for ``n`` subscriptions while they are being registered."""
        limit = int(self.limit(p, "subscriptions"))
        if not limit:
            yield
            return
        with self._lock:
            have = self._owned(p.owner) + self._reserved[p.owner]
            ok = have + n <= limit
            if ok:
                self._reserved[p.owner] += n
        if not ok:
            self._reject(p, "subscriptions", f"principal {p.label!r} owns {have} subscriptions; "
                         f"{n} more would exceed its limit of {limit}")
        try:
            yield
        finally:
            with self._lock:
                self._reserved[p.owner] -= n
                if self._reserved[p.owner] <= 0:
                    del self._reserved[p.owner]

    @contextlib.contextmanager
    def hold(self, p: Principal, kind: str) -> Iterator[None]:
        """Count one open stream of ``kind`` (``listeners`` or ``streams``) while inside."""
        limit = int(self.limit(p, kind))
        key = (kind, p.owner)
        with self._lock:
            held = self._held[key]
            ok = not limit or held < limit
            if ok:
                self._held[key] = held + 1
        if not ok:
            what = "Listen streams" if kind == "listeners" else "publish/subscribe streams"
            self._reject(p, kind, f"principal {p.label!r} already has {held} open {what}, its limit")
        try:
            yield
        finally:
            with self._lock:
                self._held[key] -= 1
                if self._held[key] <= 0:
                    del self._held[key]

    def held(self, p: Principal, kind: str) -> int:
        with self._lock:
            return self._held[(kind, p.owner)]
