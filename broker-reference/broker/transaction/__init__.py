"""Transactional messages in the reference broker (Apache RocketMQ 4.9, docs/protocol.md §5.9).

:class:`BrokerTransactions` is what the controller and the send processor use: half messages
are redirected to ``RMQ_SYS_TRANS_HALF_TOPIC`` at send time (:meth:`BrokerTransactions.prepare`),
END_TRANSACTION is served by :class:`EndTransactionProcessor`, and :class:`TransactionCheckService`
asks producers about half messages left without an outcome.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from rocketmq_broker.store.inner_message import InnerMessage
from rocketmq_sdk.protocol.codes import MessageConst as MC

from .bridge import REMOVE_TAG, TRANS_CONSUMER_GROUP, TransactionalMessageBridge
from .end_transaction import EndTransactionProcessor
from .service import TransactionCheckService

if TYPE_CHECKING:
    from ..context import BrokerContext

__all__ = ["REMOVE_TAG", "TRANS_CONSUMER_GROUP", "BrokerTransactions", "EndTransactionProcessor",
           "TransactionCheckService", "TransactionalMessageBridge"]


class BrokerTransactions:
    """The broker's transaction support: bridge, END_TRANSACTION processor and check service.

    Args:
        broker: the controller (its config gives ``transaction_time_out``,
            ``transaction_check_max`` and ``transaction_check_interval``).
    """

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self.bridge = TransactionalMessageBridge(broker)
        self.end_transaction = EndTransactionProcessor(broker, self.bridge)
        self.check_service = TransactionCheckService(broker, self.bridge)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the check service (masters only)."""
        self.check_service.start(loop)

    async def stop(self) -> None:
        await self.check_service.stop()

    def refusal(self, props: dict[str, str]) -> str | None:
        """The NO_PERMISSION remark for a message sent with ``TRAN_MSG=true`` while the broker's
        ``reject_transaction_message`` is set (Java ``rejectTransactionMessage``, checked as
        4.9.8's ``asyncSendMessage`` does, before the half message is stored); None otherwise."""
        config = self.broker.config
        if not config.reject_transaction_message or props.get(MC.TRANSACTION_PREPARED, "").lower() != "true":
            return None
        return f"the broker[{config.broker_ip1}] sending transaction message is forbidden"

    @staticmethod
    def prepare(inner: InnerMessage) -> InnerMessage:
        """Turn a message sent with ``TRAN_MSG=true`` into a half message (stored in the half
        topic, invisible to consumers of its topic until committed); others are returned as is."""
        props = inner.get_properties()
        if props.get(MC.TRANSACTION_PREPARED, "").lower() != "true":
            return inner
        if inner.reconsume_times > 0 and int(props.get(MC.DELAY_TIME_LEVEL, "0") or 0) > 0:
            return inner  # a send-back of a client older than 4.6.1, as Java
        return TransactionalMessageBridge.parse_half_message(inner)
