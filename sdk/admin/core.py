"""The async core every admin family is built on: the connections, the name-server and broker
request plumbing, and the checks of their answers (``AsyncAdminClient`` / ``AdminClient`` put
the families together).

Every request is built with the same ``extFields`` mqadmin 4.9.8 sends (checked against captured
traffic), to the same server: name-server requests go to the first answering name server, broker
requests to the master (broker id 0) of each broker concerned. Reads (progress, offsets, stats,
messages, connections) go to a slave of a broker whose master is not in the route, as Java's
``BrokerData.selectBrokerAddr`` does; writes only ever go to masters.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from rocketmq_sdk.client.mq_client_api import MQClientAPI
from rocketmq_sdk.config import ClientConfig, split_namesrv_addr
from rocketmq_sdk.exceptions import (
    ClientStateError,
    IllegalArgumentError,
    MQBrokerError,
    MQClientError,
    RemotingError,
    TopicNotExistError,
)
from rocketmq_sdk.lifecycle import Lifecycle, ServiceState
from rocketmq_sdk.properties import parse_properties
from rocketmq_sdk.protocol.admin_bodies import (
    ClusterInfo,
    ConsumerConnection,
    TopicList,
)
from rocketmq_sdk.protocol.bodies import (
    TopicRouteData,
)
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import (
    GetTopicsByClusterRequestHeader,
    PullMessageRequestHeader,
)
from rocketmq_sdk.protocol.message import MessageExt, MessageQueue, PullStatus
from rocketmq_sdk.remoting.client import RemotingClient
from rocketmq_sdk.remoting.command import RemotingCommand

from .models import (
    ClientConnection,
    GroupConnections,
    MasterlessBroker,
    Subscription,
)

__all__ = ["MASTER_ID", "AdminCore", "parse_namesrv_addr", "parse_properties"]

log = logging.getLogger("rocketmq_sdk.admin")

MASTER_ID = 0
#: what one request to one server raises when it fails: the server said no, or the network failed
REQUEST_FAILED = (MQBrokerError, RemotingError)
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
JAVA_LONG_MAX = 2**63 - 1


def parse_namesrv_addr(value: str | Iterable[str] | None) -> list[str]:
    """Name server list from ``"a:9876;b:9876"`` (or an iterable), else ``$NAMESRV_ADDR``.

    Raises:
        IllegalArgumentError: no address given and ``NAMESRV_ADDR`` is unset or empty.
    """
    addrs = split_namesrv_addr(value)
    if not addrs:
        raise IllegalArgumentError("no name server address: pass -n host:port[;host:port] or set NAMESRV_ADDR")
    return addrs


def read_addr(broker_addrs: dict[int, str]) -> str:
    """The address to read a broker's data from: its master, else its slave with the lowest
    broker id (Java ``BrokerData.selectBrokerAddr`` picks the master, else any slave; the lowest
    id keeps the choice stable). ``broker_addrs`` must not be empty."""
    return broker_addrs.get(MASTER_ID) or broker_addrs[min(broker_addrs)]


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


class AdminCore:
    """Connections and request plumbing of the admin client; runs on the caller's event loop.

    Args: see :class:`~rocketmq_sdk.admin.AsyncAdminClient`.
    """

    def __init__(self, namesrv_addr: str | Iterable[str] | None = None, *, timeout_ms: float = 5000.0,
                 config: ClientConfig | None = None, **settings: Any) -> None:
        if config is not None and settings:
            raise IllegalArgumentError("pass either config or ClientConfig settings, not both")
        cfg = config if config is not None else ClientConfig.from_kwargs(**settings)
        self.config = cfg
        self.namesrv_addrs = parse_namesrv_addr(namesrv_addr if namesrv_addr is not None
                                                else cfg.namesrv_addr)
        self.timeout_ms = timeout_ms
        # RUNNING from here on (connections open lazily, on first use) until close()
        self._lifecycle = Lifecycle(f"admin client of {';'.join(self.namesrv_addrs)}")
        with self._lifecycle.starting():
            self._remoting = RemotingClient(cfg.connect_timeout, rpc_hooks=cfg.effective_rpc_hooks,
                                            ssl_context=cfg.effective_ssl_context)
            self._mq_api = MQClientAPI(self._remoting, self.namesrv_addrs, timeout_ms)

    @property
    def state(self) -> ServiceState:
        """``RUNNING`` from creation until :meth:`close`, then ``SHUTDOWN_ALREADY``."""
        return self._lifecycle.state

    def check_open(self) -> None:
        """Raise :class:`~rocketmq_sdk.exceptions.ClientStateError` once :meth:`close` was called
        (every request checks this first)."""
        if not self._lifecycle.running:
            raise ClientStateError(f"{self._lifecycle.what} is closed ({self.state.name}); create a new one")

    @property
    def _api(self) -> MQClientAPI:
        self.check_open()
        return self._mq_api

    async def close(self) -> None:
        """Close the connections (idempotent; the client cannot be used afterwards)."""
        if self._lifecycle.begin_shutdown():
            try:
                await self._remoting.close()
            finally:
                self._lifecycle.shutdown_done()

    async def __aenter__(self) -> AdminCore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _namesrv(self, code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
        resp = await self._api.invoke_namesrv(RemotingCommand.request(code, ext or {}, body), self.timeout_ms)
        return _check(resp, self._api.namesrv.chosen or "", code)

    async def _broker(self, addr: str, code: int, ext: dict[str, str] | None = None,
                      body: bytes = b"") -> RemotingCommand:
        self.check_open()
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
        if cluster not in info.cluster_addr_table:
            raise MQClientError(f"cluster {cluster!r} not found on the name server")
        return self._cluster_masters(info, cluster)

    @staticmethod
    def _cluster_masters(info: ClusterInfo, cluster: str) -> list[str]:
        """Master addresses of the brokers of ``cluster`` (by broker name; [] if unknown)."""
        return [master for name in sorted(info.cluster_addr_table.get(cluster, ()))
                if (bd := info.broker_addr_table.get(name)) is not None and (master := bd.master_addr())]

    @staticmethod
    def _cluster_readers(info: ClusterInfo, cluster: str | None) -> dict[str, str]:
        """broker name → address to read from (master, else the lowest slave) in ``cluster`` or
        in every cluster."""
        names = (info.cluster_addr_table.get(cluster, set()) if cluster
                 else {n for ns in info.cluster_addr_table.values() for n in ns})
        out = {}
        for name in sorted(names):
            bd = info.broker_addr_table.get(name)
            if bd is not None and bd.broker_addrs:
                out[name] = read_addr(bd.broker_addrs)
        return out

    async def _topics(self, cluster: str | None = None) -> list[str]:
        """Every topic the name server knows (GET_ALL_TOPIC_LIST_FROM_NAMESERVER 206), or those
        with queues on a broker of ``cluster`` (GET_TOPICS_BY_CLUSTER 224), sorted."""
        if cluster is None:
            resp = await self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        else:
            resp = await self._namesrv(RequestCode.GET_TOPICS_BY_CLUSTER,
                                       GetTopicsByClusterRequestHeader(cluster=cluster).to_ext_fields())
        return sorted(TopicList.from_json(resp.body).topic_list)

    @staticmethod
    def _masterless(info: ClusterInfo) -> list[MasterlessBroker]:
        """The broker names of ``info`` listed with slaves but no master, each with the slave
        reads go to (the lowest broker id), sorted by cluster and name."""
        clusters = {name: cluster for cluster, names in info.cluster_addr_table.items() for name in names}
        return [MasterlessBroker(clusters.get(name, ""), name, read_addr(bd.broker_addrs))
                for name, bd in sorted(info.broker_addr_table.items(), key=lambda kv: (clusters.get(kv[0], ""), kv[0]))
                if bd.broker_addrs and MASTER_ID not in bd.broker_addrs]

    @staticmethod
    def _route_masters(route: TopicRouteData) -> dict[str, str]:
        """broker name → master address, for the brokers of a route that have a master."""
        return {bd.broker_name: bd.broker_addrs[MASTER_ID] for bd in route.broker_datas
                if MASTER_ID in bd.broker_addrs}

    @staticmethod
    def _route_readers(route: TopicRouteData) -> dict[str, str]:
        """broker name → address to read from (:func:`read_addr`), for every broker of a route."""
        return {bd.broker_name: read_addr(bd.broker_addrs) for bd in route.broker_datas if bd.broker_addrs}

    async def _pull_one(self, addr: str, mq: MessageQueue, offset: int) -> MessageExt | None:
        """The message at ``offset`` of ``mq`` (one PULL_MESSAGE as ``TOOLS_CONSUMER``, the
        fields mqadmin sends), None when there is none."""
        found = await self._pull(addr, mq, offset, 1)
        return found[0] if found else None

    async def _pull(self, addr: str, mq: MessageQueue, offset: int, max_nums: int) -> list[MessageExt]:
        header = PullMessageRequestHeader(consumer_group=TOOLS_CONSUMER_GROUP, topic=mq.topic, queue_id=mq.queue_id,
                                          queue_offset=offset, max_msg_nums=max_nums, sys_flag=4, commit_offset=0,
                                          suspend_timeout_millis=20000, subscription="*", sub_version=0,
                                          expression_type="TAG", bname=mq.broker_name)
        result = await self._api.pull_message(addr, header, self.timeout_ms)
        if result.pull_status is not PullStatus.FOUND:
            return []
        found = list(result.msg_found_list or [])
        for m in found:  # as the consumers' pull result processing: the broker queried
            m.broker_name = m.broker_name or mq.broker_name
        return found

    async def _queue_addr(self, topic: str, broker_name: str, *, read: bool) -> str:
        """The master of ``broker_name`` in ``topic``'s route; for a ``read``, a slave while the
        master is down (see :meth:`_route_readers`)."""
        route = await self._route(topic)
        addr = (self._route_readers(route) if read else self._route_masters(route)).get(broker_name)
        if addr is None:
            raise MQClientError(f"broker {broker_name!r} is not in the route of topic {topic}"
                                + ("" if read else " with a master"))
        return addr

    async def _group_readers(self, group: str) -> dict[str, str]:
        """Brokers that know the group: those of its retry topic's route (as mqadmin), each
        with its master's address, or a slave's while the master is down."""
        try:
            route = await self._route(RETRY_GROUP_TOPIC_PREFIX + group)
        except TopicNotExistError:
            raise MQClientError(f"consumer group {group!r} not found (no route for "
                                f"{RETRY_GROUP_TOPIC_PREFIX}{group})") from None
        return self._route_readers(route)

    async def _connections(self, group: str) -> GroupConnections:
        masters = await self._group_readers(group)
        last: Exception | None = None
        ext = {"consumerGroup": group}
        for addr in masters.values():
            try:
                resp = await self._broker(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, ext)
            except REQUEST_FAILED as exc:
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

    async def _all_namesrv(self, code: int, ext: dict[str, str]) -> dict[str, RemotingCommand]:
        return {ns: await self._broker(ns, code, ext) for ns in self.namesrv_addrs}

    @staticmethod
    def now_ms() -> int:
        return int(time.time() * 1000)
