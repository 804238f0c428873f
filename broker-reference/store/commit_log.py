"""CommitLog (docs/protocol.md §5.2): every message of every topic, appended to one sequence of files.

Records are docs/protocol.md §4.5 layouts built with
:func:`rocketmq_sdk.protocol.message_codec.encode_stored_message`: messages are validated
outside the lock; inside the one append lock the store assigns the physical offset, the queue
offset (table keyed by topic and queue id, advanced only for TRANSACTION_NOT/COMMIT records)
and the store timestamp and builds the record with them (one ``join``, no patching), then
writes it (``encode_record``: the C twin ``_ccommit_log.c`` beside this file, or :func:`encode_record_py`).
A SEND_BATCH_MESSAGE body takes :meth:`CommitLog.encode_batch` / :meth:`CommitLog.put_encoded_batch`
(:mod:`.batch_records`): all records built in one step outside the lock, offsets and store time
written in under it. A record never spans
files: when ``len + 8 > remaining`` an end-of-file blank ``int remaining, int 0xCBD43194`` is
written and the record goes to the next file.
"""

from __future__ import annotations

import functools
import logging
import struct
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rocketmq_sdk._speedups import load
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.codes import MessageSysFlag
from rocketmq_sdk.protocol.message_codec import (
    BLANK_MAGIC_CODE,
    MAX_PROPERTIES_LENGTH,
    MESSAGE_MAGIC_CODE,
    decode_properties,
    encode_stored_message,
    pack_host,
    store_timestamp_pos,
)
from rocketmq_sdk.protocol.msgid import offset_msg_id_from_packed
from rocketmq_sdk.protocol.validators import is_valid_name

from .batch_records import Extra, encode_batch, finish_batch
from .config import StoreConfig
from .inner_message import InnerMessage, tags_string_to_tags_code
from .mapped_file import DiskFullError, MappedFile, MappedFileQueue
from .results import AppendMessageResult, AppendMessageStatus, PutMessageResult, PutMessageStatus

log = logging.getLogger("rocketmq_broker.store.commit_log")

END_FILE_MIN_BLANK_LENGTH = 8
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
_BLANK = struct.Struct(">ii")
_Q = struct.Struct(">q")
_HEAD = struct.Struct(">iiiiiqqiq")
_TAIL = struct.Struct(">iqi")
_NOT_OR_COMMIT = (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)
_ZERO_WINDOW = 8 * 1024 * 1024  # bytes zeroed after a truncation point (> any record)


def encode_record_py(topic: bytes, body: bytes, properties: bytes, queue_id: int, flag: int, sys_flag: int,
                     born_timestamp: int, born_host: bytes, store_host: bytes, store_timestamp: int,
                     queue_offset: int, physical_offset: int, reconsume_times: int,
                     prepared_transaction_offset: int) -> bytearray:
    """Pure-Python twin of ``_ccommit_log.encode_record``: one docs/protocol.md §4.5 record, :func:`encode_stored_message`
    with positional arguments (timestamps in ms, offsets in bytes / queue entries)."""
    return encode_stored_message(
        topic=topic, body=body, properties=properties, queue_id=queue_id, flag=flag, sys_flag=sys_flag,
        born_timestamp=born_timestamp, born_host=born_host, store_host=store_host, store_timestamp=store_timestamp,
        queue_offset=queue_offset, physical_offset=physical_offset, reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset)


_ccommit_log = load("rocketmq_broker.store._ccommit_log")
encode_record = _ccommit_log.encode_record if _ccommit_log is not None else encode_record_py


@functools.lru_cache(maxsize=4096)
def packed_host(host: str) -> bytes:
    """``"ip:port"`` as the record's packed host (4 or 16 bytes ip + int port); memoised."""
    return pack_host(host)[0]


def parse_delay_levels(spec: str) -> dict[int, int]:
    """``"1s 5s 10s 30s 1m ..."`` → ``{1: 1000, 2: 5000, ...}`` (ms; units s, m, h, d)."""
    units = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    return {i + 1: int(tok[:-1]) * units[tok[-1]] for i, tok in enumerate(spec.split())}


@dataclass(slots=True)
class DispatchRequest:
    """What the dispatcher needs to index one record (RocketMQ ``DispatchRequest``)."""

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    sys_flag: int
    prepared_transaction_offset: int
    properties: dict[str, str] | None
    properties_string: str | None = None

    def get_properties(self) -> dict[str, str]:
        if self.properties is None:
            self.properties = decode_properties(self.properties_string or "")
        return self.properties


