"""The keyword arguments of the clients, typed for IDEs and type checkers.

``Producer(group, namesrv_addr, **config: Unpack[ProducerSettings])`` and the consumers'
equivalents: an editor completes ``send_msg_timeout=`` and a type checker flags
``send_msg_timout=``. Each ``TypedDict`` lists the fields of its config dataclass in
:mod:`rocketmq_sdk.config` (where they are documented), except ``namesrv_addr``, which is a
parameter of its own; ``tests/sdk/test_config_settings.py`` keeps the two in step.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from typing import Any, TypedDict

from .protocol.bodies import ConsumeFromWhere, MessageModel

__all__ = ["ClientSettings", "ConsumerSettings", "LitePullConsumerSettings", "ProducerSettings"]


class ClientSettings(TypedDict, total=False):
    """Keyword arguments of :class:`~rocketmq_sdk.config.ClientConfig`."""

    namesrv_domain: str | None
    namesrv_domain_subgroup: str
    instance_name: str
    client_ip: str | None
    unit_name: str | None
    poll_name_server_interval: int
    heartbeat_broker_interval: int
    persist_consumer_offset_interval: int
    mq_client_api_timeout: int
    connect_timeout: int
    rpc_hooks: Iterable[Any]
    access_key: str | None
    secret_key: str | None
    security_token: str | None
    use_tls: bool
    ssl_context: ssl.SSLContext | None
    event_loop: str
    use_heartbeat_v2: bool


class ProducerSettings(ClientSettings, total=False):
    """Keyword arguments of :class:`~rocketmq_sdk.config.ProducerConfig`."""

    send_msg_timeout: int
    retry_times_when_send_failed: int
    compress_msg_body_over_howmuch: int
    compress_level: int
    max_message_size: int
    create_topic_key: str
    default_topic_queue_nums: int
    namespace: str | None
    retry_times_when_send_async_failed: int
    retry_another_broker_when_not_store_ok: bool
    send_latency_fault_enable: bool
    latency_max: tuple[int, ...]
    not_available_duration: tuple[int, ...]
    async_send_max_in_flight: int
    sync_send_in_caller_thread: bool
    shutdown_timeout: int


class ConsumerSettings(ClientSettings, total=False):
    """Keyword arguments of :class:`~rocketmq_sdk.config.ConsumerConfig`."""

    consume_thread_min: int
    consume_thread_max: int
    pull_batch_size: int
    consume_message_batch_max_size: int
    pull_threshold_for_queue: int
    pull_threshold_size_for_queue: int
    pull_interval: int
    pull_threshold_for_topic: int
    pull_threshold_size_for_topic: int
    consume_concurrently_max_span: int
    consume_timeout: float
    consume_from_where: ConsumeFromWhere | str
    consume_timestamp: str
    message_model: MessageModel | str
    local_offset_store_dir: str | None
    max_reconsume_times: int
    rebalance_interval: int
    suspend_timeout: int
    pull_timeout: int
    pull_time_delay_when_exception: int
    suspend_current_queue_time: int
    rebalance_lock_interval: int
    await_termination_timeout: int
    post_subscription_when_pull: bool


class LitePullConsumerSettings(ConsumerSettings, total=False):
    """Keyword arguments of :class:`~rocketmq_sdk.config.LitePullConsumerConfig`."""

    pull_threshold_for_all: int
    auto_commit: bool
    auto_commit_interval: int
    poll_timeout_millis: int
