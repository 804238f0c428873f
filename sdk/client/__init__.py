"""Client machinery shared by producers and consumers: ``MQClientInstance`` (one per client id),
``MQClientAPI`` (typed request helpers) and route conversion."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # imported when first used (PEP 562, rocketmq_sdk._lazy)
    from .instance import MQClientInstance, get_client_instance, release_client_instance
    from .mq_client_api import MQClientAPI, NameServerList
    from .route import TopicPublishInfo, publish_info_from_route, subscribe_queues_from_route

__all__ = [
    "MQClientAPI",
    "MQClientInstance",
    "NameServerList",
    "TopicPublishInfo",
    "get_client_instance",
    "publish_info_from_route",
    "release_client_instance",
    "subscribe_queues_from_route",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__)
