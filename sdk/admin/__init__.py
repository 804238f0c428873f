"""Administration of a RocketMQ 4.x cluster: :class:`AdminClient` (the ``DefaultMQAdminExt``
operations) and the ``rocketmq-admin`` command line (``rocketmq_sdk.admin.cli``)."""

from .client import AdminClient, parse_namesrv_addr
from .models import (
    BrokerInfo,
    ClientConnection,
    ConsumerProgress,
    GroupConnections,
    GroupSummary,
    QueueProgress,
    QueueStatus,
    ResetOffsetEntry,
    Subscription,
)

__all__ = [
    "AdminClient",
    "BrokerInfo",
    "ClientConnection",
    "ConsumerProgress",
    "GroupConnections",
    "GroupSummary",
    "QueueProgress",
    "QueueStatus",
    "ResetOffsetEntry",
    "Subscription",
    "parse_namesrv_addr",
]
