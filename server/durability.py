"""Durability of one topic: its event log and match log, group commit, checkpoints and compaction.

**Group commit.** Under the topic lock, ``Topic`` applies a request to the engine, then hands its
messages here (``log_matches``: written to the match log first) and its operations (``append``:
one frame of the event log, no sync), with the action that hands the messages to the delivery
hub. Then, *outside* the lock, ``commit`` waits until the frame is durable — one ``fdatasync``
covers every frame written since the last one, so concurrent publish streams share syncs while
others keep applying — and ``release`` runs the queued actions whose frames (and match records)
are durable, strictly in sequence order. An acknowledgement is therefore sent only after its
frame is durable, and listeners never see a message whose operation could be lost by a crash.

**Disk faults** (docs/reference/persistence.md, "Disk faults"). A failed *write* (ENOSPC, EDQUOT, EIO,
...) leaves the engine ahead of the files by one batch: ``rollback`` cuts both logs back to
their sizes before that batch (``mark``), and ``rebuild`` replaces the engine and the book with
ones read back from the files, as a restart would (``restore``: checkpoint + log tail), all
under the topic lock; the batch is refused (RESOURCE_EXHAUSTED for a full disk, UNAVAILABLE
otherwise) and the next one simply tries again. A failed *sync* cannot be undone (the kernel
may have dropped the pages it could not write): the topic is then ``closed`` (``Unavailable``)
until a restart reads its files back (``server/recovery.py``).

**Checkpoints** (``server/checkpoint.py``) bound the replay of topics whose log is never
compacted: the state as columns at a seq and log offset, so a restart replays only the log's
tail. **Compaction** (``server/snapshot.py``) rewrites the log of topics with retention as
snapshot + appends once it holds at least ``compact_min_bytes`` and ``compact_ratio`` times as
many operations as there are live records (subscriptions + stored tuples), and at clean
shutdown. Both copy the state under the topic lock and encode and write it outside it
(``docs/reference/persistence.md``).
"""

from __future__ import annotations

import collections
import contextlib
import errno
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

from hotjoin.matcher.contract import TopicEngine
from hotjoin.proto import hotjoin_pb2 as pb
from hotjoin.server import checkpoint, metrics, snapshot
from hotjoin.server.book import SubscriptionBook
from hotjoin.server.delivery import Chunk
from hotjoin.server.errors import ResourceExhausted, ServiceError, Unavailable
from hotjoin.server.heap import freeze_long_lived, release_free_memory
from hotjoin.server.log import (
    OpLog,
    SyncError,
    _fsync_dir,
    clear_clean_mark,
    frame,
    read_clean_mark,
    write_all,
    write_clean_mark,
)
from hotjoin.server.match_log import MatchLog
from hotjoin.server.match_log import encode_parts as encode_match_columns
from hotjoin.server.records import DamagedFileError
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
COMPACT_RETRY_SECONDS = 30.0  # pause of automatic compaction after one failed to write
# errnos of a full filesystem (or a user's quota of it): the batch is refused as
# RESOURCE_EXHAUSTED and succeeds once space returns; any other write error is UNAVAILABLE
DISK_FULL = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exhausted"}


class WriteMark(NamedTuple):
    """Where a batch's writes begin (``Durability.mark``): the event log's size and the match
    log's ``MatchLog.mark`` (None without a match log)."""

    log_size: int
    match_log: Any


