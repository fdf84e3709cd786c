"""Lockstep harness: drive an engine and ``OracleEngine`` with the same operations.

Two layers:

* ``Lockstep`` wraps an engine under test and a fresh oracle.  Each call (``subscribe``,
  ``subscribe_many``, ``unsubscribe``, ``publish``, ``publish_many``, ``delete``) runs on both and
  checks: same outcome (same error class — for ``BatchError`` also the same index and cause
  class — or both none), same return value (delivery *multiset* of
  ``(subscription_id, sign, r_id, s_id)``, or subscription ids), then the same ``seq`` and
  ``watermark`` and, for snapshot subscriptions (or all, with ``compare_results="all"``), the
  same ``result(sid)`` multiset.  On success it returns the oracle's value; on an agreed error it
  re-raises the oracle's exception.  Batch calls on the engine are checked against the oracle
  applying the items ONE AT A TIME, so batch == one-at-a-time is tested too.
* ``programs(kinds=...)`` is a hypothesis strategy of abstract operation sequences and
  ``run_program(factory, program)`` resolves them against the oracle's state (which ids are
  stored, which subscriptions are live, the current watermark) and feeds them to ``Lockstep``.

Reuse for other join kinds: ``programs(kinds=("select",))``, ``("window",)`` or a mix; the key
domain is picked per kind (``BAND_KEYS``, or ``EQUI_KEYS`` with a few values so equal keys are
common for select/window joins) and can be overridden with ``keys=``; ``band_bounds=`` sets the
band-end domain (``IEEE_KEYS`` / ``IEEE_BOUNDS`` target the IEEE-subtraction rule of ``BandJoin``).
An engine factory is any ``(lateness, retention) -> engine``, e.g.
``lambda L, R: Engine(lateness=L, retention=R, strategy={"select": "SJ-SSI"})``.

Environment: ``HOTJOIN_HYPOTHESIS_EXAMPLES`` scales the number of examples (``example_count``);
``HOTJOIN_TEST_ENGINE=oracle`` makes ``engine_factory`` return a second ``OracleEngine`` (to
check the harness and the tests themselves before/without the real engine).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from hotjoin.matcher.errors import (
    BatchError,
    DuplicateEventError,
    HotjoinError,
    LateEventError,
    UnknownEventError,
    UnknownSubscriptionError,
)
from hotjoin.matcher.model import (
    BandJoin,
    Delivery,
    Event,
    Range,
    SelectJoin,
    Subscription,
    WindowJoin,
)
from hotjoin.matcher.oracle import OracleEngine

EngineFactory = Callable[[int, "int | None"], Any]
DeliveryKey = tuple[int, int, str, str]

BAND_STRATEGY_NAMES = ("BJ-QOuter", "BJ-DOuter", "BJ-MJ", "BJ-SSI", "BJ-Hotspot")
SELECT_STRATEGY_NAMES = ("SJ-JoinFirst", "SJ-SelectFirst", "SJ-Vanilla", "SJ-SSI", "SJ-Hotspot")
WINDOW_STRATEGY_NAMES = ("WJ-JoinFirst", "WJ-SelectFirst", "WJ-SSI", "WJ-Hotspot")

# (lateness, retention) pairs a program runs under: no retention, disorder, retention 0 and > L.
TIME_SETTINGS: tuple[tuple[int, int | None], ...] = ((0, None), (2, None), (3, 2), (1, 0), (5, 6))


# ---- configuration ------------------------------------------------------------------------------


def example_count(default: int) -> int:
    """``default`` scaled by ``HOTJOIN_HYPOTHESIS_EXAMPLES`` (an absolute count; or ``x2.5``)."""
    raw = os.environ.get("HOTJOIN_HYPOTHESIS_EXAMPLES", "").strip()
    if not raw:
        return default
    if raw.startswith("x"):
        return max(1, round(default * float(raw[1:])))
    return max(1, int(raw))


def harness_settings(default_examples: int) -> settings:
    """Hypothesis settings for lockstep tests: no deadline, scalable example count."""
    return settings(
        max_examples=example_count(default_examples),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def use_oracle_as_engine() -> bool:
    """``HOTJOIN_TEST_ENGINE=oracle``: test the harness against a second oracle."""
    return os.environ.get("HOTJOIN_TEST_ENGINE", "").lower() == "oracle"


def engine_factory(
    strategy: str | dict[str, str] = "auto", options: dict[str, Any] | None = None
) -> EngineFactory:
    """Factory for ``hotjoin.matcher.engine.Engine`` with ``strategy`` and ``options`` (a copy
    per engine: a router keeps its loaded cost profile in them)."""
    if use_oracle_as_engine():
        return lambda lateness, retention: OracleEngine(lateness, retention)
    from hotjoin.matcher.engine import Engine

    if options is None:
        return lambda lateness, retention: Engine(
            lateness=lateness, retention=retention, strategy=strategy
        )
    return lambda lateness, retention: Engine(
        lateness=lateness, retention=retention, strategy=strategy, options=dict(options)
    )


# ---- outcome comparison -------------------------------------------------------------------------

_ERROR_CLASSES: tuple[type[BaseException], ...] = (
    BatchError,
    LateEventError,
    DuplicateEventError,
    UnknownEventError,
    UnknownSubscriptionError,
    ValueError,
)


def classify(exc: BaseException | None) -> str:
    """A comparable description of an outcome's error (None: no error)."""
    if exc is None:
        return "ok"
    for cls in _ERROR_CLASSES:
        if isinstance(exc, cls):
            if isinstance(exc, BatchError):
                return f"BatchError[{exc.index}:{classify(exc.cause)}]"
            return cls.__name__
    return f"UNEXPECTED {type(exc).__name__}: {exc}"


