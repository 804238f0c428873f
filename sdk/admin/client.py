"""``AdminClient``: what Apache RocketMQ's ``DefaultMQAdminExt`` / ``mqadmin`` does, in Python.

A blocking API over the SDK's asyncio remoting on an :class:`EventLoopThread`. Every request is
built with the same ``extFields`` mqadmin 4.9.8 sends (checked against captured traffic), to the
same server: name-server requests go to the first answering name server, broker requests to the
master (broker id 0) of each broker concerned.

Example::

    with AdminClient("127.0.0.1:9876") as admin:
        admin.create_topic("Orders", cluster="DefaultCluster", read_queue_nums=4, write_queue_nums=4)
        print(admin.consumer_progress("order-consumers").total_lag)
"""

from __future__ import annotations

import logging
import os
import ssl
import time
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar

from rocketmq_sdk.client.mq_client_api import MQClientAPI
from rocketmq_sdk.exceptions import (
    IllegalArgumentError,
    MQBrokerError,
    MQClientError,
    MQError,
    RemotingError,
    TopicNotExistError,
)
from rocketmq_sdk.protocol.acl import AclClientRPCHook
from rocketmq_sdk.protocol.admin_bodies import (
    ClusterInfo,
    ConsumerConnection,
    ConsumeStats,
    GroupList,
    KVTable,
    ProducerConnection,
    SubscriptionGroupConfig,
    TopicList,
    TopicStatsTable,
)
from rocketmq_sdk.protocol.bodies import (
    ConsumeMessageDirectlyResult,
    ConsumerRunningInfo,
    ResetOffsetBody,
    TopicRouteData,
)
from rocketmq_sdk.protocol.codes import PermName, RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import (
    BrokerNameRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    CreateTopicRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsRequestHeader,
    GetTopicsByClusterRequestHeader,
    KVConfigRequestHeader,
    PlainAccessConfigRequestHeader,
    PullMessageRequestHeader,
    QueryMessageRequestHeader,
    ResetOffsetRequestHeader,
    TopicRequestHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
    ViewMessageRequestHeader,
)
from rocketmq_sdk.protocol.message import MessageExt, MessageQueue, PullStatus
from rocketmq_sdk.protocol.message_codec import decode_messages
from rocketmq_sdk.protocol.msgid import decode_offset_msg_id
from rocketmq_sdk.remoting.client import RemotingClient
from rocketmq_sdk.remoting.command import RemotingCommand
from rocketmq_sdk.remoting.loop import EventLoopThread

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

__all__ = ["AdminClient", "MASTER_ID", "parse_namesrv_addr"]

log = logging.getLogger("rocketmq_sdk.admin")

T = TypeVar("T")
MASTER_ID = 0
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
_UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
_JAVA_LONG_MAX = 2**63 - 1


def parse_namesrv_addr(value: str | Iterable[str] | None) -> list[str]:
    """Name server list from ``"a:9876;b:9876"`` (or an iterable), else ``$NAMESRV_ADDR``.

    Raises:
        IllegalArgumentError: no address given and ``NAMESRV_ADDR`` is unset or empty.
    """
    if value is None:
        value = os.environ.get("NAMESRV_ADDR", "")
    parts = value.split(";") if isinstance(value, str) else list(value)
    addrs = [p.strip() for p in parts if p and p.strip()]
    if not addrs:
        raise IllegalArgumentError("no name server address: pass -n host:port[;host:port] or set NAMESRV_ADDR")
    return addrs


def _check(resp: RemotingCommand, addr: str, request_code: int | None = None) -> RemotingCommand:
    if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and request_code is not None:
        try:
            name = RequestCode(request_code).name
        except ValueError:
            name = "request"
        raise MQBrokerError(resp.code, f"{name} ({request_code}) is not supported by this server", addr)
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        raise TopicNotExistError(resp.code, resp.remark, addr)
    if resp.code != ResponseCode.SUCCESS:
        raise MQBrokerError(resp.code, resp.remark, addr)
    return resp


def _first_tps(value: str | None) -> float | None:
    """Runtime-info TPS values read ``"<10s> <1min> <10min>"``; return the first."""
    if not value:
        return None
    try:
        return float(value.split()[0])
    except (ValueError, IndexError):
        return None


