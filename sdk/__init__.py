"""rocketmq_sdk: a pure-Python Apache RocketMQ 4.x client (remoting protocol).

Public API (see docs/architecture.md, "SDK public API")::

    from rocketmq_sdk import Message, Producer, PushConsumer, ConsumeConcurrentlyStatus

    with Producer("my_group", "127.0.0.1:9876") as producer:
        producer.send(Message("MyTopic", b"hello", tags="TagA"))
"""

import logging as _logging
from typing import TYPE_CHECKING

from ._lazy import lazy_exports
from ._version import __version__

# The public names below are imported when first used (PEP 562, rocketmq_sdk._lazy): ``import
# rocketmq_sdk`` costs only this package, and a process pays only for the clients it uses.
if TYPE_CHECKING:
    from .config import ClientConfig, ConsumerConfig, LitePullConsumerConfig, ProducerConfig
    from .config_types import ClientSettings, ConsumerSettings, LitePullConsumerSettings, ProducerSettings
    from .consumer import (
        AllocateMessageQueueAveragely,
        AllocateMessageQueueAveragelyByCircle,
        AllocateMessageQueueStrategy,
        ConsumeConcurrentlyContext,
        ConsumeConcurrentlyStatus,
        ConsumeOrderlyContext,
        ConsumeOrderlyStatus,
        LitePullConsumer,
        MessageSelector,
        PullConsumer,
        PushConsumer,
        SimpleConsumer,
    )
    from .exceptions import (
        ClientStateError,
        FrameError,
        IllegalArgumentError,
        IllegalOperationError,
        InvalidParameterError,
        MessageIllegalError,
        MQBrokerError,
        MQClientError,
        MQError,
        RemotingConnectError,
        RemotingError,
        RemotingSendRequestError,
        RemotingTimeoutError,
        RemotingTooMuchRequestError,
        RequestCodeNotSupportedError,
        RequestTimeoutError,
        SubscriptionGroupNotExistError,
        TopicNotExistError,
    )
    from .lifecycle import ServiceState
    from .producer import (
        LocalTransactionState,
        MessageQueueSelector,
        Producer,
        SelectMessageQueueByHash,
        SelectMessageQueueByRandom,
        TransactionListener,
        TransactionProducer,
        TransactionSendResult,
        split_batches,
    )
    from .protocol.bodies import ConsumeFromWhere, MessageModel
    from .protocol.message import Message, MessageExt, MessageQueue, PullStatus, SendResult, SendStatus
    from .retry import Backoff, ConstantBackoff, ErrorCodeBackoff, ExponentialBackoff, NoBackoff, RetryPolicy

# Library etiquette: records of the ``rocketmq_sdk`` loggers go nowhere (not to Python's
# last-resort stderr handler) until the application configures logging.
_logging.getLogger("rocketmq_sdk").addHandler(_logging.NullHandler())

__all__ = [
    "__version__",
    "LocalTransactionState",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "split_batches",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueStrategy",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "LitePullConsumer",
    "MessageSelector",
    "PullConsumer",
    "SimpleConsumer",
    "ConsumeFromWhere",
    "MessageModel",
    "PushConsumer",
    "ClientStateError",
    "ConsumerConfig",
    "IllegalArgumentError",
    "MQBrokerError",
    "MQClientError",
    "MQError",
    "Message",
    "MessageExt",
    "MessageQueue",
    "MessageQueueSelector",
    "Producer",
    "ProducerConfig",
    "PullStatus",
    "RemotingConnectError",
    "RemotingError",
    "RequestTimeoutError",
    "TopicNotExistError",
    "RemotingTimeoutError",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "SendResult",
    "SendStatus",
    # configuration (rocketmq_sdk.config, rocketmq_sdk.config_types)
    "ClientConfig",
    "LitePullConsumerConfig",
    "ClientSettings",
    "ConsumerSettings",
    "LitePullConsumerSettings",
    "ProducerSettings",
    # errors (rocketmq_sdk.exceptions): every class of the tree
    "FrameError",
    "IllegalOperationError",
    "InvalidParameterError",
    "MessageIllegalError",
    "RequestCodeNotSupportedError",
    "SubscriptionGroupNotExistError",
    "RemotingSendRequestError",
    "RemotingTooMuchRequestError",
    # the clients' lifecycle (rocketmq_sdk.lifecycle) and retries (rocketmq_sdk.retry)
    "ServiceState",
    "Backoff",
    "ConstantBackoff",
    "ErrorCodeBackoff",
    "ExponentialBackoff",
    "NoBackoff",
    "RetryPolicy",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__)