def delivery_key(d: Any) -> DeliveryKey:
    """Normalize a delivery (engine may use numpy scalars) to a plain tuple."""
    return (int(d.subscription_id), int(d.sign), str(d.r_id), str(d.s_id))


def multiset(ds: Iterable[Any]) -> Counter[DeliveryKey]:
    return Counter(delivery_key(d) for d in ds)


def _fmt(c: Counter[DeliveryKey]) -> str:
    return "{" + ", ".join(f"{k}x{v}" if v != 1 else f"{k}" for k, v in sorted(c.items())) + "}"


@dataclass
class _Outcome:
    value: Any = None
    error: BaseException | None = None


def _run(fn: Callable[[], Any]) -> _Outcome:
    try:
        return _Outcome(value=fn())
    except Exception as exc:  # any engine error is an outcome to compare
        return _Outcome(error=exc)


class LockstepMismatch(AssertionError):
    """The engine and the oracle disagreed; the message carries the whole operation log."""


class Lockstep:
    """An engine under test and an oracle, driven together and compared after every call."""

    def __init__(
        self,
        engine: Any,
        lateness: int = 0,
        retention: int | None = None,
        compare_results: str = "snapshot",
    ) -> None:
        if compare_results not in ("snapshot", "all", "none"):
            raise ValueError("compare_results must be 'snapshot', 'all' or 'none'")
        self.engine = engine
        self.oracle = OracleEngine(lateness, retention)
        self.lateness, self.retention = lateness, retention
        self.compare_results = compare_results
        self.snapshot_sids: set[int] = set()
        self.log: list[str] = [f"Engine(lateness={lateness}, retention={retention})"]

    # -- reporting --------------------------------------------------------------------------

    def fail(self, what: str) -> None:
        steps = "\n".join(f"  {i:3d}: {line}" for i, line in enumerate(self.log))
        raise LockstepMismatch(f"{what}\noperations so far:\n{steps}")

    def _compare(
        self,
        desc: str,
        eng: _Outcome,
        ora: _Outcome,
        normalize: Callable[[Any], Any],
        show: Callable[[Any], str] = repr,
    ) -> Any:
        self.log.append(desc)
        ce, co = classify(eng.error), classify(ora.error)
        if ce != co:
            self.fail(f"{desc}: engine -> {ce}, oracle -> {co}")
        if ora.error is None:
            ne, no = normalize(eng.value), normalize(ora.value)
            if ne != no:
                self.fail(f"{desc}: results differ\n  engine: {show(ne)}\n  oracle: {show(no)}")
        self.check_state(desc)
        if ora.error is not None:
            raise ora.error
        return ora.value

    def check_state(self, desc: str = "state") -> None:
        """Same ``seq``, ``watermark`` and (per ``compare_results``) ``result`` multisets.

        An engine offering ``check_invariants()`` (stabbing-partition bound, hotspot I1–I3,
        index consistency) has it asserted here too, i.e. after every operation.
        """
        e, o = self.engine, self.oracle
        check = getattr(e, "check_invariants", None)
        if check is not None:
            try:
                check()
            except AssertionError as exc:
                self.fail(f"after {desc}: engine invariant broken: {exc!r}")
        if int(e.seq) != o.seq:
            self.fail(f"after {desc}: seq engine={e.seq} oracle={o.seq}")
        we = None if e.watermark is None else int(e.watermark)
        if we != o.watermark:
            self.fail(f"after {desc}: watermark engine={e.watermark} oracle={o.watermark}")
        if self.compare_results == "none":
            return
        live = o.subscriptions()
        sids = sorted(live if self.compare_results == "all" else self.snapshot_sids & live.keys())
        for sid in sids:
            got, want = multiset(e.result(sid)), multiset(o.result(sid))
            if got != want:
                self.fail(
                    f"after {desc}: result({sid}) differs\n  engine: {_fmt(got)}\n"
                    f"  oracle: {_fmt(want)}"
                )

    # -- operations -------------------------------------------------------------------------

    def subscribe(self, sub: Subscription, snapshot: bool = False) -> int:
        sid = self._compare(
            f"subscribe({sub!r}, snapshot={snapshot})",
            _run(lambda: self.engine.subscribe(sub, snapshot=snapshot)),
            _run(lambda: self.oracle.subscribe(sub, snapshot)),
            int,
        )
        if snapshot:
            self.snapshot_sids.add(sid)
        return sid

    def subscribe_many(self, subs: Sequence[Subscription], snapshot: bool = False) -> list[int]:
        """Engine's batch call vs the oracle subscribing one at a time."""
        subs = list(subs)

        def one_at_a_time() -> list[int]:
            if not all(isinstance(s, (SelectJoin, BandJoin, WindowJoin)) for s in subs):
                raise ValueError("not a subscription")  # all or nothing, like OracleEngine
            return [self.oracle.subscribe(s, snapshot) for s in subs]

        sids = self._compare(
            f"subscribe_many({subs!r}, snapshot={snapshot})",
            _run(lambda: self.engine.subscribe_many(subs, snapshot=snapshot)),
            _run(one_at_a_time),
            lambda v: [int(x) for x in v],
        )
        if snapshot:
            self.snapshot_sids.update(sids)
        return sids

    def unsubscribe(self, sid: int) -> None:
        self._compare(
            f"unsubscribe({sid})",
            _run(lambda: self.engine.unsubscribe(sid)),
            _run(lambda: self.oracle.unsubscribe(sid)),
            lambda v: None,
        )
        self.snapshot_sids.discard(sid)

    def publish(self, event: Any) -> list[Delivery]:
        return self._compare(
            f"publish({event!r})",
            _run(lambda: self.engine.publish(event)),
            _run(lambda: self.oracle.publish(event)),
            multiset,
            _fmt,
        )

    def publish_many(self, events: Sequence[Any]) -> list[Delivery]:
        """Engine's batch call vs the oracle publishing one at a time."""
        events = list(events)

        def one_at_a_time() -> list[Delivery]:
            out: list[Delivery] = []
            for i, ev in enumerate(events):
                try:
                    out.extend(self.oracle.publish(ev))
                except (HotjoinError, ValueError) as exc:
                    raise BatchError(i, exc) from exc
            return out

        return self._compare(
            f"publish_many({events!r})",
            _run(lambda: self.engine.publish_many(events)),
            _run(one_at_a_time),
            multiset,
            _fmt,
        )

    def delete(self, side: Any, id: Any) -> list[Delivery]:
        return self._compare(
            f"delete({side!r}, {id!r})",
            _run(lambda: self.engine.delete(side, id)),
            _run(lambda: self.oracle.delete(side, id)),
            multiset,
            _fmt,
        )

    def result(self, sid: int) -> list[Delivery]:
        return self._compare(
            f"result({sid})",
            _run(lambda: self.engine.result(sid)),
            _run(lambda: self.oracle.result(sid)),
            multiset,
            _fmt,
        )


