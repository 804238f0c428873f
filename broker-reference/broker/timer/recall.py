"""RECALL_MESSAGE (370, RocketMQ 5.3): cancel a timer message before delivery by its recall handle.

Answers as 5.3.3's ``RecallMessageProcessor`` (../shared/docs/rocketmq5-remoting.md §6.5, captures
``rmq5_timer.jsonl`` 122-159), checks in this order:

* ``recall_message_enable`` false (5.x's default) → NO_PERMISSION "recall failed, operation is
  forbidden" (and the message is delivered);
* a slave → SLAVE_NOT_AVAILABLE "recall failed, broker service not available";
* the request's topic unknown → TOPIC_NOT_EXIST "recall failed, the topic[X] not exist";
* a handle that does not decode → ILLEGAL_OPERATION "recall handle is invalid";
* the handle's topic is not the request's → ILLEGAL_OPERATION "recall failed, topic not match";
  its broker is not this one → ILLEGAL_OPERATION "recall failed, broker service not available";
* its time already past (the message is due or delivered) or beyond the max timer delay →
  ILLEGAL_OPERATION "recall failed, timestamp invalid".

Otherwise a delete entry (``TIMER_DEL_UNIQKEY``, the handle's deliver time, tag ``_RECALL_TAG_``)
goes into the wheel and the answer is SUCCESS with ``msgId`` = the message's ``UNIQ_KEY`` - also
for a second recall of the same handle and for a well-formed handle of no message (nothing to
cancel), as 5.3.3.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from rocketmq_broker.store.inner_message import InnerMessage, tags_string_to_tags_code
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.message_codec import encode_properties
from rocketmq_sdk.protocol.recall import RecallHandle, RecallMessageRequestHeader
from rocketmq_sdk.remoting import Channel, RemotingCommand

from ..controller_util import then
from .service import TimerService, delete_key

__all__ = ["RECALL_TAG", "RecallProcessor"]

log = logging.getLogger("rocketmq_broker.timer")

#: tag of the delete entry a recall writes (5.x ``RecallMessageProcessor.RECALL_MESSAGE_TAG``)
RECALL_TAG = "_RECALL_TAG_"
_UNAVAILABLE = "recall failed, broker service not available"
_REGION = {"MSG_REGION": "DefaultRegion"}


class RecallProcessor:
    """Serves RECALL_MESSAGE on a 5.x broker.

    Args:
        timer: the broker's timer wheel (validation clock, max delay, transform into the wheel).
        put_message: store an ``InnerMessage`` without the delay-level redirect (may return a
            future).
        topic_exists: whether a topic is configured on this broker.
        broker_name: this broker's name (a handle names the broker it came from).
        broker_addr: ``ip:port`` written as the delete entry's store host.
        enabled: ``recallMessageEnable`` (5.x default false).
        is_slave: a slave refuses recalls.
    """

    def __init__(self, timer: TimerService, put_message: Callable[[InnerMessage], Any],
                 topic_exists: Callable[[str], bool], broker_name: str, broker_addr: str, *, enabled: bool,
                 is_slave: bool) -> None:
        self.timer = timer
        self.put_message = put_message
        self.topic_exists = topic_exists
        self.broker_name = broker_name
        self.broker_addr = broker_addr
        self.enabled = enabled
        self.is_slave = is_slave

    def register(self, server) -> None:
        server.register_processor(RequestCode.RECALL_MESSAGE, self.recall)

    def recall(self, ch: Channel, cmd: RemotingCommand):
        h = RecallMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        if not self.enabled:
            return self._refuse(cmd, ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
        if self.is_slave:
            return self._refuse(cmd, ResponseCode.SLAVE_NOT_AVAILABLE, _UNAVAILABLE)
        topic = h.topic or ""
        if not topic or not self.topic_exists(topic):
            return self._refuse(cmd, ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{topic}] not exist")
        try:
            handle = RecallHandle.decode(h.recall_handle)
        except ValueError as exc:
            return self._refuse(cmd, ResponseCode.ILLEGAL_OPERATION, str(exc))
        if handle.topic != topic:
            return self._refuse(cmd, ResponseCode.ILLEGAL_OPERATION, "recall failed, topic not match")
        if handle.broker_name != self.broker_name:
            return self._refuse(cmd, ResponseCode.ILLEGAL_OPERATION, _UNAVAILABLE)
        try:
            at = int(handle.timestamp)
        except ValueError:
            at = -1
        left = at - self.timer.clock()
        if left <= 0 or left >= self.timer.max_delay_ms:
            return self._refuse(cmd, ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
        inner = self.timer.transform(self._delete_entry(ch, h, handle))

        def answer(result) -> RemotingCommand:
            if result is None or not result.is_ok():
                return self._refuse(cmd, ResponseCode.SYSTEM_ERROR, "recall failed, execute error")
            log.info("recall of timer message %s (topic %s, due %s) by %s", handle.message_id, topic, at,
                     ch.remote_addr)
            return cmd.response(ResponseCode.SUCCESS, "not set any response code",
                                {"msgId": handle.message_id, **_REGION})

        return then(self.put_message(inner), answer)

    def _delete_entry(self, ch: Channel, h: RecallMessageRequestHeader, handle: RecallHandle) -> InnerMessage:
        """The delete entry of ``handle`` (5.x ``RecallMessageProcessor.buildMessage``)."""
        now = int(time.time() * 1000)
        props = {MC.TIMER_DEL_UNIQKEY: delete_key(handle.topic, handle.message_id),
                 MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: handle.message_id, MC.TIMER_DELIVER_MS: handle.timestamp,
                 MC.TAGS: RECALL_TAG, MC.PRODUCER_GROUP: h.producer_group or ""}
        return InnerMessage(topic=handle.topic, queue_id=0, body=b"0", properties_string=encode_properties(props),
                            tags_code=tags_string_to_tags_code(RECALL_TAG), born_timestamp=now,
                            born_host=ch.remote_addr, store_host=self.broker_addr, properties=props)

    @staticmethod
    def _refuse(cmd: RemotingCommand, code: int, remark: str) -> RemotingCommand:
        return cmd.response(code, remark, dict(_REGION))
