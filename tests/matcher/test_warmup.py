"""``matcher.warmup.warm_up_kernels`` loads every kernel a workload calls: after it, a random
workload of every kind (batches, one-at-a-time calls, deletes, snapshots, retention, the router)
compiles or loads nothing new (no numba dispatcher gains an overload)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

from numba.core.dispatcher import Dispatcher

from hotjoin.matcher.engine import Engine
from hotjoin.matcher.model import BandJoin, Event, Range, SelectJoin, WindowJoin


def _dispatchers() -> dict[str, Dispatcher]:
    out: dict[str, Dispatcher] = {}
    for name, mod in list(sys.modules.items()):
        if name.startswith("hotjoin.matcher") and mod is not None:
            for attr, val in vars(mod).items():
                if isinstance(val, Dispatcher):
                    out[f"{name}.{attr}"] = val
    return out


def _workload(seed: int) -> None:
    rng = random.Random(seed)
    e = Engine(lateness=3, retention=40)
    subs = []
    for i in range(300):
        lo = float(rng.randint(0, 8))
        a, c = Range(lo, lo + rng.randint(1, 4)), Range(None, float(rng.randint(2, 10)))
        subs.append((SelectJoin(a, c), BandJoin(Range(-1.0, float(i % 3)), a, c),
                     WindowJoin(a, c, w=rng.randint(0, 6)))[i % 3])
    e.subscribe_many(subs)
    t = 0
    stored: list[tuple[str, str]] = []
    for b in range(30):
        n = rng.randint(1, 200)
        sides = [rng.choice("RS") for _ in range(n)]
        ids = [f"e{b}.{i}" for i in range(n)]
        times = [t + rng.randint(-2, 5) for _ in range(n)]
        t += 5
        res = e.publish_batch(sides, ids, [float(rng.randint(0, 6)) for _ in range(n)],
                              [rng.uniform(0, 10) for _ in range(n)], times,
                              output=rng.choice(("pairs", "affected", "none")))
        stored += [(s, i) for s, i, st in zip(sides, ids, res.status.tolist(), strict=True)
                   if st == 0]
        ev = Event(rng.choice("RS"), f"one{b}", float(rng.randint(0, 6)), rng.uniform(0, 10), t)
        rng.choice((e.publish, e.publish_affected, e.publish_columnar))(ev)
        if stored:
            side, eid = stored.pop(rng.randrange(len(stored)))
            if e.get_event(side, eid) is not None:
                e.delete_batch([side], [eid], output=rng.choice(("pairs", "affected")))
        if b % 10 == 9:
            sid = e.subscribe(subs[b], snapshot=True)
            e.result_columnar(sid)
            e.unsubscribe(sid)


def _table_one(seed: int) -> None:
    """``bench serve``'s select workload at a server's size (50,000 subscriptions and stored
    tuples, about 13 affected per event): a histogram large enough for Lloyd's refinement, and
    SJ-Hotspot with a scattered part that SJ-SelectFirst serves."""
    import numpy as np

    from hotjoin.clients.loadgen import Workload
    from hotjoin.matcher.workload import r_arrays, s_arrays, select_ranges_arrays

    cfg = Workload(kind="select", subscriptions=50_000, stored=50_000, affected=13,
                   seed=seed).table()
    a_lo, a_hi, c_lo, c_hi = (x.tolist() for x in select_ranges_arrays(cfg))
    e = Engine()
    e.subscribe_many([SelectJoin(Range(a, b), Range(c, d))
                      for a, b, c, d in zip(a_lo, a_hi, c_lo, c_hi, strict=True)])
    k, v, _ = s_arrays(cfg, 50_000)
    e.publish_batch(np.ones(k.shape[0], dtype=np.int8), [f"s{i}" for i in range(k.shape[0])], k,
                    v, np.zeros(k.shape[0], dtype=np.int64), output="none")
    k, v, _ = r_arrays(cfg, 200_000, batch=1000)
    for i in range(0, 200_000, 1000):
        e.publish_batch(np.zeros(1000, dtype=np.int8), [f"r{i + j}" for j in range(1000)],
                        k[i:i + 1000], v[i:i + 1000], np.ones(1000, dtype=np.int64),
                        output="affected")


def _new_overloads(warm: bool, workload: str = "_workload") -> dict[str, int]:
    """In a fresh interpreter: warm up (or not), then run ``workload`` (a function of this
    module); the kernels that gained overloads during the workload."""
    code = (
        f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import test_warmup as T\n"
        "from hotjoin.matcher import engine, warmup\n"
        f"if {warm!r}: warmup.warm_up_kernels()\n"
        "before = {k: len(d.overloads) for k, d in T._dispatchers().items()}\n"
        f"T.{workload}(1)\n"
        "after = {k: len(d.overloads) - before.get(k, 0) for k, d in T._dispatchers().items()}\n"
        "print(json.dumps({k: v for k, v in after.items() if v}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_after_the_warm_up_a_workload_loads_no_kernel() -> None:
    assert _new_overloads(warm=True) == {}
    cold = _new_overloads(warm=False)  # the control: without it the workload loads many
    assert len(cold) > 10, cold


def test_after_the_warm_up_a_server_sized_select_workload_loads_no_kernel() -> None:
    """Paths that only large subscription sets reach: the histograms' Lloyd refinement and
    SJ-Hotspot's scattered part by SJ-SelectFirst (a compile there cost a server tenths of a
    second in the middle of its stream)."""
    assert _new_overloads(warm=True, workload="_table_one") == {}


def test_a_process_that_exits_during_the_background_warm_up_waits_for_it() -> None:
    """The interpreter does not tear down under a compile: the warm-up's exit hook stops it
    after the engine it is driving and joins its thread, so an exit hook registered before it
    (they run last in, first out) finds no warm-up thread alive, and the process exits
    cleanly."""
    import subprocess
    import sys

    code = (
        "import atexit, threading\n"
        "from hotjoin.matcher import warmup\n"
        "atexit.register(lambda: print(sorted(t.name for t in threading.enumerate())))\n"
        "warmup.warm_up_in_background()\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "['MainThread']"


def test_the_background_warm_up_runs_the_callers_warm_up_after_the_engines() -> None:
    from hotjoin.matcher import warmup

    seen: list[float] = []  # what a second warm-up takes: nothing once the first is done
    th = warmup.warm_up_in_background(then=lambda: seen.append(warmup.warm_up_kernels()))
    th.join(warmup.EXIT_WAIT)
    assert not th.is_alive() and seen == [0.0]  # once, after the engine's kernels