# ---- abstract programs (hypothesis) -------------------------------------------------------------

# Numbers: small integers and halves so equal keys, shared bounds and exact band ends are
# frequent, plus a few doubles where r.key + lo differs from the IEEE difference s.key - r.key.
IEEE_TRAPS = (0.1, 0.2, 0.3, 0.7, 0.3 - 0.1)
_halves = st.integers(0, 12).map(lambda i: i / 2)

BAND_KEYS = st.one_of(st.integers(0, 6).map(float), _halves, st.sampled_from(IEEE_TRAPS))
# equi-joins need r.key == s.key often: three main keys (repeated = weighted) and two rare ones
EQUI_KEYS = st.sampled_from((0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 0.5, 0.3))
VALUES = st.one_of(st.integers(0, 6).map(float), _halves)
BAND_BOUNDS = st.one_of(
    st.integers(-4, 4).map(float),
    st.integers(-8, 8).map(lambda i: i / 2),
    st.sampled_from((0.2, -0.2, 0.1, 0.3 - 0.1, -(0.3 - 0.1))),
)
VALUE_BOUNDS = st.one_of(st.integers(0, 6).map(float), _halves)
# A key domain where r.key + (s.key - r.key) != s.key for ~30% of pairs, with band bounds that
# are exactly such IEEE differences: catches engines that test r.key + lo <= s.key <= r.key + hi.
IEEE_KEY_VALUES = (0.1, 0.2, 0.3, 0.7, 1 / 3, 2 / 3, 1.1, 2.2, 3.3, 1e16, 1e16 + 2.0)
IEEE_KEYS = st.sampled_from(IEEE_KEY_VALUES)
IEEE_BOUNDS = st.sampled_from(sorted({s - r for r in IEEE_KEY_VALUES for s in IEEE_KEY_VALUES}))
# event time offsets relative to the current largest time (negative: disorder / late)
TIME_OFFSETS = st.sampled_from((0, 0, 0, 1, 1, 2, 3, -1, -1, -2, -3, -4, -7))


