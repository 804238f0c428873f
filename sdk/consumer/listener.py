"""Listener results and contexts (Java ``MessageListenerConcurrently`` / ``MessageListenerOrderly``)."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from ..protocol.message import MessageExt, MessageQueue

__all__ = ["ConsumeConcurrentlyContext", "ConsumeConcurrentlyStatus", "ConsumeOrderlyContext", "ConsumeOrderlyStatus",
           "MessageListenerConcurrently", "MessageListenerOrderly"]


class ConsumeConcurrentlyStatus(enum.Enum):
    """What a concurrent listener returns."""

    #: the messages are consumed; their offsets may be committed.
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    #: consume them again later (sent back to the broker, redelivered through ``%RETRY%group``).
    RECONSUME_LATER = "RECONSUME_LATER"


@dataclass
class ConsumeConcurrentlyContext:
    """Passed to the listener with each batch.

    Attributes:
        message_queue: the queue the messages came from.
        delay_level_when_next_consume: delay level of the redelivery after RECONSUME_LATER;
            0 (default) lets the broker use ``3 + reconsume_times`` (10 s, 30 s, 1 min...),
            -1 sends the messages straight to the DLQ, 1..18 chooses a level (as Java).
        ack_index: with CONSUME_SUCCESS, messages after this index are sent back (Java
            ``ackIndex``; default: all are acknowledged).
    """

    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0
    ack_index: int = 2**31 - 1


MessageListenerConcurrently = Callable[[list[MessageExt], ConsumeConcurrentlyContext], ConsumeConcurrentlyStatus]


class ConsumeOrderlyStatus(enum.Enum):
    """What an orderly listener returns."""

    #: the messages are consumed; the queue's offset moves past them.
    SUCCESS = "SUCCESS"
    #: consume the same messages again after ``suspend_current_queue_time_millis`` (nothing
    #: behind them in the queue is consumed meanwhile).
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass
class ConsumeOrderlyContext:
    """Passed to an orderly listener with each batch.

    Attributes:
        message_queue: the queue the messages came from.
        auto_commit: always True (Java's manual commit mode is deprecated and not offered).
        suspend_current_queue_time_millis: delay before a suspended batch is consumed again,
            ms; -1 (default) uses the consumer's ``suspend_current_queue_time`` (1000).
    """

    message_queue: MessageQueue
    auto_commit: bool = True
    suspend_current_queue_time_millis: int = -1


MessageListenerOrderly = Callable[[list[MessageExt], ConsumeOrderlyContext], ConsumeOrderlyStatus]
