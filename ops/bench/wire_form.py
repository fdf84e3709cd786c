"""Decode cost of the two candidate columnar publish forms (``python -m hotjoin.ops.bench.wire_form``).

One 10,000-event batch (side, id, key, value, time) as (a) ``PublishRequest.columns`` with packed
repeated fields, (b) one Arrow IPC record batch in a bytes field; each is parsed and decoded into
numpy columns (ids as an object array of ``str``, what the engine takes) 50 times, twice,
alternating. Prints ms per batch, ns per event and bytes on the wire (docs/benchmarks/serve.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server.convert import decode_columns


def main(n: int = 10_000, reps: int = 50) -> dict[str, Any]:

    rng = np.random.default_rng(1)
    sides = rng.integers(1, 3, n).astype(np.uint8)
    ids = [f"e{i}" for i in range(n)]
    keys, values, times = rng.normal(size=n), rng.uniform(0, 100, n), np.arange(n, dtype=np.int64)
    packed = pb.PublishRequest(topic="t", columns=pb.EventColumns(
        sides=sides.tobytes(), ids=ids, keys=keys.tolist(), values=values.tolist(), times=times.tolist()
    )).SerializeToString()
    rb = pa.record_batch([pa.array(sides), pa.array(ids), pa.array(keys), pa.array(values), pa.array(times)],
                         names=["side", "id", "key", "value", "time"])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rb.schema) as w:
        w.write_batch(rb)
    arrow = pb.PublishRequest(topic="t", columns=pb.EventColumns(sides=sink.getvalue().to_pybytes())
                              ).SerializeToString()  # the IPC bytes stand in a bytes field

    def dec_packed() -> Any:
        return decode_columns(pb.PublishRequest.FromString(packed).columns)

    def dec_arrow() -> Any:
        b = pa.ipc.open_stream(pb.PublishRequest.FromString(arrow).columns.sides).read_next_batch()
        return [b.column(i).to_numpy(zero_copy_only=False) for i in range(5)]

    out: dict[str, Any] = {}
    forms: list[tuple[str, Callable[[], Any], int]] = [("packed", dec_packed, len(packed)),
                                                       ("arrow_ipc", dec_arrow, len(arrow))]
    for _ in range(2):
        for name, f, size in forms:
            f()
            t0 = time.perf_counter()
            for _ in range(reps):
                f()
            dt = (time.perf_counter() - t0) / reps
            out[name] = {"ms_per_batch": round(dt * 1e3, 2), "ns_per_event": round(dt / n * 1e9),
                         "wire_bytes": size}
    for name, r in out.items():
        print(f"{name}: {r['ms_per_batch']} ms per {n:,}-event batch ({r['ns_per_event']} ns/event), "
              f"{r['wire_bytes']:,} bytes")
    return out


if __name__ == "__main__":
    main()