@st.composite
def ranges(draw: st.DrawFn, bounds: st.SearchStrategy[float], unbounded_p: int = 6) -> Range:
    """A closed range from ``bounds``; each end is absent (unbounded) with prob. 1/unbounded_p."""
    a, b = draw(bounds), draw(bounds)
    lo, hi = min(a, b), max(a, b)
    if draw(st.integers(0, unbounded_p - 1)) == 0:
        lo = None  # type: ignore[assignment]
    if draw(st.integers(0, unbounded_p - 1)) == 0:
        hi = None  # type: ignore[assignment]
    return Range(lo, hi)


def optional_ranges(bounds: st.SearchStrategy[float]) -> st.SearchStrategy[Range]:
    """Mostly unbounded (the common case), sometimes a real selection range."""
    return st.one_of(st.just(Range()), ranges(bounds), ranges(bounds))


def subscriptions(
    kind: str, band_bounds: st.SearchStrategy[float] = BAND_BOUNDS,
    window_w: st.SearchStrategy[int] | None = None,
) -> st.SearchStrategy[Subscription]:
    """Small-domain subscriptions of one kind (``"band"``, ``"select"`` or ``"window"``);
    window lengths from ``window_w`` (default 0..5)."""
    if kind == "band":
        return st.builds(
            BandJoin,
            b=ranges(band_bounds),
            a=optional_ranges(VALUE_BOUNDS),
            c=optional_ranges(VALUE_BOUNDS),
        )
    if kind == "select":
        return st.builds(SelectJoin, a=optional_ranges(VALUE_BOUNDS), c=optional_ranges(VALUE_BOUNDS))
    if kind == "window":
        return st.builds(
            WindowJoin,
            a=optional_ranges(VALUE_BOUNDS),
            c=optional_ranges(VALUE_BOUNDS),
            w=st.integers(0, 5) if window_w is None else window_w,
        )
    raise ValueError(f"unknown kind {kind!r}")


@dataclass(frozen=True)
class EventSpec:
    """An event to resolve at run time: id by ``id_mode`` ("new", "stored" = duplicate, "old" =
    any id ever used on the side), time = current largest time + ``dt``."""

    side: str
    id_mode: str
    k: int
    key: float
    value: float
    dt: int


