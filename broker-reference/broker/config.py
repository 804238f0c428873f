"""Broker settings: the standard ``broker.conf`` keys, in snake_case.

``BrokerConfig.from_properties`` reads a ``broker.conf`` (Java properties: ``key=value``) using
RocketMQ's camelCase key names; unknown keys are logged and ignored.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
from dataclasses import dataclass, field, fields

from rocketmq_broker.store.config import FlushDiskType, StoreConfig
from rocketmq_broker.store.ha_service import HASettings
from rocketmq_sdk.remoting.client import client_ssl_context
from rocketmq_sdk.remoting.server import server_ssl_context

log = logging.getLogger("rocketmq_broker")


@dataclass
class BrokerConfig:
    """Broker configuration (defaults are Apache RocketMQ 4.9.8's unless noted).

    Attributes:
        broker_cluster_name / broker_name / broker_id: identity (``DefaultCluster``, ``broker-a``, 0).
        listen_port: remoting port (10911; 0 picks a free one).
        broker_ip1: address advertised to the name server and clients (127.0.0.1 here, since the
            reference broker binds loopback by default).
        namesrv_addr: ``host:port;host:port`` of the name servers.
        store_path_root_dir: store root (``~/store``).
        auto_create_topic_enable: create unknown topics on first send from TBW102 (true).
        default_topic_queue_nums: queues of TBW102 and auto-created topics (8).
        mapped_file_size_commit_log: CommitLog file size in bytes (1 GiB).
        flush_disk_type: ``ASYNC_FLUSH`` or ``SYNC_FLUSH``.
        max_message_size: largest body accepted, bytes (4 MiB).
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
        message_index_enable: build IndexFiles (true).
        file_reserved_time / delete_when / clean_resource_interval: CommitLog expiry (72 hours,
            at hour ``"04"``, checked every 10000 ms).
        disk_max_used_space_ratio / disk_space_clean_forcibly_ratio /
            disk_space_warning_level_ratio / clean_file_forcibly_enable: disk-space guard (75 %,
            0.85, 0.90, true): see ``rocketmq_broker.store.disk_space``.
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

    Master/slave replication (issue 20; ha-protocol.md; Java ``BrokerConfig`` /
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
            percentage of physical memory is "slow": suggested to the slave (40).
        offset_check_in_slave: a slave answers PULL_OFFSET_MOVED instead of
            PULL_RETRY_IMMEDIATELY (``offsetCheckInSlave``, false).
        slave_sync_interval: SlaveSynchronize period (10000 ms, first run 3000 ms after start;
            not a Java key: Java hard-codes both).
    """

    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = 0
    listen_port: int = 10911
    bind_address: str = "127.0.0.1"
    broker_ip1: str = "127.0.0.1"
    namesrv_addr: str | None = None
    store_path_root_dir: str = field(default_factory=lambda: os.path.join(os.path.expanduser("~"), "store"))
    store_path_commit_log: str | None = None
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8
    mapped_file_size_commit_log: int = 1024 * 1024 * 1024
    mapped_file_size_consume_queue: int = 300_000 * 20
    flush_disk_type: str = "ASYNC_FLUSH"
    max_message_size: int = 4 * 1024 * 1024
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
    message_index_enable: bool = True
    file_reserved_time: int = 72
    delete_when: str = "04"
    clean_resource_interval: int = 10000
    disk_max_used_space_ratio: int = 75
    disk_space_clean_forcibly_ratio: float = 0.85
    disk_space_warning_level_ratio: float = 0.90
    clean_file_forcibly_enable: bool = True
    message_delay_level: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
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
    ha_send_heartbeat_interval: int = 5000
    ha_housekeeping_interval: int = 20000
    ha_transfer_batch_size: int = 32768
    ha_slave_fallbehind_max: int = 256 * 1024 * 1024
    slave_timeout: int = 3000
    slave_read_enable: bool = False
    access_message_in_memory_max_ratio: int = 40
    offset_check_in_slave: bool = False
    slave_sync_interval: int = 10_000
    # -- end of replication keys ------------------------------------------------------------

    @property
    def broker_addr(self) -> str:
        return f"{self.broker_ip1}:{self.listen_port}"

    def store_config(self) -> StoreConfig:
        return StoreConfig(store_path_root_dir=self.store_path_root_dir,
                           store_path_commit_log=self.store_path_commit_log,
                           mapped_file_size_commit_log=self.mapped_file_size_commit_log,
                           mapped_file_size_consume_queue=self.mapped_file_size_consume_queue,
                           flush_disk_type=FlushDiskType(self.flush_disk_type),
                           max_message_size=self.max_message_size,
                           file_reserved_time=self.file_reserved_time, delete_when=self.delete_when,
                           clean_resource_interval=self.clean_resource_interval,
                           disk_max_used_space_ratio=self.disk_max_used_space_ratio,
                           disk_space_clean_forcibly_ratio=self.disk_space_clean_forcibly_ratio,
                           disk_space_warning_level_ratio=self.disk_space_warning_level_ratio,
                           clean_file_forcibly_enable=self.clean_file_forcibly_enable,
                           message_index_enable=self.message_index_enable,
                           message_delay_level=self.message_delay_level,
                           access_message_in_memory_max_ratio=self.access_message_in_memory_max_ratio)

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


def snake(name: str) -> str:
    """``brokerClusterName`` → ``broker_cluster_name``; ``brokerIP1`` → ``broker_ip1``."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z\d])([A-Z])", r"\1_\2", name).lower()


def camel(name: str) -> str:
    """``broker_cluster_name`` → ``brokerClusterName``; ``broker_ip1`` → ``brokerIP1``."""
    head, *rest = name.split("_")
    return head + "".join("IP" + p[2:] if p.startswith("ip") else p.capitalize() for p in rest)


def _convert(cls, props: dict[str, str]) -> dict[str, object]:
    """Known keys of ``props`` converted to the field types of ``cls`` (unknown ones logged).

    Raises:
        ValueError: a value does not parse as its field's type.
    """
    known = {f.name: f for f in fields(cls)}
    kwargs: dict[str, object] = {}
    for key, raw in props.items():
        name = snake(key)
        f = known.get(name)
        if f is None:
            log.warning("ignoring unknown config key %s", key)
            continue
        t = f.type if isinstance(f.type, str) else f.type.__name__
        value: object = raw.strip()
        if "bool" in t:
            value = str(value).lower() == "true"
        elif "int" in t:
            value = int(str(value))
        elif "float" in t:
            value = float(str(value))
        kwargs[name] = value
    return kwargs


def _from_properties(cls, props: dict[str, str]):
    return cls(**_convert(cls, props))


def apply_properties(obj, props: dict[str, str]) -> dict[str, object]:
    """Set the known keys of ``props`` on the dataclass ``obj`` (UPDATE_BROKER_CONFIG /
    UPDATE_NAMESRV_CONFIG); returns what was set.

    Raises:
        ValueError: a value does not parse (nothing is set then).
    """
    changed = _convert(type(obj), props)
    for name, value in changed.items():
        setattr(obj, name, value)
    return changed


def config_to_properties(obj) -> str:
    """``key=value`` lines with camelCase keys, as GET_BROKER_CONFIG / GET_NAMESRV_CONFIG answer."""
    lines = []
    for f in fields(obj):
        value = getattr(obj, f.name)
        if value is None:
            value = ""
        elif isinstance(value, bool):
            value = "true" if value else "false"
        lines.append(f"{camel(f.name)}={value}")
    return "\n".join(lines) + "\n"


def read_properties_text(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text (``key=value``, ``#`` comments)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        k, sep, v = line.partition("=")
        if not sep:
            k, _, v = line.partition(":")
        out[k.strip()] = v.strip()
    return out


def read_properties(path: str) -> dict[str, str]:
    """Parse a Java ``.properties``-style file (``key=value``, ``#`` comments)."""
    with open(path, encoding="utf-8") as fh:
        return read_properties_text(fh.read())
