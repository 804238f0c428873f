"""RECALL_MESSAGE (370, RocketMQ 5.3): cancel a timer message that is not delivered yet.

The request goes to the master of the broker the handle names (Java 5.3
``DefaultMQProducerImpl.recallMessage``); the handle is checked here first, so a malformed one
never reaches the network.
"""

from __future__ import annotations

from ..client.instance import MQClientInstance
from ..exceptions import IllegalArgumentError, MQBrokerError
from ..protocol.codes import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, ResponseCode, check_name
from ..protocol.recall import RecallHandle, RecallMessageRequestHeader

__all__ = ["recall_message"]


def check_recall(topic: str, recall_handle: str) -> RecallHandle:
    """The decoded handle of a recall of ``topic`` (namespace applied).

    Raises:
        IllegalArgumentError: an illegal topic, a retry/DLQ topic, or a handle that does not
            decode ("recall handle is invalid").
    """
    check_name(topic, "topic")
    if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
        raise IllegalArgumentError(f"recalling from topic {topic} is not supported (retry/DLQ topic)")
    if not isinstance(recall_handle, str):
        raise IllegalArgumentError(f"the recall handle must be a str, got {type(recall_handle).__name__} "
                                   "(SendResult.recall_handle is None for a message that is not a timer message)")
    try:
        return RecallHandle.decode(recall_handle)
    except ValueError as exc:
        raise IllegalArgumentError(str(exc)) from None


async def recall_message(inst: MQClientInstance, group: str, topic: str, recall_handle: str,
                         timeout_ms: float) -> str:
    """Send RECALL_MESSAGE for ``recall_handle`` (already checked with :func:`check_recall`) to
    its broker's master; returns the recalled message's ``UNIQ_KEY``.

    Raises:
        MQBrokerError: the broker's refusal (see :meth:`Producer.recall_message`), or
            SERVICE_NOT_AVAILABLE (14) when no master of the handle's broker is known.
        RemotingError: network failure or timeout.
    """
    handle = RecallHandle.decode(recall_handle)
    addr = await inst.find_broker_master_or_refresh(handle.broker_name, topic)
    if addr is None:
        raise MQBrokerError(ResponseCode.SERVICE_NOT_AVAILABLE,
                            f"no master address for broker {handle.broker_name} (of the recall handle) in the route "
                            f"of topic {topic}")
    header = RecallMessageRequestHeader(producer_group=group, topic=topic, recall_handle=recall_handle,
                                        bname=handle.broker_name)
    return await inst.api.recall_message(addr, header, timeout_ms) or handle.message_id