def event_specs(keys: st.SearchStrategy[float]) -> st.SearchStrategy[EventSpec]:
    return st.builds(
        EventSpec,
        side=st.sampled_from(("R", "S")),
        id_mode=st.sampled_from(("new",) * 6 + ("stored", "old")),
        k=st.integers(0, 50),
        key=keys,
        value=VALUES,
        dt=TIME_OFFSETS,
    )


@dataclass(frozen=True)
class Program:
    """Time settings, initial subscriptions and a list of abstract operations."""

    lateness: int
    retention: int | None
    ops: tuple[tuple[Any, ...], ...] = field(default=())


def operations(
    kinds: Sequence[str],
    keys: st.SearchStrategy[float],
    band_bounds: st.SearchStrategy[float] = BAND_BOUNDS,
    window_w: st.SearchStrategy[int] | None = None,
) -> st.SearchStrategy[tuple]:
    """One abstract operation; weights favour publishes so results build up."""
    subs = st.one_of(*[subscriptions(k, band_bounds, window_w) for k in kinds])
    ev = event_specs(keys)
    side = st.sampled_from(("R", "S"))
    idx = st.integers(0, 50)
    rare = st.one_of(
        st.tuples(st.just("del_unknown"), side, idx),
        st.tuples(st.just("unsub_unknown"), idx),
        st.tuples(st.just("bad"), st.integers(0, 3)),
    )
    weighted: list[tuple[int, st.SearchStrategy[tuple]]] = [
        (8, st.tuples(st.just("pub"), ev)),
        (2, st.tuples(st.just("sub"), subs, st.booleans())),
        (3, st.tuples(st.just("del"), side, idx)),
        (1, st.tuples(st.just("unsub"), idx)),
        (2, st.tuples(st.just("pub_many"), st.lists(ev, min_size=0, max_size=5).map(tuple))),
        (1, st.tuples(st.just("sub_many"), st.lists(subs, max_size=3).map(tuple), st.booleans())),
        (1, rare),
    ]
    # one_of does not weight by repeating a branch, so weight by sampling a branch index
    table = [s for w, s in weighted for _ in range(w)]
    return st.sampled_from(range(len(table))).flatmap(lambda i: table[i])


def default_keys(kinds: Sequence[str]) -> st.SearchStrategy[float]:
    """Band-only programs use the band key domain; anything with equi-joins small integers."""
    return BAND_KEYS if set(kinds) == {"band"} else EQUI_KEYS


@st.composite
def programs(
    draw: st.DrawFn,
    kinds: Sequence[str] = ("band",),
    max_ops: int = 40,
    min_ops: int = 12,
    time_settings: Sequence[tuple[int, int | None]] = TIME_SETTINGS,
    keys: st.SearchStrategy[float] | None = None,
    initial_subs: tuple[int, int] = (1, 3),
    band_bounds: st.SearchStrategy[float] = BAND_BOUNDS,
    window_w: st.SearchStrategy[int] | None = None,
) -> Program:
    """A random program: ``initial_subs`` (min, max) subscriptions, then ``min_ops``..``max_ops``
    operations (a floor, because hypothesis otherwise favours very short lists); window
    lengths from ``window_w`` (default 0..5)."""
    lateness, retention = draw(st.sampled_from(list(time_settings)))
    subs = st.one_of(*[subscriptions(k, band_bounds, window_w) for k in kinds])
    lo, hi = initial_subs
    initial = draw(
        st.lists(st.tuples(st.just("sub"), subs, st.booleans()), min_size=lo, max_size=hi)
    )
    ops = draw(
        st.lists(
            operations(kinds, keys if keys is not None else default_keys(kinds), band_bounds,
                       window_w),
            min_size=min_ops,
            max_size=max_ops,
        )
    )
    return Program(lateness, retention, tuple(initial) + tuple(ops))


