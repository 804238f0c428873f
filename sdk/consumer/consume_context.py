"""``ConsumeContext``: what the parts of a push consumer's core (``pull_loop.py``,
``consume_service.py``, ``consume_orderly.py``) read from the consumer they serve, and
``ConsumeService``, what the pull loop needs from a consume service.

The consumer builds one context at ``start()`` (Java's consume services hold the
``DefaultMQPushConsumerImpl`` whole; here they see only these fields), so none of those modules
imports ``push_consumer.py``, and a test can build a context without a consumer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..exceptions import MQBrokerError
from ..protocol.bodies import MessageModel
from ..protocol.message import MessageExt, MessageQueue
from .stats import ConsumerStats

if TYPE_CHECKING:
    from ..client.instance import MQClientInstance
    from ..config import ConsumerConfig
    from ..trace.dispatcher import TraceDispatcher
    from .offset_store import OffsetStore
    from .process_queue import ProcessQueue

__all__ = ["ConsumeContext", "ConsumeService"]


class ConsumeService(Protocol):
    """A consume service as the pull loop sees it (concurrently or orderly)."""

    def submit(self, msgs: Sequence[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        """``msgs`` were just cached in ``pq`` (the cache of ``mq``): consume them."""
        ...


@dataclass(frozen=True, eq=False)
class ConsumeContext:
    """One started push consumer, as its pull loops and consume service see it.

    Attributes:
        group: the consumer group.
        config: the consumer's settings.
        instance: the client instance (loop, routes, broker API).
        offset_store: the group's offsets.
        retry_topic: ``%RETRY%<group>``.
        orderly: the listener is orderly.
        msg_trace: the message trace dispatcher (``enable_msg_trace``), else None.
        is_running: True while the consumer is started.
        is_suspended: True between ``suspend()`` and ``resume()``.
        stats: per-topic pull/consume statistics (Java ``ConsumerStatsManager``), the
            ``statusTable`` of the running info.
    """

    group: str
    config: ConsumerConfig
    instance: MQClientInstance
    offset_store: OffsetStore
    retry_topic: str
    orderly: bool
    msg_trace: TraceDispatcher | None
    is_running: Callable[[], bool]
    is_suspended: Callable[[], bool]
    stats: ConsumerStats = field(default_factory=ConsumerStats)

    @property
    def client_id(self) -> str:
        """``ip@instance`` of the client instance (``messaging.client.id`` of the spans)."""
        return self.instance.client_id

    @property
    def clustering(self) -> bool:
        """CLUSTERING (True) or BROADCASTING (False)."""
        return self.config.message_model is MessageModel.CLUSTERING

    @property
    def running(self) -> bool:
        return self.is_running()

    @property
    def suspended(self) -> bool:
        return self.is_suspended()

    @property
    def timeout_s(self) -> float:
        """How long a consume thread waits for one request on the loop: ``mq_client_api_timeout``
        + 1 s."""
        return self.config.mq_client_api_timeout / 1000.0 + 1.0

    async def send_message_back(self, msg: MessageExt, delay_level: int, mq: MessageQueue) -> None:
        """CONSUMER_SEND_MSG_BACK of ``msg`` to the master of ``mq``'s broker (Java
        ``DefaultMQPushConsumerImpl.sendMessageBack``): the broker stores it again on
        ``%RETRY%<group>`` with ``delay_level`` (0: the broker's own, 3 + reconsume times), or
        in ``%DLQ%<group>`` after ``max_reconsume_times``.

        Raises:
            MQBrokerError: the broker is unknown or refused; RemotingError.
        """
        inst = self.instance
        addr = await inst.find_broker_master_or_refresh(mq.broker_name, mq.topic)
        if addr is None:
            raise MQBrokerError(-1, f"broker {mq.broker_name} not found")
        await inst.api.consumer_send_message_back(
            addr, group=self.group, commit_log_offset=msg.commit_log_offset, delay_level=delay_level,
            origin_msg_id=msg.msg_id, origin_topic=msg.topic,
            max_reconsume_times=self.config.effective_max_reconsume_times, broker_name=mq.broker_name)
