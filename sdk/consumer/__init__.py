"""Consumers: ``PushConsumer`` (clustering, concurrent), allocation strategies, offset store,
process queue, rebalance and the consume service."""

from .allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueStrategy,
)
from .listener import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus, MessageListenerConcurrently
from .offset_store import ReadOffsetType, RemoteBrokerOffsetStore
from .process_queue import ProcessQueue
from .push_consumer import PushConsumer

__all__ = [
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueStrategy",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "MessageListenerConcurrently",
    "ProcessQueue",
    "PushConsumer",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
]
