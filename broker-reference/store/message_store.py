"""``MessageStore``: RocketMQ's ``DefaultMessageStore`` for the reference broker.

It owns the CommitLog, the consume queues, the checkpoint, the flush services and recovery, and
knows nothing of the network. Records are dispatched to their consume queue synchronously,
inside the append lock, so a message is visible to ``get_message`` as soon as ``put_message``
returns; arrival listeners (long polling) are called right after, outside the lock. A plain
single send (the broker's common case) takes :meth:`MessageStore.put_plain`: the same bytes,
entries and listener calls in one flat pass, without the InnerMessage and result objects.

Thread safety: puts may come from any thread (one append lock); reads run concurrently with
appends and never take that lock.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from rocketmq_sdk.exceptions import MQError
from rocketmq_sdk.protocol.codes import MessageSysFlag
from rocketmq_sdk.protocol.message_codec import BLANK_MAGIC_CODE
from rocketmq_sdk.protocol.validators import is_valid_name

from .batch_records import encode_single, finish_batch, place_single
from .checkpoint import StoreCheckpoint
from .commit_log import (
    END_FILE_MIN_BLANK_LENGTH,
    CommitLog,
    DispatchRequest,
    EncodedBatch,
    packed_host,
    parse_delay_levels,
)
from .config import StoreConfig
from .consume_queue import CQ_ENTRY, CQ_STORE_UNIT_SIZE, INT_MAX, ConsumeQueue
from .disk_space import CommitLogCleaner
from .flush import CommitLogFlushService, ConsumeQueueFlushService, LoopFlushWaiters
from .index_file import IndexService
from .inner_message import InnerMessage
from .mapped_file import DiskFullError
from .paths import UnsafePathError, safe_join
from .results import (
    GetMessageResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
)

log = logging.getLogger("rocketmq_broker.store")

ArrivalListener = Callable[[str, int, int, int, "dict[str, str] | None"], None]
"""``(topic, queue_id, max_offset, tags_code, properties)``: ``max_offset`` is the queue's new
max offset, i.e. the message's consume-queue offset + 1 (Java ``MessageArrivingListener``)."""