Dispatcher = Callable[[DispatchRequest], None]
"""Called inside the append lock (or during recovery) for every appended record."""


@dataclass(slots=True)
class EncodedBatch:
    """The records of one batch put, built outside the append lock by
    :meth:`CommitLog.encode_batch` (queue offset, physical offset, store time still 0)."""

    topic: str
    queue_id: int
    sys_flag: int
    born_host_len: int  # 8 (IPv4) or 20 (IPv6) bytes
    store_host: bytes  # packed ip + port
    records: bytearray  # the docs/protocol.md §4.5 records, back to back
    sizes: list[int]  # bytes per record
    tags_codes: list[int]
    properties: list[dict[str, str]]  # merged properties per record


# sentinel results of check_message_and_return_size
END_OF_DATA = "end"
BLANK = "blank"
INVALID = "invalid"


class CommitLog:
    """The CommitLog of a store.

    Args:
        config: store configuration.
        dispatcher: called for each appended record, under the append lock.
        batch_dispatcher: when given, called instead with all records of a batch put (same
            order, under the lock) and, for :meth:`put_encoded_batch`, their consume-queue
            entries already packed (else None).
        delay_levels: delay level → ms, to recompute ``SCHEDULE_TOPIC_XXXX`` tag codes (deliver
            times) when records are re-dispatched at recovery.
    """

    def __init__(self, config: StoreConfig, dispatcher: Dispatcher,
                 delay_levels: dict[int, int] | None = None,
                 batch_dispatcher: Callable[[list[DispatchRequest], bytes | None], None] | None = None) -> None:
        self.config = config
        self.file_size = config.mapped_file_size_commit_log
        self.mapped_file_queue = MappedFileQueue(config.commit_log_dir, self.file_size, config.reserve_ahead_bytes)
        self.dispatcher = dispatcher
        self.batch_dispatcher = batch_dispatcher
        self.delay_levels = delay_levels or {}
        self.put_lock = threading.Lock()
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.last_store_timestamp = 0  # store time of the last appended record, ms
        self.available = True  # cleared under the lock at shutdown
        #: called (lock held) when a new file finds no disk space
        self.on_disk_full: Callable[[], None] | None = None
        #: ``f(topic, queue_id, entries) -> bool`` called (lock held) before ``entries`` records of
        #: one queue are appended: False refuses the put (its consume queue has no room on disk)
        self.prepare_queue: Callable[[str, int, int], bool] | None = None

    # -- building records ------------------------------------------------------------------
    def _check(self, msg: InnerMessage) -> tuple[bytes, bytes, bytes, bytes, int] | PutMessageStatus:
        """Validate a message; returns (topic, properties, born host, store host, record size)
        in wire form, or the refusal status."""
        if not is_valid_name(msg.topic):  # also: a topic becomes a consume-queue directory name
            return PutMessageStatus.MESSAGE_ILLEGAL
        topic = msg.topic.encode("utf-8")
        props = msg.properties_string.encode("utf-8") if msg.properties_string else b""
        if len(props) > MAX_PROPERTIES_LENGTH:
            return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        body_len = len(msg.body)
        if body_len > self.config.max_message_size:
            return PutMessageStatus.MESSAGE_ILLEGAL
        born, store = packed_host(msg.born_host), packed_host(msg.store_host)
        # the docs/protocol.md §4.5 layout's size (encode_stored_message): 48 fixed + hosts + store timestamp (8)
        # + reconsumeTimes/preparedTxOffset/bodyLen (16) + body + topic (1 + n) + properties (2 + n)
        size = 75 + len(born) + len(store) + body_len + len(topic) + len(props)
        if size > self.config.max_message_size + 32 * 1024 or size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return PutMessageStatus.MESSAGE_ILLEGAL
        return topic, props, born, store, size

    def _store_time(self) -> int:
        """Now in ms, never before the last record's store time (lock held): store times stay
        monotonic for the search by time."""
        now = int(time.time() * 1000)
        return now if now >= self.last_store_timestamp else self.last_store_timestamp

    def _writable_file(self, needed: int) -> MappedFile | None:
        """The file that has room for ``needed`` bytes plus the end blank (lock held), with disk
        space reserved for them (:meth:`MappedFile.reserve`), or None when the disk has no room
        for a new file or for the bytes (``on_disk_full`` is called; the put is refused, code 14;
        nothing of the record is written)."""
        try:
            mf = self.mapped_file_queue.get_last_mapped_file(0)
            if needed + END_FILE_MIN_BLANK_LENGTH > mf.remaining():
                remaining = mf.remaining()
                mf.append(_BLANK.pack(remaining, BLANK_MAGIC_CODE))
                mf.wrote_position = self.file_size
                mf = self.mapped_file_queue.get_last_mapped_file(0)
            end = mf.wrote_position + needed + END_FILE_MIN_BLANK_LENGTH
            if end > mf.reserved:
                mf.reserve(end)
        except DiskFullError as exc:
            log.error("commit log: %s; refusing writes until space is freed", exc)
            if self.on_disk_full is not None:
                self.on_disk_full()
            return None
        return mf

    def _place(self, mf: MappedFile, msg: InnerMessage, wire: tuple[bytes, bytes, bytes, bytes, int],
               now: int, dispatch: bool = True) -> tuple[int, int, DispatchRequest]:
        """Build and write one record with its final offsets and store time (lock held);
        returns (physical offset, queue offset, dispatch request)."""
        phy = mf.file_from_offset + mf.wrote_position
        topic, queue_id, sys_flag = msg.topic, msg.queue_id, msg.sys_flag
        tx = sys_flag & MessageSysFlag.TRANSACTION_MASK
        if tx in _NOT_OR_COMMIT:
            key = (topic, queue_id)
            table = self.topic_queue_table
            queue_offset = table.get(key, 0)
            table[key] = queue_offset + 1
        else:
            queue_offset = 0
        topic_b, props_b, born, store, size = wire
        mf.append(encode_record(topic_b, msg.body, props_b, queue_id, msg.flag, sys_flag, msg.born_timestamp, born,
                                store, now, queue_offset, phy, msg.reconsume_times, msg.prepared_transaction_offset))
        tags_code = msg.tags_code
        if topic == SCHEDULE_TOPIC and self.delay_levels:
            # the deliver time counts from the record's store time, as Java's dispatch computes it
            # (and as a slave or a recovery recomputes it from the record: the queues stay identical)
            tags_code = now + self.delay_levels.get(queue_id + 1, 0)
        req = DispatchRequest(topic, queue_id, phy, size, tags_code, now, queue_offset, sys_flag,
                              msg.prepared_transaction_offset, msg.properties, msg.properties_string)
        if dispatch:
            self.dispatcher(req)
        return phy, queue_offset, req

    # -- appending -------------------------------------------------------------------------
    def put_message(self, msg: InnerMessage) -> tuple[PutMessageResult, list[DispatchRequest]]:
        """Append one record; returns the result and its dispatch request (for listeners)."""
        wire = self._check(msg)
        if type(wire) is not tuple:
            return PutMessageResult(wire, AppendMessageResult(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED
                                                              if wire is PutMessageStatus.MESSAGE_ILLEGAL
                                                              else AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED)), []
        size = wire[4]
        with self.put_lock:
            if not self.available:
                return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE), []
            now = self._store_time()
            prepare = self.prepare_queue
            if prepare is not None and not prepare(msg.topic, msg.queue_id, 1):
                return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE), []
            mf = self._writable_file(size)
            if mf is None:
                return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE), []
            phy, queue_offset, req = self._place(mf, msg, wire, now)
            self.last_store_timestamp = now
        result = AppendMessageResult(AppendMessageStatus.PUT_OK, phy, size, offset_msg_id_from_packed(wire[3], phy),
                                     now, queue_offset, 1)
        return PutMessageResult(PutMessageStatus.PUT_OK, result), [req]

    def put_messages(self, msgs: Sequence[InnerMessage]) -> tuple[PutMessageResult, list[DispatchRequest]]:
        """Append a batch under one lock acquisition: consecutive queue offsets, all records in
        the same file. Batches of PREPARED/ROLLBACK records are refused (MESSAGE_ILLEGAL)."""
        if not msgs:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL,
                                    AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR, msg_num=0)), []
        wires = []
        total = 0
        for msg in msgs:
            if msg.sys_flag & MessageSysFlag.TRANSACTION_MASK not in _NOT_OR_COMMIT:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL), []
            wire = self._check(msg)
            if type(wire) is not tuple:
                return PutMessageResult(wire), []
            wires.append(wire)
            total += wire[4]
        if total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL), []
        reqs = []
        phys = []
        with self.put_lock:
            if not self.available:
                return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE), []
            now = self._store_time()
            prepare = self.prepare_queue
            if prepare is not None and not prepare(msgs[0].topic, msgs[0].queue_id, len(msgs)):
                return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE), []
            mf = self._writable_file(total)
            if mf is None:
                return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE), []
            first_queue_offset = 0
            place = self._place
            batch_dispatcher = self.batch_dispatcher
            per_record = batch_dispatcher is None
            for i, (msg, wire) in enumerate(zip(msgs, wires, strict=True)):
                phy, queue_offset, req = place(mf, msg, wire, now, per_record)
                if i == 0:
                    first_queue_offset = queue_offset
                phys.append(phy)
                reqs.append(req)
            if batch_dispatcher is not None:
                batch_dispatcher(reqs, None)
            self.last_store_timestamp = now
        ids = ",".join(offset_msg_id_from_packed(w[3], p) for w, p in zip(wires, phys, strict=True))
        result = AppendMessageResult(AppendMessageStatus.PUT_OK, phys[0], total, ids, now, first_queue_offset, len(msgs))
        return PutMessageResult(PutMessageStatus.PUT_OK, result), reqs

    def encode_batch(self, body, topic: str, extra: Extra, queue_id: int, sys_flag: int, born_timestamp: int,
                     born_host: str, store_host: str, reconsume_times: int) -> EncodedBatch | None:
        """The records of a SEND_BATCH_MESSAGE body (see :mod:`.batch_records`), or None when
        the batch is anything but plainly storable (malformed, empty, refused by the checks of
        :meth:`put_messages`): the caller then builds InnerMessages and calls
        :meth:`put_messages`, which gives the exact refusal. Called outside the append lock."""
        if sys_flag & MessageSysFlag.TRANSACTION_MASK not in _NOT_OR_COMMIT or not is_valid_name(topic):
            return None
        try:
            topic_b = topic.encode("utf-8")
            born, store = packed_host(born_host), packed_host(store_host)
            encoded = encode_batch(body, topic_b, extra, queue_id, sys_flag, born_timestamp, born, store,
                                   reconsume_times, self.config.max_message_size, self.file_size)
        except (ValueError, OverflowError, struct.error):  # bad host, int out of range: the InnerMessage path decides
            return None
        if encoded is None:
            return None
        records, sizes, tags_codes, properties = encoded
        return EncodedBatch(topic, queue_id, sys_flag, len(born), store, records, sizes, tags_codes, properties)

    def put_encoded_batch(self, batch: EncodedBatch) -> tuple[PutMessageResult, list[DispatchRequest]]:
        """:meth:`put_messages` for a batch from :meth:`encode_batch`: the same bytes, offsets,
        dispatch and result, with the records finished in one call."""
        records = batch.records
        total = len(records)
        n = len(batch.sizes)
        topic, queue_id, sys_flag = batch.topic, batch.queue_id, batch.sys_flag
        with self.put_lock:
            if not self.available:
                return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE), []
            now = self._store_time()
            prepare = self.prepare_queue
            if prepare is not None and not prepare(topic, queue_id, n):
                return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE), []
            mf = self._writable_file(total)
            if mf is None:
                return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE), []
            phy0 = mf.file_from_offset + mf.wrote_position
            key = (topic, queue_id)
            table = self.topic_queue_table
            q0 = table.get(key, 0)
            table[key] = q0 + n
            cq_entries, ids, phys = finish_batch(records, batch.tags_codes, batch.store_host, batch.born_host_len,
                                                 phy0, q0, now)
            mf.append(records)
            reqs = [DispatchRequest(topic, queue_id, phy, size, tags_code, now, q, sys_flag, 0, props)
                    for phy, size, tags_code, q, props
                    in zip(phys, batch.sizes, batch.tags_codes, range(q0, q0 + n), batch.properties, strict=True)]
            if self.batch_dispatcher is not None:
                self.batch_dispatcher(reqs, cq_entries)
            else:
                for req in reqs:
                    self.dispatcher(req)
            self.last_store_timestamp = now
        result = AppendMessageResult(AppendMessageStatus.PUT_OK, phy0, total, ids, now, q0, n)
        return PutMessageResult(PutMessageStatus.PUT_OK, result), reqs

    # -- reading ---------------------------------------------------------------------------
    def get_message(self, offset: int, size: int) -> bytes | None:
        """The ``size`` bytes at CommitLog ``offset`` if written and not deleted, else None."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        return mf.read(offset - mf.file_from_offset, size)

    def look_message_by_offset(self, offset: int) -> bytes | None:
        """The whole record at ``offset`` (size read from its first int), or None."""
        head = self.get_message(offset, 8)
        if head is None:
            return None
        size, magic = _BLANK.unpack(head)
        if magic != MESSAGE_MAGIC_CODE or size <= 0:
            return None
        return self.get_message(offset, size)

    def get_store_timestamp(self, offset: int) -> int:
        """Store time (ms) of the record at ``offset``, or -1."""
        head = self.get_message(offset, 76)
        if head is None:
            return -1
        return _Q.unpack_from(head, store_timestamp_pos(struct.unpack_from(">i", head, 36)[0]))[0]

    def get_min_offset(self) -> int:
        """Offset of the first byte still stored (-1 when empty)."""
        return self.mapped_file_queue.get_min_offset()

    def get_max_offset(self) -> int:
        """Offset just after the last written byte."""
        return self.mapped_file_queue.get_max_offset()

    def get_data(self, offset: int, max_bytes: int) -> bytes | None:
        """Up to ``max_bytes`` written bytes from ``offset`` to the end of the written data of
        the file holding it (never across a file boundary), or None when that file does not
        exist (Java ``CommitLog.getData``: what the HA master sends to a slave)."""
        mf = self.mapped_file_queue.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        n = min(mf.wrote_position - pos, max_bytes)
        return mf.read(pos, n) if n > 0 else None

    def append_data(self, offset: int, data: bytes) -> bool:
        """Append replicated bytes at ``offset`` (Java ``CommitLog.appendData``, HA slave): into
        the last file, creating the first one at ``offset``'s file start when the log is empty
        or the next one when the last is full. False (nothing written) when ``offset`` is not
        the current end of a non-empty log, ``data`` would cross the file boundary, or the disk
        has no room for it (``on_disk_full`` is called, as for a refused put)."""
        with self.put_lock:
            if not self.available:
                return False
            try:
                mf = self.mapped_file_queue.get_last_mapped_file(offset)
                if mf.file_from_offset + mf.wrote_position != offset or len(data) > mf.remaining():
                    return False
                if data:
                    mf.append(data)  # reserves disk space first: DiskFullError, nothing written
            except DiskFullError as exc:
                log.error("commit log: replicated bytes at %d refused: %s", offset, exc)
                if self.on_disk_full is not None:
                    self.on_disk_full()
                return False
            return True

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    # -- recovery --------------------------------------------------------------------------
    def check_message_and_return_size(self, mf: MappedFile, pos: int, check_crc: bool):
        """Parse the record at file-relative ``pos`` without copying it.

        Returns a :class:`DispatchRequest`, ``END_OF_DATA`` (zeros), ``BLANK`` (end-of-file
        marker) or ``INVALID`` (torn or corrupt record).
        """
        buf = mf.raw_view()
        if pos + 8 > self.file_size:
            return BLANK
        # past the reserved space (a loaded file: all of it) a hole reads as zeros, and is never
        # read through the mapping
        if pos + 8 > mf.reserved and not mf.backed(pos, 8):
            return END_OF_DATA
        total, magic = _BLANK.unpack_from(buf, pos)
        if magic == BLANK_MAGIC_CODE:
            return BLANK
        if total == 0 and magic == 0:
            return END_OF_DATA
        if magic != MESSAGE_MAGIC_CODE or total < 91 or pos + total > self.file_size:
            return INVALID
        try:
            (_t, _m, crc, queue_id, _flag, queue_offset, phy, sys_flag, _born) = _HEAD.unpack_from(buf, pos)
            if phy != mf.file_from_offset + pos:
                return INVALID
            p = pos + 48 + (20 if sys_flag & MessageSysFlag.BORNHOST_V6 else 8)
            store_ts = _Q.unpack_from(buf, p)[0]
            p += 8 + (20 if sys_flag & MessageSysFlag.STOREHOST_V6 else 8)
            _reconsume, prepared, body_len = _TAIL.unpack_from(buf, p)
            p += 16
            if body_len < 0 or p + body_len > pos + total:
                return INVALID
            if check_crc and zlib.crc32(buf[p:p + body_len]) & 0x7FFFFFFF != crc:
                log.warning("CRC mismatch of record at %d", phy)
                return INVALID
            p += body_len
            topic_len = struct.unpack_from(">b", buf, p)[0]
            p += 1
            topic = bytes(buf[p:p + topic_len]).decode("utf-8")
            p += topic_len
            props_len = struct.unpack_from(">h", buf, p)[0]
            p += 2
            props_str = bytes(buf[p:p + props_len]).decode("utf-8") if props_len > 0 else ""
            p += max(props_len, 0)
            if topic_len <= 0 or props_len < 0 or p - pos != total:
                return INVALID
        except (struct.error, UnicodeDecodeError):
            return INVALID
        props = decode_properties(props_str)
        tags_code = tags_string_to_tags_code(props.get(MC.TAGS))
        if topic == SCHEDULE_TOPIC:
            level = int(props.get(MC.DELAY_TIME_LEVEL, "0") or 0)
            if level and self.delay_levels:
                level = min(level, max(self.delay_levels))
                tags_code = store_ts + self.delay_levels.get(level, 0)
        return DispatchRequest(topic, queue_id, phy, total, tags_code, store_ts, queue_offset, sys_flag,
                               prepared, props, props_str)

    def _scan(self, start_index: int, dispatch: Dispatcher | None, check_crc: bool, start_pos: int = 0) -> int:
        """Walk records from file ``start_index`` (at file-relative ``start_pos``); returns the
        offset after the last valid record."""
        files = self.mapped_file_queue.files
        process_offset = files[start_index].file_from_offset + start_pos
        for i, mf in enumerate(files[start_index:]):
            pos = start_pos if i == 0 else 0
            while True:
                r = self.check_message_and_return_size(mf, pos, check_crc)
                if isinstance(r, DispatchRequest):
                    pos += r.msg_size
                    process_offset = mf.file_from_offset + pos
                    self.last_store_timestamp = max(self.last_store_timestamp, r.store_timestamp)
                    if dispatch is not None:
                        dispatch(r)
                    continue
                if r == BLANK:
                    process_offset = mf.file_from_offset + self.file_size
                    break
                if r == INVALID:
                    log.warning("commit log recovery: invalid record at %d, truncating there",
                                mf.file_from_offset + pos)
                return process_offset
        return process_offset

    def recover_normally(self) -> int:
        """After a clean shutdown: validate the last three files and cut after the last good
        record. Returns the CommitLog end offset."""
        files = self.mapped_file_queue.files
        if not files:
            return 0
        end = self._scan(max(0, len(files) - 3), None, self.config.check_crc_on_recover)
        self._truncate(end)
        return end

    def recover_abnormally(self, min_checkpoint_timestamp: int, dispatch: Dispatcher) -> int:
        """After a crash: re-dispatch every record from the newest file whose first record is
        older than ``min_checkpoint_timestamp`` (ms), checking CRCs, and cut the torn tail."""
        files = self.mapped_file_queue.files
        if not files:
            return 0
        start = 0
        for i in range(len(files) - 1, -1, -1):
            r = self.check_message_and_return_size(files[i], 0, False)
            if isinstance(r, DispatchRequest) and r.store_timestamp and r.store_timestamp <= min_checkpoint_timestamp:
                start = i
                break
        log.info("abnormal recovery from commit log file %s", files[start].path)
        end = self._scan(start, dispatch, self.config.check_crc_on_recover)
        self._truncate(end)
        return end

    def dispatch_from(self, offset: int, dispatch: Dispatcher) -> int:
        """Re-dispatch every record from CommitLog ``offset`` to the end (start-up reput of what
        the consume queues miss); returns the end offset."""
        files = self.mapped_file_queue.files
        for i, mf in enumerate(files):
            if mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
                return self._scan(i, dispatch, False, offset - mf.file_from_offset)
        return self.get_max_offset()

    def _truncate(self, end: int) -> None:
        self.mapped_file_queue.truncate_dirty_files(end, _ZERO_WINDOW)
        self.mapped_file_queue.flushed_where = end

    # -- durability / lifecycle ------------------------------------------------------------
    def flush(self) -> int:
        """``msync`` everything written; returns the flushed offset."""
        return self.mapped_file_queue.flush()

    @property
    def flushed_where(self) -> int:
        return self.mapped_file_queue.flushed_where

    def load(self) -> None:
        self.mapped_file_queue.load()

    def shutdown_writes(self) -> None:
        """Refuse further appends (waits for one in progress)."""
        with self.put_lock:
            self.available = False

    def shutdown(self) -> None:
        """Refuse further appends, then unmap the files."""
        self.shutdown_writes()
        self.mapped_file_queue.shutdown()
