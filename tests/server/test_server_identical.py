"""Identical duplicates: a re-sent event (the stored event with its id has the same side, key,
value, payload, and time when the request carries one) is DUPLICATE with
``EventStatus.identical``; another event under a stored id is a conflict (``identical`` false).

Both publish forms, through a real server: fixed cases at the boundaries (each field differing
alone, an event without a time, ids repeated within one batch), a property test against a
brute-force oracle, and the ``hotjoin_events_rejected_total`` reasons.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_harness import engine_factory

from hotjoin.clients.client import HotjoinClient, event
from hotjoin.server import metrics
from hotjoin.server.app import HotjoinServer

# side, id, key, value, time (None: the server's clock), payload
Row = tuple[str, str, float, float, int | None, bytes]

STORED: Row = ("R", "c1", 1.5, 2.0, 100, b"p")
SAME = "event R/c1 already exists with the same content (a re-sent event)"
CONFLICT = "event R/c1 already exists"


def _per_event(c: HotjoinClient, topic: str, rows: list[Row]) -> list[tuple[str, bool, str]]:
    """(code, identical, reason) per event, published one message per event."""
    resp = c.publish(topic, [event(s, i, k, v, t, p) for s, i, k, v, t, p in rows])
    return [(s.code, s.identical, s.reason) for s in resp.statuses]


def _columnar(c: HotjoinClient, topic: str, rows: list[Row]) -> list[tuple[str, bool, str]]:
    """The same through the columnar form (every row with a time, or none with one)."""
    timed = [r[4] is not None for r in rows]
    assert all(timed) or not any(timed), "a columnar batch has times for all events or none"
    times = np.array([r[4] for r in rows], dtype=np.int64) if all(timed) else None
    resp = c.publish_columns(topic, [r[0] for r in rows], [r[1] for r in rows],
                             [r[2] for r in rows], [r[3] for r in rows], times,
                             [r[5] for r in rows])
    bad = {s.index: (s.code, s.identical, s.reason) for s in resp.statuses}
    return [bad.get(i, ("OK", False, "")) for i in range(len(rows))]


FORMS = {"per_event": _per_event, "columnar": _columnar}
_names = itertools.count()


def _topic(c: HotjoinClient) -> str:
    name = f"t{next(_names)}"
    c.create_topic(name, lateness=10**9)
    return name


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(("resent", "identical"), [
    (STORED, True),
    (("R", "c1", 1.5, 2.0, None, b"p"), True),  # no time: matches any stored time
    (("R", "c1", 1.5000000000000002, 2.0, 100, b"p"), False),  # the next double up
    (("R", "c1", 1.5, -2.0, 100, b"p"), False),
    (("R", "c1", 1.5, 2.0, 101, b"p"), False),
    (("R", "c1", 1.5, 2.0, 99, b"p"), False),
    (("R", "c1", 1.5, 2.0, 100, b""), False),
    (("R", "c1", 1.5, 2.0, 100, b"p\x00"), False),
])
def test_identical_or_conflict(client: HotjoinClient, form: str, resent: Row,
                               identical: bool) -> None:
    publish = FORMS[form]
    t = _topic(client)
    assert publish(client, t, [STORED])[0][0] == "OK"
    seq = client.get_topic(t).seq
    got = publish(client, t, [resent])
    assert got == [("DUPLICATE", identical, SAME if identical else CONFLICT)]
    assert client.get_topic(t).seq == seq  # a rejected event changes nothing
    assert client.stats(t).tuples["R"] == 1


@pytest.mark.parametrize("form", FORMS)
def test_the_other_side_is_another_event(client: HotjoinClient, form: str) -> None:
    t = _topic(client)
    FORMS[form](client, t, [STORED])
    assert FORMS[form](client, t, [("S", "c1", 1.5, 2.0, 100, b"p")])[0][0] == "OK"


@pytest.mark.parametrize("form", FORMS)
def test_repeats_within_one_batch(client: HotjoinClient, form: str) -> None:
    """An id repeated in a batch is compared with the batch's first event of that id."""
    t = _topic(client)
    rows: list[Row] = [("S", "a", 1.0, 1.0, 5, b""), ("S", "a", 1.0, 1.0, 5, b""),
                       ("S", "a", 1.0, 1.0, 6, b""), ("S", "b", 2.0, 0.0, 5, b"x"),
                       ("S", "b", 2.0, 0.0, 5, b"x"), ("S", "a", 1.0, 1.0, 5, b"")]
    got = FORMS[form](client, t, rows)
    assert [(code, same) for code, same, _ in got] == [
        ("OK", False), ("DUPLICATE", True), ("DUPLICATE", False), ("OK", False),
        ("DUPLICATE", True), ("DUPLICATE", True)]
    assert got[2][2] == "event S/a already exists"
    assert client.get_topic(t).seq == 2


