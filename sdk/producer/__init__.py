"""Producers: ``Producer``, the queue selectors of ordered sends, batching and fault tolerance."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # imported when first used (PEP 562, rocketmq_sdk._lazy)
    from .batch import EncodedBatch, split_batches
    from .fault import MQFaultStrategy
    from .producer import RETRY_RESPONSE_CODES, Producer, SendCallback
    from .request import RequestCallback, RequestResponseFuture, create_reply_message
    from .selector import (
        MessageQueueSelector,
        SelectMessageQueueByHash,
        SelectMessageQueueByRandom,
        java_hash_code,
    )
    from .transaction import (
        LocalTransactionState,
        TransactionListener,
        TransactionProducer,
        TransactionSendResult,
    )

__all__ = [
    "RETRY_RESPONSE_CODES",
    "RequestCallback",
    "RequestResponseFuture",
    "create_reply_message",
    "LocalTransactionState",
    "MQFaultStrategy",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "SendCallback",
    "split_batches",
    "EncodedBatch",
    "MessageQueueSelector",
    "Producer",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "java_hash_code",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__)
