"""Background flushing: the CommitLog flush service (ASYNC_FLUSH periodic flush, or SYNC_FLUSH
group commit) and the consume-queue/checkpoint flush service.

Group commit: a SYNC_FLUSH writer registers the CommitLog offset it needs durable and waits;
the single flush thread takes the highest requested offset, flushes once (``fdatasync``) and
wakes every writer whose offset is now covered, so one disk flush serves all writers that
arrived meanwhile. Writers on an asyncio loop do not block a thread: :class:`LoopFlushWaiters`
gives them futures that the flush thread completes with one ``call_soon_threadsafe`` per flush.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from .checkpoint import StoreCheckpoint
from .commit_log import CommitLog
from .config import FlushDiskType, StoreConfig
from .consume_queue import ConsumeQueue
from .index_file import IndexService
from .results import PutMessageResult, PutMessageStatus

log = logging.getLogger("rocketmq_broker.store.flush")


class CommitLogFlushService:
    """Flushes the CommitLog and records ``physicMsgTimestamp`` in the checkpoint.

    Args:
        config: ``flush_disk_type`` picks periodic (every ``flush_interval_commit_log`` ms) or
            group-commit flushing.
        commit_log / checkpoint: what to flush and where to note progress.
    """

    def __init__(self, config: StoreConfig, commit_log: CommitLog, checkpoint: StoreCheckpoint) -> None:
        self.config = config
        self.commit_log = commit_log
        self.checkpoint = checkpoint
        self.sync = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self._cond = threading.Condition()
        self._requested = 0
        self._flushed = commit_log.flushed_where
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="rocketmq-store-flush-commitlog", daemon=True)
        self._listeners: list[Callable[[int], None]] = []
        self._finished = False
        self.flush_count = 0  # number of disk flushes done (observability/tests)

    @property
    def flushed(self) -> int:
        """CommitLog offset known durable (the last completed flush)."""
        return self._flushed

    @property
    def finished(self) -> bool:
        """True once the final flush at shutdown is done (nothing will be flushed any more)."""
        return self._finished

    def add_flush_listener(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(flushed_offset)`` on the flush thread after every flush (and after the
        final flush at shutdown). It must be quick and must not raise."""
        self._listeners = [*self._listeners, listener]

    def _flushed_to(self, flushed: int) -> None:
        with self._cond:
            self._flushed = flushed
            self._cond.notify_all()
        for listener in self._listeners:
            try:
                listener(flushed)
            except Exception:
                log.exception("flush listener failed")

    def start(self) -> None:
        self._thread.start()

    def _flush_once(self) -> int:
        ts = self.commit_log.last_store_timestamp
        flushed = self.commit_log.flush()
        if ts:
            self.checkpoint.physic_msg_timestamp = ts
        self.flush_count += 1
        return flushed

    def _run(self) -> None:
        while True:
            with self._cond:
                if self.sync:
                    while self._requested <= self._flushed and not self._stopped:
                        self._cond.wait()
                elif not self._stopped:
                    # read each round: UPDATE_BROKER_CONFIG may change it
                    self._cond.wait(self.config.flush_interval_commit_log / 1000.0)
                if self._stopped:
                    break
            try:
                flushed = self._flush_once()
            except (OSError, ValueError):
                log.exception("commit log flush failed")
                continue
            self._flushed_to(flushed)
        try:
            flushed = self._flush_once()
        except (OSError, ValueError):
            log.exception("final commit log flush failed")
            flushed = self._flushed
        self._finished = True
        self._flushed_to(flushed)

    def wait_for_flush(self, offset: int, timeout_ms: int) -> bool:
        """Block until the CommitLog is durable up to ``offset`` (SYNC_FLUSH group commit).

        Returns False on timeout (``sync_flush_timeout``) or when the service stopped first.
        """
        deadline = time.monotonic() + timeout_ms / 1000.0
        with self._cond:
            if self._flushed >= offset:
                return True
            if offset > self._requested:
                self._requested = offset
                self._cond.notify_all()
            while self._flushed < offset:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._stopped:
                    return self._flushed >= offset
                self._cond.wait(remaining)
            return True

    def wakeup(self, offset: int) -> None:
        """Ask for a flush without waiting (SYNC_FLUSH put with ``WAIT=false``)."""
        with self._cond:
            if offset > self._requested:
                self._requested = offset
                self._cond.notify_all()

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop after a final flush."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout_s)


