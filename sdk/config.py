"""Configuration objects of producers and consumers (snake_case names of the Java client's).

``Producer(group, namesrv_addr, **config)`` and ``PushConsumer(group, namesrv_addr, **config)``
turn their keyword arguments into one of these with :meth:`ClientConfig.from_kwargs`, which
refuses unknown names (a typo would otherwise be silently ignored). All times are milliseconds
unless the name says otherwise; sizes are bytes.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import difflib
import os
import socket
import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .exceptions import ClientStateError, IllegalArgumentError
from .protocol.acl import AclClientRPCHook
from .protocol.bodies import ConsumeFromWhere, MessageModel
from .protocol.codes import DEFAULT_TOPIC
from .remoting.loop import resolve_event_loop

__all__ = ["DEFAULT_SUBGROUP", "ClientConfig", "ConsumerConfig", "LitePullConsumerConfig", "ProducerConfig",
           "address_server_url", "local_ip", "split_namesrv_addr"]

C = TypeVar("C", bound="ClientConfig")


def split_namesrv_addr(value: str | Iterable[str] | None) -> list[str]:
    """Name server addresses from ``"host:port;host:port"`` or an iterable of ``host:port``
    (blanks dropped); None or empty means the ``NAMESRV_ADDR`` environment variable (Java's
    ``NAMESRV_ADDR``). [] when there is none."""
    if not value:
        value = os.environ.get("NAMESRV_ADDR", "")
    parts = value.split(";") if isinstance(value, str) else list(value)
    return [p.strip() for p in parts if p and p.strip()]


#: the address server path when ``namesrv_domain_subgroup`` is not set (Java ``rocketmq.namesrv.domain.subgroup``)
DEFAULT_SUBGROUP = "nsaddr"


def address_server_url(domain: str, subgroup: str = DEFAULT_SUBGROUP) -> str:
    """The URL of the address server of ``namesrv_domain`` (Java ``MixAll.getWSAddr``): port 8080
    unless ``domain`` has one, path ``/rocketmq/<subgroup>``; a full ``http(s)://`` URL is used as
    given."""
    if domain.startswith(("http://", "https://")):
        return domain
    host = domain if ":" in domain else f"{domain}:8080"
    return f"http://{host}/rocketmq/{subgroup}"


#: the client protocols: Apache RocketMQ's remoting (name servers + brokers) or 5.x gRPC (a proxy)
PROTOCOLS = ("remoting", "grpc")


def wants_grpc(protocol: str, namesrv_addr: str | None) -> bool:
    """True when a client is asked for RocketMQ 5's gRPC API: ``protocol="grpc"`` or an address
    ``grpc://...`` / ``grpcs://...``.

    Raises:
        IllegalArgumentError: ``protocol`` is neither ``"remoting"`` nor ``"grpc"``.
    """
    if protocol not in PROTOCOLS:
        raise IllegalArgumentError(f"protocol must be 'remoting' or 'grpc', got {protocol!r}")
    return protocol == "grpc" or str(namesrv_addr or "").startswith(("grpc://", "grpcs://"))


def grpc_twin_wanted(cls: type, base: type, protocol: str, namesrv_addr: str | None, hint: str = "") -> bool:
    """True when ``base(...)`` is asked for RocketMQ 5's gRPC API (:func:`wants_grpc`): its
    ``__new__`` then returns the gRPC twin instead.

    Raises:
        IllegalArgumentError: a subclass of ``base`` asked for gRPC (subclasses speak remoting
            only; ``hint`` names an alternative), or an unknown ``protocol``.
    """
    if not wants_grpc(protocol, namesrv_addr):
        return False
    if cls is not base:
        raise IllegalArgumentError(f"{cls.__name__} speaks remoting only: for RocketMQ 5 gRPC use "
                                   f"{base.__name__}(protocol='grpc'){hint}")
    return True


def local_ip() -> str:
    """The IPv4 address of the outbound interface (no packet is sent), or 127.0.0.1."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            host: str = s.getsockname()[0]  # (host, port) of an AF_INET socket
            return host
    except OSError:
        return "127.0.0.1"


