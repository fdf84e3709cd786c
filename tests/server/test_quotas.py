"""Per-principal quotas (``server/quotas.py``) as units, without a server: the limits'
validation and defaults, per-principal overrides, message/batch limits at their boundaries, the
publish token bucket against a brute-force simulation on a controlled clock, subscription
reservations and stream holds. Each breach is ``ResourceExhausted`` naming its quota and changes
nothing. The same quotas through the wire: ``test_server_security_quotas.py``."""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.server import quotas as quotas_module
from hotjoin.server.errors import InvalidArgument, ResourceExhausted
from hotjoin.server.quotas import LIMIT_FIELDS, MAX_BATCH_EVENTS, Limits, Quotas


@dataclass(frozen=True)
class Who:
    """A principal as quotas see it (``Principal`` protocol)."""

    owner: str = "alice"
    label: str = "alice"
    limits: Mapping[str, float] = field(default_factory=dict)


class Clock:
    """``time.monotonic`` under the test's control."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(quotas_module, "time", c)
    return c


def test_limits_defaults_and_worker_scaling() -> None:
    assert LIMIT_FIELDS == ("message_bytes", "batch_events", "subscriptions", "listeners",
                            "streams", "publish_rate", "publish_burst")
    d = Limits()
    assert (d.message_bytes, d.batch_events, d.subscriptions) == (64 << 20, MAX_BATCH_EVENTS, 0)
    assert (Limits.for_workers(16).listeners, Limits.for_workers(16).streams) == (8, 4)
    assert (Limits.for_workers(1).listeners, Limits.for_workers(1).streams) == (1, 1)  # never 0
    assert Limits.for_workers(16, listeners=3).listeners == 3  # an explicit value wins


@pytest.mark.parametrize("kw", [{"message_bytes": -1}, {"publish_rate": -0.5},
                                {"batch_events": MAX_BATCH_EVENTS + 1}, {"streams": -1}])
def test_invalid_limits_are_one_clear_error(kw: dict[str, float]) -> None:
    with pytest.raises(InvalidArgument) as e:
        Limits(**kw).validate()  # type: ignore[arg-type]
    assert "\n" not in str(e.value) and next(iter(kw)) in str(e.value)
    with pytest.raises(InvalidArgument):
        Quotas(Limits(**kw))  # type: ignore[arg-type]


def test_boundaries_are_validated_as_allowed() -> None:
    assert Limits(batch_events=MAX_BATCH_EVENTS, message_bytes=0).validate().batch_events == (
        MAX_BATCH_EVENTS)


def test_a_principal_s_override_wins_and_zero_disables() -> None:
    q = Quotas(Limits(batch_events=10, message_bytes=100))
    assert q.limit(Who(), "batch_events") == 10
    assert q.limit(Who(limits={"batch_events": 3}), "batch_events") == 3
    q.check_batch(Who(limits={"batch_events": 0}), MAX_BATCH_EVENTS)  # 0 = unlimited
    q.check_message(Who(limits={"message_bytes": 0}), 10 ** 9)


@pytest.mark.parametrize(("n", "ok"), [(0, True), (9, True), (10, True), (11, False)])
def test_message_and_batch_limits_at_their_boundary(n: int, ok: bool) -> None:
    q = Quotas(Limits(batch_events=10, message_bytes=10))
    for check, quota in ((q.check_batch, "batch_events"), (q.check_message, "message_bytes")):
        if ok:
            check(Who(), n)
        else:
            with pytest.raises(ResourceExhausted) as e:
                check(Who(), n)
            assert e.value.quota == quota and "alice" in str(e.value)


@settings(max_examples=150, deadline=None)
@given(rate=st.sampled_from([1.0, 2.5, 10.0, 1000.0]), burst=st.sampled_from([0.0, 1.0, 7.0]),
       steps=st.lists(st.tuples(st.floats(0.0, 5.0), st.integers(-1, 12)), max_size=40))
def test_token_bucket_matches_a_brute_force_simulation(rate: float, burst: float,
                                                       steps: list[tuple[float, int]]) -> None:
    clock = Clock()
    quotas_module_time = quotas_module.time
    quotas_module.time = clock  # type: ignore[assignment]
    try:
        q = Quotas(Limits(publish_rate=rate, publish_burst=burst, batch_events=10))
        size = burst or max(rate, 10.0)
        tokens, last = size, None
        for dt, n in steps:
            clock.now += dt
            if n <= 0:
                q.take_publish(Who(), n)  # nothing to take: always fine, the bucket untouched
                continue
            if n > size:
                with pytest.raises(ResourceExhausted, match="burst"):
                    q.take_publish(Who(), n)
                continue
            if last is not None:
                tokens = min(size, tokens + (clock.now - last) * rate)
            last = clock.now
            if tokens >= n:
                q.take_publish(Who(), n)
                tokens -= n
            else:
                with pytest.raises(ResourceExhausted) as e:
                    q.take_publish(Who(), n)
                assert e.value.quota == "publish_rate"
                wait = float(str(e.value).rsplit("retry in ", 1)[1].rstrip("s"))
                assert wait == pytest.approx((n - tokens) / rate, abs=1e-3)
    finally:
        quotas_module.time = quotas_module_time  # type: ignore[assignment]


def test_buckets_are_per_owner_and_refill_to_the_burst(clock: Clock) -> None:
    q = Quotas(Limits(publish_rate=2.0, publish_burst=4.0))
    alice, bob = Who(), Who(owner="bob", label="bob")
    q.take_publish(alice, 4)
    with pytest.raises(ResourceExhausted, match=r"retry in 0\.500s"):
        q.take_publish(alice, 1)
    q.take_publish(bob, 4)  # bob's bucket is his own
    clock.now += 3600.0  # a long pause refills to the burst, not beyond
    q.take_publish(alice, 4)
    with pytest.raises(ResourceExhausted):
        q.take_publish(alice, 1)


def test_without_a_rate_nothing_is_taken(clock: Clock) -> None:
    q = Quotas()
    for _ in range(100):
        q.take_publish(Who(), MAX_BATCH_EVENTS)


def test_subscriptions_count_owned_and_reserved() -> None:
    owned = {"alice": 3}
    q = Quotas(Limits(subscriptions=5), owned=lambda o: owned.get(o, 0))
    q.check_subscriptions(Who(), 2)
    with pytest.raises(ResourceExhausted, match="owns 3 subscriptions; 3 more") as e:
        q.check_subscriptions(Who(), 3)
    assert e.value.quota == "subscriptions"
    with q.subscriptions(Who(), 2):  # reserved while being registered
        with pytest.raises(ResourceExhausted):
            q.check_subscriptions(Who(), 1)
        with pytest.raises(ResourceExhausted), q.subscriptions(Who(), 1):
            pass
        q.check_subscriptions(Who(owner="bob", label="bob"), 5)  # another owner is unaffected
    q.check_subscriptions(Who(), 2)  # the reservation is released
    with pytest.raises(RuntimeError), q.subscriptions(Who(), 2):
        raise RuntimeError("registration failed")
    q.check_subscriptions(Who(), 2)  # released on failure too
    unlimited = Quotas(owned=lambda o: 10 ** 9)
    with unlimited.subscriptions(Who(), 10 ** 6):
        unlimited.check_subscriptions(Who(), 10 ** 6)


@pytest.mark.parametrize("kind", ["listeners", "streams"])
def test_holds_count_open_streams_up_to_the_limit(kind: str) -> None:
    q = Quotas(Limits(**{kind: 2}))  # type: ignore[arg-type]
    with q.hold(Who(), kind), q.hold(Who(), kind):
        assert q.held(Who(), kind) == 2
        with pytest.raises(ResourceExhausted, match="already has 2 open") as e, q.hold(Who(),
                                                                                      kind):
            pass
        assert e.value.quota == kind
        assert q.held(Who(), kind) == 2  # the refused one took nothing
        with q.hold(Who(owner="bob", label="bob"), kind):
            pass
    assert q.held(Who(), kind) == 0


def test_holds_are_thread_safe() -> None:
    q = Quotas(Limits(streams=1000))
    barrier = threading.Barrier(8)
    peak = []

    def worker() -> None:
        barrier.wait()
        for _ in range(200):
            with q.hold(Who(), "streams"):
                peak.append(q.held(Who(), "streams"))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert q.held(Who(), "streams") == 0 and 1 <= max(peak) <= 8


def test_a_rejection_counts_in_the_metric() -> None:
    q = Quotas(Limits(batch_events=1))
    counter = quotas_module.metrics.QUOTA_REJECTIONS.labels("batch_events", "metric-test")
    before = counter._value.get()
    with pytest.raises(ResourceExhausted):
        q.check_batch(Who(label="metric-test"), 2)
    assert counter._value.get() == before + 1
    assert math.isfinite(before)
