"""Broker settings: the standard ``broker.conf`` keys, in snake_case.

``BrokerConfig.from_properties`` reads a ``broker.conf`` (Java properties: ``key=value``) using
RocketMQ's camelCase key names; unknown keys are logged and ignored. As in Java, one file holds
the broker's keys and the store's (``MessageStoreConfig``): the store's live in the
:class:`~rocketmq_broker.store.config.StoreConfig` at ``BrokerConfig.store``, the very object the
running store reads, so UPDATE_BROKER_CONFIG reaches it (see :data:`RESTART_ONLY_KEYS`).
Parsing and typed conversion are :mod:`rocketmq_sdk.properties`'s.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import ssl
from dataclasses import dataclass, field, fields
from typing import Any

from rocketmq_broker.store.config import StoreConfig
from rocketmq_broker.store.ha_service import HASettings
from rocketmq_sdk.properties import (
    INLINE,
    apply_properties,
    coerce_settings,
    format_properties,
    parse_properties,
    read_properties,
    settings_fields,
    snake,
    typed_settings,
)
from rocketmq_sdk.remoting.client import client_ssl_context
from rocketmq_sdk.remoting.server import server_ssl_context

__all__ = ["RESTART_ONLY_KEYS", "BrokerConfig", "RestartRequiredError", "apply_properties", "config_to_properties",
           "read_properties", "read_properties_text", "restart_only", "snake", "tls_server_context"]

log = logging.getLogger("rocketmq_broker")


@dataclass
class BrokerConfig:
    """Broker configuration (defaults are Apache RocketMQ 4.9.8's unless noted).

    ``BrokerConfig(**settings)`` takes any of the fields below and any
    :class:`~rocketmq_broker.store.config.StoreConfig` field (``store_path_root_dir``,
    ``flush_disk_type``, ``mapped_file_size_commit_log``, ``max_message_size``,
    ``file_reserved_time``, ``disk_max_used_space_ratio``...; text values are converted), or a
    whole ``store=StoreConfig(...)``. Store settings are held once, in :attr:`store`; reading or
    setting them on the broker config (``cfg.max_message_size``) reads or sets ``cfg.store``'s.

    Attributes:
        store: the store's settings (:class:`StoreConfig`), shared with the running
            ``MessageStore``.
        broker_cluster_name / broker_name / broker_id: identity (``DefaultCluster``, ``broker-a``, 0).
        listen_port: remoting port (10911; 0 picks a free one).
        broker_ip1: address advertised to the name server and clients (127.0.0.1 here, since the
            reference broker binds loopback by default).
        namesrv_addr: ``host:port;host:port`` of the name servers.
        auto_create_topic_enable: create unknown topics on first send from TBW102 (true).
        default_topic_queue_nums: queues of TBW102 and auto-created topics (8).
        long_polling_enable: hold pulls that find nothing (true).
        short_polling_time_mills: hold time when long polling is off (1000 ms), also the
            re-check period of held pulls then.
        pull_hold_check_interval: period of the re-check of held pulls with long polling (5000 ms;
            not a Java key: Java's ``PullRequestHoldService`` hard-codes 5 s). Small values are
            for tests.
        register_name_server_period: full registration period (30000 ms).
        flush_consumer_offset_interval: consumerOffset.json write period (5000 ms).
        channel_expired_timeout: drop client channels silent this long (120000 ms).
        client_channel_scan_interval: how often idle consumer channels are looked for (10000 ms;
            not a Java key: Java's ClientHousekeepingService scans every 10 s).
        enable_property_filter: allow SQL92 subscriptions (false).
        filter_support_retry: apply a group's SQL92 filter of a topic to its retry messages too,
            in pulls of ``%RETRY%<group>`` (``filterSupportRetry``, false: retries unfiltered).
        filter_data_clean_time_span: how long the filter of a group gone is kept in
            ``config/consumerFilter.json`` (``filterDataCleanTimeSpan``, 86400000 ms).
        acl_enable: check every request against the ACL file (``aclEnable``, false; see
            ``rocketmq_broker.broker.acl``).
        acl_config_file: the ``plain_acl.yml`` to use (``aclConfigFile``, not a Java key; Java reads
            ``$ROCKETMQ_HOME/conf/plain_acl.yml``). Default: that file when ``ROCKETMQ_HOME`` is
            set, else ``<storePathRootDir>/conf/plain_acl.yml``; see :attr:`acl_file_path`.
        acl_denied_response_code: code answered to a request the ACL refuses
            (``aclDeniedResponseCode``, not a Java key: 16 NO_PERMISSION; 1 answers as 4.9.8 does).
        transaction_time_out: a half message is first checked this long after its birth
            (``transactionTimeOut``, 6000 ms; ``CHECK_IMMUNITY_TIME_IN_SECONDS`` overrides it).
        transaction_check_max: checks of one half message before it is discarded
            (``transactionCheckMax``, 15).
        transaction_check_interval: period of the transaction check rounds
            (``transactionCheckInterval``, 60000 ms).
        reject_transaction_message: refuse half messages (``TRAN_MSG=true``) with NO_PERMISSION
            "the broker[<brokerIP1>] sending transaction message is forbidden"
            (``rejectTransactionMessage``, false).
        store_reply_message_enable: store request-reply replies too, besides pushing them to the
            requester (``storeReplyMessageEnable``, true).
        tls_enable: serve TLS only and talk TLS to the name servers (``tlsEnable``, false; Java
            sets this through ``tls.server.mode``, whose default ``permissive`` also accepts
            plaintext: not offered here).
        tls_server_cert_path / tls_server_key_path: PEM certificate chain and key
            (``tlsServerCertPath`` / ``tlsServerKeyPath``, Java ``tls.server.certPath`` /
            ``tls.server.keyPath``); required with ``tls_enable``.
        tls_client_trust_cert_path: CA file used to verify the name servers' certificates
            (``tlsClientTrustCertPath``, Java ``tls.client.trustCertPath``); default the system
            trust store.
        busy_poll_us: keep the event loop polling for up to this many µs after answering
            requests (in the read that brought them: not SYNC_FLUSH sends nor held pulls)
            instead of sleeping until the next request (``busyPollUs``, not a Java key; 0,
            default: off). Adaptive (``rocketmq_sdk.remoting.busy_poll``): it pays for request
            streams with gaps under the window, e.g. synchronous senders, on virtual machines
            where waking an idle vCPU is dear; leave it off for a broker sharing its process
            (and GIL) with clients (``start_embedded_cluster``, ``in_process=True``).

    Master/slave replication (issue 20; docs/protocol.md §8.1; Java ``BrokerConfig`` /
    ``MessageStoreConfig`` keys, 4.9.8 defaults):
        broker_role: ``ASYNC_MASTER`` (sends acknowledged after the local write),
            ``SYNC_MASTER`` (after a slave has the bytes) or ``SLAVE`` (``brokerRole``).
            Masters always get ``broker_id`` 0; a SLAVE needs ``broker_id`` > 0.
        ha_listen_port: the HA port (``haListenPort``); None: ``listen_port + 1`` (a free port
            when ``listen_port`` is 0). Java 4.9.8 always uses ``listenPort + 1``.
        broker_ip2: host part of the advertised HA address (``brokerIP2``; None: ``broker_ip1``).
        ha_master_address: a slave's fixed master HA address ``host:port`` (``haMasterAddress``;
            None: learnt from the name server's REGISTER_BROKER answers).
        ha_send_heartbeat_interval / ha_housekeeping_interval: 5000 / 20000 ms.
        ha_transfer_batch_size: largest transfer frame body (32768 bytes).
        ha_slave_fallbehind_max: SYNC_MASTER: SLAVE_NOT_AVAILABLE beyond this lag (256 MiB).
        slave_timeout: SYNC_MASTER: FLUSH_SLAVE_TIMEOUT after this wait (3000 ms; not
            ``syncFlushTimeout``).
        slave_read_enable: a master may suggest pulling from a slave (``slaveReadEnable``, false).
        access_message_in_memory_max_ratio: a pull further behind the CommitLog end than this
            percentage of physical memory is "slow": suggested to the slave (40; a store setting,
            held by ``store``).
        offset_check_in_slave: a slave answers PULL_OFFSET_MOVED instead of
            PULL_RETRY_IMMEDIATELY (``offsetCheckInSlave``, false).
        slave_sync_interval: SlaveSynchronize period (10000 ms, first run 3000 ms after start;
            not a Java key: Java hard-codes both).

    RocketMQ 5.x (issue 32, docs/rocketmq5.md; 5.3.3 ``BrokerConfig`` / ``MessageStoreConfig`` keys):
        broker_version: ``4.9.8`` (default; the environment variable ``ROCKETMQ_BROKER_VERSION``
            changes the default, e.g. for ``make test-rmq5``) or a 5.x version such as ``5.3.3``
            (``brokerVersion``, not a Java key): a 5.x broker serves POP (POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE,
            CHANGE_MESSAGE_INVISIBLETIME, NOTIFICATION, POLLING_INFO) and timer messages and answers
            heartbeats as 5.x does; a 4.9.8 one answers those codes REQUEST_CODE_NOT_SUPPORTED.
        revive_interval: how often un-acked POP messages past their invisible time are copied to
            the POP retry topic (``reviveInterval``, 1000 ms).
        revive_queue_num: range of ``reviveQid`` in POP answers (``reviveQueueNum``, 8).
        pop_from_retry_probability: % of pops that read the POP retry topic first
            (``popFromRetryProbability``, 20).
        pop_polling_size: held POP requests per topic and group before POLLING_FULL
            (``popPollingSize``, 1024).
        timer_precision_ms: timer-message granularity (``timerPrecisionMs``, 1000 ms).
        timer_max_delay_sec: longest timer delay (``timerMaxDelaySec``, 259200 s = 3 days).
        recall_message_enable: whether RECALL_MESSAGE may cancel a timer message by the
            ``recallHandle`` of its send answer (``recallMessageEnable``, false as 5.3.3: every
            recall is then answered NO_PERMISSION).
    """

    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = 0
    listen_port: int = 10911
    bind_address: str = "127.0.0.1"
    broker_ip1: str = "127.0.0.1"
    namesrv_addr: str | None = None
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8
    long_polling_enable: bool = True
    short_polling_time_mills: int = 1000
    pull_hold_check_interval: int = 5000
    register_name_server_period: int = 30_000
    flush_consumer_offset_interval: int = 5_000
    channel_expired_timeout: int = 120_000
    client_channel_scan_interval: int = 10_000
    enable_property_filter: bool = False
    filter_support_retry: bool = False
    filter_data_clean_time_span: int = 24 * 3600 * 1000
    acl_enable: bool = False
    acl_config_file: str | None = None
    acl_denied_response_code: int = 16
    transaction_time_out: int = 6_000
    transaction_check_max: int = 15
    transaction_check_interval: int = 60_000
    reject_transaction_message: bool = False
    store_reply_message_enable: bool = True
    tls_enable: bool = False
    tls_server_cert_path: str | None = None
    tls_server_key_path: str | None = None
    tls_client_trust_cert_path: str | None = None
    busy_poll_us: int = 0
    # -- master/slave replication (issue 20) -----------------------------------------------
    broker_role: str = "ASYNC_MASTER"
    ha_listen_port: int | None = None
    broker_ip2: str | None = None
    ha_master_address: str | None = None
    # the replication defaults are HASettings' own (one source; ha_settings() maps them back)
    ha_send_heartbeat_interval: int = HASettings.heartbeat_interval
    ha_housekeeping_interval: int = HASettings.housekeeping_interval
    ha_transfer_batch_size: int = HASettings.transfer_batch_size
    ha_slave_fallbehind_max: int = HASettings.slave_fallbehind_max
    slave_timeout: int = HASettings.slave_timeout
    slave_read_enable: bool = False
    # access_message_in_memory_max_ratio: a store setting (StoreConfig), reached through .store
    offset_check_in_slave: bool = False
    slave_sync_interval: int = 10_000
    # -- end of replication keys ------------------------------------------------------------
    # -- RocketMQ 5.x (issue 32; docs/rocketmq5.md) -------------------------------------------
    broker_version: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_BROKER_VERSION") or "4.9.8")
    revive_interval: int = 1000
    revive_queue_num: int = 8
    pop_from_retry_probability: int = 20
    pop_polling_size: int = 1024
    timer_precision_ms: int = 1000
    timer_max_delay_sec: int = 259200
    recall_message_enable: bool = False
    # -- end of 5.x keys -------------------------------------------------------------------
    store: StoreConfig = field(default_factory=StoreConfig, metadata=INLINE)

    def __init__(self, *, store: StoreConfig | None = None, **settings: Any) -> None:
        own = {f.name: f for f in fields(self) if f.name != "store"}
        object.__setattr__(self, "store", store if store is not None else StoreConfig())
        for name, f in own.items():
            if name not in settings:
                setattr(self, name, f.default_factory() if f.default is dataclasses.MISSING else f.default)
        unknown = sorted(set(settings) - set(settings_fields(BrokerConfig)))
        if unknown:
            raise TypeError(f"unknown BrokerConfig setting(s): {', '.join(unknown)}")
        for name, value in coerce_settings(BrokerConfig, settings).items():
            setattr(self, name, value)

    def __getattr__(self, name: str) -> Any:  # only called for names that are not own attributes
        if name in _STORE_FIELDS:
            return getattr(self.store, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _STORE_FIELDS:
            setattr(self.store, name, value)
        else:
            object.__setattr__(self, name, value)

    @property
    def is_v5(self) -> bool:
        """True when ``broker_version`` is 5.x or later (the broker answers as a 5.x broker)."""
        major = str(self.broker_version).strip().split(".", 1)[0]
        return major.isdigit() and int(major) >= 5

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip1}:{self.listen_port}"

    def ha_settings(self) -> HASettings:
        """The replication settings of the store's HA service."""
        return HASettings(heartbeat_interval=self.ha_send_heartbeat_interval,
                          housekeeping_interval=self.ha_housekeeping_interval,
                          transfer_batch_size=self.ha_transfer_batch_size,
                          slave_fallbehind_max=self.ha_slave_fallbehind_max, slave_timeout=self.slave_timeout,
                          sync_master=self.broker_role == "SYNC_MASTER")

    def check_role(self) -> None:
        """Java ``BrokerStartup``: masters get ``broker_id`` 0, a SLAVE needs ``broker_id`` > 0.

        Raises:
            ValueError: an unknown ``broker_role``, or a SLAVE with ``broker_id`` <= 0.
        """
        if self.broker_role not in ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"):
            raise ValueError(f"brokerRole must be ASYNC_MASTER, SYNC_MASTER or SLAVE, got {self.broker_role!r}")
        if self.broker_role == "SLAVE":
            if self.broker_id <= 0:
                raise ValueError("Slave's brokerId must be > 0")
        else:
            self.broker_id = 0

    @property
    def ha_server_host(self) -> str:
        """Host part of the HA address this broker advertises (``brokerIP2``)."""
        return self.broker_ip2 or self.broker_ip1

    @property
    def acl_file_path(self) -> str:
        """The ACL file read when ``acl_enable`` is set (see ``acl_config_file``)."""
        if self.acl_config_file:
            return self.acl_config_file
        home = os.environ.get("ROCKETMQ_HOME")
        return os.path.join(home or self.store_path_root_dir, "conf", "plain_acl.yml")

    def tls_server_context(self) -> ssl.SSLContext | None:
        """The server TLS context with ``tls_enable`` (see :func:`tls_server_context`)."""
        return tls_server_context(self)

    def tls_client_context(self) -> ssl.SSLContext | None:
        """With ``tls_enable``, the context of the broker's own connections to the name servers."""
        return client_ssl_context(self.tls_client_trust_cert_path) if self.tls_enable else None

    @property
    def config_dir(self) -> str:
        return os.path.join(self.store_path_root_dir, "config")

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> BrokerConfig:
        return _from_properties(cls, props)


def tls_server_context(cfg) -> ssl.SSLContext | None:
    """TLS context of a broker or name server config (``tls_enable``, ``tls_server_cert_path``,
    ``tls_server_key_path``), None without ``tls_enable``.

    Raises:
        ValueError: ``tls_enable`` without ``tls_server_cert_path``.
        OSError, ssl.SSLError: unreadable or mismatched PEM files.
    """
    if not cfg.tls_enable:
        return None
    if not cfg.tls_server_cert_path:
        raise ValueError("tlsEnable=true needs tlsServerCertPath (and tlsServerKeyPath unless the key is in it)")
    return server_ssl_context(cfg.tls_server_cert_path, cfg.tls_server_key_path)


_STORE_FIELDS = frozenset(f.name for f in fields(StoreConfig))

#: camelCase keys UPDATE_BROKER_CONFIG refuses on a running broker: the store reads them only at
#: start (paths, file sizes, flush mode, index geometry, delay levels). Set them in broker.conf
#: and restart. Every other store key applies at once, as in Java (disk-space guard, expiry,
#: flush intervals, message size...).
RESTART_ONLY_KEYS = frozenset({
    "storePathRootDir", "storePathCommitLog", "mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue",
    "flushDiskType", "messageIndexEnable", "maxHashSlotNum", "maxIndexNum", "messageDelayLevel",
    "reserveAheadBytes",
})


class RestartRequiredError(ValueError):
    """UPDATE_BROKER_CONFIG named a setting that takes effect only when the broker starts."""


def restart_only(props: dict[str, str]) -> list[str]:
    """The keys of ``props`` (camelCase or snake_case) that :data:`RESTART_ONLY_KEYS` lists, sorted."""
    restart = {snake(k) for k in RESTART_ONLY_KEYS}
    return sorted(k for k in props if snake(k) in restart)


def _from_properties(cls, props: dict[str, str]):
    return cls(**typed_settings(cls, props, on_unknown=lambda key: log.warning("ignoring unknown config key %s", key)))


#: ``key=value`` lines with camelCase keys, as GET_BROKER_CONFIG / GET_NAMESRV_CONFIG answer
config_to_properties = format_properties
#: Java ``.properties`` text → dict (``rocketmq_sdk.properties.parse_properties``)
read_properties_text = parse_properties
