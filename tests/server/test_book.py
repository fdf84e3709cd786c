"""The subscription book (``server/book.py``) against plain-Python models: registration and
removal keep per-owner counts, the PAIRS count and the ``affected`` column; ``select`` and
``page`` answer what a filter over every subscription does, page by page to the end; another
principal's subscription is ``PermissionDenied``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hotjoin.server.book import LIST_PAGE_MAX, SubscriptionBook
from hotjoin.server.convert import SubMeta
from hotjoin.server.errors import PermissionDenied

OWNERS = ["", "alice", "bob"]
SUBSCRIBERS = ["", "s1", "s2"]

PROGRAM = st.lists(st.one_of(
    st.tuples(st.just("add"), st.booleans(), st.sampled_from(SUBSCRIBERS),
              st.sampled_from(OWNERS)),
    st.tuples(st.just("drop"), st.integers(0, 10 ** 6), st.just(""), st.just(""))), max_size=60)


def _book(program: list[tuple[str, Any, str, str]]) -> tuple[SubscriptionBook, dict[int, tuple]]:
    """Run ``program`` on a fresh book; returns it and the model ``sid -> (affected,
    subscriber, owner)``."""
    book, model = SubscriptionBook("t"), {}
    for op, x, subscriber, owner in program:
        if op == "add":
            sid = book.next_sid
            book.register(sid, SubMeta(affected=x, snapshot=False, subscriber=subscriber,
                                       registered_seq=sid * 10), owner)
            model[sid] = (x, subscriber, owner)
        elif model:
            sid = sorted(model)[x % len(model)]
            book.unregister(sid)
            del model[sid]
    return book, model


@settings(max_examples=100, deadline=None)
@given(PROGRAM)
def test_register_and_unregister_keep_the_counts(program: list) -> None:
    book, model = _book(program)
    assert len(book) == len(model) and all(sid in book for sid in model)
    assert book.next_sid == sum(op == "add" for op, *_ in program)  # ids are never reused
    for owner in OWNERS:
        assert book.owned(owner) == sum(o == owner for _, _, o in model.values())
    assert book.wants_pairs == any(not a for a, _, _ in model.values())
    for sid, (affected, _, owner) in model.items():
        assert bool(book.affected[sid]) == affected
        assert book.owner_of(sid) == owner
    assert book.owner_of(book.next_sid) is None
    assert sorted(book.hub_entries()) == sorted(
        (sid, s, sid * 10, o) for sid, (_, s, o) in model.items())


@settings(max_examples=100, deadline=None)
@given(PROGRAM, st.sampled_from(SUBSCRIBERS), st.sets(st.integers(0, 30), max_size=5),
       st.sampled_from([None, *OWNERS]))
def test_select_is_a_filter_over_every_subscription(program: list, subscriber: str,
                                                    sids: set[int], owner: str | None) -> None:
    book, model = _book(program)
    want = [sid for sid, (_, s, o) in sorted(model.items())
            if (not (sids or subscriber) or sid in sids or (subscriber and s == subscriber))
            and (owner is None or o == owner)]
    assert [sid for sid, _ in book.select(subscriber, sids, owner)] == want


@settings(max_examples=100, deadline=None)
@given(PROGRAM, st.sampled_from(SUBSCRIBERS), st.sampled_from([None, *OWNERS]),
       st.integers(0, 4))
def test_pages_walk_every_wanted_subscription_once(program: list, subscriber: str,
                                                   owner: str | None, size: int) -> None:
    book, model = _book(program)
    want = [sid for sid, (_, s, o) in sorted(model.items())
            if (not subscriber or s == subscriber) and (owner is None or o == owner)]
    got, after, more = [], None, True
    while more:
        page, more = book.page(subscriber, after, size, owner, lambda sid, meta: sid)
        assert len(page) <= (size or LIST_PAGE_MAX)
        assert all(seq == sid * 10 and spec == sid for sid, spec, seq in page)
        got += [sid for sid, _, _ in page]
        if page:
            after = page[-1][0]
        else:
            assert not more
    assert got == want


def test_affected_column_grows_past_its_first_size() -> None:
    book = SubscriptionBook("t")
    book.register(5000, SubMeta(True, False, "", 1))
    book.register(5001, SubMeta(False, False, "", 2))
    assert book.affected[5000] and not book.affected[5001] and book.next_sid == 5002
    book.reserve(100)  # never lowers
    assert book.next_sid == 5002
    book.reserve(9000)
    assert book.next_sid == 9000
    book.clear()
    assert len(book) == 0 and book.next_sid == 0 and not book.wants_pairs


def test_another_principal_s_subscription_is_permission_denied() -> None:
    book = SubscriptionBook("orders")
    book.register(0, SubMeta(True, False, "", 1), "alice")
    book.register(1, SubMeta(True, False, "", 1))
    book.check_owner(0, "alice", "unsubscribe")
    book.check_owner(1, "", "unsubscribe")
    for sid, owner in ((0, "bob"), (0, ""), (1, "alice")):
        with pytest.raises(PermissionDenied) as e:
            book.check_owner(sid, owner, "unsubscribe")
        assert "'orders'" in str(e.value) and "to unsubscribe it" in str(e.value)
        assert "\n" not in str(e.value)


def test_owners_are_kept_only_when_non_empty() -> None:
    book = SubscriptionBook("t")
    book.register(0, SubMeta(True, False, "", 1), "")
    book.register(1, SubMeta(True, False, "", 1), "alice")
    assert book.owners == {1: "alice"} and book.owned("") == 1
    book.unregister(1)
    assert book.owned("alice") == 0 and "alice" not in book._owner_counts