class LoopFlushWaiters:
    """The asyncio side of group commit for one event loop.

    :meth:`wait` (called on the loop, right after an append) returns a future of the put's
    result that completes once the CommitLog is durable up to the record's end; after
    ``timeout_ms``, or when the flush service finished without covering it, the result's status
    becomes FLUSH_DISK_TIMEOUT (the message stays stored), as a blocking put reports it.
    Waiters are kept in append order (offsets and deadlines only grow on one loop), the flush
    thread schedules one resolution per flush with ``call_soon_threadsafe`` (none when nobody
    waits), and one timer at a time watches the oldest deadline: no thread hop per message.

    Args:
        service: the SYNC_FLUSH :class:`CommitLogFlushService`.
        loop: the event loop the futures belong to.
        timeout_ms: ``sync_flush_timeout``.
    """

    def __init__(self, service: CommitLogFlushService, loop: asyncio.AbstractEventLoop, timeout_ms: int) -> None:
        self.service = service
        self.loop = loop
        self.timeout_s = timeout_ms / 1000.0
        self._waiters: deque[tuple[int, float, asyncio.Future[PutMessageResult], PutMessageResult]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        service.add_flush_listener(self._on_flush)

    def wait(self, offset: int, result: PutMessageResult) -> asyncio.Future[PutMessageResult]:
        """A future of ``result`` once the CommitLog is durable up to ``offset`` (loop thread only)."""
        loop = self.loop
        fut = loop.create_future()
        service = self.service
        if service.flushed >= offset:
            fut.set_result(result)
            return fut
        waiters = self._waiters
        waiters.append((offset, loop.time() + self.timeout_s, fut, result))
        service.wakeup(offset)
        # a flush that completed between the check above and the append saw no waiter
        flushed = service.flushed
        if flushed >= offset or service.finished:
            self._resolve(flushed)
        if self._timer is None and waiters:
            self._timer = loop.call_at(waiters[0][1], self._expire)
        return fut

    def _on_flush(self, flushed: int) -> None:  # flush thread
        if self._waiters:
            try:
                self.loop.call_soon_threadsafe(self._resolve, flushed)
            except RuntimeError:  # loop closed: nobody waits any more
                pass

    def _resolve(self, flushed: int) -> None:
        waiters = self._waiters
        while waiters and waiters[0][0] <= flushed:
            _, _, fut, result = waiters.popleft()
            if not fut.done():
                fut.set_result(result)
        if self.service.finished:
            while waiters:
                self._time_out(*waiters.popleft())

    def _expire(self) -> None:
        self._timer = None
        waiters = self._waiters
        now = self.loop.time()
        while waiters and waiters[0][1] <= now:
            self._time_out(*waiters.popleft())
        if waiters:
            self._timer = self.loop.call_at(waiters[0][1], self._expire)

    @staticmethod
    def _time_out(offset: int, _deadline: float, fut: asyncio.Future[PutMessageResult],
                  result: PutMessageResult) -> None:
        log.warning("flush disk timeout for commit log offset %d", offset)
        result.put_message_status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        if not fut.done():
            fut.set_result(result)


#: longest time between two flushes of the index files while entries keep being added, in seconds
INDEX_FLUSH_MAX_INTERVAL_S = 30.0


class ConsumeQueueFlushService:
    """Every ``flush_interval_consume_queue`` ms: flush all consume queues, record
    ``logicsMsgTimestamp`` and write the checkpoint page; every ``clean_resource_interval`` ms run
    ``cleaner`` (expired file deletion).

    The index files are flushed (and ``indexMsgTimestamp`` recorded) in a round that finds no
    index entry added since the previous round - the index has gone quiet - or, while entries
    keep coming, once :data:`INDEX_FLUSH_MAX_INTERVAL_S` has passed since the last index flush
    (Java flushes an index file only when it is full). A flush write-protects the mapping's pages
    again, so the next key written to each one faults: flushed every round under traffic, the
    index's random hash-slot writes cost a page fault for most messages (~20 µs of broker CPU per
    Celery task, benchmarks/results/2026-11-29-celery-broker-cpu.md). What a crash leaves is
    unchanged in kind: an abnormal restart drops an index file holding entries newer than its
    checkpoint - under traffic the file being written, as it did when every round flushed it -
    and re-dispatches from the recovery point; an index quiet for two rounds (before: one) is
    checkpointed and kept."""

    def __init__(self, config: StoreConfig, commit_log: CommitLog, checkpoint: StoreCheckpoint,
                 queues: Callable[[], Iterable[ConsumeQueue]], index: IndexService | None = None,
                 cleaner: Callable[[], object] | None = None) -> None:
        self.config = config
        self.index = index
        self.cleaner = cleaner
        self.commit_log = commit_log
        self.checkpoint = checkpoint
        self.queues = queues
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rocketmq-store-flush-cq", daemon=True)
        self._index_seen: object = None  # the index's progress at the previous round
        self._index_flushed: object = None  # ... at its last flush
        self._index_flushed_at = time.monotonic()

    def start(self) -> None:
        self._thread.start()

    def flush_all(self) -> None:
        """Flush the consume queues, the index files and the checkpoint (e.g. at shutdown)."""
        self.flush_round(index=True)

    def flush_round(self, index: bool | None = None) -> None:
        """One round: the consume queues and the checkpoint; the index files when ``index``, or
        (None) as the class docstring says."""
        ts = self.commit_log.last_store_timestamp
        for cq in list(self.queues()):
            cq.flush()
        if ts:
            self.checkpoint.logics_msg_timestamp = ts
        if self.index is not None:
            progress = self.index.progress()
            if index is None:
                index = progress != self._index_flushed and (
                    progress == self._index_seen
                    or time.monotonic() - self._index_flushed_at >= INDEX_FLUSH_MAX_INTERVAL_S)
            self._index_seen = progress
            if index:
                self.index.flush()
                self._index_flushed, self._index_flushed_at = progress, time.monotonic()
                if ts:
                    self.checkpoint.index_msg_timestamp = ts
        self.checkpoint.flush()

    def _run(self) -> None:
        # intervals are read each round: UPDATE_BROKER_CONFIG may change them
        next_clean = time.monotonic() + self.config.clean_resource_interval / 1000.0
        while not self._stop.wait(self.config.flush_interval_consume_queue / 1000.0):
            try:
                self.flush_round()
            except (OSError, ValueError):
                log.exception("consume queue flush failed")
            if self.cleaner is not None and time.monotonic() >= next_clean:
                next_clean = time.monotonic() + self.config.clean_resource_interval / 1000.0
                try:
                    self.cleaner()
                except (OSError, ValueError):
                    log.exception("expired file cleanup failed")

    def shutdown(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
