"""``hotjoin demo``: a one-command look at the engine on a generated Table I band-join workload.

Registers band-join subscriptions, stores S tuples, then publishes R tuples one by one and
prints what each matched: the subscriptions affected, a few result pairs, and a summary with
the stabbing number and hotspots the engine found.
"""

from __future__ import annotations

import argparse
import time


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the engine on a generated band-join workload")
    p.add_argument("--subscriptions", type=int, default=20_000)
    p.add_argument("--s-size", type=int, default=20_000)
    p.add_argument("--events", type=int, default=2_000)
    p.add_argument("--show", type=int, default=8, help="print the matches of this many events")
    p.add_argument("--strategy", default="auto", help="band strategy (BJ-SSI, BJ-Hotspot, ...)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from matcher import BandJoin, Engine, Range
    from matcher.bench.band import clustered_bands
    from matcher.workload import TableIConfig, r_events, s_events

    t0 = time.perf_counter()
    cfg = TableIConfig(n_subscriptions=args.subscriptions, s_size=args.s_size, integer=False)
    strategy = args.strategy if args.strategy == "auto" else {"band": args.strategy}
    engine = Engine(strategy=strategy)
    lo, hi = clustered_bands(args.subscriptions, 40, 0.02, seed=1)
    engine.subscribe_many([BandJoin(b=Range(a, b)) for a, b in zip(lo.tolist(), hi.tolist(),
                                                                   strict=True)])
    print(f"registered {args.subscriptions} band-join subscriptions "
          f"(s.key - r.key in a narrow band around one of 40 offsets)")
    engine.publish_many(s_events(cfg, args.s_size), match=False)
    print(f"stored {args.s_size} S tuples (S.B ~ Normal(5000, 1000))")
    events = r_events(cfg, args.events, start_time=args.s_size)
    pairs = affected = 0
    t1 = time.perf_counter()
    for i, ev in enumerate(events):
        m = engine.publish_columnar(ev)
        pairs += len(m)
        subs = set(m.subscription_ids.tolist())
        affected += len(subs)
        if i < args.show:
            sample = ", ".join(f"sub {q}: ({r}, {s})" for q, r, s in
                               zip(m.subscription_ids[:3].tolist(), m.r_ids[:3], m.s_ids[:3],
                                   strict=True))
            print(f"publish R {ev.id} key={ev.key:.3f}: {len(m)} pairs for {len(subs)} "
                  f"subscriptions{'  e.g. ' + sample if sample else ''}")
    dt = time.perf_counter() - t1
    st = engine.stats()
    print(f"published {len(events)} R tuples in {dt:.2f}s ({len(events) / dt:.0f}/s): "
          f"{pairs} result pairs, {affected / len(events):.1f} subscriptions affected per tuple")
    print(f"engine: strategy {st['strategies']['band']}, hotspots {st['band'].get('hotspots')}, "
          f"scattered {st['band'].get('scattered')}, stored R={st['tuples']['R']} "
          f"S={st['tuples']['S']}; total {time.perf_counter() - t0:.1f}s")
    return 0
