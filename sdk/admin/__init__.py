"""Administration of a RocketMQ 4.x cluster: :class:`AsyncAdminClient` (the ``DefaultMQAdminExt``
operations as coroutines, one module per family over ``core.py``), :class:`AdminClient` (the same,
blocking) and the ``rocketmq-admin`` command line (``rocketmq_sdk.admin.cli``)."""

from .async_client import AsyncAdminClient
from .client import AdminClient, parse_namesrv_addr
from .dledger import LeadershipTransferResult
from .models import (
    BrokerInfo,
    ClientConnection,
    ConsumerProgress,
    GroupConnections,
    GroupSummary,
    MasterlessBroker,
    QueueProgress,
    QueueStatus,
    ResetOffsetEntry,
    Subscription,
)

__all__ = [
    "AdminClient",
    "AsyncAdminClient",
    "BrokerInfo",
    "ClientConnection",
    "ConsumerProgress",
    "GroupConnections",
    "GroupSummary",
    "LeadershipTransferResult",
    "MasterlessBroker",
    "QueueProgress",
    "QueueStatus",
    "ResetOffsetEntry",
    "Subscription",
    "parse_namesrv_addr",
]