@dataclass
class ClientConfig:
    """Settings shared by every client (Java ``ClientConfig``).

    Attributes:
        namesrv_addr: name server list ``"host:port;host:port"`` (Java ``namesrvAddr``); default
            the ``NAMESRV_ADDR`` environment variable.
        namesrv_domain: address server (``rocketmq.namesrv.domain``: ``host[:port]`` or a URL)
            asked for the name server list when ``namesrv_addr`` is unset, then every 2 minutes
            (default the ``ROCKETMQ_NAMESRV_DOMAIN`` environment variable).
        namesrv_domain_subgroup: path part of the address server URL (``nsaddr``).
        instance_name: ``"DEFAULT"`` is replaced by ``<pid>#<ns>`` as Java does for producers and
            clustering consumers, so each client object gets its own client instance.
        client_ip: the IP written into the client id (default: the outbound interface's).
        unit_name: optional unit name appended to the client id.
        poll_name_server_interval: route refresh period, ms (30000).
        heartbeat_broker_interval: heartbeat period, ms (30000).
        persist_consumer_offset_interval: consumer offset persist period, ms (5000).
        mq_client_api_timeout: timeout of admin-like requests (routes, offsets...), ms (3000).
        connect_timeout: TCP connect timeout, ms (3000).
        rpc_hooks: objects with ``before_request``/``after_response`` (e.g. ACL signing).
        access_key / secret_key / security_token: ACL credentials; when ``access_key`` is set
            every request is signed (``AclClientRPCHook``, HMAC-SHA1, docs/protocol.md §6.8).
        use_tls: talk TLS to name servers and brokers (Java ``useTLS``, False). Without
            ``ssl_context`` the server certificate is verified against the system trust store
            (Java's default, ``tls.client.authServer=false``, verifies nothing; use
            ``rocketmq_sdk.remoting.client.client_ssl_context(verify=False)`` to mirror it).
        ssl_context: the ``ssl.SSLContext`` to connect with (a CA file, client certificate...);
            setting it implies ``use_tls``.
        event_loop: implementation of the client's background I/O loop: ``"auto"`` (default:
            uvloop when it is installed, else asyncio's loop), ``"asyncio"`` or ``"uvloop"``
            (an error when uvloop is missing). The environment variable
            ``ROCKETMQ_EVENT_LOOP`` overrides it. Only the I/O thread is affected (async sends,
            consumers, routes, heartbeats); your own asyncio loop is never replaced.
        use_heartbeat_v2: RocketMQ 5.x heartbeat v2 (Java ``useHeartbeatV2``, False): a full
            heartbeat with a ``heartbeatFingerprint`` when the subscriptions changed or the broker
            asks for it (``IS_SUB_CHANGE``), else a short one without subscriptions
            (``withoutSub``). Brokers that do not announce ``IS_SUPPORT_HEART_BEAT_V2`` (4.x)
            always get full heartbeats.
    """

    namesrv_addr: str | None = None
    namesrv_domain: str | None = None
    namesrv_domain_subgroup: str = DEFAULT_SUBGROUP
    instance_name: str = "DEFAULT"
    client_ip: str | None = None
    unit_name: str | None = None
    poll_name_server_interval: int = 30_000
    heartbeat_broker_interval: int = 30_000
    persist_consumer_offset_interval: int = 5_000
    mq_client_api_timeout: int = 3_000
    connect_timeout: int = 3_000
    rpc_hooks: tuple[Any, ...] = ()
    access_key: str | None = None
    secret_key: str | None = None
    security_token: str | None = None
    use_tls: bool = False
    ssl_context: ssl.SSLContext | None = None
    event_loop: str = "auto"
    use_heartbeat_v2: bool = False

    @classmethod
    def from_kwargs(cls: type[C], **kwargs: Any) -> C:
        """Build a config from keyword arguments.

        Raises:
            IllegalArgumentError: an unknown setting name; the message suggests the nearest
                known one ("send_msg_timout (did you mean send_msg_timeout?)").
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(kwargs) - names)
        if unknown:
            hints = []
            for name in unknown:
                near = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
                hints.append(f"{name} (did you mean {near[0]}?)" if near else name)
            raise IllegalArgumentError(f"unknown {cls.__name__} setting(s): {', '.join(hints)}")
        if "rpc_hooks" in kwargs:
            kwargs["rpc_hooks"] = tuple(kwargs["rpc_hooks"] or ())
        if "event_loop" in kwargs:
            resolve_event_loop(kwargs["event_loop"])  # an unknown name or a missing uvloop: fail now
        return cls(**kwargs)

    @property
    def effective_rpc_hooks(self) -> list[Any]:
        """``rpc_hooks`` plus, with ``access_key``, an ``AclClientRPCHook`` (last: it signs the
        request as the other hooks left it)."""
        hooks = list(self.rpc_hooks)
        if self.access_key:
            hooks.append(AclClientRPCHook(self.access_key, self.secret_key or "", self.security_token))
        return hooks

    @property
    def effective_ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context connections use: ``ssl_context``, else with ``use_tls`` a default
        verifying context, else None (plain TCP)."""
        if self.ssl_context is not None:
            return self.ssl_context
        return ssl.create_default_context() if self.use_tls else None

    @property
    def namesrv_addr_list(self) -> list[str]:
        """The name server addresses (``;``-separated in ``namesrv_addr``, else ``$NAMESRV_ADDR``)."""
        return split_namesrv_addr(self.namesrv_addr)

    @property
    def address_server(self) -> str | None:
        """The address server URL, when ``namesrv_domain`` (or ``$ROCKETMQ_NAMESRV_DOMAIN``) is set."""
        domain = self.namesrv_domain or os.environ.get("ROCKETMQ_NAMESRV_DOMAIN")
        return address_server_url(domain, self.namesrv_domain_subgroup) if domain else None

    def check_name_server(self) -> None:
        """Raise when the client has no way to find a name server: neither ``namesrv_addr`` (or
        ``$NAMESRV_ADDR``) nor ``namesrv_domain`` (or ``$ROCKETMQ_NAMESRV_DOMAIN``) is set. Producers
        and consumers call it at ``start()``, before anything is connected.

        Raises:
            ClientStateError: no name server and no address server.
        """
        if not self.namesrv_addr_list and not self.address_server:
            raise ClientStateError("no name server: set namesrv_addr (or $NAMESRV_ADDR) or namesrv_domain")

    def build_client_id(self) -> str:
        """Java ``buildMQClientId``: ``ip@instanceName[@unitName]``; ``DEFAULT`` becomes
        ``<pid>#<nanotime>``."""
        instance = self.instance_name
        if instance == "DEFAULT":
            instance = f"{os.getpid()}#{time.monotonic_ns()}"
        cid = f"{self.client_ip or local_ip()}@{instance}"
        if self.unit_name:
            cid += f"@{self.unit_name}"
        return cid