TagFilter = Callable[[int], bool]
RecordFilter = Callable[[bytes], bool]
_NOT_OR_COMMIT = (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
_MAX_FILTER_BYTES = 16000
_SIZE_MAGIC = struct.Struct(">ii")


@functools.cache
def total_physical_memory() -> int:
    """Bytes of physical memory (Java ``StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE``)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * 1024 ** 3


class StoreError(MQError):
    """The store cannot start: directory locked by another store, or unreadable files."""


class MessageStore:
    """The message store.

    Args:
        config: :class:`StoreConfig` (paths, file sizes, flush mode, limits).

    Usage: ``store = MessageStore(cfg); store.start(); ...; store.shutdown()``.
    """

    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self.commit_log = CommitLog(config, self._dispatch, parse_delay_levels(config.message_delay_level),
                                    self._dispatch_batch)
        self.consume_queue_table: dict[str, dict[int, ConsumeQueue]] = {}
        self._cq_lock = threading.Lock()
        self.checkpoint: StoreCheckpoint | None = None
        self.index_service = (IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num,
                                           config.entry_reserve_ahead_bytes)
                              if config.message_index_enable else None)
        self._flush_commit_log: CommitLogFlushService | None = None
        self._flush_consume_queue: ConsumeQueueFlushService | None = None
        self._listeners: list[ArrivalListener] = []
        self._loop_waiters: LoopFlushWaiters | None = None
        self._lock_fd: int | None = None
        self.running = False
        self.last_exit_ok = True
        #: set by the disk-space guard above ``disk_space_warning_level_ratio``: puts are refused
        self.disk_full = False
        self.cleaner = CommitLogCleaner(self)
        #: records recovery skipped (logged at ERROR with their offsets)
        self.skipped_records = 0
        self.commit_log.on_disk_full = self._mark_disk_full
        self.commit_log.prepare_queue = self._prepare_queue
        #: SYNC_MASTER (set by the HA service): ``hook(end_offset, result_or_future)`` returns a
        #: future of the result completed when a slave has acknowledged ``end_offset``
        #: (Java ``CommitLog.submitReplicaRequest``); applied to deferred puts with WAIT=true
        self.replica_hook: Callable[[int, object], asyncio.Future[PutMessageResult]] | None = None
        #: HA slave: the next CommitLog offset to dispatch to the consume queues and index
        self.reput_from_offset = 0

    def _prepare_queue(self, topic: str, queue_id: int, entries: int = 1) -> bool:
        """Before ``entries`` records of topic/queue are appended (lock held): create the
        consume-queue file their entries will need (the next one when the last is full, the first
        one of a new queue) and reserve disk space for the entries in it now, so a full disk
        refuses the put (False) instead of failing the dispatch after the records are written."""
        queues = self.consume_queue_table.get(topic)
        cq = queues.get(queue_id) if queues is not None else None
        try:
            if cq is None:
                cq = self.find_consume_queue(topic, queue_id)
            mfq = cq.mapped_file_queue
            last = mfq.last_mapped_file()
            if last is not None and last.is_full():
                mfq.get_last_mapped_file()
            elif last is None:  # a new queue: its first file, as the dispatch would create it
                first = self.commit_log.topic_queue_table.get((topic, queue_id), 0) * CQ_STORE_UNIT_SIZE
                if first < mfq.file_size:
                    mfq.get_last_mapped_file(first)
            cq.reserve_for(self.commit_log.topic_queue_table.get((topic, queue_id), 0), entries)
        except DiskFullError as exc:
            log.error("consume queue %s-%d: %s; refusing writes until space is freed", topic, queue_id, exc)
            self._mark_disk_full()
            return False
        return True

    def _mark_disk_full(self) -> None:
        """A new store file found no disk space: refuse puts until the disk guard (run every
        ``clean_resource_interval`` ms) sees usage back under the warning level."""
        self.disk_full = True

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Lock the store directory, load files, recover, create the ``abort`` marker and start
        the flush threads.

        Recovery: with ``abort`` present (no clean shutdown) the CommitLog is re-scanned with
        CRC checks from the checkpoint's safe point, consume queues are rebuilt from it and a
        torn tail is cut; otherwise the last three CommitLog files are validated. In both cases
        consume-queue entries beyond the CommitLog end are dropped and records missing from
        the consume queues are re-dispatched.

        Raises:
            StoreError: another store holds the directory lock, a file has a wrong size, or a
                new checkpoint file finds no disk space.
        """
        cfg = self.config
        os.makedirs(cfg.store_path_root_dir, exist_ok=True)
        fd = os.open(cfg.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise StoreError(f"store directory {cfg.store_path_root_dir} is locked by another store") from exc
        self._lock_fd = fd
        try:
            self.last_exit_ok = not os.path.exists(cfg.abort_path)
            self.commit_log.load()
            self._load_consume_queues()
            self.checkpoint = StoreCheckpoint(cfg.checkpoint_path)
            if self.index_service is not None:
                self.index_service.load(self.last_exit_ok, self.checkpoint.index_msg_timestamp)
            self._recover()
        except (ValueError, DiskFullError) as exc:
            self._release_lock()
            raise StoreError(f"cannot load store {cfg.store_path_root_dir}: {exc}") from exc
        os.makedirs(cfg.commit_log_dir, exist_ok=True)
        self.cleaner.refresh_disk_full()  # a restart on a full disk refuses writes at once
        with open(cfg.abort_path, "wb"):
            pass
        self._flush_commit_log = CommitLogFlushService(cfg, self.commit_log, self.checkpoint)
        self._flush_consume_queue = ConsumeQueueFlushService(cfg, self.commit_log, self.checkpoint,
                                                             self.all_consume_queues, self.index_service,
                                                             self.cleaner.run_once)
        self._flush_commit_log.start()
        self._flush_consume_queue.start()
        self.reput_from_offset = self.get_max_phy_offset()
        self.running = True
        log.info("message store started at %s (last exit %s, commit log %d..%d)", cfg.store_path_root_dir,
                 "clean" if self.last_exit_ok else "ABNORMAL", self.get_min_phy_offset(), self.get_max_phy_offset())

    def shutdown(self) -> None:
        """Flush everything, write the checkpoint, unmap files, delete ``abort``. Idempotent."""
        if not self.running:
            return
        self.running = False
        self.commit_log.shutdown_writes()
        if self._flush_commit_log is not None:
            self._flush_commit_log.shutdown()
        if self._flush_consume_queue is not None:
            self._flush_consume_queue.shutdown()
            self._flush_consume_queue.flush_all()
        self.commit_log.flush()
        assert self.checkpoint is not None
        ts = self.commit_log.last_store_timestamp
        if ts:
            self.checkpoint.physic_msg_timestamp = self.checkpoint.logics_msg_timestamp = ts
            if self.index_service is not None:
                self.checkpoint.index_msg_timestamp = ts
        if self.index_service is not None:
            self.index_service.shutdown()
        self.checkpoint.shutdown()
        self.commit_log.shutdown()
        for cq in self.all_consume_queues():
            cq.shutdown()
        try:
            os.remove(self.config.abort_path)
        except FileNotFoundError:
            pass
        self._release_lock()
        log.info("message store at %s shut down", self.config.store_path_root_dir)

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> MessageStore:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # -- consume queues --------------------------------------------------------------------
    def _load_consume_queues(self) -> None:
        root = self.config.consume_queue_dir
        if not os.path.isdir(root):
            return
        for topic in sorted(os.listdir(root)):
            if not is_valid_name(topic):
                log.error("ignoring %r in %s: not a legal topic name", topic, root)
                continue
            tdir = safe_join(root, topic)
            if not os.path.isdir(tdir):
                continue
            for qid in sorted(os.listdir(tdir)):
                if qid.lstrip("-").isdigit():
                    cq = self.find_consume_queue(topic, int(qid))
                    cq.load()

    def find_consume_queue(self, topic: str, queue_id: int, create: bool = True) -> ConsumeQueue | None:
        """The consume queue of topic/queue id, created (without files) when ``create``."""
        queues = self.consume_queue_table.get(topic)
        if queues is not None:
            cq = queues.get(queue_id)
            if cq is not None or not create:
                return cq
        elif not create:
            return None
        with self._cq_lock:
            # copy-on-write so readers iterating a snapshot never see a dict change size
            queues = dict(self.consume_queue_table.get(topic) or {})
            cq = queues.get(queue_id)
            if cq is None:
                cq = ConsumeQueue(topic, queue_id, self.config.consume_queue_dir,
                                  self.config.mapped_file_size_consume_queue, self.config.entry_reserve_ahead_bytes)
                queues[queue_id] = cq
                table = dict(self.consume_queue_table)
                table[topic] = queues
                self.consume_queue_table = table
            return cq

    def all_consume_queues(self) -> Iterable[ConsumeQueue]:
        return [cq for queues in self.consume_queue_table.values() for cq in queues.values()]

    # -- dispatch --------------------------------------------------------------------------
    def _dispatch(self, req: DispatchRequest) -> None:
        """Index one record (called under the append lock and during recovery)."""
        if req.sys_flag & MessageSysFlag.TRANSACTION_MASK in _NOT_OR_COMMIT:
            cq = self.find_consume_queue(req.topic, req.queue_id)
            cq.put_message_position_info(req.commit_log_offset, req.msg_size, req.tags_code,
                                         req.consume_queue_offset)
        if self.index_service is not None:
            self.index_service.build_index(req.topic, req.commit_log_offset, req.store_timestamp,
                                           req.sys_flag, req.get_properties())

    def _dispatch_batch(self, reqs: list[DispatchRequest], cq_entries: bytes | None = None) -> None:
        """Index the records of one batch put (all TRANSACTION_NOT/COMMIT, one queue, consecutive
        queue offsets, ascending CommitLog offsets): one consume-queue append, one index pass.
        ``cq_entries``: the records' consume-queue entries already packed (an encoded batch)."""
        if cq_entries is not None:
            first = reqs[0]
            self.find_consume_queue(first.topic, first.queue_id).put_packed_entries(cq_entries,
                                                                                    first.consume_queue_offset)
        else:
            by_queue: dict[tuple[str, int], list[tuple[int, int, int, int]]] = {}
            for req in reqs:
                if req.sys_flag & MessageSysFlag.TRANSACTION_MASK in _NOT_OR_COMMIT:
                    by_queue.setdefault((req.topic, req.queue_id), []).append(
                        (req.commit_log_offset, req.msg_size, req.tags_code, req.consume_queue_offset))
            for (topic, queue_id), entries in by_queue.items():
                self.find_consume_queue(topic, queue_id).put_message_position_infos(entries)
        if self.index_service is not None:
            self.index_service.build_index_many([(req.topic, req.commit_log_offset, req.store_timestamp, req.sys_flag,
                                                  req.get_properties()) for req in reqs])

    def register_arrival_listener(self, listener: ArrivalListener) -> None:
        """Call ``listener(topic, queue_id, max_offset, tags_code, properties)`` after each
        dispatched NOT/COMMIT record; ``max_offset`` = consume-queue offset + 1. Runs on the
        putting thread, outside the append lock; exceptions are logged and swallowed."""
        self._listeners = [*self._listeners, listener]

    def _notify(self, reqs: Sequence[DispatchRequest]) -> None:
        listeners = self._listeners
        if not listeners:
            return
        for req in reqs:
            if req.sys_flag & MessageSysFlag.TRANSACTION_MASK not in _NOT_OR_COMMIT:
                continue
            props = req.get_properties()
            for listener in listeners:
                try:
                    listener(req.topic, req.queue_id, req.consume_queue_offset + 1, req.tags_code, props)
                except Exception:
                    log.exception("message arrival listener failed")

    # -- recovery --------------------------------------------------------------------------
    def _recovery_dispatch(self, req: DispatchRequest) -> None:
        """:meth:`_dispatch` for records read back at start: one record that cannot be indexed
        (an illegal topic written by an older broker, a failing queue) is skipped with an ERROR
        naming its CommitLog offset; loading goes on with the next record."""
        try:
            if not is_valid_name(req.topic):
                raise UnsafePathError(f"illegal topic name {req.topic[:200]!r}")
            self._dispatch(req)
        except Exception as exc:  # noqa: BLE001 - one bad record never makes the store unloadable
            self.skipped_records += 1
            log.error("store load: skipping the record at commit log offset %d (topic %r, %d bytes): %s",
                      req.commit_log_offset, req.topic[:200], req.msg_size, exc)

    def _recover(self) -> None:
        cl = self.commit_log
        for cq in self.all_consume_queues():
            cq.recover()
        if self.last_exit_ok:
            end = cl.recover_normally()
        else:
            assert self.checkpoint is not None
            end = cl.recover_abnormally(self.checkpoint.get_min_timestamp(self.config.message_index_safe),
                                        self._recovery_dispatch)
        if self.index_service is not None:
            self.index_service.truncate(end)
        for cq in self.all_consume_queues():
            cq.truncate_dirty_logic_files(end)
        reput_from = max([cq.max_physic_offset for cq in self.all_consume_queues()] + [0])
        reput_from = max(reput_from, cl.get_min_offset())
        if reput_from < end:
            log.info("re-dispatching commit log %d..%d to the consume queues", reput_from, end)
            cl.dispatch_from(reput_from, self._recovery_dispatch)
        min_phy = max(cl.get_min_offset(), 0)
        table = {}
        for cq in self.all_consume_queues():
            cq.correct_min_offset(min_phy)
            table[(cq.topic, cq.queue_id)] = cq.get_max_offset_in_queue()
        cl.topic_queue_table = table

    # -- writing ---------------------------------------------------------------------------
    def put_message(self, msg: InnerMessage) -> PutMessageResult:
        """Store one message.

        Returns PUT_OK; SERVICE_NOT_AVAILABLE (also while the disk is full, see
        :mod:`.disk_space`); MESSAGE_ILLEGAL (topic empty or > 127 bytes, body > ``max_message_size``,
        record larger than a CommitLog file); PROPERTIES_SIZE_EXCEEDED (properties > 32767
        bytes); SERVICE_NOT_AVAILABLE (not started or shut down); FLUSH_DISK_TIMEOUT (SYNC_FLUSH
        and no fsync within ``sync_flush_timeout``; the message is stored).
        """
        if not self.running or self.disk_full:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        result, reqs = self.commit_log.put_message(msg)
        return self._after_put(result, reqs, msg.wait_store_msg_ok)

    def put_messages(self, batch: Sequence[InnerMessage]) -> PutMessageResult:
        """Store a batch (one lock acquisition, consecutive queue offsets, one file); same
        statuses as :meth:`put_message`. All records must be TRANSACTION_NOT/COMMIT."""
        if not self.running or self.disk_full:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        result, reqs = self.commit_log.put_messages(batch)
        return self._after_put(result, reqs, all(m.wait_store_msg_ok for m in batch))

    def put_message_async(self, msg: InnerMessage) -> PutMessageResult | asyncio.Future[PutMessageResult]:
        """:meth:`put_message` for a caller on an asyncio loop: the append runs at once on the
        calling thread and, when the put must wait for a SYNC_FLUSH fsync (``wait_store_msg_ok``),
        a future of the result is returned instead of blocking; it completes when the group
        commit covering the record is done (FLUSH_DISK_TIMEOUT after ``sync_flush_timeout``).
        Otherwise the result itself is returned. Must be called on the running loop's thread."""
        if not self.running or self.disk_full:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        result, reqs = self.commit_log.put_message(msg)
        return self._after_put(result, reqs, msg.wait_store_msg_ok, deferred=True)

    def put_plain(self, topic: str, queue_id: int, body: bytes, props: dict[str, str], flag: int, sys_flag: int,
                  born_timestamp: int, born_host: str, store_host: str,
                  reconsume_times: int) -> tuple[str, int] | None:
        """The single-send fast path: :meth:`put_message_async` of a plain message (transaction
        type NOT, no SYNC_FLUSH wait, store running and not full, a record the checks accept),
        with the record, its consume-queue entry and index keys written in one flat pass and no
        result objects. ``props`` are the stored properties (not changed); ``born_timestamp``
        in ms; hosts ``"ip:port"``. The same bytes, offsets, index entries and arrival calls as
        :meth:`put_message_async` with the equivalent :class:`InnerMessage`.

        Returns:
            ``(offset message id, queue offset)`` of the stored message, or None - nothing was
            written - for anything else (the caller takes :meth:`put_message_async`, which
            gives the exact status).
        """
        flusher = self._flush_commit_log
        if (not self.running or self.disk_full or flusher is None or flusher.sync
                or sys_flag & MessageSysFlag.TRANSACTION_MASK or self.replica_hook is not None):
            return None
        cl = self.commit_log
        try:
            born, store = packed_host(born_host), packed_host(store_host)
        except ValueError:  # not "ip:port": the InnerMessage path raises it
            return None
        encoded = encode_single(topic, body, props, queue_id, flag, sys_flag, born_timestamp, born, store,
                                reconsume_times, self.config.max_message_size, cl.file_size)
        if encoded is None:
            return None
        record, size, tags_code = encoded
        with cl.put_lock:
            if not cl.available:
                return None
            now = cl._store_time()
            mf = cl.mapped_file_queue.last_mapped_file()
            # (reserved <= file_size: past the reserved end or the file end, _writable_file reserves
            # the next chunk, or writes the end blank and rolls; the C writer below needs the space)
            if mf is None or mf.wrote_position + size + END_FILE_MIN_BLANK_LENGTH > mf.reserved:
                mf = cl._writable_file(size)  # the first file, the next chunk, or the end blank and the next file
                if mf is None:  # no disk space for it: the InnerMessage path answers code 14
                    return None
            queues = self.consume_queue_table.get(topic)
            cq = queues.get(queue_id) if queues is not None else None
            if cq is None:
                try:  # a new queue: its topic must make a safe directory (nothing written yet)
                    cq = self.find_consume_queue(topic, queue_id)
                except UnsafePathError:
                    return None
            phy = mf.file_from_offset + mf.wrote_position
            key = (topic, queue_id)
            table = cl.topic_queue_table
            queue_offset = table.get(key, 0)
            cq_file = cq.next_entries_file(queue_offset)  # None also when its reservation must grow
            if cq_file is None and not self._prepare_queue(topic, queue_id):
                return None  # nothing written
            table[key] = queue_offset + 1
            if cq_file is not None:  # record and entry in one call, both inside reserved space
                msg_id = place_single(record, tags_code, store, len(born), phy, queue_offset, now, mf._mm,
                                      mf.wrote_position, cq_file._mm, cq_file.wrote_position)
                mf.wrote_position += size
                cq_file.wrote_position += CQ_STORE_UNIT_SIZE
                cq.max_physic_offset = phy + size
            else:
                _, msg_id, _ = finish_batch(record, [tags_code], store, len(born), phy, queue_offset, now)
                mf.append(record)
                cq.put_message_position_info(phy, size, tags_code, queue_offset)
            index = self.index_service
            if index is not None:
                index.build_index(topic, phy, now, sys_flag, props)
            cl.last_store_timestamp = now
        for listener in self._listeners:
            try:
                listener(topic, queue_id, queue_offset + 1, tags_code, props)
            except Exception:
                log.exception("message arrival listener failed")
        return msg_id, queue_offset

    def put_messages_async(self, batch: Sequence[InnerMessage]) -> PutMessageResult | asyncio.Future[PutMessageResult]:
        """:meth:`put_messages` for a caller on an asyncio loop (see :meth:`put_message_async`)."""
        if not self.running or self.disk_full:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        result, reqs = self.commit_log.put_messages(batch)
        return self._after_put(result, reqs, all(m.wait_store_msg_ok for m in batch), deferred=True)

    def put_encoded_batch_async(self, batch: EncodedBatch) -> PutMessageResult | asyncio.Future[PutMessageResult]:
        """:meth:`put_messages_async` for a batch from ``commit_log.encode_batch`` (a
        SEND_BATCH_MESSAGE body turned into records in one step; every message waits)."""
        if not self.running or self.disk_full:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        result, reqs = self.commit_log.put_encoded_batch(batch)
        return self._after_put(result, reqs, True, deferred=True)

    def _after_put(self, result: PutMessageResult, reqs: list[DispatchRequest], wait: bool,
                   deferred: bool = False) -> PutMessageResult | asyncio.Future[PutMessageResult]:
        if result.put_message_status is not PutMessageStatus.PUT_OK:
            return result
        self._notify(reqs)
        flusher = self._flush_commit_log
        replica = self.replica_hook
        out: PutMessageResult | asyncio.Future[PutMessageResult] = result
        if flusher is not None and flusher.sync:
            ar = result.append_message_result
            end = ar.wrote_offset + ar.wrote_bytes
            if not wait:
                flusher.wakeup(end)
            elif deferred:
                out = self._flush_future(flusher, end, result)
            elif not flusher.wait_for_flush(end, self.config.sync_flush_timeout):
                log.warning("flush disk timeout for commit log offset %d", end)
                result.put_message_status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        if replica is not None and wait and deferred:
            ar = result.append_message_result
            return replica(ar.wrote_offset + ar.wrote_bytes, out)
        return out

    def _flush_future(self, flusher: CommitLogFlushService, end: int,
                      result: PutMessageResult) -> asyncio.Future[PutMessageResult]:
        loop = asyncio.get_running_loop()
        waiters = self._loop_waiters
        if waiters is None or waiters.loop is not loop or waiters.service is not flusher:
            waiters = self._loop_waiters = LoopFlushWaiters(flusher, loop, self.config.sync_flush_timeout)
        return waiters.wait(end, result)

    # -- replication (HA slave) ------------------------------------------------------------
    def append_to_commit_log(self, offset: int, data: bytes) -> bool:
        """Append bytes replicated from the master at CommitLog ``offset`` and dispatch every
        record they complete to its consume queue and the index (Java
        ``DefaultMessageStore.appendToCommitLog`` + ``ReputMessageService``); a record cut by
        the chunk end waits for the rest. False when nothing was written (store stopped,
        ``offset`` is not the end of a non-empty log, or the bytes cross a file boundary)."""
        if not self.running or not self.commit_log.append_data(offset, data):
            return False
        if data:
            self._reput()
        return True

    def _reput(self) -> None:
        cl = self.commit_log
        reqs: list[DispatchRequest] = []
        queue_table = cl.topic_queue_table
        with cl.put_lock:
            pos = self.reput_from_offset
            while True:
                mf = cl.mapped_file_queue.find_mapped_file_by_offset(pos)
                if mf is None:
                    break
                rel = pos - mf.file_from_offset
                if rel + END_FILE_MIN_BLANK_LENGTH > mf.wrote_position:
                    break
                size, magic = _SIZE_MAGIC.unpack(mf.read(rel, 8))
                if magic == BLANK_MAGIC_CODE:
                    if not mf.is_full():
                        break
                    pos = mf.file_from_offset + mf.file_size
                    continue
                if size <= 0 or rel + size > mf.wrote_position:
                    break
                r = cl.check_message_and_return_size(mf, rel, False)
                if not isinstance(r, DispatchRequest):
                    log.error("replicated commit log record at %d is unreadable; dispatch stops there", pos)
                    break
                try:
                    self._dispatch(r)  # a consume-queue entry that finds no disk space: retried later
                except DiskFullError as exc:
                    log.error("replicated commit log record at %d not dispatched yet: %s", pos, exc)
                    self._mark_disk_full()
                    break
                if r.sys_flag & MessageSysFlag.TRANSACTION_MASK in _NOT_OR_COMMIT:
                    queue_table[(r.topic, r.queue_id)] = r.consume_queue_offset + 1
                if r.store_timestamp > cl.last_store_timestamp:
                    cl.last_store_timestamp = r.store_timestamp
                reqs.append(r)
                pos += size
            self.reput_from_offset = pos
        self._notify(reqs)

    def get_commit_log_data(self, offset: int, max_bytes: int) -> bytes | None:
        """Up to ``max_bytes`` stored bytes from CommitLog ``offset`` within its file, or None
        (Java ``DefaultMessageStore.getCommitLogData``, read by the HA master)."""
        return self.commit_log.get_data(offset, max_bytes) if self.running else None

    # -- reading ---------------------------------------------------------------------------
    def get_message(self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
                    tag_filter: TagFilter | None = None,
                    max_total_bytes: int | None = None,
                    record_filter: RecordFilter | None = None) -> GetMessageResult | None:
        """Read up to ``max_msg_nums`` records of topic/queue id from consume-queue ``offset``.

        Args:
            group: consumer group (logging only).
            tag_filter: ``f(tags_code) -> bool`` deciding from the consume-queue tag code;
                None accepts all.
            max_total_bytes: stop before exceeding this many record bytes (default
                ``max_transfer_bytes_on_message_in_memory``, 256 KiB); at most
                ``max_transfer_count_on_message_in_memory`` (32) records per call.
            record_filter: ``f(record) -> bool`` deciding from the stored record itself
                (RocketMQ ``isMatchedByCommitLog``, e.g. an SQL92 subscription); None accepts all.

        Returns:
            A :class:`GetMessageResult` whose status follows docs/protocol.md §3.4 step 3, or None
            when the store is not running (the broker answers SYSTEM_ERROR).
        """
        if not self.running:
            return None
        cfg = self.config
        max_bytes = cfg.max_transfer_bytes_on_message_in_memory if max_total_bytes is None else max_total_bytes
        max_count = cfg.max_transfer_count_on_message_in_memory
        cq = self.find_consume_queue(topic, queue_id, create=False)
        if cq is None:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_offset = cq.get_min_offset_in_queue()
        max_offset = cq.get_max_offset_in_queue()
        res = GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
        if max_offset == 0:
            return res
        if offset < min_offset:
            res.status, res.next_begin_offset = GetMessageStatus.OFFSET_TOO_SMALL, min_offset
            return res
        if offset == max_offset:
            res.status, res.next_begin_offset = GetMessageStatus.OFFSET_OVERFLOW_ONE, offset
            return res
        if offset > max_offset:
            res.status, res.next_begin_offset = GetMessageStatus.OFFSET_OVERFLOW_BADLY, max_offset
            return res
        buf = cq.get_index_buffer(offset, max(_MAX_FILTER_BYTES, max_msg_nums * CQ_STORE_UNIT_SIZE))
        if buf is None:
            res.status, res.next_begin_offset = GetMessageStatus.OFFSET_FOUND_NULL, cq.roll_next_file(offset)
            return res
        res.status = GetMessageStatus.NO_MATCHED_MESSAGE
        limit = len(buf) - len(buf) % CQ_STORE_UNIT_SIZE
        buffers = res.message_buffers
        queue_offsets = res.message_queue_offsets
        total = 0
        next_phy_file_start = -1
        get = self.commit_log.get_message
        scanned = 0
        for phy, size, tags_code in CQ_ENTRY.iter_unpack(memoryview(buf)[:limit]):
            if buffers and (len(buffers) >= max_msg_nums or total + size > max_bytes or len(buffers) >= max_count):
                break
            scanned += CQ_STORE_UNIT_SIZE
            if next_phy_file_start >= 0 and phy < next_phy_file_start:
                continue
            if tag_filter is not None and not tag_filter(tags_code):
                if not buffers:
                    res.status = GetMessageStatus.NO_MATCHED_MESSAGE
                continue
            if size == INT_MAX:  # blank pre-fill entry
                continue
            rec = get(phy, size)
            if rec is None:
                if not buffers:
                    res.status = GetMessageStatus.MESSAGE_WAS_REMOVING
                next_phy_file_start = self.commit_log.roll_next_file(phy)
                continue
            if record_filter is not None and not record_filter(rec):
                if not buffers:
                    res.status = GetMessageStatus.NO_MATCHED_MESSAGE
                continue
            buffers.append(rec)
            queue_offsets.append(offset + scanned // CQ_STORE_UNIT_SIZE - 1)
            total += size
            res.status = GetMessageStatus.FOUND
            next_phy_file_start = -1
        res.buffer_total_size = total
        res.next_begin_offset = offset + scanned // CQ_STORE_UNIT_SIZE
        if scanned:  # Java: the consumer is slow when it reads data far behind the CommitLog end
            last_phy = CQ_ENTRY.unpack_from(buf, scanned - CQ_STORE_UNIT_SIZE)[0]
            behind = self.commit_log.get_max_offset() - last_phy
            res.suggest_pulling_from_slave = behind > total_physical_memory() * cfg.access_message_in_memory_max_ratio // 100
        return res

    def is_caught_up(self, topic: str, queue_id: int, offset: int) -> bool:
        """True when :meth:`get_message` from consume-queue ``offset`` would find nothing
        because the queue ends there: OFFSET_OVERFLOW_ONE, or NO_MESSAGE_IN_QUEUE /
        NO_MATCHED_LOGIC_QUEUE at offset 0 (a long-polling pull is held then, without reading).
        False when the store is not running or anything else would be answered."""
        if not self.running:
            return False
        cq = self.find_consume_queue(topic, queue_id, create=False)
        if cq is None:
            return offset == 0
        max_offset = cq.get_max_offset_in_queue()
        if max_offset == 0:
            return offset == 0
        return offset == max_offset and offset >= cq.get_min_offset_in_queue()

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """Consume-queue max offset (exclusive; 0 for an unknown queue)."""
        cq = self.find_consume_queue(topic, queue_id, create=False)
        return cq.get_max_offset_in_queue() if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """Consume-queue min offset (0 for an unknown queue)."""
        cq = self.find_consume_queue(topic, queue_id, create=False)
        return cq.get_min_offset_in_queue() if cq is not None else 0

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, consume_queue_offset: int) -> int:
        """CommitLog offset of the message at a consume-queue offset (0 if none)."""
        cq = self.find_consume_queue(topic, queue_id, create=False)
        entry = cq.get_entry(consume_queue_offset) if cq is not None else None
        return entry[0] if entry is not None else 0

    def look_message_by_offset(self, commit_log_offset: int, size: int | None = None) -> bytes | None:
        """The docs/protocol.md §4.5 record at a CommitLog offset, or None (bad offset, deleted, not written)."""
        if size is not None:
            return self.commit_log.get_message(commit_log_offset, size)
        return self.commit_log.look_message_by_offset(commit_log_offset)

    def _store_time_at(self, cq: ConsumeQueue, index: int) -> int:
        entry = cq.get_entry(index)
        if entry is None or entry[1] == INT_MAX or entry[0] < self.commit_log.get_min_offset():
            return -1
        return self.commit_log.get_store_timestamp(entry[0])

    def get_message_store_timestamp(self, topic: str, queue_id: int, consume_queue_offset: int) -> int:
        """Store time (ms) of the message at a consume-queue offset, or -1."""
        cq = self.find_consume_queue(topic, queue_id, create=False)
        return self._store_time_at(cq, consume_queue_offset) if cq is not None else -1

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        """Store time (ms) of the oldest message still in the queue, or -1."""
        cq = self.find_consume_queue(topic, queue_id, create=False)
        return self._store_time_at(cq, cq.get_min_offset_in_queue()) if cq is not None else -1

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """Consume-queue offset of the message stored at ``timestamp`` (ms): the first exact
        match, else the nearer of its two neighbours (the earlier one on a tie); the first or
        last entry when the time is outside the queue; 0 for an unknown or empty queue."""
        cq = self.find_consume_queue(topic, queue_id, create=False)
        if cq is None:
            return 0
        lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue() - 1
        if hi < lo:
            return lo
        left, right = lo, hi + 1
        while left < right:
            mid = (left + right) // 2
            if self._store_time_at(cq, mid) < timestamp:
                left = mid + 1
            else:
                right = mid
        if left > hi:
            return hi
        t_right = self._store_time_at(cq, left)
        if t_right == timestamp or left == lo:
            return left
        t_left = self._store_time_at(cq, left - 1)
        return left if abs(timestamp - t_left) > abs(timestamp - t_right) else left - 1

    def query_message(self, topic: str, key: str, max_num: int, begin: int = 0,
                      end: int = 2**63 - 1) -> QueryMessageResult:
        """Records indexed under ``topic#key`` (a KEYS item or a UNIQ_KEY) with a store time in
        [begin, end] ms, newest first, at most ``min(max_num, max_msgs_num_batch)``. Callers
        check the keys of what they get (hash collisions are possible), as the Java client does."""
        res = QueryMessageResult()
        if self.index_service is None or not self.running:
            return res
        found = self.index_service.query_offset(topic, key, min(max_num, self.config.max_msgs_num_batch), begin, end)
        res.index_last_update_timestamp = found.index_last_update_timestamp
        res.index_last_update_phyoffset = found.index_last_update_phyoffset
        for phy in found.phy_offsets:
            rec = self.commit_log.look_message_by_offset(phy)
            if rec is not None:
                res.message_buffers.append(rec)
                res.buffer_total_size += len(rec)
        return res

    def delete_expired_files(self, now_ms: int | None = None, force: bool = False, clean_at_once: int = 0) -> int:
        """Delete CommitLog files (never the last one) older than ``file_reserved_time`` hours
        by modification time, then the consume-queue and index files that only point into
        deleted data. RocketMQ does this at the ``delete_when`` hour only; ``force`` skips that
        check; ``clean_at_once`` > 0 deletes up to that many oldest files whatever their age (the
        disk-space guard's forcible clean). Returns the number of CommitLog files deleted."""
        now = time.time() if now_ms is None else now_ms / 1000
        if not force and not clean_at_once and not self.is_delete_hour(now):
            return 0
        mfq = self.commit_log.mapped_file_queue
        expired = 0
        with self.commit_log.put_lock:  # file lists are replaced, not mutated: one updater at a time
            for mf in mfq.files[:-1]:
                if expired < clean_at_once:
                    expired += 1
                    continue
                if mf.last_modified() + self.config.file_reserved_time * 3600 > now:
                    break
                expired += 1
            if expired:
                gone = mfq.delete_first_files(expired)
                log.info("deleted %d expired commit log files up to %s", expired, gone[-1].path)
            self.delete_queues_below_min_offset()
        return expired

    def is_delete_hour(self, now: float) -> bool:
        """Whether the local hour of ``now`` (epoch seconds) is one of ``delete_when``'s."""
        hours = {int(h) for h in self.config.delete_when.split(";") if h.strip().isdigit()}
        return time.localtime(now).tm_hour in hours

    def delete_queues_below_min_offset(self) -> None:
        """Delete the consume-queue and index files that only point below the CommitLog's
        first offset (after its first files were deleted)."""
        min_phy = self.get_min_phy_offset()
        for cq in self.all_consume_queues():
            cq.delete_expired_files(min_phy)
        if self.index_service is not None:
            self.index_service.delete_expired_files(min_phy)

    def get_min_phy_offset(self) -> int:
        return max(self.commit_log.get_min_offset(), 0)

    def get_max_phy_offset(self) -> int:
        return self.commit_log.get_max_offset()

    def get_topic_queue_offsets(self) -> dict[tuple[str, int], int]:
        """Snapshot of the next queue offset per (topic, queue id)."""
        return dict(self.commit_log.topic_queue_table)

    def delete_topics(self, topics: Iterable[str]) -> int:
        """Drop the consume queues (files included) of ``topics``; their CommitLog records stay
        until expiry. Returns the number of queues removed."""
        removed = 0
        with self.commit_log.put_lock, self._cq_lock:
            table = dict(self.consume_queue_table)
            for topic in topics:
                queues = table.pop(topic, None)
                for qid, cq in (queues or {}).items():
                    cq.destroy()
                    self.commit_log.topic_queue_table.pop((topic, qid), None)
                    removed += 1
                try:
                    os.rmdir(safe_join(self.config.consume_queue_dir, topic))
                except (OSError, UnsafePathError):
                    pass
            self.consume_queue_table = table
        return removed


