"""RocketMQ 5.x POP consumption on the reference broker (issue 32; docs/rocketmq5.md).

:class:`PopService` holds the logic and is callable in-process (the request processors and the
5.x gRPC front use it); :class:`PopProcessor` serves the remoting codes with long polling.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..requests import register_requests
from .checkpoint import CheckPoint, CheckPointTable
from .processor import PopProcessor
from .request_mode import MessageRequestModes, RequestModeProcessor
from .service import MAX_INVISIBLE_TIME_MS, PopContext, PopError, PopResult, PopService

if TYPE_CHECKING:
    from rocketmq_sdk.remoting import RemotingServer

    from ..context import BrokerContext

__all__ = ["MAX_INVISIBLE_TIME_MS", "CheckPoint", "CheckPointTable", "MessageRequestModes", "PopContext", "PopError",
           "PopProcessor", "PopResult", "PopService", "RequestModeProcessor", "install_pop"]


def install_pop(broker: BrokerContext, server: RemotingServer) -> PopProcessor:
    """Create the POP service of a broker and register its codes on ``server``, the broker's
    (``broker``: its context); the controller starts/stops the returned processor."""
    c = broker.config
    ctx = PopContext(store=broker.store, topics=broker.topics, groups=broker.groups, offsets=broker.offsets,
                     put_message=lambda inner: broker.put_message(inner, schedule=False),
                     broker_name=c.broker_name, config_dir=c.config_dir, store_host=c.broker_addr,
                     pop_from_retry_probability=c.pop_from_retry_probability, revive_queue_num=c.revive_queue_num,
                     filters=broker.consumers.filters, enable_property_filter=lambda: c.enable_property_filter)
    processor = PopProcessor(PopService(ctx), polling_size=c.pop_polling_size, revive_interval_ms=c.revive_interval,
                             response_version=server.response_version)
    register_requests(server, processor, v5=True)
    modes = MessageRequestModes(c.config_dir)
    modes.load()
    register_requests(server, RequestModeProcessor(modes, c.broker_name, broker.topics, broker.consumers), v5=True)
    return processor
