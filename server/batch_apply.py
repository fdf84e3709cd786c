"""The server's one adapter to the engine's batch API (SPEC §7 ``publish_batch``).

``apply_publish_batch`` hands a batch of columns to ``engine.publish_batch`` (the compiled batch
path of ``hotjoin.matcher.batch``). An engine-like object without one (a facade that only has the
per-event calls) gets the events one at a time through ``publish_affected`` /
``publish_columnar`` / ``publish_many(match=False)``, producing the identical ``BatchResult``: a
status and a sequence number per event and the output as columns with an event-index column.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hotjoin.matcher.batch import BatchOutput, BatchResult, EventStatus
from hotjoin.matcher.errors import BatchError, DuplicateEventError, LateEventError
from hotjoin.matcher.model import Event

OUTPUTS = ("pairs", "affected", "none")
_SIDE_NAMES = np.array(["R", "S"], dtype=object)


def empty_output(pairs: bool) -> BatchOutput:
    """An output without rows (``r_id``/``s_id`` set only for PAIRS output)."""
    obj = np.empty(0, dtype=object) if pairs else None
    return BatchOutput(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int8),
                       np.empty(0, np.int64), obj, obj)


def apply_publish_batch(
    engine: Any,
    sides: np.ndarray,
    ids: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    times: np.ndarray,
    payloads: list[bytes] | None,
    output: str,
) -> BatchResult:
    """Apply a batch in order exactly as the one-at-a-time calls would; never raises for a
    rejected event. ``sides``: int8 with 0 = R, 1 = S. ``output``: pairs, affected or none."""
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}")
    n = len(ids)
    for name, col in (("sides", sides), ("keys", keys), ("values", values), ("times", times)):
        if len(col) != n:
            raise ValueError(f"column {name} has {len(col)} entries, ids has {n}")
    if payloads is not None and len(payloads) != n:
        raise ValueError(f"column payloads has {len(payloads)} entries, ids has {n}")
    if hasattr(engine, "publish_batch"):
        return engine.publish_batch(sides, ids, keys, values, times, payloads, output=output)
    return _publish_one_at_a_time(engine, sides, ids, keys, values, times, payloads, output)


def _publish_one_at_a_time(engine: Any, sides: np.ndarray, ids: np.ndarray, keys: np.ndarray,
                           values: np.ndarray, times: np.ndarray, payloads: list[bytes] | None,
                           output: str) -> BatchResult:
    """The fallback: the per-event engine calls in a loop, collected into a ``BatchResult``."""
    n = len(ids)
    status = np.zeros(n, dtype=np.int8)
    seq = np.zeros(n, dtype=np.int64)
    reasons: dict[int, str] = {}
    ev_rows: list[np.ndarray] = []
    sid_rows: list[np.ndarray] = []
    cnt_rows: list[np.ndarray] = []
    r_rows: list[np.ndarray] = []
    s_rows: list[np.ndarray] = []
    side_names = _SIDE_NAMES[np.clip(sides, 0, 1)].tolist()
    ids_l = list(ids)
    keys_l, values_l, times_l = keys.tolist(), values.tolist(), times.tolist()
    sides_l = sides.tolist()
    for i in range(n):
        try:
            if sides_l[i] not in (0, 1):
                raise ValueError("side must be R or S")
            ev = Event(side_names[i], ids_l[i], keys_l[i], values_l[i], times_l[i],
                       payloads[i] if payloads is not None else b"")
            if output == "pairs":
                out = engine.publish_columnar(ev)
            elif output == "affected":
                out = engine.publish_affected(ev)
            else:
                try:
                    engine.publish_many([ev], match=False)
                except BatchError as x:
                    raise x.cause from None
                out = None
        except DuplicateEventError as x:
            status[i], reasons[i] = EventStatus.DUPLICATE, str(x)
            continue
        except LateEventError as x:
            status[i], reasons[i] = EventStatus.LATE, str(x)
            continue
        except ValueError as x:
            status[i], reasons[i] = EventStatus.INVALID, str(x)
            continue
        seq[i] = engine.seq
        if out is None or len(out) == 0:
            continue
        m = len(out)
        ev_rows.append(np.full(m, i, dtype=np.int64))
        sid_rows.append(np.asarray(out.subscription_ids, dtype=np.int64))
        if output == "pairs":
            cnt_rows.append(np.ones(m, dtype=np.int64))
            r_rows.append(out.r_ids)
            s_rows.append(out.s_ids)
        else:
            cnt_rows.append(np.asarray(out.counts, dtype=np.int64))
    if not ev_rows:
        return BatchResult(status, seq, reasons, empty_output(output == "pairs"))
    count = np.concatenate(cnt_rows)
    sign = np.where(count < 0, -1, 1).astype(np.int8)
    pairs = output == "pairs"
    return BatchResult(status, seq, reasons, BatchOutput(
        np.concatenate(ev_rows), np.concatenate(sid_rows), sign, count,
        np.concatenate(r_rows) if pairs else None, np.concatenate(s_rows) if pairs else None))


__all__ = ["BatchOutput", "BatchResult", "EventStatus", "apply_publish_batch", "empty_output"]
