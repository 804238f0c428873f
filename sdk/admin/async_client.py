"""``AsyncAdminClient``: what Apache RocketMQ's ``DefaultMQAdminExt`` / ``mqadmin`` does, as
coroutines on the caller's asyncio event loop.

It is the families of admin operations put together over one core (``core.py``): topics
(``topics.py``), clusters (``cluster.py``), groups and offsets (``groups.py``), messages
(``messages.py``), name servers (``namesrv.py``), ACL (``acl.py``) and the brokers' stored
tables (``broker_tables.py``). :class:`AdminClient` is
the same API, blocking.

Example::

    async with AsyncAdminClient("127.0.0.1:9876") as admin:
        await admin.create_topic("Orders", cluster="DefaultCluster", read_queue_nums=4, write_queue_nums=4)
        print((await admin.consumer_progress("order-consumers")).total_lag)
"""

from __future__ import annotations

from .acl import AclAdmin
from .broker_tables import BrokerTableAdmin
from .cluster import ClusterAdmin
from .dledger import DLedgerAdmin
from .groups import GroupAdmin
from .messages import MessageAdmin
from .namesrv import NamesrvAdmin
from .topics import TopicAdmin

__all__ = ["AsyncAdminClient"]


class AsyncAdminClient(TopicAdmin, ClusterAdmin, GroupAdmin, MessageAdmin, NamesrvAdmin, AclAdmin,
                       BrokerTableAdmin, DLedgerAdmin):
    """Administration of a RocketMQ 4.x cluster (topics, groups, messages, name servers, ACL), as
    coroutines: create it and await its methods in one event loop (its connections belong to the
    loop that first uses them); ``async with`` (or ``await close()``) releases them.

    Args:
        namesrv_addr: ``"host:port;host:port"`` or a list; defaults to ``config.namesrv_addr``,
            then ``$NAMESRV_ADDR``.
        timeout_ms: timeout of each request in milliseconds (default 5000, mqadmin's).
        config: a :class:`~rocketmq_sdk.config.ClientConfig` (or a producer's or consumer's
            config): the same connection settings producers and consumers take, i.e. ACL
            credentials (``access_key`` / ``secret_key`` / ``security_token``: every request is
            signed, as mqadmin does with ``conf/tools.yml``), ``rpc_hooks``, TLS (``use_tls`` /
            ``ssl_context``, mqadmin ``-Dtls.enable``), ``connect_timeout``.
        **settings: ``ClientConfig`` fields by name instead of ``config`` (``access_key=...``,
            ``use_tls=True``...).

    Raises:
        IllegalArgumentError: no name server address, an unknown setting, or both ``config`` and
            settings.

    Failures of the methods raise :class:`~rocketmq_sdk.exceptions.MQBrokerError` (the server
    answered with an error code; ``TopicNotExistError`` for code 17),
    :class:`~rocketmq_sdk.exceptions.RemotingError` (network) or
    :class:`~rocketmq_sdk.exceptions.MQClientError` (nothing to ask: no route, no consumer...).
    """

    async def __aenter__(self) -> AsyncAdminClient:
        return self
