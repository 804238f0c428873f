"""``AdminClient``: the blocking face of :class:`~rocketmq_sdk.admin.AsyncAdminClient`.

Every public coroutine of ``AsyncAdminClient`` is offered here under the same name, with the same
arguments, result and errors, run on the client's own I/O thread (an :class:`EventLoopThread`).

Example::

    with AdminClient("127.0.0.1:9876") as admin:
        admin.create_topic("Orders", cluster="DefaultCluster", read_queue_nums=4, write_queue_nums=4)
        print(admin.consumer_progress("order-consumers").total_lag)
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Concatenate, ParamSpec, TypeVar

from rocketmq_sdk.config import ClientConfig
from rocketmq_sdk.lifecycle import ServiceState
from rocketmq_sdk.remoting.loop import EventLoopThread

from .async_client import AsyncAdminClient
from .core import MASTER_ID, parse_namesrv_addr, parse_properties

__all__ = ["MASTER_ID", "AdminClient", "parse_namesrv_addr", "parse_properties"]

T = TypeVar("T")
P = ParamSpec("P")


def _blocking(coroutine_function: Callable[Concatenate[Any, P], Coroutine[Any, Any, T]],
              ) -> Callable[Concatenate[AdminClient, P], T]:
    """The blocking twin of an ``AsyncAdminClient`` method: same name, signature (for type
    checkers too) and docstring, run on the client's I/O thread."""

    @functools.wraps(coroutine_function)
    def method(self: AdminClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        self._async.check_open()  # ClientStateError after close()
        return self._run(coroutine_function(self._async, *args, **kwargs))

    return method


class AdminClient:
    """Administration of a RocketMQ 4.x cluster (topics, groups, messages, name servers, ACL),
    blocking: the methods of :class:`~rocketmq_sdk.admin.AsyncAdminClient`, each run to its end
    on the client's I/O thread. Safe to call from several threads.

    Args:
        namesrv_addr, timeout_ms, config, **settings: as :class:`AsyncAdminClient`;
            ``config.event_loop`` (or ``event_loop=``) picks the I/O thread's loop implementation.

    Raises:
        IllegalArgumentError: no name server address, an unknown setting, or both ``config`` and
            settings.

    The client connects lazily; call :meth:`close` (or use it as a context manager) to release
    its I/O thread. Each call is bounded by ten times ``timeout_ms`` plus 5 s overall (a call may
    make several requests, each with its own timeout).
    """

    def __init__(self, namesrv_addr: str | Iterable[str] | None = None, *, timeout_ms: float = 5000.0,
                 config: ClientConfig | None = None, **settings: Any) -> None:
        self._async = AsyncAdminClient(namesrv_addr, timeout_ms=timeout_ms, config=config, **settings)
        self._loop = EventLoopThread("rocketmq-admin", event_loop=self._async.config.event_loop)

    @property
    def config(self) -> ClientConfig:
        """The connection settings (a :class:`~rocketmq_sdk.config.ClientConfig`)."""
        return self._async.config

    @property
    def namesrv_addrs(self) -> list[str]:
        """The name server addresses asked."""
        return self._async.namesrv_addrs

    @property
    def timeout_ms(self) -> float:
        """Timeout of each request, ms."""
        return self._async.timeout_ms

    @property
    def state(self) -> ServiceState:
        """``RUNNING`` from creation until :meth:`close`, then ``SHUTDOWN_ALREADY``."""
        return self._async.state

    def close(self) -> None:
        """Close connections and stop the I/O thread (idempotent; the client cannot be used
        afterwards: its methods raise :class:`~rocketmq_sdk.exceptions.ClientStateError`)."""
        if not self._loop.is_running:
            return
        try:
            self._loop.run(self._async.close(), 5.0)
        finally:
            self._loop.stop()

    shutdown = close

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        # generous overall bound: several requests per call, each with its own timeout
        return self._loop.run(coro, self.timeout_ms / 1000.0 * 10 + 5)

    @staticmethod
    def now_ms() -> int:
        """Milliseconds since the epoch (for ``reset_offset_by_time`` and queries by time)."""
        return int(time.time() * 1000)

    # every public coroutine of AsyncAdminClient, blocking (tests/admin/test_admin_api.py checks
    # that none is missing)
    # topics (topics.py)
    create_topic = _blocking(AsyncAdminClient.create_topic)
    update_topic_perm = _blocking(AsyncAdminClient.update_topic_perm)
    delete_topic = _blocking(AsyncAdminClient.delete_topic)
    topic_list = _blocking(AsyncAdminClient.topic_list)
    topics_by_cluster = _blocking(AsyncAdminClient.topics_by_cluster)
    topic_clusters = _blocking(AsyncAdminClient.topic_clusters)
    topic_list_by_cluster = _blocking(AsyncAdminClient.topic_list_by_cluster)
    topic_consumer_groups = _blocking(AsyncAdminClient.topic_consumer_groups)
    topic_route = _blocking(AsyncAdminClient.topic_route)
    topic_status = _blocking(AsyncAdminClient.topic_status)
    # clusters and brokers (cluster.py)
    cluster_list = _blocking(AsyncAdminClient.cluster_list)
    broker_runtime_info = _blocking(AsyncAdminClient.broker_runtime_info)
    broker_config = _blocking(AsyncAdminClient.broker_config)
    cluster_broker_addrs = _blocking(AsyncAdminClient.cluster_broker_addrs)
    masterless_brokers = _blocking(AsyncAdminClient.masterless_brokers)
    dledger_leadership_transfer = _blocking(AsyncAdminClient.dledger_leadership_transfer)
    # groups and offsets (groups.py)
    consumer_progress = _blocking(AsyncAdminClient.consumer_progress)
    consumer_groups = _blocking(AsyncAdminClient.consumer_groups)
    consumer_connection = _blocking(AsyncAdminClient.consumer_connection)
    producer_connection = _blocking(AsyncAdminClient.producer_connection)
    consumer_running_info = _blocking(AsyncAdminClient.consumer_running_info)
    update_subscription_group = _blocking(AsyncAdminClient.update_subscription_group)
    set_consume_mode = _blocking(AsyncAdminClient.set_consume_mode)
    consume_modes = _blocking(AsyncAdminClient.consume_modes)
    delete_subscription_group = _blocking(AsyncAdminClient.delete_subscription_group)
    consume_offset = _blocking(AsyncAdminClient.consume_offset)
    update_consume_offset = _blocking(AsyncAdminClient.update_consume_offset)
    reset_offset_by_time = _blocking(AsyncAdminClient.reset_offset_by_time)
    # the brokers' stored tables (broker_tables.py)
    subscription_groups = _blocking(AsyncAdminClient.subscription_groups)
    subscription_group_config = _blocking(AsyncAdminClient.subscription_group_config)
    topic_configs = _blocking(AsyncAdminClient.topic_configs)
    # messages (messages.py)
    view_message = _blocking(AsyncAdminClient.view_message)
    query_message_by_key = _blocking(AsyncAdminClient.query_message_by_key)
    query_message_by_unique_key = _blocking(AsyncAdminClient.query_message_by_unique_key)
    query_message_by_id = _blocking(AsyncAdminClient.query_message_by_id)
    search_offset = _blocking(AsyncAdminClient.search_offset)
    pull_messages = _blocking(AsyncAdminClient.pull_messages)
    query_message_by_offset = _blocking(AsyncAdminClient.query_message_by_offset)
    consume_message_directly = _blocking(AsyncAdminClient.consume_message_directly)
    # name servers (namesrv.py)
    get_kv_config = _blocking(AsyncAdminClient.get_kv_config)
    put_kv_config = _blocking(AsyncAdminClient.put_kv_config)
    delete_kv_config = _blocking(AsyncAdminClient.delete_kv_config)
    kv_list = _blocking(AsyncAdminClient.kv_list)
    wipe_write_perm = _blocking(AsyncAdminClient.wipe_write_perm)
    add_write_perm = _blocking(AsyncAdminClient.add_write_perm)
    namesrv_config = _blocking(AsyncAdminClient.namesrv_config)
    update_namesrv_config = _blocking(AsyncAdminClient.update_namesrv_config)
    # ACL (acl.py)
    update_acl_config = _blocking(AsyncAdminClient.update_acl_config)
    delete_acl_config = _blocking(AsyncAdminClient.delete_acl_config)
    update_global_white_addrs = _blocking(AsyncAdminClient.update_global_white_addrs)
    acl_config_version = _blocking(AsyncAdminClient.acl_config_version)

