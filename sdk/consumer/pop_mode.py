"""``PushConsumer(..., pop=True)``: what the push consumer holds for its POP mode (the settings,
the consume threads and the :class:`~.pop_consume.PopConsumeService`), behind four calls."""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable
from typing import Any

from ..client.instance import MQClientInstance
from ..config import ConsumerConfig
from ..exceptions import ClientStateError
from ..protocol.bodies import SubscriptionData
from ..protocol.pop import MAX_POP_MESSAGES
from .pop_client import PopClient
from .pop_consume import PopConsumeService, PopSettings
from .stats import ConsumerStats

__all__ = ["PopMode"]

log = logging.getLogger("rocketmq_sdk.consumer.pop")


def settings_from_config(config: ConsumerConfig) -> PopSettings:
    """POP knobs from a push consumer's settings (batch, listener batch, retries, start point)."""
    return PopSettings(batch_size=min(MAX_POP_MESSAGES, max(1, config.pull_batch_size)),
                       consume_batch_max_size=config.consume_message_batch_max_size,
                       max_reconsume_times=16 if config.max_reconsume_times < 0 else config.max_reconsume_times,
                       init_mode=0 if config.consume_from_where.name == "CONSUME_FROM_FIRST_OFFSET" else 1)


class PopMode:
    """The POP side of one push consumer.

    Args:
        group: the consumer group.
        config: the consumer's settings.
        subscriptions: ``() -> {topic: SubscriptionData}`` of the consumer.
        settings: POP knobs (default :func:`settings_from_config`).
    """

    def __init__(self, group: str, config: ConsumerConfig, subscriptions: Callable[[], dict[str, SubscriptionData]],
                 settings: PopSettings | None = None) -> None:
        self.group = group
        self.config = config
        self.subscriptions = subscriptions
        self.settings = settings or settings_from_config(config)
        self.service: PopConsumeService | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    def check_startable(self, *, orderly: bool, clustering: bool) -> None:
        """Raises ClientStateError: an orderly listener or BROADCASTING (Java rebalances those on
        the client whatever the mode)."""
        if orderly:
            raise ClientStateError("pop=True needs a concurrent listener (an orderly consumer keeps client-side "
                                   "rebalancing; use SimpleConsumer(orderly=True) for orderly POP)")
        if not clustering:
            raise ClientStateError("pop=True works in CLUSTERING mode only")

    async def start(self, instance: MQClientInstance, listener: Callable[..., Any],
                    stats: ConsumerStats | None = None) -> None:
        """Start the consume threads and a POP task per (topic, broker) (on the client's loop);
        pulls and listener calls are counted in ``stats`` (the consumer's running info)."""
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, self.config.consume_thread_max),
                                                           thread_name_prefix=f"rocketmq-pop-{self.group}")
        self.service = PopConsumeService(PopClient(instance, self.group, self.config.mq_client_api_timeout),
                                         self.subscriptions, listener, self._pool, self.settings, stats)
        await self.service.refresh()

    async def refresh(self) -> None:
        """Serve new brokers of the subscribed topics (called at each rebalance interval)."""
        if self.service is not None:
            await self.service.refresh()

    def stop(self, instance: MQClientInstance, timeout_s: float) -> None:
        """Stop popping, then wait up to ``timeout_s`` for the listener calls running."""
        if self.service is not None:
            instance.run(self.service.stop(), timeout_s)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
