"""The subscription book of one topic: what the server keeps beside the engine per subscription.

The engine holds each subscription's predicate; the book holds the rest, by subscription id: its
``SubMeta`` (delivery mode, snapshot flag, subscriber name, registration seq), its owner principal
(docs/how-to/security.md; only non-empty owners are kept, so a server without ``--auth-file`` pays
nothing per subscription) and the delivery mode again as a boolean column (``affected``), which
the message builders index with numpy. Like the engine, the book is changed only under the topic
lock: by ``Topic`` as operations apply and by recovery as the log replays.
"""

from __future__ import annotations

import bisect
import collections
from collections.abc import Callable, Iterator

import numpy as np

from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.convert import SubMeta
from hotjoin.server.errors import PermissionDenied

LIST_PAGE_MAX = 10_000


class SubscriptionBook:
    """Metadata and owners of a topic's live subscriptions, with per-owner counts in O(1).

    ``meta`` and ``owners`` are read directly (checkpoints and snapshots copy them); they change
    only through ``register`` and ``unregister``.
    """

    affected: np.ndarray  # by subscription id: AFFECTED delivery
    next_sid: int
    _n_pairs: int  # live subscriptions with PAIRS delivery

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.meta: dict[int, SubMeta] = {}
        self.owners: dict[int, str] = {}
        self._owner_counts: collections.Counter[str] = collections.Counter()
        self.clear()

    def __len__(self) -> int:
        return len(self.meta)

    def __contains__(self, sid: int) -> bool:
        return sid in self.meta

    @property
    def wants_pairs(self) -> bool:
        """Whether some live subscription takes PAIRS delivery (the engine must then list pairs)."""
        return self._n_pairs > 0

    def register(self, sid: int, meta: SubMeta, owner: str = "") -> None:
        """Record subscription ``sid`` (registered in the engine) with its metadata and owner."""
        self.meta[sid] = meta
        if owner:
            self.owners[sid] = owner
        self._owner_counts[owner] += 1
        self.reserve(sid + 1)
        if sid >= len(self.affected):
            grown = np.zeros(max(2 * len(self.affected), sid + 1), dtype=bool)
            grown[: len(self.affected)] = self.affected
            self.affected = grown
        self.affected[sid] = meta.affected
        if not meta.affected:
            self._n_pairs += 1

    def unregister(self, sid: int) -> None:
        """Forget subscription ``sid`` (removed from the engine); its id is never reused."""
        meta = self.meta.pop(sid)
        owner = self.owners.pop(sid, "")
        self._owner_counts[owner] -= 1
        if self._owner_counts[owner] <= 0:
            del self._owner_counts[owner]
        if not meta.affected:
            self._n_pairs -= 1

    def clear(self) -> None:
        """Forget every subscription (a checkpoint that failed while loading: the log replays)."""
        self.meta.clear()
        self.owners.clear()
        self._owner_counts.clear()
        self.affected = np.zeros(1024, dtype=bool)
        self._n_pairs = 0
        self.next_sid = 0

    def reserve(self, n: int) -> None:
        """Ids below ``n`` are taken (a snapshot or checkpoint knows ids unsubscribed since)."""
        self.next_sid = max(self.next_sid, n)

    def hub_entries(self) -> Iterator[tuple[int, str, int, str]]:
        """``(sid, subscriber, registered_seq, owner)`` of every live subscription, for the
        delivery hub of a topic just opened."""
        owners = self.owners
        return ((sid, m.subscriber, m.registered_seq, owners.get(sid, "")) for sid, m in self.meta.items())

    def owned(self, owner: str) -> int:
        """Live subscriptions of ``owner`` (O(1); for the subscriptions quota)."""
        return self._owner_counts[owner]

    def owner_of(self, sid: int) -> str | None:
        """The owner of live subscription ``sid`` ("" without auth), None when it does not exist."""
        if sid not in self.meta:
            return None
        return self.owners.get(sid, "")

    def check_owner(self, sid: int, owner: str, action: str) -> None:
        """``PermissionDenied`` unless live subscription ``sid`` belongs to ``owner``."""
        if self.owners.get(sid, "") != owner:
            self.deny(sid, action)

    def deny(self, sid: int, action: str) -> None:
        """Raise the ``PermissionDenied`` of an ``action`` on another principal's subscription."""
        raise PermissionDenied(
            f"subscription {sid} of topic {self.topic!r} belongs to another principal; "
            f"to {action} it needs the 'admin' right on the topic", "admin")

    def select(self, subscriber: str, sids: set[int], owner: str | None) -> list[tuple[int, SubMeta]]:
        """The live subscriptions in ``sids`` or of ``subscriber`` (all when neither is given),
        only ``owner``'s when set, in id order."""
        out = []
        owners = self.owners
        for sid, meta in self.meta.items():
            mine = bool(subscriber) and meta.subscriber == subscriber
            if (sids or subscriber) and sid not in sids and not mine:
                continue
            if owner is not None and owners.get(sid, "") != owner:
                continue
            out.append((sid, meta))
        return out

    def page(
        self, subscriber: str, after_id: int | None, page_size: int, owner: str | None,
        spec_of: Callable[[int, SubMeta], pb.SubscriptionSpec],
    ) -> tuple[list[tuple[int, pb.SubscriptionSpec, int]], bool]:
        """A page of live subscriptions with id > ``after_id`` (of ``subscriber`` and ``owner``
        when set): ``[(id, spec, registered_seq)], more``; ``spec_of`` gives a wire spec."""
        size = min(page_size or LIST_PAGE_MAX, LIST_PAGE_MAX)
        owners = self.owners

        def wanted(sid: int) -> bool:
            return ((not subscriber or self.meta[sid].subscriber == subscriber)
                    and (owner is None or owners.get(sid, "") == owner))

        ids = list(self.meta)
        i = 0 if after_id is None else bisect.bisect_right(ids, after_id)
        page: list[tuple[int, pb.SubscriptionSpec, int]] = []
        while i < len(ids) and len(page) < size:
            sid = ids[i]
            if wanted(sid):
                meta = self.meta[sid]
                page.append((sid, spec_of(sid, meta), meta.registered_seq))
            i += 1
        return page, any(wanted(s) for s in ids[i:])
