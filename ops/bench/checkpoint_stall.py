"""How long a checkpoint holds the topic lock, and what of it copy-on-write could save (issue 16).

``Topic._start_checkpoint`` pickles the engine under the topic lock (``server/checkpoint.py``);
publishers wait that long. This measures, on one engine with ``--subs`` band joins and
``--tuples`` stored tuples, in one run:

- ``pickle_s``: the full pickle (today's stall);
- ``objects_s``: the same pickle with numpy buffers kept out of band (protocol 5), i.e. only the
  Python objects (dicts, dataclasses, ids);
- ``buffers_copy_s``: copying those numpy buffers (the reference: what a copy-on-write snapshot
  of the arrays would hold the lock for);
- ``split_lock_s``: what ``Topic`` holds the lock for now — a dict copy of the subscriptions and
  the pickle of the rest with them as references — and ``split_writer_s``, the part the writer
  thread does outside the lock (``server/checkpoint.py``); ``split_roundtrip_ok`` checks that the
  split payload loads back to an engine with the same subscriptions and tuples;
- ``detach_lock_s`` / ``detach_writer_s``: the same with every large dict or list of immutable
  items detached (``checkpoint.detach``: also the id maps of tables and indexes) — what ``Topic``
  does now.

Run: ``python -m hotjoin.ops.bench.checkpoint_stall --subs 100000 --tuples 100000``; prints JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from hotjoin.matcher import BandJoin, Engine, Event, Range
from hotjoin.server import checkpoint


def measure(n_subs: int, n_tuples: int, seed: int = 1) -> dict[str, Any]:
    """Build the engine, then time the three forms (seconds) on the same state."""
    rng = np.random.default_rng(seed)
    e = Engine()
    lo = rng.uniform(-10, 10, n_subs)
    e.subscribe_many([BandJoin(b=Range(float(x), float(x) + float(rng.uniform(0, 1)))) for x in lo])
    e.publish_many([Event("RS"[i % 2], f"e{i}", float(rng.uniform(0, 100)), float(rng.uniform(0, 100)), i)
                    for i in range(n_tuples)], match=False)
    state = {"engine": e}
    t0 = time.perf_counter()
    full = checkpoint.dumps(state)
    t1 = time.perf_counter()
    bufs: list[Any] = []
    stream = checkpoint.dumps(state, buffer_callback=bufs.append)
    t2 = time.perf_counter()
    copies = [bytes(b.raw()) for b in bufs]
    t3 = time.perf_counter()
    t4 = time.perf_counter()
    side = {"engine.subs": dict(e.subs)}
    main = checkpoint.dumps(state, external={id(e.subs): "engine.subs"})
    t5 = time.perf_counter()
    payload = checkpoint.split_payload(main, side)
    t6 = time.perf_counter()
    back = checkpoint.loads(payload)["engine"]
    ok = back.subs == e.subs and back.seq == e.seq and back.stats() == e.stats()
    t7 = time.perf_counter()
    ext2, side2 = checkpoint.detach(state)
    main2 = checkpoint.dumps(state, external=ext2)
    t8 = time.perf_counter()
    payload2 = checkpoint.split_payload(main2, side2)
    t9 = time.perf_counter()
    back2 = checkpoint.loads(payload2)["engine"]
    ok2 = back2.subs == e.subs and back2.seq == e.seq and back2.stats() == e.stats()
    return {"detach_lock_s": t8 - t7, "detach_writer_s": t9 - t8, "detached": len(side2),
            "detach_roundtrip_ok": ok2, "split_lock_s": t5 - t4, "split_writer_s": t6 - t5, "split_roundtrip_ok": ok,
            "subs": n_subs, "tuples": n_tuples, "pickle_s": t1 - t0, "pickle_mib": len(full) >> 20,
            "objects_s": t2 - t1, "objects_mib": len(stream) >> 20,
            "buffers_copy_s": t3 - t2, "buffers_mib": sum(map(len, copies)) >> 20, "buffers": len(bufs)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--subs", type=int, default=100_000)
    p.add_argument("--tuples", type=int, default=100_000)
    a = p.parse_args(argv)
    print(json.dumps(measure(a.subs, a.tuples)))


if __name__ == "__main__":
    main()
