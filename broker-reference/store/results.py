"""Result types of the store API (RocketMQ ``PutMessageResult``, ``AppendMessageResult``,
``GetMessageResult`` and their status enums)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class PutMessageStatus(enum.Enum):
    """Outcome of a put. The broker maps MESSAGE_ILLEGAL and PROPERTIES_SIZE_EXCEEDED to response
    code 13, SERVICE_NOT_AVAILABLE to 14, FLUSH_DISK_TIMEOUT to 10 (message stored)."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class AppendMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    END_OF_FILE = "END_OF_FILE"
    MESSAGE_SIZE_EXCEEDED = "MESSAGE_SIZE_EXCEEDED"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


@dataclass(slots=True)
class AppendMessageResult:
    """Where a record (or a batch of records) landed.

    Attributes:
        status: :class:`AppendMessageStatus`.
        wrote_offset: CommitLog offset of the (first) record, bytes.
        wrote_bytes: bytes written (all records of a batch).
        msg_id: offset message id (docs/protocol.md §4.7); comma-joined for a batch, as RocketMQ.
        store_timestamp: store time, epoch ms.
        logics_offset: consume-queue offset of the (first) record (0 for PREPARED/ROLLBACK).
        msg_num: number of records.
    """

    status: AppendMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    msg_id: str = ""
    store_timestamp: int = 0
    logics_offset: int = 0
    msg_num: int = 1


@dataclass(slots=True)
class PutMessageResult:
    put_message_status: PutMessageStatus
    append_message_result: AppendMessageResult | None = None

    @property
    def status(self) -> PutMessageStatus:
        return self.put_message_status

    def is_ok(self) -> bool:
        """True when the message was stored (PUT_OK or a flush/slave timeout after storing)."""
        return (self.append_message_result is not None
                and self.append_message_result.status is AppendMessageStatus.PUT_OK)


class GetMessageStatus(enum.Enum):
    """Outcome of a lookup (docs/protocol.md §3.4 step 3 gives the pull response code of each)."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetMessageResult:
    """Records found by :meth:`MessageStore.get_message`.

    Attributes:
        status: :class:`GetMessageStatus`.
        next_begin_offset: consume-queue offset to pull from next.
        min_offset / max_offset: the queue's bounds at lookup time (max exclusive).
        message_buffers: raw docs/protocol.md §4.5 records, ready to be concatenated into a pull body.
        message_queue_offsets: consume-queue offset of each record.
        buffer_total_size: sum of the record sizes, bytes.
    """

    status: GetMessageStatus
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    message_buffers: list[bytes] = field(default_factory=list)
    message_queue_offsets: list[int] = field(default_factory=list)
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.message_buffers)

    def body(self) -> bytes:
        """The pull response body: the records back to back."""
        return b"".join(self.message_buffers)


@dataclass(slots=True)
class QueryMessageResult:
    """Records found by :meth:`MessageStore.query_message` (QUERY_MESSAGE), with the index
    progress the broker returns in the response header."""

    message_buffers: list[bytes] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0
    buffer_total_size: int = 0

    def body(self) -> bytes:
        return b"".join(self.message_buffers)
