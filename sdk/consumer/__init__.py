"""Consumers: ``PushConsumer`` (concurrent or orderly, clustering or broadcasting),
``PullConsumer``, ``LitePullConsumer``, the six allocation strategies, offset stores, process
queue, rebalance and the consume services."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # imported when first used (PEP 562, rocketmq_sdk._lazy)
    from .allocate import (
        AllocateMachineRoomNearby,
        AllocateMessageQueueAveragely,
        AllocateMessageQueueAveragelyByCircle,
        AllocateMessageQueueByConfig,
        AllocateMessageQueueByMachineRoom,
        AllocateMessageQueueConsistentHash,
        AllocateMessageQueueStrategy,
        MachineRoomResolver,
    )
    from .listener import (
        ConsumeConcurrentlyContext,
        ConsumeConcurrentlyStatus,
        ConsumeOrderlyContext,
        ConsumeOrderlyStatus,
        MessageListenerConcurrently,
        MessageListenerOrderly,
    )
    from .lite_pull_consumer import LitePullConsumer
    from .offset_store import LocalFileOffsetStore, ReadOffsetType, RemoteBrokerOffsetStore
    from .process_queue import ProcessQueue
    from .pull_consumer import PullConsumer
    from .push_consumer import PushConsumer
    from .selector import MessageSelector
    from .simple_consumer import SimpleConsumer

__all__ = [
    "AllocateMachineRoomNearby",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "LitePullConsumer",
    "LocalFileOffsetStore",
    "MachineRoomResolver",
    "MessageSelector",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "MessageListenerConcurrently",
    "MessageListenerOrderly",
    "ProcessQueue",
    "PullConsumer",
    "SimpleConsumer",
    "PushConsumer",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__)
