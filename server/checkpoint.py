"""Checkpoints: the topic's in-memory state as one file, so a restart replays only the log's tail.

Replaying a log rebuilds every index operation by operation; for 500,000 select joins that alone
costs about a minute (the SJ-Hotspot index is built subscription by subscription). A checkpoint
is the engine object itself — numpy columns, dicts, the index structures — pickled, together
with the server's subscription metadata, at a known sequence number ``seq`` and log byte offset
``offset`` (the end of the frame holding ``seq``). Restart unpickles it (seconds) and replays the
frames after ``offset``.

**Taking one.** Under the topic lock, every large dict or list of immutable items inside the
state — the engine's subscriptions (frozen dataclasses), the server's metadata and owners, the
tables' and indexes' id maps — is found (``detach``) and copied (a dict/list copy), and the rest
is pickled with those containers left as named references (``external``); a background thread
pickles the copies (``split_payload``). For 100,000 band joins + 100,000 tuples that holds the
lock 0.3–0.5× as long as pickling everything (``python -m hotjoin.ops.bench.checkpoint_stall``,
``docs/benchmarks-checkpoint.md``) — still about half a second, because the mutable index
structures are pickled under it; so ``Topic`` still prefers idle moments, or takes one when the
log's tail has grown as long as everything the last one covered. The background thread then makes the log durable up to
``offset`` (so a checkpoint never holds an operation the log could lose), writes
``checkpoint.tmp``, fsyncs it, renames it to ``checkpoint`` and fsyncs the directory. A ``kill -9``
leaves at most a stale ``checkpoint.tmp``, deleted on open. (Pickling in a ``fork()``\\ ed child
instead, without stopping publishers, crashed intermittently inside the child of the threaded gRPC
server; not pursued.)

**Format.** ``MAGIC`` + ``[u64 seq][u64 offset][u64 length][u32 crc32]`` + pickle (protocol 5):
either the state itself (older files) or ``{SPLIT: 1, "main": …, "side": …}``, where ``main``'s
persistent references name entries of the pickled ``side`` dict (``loads`` reads both).
Local functions inside the engine (closures) are pickled by value (code object + cells): the
file is only ever read by the same server build, and any failure to load falls back to a full
replay of the log. Compaction rewrites the log (offsets change), so it deletes the checkpoint
before its rename; the two never run at the same time.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import marshal
import os
import pickle
import struct
import types
import zlib
from pathlib import Path
from typing import Any

import numpy as np

MAGIC = b"HJCKPT\x00\x01"
SPLIT = "__hotjoin_split_checkpoint__"
_HEAD = struct.Struct("<QQQI")


def _make_fn(code: bytes, module: str, name: str, qualname: str, defaults: Any, kwdefaults: Any,
             cells: tuple[Any, ...] | None) -> types.FunctionType:
    fn = types.FunctionType(marshal.loads(code), importlib.import_module(module).__dict__, name, defaults,
                            None if cells is None else tuple(types.CellType(c) for c in cells))
    fn.__kwdefaults__ = kwdefaults
    fn.__qualname__ = qualname
    return fn


class _Pickler(pickle.Pickler):
    """Pickles local functions and lambdas by value, and the objects named in ``external`` (by
    ``id``) as references to be supplied at load time; everything else as usual."""

    external: dict[int, str] = {}

    def persistent_id(self, obj: Any) -> str | None:
        return self.external.get(id(obj)) if self.external else None

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.FunctionType) and ("<locals>" in obj.__qualname__ or obj.__name__ == "<lambda>"):
            cells = None if obj.__closure__ is None else tuple(c.cell_contents for c in obj.__closure__)
            return _make_fn, (marshal.dumps(obj.__code__), obj.__module__, obj.__name__, obj.__qualname__,
                              obj.__defaults__, obj.__kwdefaults__, cells)
        return NotImplemented


def dumps(state: Any, buffer_callback: Any = None, external: dict[int, str] | None = None) -> bytes:
    """Pickle ``state`` (protocol 5); with ``buffer_callback`` numpy buffers go to it out of band;
    objects whose ``id`` is a key of ``external`` are left out as named references."""
    buf = io.BytesIO()
    p = _Pickler(buf, protocol=5, buffer_callback=buffer_callback)
    p.external = external or {}
    p.dump(state)
    return buf.getvalue()


_SCALARS = frozenset({int, float, str, bytes, bool, type(None), np.int64, np.float64, np.int32})


def _immutable(v: Any) -> bool:
    t = type(v)
    if t in _SCALARS:
        return True
    if t is tuple:
        return all(type(x) in _SCALARS for x in v)
    params = getattr(t, "__dataclass_params__", None)
    return params is not None and params.frozen and t.__module__ in _FROZEN_MODULES


# modules whose frozen dataclasses hold only immutable fields (subscriptions, ranges, SubMeta)
_FROZEN_MODULES = frozenset({"hotjoin.matcher.model", "hotjoin.server.convert"})


def detach(root: Any, min_len: int = 1024, max_objects: int = 10_000) -> tuple[dict[int, str], dict[str, Any]]:
    """Find the large dicts and lists inside ``root`` whose keys and items are immutable (ids,
    positions, frozen subscriptions); return ``external`` (their ``id`` → a name) and ``side``
    (name → a shallow copy). Copying them is a memcpy-like dict/list copy, so a caller holding a
    lock can copy them quickly and pickle the copies later, outside it (``split_payload``).

    Walks object attributes, small dicts, lists and tuples (not numpy arrays, not the large
    containers' items), visiting at most ``max_objects`` objects."""
    external: dict[int, str] = {}
    side: dict[str, Any] = {}
    seen: set[int] = set()
    stack = [root]
    while stack and len(seen) < max_objects:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, np.ndarray) or type(obj) in _SCALARS:
            continue
        seen.add(id(obj))
        if isinstance(obj, (dict, list)) and len(obj) >= min_len and type(obj) in (dict, list):
            items = obj.items() if isinstance(obj, dict) else ((None, v) for v in obj)
            if all(_immutable(k) and _immutable(v) for k, v in items):
                name = f"d{len(side)}"
                external[id(obj)] = name
                side[name] = obj.copy()
                continue
            if len(obj) >= min_len:
                continue  # a large container of mutable objects: left to the pickle
        if isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple)):
            stack.extend(obj)
        else:
            d = getattr(obj, "__dict__", None)
            if d is not None:
                stack.extend(d.values())
    return external, side


