"""The end-to-end tests of ``test_server_e2e.py`` and the restart/export test of
``test_recovery.py`` again, every ``publish`` sent in the columnar form.

``HotjoinClient.publish`` is replaced (for this module only) by a version that sends the events
as ``PublishRequest.columns`` — one request per run of events with / without a time — and
rebuilds the per-event answer from the compact one (seq range, rejected events by index,
assigned ids), so the unchanged e2e assertions check the columnar path against the oracle.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest
import test_recovery as persistence
import test_server_e2e as e2e

from hotjoin.clients import EventResult, PublishResult
from hotjoin.clients.client import HotjoinClient
from hotjoin.clients.convert import event_to_wire
from hotjoin.proto import hotjoin_pb2 as pb

SENT = [0]  # columnar requests sent (each test publishes, so each must send some)


def _publish_as_columns(self: HotjoinClient, topic: str, events: Sequence[Any]) -> PublishResult:
    events = [event_to_wire(e) for e in events]
    statuses: list[EventResult] = []
    accepted = rejected = 0
    i = 0
    while i < len(events):
        timed = events[i].HasField("time")
        j = i
        while j < len(events) and events[j].HasField("time") == timed:
            j += 1
        run = events[i:j]
        sides = np.array([{pb.SIDE_R: 0, pb.SIDE_S: 1}.get(e.side, 9) for e in run])
        resp = self.publish_columns(topic, sides, [e.id for e in run], [e.key for e in run],
                                    [e.value for e in run], [e.time for e in run] if timed else None,
                                    [e.payload for e in run])
        SENT[0] += 1
        bad = {s.index: s for s in resp.statuses}
        seq = resp.first_seq
        for k, e in enumerate(run):
            if k in bad:
                statuses.append(EventResult(bad[k].code, bad[k].id, reason=bad[k].reason,
                                            identical=bad[k].identical))
            else:
                statuses.append(EventResult("OK", resp.assigned.get(k, e.id), seq))
                seq += 1
        assert resp.accepted == 0 or seq - 1 == resp.last_seq
        accepted += resp.accepted
        rejected += resp.rejected
        i = j
    return PublishResult(tuple(statuses), accepted, rejected)


@pytest.fixture(autouse=True)
def _columnar_publish(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(HotjoinClient, "publish", _publish_as_columns)
    before = SENT[0]
    yield
    assert SENT[0] > before, "the test published nothing through the columnar form"


test_deliveries_equal_oracle = e2e.test_deliveries_equal_oracle
test_resume_after_drop_and_gap_after_eviction = e2e.test_resume_after_drop_and_gap_after_eviction
test_slow_listener_does_not_block_publishers = e2e.test_slow_listener_does_not_block_publishers
test_reconnect_after_server_restart = e2e.test_reconnect_after_server_restart
test_restart_rebuilds_state_exactly = persistence.test_restart_rebuilds_state_exactly