def refusal(topic: str, error: OSError, what: str = "its log",
            outcome: str = "the batch was not applied") -> ServiceError:
    """The error a request gets when writing ``what`` of ``topic`` failed with ``error`` and
    nothing changed (``outcome`` says so): ``ResourceExhausted`` for a full disk (ENOSPC,
    EDQUOT), ``Unavailable`` for anything else; one line with the reason (never a traceback).

    >>> print(refusal("t", OSError(errno.ENOSPC, "No space left on device")))
    topic 't': the disk is full (No space left on device) writing its log; the batch was not applied; retry once there is space
    >>> print(refusal("t", OSError(errno.EIO, "Input/output error")))
    topic 't': writing its log failed (Input/output error); the batch was not applied; a retry is safe
    """
    why = error.strerror or str(error)
    full = DISK_FULL.get(error.errno or 0)
    if full is not None:
        return ResourceExhausted(f"topic {topic!r}: {full} ({why}) writing {what}; {outcome}; "
                                 "retry once there is space", "disk")
    return Unavailable(f"topic {topic!r}: writing {what} failed ({why}); {outcome}; a retry is safe")


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
        self._engine: TopicEngine | None = None  # set by ``restore``
        self._new_engine: Callable[[], TopicEngine] | None = None  # the factory, from ``restore``
        self.closed = False
        self.log_failed: OSError | None = None  # the first failed sync (the topic is closed)
        self._uncut = False  # a failed write could not be cut back: the log ends in a torn tail
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
        self._compact_after = 0.0  # monotonic time before which no automatic compaction starts
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

    def restore(self, new_engine: Callable[[], TopicEngine]) -> TopicEngine:
        """Open the logs and return the engine rebuilt from them: the checkpoint and the log's
        tail, or the whole log (a fresh engine without a data directory). Fills the book.

        Raises ``DamagedFileError`` (nothing cut, nothing changed but a torn tail) when a file
        does not verify or the files disagree: a complete log frame failing its checksum, a log
        shorter than at its clean shutdown or than its checkpoint's offset, a replay that ends
        before the checkpoint's seq (docs/reference/persistence.md, "Damage and repair")."""
        engine = new_engine()
        directory = self.directory
        if directory is not None:
            path = directory / "log"
            clean = read_clean_mark(directory)
            if clean is not None:  # a clean stop recorded the log's size: any other size is damage
                size = path.stat().st_size if path.exists() else 0
                if size != clean:
                    raise DamagedFileError.at(
                        path, min(size, clean), f"the log has {size} bytes but had {clean} at its "
                        "clean shutdown: it was truncated or written to since")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / "log.compact")  # a compaction interrupted by a crash
            self.log = OpLog(path, sync=self._settings.sync, clean=clean is not None)
            if not self._checkpoints:
                checkpoint.remove(directory)
            engine = self._load(directory, engine, new_engine)
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
            if clean is not None:  # from here on a crash must not pass for a clean stop
                clear_clean_mark(directory)
        self._engine = engine
        self._new_engine = new_engine
        self._retention_checked = time.monotonic()
        return engine

    def _load(self, directory: Path, engine: TopicEngine,
              new_engine: Callable[[], TopicEngine]) -> TopicEngine:
        """Fill ``engine`` (fresh) and the book (empty) from the files: the checkpoint and the
        log's tail after it, or the whole log; returns the engine (a new one when the checkpoint
        proved unusable midway). Start-up (``restore``) and ``rebuild`` both read the state so."""
        restored = False
        if self._checkpoints:
            try:
                restored = self._load_checkpoint(directory, engine)
            except DamagedFileError:
                raise  # the log after the checkpoint: the whole log would not read either
            except Exception as e:  # the checkpoint alone: the whole log is kept beside it
                log.warning("topic %r: checkpoint unusable (%s); replaying the whole log",
                            self.topic, e)
                checkpoint.set_aside(directory)
                engine = new_engine()
                self._book.clear()
                self.log_ops = 0
        if not restored:
            self.log_ops = LogReplay(self.topic, engine, self._book, self._retention).run(
                directory / "log")
            self._ckpt_ops = self.log_ops  # nothing checkpointed: the whole log is the tail
        return engine

    def rebuild(self) -> TopicEngine:
        """Return a new engine, and refill the book, from the topic's files exactly as a restart
        would (``_load``: checkpoint + log tail), after ``rollback`` cut a failed batch away.

        Call with the topic lock held, so the sequence stays total; publishers wait meanwhile:
        O(checkpoint size + log tail), like a restart of this one topic, with the old and the new
        engine in memory together until the caller drops the old one. Frames written but not yet
        synced (other batches, still committing) are in the files and so in the rebuilt state.
        Without a data directory there is nothing to read and nothing was written: the engine
        stays. When the files cannot be read back the topic is closed (``Unavailable``)."""
        if self.directory is None:
            return self._current()
        new_engine = self._new_engine
        if new_engine is None:
            raise RuntimeError(f"topic {self.topic!r}: its durability was used before restore")
        while self._ckpt_running:  # a checkpoint being written: let it finish (it takes no lock)
            time.sleep(0.005)  # rather than remove its temp file from under it (checkpoint.read)
        try:
            self._book.clear()
            engine = self._load(self.directory, new_engine(), new_engine)
        except Exception as x:  # noqa: BLE001 - whatever it was, the old engine is ahead of the log
            log.exception("topic %r: rebuilding the state from its files failed", self.topic)
            self.fail(f"topic {self.topic!r}: its state could not be rebuilt from its files after "
                      f"a failed write ({x}); the topic is closed until the server restarts")
        release_free_memory()
        self._engine = engine
        log.info("topic %r: state rebuilt from its files at seq %d", self.topic, engine.seq)
        return engine

    def _load_checkpoint(self, directory: Path, engine: TopicEngine) -> bool:
        """Load ``directory/checkpoint`` and replay the log after it; False: there is none.

        The engine's indexes are bulk-built from the checkpoint's columns (not unpickled)."""
        t0 = time.perf_counter()
        got = checkpoint.read(directory)
        if got is None:
            if (directory / "checkpoint").exists():  # derived data: the whole log is kept beside it
                log.warning("topic %r: its checkpoint does not verify (damaged, or of another "
                            "format); set aside, replaying the whole log", self.topic)
                checkpoint.set_aside(directory)
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

    def _current(self) -> TopicEngine:
        """The topic's engine (``restore`` sets it; ``rebuild`` replaces it)."""
        engine = self._engine
        if engine is None:
            raise RuntimeError(f"topic {self.topic!r}: its durability was used before restore")
        return engine

    def close(self) -> None:
        """Make every frame written durable and close the logs (topic lock held, after ``stop``).

        The batches whose commit is waiting are thereby acknowledged; the close holds
        ``sync_lock`` so that no sync runs on a closed descriptor (a sync racing the close would
        fail with EBADF). The match log's records precede their frames, so it is synced first."""
        ml = self.match_log
        if self.log is not None:
            synced = True
            if ml is not None:
                try:
                    ml.sync_upto(ml.written)
                except (OSError, ValueError):
                    synced = False
            try:
                self.log.sync_upto(self.log.written)
            except (OSError, ValueError):
                synced = False
            with self.log.sync_lock:
                self.log.close()
            if synced and not self._uncut and self.directory is not None:  # checked at next start
                with contextlib.suppress(OSError):
                    write_clean_mark(self.directory, self.log.size)
        if ml is not None:
            ml.close()

    def abandon(self) -> None:
        """Close the files of a topic that failed to open (no sync, no clean-stop mark)."""
        self.closed = True
        for f in (self.log, self.match_log):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()

    # ---- group commit -----------------------------------------------------------------------------

    def mark(self) -> WriteMark:
        """Where the next batch's writes begin, for ``rollback`` (topic lock held)."""
        ml = self.match_log
        return WriteMark(self.log.size if self.log is not None else 0,
                         ml.mark() if ml is not None else None)

    def rollback(self, mark: WriteMark, error: OSError) -> ServiceError:
        """Undo the writes of a batch that failed with ``error`` and return the error its request
        gets (``refusal``); the caller then rebuilds the engine (``rebuild``). Topic lock held.

        The event log is cut back first, then the match log (a crash in between leaves match
        records beyond the log's last seq, which the match log drops on open). When the failure
        was a sync (``SyncError``: the match log's roll) or a cut fails too, nothing can be
        trusted any more: the topic is closed and ``Unavailable`` raised. Counts the failure
        (``hotjoin_storage_write_errors_total``). O(1) system calls."""
        if isinstance(error, SyncError):
            self.sync_failed(error)
        refused = self.refuse(error)
        try:
            if self.log is not None:
                self.log.truncate(mark.log_size)
            if self.match_log is not None and mark.match_log is not None:
                self.match_log.truncate(mark.match_log)
        except OSError as x:
            self._uncut = True  # no clean-stop mark: the next start cuts the torn tail
            self.count_error(x)
            log.error("topic %r: a write failed (%s) and cutting it back failed too (%s); topic "
                      "closed", self.topic, error.strerror or error, x.strerror or x)
            self.fail(f"topic {self.topic!r}: writing its log failed ({error.strerror or error}) "
                      f"and the partial write could not be removed ({x.strerror or x}); the topic "
                      "is closed until the server restarts")
        log.warning("topic %r: a batch was refused: writing its log failed (%s); files cut back, "
                    "rebuilding the state from them", self.topic, error.strerror or error)
        return refused

    def refuse(self, error: OSError, what: str = "its log",
               outcome: str = "the batch was not applied") -> ServiceError:
        """Count a failed write of one of the topic's files that changed nothing and return the
        error its request gets (``refusal``: RESOURCE_EXHAUSTED for a full disk)."""
        self.count_error(error)
        return refusal(self.topic, error, what, outcome)

    def count_error(self, error: OSError, sync: bool = False) -> None:
        """Count a failed write (or, with ``sync``, a failed sync) of one of the topic's files."""
        metrics.STORAGE_WRITE_ERRORS.labels(
            self.topic, metrics.storage_error_label(error, sync or isinstance(error, SyncError))).inc()

    def sync_failed(self, error: OSError) -> NoReturn:
        """Close the topic after a failed sync of one of its logs and raise ``Unavailable``: the
        kernel may have dropped the pages it could not write and marked them clean, so a retried
        sync may succeed without the data on disk; only a restart, which reads the files back,
        knows what they hold (docs/reference/persistence.md, "Disk faults"). The first failure is kept
        (``log_failed``), counted and logged; every request waiting for a sync then gets it."""
        if self.log_failed is None:
            self.log_failed = error
            self.count_error(error, sync=True)
            log.error("topic %r: syncing its log to disk failed (%s); topic closed until the "
                      "server restarts", self.topic, error.strerror or error)
        why = self.log_failed.strerror or self.log_failed
        self.fail(f"topic {self.topic!r}: syncing its log to disk failed ({why}); after a failed "
                  "fsync the written data may be lost, so the topic is closed until the server "
                  "restarts and reads its files back; the request may or may not be durable (a "
                  "retry after the restart is safe)")

    def log_matches(self, chunk: Chunk) -> int:
        """Write a batch's messages to the match log (topic lock held, before the batch's frame is
        appended); returns the token its release waits for (0 without a match log). Raises
        ``OSError`` when the write fails (``rollback`` then undoes the batch's writes)."""
        if self.match_log is None:
            return 0
        return self.match_log.append(chunk.first_seq, chunk.last_seq,
                                     encode_match_columns(chunk.columns()))

    def append(self, ops: list[pb.LogOp], action: Callable[[], None], mtoken: int = 0,
               n_ops: int | None = None) -> int:
        """Write ``ops`` as one frame (no sync) and queue ``action`` (hub updates) behind it and
        behind match log token ``mtoken``.

        ``n_ops``: the operations the frame holds when not ``len(ops)`` (a columnar publish op
        holds a whole batch). Call with the topic lock held; returns the token to pass to
        ``commit``. Raises ``OSError`` when the write fails (``rollback`` then undoes the batch's
        writes); nothing after the write raises it.
        """
        n_ops = len(ops) if n_ops is None else n_ops
        token = 0
        if self.log is not None:
            token = self.log.write(frame(pb.LogBatch(ops=ops).SerializeToString()))
            self.log_ops += n_ops
            self._ckpt_ops += n_ops
            self._last_op = time.monotonic()
            if self.match_log is not None and self._last_op - self._retention_checked > 1.0:
                self._retention_checked = self._last_op
                try:
                    self.match_log.enforce_retention()  # retention.ms (bytes: at each segment roll)
                except OSError as x:  # the batch is written; old segments go at the next try
                    log.warning("topic %r: deleting match log segments beyond retention failed "
                                "(%s)", self.topic, x)
            if (self._checkpoints and not self._ckpt_running
                    and self._ckpt_ops >= CHECKPOINT_BUSY_FACTOR * self.checkpoint_min_ops
                    and self._ckpt_ops >= self._live_records() // 2):  # counted only then
                self._start_checkpoint()  # the replay tail would be long: even while busy
            if (self.compact_ratio > 0 and self._compacts and not self._compacting
                    and self._last_op >= self._compact_after
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
                    try:
                        ml.sync_upto(ml.written)  # skips the sync once closed by a shutdown
                    except OSError as x:
                        raise SyncError(x.errno, x.strerror) from x
                log_.sync_upto(token)  # a failed fdatasync: SyncError (latched, server/log.py)
            except SyncError as x:
                self.sync_failed(x)
            except (OSError, ValueError) as x:  # the descriptor closed by a shutdown
                if not self.closed and isinstance(x, OSError):
                    self.sync_failed(x)
                raise Unavailable(f"topic {self.topic!r}: the server is shutting down; the "
                                  "batch may or may not be durable (a retry is safe)") from None
            if self.log_failed is not None:  # another batch's sync failed while this one's ran
                self.sync_failed(self.log_failed)
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
        """Make the event log durable up to ``token``; a failed sync closes the topic
        (``sync_failed``: ``Unavailable``)."""
        if token and self.log is not None:
            try:
                self.log.sync_upto(token)
            except SyncError as x:
                self.sync_failed(x)

    # ---- checkpoints ------------------------------------------------------------------------------

    def _live_records(self) -> int:
        """Live subscriptions plus stored tuples (what a snapshot would hold)."""
        return len(self._book) + snapshot.stored_count(self._current())

    def _start_checkpoint(self) -> bool:
        """Copy the state as columns (topic lock held: it is the state at this seq; a few ms) and
        encode and write it in the background (``server/checkpoint.py``)."""
        assert self.log is not None and self.directory is not None
        t0 = time.perf_counter()
        book = self._book
        try:
            image = checkpoint.capture(self._current(), book.meta, book.owners, book.next_sid,
                                       self.log_ops)
        except Exception:
            log.exception("topic %r: cannot capture the state as columns; checkpoints disabled",
                          self.topic)
            self._checkpoints = False
            return False
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
            except OSError as x:  # a full disk: the temp file is gone, the old checkpoint stays
                self.count_error(x)
                log.warning("topic %r: checkpoint not written (%s); the previous checkpoint and the "
                            "log stay in use", self.topic, x.strerror or x)
            except Exception:
                log.exception("topic %r: checkpoint write failed", self.topic)
            finally:
                self._ckpt_running = False

        threading.Thread(target=write, name=f"checkpoint-{self.topic}", daemon=True).start()
        return True

    def checkpoint_now(self) -> bool:
        """Start a checkpoint now (the capture holds the topic lock a few ms; the write runs in
        the background). False when checkpoints are off for this topic or one is running."""
        with self._lock:
            if self.closed or not self._checkpoints or self._ckpt_running:
                return False
            return self._start_checkpoint()  # (its write may have ended already)

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
        except OSError as x:  # a full disk: log.compact is removed, the old log stays
            self._compact_failed(x)
        except Exception:
            log.exception("topic %r: compaction failed; the old log stays in use", self.topic)
        finally:
            self._compacting = False

    def _compact_failed(self, error: OSError) -> None:
        """One line and a count for a compaction that could not write (its temp file is already
        removed); automatic compaction pauses ``COMPACT_RETRY_SECONDS``, so a full disk does not
        make every append capture the state again."""
        self.count_error(error)
        self._compact_after = time.monotonic() + COMPACT_RETRY_SECONDS
        log.warning("topic %r: compaction not written (%s); the old log stays in use, next try in "
                    "%.0fs", self.topic, error.strerror or error, COMPACT_RETRY_SECONDS)

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
            except OSError as x:  # a full disk: the old log is intact
                self._compact_failed(x)
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
                state = snapshot.capture(self._current(), book.meta, self._lateness, book.owners)
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
                    failed: SyncError | None = None
                    with self.log.sync_lock:
                        os.replace(tmp, path)
                        try:
                            _fsync_dir(self.directory)
                        except OSError as x:  # the rename may not be durable: as a failed sync
                            failed = self.log.failed = SyncError(x.errno, x.strerror)
                        self.log.reopen(path, len(head) + len(tail))  # never append to the old inode
                    if failed is not None:
                        with contextlib.suppress(Unavailable):
                            self.sync_failed(failed)  # logged and counted; the topic closes
                        return False
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