def split_payload(main: bytes, side: dict[str, Any]) -> bytes:
    """One checkpoint payload of ``main`` (pickled with ``external`` references) and the ``side``
    objects those references name, pickled here — the part that may run outside the topic lock."""
    return dumps({SPLIT: 1, "main": main, "side": dumps(side)})


def loads(payload: Any) -> Any:
    """The state of a payload written by ``dumps`` or ``split_payload``."""
    outer = pickle.loads(payload)
    if not (isinstance(outer, dict) and outer.get(SPLIT) == 1):
        return outer
    side = pickle.loads(outer["side"])
    u = pickle.Unpickler(io.BytesIO(outer["main"]))
    u.persistent_load = side.__getitem__  # type: ignore[method-assign]
    return u.load()


def write(directory: Path, payload: bytes, seq: int, offset: int, log_path: Path) -> None:
    """Write ``directory/checkpoint`` atomically (the log is synced up to ``offset`` first)."""
    fd = os.open(log_path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    tmp = directory / "checkpoint.tmp"
    with open(tmp, "wb") as f:
        f.write(MAGIC + _HEAD.pack(seq, offset, len(payload), zlib.crc32(payload)))
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / "checkpoint")
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def read(directory: Path) -> tuple[int, int, Any] | None:
    """``(seq, offset, state)`` of the checkpoint, or None when there is none or it does not verify."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(directory / "checkpoint.tmp")
    try:
        with open(directory / "checkpoint", "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    n = len(MAGIC) + _HEAD.size
    if len(data) < n or not data.startswith(MAGIC):
        return None
    seq, offset, length, crc = _HEAD.unpack_from(data, len(MAGIC))
    payload = memoryview(data)[n : n + length]
    if len(payload) != length or zlib.crc32(payload) != crc:
        return None
    return seq, offset, loads(payload)


def remove(directory: Path) -> None:
    for name in ("checkpoint", "checkpoint.tmp"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(directory / name)