@dataclass
class ProducerConfig(ClientConfig):
    """Producer settings (Java ``DefaultMQProducer``).

    Attributes:
        send_msg_timeout: default send timeout, ms (3000); covers all retries of a sync send.
        retry_times_when_send_failed: extra attempts of a sync send (2 → 3 attempts).
        compress_msg_body_over_howmuch: bodies of at least this many bytes are zlib-compressed
            (4096).
        compress_level: zlib level (5).
        max_message_size: largest body accepted, bytes (4 MiB).
        create_topic_key: the default topic whose route is used for topics that do not exist
            yet (``TBW102``).
        default_topic_queue_nums: queues of an auto-created topic (4).
        namespace: prefix of the group and topics on the broker (``<namespace>%<name>``, Java
            ``NamespaceUtil``); results show the topic without it.
        retry_times_when_send_async_failed: extra attempts of ``send_async`` / ``asend`` (2).
        retry_another_broker_when_not_store_ok: a sync send whose status is not SEND_OK
            (flush/slave timeouts) is sent again to another broker (False, as Java).
        send_latency_fault_enable: latency fault tolerance (docs/protocol.md §6.2): slow or failed brokers are
            avoided for a while (False).
        latency_max: latency thresholds, ms (50, 100, 550, 1000, 2000, 3000, 15000).
        not_available_duration: how long a broker is avoided for each threshold, ms
            (0, 0, 30000, 60000, 120000, 180000, 600000).
        async_send_max_in_flight: ``send_async`` requests in flight per producer before new
            ones wait (10000; Java's ``backPressureForAsyncSendNum``-like bound).
        shutdown_timeout: how long ``shutdown()`` waits for in-flight async sends, ms (3000).
        sync_send_in_caller_thread: once a topic's route is cached, ``send`` (without selector)
            and ``send_batch`` talk to the broker over a blocking connection owned by the calling
            thread instead of hopping to the I/O thread (True; ~60 % less client CPU).
    """

    send_msg_timeout: int = 3_000
    retry_times_when_send_failed: int = 2
    compress_msg_body_over_howmuch: int = 4096
    compress_level: int = 5
    max_message_size: int = 4 * 1024 * 1024
    create_topic_key: str = DEFAULT_TOPIC
    default_topic_queue_nums: int = 4
    namespace: str | None = None
    retry_times_when_send_async_failed: int = 2
    retry_another_broker_when_not_store_ok: bool = False
    send_latency_fault_enable: bool = False
    latency_max: tuple[int, ...] = (50, 100, 550, 1000, 2000, 3000, 15000)
    not_available_duration: tuple[int, ...] = (0, 0, 30000, 60000, 120000, 180000, 600000)
    async_send_max_in_flight: int = 10_000
    sync_send_in_caller_thread: bool = True
    shutdown_timeout: int = 3_000


