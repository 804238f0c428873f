"""END_TRANSACTION (37): commit or roll back a half message (RocketMQ ``EndTransactionProcessor``).

The request is oneway from the SDKs, so the response is only seen by callers that invoke it
synchronously. As Java 4.9: a slave answers SLAVE_NOT_AVAILABLE; ``commitOrRollback`` 0 (UNKNOW)
or an unknown value is logged and ignored (no response); the half record is looked up at
``commitLogOffset`` and must carry the request's producer group (``PGROUP``), queue offset
(``tranStateTableOffset``) and CommitLog offset, else SYSTEM_ERROR with Java's remarks. A commit
stores the message again in ``REAL_TOPIC``/``REAL_QID`` (transaction bits COMMIT,
``preparedTransactionOffset`` = the half record's offset, properties string unchanged) and,
once stored, writes the op message; a rollback writes only the op message. On a 5.x broker a
committed timer message (``TIMER_DELIVER_MS`` / ``TIMER_DELAY_*``) goes into the timer wheel at
the commit, as 5.x: never delivered before its time (a delay counts from the commit).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rocketmq_broker.store.inner_message import InnerMessage, tags_string_to_tags_code
from rocketmq_broker.store.results import PutMessageStatus
from rocketmq_sdk.protocol.codes import TRANS_HALF_TOPIC, MessageSysFlag, RequestCode, ResponseCode
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.headers import EndTransactionRequestHeader
from rocketmq_sdk.protocol.message import MessageExt
from rocketmq_sdk.protocol.message_codec import encode_properties
from rocketmq_sdk.remoting import Channel, RemotingCommand

from ..requests import ACL_NONE, SlaveRule, handles
from .bridge import TransactionalMessageBridge

if TYPE_CHECKING:
    from ..context import BrokerContext

log = logging.getLogger("rocketmq_broker.transaction")

_COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
_ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
_PUT_FAILED = {
    PutMessageStatus.CREATE_MAPEDFILE_FAILED: (ResponseCode.SYSTEM_ERROR, "Create mapped file failed."),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (ResponseCode.SERVICE_NOT_AVAILABLE, "Service not available now."),
    PutMessageStatus.OS_PAGECACHE_BUSY: (ResponseCode.SYSTEM_ERROR, "OS page cache busy, please try another machine"),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}


class EndTransactionProcessor:
    """Serves END_TRANSACTION; see the module docstring for the rules."""

    def __init__(self, broker: BrokerContext, bridge: TransactionalMessageBridge) -> None:
        self.broker = broker
        self.bridge = bridge

    @handles(RequestCode.END_TRANSACTION, header=EndTransactionRequestHeader, writes=True, acl=ACL_NONE,
             on_slave=SlaveRule.refuse(ResponseCode.SLAVE_NOT_AVAILABLE, "Can't commit or rollback a transaction from a slave"))
    def process(self, ch: Channel, cmd: RemotingCommand):
        h = EndTransactionRequestHeader.from_ext_fields(cmd.ext_fields)
        if not self.broker.is_master:
            log.warning("message store is slave mode, so end transaction is forbidden")
            return cmd.response(ResponseCode.SLAVE_NOT_AVAILABLE)
        kind = h.commit_or_rollback
        what = {_COMMIT: "commit", _ROLLBACK: "rollback"}.get(kind if kind is not None else -1)
        if h.from_transaction_check:
            if what is None:
                log.warning("check of producer %s transaction state: still pending (type %s). %s remark %s",
                            ch.remote_addr, kind, h, cmd.remark)
                return None
            log.info("check of producer %s transaction state: the producer says %s. %s", ch.remote_addr, what, h)
        elif what is None:
            if kind == MessageSysFlag.TRANSACTION_NOT_TYPE:
                log.info("producer %s ended transaction %s as unknown; it will be checked. remark %s",
                         ch.remote_addr, h.msg_id, cmd.remark)
            return None
        elif kind == _ROLLBACK:
            log.info("producer %s rolled back transaction %s. remark %s", ch.remote_addr, h.msg_id, cmd.remark)
        return self._end(cmd, h, kind == _COMMIT)

    async def _end(self, cmd: RemotingCommand, h: EndTransactionRequestHeader, commit: bool) -> RemotingCommand:
        half = self.bridge.look_message_by_offset(h.commit_log_offset or 0)
        error = self._check_prepare_message(half, h)
        if error is not None:
            log.warning("END_TRANSACTION %s from group %s refused: %s", h.msg_id, h.producer_group, error)
            return cmd.response(ResponseCode.SYSTEM_ERROR, error)
        assert half is not None
        if not commit:
            await self.bridge.put_op_message(half)
            return cmd.response(ResponseCode.SUCCESS)
        committed = self._end_message_transaction(half, h.commit_log_offset or 0)
        timer = self.broker.timer
        if timer is not None and timer.check(dict(committed.get_properties())) is None:
            committed = timer.transform(committed)  # 5.x: a timer message is scheduled at its commit
        result = await self.bridge.put(committed)
        if result is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "store putMessage return null")
        if not result.is_ok():
            if result.status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED):
                return cmd.response(ResponseCode.MESSAGE_ILLEGAL,
                                    "The message is illegal, maybe msg body or properties length not matched. msg "
                                    f"body length limit {self.broker.config.store.max_message_size}B, msg properties "
                                    "length limit 32KB.")
            code, remark = _PUT_FAILED.get(result.status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"))
            return cmd.response(code, remark)
        await self.bridge.put_op_message(half)
        return cmd.response(ResponseCode.SUCCESS)

    @staticmethod
    def _check_prepare_message(half: MessageExt | None, h: EndTransactionRequestHeader) -> str | None:
        """Java ``checkPrepareMessage``: None when the record matches the request, else the remark.
        A record outside the half topic is refused too (Java would fail on its missing
        ``REAL_TOPIC`` later)."""
        if half is None or half.topic != TRANS_HALF_TOPIC:
            return "Find prepared transaction message failed"
        if half.properties.get(MC.PRODUCER_GROUP) != h.producer_group:
            return "The producer group wrong"
        if half.queue_offset != h.tran_state_table_offset:
            return "The transaction state table offset wrong"
        if half.commit_log_offset != h.commit_log_offset:
            return "The commit log offset wrong"
        return None

    @staticmethod
    def _end_message_transaction(half: MessageExt, commit_log_offset: int) -> InnerMessage:
        """The committed message: the half record moved back to its real topic/queue (Java
        ``endMessageTransaction`` plus the fields ``processRequest`` sets). Java clears
        ``REAL_TOPIC``/``REAL_QID``/``TRAN_MSG`` only from the property map, after the properties
        string was built, so the stored record (what consumers see) still carries them: so here."""
        props = dict(half.properties)
        topic = props.get(MC.REAL_TOPIC, "")
        queue_id = int(props.get(MC.REAL_QUEUE_ID, "0") or 0)
        return InnerMessage(topic=topic, queue_id=queue_id, body=half.body, properties_string=encode_properties(props),
                            flag=half.flag, tags_code=tags_string_to_tags_code(props.get(MC.TAGS)),
                            sys_flag=MessageSysFlag.reset_transaction_value(half.sys_flag, _COMMIT),
                            born_timestamp=half.born_timestamp, born_host=half.born_host, store_host=half.store_host,
                            reconsume_times=half.reconsume_times, prepared_transaction_offset=commit_log_offset,
                            wait_store_msg_ok=False, properties=props)
