"""RECALL_MESSAGE (370, RocketMQ 5.3): cancel a timer message before delivery by its recall handle.

Answers as 5.3.3's ``RecallMessageProcessor`` (../shared/docs/rocketmq5-remoting.md §6.5, captures
``rmq5_timer.jsonl`` 122-159), checks in this order:

* a slave → SLAVE_NOT_AVAILABLE "recall failed, broker service not available" (the request
  table's slave rule, so before the next check; 5.3.3 checks ``recallMessageEnable`` first);
* ``recall_message_enable`` false (5.x's default) → NO_PERMISSION "recall failed, operation is
  forbidden" (and the message is delivered);
* the request's topic unknown → TOPIC_NOT_EXIST "recall failed, the topic[X] not exist";
* a handle that does not decode → ILLEGAL_OPERATION "recall handle is invalid";
* the handle's topic is not the request's → ILLEGAL_OPERATION "recall failed, topic not match";
  its broker is not this one → ILLEGAL_OPERATION "recall failed, broker service not available";
* its time already past (the message is due or delivered) or beyond the max timer delay →
  ILLEGAL_OPERATION "recall failed, timestamp invalid".

Otherwise a delete entry (``TIMER_DEL_UNIQKEY``, the handle's deliver time, tag ``_RECALL_TAG_``)
goes into the wheel and the answer is SUCCESS with ``msgId`` = the message's ``UNIQ_KEY`` - also
for a second recall of the same handle and for a well-formed handle of no message (nothing to
cancel), as 5.3.3. The ACL check asks PUB on the topic (5.x ACL 2.0's action for RECALL_MESSAGE).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from rocketmq_broker.store.inner_message import InnerMessage, tags_string_to_tags_code
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.message_codec import encode_properties
from rocketmq_sdk.protocol.recall import RecallHandle, RecallMessageRequestHeader
from rocketmq_sdk.remoting import Channel, RemotingCommand

from ..controller_util import then
from ..requests import PUB, Acl, SlaveRule, TopicRes, handles
from .service import delete_key

if TYPE_CHECKING:
    from ..context import BrokerContext

__all__ = ["RECALL_TAG", "RecallProcessor"]

log = logging.getLogger("rocketmq_broker.timer")

#: tag of the delete entry a recall writes (5.x ``RecallMessageProcessor.RECALL_MESSAGE_TAG``)
RECALL_TAG = "_RECALL_TAG_"
_UNAVAILABLE = "recall failed, broker service not available"
_REGION = {"MSG_REGION": "DefaultRegion"}


class RecallProcessor:
    """Serves RECALL_MESSAGE on a 5.x broker (``broker.timer`` set; ``recall_message_enable``,
    ``broker_name`` and ``broker_addr`` read from ``broker.config`` at each request)."""

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    @handles(RequestCode.RECALL_MESSAGE, header=RecallMessageRequestHeader, writes=True, acl=Acl(TopicRes("topic", PUB)),
             on_slave=SlaveRule.refuse(ResponseCode.SLAVE_NOT_AVAILABLE, _UNAVAILABLE), v5_only=True)
    def recall(self, ch: Channel, cmd: RemotingCommand):
        h = RecallMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        b = self.broker
        config, timer = b.config, b.timer
        if not config.recall_message_enable or timer is None:
            return self._refuse(cmd, ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
        topic = h.topic or ""
        if not topic or b.topics.get(topic) is None:
            return self._refuse(cmd, ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{topic}] not exist")
        try:
            handle = RecallHandle.decode(h.recall_handle)
        except ValueError as exc:
            return self._refuse(cmd, ResponseCode.ILLEGAL_OPERATION, str(exc))
        if handle.topic != topic:
            return self._refuse(cmd, ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match")
        if handle.broker_name != config.broker_name:
            return self._refuse(cmd, ResponseCode.ILLEGAL_OPERATION, _UNAVAILABLE)
        try:
            at = int(handle.timestamp)
        except ValueError:
            at = -1
        left = at - timer.clock()
        if left <= 0 or left >= timer.max_delay_ms:
            return self._refuse(cmd, ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
        inner = timer.transform(self._delete_entry(ch, h, handle))

        def answer(result) -> RemotingCommand:
            if result is None or not result.is_ok():
                return self._refuse(cmd, ResponseCode.SYSTEM_ERROR, "recall failed, execute error")
            log.info("recall of timer message %s (topic %s, due %s) by %s", handle.message_id, topic, at,
                     ch.remote_addr)
            return cmd.response(ResponseCode.SUCCESS, "not set any response code",
                                {"msgId": handle.message_id, **_REGION})

        return then(b.put_message(inner, schedule=False), answer)

    def _delete_entry(self, ch: Channel, h: RecallMessageRequestHeader, handle: RecallHandle) -> InnerMessage:
        """The delete entry of ``handle`` (5.x ``RecallMessageProcessor.buildMessage``)."""
        now = int(time.time() * 1000)
        props = {MC.TIMER_DEL_UNIQKEY: delete_key(handle.topic, handle.message_id),
                 MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: handle.message_id, MC.TIMER_DELIVER_MS: handle.timestamp,
                 MC.TAGS: RECALL_TAG, MC.PRODUCER_GROUP: h.producer_group or ""}
        return InnerMessage(topic=handle.topic, queue_id=0, body=b"0", properties_string=encode_properties(props),
                            tags_code=tags_string_to_tags_code(RECALL_TAG), born_timestamp=now,
                            born_host=ch.remote_addr, store_host=self.broker.config.broker_addr, properties=props)

    @staticmethod
    def _refuse(cmd: RemotingCommand, code: int, remark: str) -> RemotingCommand:
        return cmd.response(code, remark, dict(_REGION))