def parse_properties(text: str) -> dict[str, str]:
    """Parse the ``key=value`` lines of GET_BROKER_CONFIG (Java ``Properties`` text, no escapes
    beyond ``\\``-continued keys, which brokers never write)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = value.strip()
    return out


class AdminClient:
    """Administration of a RocketMQ 4.x cluster (topics, groups, messages, name servers).

    Args:
        namesrv_addr: ``"host:port;host:port"`` or a list; defaults to ``$NAMESRV_ADDR``.
        timeout_ms: timeout of each request in milliseconds (default 5000, mqadmin's).
        access_key / secret_key: ACL credentials; when ``access_key`` is given every request is
            signed (``AclClientRPCHook``, what mqadmin does with ``conf/tools.yml``).
        use_tls / ssl_context: connect with TLS, as ``ClientConfig`` (mqadmin ``-Dtls.enable``).
        event_loop: I/O loop implementation, as ``ClientConfig.event_loop`` (``"auto"``).

    Raises:
        IllegalArgumentError: no name server address.

    The client connects lazily; call :meth:`close` (or use it as a context manager) to release
    its I/O thread. Failures raise :class:`~rocketmq_sdk.exceptions.MQBrokerError` (the server
    answered with an error code; ``TopicNotExistError`` for code 17),
    :class:`~rocketmq_sdk.exceptions.RemotingError` (network) or
    :class:`~rocketmq_sdk.exceptions.MQClientError` (nothing to ask: no route, no consumer...).
    """

    def __init__(self, namesrv_addr: str | Iterable[str] | None = None, *, timeout_ms: float = 5000.0,
                 access_key: str | None = None, secret_key: str | None = None, use_tls: bool = False,
                 ssl_context: ssl.SSLContext | None = None, event_loop: str = "auto") -> None:
        self.namesrv_addrs = parse_namesrv_addr(namesrv_addr)
        self.timeout_ms = timeout_ms
        self._loop = EventLoopThread("rocketmq-admin", event_loop=event_loop)
        hooks = [AclClientRPCHook(access_key, secret_key or "")] if access_key else []
        if ssl_context is None and use_tls:
            ssl_context = ssl.create_default_context()
        self._remoting = RemotingClient(rpc_hooks=hooks, ssl_context=ssl_context)
        self._api = MQClientAPI(self._remoting, self.namesrv_addrs, timeout_ms)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close connections and stop the I/O thread (idempotent)."""
        if not self._loop.is_running:
            return
        try:
            self._loop.run(self._remoting.close(), 5.0)
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

    # ------------------------------------------------------------------ plumbing

    async def _namesrv(self, code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
        resp = await self._api.invoke_namesrv(RemotingCommand.request(code, ext or {}, body), self.timeout_ms)
        return _check(resp, self._api.namesrv.chosen or "", code)

    async def _broker(self, addr: str, code: int, ext: dict[str, str] | None = None,
                      body: bytes = b"") -> RemotingCommand:
        resp = await self._remoting.invoke(addr, RemotingCommand.request(code, ext or {}, body), self.timeout_ms)
        return _check(resp, addr, code)

    async def _route(self, topic: str) -> TopicRouteData:
        return await self._api.get_topic_route(topic, self.timeout_ms)

    async def _cluster(self) -> ClusterInfo:
        resp = await self._namesrv(RequestCode.GET_BROKER_CLUSTER_INFO)
        return ClusterInfo.from_json(resp.body)

    async def _master_addrs(self, cluster: str | None = None, broker_addr: str | None = None) -> list[str]:
        if broker_addr:
            return [broker_addr]
        if not cluster:
            raise IllegalArgumentError("give a broker address (-b) or a cluster name (-c)")
        info = await self._cluster()
        names = info.cluster_addr_table.get(cluster)
        if names is None:
            raise MQClientError(f"cluster {cluster!r} not found on the name server")
        addrs = []
        for name in sorted(names):
            bd = info.broker_addr_table.get(name)
            if bd is not None and bd.master_addr():
                addrs.append(bd.master_addr())
        return addrs

    @staticmethod
    def _route_masters(route: TopicRouteData) -> dict[str, str]:
        """broker name → master address, for the brokers of a route that have a master."""
        return {bd.broker_name: bd.broker_addrs[MASTER_ID] for bd in route.broker_datas
                if MASTER_ID in bd.broker_addrs}

    # ================================================================== topics

    def create_topic(self, topic: str, *, cluster: str | None = None, broker_addr: str | None = None,
                     read_queue_nums: int = 8, write_queue_nums: int = 8, perm: int = PermName.READ | PermName.WRITE,
                     order: bool = False) -> list[str]:
        """Create or update a topic (UPDATE_AND_CREATE_TOPIC 17), as ``mqadmin updateTopic``.

        Args:
            topic: topic name.
            cluster: create on every master of this cluster (``-c``)...
            broker_addr: ...or on this broker only (``-b``).
            read_queue_nums / write_queue_nums: queue counts (default 8 each).
            perm: 2 write, 4 read, 6 both (default 6).
            order: mark the topic ordered (the ``order`` flag of the topic config).

        Returns:
            the broker addresses updated.

        Raises:
            IllegalArgumentError: neither ``cluster`` nor ``broker_addr``, or bad counts.
            MQBrokerError, RemotingError.
        """
        if read_queue_nums <= 0 or write_queue_nums <= 0:
            raise IllegalArgumentError("queue numbers must be positive")
        header = CreateTopicRequestHeader(topic=topic, default_topic="TBW102", read_queue_nums=read_queue_nums,
                                          write_queue_nums=write_queue_nums, perm=perm,
                                          topic_filter_type="SINGLE_TAG", topic_sys_flag=0, order=order)

        async def go() -> list[str]:
            addrs = await self._master_addrs(cluster, broker_addr)
            for addr in addrs:
                await self._broker(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
            return addrs

        return self._run(go())

    def update_topic_perm(self, topic: str, perm: int, *, cluster: str | None = None,
                          broker_addr: str | None = None) -> list[str]:
        """Change a topic's permission (2 write, 4 read, 6 both) on the brokers of its route,
        keeping its queue numbers (UPDATE_AND_CREATE_TOPIC 17), as ``mqadmin updateTopicPerm``.

        Args:
            cluster / broker_addr: only the masters of this cluster, or this broker (default:
                every master of the route).

        Returns:
            the broker addresses updated.

        Raises:
            TopicNotExistError: no route. MQClientError: ``broker_addr`` is not in the route.
        """
        if perm not in (PermName.WRITE, PermName.READ, PermName.READ | PermName.WRITE):
            raise IllegalArgumentError(f"perm must be 2, 4 or 6, not {perm}")

        async def go() -> list[str]:
            route = await self._route(topic)
            masters = self._route_masters(route)
            wanted = set(await self._master_addrs(cluster)) if cluster else None
            if broker_addr and broker_addr not in masters.values():
                raise MQClientError(f"broker {broker_addr} is not in the route of topic {topic}")
            done = []
            for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
                addr = masters.get(qd.broker_name)
                if addr is None or (broker_addr and addr != broker_addr) or (wanted is not None and addr not in wanted):
                    continue
                header = CreateTopicRequestHeader(topic=topic, default_topic="TBW102", read_queue_nums=qd.read_queue_nums,
                                                  write_queue_nums=qd.write_queue_nums, perm=perm,
                                                  topic_filter_type="SINGLE_TAG", topic_sys_flag=qd.topic_sys_flag,
                                                  order=False)
                await self._broker(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
                done.append(addr)
            return done

        return self._run(go())

    def delete_topic(self, topic: str, *, cluster: str) -> list[str]:
        """Delete a topic on every master of ``cluster`` (DELETE_TOPIC_IN_BROKER 215), then on
        the name servers (DELETE_TOPIC_IN_NAMESRV 216), as ``mqadmin deleteTopic``.

        Returns:
            the broker addresses the topic was deleted on.

        Raises:
            MQClientError: unknown cluster. MQBrokerError, RemotingError.
        """
        async def go() -> list[str]:
            addrs = await self._master_addrs(cluster)
            for addr in addrs:
                await self._broker(addr, RequestCode.DELETE_TOPIC_IN_BROKER,
                                   TopicRequestHeader(topic=topic).to_ext_fields())
            ext = TopicRequestHeader(topic=topic, cluster_name=cluster).to_ext_fields()
            for ns in self.namesrv_addrs:
                await self._broker(ns, RequestCode.DELETE_TOPIC_IN_NAMESRV, ext)
            return addrs

        return self._run(go())

    def topic_list(self) -> list[str]:
        """All topics the name server knows (GET_ALL_TOPIC_LIST_FROM_NAMESERVER 206), sorted."""
        async def go() -> list[str]:
            resp = await self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
            return sorted(TopicList.from_json(resp.body).topic_list)

        return self._run(go())

    def topics_by_cluster(self, cluster: str) -> list[str]:
        """Topics with queues on a broker of ``cluster`` (GET_TOPICS_BY_CLUSTER 224), sorted;
        [] for an unknown cluster (as the 4.9.8 name server answers)."""
        async def go() -> list[str]:
            resp = await self._namesrv(RequestCode.GET_TOPICS_BY_CLUSTER,
                                       GetTopicsByClusterRequestHeader(cluster=cluster).to_ext_fields())
            return sorted(TopicList.from_json(resp.body).topic_list)

        return self._run(go())

    def topic_clusters(self, topic: str) -> list[str]:
        """The clusters whose brokers serve ``topic`` (GET_ROUTEINFO_BY_TOPIC + cluster info), as
        ``mqadmin topicClusterList``, which looks only at the route's first broker; every broker
        of the route is looked at here.

        Raises:
            TopicNotExistError: no route for the topic.
        """
        async def go() -> list[str]:
            route = await self._route(topic)
            info = await self._cluster()
            names = {bd.broker_name for bd in route.broker_datas}
            return sorted(c for c, members in info.cluster_addr_table.items() if names.intersection(members))

        return self._run(go())

    def topic_list_by_cluster(self) -> list[tuple[str, str, list[str]]]:
        """``topicList -c``: ``(cluster, topic, consumer groups)`` for every topic but retry and
        DLQ topics, sorted by cluster and topic. mqadmin asks each topic's route; here each
        cluster's topics come from one GET_TOPICS_BY_CLUSTER (224) and the groups from
        QUERY_TOPIC_CONSUME_BY_WHO (300) to each master of the cluster (a master that fails is
        skipped)."""
        async def go() -> list[tuple[str, str, list[str]]]:
            info = await self._cluster()
            rows: list[tuple[str, str, list[str]]] = []
            for cluster in sorted(info.cluster_addr_table):
                masters = [bd.broker_addrs[MASTER_ID] for name in sorted(info.cluster_addr_table[cluster])
                           if (bd := info.broker_addr_table.get(name)) and MASTER_ID in bd.broker_addrs]
                resp = await self._namesrv(RequestCode.GET_TOPICS_BY_CLUSTER,
                                           GetTopicsByClusterRequestHeader(cluster=cluster).to_ext_fields())
                for topic in sorted(TopicList.from_json(resp.body).topic_list):
                    if topic.startswith(("%RETRY%", "%DLQ%")):
                        continue
                    groups: set[str] = set()
                    for addr in masters:
                        try:
                            r = await self._broker(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                                                   TopicRequestHeader(topic=topic).to_ext_fields())
                        except (MQBrokerError, RemotingError) as exc:
                            log.debug("consumer groups of %s on %s: %s", topic, addr, exc)
                            continue
                        groups.update(GroupList.from_json(r.body).group_list)
                    rows.append((cluster, topic, sorted(groups)))
            return rows

        return self._run(go())

    def topic_route(self, topic: str) -> TopicRouteData:
        """The topic's route (GET_ROUTEINFO_BY_TOPIC 105).

        Raises:
            TopicNotExistError: no route.
        """
        return self._run(self._route(topic))

    def topic_status(self, topic: str) -> list[QueueStatus]:
        """Per queue min/max offset and last update time, as ``mqadmin topicStatus``.

        Asks each master of the route GET_TOPIC_STATS_INFO (202); a broker that does not
        support it is asked GET_MIN_OFFSET / GET_MAX_OFFSET per readable queue instead (last
        update time 0).

        Raises:
            TopicNotExistError, MQBrokerError, RemotingError.
        """
        async def go() -> list[QueueStatus]:
            route = await self._route(topic)
            masters = self._route_masters(route)
            out: list[QueueStatus] = []
            for name, addr in masters.items():
                try:
                    resp = await self._broker(addr, RequestCode.GET_TOPIC_STATS_INFO,
                                              TopicRequestHeader(topic=topic).to_ext_fields())
                except MQBrokerError as exc:
                    if exc.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                        raise
                    out.extend(await self._status_by_offsets(route, name, addr, topic))
                    continue
                for mq, off in TopicStatsTable.from_json(resp.body).offset_table.items():
                    out.append(QueueStatus(mq.broker_name, mq.queue_id, off.min_offset, off.max_offset,
                                           off.last_update_timestamp))
            out.sort(key=lambda q: (q.broker_name, q.queue_id))
            return out

        return self._run(go())

    async def _status_by_offsets(self, route: TopicRouteData, name: str, addr: str, topic: str) -> list[QueueStatus]:
        out = []
        for qd in route.queue_datas:
            if qd.broker_name != name:
                continue
            for qid in range(qd.read_queue_nums):
                mq = MessageQueue(topic, name, qid)
                lo = await self._api.get_min_offset(addr, mq, self.timeout_ms)
                hi = await self._api.get_max_offset(addr, mq, self.timeout_ms)
                last = 0
                if hi > lo:  # the store time of the last message, as the broker's stats do
                    msg = await self._pull_one(addr, mq, hi - 1)
                    last = msg.store_timestamp if msg is not None else 0
                out.append(QueueStatus(name, qid, lo, hi, last))
        return out

    async def _pull_one(self, addr: str, mq: MessageQueue, offset: int) -> MessageExt | None:
        """The message at ``offset`` of ``mq`` (one PULL_MESSAGE as ``TOOLS_CONSUMER``, the
        fields mqadmin sends), None when there is none."""
        header = PullMessageRequestHeader(consumer_group=TOOLS_CONSUMER_GROUP, topic=mq.topic, queue_id=mq.queue_id,
                                          queue_offset=offset, max_msg_nums=1, sys_flag=4, commit_offset=0,
                                          suspend_timeout_millis=20000, subscription="*", sub_version=0,
                                          expression_type="TAG", bname=mq.broker_name)
        result = await self._api.pull_message(addr, header, self.timeout_ms)
        if result.pull_status is not PullStatus.FOUND or not result.msg_found_list:
            return None
        return result.msg_found_list[0]

    # ================================================================== cluster

    def cluster_list(self, *, runtime: bool = True) -> list[BrokerInfo]:
        """Every broker of every cluster (GET_BROKER_CLUSTER_INFO 106), as ``mqadmin clusterList``.

        Args:
            runtime: also ask each broker GET_BROKER_RUNTIME_INFO for version and TPS (a broker
                that does not answer gets None there).
        """
        async def go() -> list[BrokerInfo]:
            info = await self._cluster()
            out = []
            for cluster in sorted(info.cluster_addr_table):
                for name in sorted(info.cluster_addr_table[cluster]):
                    bd = info.broker_addr_table.get(name)
                    if bd is None:
                        continue
                    for bid in sorted(bd.broker_addrs):
                        addr = bd.broker_addrs[bid]
                        b = BrokerInfo(cluster, name, bid, addr, "MASTER" if bid == MASTER_ID else "SLAVE")
                        if runtime:
                            try:
                                table = await self._runtime_info(addr)
                            except (MQBrokerError, RemotingError) as exc:
                                log.debug("runtime info of %s: %s", addr, exc)
                            else:
                                b.version = table.get("brokerVersionDesc")
                                b.in_tps = _first_tps(table.get("putTps"))
                                b.out_tps = _first_tps(table.get("getTransferedTps"))
                        out.append(b)
            return out

        return self._run(go())

    async def _runtime_info(self, addr: str) -> dict[str, str]:
        resp = await self._broker(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return dict(KVTable.from_json(resp.body).table)

    def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        """The broker's runtime statistics (GET_BROKER_RUNTIME_INFO 28), as ``brokerStatus``."""
        return self._run(self._runtime_info(broker_addr))

    def broker_config(self, broker_addr: str) -> dict[str, str]:
        """The broker's configuration (GET_BROKER_CONFIG 26), as ``getBrokerConfig``."""
        async def go() -> dict[str, str]:
            resp = await self._broker(broker_addr, RequestCode.GET_BROKER_CONFIG)
            return parse_properties(resp.body.decode("utf-8", "replace"))

        return self._run(go())

    def cluster_broker_addrs(self, cluster: str) -> list[str]:
        """Master addresses of ``cluster``.

        Raises:
            MQClientError: unknown cluster.
        """
        return self._run(self._master_addrs(cluster))

    # ================================================================== consumer groups

    async def _group_masters(self, group: str) -> dict[str, str]:
        """Brokers that know the group: those of its retry topic's route (as mqadmin)."""
        try:
            route = await self._route(RETRY_GROUP_TOPIC_PREFIX + group)
        except TopicNotExistError:
            raise MQClientError(f"consumer group {group!r} not found (no route for "
                                f"{RETRY_GROUP_TOPIC_PREFIX}{group})") from None
        return self._route_masters(route)

    def consumer_progress(self, group: str, topic: str | None = None) -> ConsumerProgress:
        """Per queue broker offset, consumer offset and lag (GET_CONSUME_STATS 208 to every
        master of the group's retry-topic route), as ``mqadmin consumerProgress -g``.

        Args:
            group: consumer group.
            topic: only this topic (the header's ``topic``), default all the group's topics.

        Raises:
            MQClientError: unknown group. MQBrokerError, RemotingError.
        """
        async def go() -> ConsumerProgress:
            masters = await self._group_masters(group)
            tps = 0.0
            queues: list[QueueProgress] = []
            ext = GetConsumeStatsRequestHeader(consumer_group=group, topic=topic).to_ext_fields()
            for addr in masters.values():
                resp = await self._broker(addr, RequestCode.GET_CONSUME_STATS, ext)
                stats = ConsumeStats.from_json(resp.body)
                tps += stats.consume_tps
                for mq, w in stats.offset_table.items():
                    queues.append(QueueProgress(mq.topic, mq.broker_name, mq.queue_id, w.broker_offset,
                                                w.consumer_offset, w.broker_offset - w.consumer_offset,
                                                w.last_timestamp))
            queues.sort(key=lambda q: (q.topic, q.broker_name, q.queue_id))
            return ConsumerProgress(group, tps, queues)

        return self._run(go())

    def consumer_groups(self) -> list[GroupSummary]:
        """Every consumer group with a retry topic on the name server, with its online client
        count, TPS and total lag, as ``mqadmin consumerProgress`` without ``-g``. Groups whose
        brokers do not answer are listed with zero TPS and lag.
        """
        async def go() -> list[GroupSummary]:
            resp = await self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
            groups = sorted(t[len(RETRY_GROUP_TOPIC_PREFIX):] for t in TopicList.from_json(resp.body).topic_list
                            if t.startswith(RETRY_GROUP_TOPIC_PREFIX))
            out = []
            for group in groups:
                tps, diff = 0.0, 0
                try:
                    for addr in (await self._group_masters(group)).values():
                        r = await self._broker(addr, RequestCode.GET_CONSUME_STATS,
                                               GetConsumeStatsRequestHeader(consumer_group=group).to_ext_fields())
                        stats = ConsumeStats.from_json(r.body)
                        tps += stats.consume_tps
                        diff += stats.diff_total()
                except (MQError, RemotingError) as exc:
                    log.debug("consume stats of %s: %s", group, exc)
                try:
                    conns = await self._connections(group)
                except (MQError, RemotingError):
                    out.append(GroupSummary(group, 0, None, None, None, tps, diff))
                    continue
                version = max((c.version for c in conns.connections), default=None)
                out.append(GroupSummary(group, len(conns.connections), version, conns.consume_type,
                                        conns.message_model, tps, diff))
            return out

        return self._run(go())

    async def _connections(self, group: str) -> GroupConnections:
        masters = await self._group_masters(group)
        last: Exception | None = None
        ext = {"consumerGroup": group}
        for addr in masters.values():
            try:
                resp = await self._broker(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, ext)
            except (MQBrokerError, RemotingError) as exc:
                last = exc
                continue
            cc = ConsumerConnection.from_json(resp.body)
            conns = [ClientConnection(c.client_id, c.client_addr, str(c.language), int(c.version))
                     for c in cc.connection_set]
            conns.sort(key=lambda c: c.client_id)
            subs = [Subscription(t, sd.sub_string, sd.expression_type)
                    for t, sd in sorted(cc.subscription_table.items())]
            return GroupConnections(group, conns, subs,
                                    cc.consume_type.name if cc.consume_type else None,
                                    cc.message_model.name if cc.message_model else None,
                                    cc.consume_from_where.name if cc.consume_from_where else None)
        if last is not None:
            raise last
        raise MQClientError(f"consumer group {group!r} has no broker")

    def consumer_connection(self, group: str) -> GroupConnections:
        """The group's online clients (GET_CONSUMER_CONNECTION_LIST 203), as ``consumerConnection``.

        Raises:
            MQClientError: unknown group. MQBrokerError: code 206 CONSUMER_NOT_ONLINE when no
            client is connected. RemotingError.
        """
        return self._run(self._connections(group))

    def producer_connection(self, group: str, topic: str) -> list[ClientConnection]:
        """The online producers of ``group`` (GET_PRODUCER_CONNECTION_LIST 204 to the masters of
        ``topic``'s route; the first that answers), as ``mqadmin producerConnection``.

        Raises:
            TopicNotExistError. MQBrokerError: e.g. 1 when no producer of the group is online.
        """
        async def go() -> list[ClientConnection]:
            route = await self._route(topic)
            last: Exception | None = None
            for addr in self._route_masters(route).values():
                try:
                    resp = await self._broker(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                              {"producerGroup": group})
                except (MQBrokerError, RemotingError) as exc:
                    last = exc
                    continue
                pc = ProducerConnection.from_json(resp.body)
                return sorted((ClientConnection(c.client_id, c.client_addr, str(c.language), int(c.version))
                               for c in pc.connection_set), key=lambda c: c.client_id)
            if last is not None:
                raise last
            raise MQClientError(f"topic {topic} has no master broker")

        return self._run(go())

    def consumer_running_info(self, group: str, client_id: str | None = None,
                              jstack: bool = False) -> dict[str, ConsumerRunningInfo]:
        """Ask the group's clients for their running info (GET_CONSUMER_RUNNING_INFO 307,
        forwarded by the broker), as ``consumerStatus``.

        Args:
            client_id: only this client (default: every connected client).
            jstack: ask Java clients for a thread dump too.

        Returns:
            client id → running info.
        """
        async def go() -> dict[str, ConsumerRunningInfo]:
            conns = await self._connections(group)
            masters = await self._group_masters(group)
            addr = next(iter(masters.values()))
            out = {}
            for c in conns.connections:
                if client_id and c.client_id != client_id:
                    continue
                ext = GetConsumerRunningInfoRequestHeader(consumer_group=group, client_id=c.client_id,
                                                          jstack_enable=jstack).to_ext_fields()
                resp = await self._broker(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
                out[c.client_id] = ConsumerRunningInfo.from_json(resp.body)
            if client_id and not out:
                raise MQClientError(f"client {client_id} of group {group} is not online")
            return out

        return self._run(go())

    def update_subscription_group(self, group: str, *, cluster: str | None = None, broker_addr: str | None = None,
                                  consume_enable: bool = True, consume_from_min_enable: bool = False,
                                  consume_broadcast_enable: bool = False, retry_queue_nums: int = 1,
                                  retry_max_times: int = 16, broker_id: int = 0,
                                  which_broker_when_consume_slowly: int = 1,
                                  notify_consumer_ids_changed_enable: bool = True) -> list[str]:
        """Create or update a subscription group (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200) on a
        broker or every master of a cluster, as ``mqadmin updateSubGroup`` (same defaults).

        Returns:
            the broker addresses updated.
        """
        body = SubscriptionGroupConfig(
            group_name=group, broker_id=broker_id, consume_broadcast_enable=consume_broadcast_enable,
            consume_enable=consume_enable, consume_from_min_enable=consume_from_min_enable,
            notify_consumer_ids_changed_enable=notify_consumer_ids_changed_enable,
            retry_max_times=retry_max_times, retry_queue_nums=retry_queue_nums,
            which_broker_when_consume_slowly=which_broker_when_consume_slowly).to_json()

        async def go() -> list[str]:
            addrs = await self._master_addrs(cluster, broker_addr)
            for addr in addrs:
                await self._broker(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
            return addrs

        return self._run(go())

    def reset_offset_by_time(self, group: str, topic: str, timestamp_ms: int, *,
                             force: bool = True) -> list[ResetOffsetEntry]:
        """Move the group's offsets on ``topic`` to the first message stored at or after
        ``timestamp_ms`` (INVOKE_BROKER_TO_RESET_OFFSET 222 to every master of the topic; the
        broker tells the online clients), as ``mqadmin resetOffsetByTime``.

        Args:
            timestamp_ms: epoch ms; 0 means the earliest offset, -1 the latest (as mqadmin's
                ``-s 0`` / ``-s -1`` handling on 4.9.8 brokers).
            force: reset even to a larger offset than the current one.

        Returns:
            the new offset of each queue.
        """
        ext = ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp_ms,
                                       is_force=force).to_ext_fields()

        async def go() -> list[ResetOffsetEntry]:
            route = await self._route(topic)
            out = []
            for addr in self._route_masters(route).values():
                resp = await self._broker(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext)
                if resp.body:
                    for mq, off in ResetOffsetBody.from_json(resp.body).offset_table.items():
                        out.append(ResetOffsetEntry(mq.topic, mq.broker_name, mq.queue_id, off))
            out.sort(key=lambda e: (e.broker_name, e.queue_id))
            return out

        return self._run(go())

    async def _queue_master(self, mq: MessageQueue) -> str:
        addr = self._route_masters(await self._route(mq.topic)).get(mq.broker_name)
        if addr is None:
            raise MQClientError(f"broker {mq.broker_name} of {mq.topic} has no master")
        return addr

    def consume_offset(self, group: str, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq`` (QUERY_CONSUMER_OFFSET 14 to the queue's
        master); -1 when the broker has none (code 22). As Java's broker, a broker answers 0 for
        a group without an offset while the queue's first message is still in memory.

        Raises:
            TopicNotExistError, MQClientError (no master), MQBrokerError, RemotingError.
        """
        async def go() -> int:
            addr = await self._queue_master(mq)
            try:
                return await self._api.query_consumer_offset(addr, group, mq, self.timeout_ms)
            except MQBrokerError as exc:
                if exc.code == ResponseCode.QUERY_NOT_FOUND:
                    return -1
                raise

        return self._run(go())

    def update_consume_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        """Store ``offset`` as the group's committed offset of ``mq`` (UPDATE_CONSUMER_OFFSET 15
        to the queue's master), as Java ``MQAdminExt.updateConsumeOffset``. Online consumers of
        the group replace it with their own at their next persist.

        Raises:
            IllegalArgumentError: negative offset. TopicNotExistError, MQClientError,
            MQBrokerError, RemotingError.
        """
        if offset < 0:
            raise IllegalArgumentError(f"offset must be >= 0, got {offset}")

        async def go() -> None:
            await self._api.update_consumer_offset(await self._queue_master(mq), group, mq, offset, self.timeout_ms)

        self._run(go())

    # ================================================================== messages

    def view_message(self, offset_msg_id: str) -> MessageExt:
        """The message with this offset message id (VIEW_MESSAGE_BY_ID 33 to the store host
        encoded in the id), as ``queryMsgById``.

        Raises:
            IllegalArgumentError: not an offset message id.
            MQBrokerError: no message at that offset. RemotingError.
        """
        try:
            host, port, offset = decode_offset_msg_id(offset_msg_id)
        except ValueError as exc:
            raise IllegalArgumentError(str(exc)) from None

        async def go() -> MessageExt:
            addr = f"{host}:{port}"
            resp = await self._broker(addr, RequestCode.VIEW_MESSAGE_BY_ID,
                                      ViewMessageRequestHeader(offset=offset).to_ext_fields())
            msgs = decode_messages(resp.body)
            if not msgs:
                raise MQBrokerError(ResponseCode.QUERY_NOT_FOUND, f"no message {offset_msg_id}", addr)
            return msgs[0]

        return self._run(go())

    def query_message_by_key(self, topic: str, key: str, *, max_num: int = 64, begin_ms: int = 0,
                             end_ms: int = _JAVA_LONG_MAX, unique: bool = False) -> list[MessageExt]:
        """Messages of ``topic`` indexed under ``key`` stored in [begin_ms, end_ms]
        (QUERY_MESSAGE 12 to every master of the route), as ``queryMsgByKey``.

        Args:
            max_num: at most this many messages per broker (default 64, mqadmin's).
            unique: the key is a unique message id (``_UNIQUE_KEY_QUERY``), see
                :meth:`query_message_by_unique_key`.

        Raises:
            TopicNotExistError, RemotingError.
        """
        ext = QueryMessageRequestHeader(topic=topic, key=key, max_num=max_num, begin_timestamp=begin_ms,
                                        end_timestamp=end_ms).to_ext_fields()
        ext[_UNIQUE_KEY_QUERY] = "true" if unique else "false"

        async def go() -> list[MessageExt]:
            route = await self._route(topic)
            out: list[MessageExt] = []
            for addr in self._route_masters(route).values():
                try:
                    resp = await self._broker(addr, RequestCode.QUERY_MESSAGE, dict(ext))
                except MQBrokerError as exc:
                    if exc.code == ResponseCode.QUERY_NOT_FOUND:
                        continue
                    raise
                for m in decode_messages(resp.body):
                    if m.topic != topic:
                        continue
                    if unique and m.msg_id != key:
                        continue
                    if not unique and key not in m.keys:
                        continue
                    out.append(m)
            out.sort(key=lambda m: m.store_timestamp)
            return out

        return self._run(go())

    def query_message_by_unique_key(self, topic: str, msg_id: str) -> MessageExt:
        """The message whose client-side unique id (``UNIQ_KEY``) is ``msg_id``, as
        ``queryMsgByUniqueKey`` (QUERY_MESSAGE with ``_UNIQUE_KEY_QUERY=true``, max 32).

        Raises:
            MQClientError: not found.
        """
        msgs = self.query_message_by_key(topic, msg_id, max_num=32, unique=True)
        if not msgs:
            raise MQClientError(f"message {msg_id} not found in topic {topic}")
        return msgs[0]

    def query_message_by_id(self, msg_id: str, topic: str | None = None) -> MessageExt:
        """Look a message up by either id kind: an offset message id first (VIEW_MESSAGE_BY_ID),
        then, with ``topic``, as a unique id.

        Raises:
            MQClientError: not found.
        """
        errors: list[str] = []
        try:
            return self.view_message(msg_id)
        except (IllegalArgumentError, MQBrokerError, RemotingError) as exc:
            errors.append(str(exc))
        if topic:
            return self.query_message_by_unique_key(topic, msg_id)
        raise MQClientError(f"message {msg_id} not found ({'; '.join(errors)}); "
                            "give the topic (-t) to look it up as a unique id")

    def query_message_by_offset(self, topic: str, broker_name: str, queue_id: int, offset: int) -> MessageExt:
        """The message at ``offset`` of a queue (one PULL_MESSAGE of 1 message as group
        ``TOOLS_CONSUMER``, like ``queryMsgByOffset``).

        Raises:
            MQClientError: unknown broker, or no message at that offset.
        """
        async def go() -> MessageExt:
            route = await self._route(topic)
            addr = self._route_masters(route).get(broker_name)
            if addr is None:
                raise MQClientError(f"broker {broker_name!r} is not in the route of topic {topic}")
            msg = await self._pull_one(addr, MessageQueue(topic, broker_name, queue_id), offset)
            if msg is None:
                raise MQClientError(f"no message at offset {offset} of {topic}/{broker_name}/{queue_id}")
            return msg

        return self._run(go())

    def consume_message_directly(self, group: str, msg_id: str, client_id: str | None = None,
                                 topic: str | None = None) -> dict[str, ConsumeMessageDirectlyResult]:
        """Have a consumer of ``group`` consume one message again (CONSUME_MESSAGE_DIRECTLY 309,
        forwarded by the broker to the client), as ``queryMsgById -g G [-d clientId]``.

        Args:
            msg_id: offset message id (or unique id, with ``topic``).
            client_id: this client only (default: every connected client).

        Returns:
            client id → result (``consume_result`` CR_SUCCESS, CR_LATER...).
        """
        msg = self.query_message_by_id(msg_id, topic)

        async def go() -> dict[str, ConsumeMessageDirectlyResult]:
            conns = await self._connections(group)
            masters = await self._group_masters(group)
            # the broker that stores the message, as mqadmin (it serves the group's clients too)
            addr = msg.store_host or masters.get(msg.broker_name) or next(iter(masters.values()))
            out = {}
            for c in conns.connections:
                if client_id and c.client_id != client_id:
                    continue
                ext = ConsumeMessageDirectlyResultRequestHeader(
                    consumer_group=group, client_id=c.client_id, msg_id=msg.offset_msg_id).to_ext_fields()
                resp = await self._broker(addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, ext)
                out[c.client_id] = ConsumeMessageDirectlyResult.from_json(resp.body)
            if not out:
                who = f"client {client_id}" if client_id else "no client"
                raise MQClientError(f"{who} of group {group} is not online")
            return out

        return self._run(go())

    # ================================================================== name server

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        """GET_KV_CONFIG (101); None when the key is absent (code 22)."""
        async def go() -> str | None:
            try:
                resp = await self._namesrv(RequestCode.GET_KV_CONFIG,
                                           KVConfigRequestHeader(namespace=namespace, key=key).to_ext_fields())
            except MQBrokerError as exc:
                if exc.code == ResponseCode.QUERY_NOT_FOUND:
                    return None
                raise
            return resp.ext_fields.get("value")

        return self._run(go())

    def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        """PUT_KV_CONFIG (100) on every name server, as ``updateKvConfig``."""
        ext = KVConfigRequestHeader(namespace=namespace, key=key, value=value).to_ext_fields()
        self._run(self._all_namesrv(RequestCode.PUT_KV_CONFIG, ext))

    def delete_kv_config(self, namespace: str, key: str) -> None:
        """DELETE_KV_CONFIG (102) on every name server, as ``deleteKvConfig``."""
        ext = KVConfigRequestHeader(namespace=namespace, key=key).to_ext_fields()
        self._run(self._all_namesrv(RequestCode.DELETE_KV_CONFIG, ext))

    def kv_list(self, namespace: str) -> dict[str, str]:
        """GET_KVLIST_BY_NAMESPACE (219); empty when the namespace is unknown (code 22)."""
        async def go() -> dict[str, str]:
            try:
                resp = await self._namesrv(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": namespace})
            except MQBrokerError as exc:
                if exc.code == ResponseCode.QUERY_NOT_FOUND:
                    return {}
                raise
            return dict(KVTable.from_json(resp.body).table)

        return self._run(go())

    async def _all_namesrv(self, code: int, ext: dict[str, str]) -> dict[str, RemotingCommand]:
        return {ns: await self._broker(ns, code, ext) for ns in self.namesrv_addrs}

    def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        """Remove the write permission of ``broker_name`` in every name server's routes
        (WIPE_WRITE_PERM_OF_BROKER 205): producers stop sending to it while consumers drain it.

        Returns:
            name server address → number of topics changed.
        """
        ext = BrokerNameRequestHeader(broker_name=broker_name).to_ext_fields()

        async def go() -> dict[str, int]:
            resps = await self._all_namesrv(RequestCode.WIPE_WRITE_PERM_OF_BROKER, ext)
            return {ns: int(r.ext_fields.get("wipeTopicCount", 0)) for ns, r in resps.items()}

        return self._run(go())

    def add_write_perm(self, broker_name: str) -> dict[str, int]:
        """Give ``broker_name`` its write permission back (ADD_WRITE_PERM_OF_BROKER 327).

        Returns:
            name server address → number of topics changed.
        """
        ext = BrokerNameRequestHeader(broker_name=broker_name).to_ext_fields()

        async def go() -> dict[str, int]:
            resps = await self._all_namesrv(RequestCode.ADD_WRITE_PERM_OF_BROKER, ext)
            return {ns: int(r.ext_fields.get("addTopicCount", 0)) for ns, r in resps.items()}

        return self._run(go())

    # ================================================================== ACL (plain_acl.yml of the brokers)

    def update_acl_config(self, access_key: str, secret_key: str, *, cluster: str | None = None,
                          broker_addr: str | None = None, white_remote_address: str | None = None,
                          admin: bool = False, default_topic_perm: str | None = None,
                          default_group_perm: str | None = None, topic_perms: list[str] | None = None,
                          group_perms: list[str] | None = None) -> list[str]:
        """Create or update an ACL account (UPDATE_AND_CREATE_ACL_CONFIG 50) on a broker or every
        master of a cluster, as ``mqadmin updateAclConfig``; fields left None are kept.

        Args:
            access_key / secret_key: the account (both longer than 6 characters).
            topic_perms / group_perms: ``["topicA=DENY", "topicB=PUB|SUB"]``.

        Returns:
            the broker addresses updated.

        Raises:
            MQBrokerError: code 209 with the broker's reason (bad keys or perms, ACL off).
        """
        ext = PlainAccessConfigRequestHeader(
            access_key=access_key, secret_key=secret_key, white_remote_address=white_remote_address, admin=admin,
            default_topic_perm=default_topic_perm, default_group_perm=default_group_perm,
            topic_perms=None if topic_perms is None else ",".join(topic_perms),
            group_perms=None if group_perms is None else ",".join(group_perms)).to_ext_fields()
        return self._run(self._to_masters(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, ext, cluster, broker_addr))

    def delete_acl_config(self, access_key: str, *, cluster: str | None = None,
                          broker_addr: str | None = None) -> list[str]:
        """Delete an ACL account (DELETE_ACL_CONFIG 51), as ``mqadmin deleteAccessConfig``.

        Raises:
            MQBrokerError: code 210 (unknown access key, ACL off).
        """
        ext = PlainAccessConfigRequestHeader(access_key=access_key).to_ext_fields()
        return self._run(self._to_masters(RequestCode.DELETE_ACL_CONFIG, ext, cluster, broker_addr))

    def update_global_white_addrs(self, addresses: list[str], *, cluster: str | None = None,
                                  broker_addr: str | None = None) -> list[str]:
        """Replace ``globalWhiteRemoteAddresses`` (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG 53), as
        ``mqadmin updateGlobalWhiteAddr``.

        Raises:
            MQBrokerError: code 211 (ACL off).
        """
        ext = UpdateGlobalWhiteAddrsConfigRequestHeader(global_white_addrs=",".join(addresses)).to_ext_fields()
        return self._run(self._to_masters(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, ext, cluster, broker_addr))

    def acl_config_version(self, *, cluster: str | None = None,
                           broker_addr: str | None = None) -> dict[str, dict[str, str]]:
        """Each broker's ACL file version (GET_BROKER_CLUSTER_ACL_INFO 52), as ``mqadmin
        clusterAclConfigVersion``: broker address → the response header (``version``,
        ``allAclFileVersion``, ``brokerName``, ``clusterName``...).

        Raises:
            RemotingTimeoutError: a broker with ACL off (4.9.8 does not answer then).
        """
        async def go() -> dict[str, dict[str, str]]:
            out = {}
            for addr in await self._master_addrs(cluster, broker_addr):
                out[addr] = dict((await self._broker(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)).ext_fields)
            return out

        return self._run(go())

    async def _to_masters(self, code: int, ext: dict[str, str], cluster: str | None,
                          broker_addr: str | None) -> list[str]:
        addrs = await self._master_addrs(cluster, broker_addr)
        for addr in addrs:
            await self._broker(addr, code, ext)
        return addrs

    def namesrv_config(self) -> dict[str, dict[str, str]]:
        """Every name server's configuration (GET_NAMESRV_CONFIG 319), as ``getNamesrvConfig``.

        Returns:
            name server address → ``{camelCaseKey: value}``.
        """
        async def go() -> dict[str, dict[str, str]]:
            resps = await self._all_namesrv(RequestCode.GET_NAMESRV_CONFIG, {})
            return {ns: parse_properties(r.body.decode("utf-8", "replace")) for ns, r in resps.items()}

        return self._run(go())

    def update_namesrv_config(self, properties: dict[str, str]) -> list[str]:
        """UPDATE_NAMESRV_CONFIG (318) on every name server, as ``updateNamesrvConfig``; unknown keys
        are ignored by the server.

        Returns:
            the name servers updated.

        Raises:
            MQBrokerError: code 16 (NO_PERMISSION) for a key of the server's ``configBlackList``.
        """
        body = "".join(f"{k}={v}\n" for k, v in properties.items()).encode("utf-8")

        async def go() -> list[str]:
            for ns in self.namesrv_addrs:
                await self._broker(ns, RequestCode.UPDATE_NAMESRV_CONFIG, {}, body)
            return list(self.namesrv_addrs)

        return self._run(go())

    @staticmethod
    def now_ms() -> int:
        return int(time.time() * 1000)