def _rejected(topic: str, reason: str) -> float:
    v = metrics.REGISTRY.get_sample_value("hotjoin_events_rejected_total",
                                          {"topic": topic, "reason": reason})
    return v or 0.0


@pytest.mark.parametrize("form", FORMS)
def test_rejection_metric_reasons(client: HotjoinClient, form: str) -> None:
    t = _topic(client)
    FORMS[form](client, t, [STORED])
    FORMS[form](client, t, [STORED, STORED, ("R", "c1", 0.0, 2.0, 100, b"p")])
    assert _rejected(t, "duplicate_identical") == 2
    assert _rejected(t, "duplicate") == 1
    client.delete_topic(t)
    assert _rejected(t, "duplicate_identical") == 0  # forgotten with the topic


# ---- property: both forms against a brute-force oracle --------------------------------------

_row = st.tuples(
    st.sampled_from(["R", "S"]),
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from([0.0, 1.0]),
    st.sampled_from([0.0, -1.0]),
    st.sampled_from([1, 2]),
    st.sampled_from([b"", b"x"]),
)


def _oracle(batches: list[list[Row]]) -> list[list[tuple[str, bool]]]:
    """(code, identical) of every event, by the definition: a stored (side, id) makes the event
    a duplicate, identical when key, value, payload and (if sent) time are equal."""
    stored: dict[tuple[str, str], Row] = {}
    out = []
    for batch in batches:
        got = []
        for r in batch:
            old = stored.get((r[0], r[1]))
            if old is None:
                stored[(r[0], r[1])] = r
                got.append(("OK", False))
            else:
                same = (old[2], old[3], old[5]) == (r[2], r[3], r[5]) and r[4] in (None, old[4])
                got.append(("DUPLICATE", same))
        out.append(got)
    return out


def _to_send(batches: list[list[Row]], untimed: list[bool]) -> list[list[Row]]:
    """The batches as sent: a batch marked untimed goes without times and keeps only events
    re-sent under a stored id (a new event would take the server's clock)."""
    stored: set[tuple[str, str]] = set()
    out = []
    for batch, drop in zip(batches, untimed, strict=False):
        if drop:
            batch = [(s, i, k, v, None, p) for s, i, k, v, _, p in batch if (s, i) in stored]
        if batch:
            out.append(batch)
            stored |= {(r[0], r[1]) for r in batch}
    return out


def test_identical_matches_the_oracle(data_dir: Path) -> None:
    srv = HotjoinServer(data_dir=data_dir, port=0, engine_factory=engine_factory()).start()
    counter = itertools.count()

    @settings(max_examples=40, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(batches=st.lists(st.lists(_row, min_size=1, max_size=8), min_size=1, max_size=4),
           columnar=st.lists(st.booleans(), min_size=4, max_size=4),
           untimed=st.lists(st.booleans(), min_size=4, max_size=4))
    def check(batches: list[list[Row]], columnar: list[bool], untimed: list[bool]) -> None:
        sent = _to_send(batches, untimed)
        name = f"p{next(counter)}"
        with HotjoinClient(srv.target, timeout=30) as c:
            c.create_topic(name, lateness=10**9)
            for batch, want, col in zip(sent, _oracle(sent), columnar, strict=False):
                publish = _columnar if col else _per_event
                assert [(code, same) for code, same, _ in publish(c, name, batch)] == want
            c.delete_topic(name)

    try:
        check()
    finally:
        srv.stop(0)
