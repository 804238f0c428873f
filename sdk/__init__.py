"""rocketmq_sdk: a pure-Python Apache RocketMQ 4.x client (remoting protocol).

Public API (see docs/architecture.md, "SDK public API")::

    from rocketmq_sdk import Message, Producer, PushConsumer, ConsumeConcurrentlyStatus

    with Producer("my_group", "127.0.0.1:9876") as producer:
        producer.send(Message("MyTopic", b"hello", tags="TagA"))
"""

import logging as _logging

from ._version import __version__
from .config import ConsumerConfig, ProducerConfig
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
)
from .exceptions import (
    ClientStateError,
    IllegalArgumentError,
    MQBrokerError,
    MQClientError,
    MQError,
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
    RequestTimeoutError,
    TopicNotExistError,
)
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
]
