"""Test harness of the server tests: the engine to serve with, and the oracle adapter.

``OracleEngine`` dressed with the server-facing parts of the Engine API (columnar forms).

Used as the reference in the end-to-end tests (deliveries must equal the oracle's).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from hotjoin.matcher.model import Affected, Delivery, Event, Matches
from hotjoin.matcher.oracle import OracleEngine, _Stored, _Sub


def to_matches(out: list[Delivery], sign: int) -> Matches:
    return Matches(
        np.array([d.subscription_id for d in out], dtype=np.int64),
        sign,
        np.array([d.r_id for d in out], dtype=object),
        np.array([d.s_id for d in out], dtype=object),
    )


def to_affected(out: list[Delivery], sign: int) -> Affected:
    c = Counter(d.subscription_id for d in out)
    ids = sorted(c)
    return Affected(np.array(ids, dtype=np.int64), np.array([c[i] * sign for i in ids], dtype=np.int64))


class OracleAdapter(OracleEngine):
    """The oracle with ``publish_columnar``/``publish_affected``/``match=False`` and ``stats``."""

    def __init__(self, lateness: int = 0, retention: int | None = None,
                 strategy: str | Mapping[str, str] = "auto",
                 max_advance: int | None = None) -> None:
        super().__init__(lateness, retention, max_advance)

    def publish_columnar(self, ev: Event) -> Matches:
        return to_matches(self.publish(ev), 1)

    def publish_affected(self, ev: Event) -> Affected:
        return to_affected(self.publish(ev), 1)

    def delete_columnar(self, side: str, id: str) -> Matches:
        return to_matches(super().delete(side, id), -1)

    def delete_affected(self, side: str, id: str) -> Affected:
        return to_affected(super().delete(side, id), -1)

    def delete(self, side: str, id: str, match: bool = True) -> list[Delivery]:  # type: ignore[override]
        return super().delete(side, id)

    def publish_many(self, events: Iterable[Event], match: bool = True) -> list[Delivery]:  # type: ignore[override]
        return super().publish_many(events)

    def result_columnar(self, sid: int) -> Matches:
        return to_matches(self.result(sid), 1)

    def get_event(self, side: str, id: str) -> Event | None:
        return self.stored(side).get(id)

    def subscription(self, sid: int) -> Any:
        return self.subscriptions()[sid]

    # compaction (the Engine's restore_* API and what the server's snapshot reads)
    def restore_subscription(self, sid: int, sub: Any, reg_seq: int, snapshot: bool = False) -> None:
        self._subs[sid] = _Sub(sub, reg_seq, bool(snapshot))
        self._next_sid = max(self._next_sid, sid + 1)

    def restore_events(self, events: list[Event], seqs: list[int]) -> None:
        for ev, seq in zip(events, seqs, strict=True):
            self._stored[ev.side][ev.id] = _Stored(ev, seq)

    def restore_clock(self, seq: int, max_time: int | None) -> None:
        self._seq, self._max_time = seq, max_time

    def set_next_subscription_id(self, n: int) -> None:
        self._next_sid = max(self._next_sid, n)

    def stored_tuples(self) -> list[tuple[Event, int]]:
        return [(st.event, st.seq) for table in self._stored.values() for st in table.values()]

    def stats(self) -> dict[str, Any]:
        kinds = Counter(s.kind for s in self.subscriptions().values())
        return {"tuples": {s: len(self.stored(s)) for s in "RS"},
                "subscriptions": {k: kinds.get(k, 0) for k in ("select", "band", "window")}}


def engine_factory() -> Any:
    """The engine the server tests serve with: ``matcher.Engine`` (the oracle is their reference,
    never their engine)."""
    from hotjoin.matcher import Engine

    return Engine
