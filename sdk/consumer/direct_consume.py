"""CONSUME_MESSAGE_DIRECTLY (309): the broker (``mqadmin consumeMessage``) hands one message to
a consumer's listener and reports the outcome (Java ``consumeMessageDirectly`` of the concurrent
and orderly consume services). Offsets and retries are not touched."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from ..protocol.bodies import ConsumeMessageDirectlyResult, ConsumeMessageDirectlyResultCode
from ..protocol.codes import MessageConst as MC
from ..protocol.message import MessageExt, MessageQueue
from .listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)

__all__ = ["consume_directly"]

log = logging.getLogger("rocketmq_sdk.consumer.direct")

_R = ConsumeMessageDirectlyResultCode
_CODES: dict[Any, ConsumeMessageDirectlyResultCode] = {ConsumeConcurrentlyStatus.CONSUME_SUCCESS: _R.CR_SUCCESS,
          ConsumeConcurrentlyStatus.RECONSUME_LATER: _R.CR_LATER,
          ConsumeOrderlyStatus.SUCCESS: _R.CR_SUCCESS,
          ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT: _R.CR_LATER}


def consume_directly(listener: Callable[..., Any] | None, msg: MessageExt, broker_name: str | None, *,
                     group: str, retry_topic: str, orderly: bool) -> ConsumeMessageDirectlyResult:
    """Call the ``listener`` of consumer ``group`` with ``[msg]`` (blocking; run it off the I/O
    loop); a message of ``retry_topic`` shows its original topic, an ``orderly`` listener gets a
    ``ConsumeOrderlyContext``.

    Returns CR_SUCCESS / CR_LATER for the listener's statuses, CR_RETURN_NULL for None or an
    unknown value (or no listener), CR_THROW_EXCEPTION (remark = the exception) when it raised."""
    mq = MessageQueue(msg.topic, broker_name or msg.broker_name or "", msg.queue_id)
    if msg.topic == retry_topic and msg.properties.get(MC.RETRY_TOPIC):
        msg.topic = msg.properties[MC.RETRY_TOPIC]
    ctx = ConsumeOrderlyContext(mq) if orderly else ConsumeConcurrentlyContext(mq)
    result = ConsumeMessageDirectlyResult(auto_commit=True, order=orderly)
    begin = time.monotonic()
    try:
        status = listener([msg], ctx) if listener is not None else None
        result.consume_result = _CODES.get(status, _R.CR_RETURN_NULL)
    except Exception as exc:
        log.warning("direct consume of %s by group %s raised", msg.msg_id, group, exc_info=True)
        result.consume_result = _R.CR_THROW_EXCEPTION
        result.remark = f"{type(exc).__name__}: {exc}"
    result.spent_time_mills = int((time.monotonic() - begin) * 1000)
    return result
