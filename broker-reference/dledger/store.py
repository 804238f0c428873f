"""The message store in DLedger mode (Java ``DLedgerCommitLog``; dledger-protocol.md §5, §8, §10).

Messages are stored as DLedger entries (:mod:`.ledger`) whose body is the ordinary CommitLog
record, PHYSICALOFFSET = entry pos + 48: the record lies at its physical offset in the DLedger
data files, so pulls, queries and lookups read the data files like a CommitLog. What differs:

* a put goes through :meth:`DLedgerNode.append` and only succeeds once a majority holds the
  entry (its answer waits for the quorum future); a member that is not the master refuses it
  (SERVICE_NOT_AVAILABLE, code 14); a quorum timeout is OS_PAGECACHE_BUSY (code 1);
* consume queues and the index are dispatched from **committed** entries only, on every member
  (the commit log's max offset is the committed position), so consumers never see an entry
  that could still be truncated.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Sequence

from rocketmq_sdk.protocol.message_codec import decode_messages, encode_properties
from rocketmq_sdk.protocol.msgid import offset_msg_id_from_packed

from ..store.commit_log import (
    _NOT_OR_COMMIT,
    CommitLog,
    Dispatcher,
    DispatchRequest,
    EncodedBatch,
    encode_record,
)
from ..store.config import StoreConfig
from ..store.inner_message import InnerMessage, tags_string_to_tags_code
from ..store.message_store import MessageStore
from ..store.results import AppendMessageResult, AppendMessageStatus, PutMessageResult, PutMessageStatus
from .config import DLedgerConfig, parse_peers
from .entry import ENTRY_HEADER_SIZE
from .ledger import DLedgerLedger, LedgerError
from .node import AppendError, DLedgerNode
from .protocol import DLedgerCode

__all__ = ["DLedgerCommitLog", "DLedgerMessageStore", "dledger_config"]

log = logging.getLogger("rocketmq_broker.dledger")

_TX_MASK = 0xC  # MessageSysFlag.TRANSACTION_MASK
BatchDispatcher = Callable[[list[DispatchRequest], "bytes | None"], None]


def dledger_config(cfg: StoreConfig) -> DLedgerConfig:
    """The DLedger member settings of a store config (``dLegerGroup``, ``dLegerPeers``,
    ``dLegerSelfId`` and the timers).

    Raises:
        ValueError: missing or malformed DLedger keys.
    """
    return DLedgerConfig(cfg.d_leger_group, cfg.d_leger_self_id, parse_peers(cfg.d_leger_peers),
                         heart_beat_time_interval_ms=cfg.heart_beat_time_interval_ms,
                         max_heart_beat_leak=cfg.max_heart_beat_leak, min_vote_interval_ms=cfg.min_vote_interval_ms,
                         max_vote_interval_ms=cfg.max_vote_interval_ms, max_wait_ack_time_ms=cfg.max_wait_ack_time_ms,
                         max_push_timeout_ms=cfg.max_push_time_out_ms,
                         vote_wait_ms=cfg.heart_beat_time_interval_ms,
                         commit_push_interval_ms=cfg.max_push_time_out_ms,
                         error_sleep_ms=max(1, cfg.heart_beat_time_interval_ms // 4),
                         enable_batch_push=cfg.enable_batch_push, preferred_leader_ids=cfg.preferred_leader_id)


class DLedgerCommitLog(CommitLog):
    """A CommitLog whose files are the DLedger data files (reads by physical offset work as
    usual) and whose appends are DLedger entries."""

    def __init__(self, config: StoreConfig, dispatcher: Dispatcher, delay_levels: dict[int, int],
                 batch_dispatcher: BatchDispatcher, ledger: DLedgerLedger) -> None:
        super().__init__(config, dispatcher, delay_levels, batch_dispatcher)
        self.ledger = ledger
        self.mapped_file_queue = ledger.data
        self.node: DLedgerNode | None = None
        #: the broker is master (leader with its log committed and dispatched): puts allowed
        self.writable = False
        self.dispatched_index = -1

    # -- files: the ledger owns them ------------------------------------------------------
    def load(self) -> None:
        pass  # DLedgerMessageStore.start loads the ledger

    def recover_normally(self) -> int:
        return self.ledger.committed_pos

    def recover_abnormally(self, min_checkpoint_timestamp: int, dispatch) -> int:
        return self.ledger.committed_pos

    def _truncate(self, end: int) -> None:
        pass  # only DLedger truncates its log

    def get_max_offset(self) -> int:
        """The committed position: consumers and lookups see nothing beyond it."""
        return self.ledger.committed_pos

    def get_min_offset(self) -> int:
        return self.ledger.data.get_min_offset()

    def get_data(self, offset: int, max_bytes: int) -> bytes | None:
        return None  # no HA transfer in DLedger mode

    def append_data(self, offset: int, data: bytes) -> bool:
        return False

    def shutdown(self) -> None:
        self.shutdown_writes()
        with self.ledger.lock:
            self.ledger.shutdown()

    # -- dispatch of committed entries ----------------------------------------------------
    def committed_requests(self, up_to_index: int) -> list[DispatchRequest]:
        """Dispatch requests of the entries after :attr:`dispatched_index` up to ``up_to_index``."""
        reqs = []
        ledger = self.ledger
        index = max(self.dispatched_index + 1, ledger.begin_index)
        while index <= up_to_index and index >= 0:
            try:
                entry = ledger.get(index)
            except LedgerError as exc:
                log.error("dledger: committed entry %d unreadable (%s); dispatch stops", index, exc)
                break
            phy = entry.pos + ENTRY_HEADER_SIZE
            mf = self.mapped_file_queue.find_mapped_file_by_offset(phy)
            r = self.check_message_and_return_size(mf, phy - mf.file_from_offset, False) if mf is not None else None
            if isinstance(r, DispatchRequest):
                reqs.append(r)
            else:
                log.error("dledger: entry %d holds no message record; skipped", index)
            self.dispatched_index = index
            index += 1
        return reqs

    def dispatch_from(self, offset: int, dispatch) -> int:
        """Start-up reput: entries whose record starts at or after ``offset``, committed ones only."""
        ledger = self.ledger
        index = ledger.begin_index
        while 0 <= index <= ledger.committed_index and ledger.get(index).pos + ENTRY_HEADER_SIZE < offset:
            index += 1
        self.dispatched_index = index - 1
        for r in self.committed_requests(ledger.committed_index):
            dispatch(r)
        return ledger.committed_pos

    # -- appends ----------------------------------------------------------------------------
    def dledger_put(self, msg: InnerMessage) -> tuple[PutMessageResult, asyncio.Future | None]:
        """Append one message as a DLedger entry; returns the result (queue offset, msg id) and
        the quorum future (None when refused)."""
        node = self.node
        if node is None or not self.writable or not self.available:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE), None
        wire = self._check(msg)
        if type(wire) is not tuple:
            return PutMessageResult(wire, AppendMessageResult(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)), None
        topic_b, props_b, born, store_host, size = wire
        prepare = self.prepare_queue
        if prepare is not None and not prepare(msg.topic, msg.queue_id, 1):
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE), None
        now = self._store_time()
        key = (msg.topic, msg.queue_id)
        counted = (msg.sys_flag & _TX_MASK) in _NOT_OR_COMMIT
        queue_offset = self.topic_queue_table.get(key, 0) if counted else 0

        def build(phy: int) -> bytes:
            return bytes(encode_record(topic_b, msg.body, props_b, msg.queue_id, msg.flag, msg.sys_flag,
                                       msg.born_timestamp, born, store_host, now, queue_offset, phy,
                                       msg.reconsume_times, msg.prepared_transaction_offset))
        try:
            entry, fut = node.append(size, build)
        except AppendError as exc:
            status = (PutMessageStatus.SERVICE_NOT_AVAILABLE if exc.code is DLedgerCode.NOT_LEADER
                      else PutMessageStatus.OS_PAGECACHE_BUSY)
            return PutMessageResult(status), None
        if counted:
            self.topic_queue_table[key] = queue_offset + 1
        self.last_store_timestamp = now
        phy = entry.pos + ENTRY_HEADER_SIZE
        return PutMessageResult(PutMessageStatus.PUT_OK, AppendMessageResult(
            AppendMessageStatus.PUT_OK, phy, size, offset_msg_id_from_packed(store_host, phy), now, queue_offset, 1)), fut


def _after_quorum(result: PutMessageResult, fut: asyncio.Future) -> asyncio.Future[PutMessageResult]:
    out: asyncio.Future[PutMessageResult] = asyncio.get_running_loop().create_future()

    def done(f: asyncio.Future) -> None:
        if out.done():
            return
        exc = None if f.cancelled() else f.exception()
        if f.cancelled() or exc is not None:
            code = getattr(exc, "code", None)
            status = (PutMessageStatus.UNKNOWN_ERROR if code is DLedgerCode.TERM_CHANGED
                      else PutMessageStatus.OS_PAGECACHE_BUSY)
            out.set_result(PutMessageResult(status))
        else:
            out.set_result(result)
    fut.add_done_callback(done)
    return out


class DLedgerMessageStore(MessageStore):
    """:class:`MessageStore` over a DLedger group (``enableDLegerCommitLog=true``).

    Args:
        config: the store settings, DLedger keys included.

    Attributes:
        node: this member (:class:`DLedgerNode`), started by :meth:`start_dledger` on the
            broker's loop.

    Raises:
        ValueError: missing or malformed DLedger keys.
    """

    def __init__(self, config: StoreConfig) -> None:
        super().__init__(config)
        dcfg = dledger_config(config)
        base = os.path.join(config.store_path_root_dir, f"dledger-{dcfg.self_id}")
        self.ledger = DLedgerLedger(base, config.mapped_file_size_commit_log,
                                    data_dir=config.store_path_d_ledger_commit_log or None)
        cl = DLedgerCommitLog(config, self._dispatch, self.commit_log.delay_levels, self._dispatch_batch, self.ledger)
        cl.on_disk_full = self._mark_disk_full
        cl.prepare_queue = self._prepare_queue
        self.commit_log = cl
        self.node = DLedgerNode(dcfg, self.ledger, on_commit=self._on_commit)
        cl.node = self.node

    def start(self) -> None:
        """Load the DLedger log, then the consume queues and index as usual (re-dispatching the
        committed entries they miss)."""
        self.ledger.load()
        super().start()
        self.commit_log.dispatched_index = max(self.commit_log.dispatched_index, -1)

    async def start_dledger(self, host: str | None = None) -> int:
        """Start the DLedger member on the running loop; returns its port."""
        return await self.node.start(host)

    async def stop_dledger(self) -> None:
        await self.node.stop()

    # -- committed entries → consume queues ----------------------------------------------
    def _on_commit(self, committed_index: int) -> None:
        cl: DLedgerCommitLog = self.commit_log  # type: ignore[assignment]
        if not self.running:
            return
        reqs = cl.committed_requests(committed_index)
        table = cl.topic_queue_table
        for r in reqs:
            self._recovery_dispatch(r)
            if not cl.writable and r.sys_flag & _TX_MASK in _NOT_OR_COMMIT:
                key = (r.topic, r.queue_id)
                if table.get(key, 0) < r.consume_queue_offset + 1:
                    table[key] = r.consume_queue_offset + 1
        self._notify(reqs)

    def become_master(self) -> None:
        """The leader's log is committed and dispatched: rebuild the queue offsets from the
        consume queues and accept puts (DLedgerRoleChangeHandler.changeToMaster)."""
        cl: DLedgerCommitLog = self.commit_log  # type: ignore[assignment]
        self._on_commit(self.ledger.committed_index)
        cl.topic_queue_table = {(cq.topic, cq.queue_id): cq.get_max_offset_in_queue()
                                for cq in self.all_consume_queues()}
        cl.writable = True

    def become_slave(self) -> None:
        self.commit_log.writable = False  # type: ignore[attr-defined]

    # -- puts -------------------------------------------------------------------------------
    def _put(self, msgs: Sequence[InnerMessage]) -> PutMessageResult | asyncio.Future[PutMessageResult]:
        if not self.running or self.disk_full:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        cl: DLedgerCommitLog = self.commit_log  # type: ignore[assignment]
        results, futs = [], []
        for m in msgs:
            r, fut = cl.dledger_put(m)
            if fut is None:
                if not results:
                    return r
                break  # the ones already appended are answered by the quorum futures below
            results.append(r)
            futs.append(fut)
        first = results[0]
        if len(results) > 1:
            ars = [r.append_message_result for r in results]
            first = PutMessageResult(PutMessageStatus.PUT_OK, AppendMessageResult(
                AppendMessageStatus.PUT_OK, ars[0].wrote_offset, sum(a.wrote_bytes for a in ars),
                ",".join(a.msg_id for a in ars), ars[-1].store_timestamp, ars[0].logics_offset, len(ars)))
        return _after_quorum(first, futs[-1] if len(futs) == 1 else asyncio.gather(*futs))

    def put_message_async(self, msg: InnerMessage) -> PutMessageResult | asyncio.Future[PutMessageResult]:
        return self._put([msg])

    def put_messages_async(self, batch: Sequence[InnerMessage]) -> PutMessageResult | asyncio.Future[PutMessageResult]:
        return self._put(list(batch))

    def put_encoded_batch_async(self, batch: EncodedBatch) -> PutMessageResult | asyncio.Future[PutMessageResult]:
        """A SEND_BATCH_MESSAGE: one DLedger entry per message (as 4.9.8's DLedgerCommitLog),
        all answered when the last is committed."""
        msgs = []
        for m in decode_messages(bytes(batch.records), decompress=False):
            props = m.properties or {}
            msgs.append(InnerMessage(topic=batch.topic, queue_id=batch.queue_id, body=m.body,
                                     properties_string=encode_properties(props), flag=m.flag, sys_flag=m.sys_flag,
                                     born_timestamp=m.born_timestamp, born_host=m.born_host,
                                     store_host=m.store_host, reconsume_times=m.reconsume_times,
                                     tags_code=tags_string_to_tags_code(props.get("TAGS"))))
        return self._put(msgs)

    def put_plain(self, *args, **kwargs) -> None:
        return None  # no flat fast path: the InnerMessage path goes through DLedger

    def put_message(self, msg: InnerMessage) -> PutMessageResult:
        log.error("dledger store: synchronous put_message is not supported; use put_message_async")
        return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)

    def put_messages(self, batch: Sequence[InnerMessage]) -> PutMessageResult:
        return self.put_message(batch[0]) if batch else PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)

    def retention_limit(self) -> int:
        """Absolute position below which data files may be deleted: the committed position,
        the dispatched one (consume queues built), and on the leader the lowest position not yet
        stored on every member (a member whose water mark is unknown keeps everything)."""
        ledger, node = self.ledger, self.node
        limit = min(ledger.committed_pos, ledger.pos_after(self.commit_log.dispatched_index))
        if node.is_leader:
            for member, mark in node.peer_status().items():
                if member != node.config.self_id:
                    limit = min(limit, ledger.pos_after(mark) if mark >= 0 else ledger.data.get_min_offset())
        return limit

    def delete_expired_files(self, now_ms: int | None = None, force: bool = False, clean_at_once: int = 0) -> int:
        """DLedger's CleanSpaceService: delete the oldest data files last modified more than
        ``file_reserved_time`` + 1 hours ago (DLedger's ``fileReservedHours``), at the
        ``delete_when`` hour unless ``force`` (disk above ``disk_max_used_space_ratio``);
        ``clean_at_once`` > 0 deletes up to that many oldest files whatever their age (the
        forcible clean). Never the file being written, nor one holding an entry that is not
        committed, not yet in the consume queues, or (on the leader) not yet stored on every
        member (:meth:`retention_limit`). Then the consume-queue and index files pointing only
        below the new first offset. Returns the number of data files deleted."""
        now = time.time() if now_ms is None else now_ms / 1000
        if not force and not clean_at_once and not self.is_delete_hour(now):
            return 0
        reserved_s = (self.config.file_reserved_time + 1) * 3600
        ledger = self.ledger
        with ledger.lock:
            limit = self.retention_limit()
            count = 0
            for mf in ledger.data.files[:-1]:
                if mf.file_from_offset + mf.file_size > limit:
                    break
                if count >= clean_at_once and mf.last_modified() + reserved_s > now:
                    break
                count += 1
            deleted = ledger.delete_first_data_files(count) if count else 0
        if deleted:
            self.delete_queues_below_min_offset()
        return deleted