class _Resolver:
    """Turns abstract operations into concrete calls, using the oracle's current state."""

    def __init__(self, ls: Lockstep) -> None:
        self.ls = ls
        self.counter = {"R": 0, "S": 0}
        self.used: dict[str, list[str]] = {"R": [], "S": []}
        self.removed_sids: list[int] = []

    def _new_id(self, side: str) -> str:
        self.counter[side] += 1
        return f"{side.lower()}{self.counter[side]}"

    def event(self, spec: EventSpec, base: int) -> Event:
        stored = sorted(self.ls.oracle.stored(spec.side))
        if spec.id_mode == "stored" and stored:
            id = stored[spec.k % len(stored)]
        elif spec.id_mode == "old" and self.used[spec.side]:
            id = self.used[spec.side][spec.k % len(self.used[spec.side])]
        else:
            id = self._new_id(spec.side)
        if id not in self.used[spec.side]:
            self.used[spec.side].append(id)
        return Event(spec.side, id, spec.key, spec.value, base + spec.dt)  # type: ignore[arg-type]

    def max_time(self) -> int:
        w = self.ls.oracle.watermark
        return 0 if w is None else w + self.ls.lateness

    def apply(self, op: tuple[Any, ...]) -> None:
        ls, oracle = self.ls, self.ls.oracle
        tag = op[0]
        try:
            if tag == "sub":
                ls.subscribe(op[1], op[2])
            elif tag == "sub_many":
                ls.subscribe_many(op[1], op[2])
            elif tag == "unsub":
                live = sorted(oracle.subscriptions())
                sid = live[op[1] % len(live)] if live else 10**6 + op[1]
                ls.unsubscribe(sid)
                self.removed_sids.append(sid)
            elif tag == "unsub_unknown":
                pool = self.removed_sids + [oracle.next_subscription_id + op[1], -1 - op[1]]
                ls.unsubscribe(pool[op[1] % len(pool)])
            elif tag == "pub":
                ls.publish(self.event(op[1], self.max_time()))
            elif tag == "pub_many":
                base, events = self.max_time(), []
                for spec in op[1]:
                    e = self.event(spec, base)
                    events.append(e)
                    base = max(base, e.time)
                ls.publish_many(events)
            elif tag == "del":
                side = op[1]
                stored = sorted(oracle.stored(side))
                ls.delete(side, stored[op[2] % len(stored)] if stored else f"missing{op[2]}")
            elif tag == "del_unknown":
                side = op[1]
                gone = [i for i in self.used[side] if i not in oracle.stored(side)]
                pool = gone + [f"never{op[2]}"]
                ls.delete(side, pool[op[2] % len(pool)])
            elif tag == "bad":
                variant = op[1]
                if variant == 0:
                    ls.delete("X", "r1")
                elif variant == 1:
                    ls.delete("R", "")
                elif variant == 2:
                    ls.publish(("R", "r1", 1.0, 1.0, 0))
                else:
                    ls.subscribe(Range(0, 1))  # type: ignore[arg-type]
            else:
                raise AssertionError(f"unknown abstract op {op!r}")
        except (HotjoinError, ValueError):
            pass  # both sides agreed on the error (Lockstep checked it)


def run_program(
    factory: EngineFactory, program: Program, compare_results: str = "snapshot"
) -> Lockstep:
    """Run ``program`` on ``factory(L, R)`` and an oracle in lockstep; returns the harness."""
    engine = factory(program.lateness, program.retention)
    ls = Lockstep(engine, program.lateness, program.retention, compare_results)
    resolver = _Resolver(ls)
    for op in program.ops:
        resolver.apply(op)
    ls.check_state("end of program")
    if compare_results == "snapshot":  # at the end, every live subscription's full result
        ls.compare_results = "all"
        ls.check_state("end of program (all results)")
    return ls


# ---- helpers shared by the per-kind property tests ----------------------------------------------


def strategy_factory_fixture(configs: Sequence[Any]) -> Any:
    """A module-scoped ``factory`` fixture over ``configs`` (``(strategy, options)`` params)."""

    @pytest.fixture(scope="module", params=configs)
    def factory(request: pytest.FixtureRequest) -> EngineFactory:
        strategy, options = request.param
        return engine_factory(strategy, options)

    return factory


def ev(side: str, id: str, key: float, value: float = 0.0, time: int = 0) -> Event:
    """An event, spelled short for hand-written cases."""
    return Event(side, id, key, value, time)  # type: ignore[arg-type]


def D(sid: int, sign: int, r: str, s: str) -> Delivery:
    """A delivery, spelled short for hand-written cases."""
    return Delivery(sid, sign, r, s)


def lockstep(factory: EngineFactory, lateness: int = 0, retention: int | None = None) -> Lockstep:
    """Engine and oracle in lockstep, comparing every subscription's result after each step."""
    return Lockstep(factory(lateness, retention), lateness, retention, compare_results="all")
