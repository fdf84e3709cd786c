"""Durability of one topic: its event log and match log, group commit, checkpoints and compaction.

**Group commit.** Under the topic lock, ``Topic`` applies a request to the engine, then hands its
messages here (``log_matches``: written to the match log first) and its operations (``append``:
one frame of the event log, no sync), with the action that hands the messages to the delivery
hub. Then, *outside* the lock, ``commit`` waits until the frame is durable — one ``fdatasync``
covers every frame written since the last one, so concurrent publish streams share syncs while
others keep applying — and ``release`` runs the queued actions whose frames (and match records)
are durable, strictly in sequence order. An acknowledgement is therefore sent only after its
frame is durable, and listeners never see a message whose operation could be lost by a crash. A
failed write or sync leaves the engine ahead of the log, so the topic is then ``closed``
(``Unavailable``) rather than diverge; a restart rebuilds it from the log (``restore``,
``server/recovery.py``).

**Checkpoints** (``server/checkpoint.py``) bound the replay of topics whose log is never
compacted: the state as columns at a seq and log offset, so a restart replays only the log's
tail. **Compaction** (``server/snapshot.py``) rewrites the log of topics with retention as
snapshot + appends once it holds at least ``compact_min_bytes`` and ``compact_ratio`` times as
many operations as there are live records (subscriptions + stored tuples), and at clean
shutdown. Both copy the state under the topic lock and encode and write it outside it
(``server/PERSISTENCE.md``).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server import checkpoint, metrics, snapshot
from hotjoin.server.book import SubscriptionBook
from hotjoin.server.delivery import Chunk
from hotjoin.server.errors import Unavailable
from hotjoin.server.heap import freeze_long_lived, release_free_memory
from hotjoin.server.log import OpLog, _fsync_dir, frame, write_all
from hotjoin.server.match_log import MatchLog
from hotjoin.server.match_log import encode as encode_match_columns
from hotjoin.server.recovery import LogReplay
from hotjoin.server.settings import TopicSettings

log = logging.getLogger("hotjoin.topic")  # the topic's logger: operators filter on its name

CHECKPOINT_IDLE_SECONDS = 5.0
# While busy, a checkpoint is taken once the log's tail holds BUSY_FACTOR × min_ops operations
# and half as many as the live state (subscriptions + stored tuples): a restart then replays at
# most about half the state's worth of operations after loading the checkpoint, and the
# background encode (O(state)) runs at most once per half-state of operations. (Not "as many as
# the state": when every operation stores a tuple, the tail never catches up with the state.)
# The capture under the lock is a few ms (columns).
CHECKPOINT_BUSY_FACTOR = 2


class Durability:
    """The logs of one topic and what keeps them bounded, sharing the topic lock with ``Topic``.

    Without a data directory there is no log: ``append`` only queues, ``commit`` only releases.
    ``closed``: the topic accepts no more operations (stopped, or its log and engine may differ).
    """

    def __init__(self, topic: str, directory: Path | None, settings: TopicSettings, lateness: int,
                 retention: int | None, lock: threading.Lock, book: SubscriptionBook) -> None:
        self.topic = topic
        self.directory = directory
        self._settings = settings
        self._lateness = lateness
        self._retention = retention
        self._lock = lock  # the topic lock: it orders the engine, the book and the log
        self._book = book
        self._engine: Any = None  # set by ``restore``
        self.closed = False
        self.log: OpLog | None = None
        self.match_log: MatchLog | None = None
        # actions (hub updates) waiting for their frame to be durable, in seq order:
        # (event log token, match log token, action)
        self._pending: collections.deque[tuple[int, int, Callable[[], None]]] = collections.deque()
        self._release_lock = threading.Lock()
        self.log_ops = 0  # operations (snapshot records included) in the current log file
        self.compact_min_bytes = settings.compact_min_bytes
        self.compact_ratio = settings.compact_ratio
        # Automatic compaction only where the log would otherwise grow without bound (retention
        # set) unless asked for every topic; a topic without retention keeps its full history.
        self._compacts = retention is not None or settings.compact_all
        self.compactions = 0
        self._compact_lock = threading.Lock()
        self._compacting = False
        # Checkpoints bound the replay of topics whose log is never compacted; a compacted log
        # starts with its own snapshot instead.
        self.checkpoint_min_ops = settings.checkpoint_min_ops
        self._checkpoints = directory is not None and not self._compacts and self.checkpoint_min_ops > 0
        self._ckpt_ops = 0  # log operations since the last checkpoint was started
        self.checkpoint_idle_seconds = CHECKPOINT_IDLE_SECONDS
        self._last_op = 0.0
        self._ckpt_running = False
        self.checkpoints = 0
        self.checkpoint_capture_seconds = 0.0  # topic lock held by the last checkpoint's capture
        self._retention_checked = 0.0
        self._m_sync = metrics.LOG_SYNC.labels(topic)

    # ---- opening and closing --------------------------------------------------------------------

    def restore(self, new_engine: Callable[[], Any]) -> Any:
        """Open the logs and return the engine rebuilt from them: the checkpoint and the log's
        tail, or the whole log (a fresh engine without a data directory). Fills the book."""
        engine = new_engine()
        directory = self.directory
        if directory is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / "log.compact")  # a compaction interrupted by a crash
            self.log = OpLog(directory / "log", sync=self._settings.sync)
            if not self._checkpoints:
                checkpoint.remove(directory)
                restored = False
            else:
                try:
                    restored = self._load_checkpoint(directory, engine)
                except Exception:
                    log.exception("topic %r: checkpoint unusable; replaying the whole log", self.topic)
                    engine = new_engine()
                    self._book.clear()
                    self.log_ops = 0
                    restored = False
            if not restored:
                self.log_ops = LogReplay(self.topic, engine, self._book, self._retention).run(directory / "log")
                self._ckpt_ops = self.log_ops  # nothing checkpointed: the whole log is the tail
            release_free_memory()  # the rebuild's temporaries: RSS back near the pre-crash level
            freeze_long_lived()  # the rebuilt state: out of the full collections' way
            # Durable delivery (server/match_log.py): every batch's messages are logged beside the
            # event log, so listeners resume across restarts within the delivery retention.
            opts = self._settings.delivery
            if opts.retention_bytes != 0:
                self.match_log = MatchLog(directory / "matches", engine.seq,
                                          retention_bytes=opts.retention_bytes,
                                          retention_ms=opts.retention_ms,
                                          segment_bytes=opts.segment_bytes, sync=self._settings.sync)
        self._engine = engine
        self._retention_checked = time.monotonic()
        return engine

    def _load_checkpoint(self, directory: Path, engine: Any) -> bool:
        """Load ``directory/checkpoint`` and replay the log after it; False: there is none.

        The engine's indexes are bulk-built from the checkpoint's columns (not unpickled)."""
        t0 = time.perf_counter()
        got = checkpoint.read(directory)
        if got is None:
            return False
        seq, offset, image = got
        engine.load_state(checkpoint.engine_state(image))
        for sid, meta in image.meta.items():
            self._book.register(sid, meta, image.owners.get(sid, ""))
        self._book.reserve(image.next_sid)
        loaded = time.perf_counter() - t0
        self.log_ops = LogReplay(self.topic, engine, self._book, self._retention).run(
            directory / "log", start=(offset, seq), log_ops=image.log_ops)
        self._ckpt_ops = self.log_ops - image.log_ops  # the tail a restart would replay again
        log.info("topic %r: restored checkpoint at seq %d in %.1fs, replayed the log to seq %d "
                 "in %.1fs", self.topic, seq, loaded, engine.seq, time.perf_counter() - t0 - loaded)
        return True

    def start(self) -> None:
        """Start the idle checkpointer, for a topic that takes checkpoints."""
        if self._checkpoints:
            threading.Thread(target=self._checkpoint_when_idle, name=f"checkpointer-{self.topic}",
                             daemon=True).start()

    def fail(self, message: str) -> NoReturn:
        """Close the topic because its log and engine may differ, and raise ``Unavailable``."""
        self.closed = True
        raise Unavailable(message)

    def stop(self) -> None:
        """Accept no more operations (call with the topic lock held)."""
        self.closed = True

    def close(self) -> None:
        """Make every frame written durable and close the logs (topic lock held, after ``stop``).

        The batches whose commit is waiting are thereby acknowledged; the close holds
        ``sync_lock`` so that no sync runs on a closed descriptor (the fdatasync traceback of
        issue 16). The match log's records precede their frames, so it is synced first."""
        ml = self.match_log
        if self.log is not None:
            if ml is not None:
                with contextlib.suppress(OSError, ValueError):
                    ml.sync_upto(ml.written)
            with contextlib.suppress(OSError, ValueError):
                self.log.sync_upto(self.log.written)
            with self.log.sync_lock:
                self.log.close()
        if ml is not None:
            ml.close()

    # ---- group commit -----------------------------------------------------------------------------

    def log_matches(self, chunk: Chunk) -> int:
        """Write a batch's messages to the match log (topic lock held, before the batch's frame is
        appended); returns the token its release waits for (0 without a match log)."""
        if self.match_log is None:
            return 0
        try:
            return self.match_log.append(chunk.first_seq, chunk.last_seq,
                                         encode_match_columns(chunk.columns()))
        except OSError as x:
            self.fail(f"topic {self.topic!r}: match log write failed ({x}); topic closed")

    def append(self, ops: list[pb.LogOp], action: Callable[[], None], mtoken: int = 0,
               n_ops: int | None = None) -> int:
        """Write ``ops`` as one frame (no sync) and queue ``action`` (hub updates) behind it and
        behind match log token ``mtoken``.

        ``n_ops``: the operations the frame holds when not ``len(ops)`` (a columnar publish op
        holds a whole batch). Call with the topic lock held; returns the token to pass to
        ``commit``.
        """
        n_ops = len(ops) if n_ops is None else n_ops
        token = 0
        if self.log is not None:
            try:
                token = self.log.write(frame(pb.LogBatch(ops=ops).SerializeToString()))
            except OSError as x:
                self.fail(f"topic {self.topic!r}: log write failed ({x}); topic closed")
            self.log_ops += n_ops
            self._ckpt_ops += n_ops
            self._last_op = time.monotonic()
            if self.match_log is not None and self._last_op - self._retention_checked > 1.0:
                self._retention_checked = self._last_op
                self.match_log.enforce_retention()  # retention.ms (bytes: at each segment roll)
            if (self._checkpoints and not self._ckpt_running
                    and self._ckpt_ops >= max(CHECKPOINT_BUSY_FACTOR * self.checkpoint_min_ops,
                                              self._live_records() // 2)):
                self._start_checkpoint()  # the replay tail would be long: even while busy
            if (self.compact_ratio > 0 and self._compacts and not self._compacting
                    and self.log.size >= self.compact_min_bytes
                    and self.log_ops >= self.compact_ratio * max(self._live_records(), 1)):
                self._compacting = True
                threading.Thread(target=self._compact_in_background, name=f"compact-{self.topic}",
                                 daemon=True).start()
        self._pending.append((token, mtoken, action))
        return token

    def commit(self, token: int) -> None:
        """Wait until the frame of ``token`` is durable (group commit), then ``release``."""
        log_ = self.log
        if log_ is not None and token:
            t0 = time.perf_counter()
            try:
                # the match log's records were written before the frame; both are synced (the
                # match log first) before anything is acknowledged. Syncing them in parallel in a
                # helper thread measured no better: under load the thread hand-offs wait for the GIL
                ml = self.match_log
                if ml is not None:
                    ml.sync_upto(ml.written)
                log_.sync_upto(token)
            except (OSError, ValueError) as x:
                if self.closed:
                    raise Unavailable(f"topic {self.topic!r}: the server is shutting down; the "
                                      "batch may or may not be durable (a retry is safe)") from None
                self.closed = True
                raise Unavailable(f"topic {self.topic!r}: log sync failed ({x}); topic closed") from x
            self._m_sync.observe(time.perf_counter() - t0)
        self.release()

    def release(self) -> None:
        """Run every queued action whose frame and match record are durable, in sequence order."""
        pending = self._pending
        if not pending:
            return
        with self._release_lock:
            log_ = self.log
            ml = self.match_log
            while pending:
                token, mtoken, action = pending[0]
                if log_ is not None and token > log_.durable:
                    break
                if ml is not None and mtoken > ml.durable:
                    break
                pending.popleft()
                action()

    def written(self) -> int:
        """The token of every frame written so far (0 without a log)."""
        return self.log.written if self.log is not None else 0

    def sync(self, token: int) -> None:
        """Make the event log durable up to ``token`` (``OSError`` when it cannot)."""
        if token and self.log is not None:
            self.log.sync_upto(token)

    # ---- checkpoints ------------------------------------------------------------------------------

    def _live_records(self) -> int:
        """Live subscriptions plus stored tuples (what a snapshot would hold)."""
        return len(self._book) + snapshot.stored_count(self._engine)

    def _start_checkpoint(self) -> None:
        """Copy the state as columns (topic lock held: it is the state at this seq; a few ms) and
        encode and write it in the background (``server/checkpoint.py``)."""
        assert self.log is not None and self.directory is not None
        t0 = time.perf_counter()
        book = self._book
        try:
            image = checkpoint.capture(self._engine, book.meta, book.owners, book.next_sid, self.log_ops)
        except Exception:
            log.exception("topic %r: cannot capture the state as columns; checkpoints disabled",
                          self.topic)
            self._checkpoints = False
            return
        offset = self.log.size
        held = time.perf_counter() - t0
        self.checkpoint_capture_seconds = held
        self._ckpt_running = True
        self._ckpt_ops = 0
        directory, path = self.directory, self.log.path

        def write() -> None:
            try:
                payload = checkpoint.encode(image)
                checkpoint.write(directory, payload, image.seq, offset, path)
                self.checkpoints += 1
                metrics.CHECKPOINTS.labels(self.topic).inc()
                metrics.CHECKPOINT_DURATION.labels(self.topic).observe(time.perf_counter() - t0)
                log.info("topic %r: checkpoint at seq %d (%d MiB): captured in %.3fs under the lock, "
                         "written in %.1fs", self.topic, image.seq, len(payload) >> 20, held,
                         time.perf_counter() - t0 - held)
            except Exception:
                log.exception("topic %r: checkpoint write failed", self.topic)
            finally:
                self._ckpt_running = False

        threading.Thread(target=write, name=f"checkpoint-{self.topic}", daemon=True).start()

    def checkpoint_now(self) -> bool:
        """Start a checkpoint now (the capture holds the topic lock a few ms; the write runs in
        the background). False when checkpoints are off for this topic or one is running."""
        with self._lock:
            if self.closed or not self._checkpoints or self._ckpt_running:
                return False
            self._start_checkpoint()
            return self._ckpt_running

    def _checkpoint_when_idle(self) -> None:
        """Take a checkpoint once ``checkpoint_min_ops`` operations were logged since the last one
        and the topic has been idle for ``checkpoint_idle_seconds`` (publishers wait while the
        state is captured, so a long quiet moment is the cheap time for it)."""
        while not self.closed:
            time.sleep(min(self.checkpoint_idle_seconds / 2, 1.0))
            if (self._ckpt_running or self._ckpt_ops < self.checkpoint_min_ops
                    or time.monotonic() - self._last_op < self.checkpoint_idle_seconds):
                continue
            with self._lock:
                if (not self.closed and not self._ckpt_running
                        and self._ckpt_ops >= self.checkpoint_min_ops):
                    self._start_checkpoint()

    # ---- compaction -------------------------------------------------------------------------------

    def _compact_in_background(self) -> None:
        try:
            self.compact()
        except Exception:
            log.exception("topic %r: compaction failed; the old log stays in use", self.topic)
        finally:
            self._compacting = False

    def compact_at_shutdown(self) -> None:
        """Compact a topic that compacts when its log holds anything but live records (a clean
        stop); a failure leaves the old log, which is intact, and is only logged."""
        if self.log is None or self.compact_ratio <= 0 or not self._compacts:
            return
        with self._lock:
            worth = not self.closed and self.log_ops > self._live_records()
        if worth:
            try:
                self.compact()
            except Exception:  # the old log is intact; never fail a shutdown on this
                log.exception("topic %r: compaction at shutdown failed", self.topic)

    def compact(self) -> bool:
        """Rewrite the log as snapshot + appends since; atomic (temp file, fsync, rename, fsync dir).

        Publishers wait only while the state is copied and while the frames appended during the
        encoding are copied behind the snapshot. Returns False when the topic is closed.
        """
        if self.log is None or self.directory is None:
            return False
        path, tmp = self.directory / "log", self.directory / "log.compact"
        with self._compact_lock:
            t0 = time.perf_counter()
            with self._lock:
                if self.closed:
                    return False
                book = self._book
                state = snapshot.capture(self._engine, book.meta, self._lateness, book.owners)
                offset, ops_at = self.log.size, self.log_ops
            head = snapshot.snapshot_bytes(state)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                write_all(fd, head)
                os.fsync(fd)
                with self._lock:
                    if self.closed:
                        return False
                    with open(path, "rb") as f:
                        f.seek(offset)
                        tail = f.read(self.log.size - offset)
                    write_all(fd, tail)
                    os.fsync(fd)
                    os.close(fd)
                    fd = -1
                    with self.log.sync_lock:
                        os.replace(tmp, path)
                        _fsync_dir(self.directory)
                        self.log.reopen(path, len(head) + len(tail))
                    self.log_ops = state.n_ops + self.log_ops - ops_at
            finally:
                if fd >= 0:
                    os.close(fd)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            self.compactions += 1
            metrics.COMPACTIONS.labels(self.topic).inc()
            metrics.COMPACTION_DURATION.labels(self.topic).observe(time.perf_counter() - t0)
            log.info("topic %r: compacted log to %d bytes (%d subscriptions, %d tuples) in %.2fs",
                     self.topic, len(head) + len(tail), len(state.subs),
                     state.n_ops - len(state.subs), time.perf_counter() - t0)
            return True
