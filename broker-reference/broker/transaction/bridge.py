"""Store access for transactional messages (RocketMQ ``TransactionalMessageBridge``, docs/protocol.md §5.9).

Half messages live in ``RMQ_SYS_TRANS_HALF_TOPIC`` (queue 0) as ordinary TRANSACTION_NOT_TYPE
records carrying ``REAL_TOPIC``/``REAL_QID``; every commit or rollback appends an op message
(tag ``d``, body = the half message's queue offset as ASCII decimal) to the same queue id of
``RMQ_SYS_TRANS_OP_HALF_TOPIC``. The check service's progress in both topics is kept as the
consume offsets of group ``CID_RMQ_SYS_TRANS``, so it survives restarts with consumerOffset.json.
"""

from __future__ import annotations

import enum
import inspect
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rocketmq_broker.store.inner_message import InnerMessage, tags_string_to_tags_code
from rocketmq_broker.store.results import GetMessageStatus, PutMessageResult
from rocketmq_sdk.exceptions import FrameError
from rocketmq_sdk.protocol.codes import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, MessageSysFlag
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.message import MessageExt
from rocketmq_sdk.protocol.message_codec import decode_message, encode_properties
from rocketmq_sdk.protocol.msgid import create_uniq_id

if TYPE_CHECKING:
    from ..context import BrokerContext

log = logging.getLogger("rocketmq_broker.transaction")

#: Group under which the check progress in the half and op topics is stored (``MixAll.CID_SYS_RMQ_TRANS``).
TRANS_CONSUMER_GROUP = "CID_RMQ_SYS_TRANS"
#: Tag of op messages that mark a half message as committed or rolled back.
REMOVE_TAG = "d"