def _default_consume_timestamp() -> str:
    return (_dt.datetime.now() - _dt.timedelta(minutes=30)).strftime("%Y%m%d%H%M%S")


@dataclass
class ConsumerConfig(ClientConfig):
    """Push consumer settings (Java ``DefaultMQPushConsumer``).

    Attributes:
        consume_thread_min / consume_thread_max: listener thread pool size (20/20; the pool
            uses ``consume_thread_max`` threads).
        pull_batch_size: messages asked per pull (32).
        consume_message_batch_max_size: messages handed to one listener call (1).
        pull_threshold_for_queue: pulling of a queue pauses while this many messages are
            cached (1000).
        pull_threshold_size_for_queue: same, in MiB of bodies (100).
        pull_interval: pause between pulls of a queue, ms (0).
        pull_threshold_for_topic / pull_threshold_size_for_topic: when not -1 (default), the
            per-queue thresholds become these divided by the number of queues of the topic the
            consumer owns (at least 1; messages / MiB), as Java.
        consume_concurrently_max_span: concurrent consumers pause pulling a queue while the
            offsets cached span more than this (2000), so one slow message cannot hold back
            an unbounded committed-offset gap.
        consume_timeout: minutes a message may be in a concurrent listener before it is sent
            back for redelivery (15; fractions allowed); also bounds an async listener call.
        consume_from_where: where a group with no stored offset starts (LAST_OFFSET).
        consume_timestamp: ``yyyyMMddHHmmss`` for CONSUME_FROM_TIMESTAMP (now − 30 min).
        message_model: CLUSTERING (offsets on the broker, queues split in the group) or
            BROADCASTING (every instance gets every message; offsets in a local file; no
            send-back: a failed message is logged and dropped, as Java).
        local_offset_store_dir: root of broadcasting offset files
            (``<dir>/<clientId>/<group>/offsets.json``); None means ``~/.rocketmq_offsets``
            (Java ``rocketmq.client.localOffsetStoreDir``).
        max_reconsume_times: deliveries before the broker moves a message to the DLQ (-1 → 16).
        rebalance_interval: rebalance period, ms (20000).
        suspend_timeout: broker long-poll hold time, ms (15000).
        pull_timeout: client timeout of a long-polling pull, ms (30000).
        pull_time_delay_when_exception: back-off after a failed pull, ms (1000).
        suspend_current_queue_time: orderly consumers: delay before a suspended batch
            (SUSPEND_CURRENT_QUEUE_A_MOMENT) is consumed again, ms (1000).
        rebalance_lock_interval: orderly clustering consumers renew their broker queue locks
            this often, ms (20000, Java ``rocketmq.client.rebalance.lockInterval``).
        await_termination_timeout: how long ``shutdown()`` waits for running listeners, ms.
        post_subscription_when_pull: send the subscription with every pull (SUBSCRIPTION flag).
    """

    consume_thread_min: int = 20
    consume_thread_max: int = 20
    pull_batch_size: int = 32
    consume_message_batch_max_size: int = 1
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue: int = 100
    pull_interval: int = 0
    pull_threshold_for_topic: int = -1
    pull_threshold_size_for_topic: int = -1
    consume_concurrently_max_span: int = 2000
    consume_timeout: float = 15
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp: str = field(default_factory=_default_consume_timestamp)
    message_model: MessageModel = MessageModel.CLUSTERING
    local_offset_store_dir: str | None = None
    max_reconsume_times: int = -1
    rebalance_interval: int = 20_000
    suspend_timeout: int = 15_000
    pull_timeout: int = 30_000
    pull_time_delay_when_exception: int = 1_000
    suspend_current_queue_time: int = 1_000
    rebalance_lock_interval: int = 20_000
    await_termination_timeout: int = 10_000
    post_subscription_when_pull: bool = False

    def __post_init__(self) -> None:
        try:
            if isinstance(self.consume_from_where, str):
                self.consume_from_where = ConsumeFromWhere[self.consume_from_where]
            if isinstance(self.message_model, str):
                self.message_model = MessageModel[self.message_model]
        except KeyError as exc:
            raise IllegalArgumentError(f"unknown consume_from_where or message_model: {exc}") from None
        if not 1 <= self.pull_batch_size <= 1024:
            raise IllegalArgumentError("pull_batch_size must be in 1..1024")
        if not 1 <= self.consume_message_batch_max_size <= 1024:
            raise IllegalArgumentError("consume_message_batch_max_size must be in 1..1024")
        if self.consume_thread_max < 1 or self.consume_thread_min > self.consume_thread_max:
            raise IllegalArgumentError("consume_thread_min must be ≤ consume_thread_max, and both ≥ 1")

    def build_client_id(self) -> str:
        """As :meth:`ClientConfig.build_client_id`, except that BROADCASTING consumers keep
        ``DEFAULT`` (Java changes it to the pid only for clustering), so a restarted instance
        finds its local offsets file."""
        if self.message_model is MessageModel.BROADCASTING and self.instance_name == "DEFAULT":
            cid = f"{self.client_ip or local_ip()}@DEFAULT"
            return f"{cid}@{self.unit_name}" if self.unit_name else cid
        return super().build_client_id()

    @property
    def effective_max_reconsume_times(self) -> int:
        """``max_reconsume_times``, with -1 meaning 16 (Java)."""
        return 16 if self.max_reconsume_times == -1 else self.max_reconsume_times


@dataclass
class LitePullConsumerConfig(ConsumerConfig):
    """Lite-pull consumer settings (Java ``DefaultLitePullConsumer``); the push settings that
    make sense (``pull_threshold_for_queue``, ``message_model``, ``consume_from_where``,
    ``rebalance_interval``...) apply too.

    Attributes:
        pull_batch_size: messages asked per pull and at most returned by one ``poll`` (10).
        pull_threshold_for_all: background pulling pauses while this many messages wait in the
            consumer, all queues together (10000).
        auto_commit: commit the polled position automatically (True).
        auto_commit_interval: at most this often, checked at each ``poll``, ms (5000).
        poll_timeout_millis: default ``poll`` timeout, ms (5000).
        suspend_timeout: broker long-poll hold time, ms (20000).
    """

    pull_batch_size: int = 10
    pull_threshold_for_all: int = 10_000
    auto_commit: bool = True
    auto_commit_interval: int = 5_000
    poll_timeout_millis: int = 5_000
    suspend_timeout: int = 20_000