class PullStatus(enum.Enum):
    """What a read of the half/op queue found (the Java client's ``PullStatus`` buckets)."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_PULL_STATUS = {
    GetMessageStatus.FOUND: PullStatus.FOUND,
    GetMessageStatus.NO_MATCHED_MESSAGE: PullStatus.NO_MATCHED_MSG,
    GetMessageStatus.NO_MESSAGE_IN_QUEUE: PullStatus.NO_NEW_MSG,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: PullStatus.NO_NEW_MSG,
    # Java's store creates a missing consume queue on lookup and answers NO_MESSAGE_IN_QUEUE
    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE: PullStatus.NO_NEW_MSG,
}


@dataclass
class QueueRead:
    """Messages read from a half or op queue.

    Attributes:
        status: :class:`PullStatus`.
        next_begin_offset: consume-queue offset to read from next.
        messages: decoded records (bodies as stored), empty unless FOUND.
    """

    status: PullStatus
    next_begin_offset: int = 0
    messages: list[MessageExt] = field(default_factory=list)


async def resolve(value):
    """Await ``value`` if it is awaitable (``BrokerController.put_message`` under SYNC_FLUSH)."""
    return await value if inspect.isawaitable(value) else value


class TransactionalMessageBridge:
    """Reads and writes of the half/op topics on behalf of the send path, END_TRANSACTION and the
    check service. Every method runs on the broker's event loop."""

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    # -- half messages ----------------------------------------------------------------------
    @staticmethod
    def parse_half_message(inner: InnerMessage) -> InnerMessage:
        """Redirect a prepared message to the half topic (Java ``parseHalfMessageInner``): the
        real topic and queue id go to ``REAL_TOPIC``/``REAL_QID``, the transaction bits of
        ``sys_flag`` become NOT_TYPE (so the record gets a consume-queue entry in the half
        topic), queue 0."""
        props = inner.get_properties()
        props[MC.REAL_TOPIC] = inner.topic
        props[MC.REAL_QUEUE_ID] = str(inner.queue_id)
        inner.sys_flag = MessageSysFlag.reset_transaction_value(inner.sys_flag, MessageSysFlag.TRANSACTION_NOT_TYPE)
        inner.topic = TRANS_HALF_TOPIC
        inner.queue_id = 0
        inner.properties = props
        inner.properties_string = encode_properties(props)
        return inner

    def look_message_by_offset(self, commit_log_offset: int) -> MessageExt | None:
        """The record at a CommitLog offset (body as stored), or None."""
        raw = self.broker.store.look_message_by_offset(commit_log_offset)
        if raw is None:
            return None
        try:
            return decode_message(raw, 0, decompress=False)[0]
        except FrameError:
            log.warning("unreadable record at commit log offset %d", commit_log_offset)
            return None

    def renew_half_message(self, msg: MessageExt) -> InnerMessage:
        """A copy of a half message for re-appending to its half queue (Java
        ``renewHalfMessageInner``; the user flag and reconsume times are kept too)."""
        props = dict(msg.properties)
        return InnerMessage(topic=msg.topic, queue_id=msg.queue_id, body=msg.body,
                            properties_string=encode_properties(props), flag=msg.flag,
                            tags_code=tags_string_to_tags_code(props.get(MC.TAGS)), sys_flag=msg.sys_flag,
                            born_timestamp=msg.born_timestamp, born_host=msg.born_host, store_host=msg.store_host,
                            reconsume_times=msg.reconsume_times, wait_store_msg_ok=False, properties=props)

    async def put(self, inner: InnerMessage) -> PutMessageResult | None:
        """Store ``inner`` without the delay redirect; the result (None when the store is down)."""
        return await resolve(self.broker.put_message(inner, schedule=False))

    # -- op messages ------------------------------------------------------------------------
    async def put_op_message(self, half: MessageExt) -> bool:
        """Append the ``d`` op message of ``half`` (its queue offset as the body) to the op queue
        with the half message's queue id (Java ``addRemoveTagInTransactionOp``)."""
        addr = self.broker.config.broker_addr
        props = {MC.TAGS: REMOVE_TAG, MC.WAIT_STORE_MSG_OK: "false", MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: create_uniq_id()}
        inner = InnerMessage(topic=TRANS_OP_HALF_TOPIC, queue_id=half.queue_id,
                             body=str(half.queue_offset).encode("ascii"), properties_string=encode_properties(props),
                             tags_code=tags_string_to_tags_code(REMOVE_TAG), born_timestamp=int(time.time() * 1000),
                             born_host=addr, store_host=addr, wait_store_msg_ok=False, properties=props)
        result = await self.put(inner)
        if result is None or not result.is_ok():
            log.error("op message for half offset %d (queue %d) not stored: %s", half.queue_offset, half.queue_id,
                      None if result is None else result.status.value)
            return False
        return True

    # -- reading the queues -----------------------------------------------------------------
    def read(self, topic: str, queue_id: int, offset: int, nums: int) -> QueueRead | None:
        """Up to ``nums`` records of ``topic``/``queue_id`` from ``offset``; None when the store
        is not running."""
        res = self.broker.store.get_message(TRANS_CONSUMER_GROUP, topic, queue_id, offset, nums)
        if res is None:
            log.error("reading %s queue %d at %d: the store is not running", topic, queue_id, offset)
            return None
        status = _PULL_STATUS.get(res.status, PullStatus.OFFSET_ILLEGAL)
        out = QueueRead(status, res.next_begin_offset)
        if status is PullStatus.FOUND:
            for raw, qoff in zip(res.message_buffers, res.message_queue_offsets, strict=True):
                try:
                    msg = decode_message(raw, 0, decompress=False)[0]
                except FrameError:
                    log.warning("unreadable record in %s queue %d at %d", topic, queue_id, qoff)
                    continue
                out.messages.append(msg)
            if not out.messages:
                out.status = PullStatus.NO_MATCHED_MSG
        return out

    # -- progress ---------------------------------------------------------------------------
    def fetch_consume_offset(self, topic: str, queue_id: int) -> int:
        """Check progress in a half/op queue: the committed offset of ``CID_RMQ_SYS_TRANS``, else
        the queue's min offset."""
        offset = self.broker.offsets.query(TRANS_CONSUMER_GROUP, topic, queue_id)
        if offset == -1:
            offset = self.broker.store.get_min_offset_in_queue(topic, queue_id)
        return offset

    def update_consume_offset(self, topic: str, queue_id: int, offset: int) -> None:
        self.broker.offsets.commit(TRANS_CONSUMER_GROUP, topic, queue_id, offset)
