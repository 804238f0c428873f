"""Topics: create, change permission, delete, list, route, per-queue status."""

from __future__ import annotations

from ..exceptions import IllegalArgumentError, MQBrokerError, MQClientError
from ..protocol.admin_bodies import GroupList, TopicStatsTable
from ..protocol.bodies import TopicRouteData
from ..protocol.codes import PermName, RequestCode, ResponseCode
from ..protocol.headers import CreateTopicRequestHeader, TopicRequestHeader
from ..protocol.message import MessageQueue
from .core import REQUEST_FAILED, AdminCore, log
from .models import QueueStatus

__all__ = ["TopicAdmin"]


class TopicAdmin(AdminCore):
    """Topics: create, change permission, delete, list, route, per-queue status."""

    async def create_topic(self, topic: str, *, cluster: str | None = None, broker_addr: str | None = None,
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

        addrs = await self._master_addrs(cluster, broker_addr)
        for addr in addrs:
            await self._broker(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
        return addrs

    async def update_topic_perm(self, topic: str, perm: int, *, cluster: str | None = None,
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

    async def delete_topic(self, topic: str, *, cluster: str) -> list[str]:
        """Delete a topic on every master of ``cluster`` (DELETE_TOPIC_IN_BROKER 215), then on
        the name servers (DELETE_TOPIC_IN_NAMESRV 216), as ``mqadmin deleteTopic``.

        Returns:
            the broker addresses the topic was deleted on.

        Raises:
            MQClientError: unknown cluster. MQBrokerError, RemotingError.
        """
        addrs = await self._master_addrs(cluster)
        for addr in addrs:
            await self._broker(addr, RequestCode.DELETE_TOPIC_IN_BROKER,
                               TopicRequestHeader(topic=topic).to_ext_fields())
        ext = TopicRequestHeader(topic=topic, cluster_name=cluster).to_ext_fields()
        for ns in self.namesrv_addrs:
            await self._broker(ns, RequestCode.DELETE_TOPIC_IN_NAMESRV, ext)
        return addrs

    async def topic_list(self) -> list[str]:
        """All topics the name server knows (GET_ALL_TOPIC_LIST_FROM_NAMESERVER 206), sorted."""
        return await self._topics()

    async def topics_by_cluster(self, cluster: str) -> list[str]:
        """Topics with queues on a broker of ``cluster`` (GET_TOPICS_BY_CLUSTER 224), sorted;
        [] for an unknown cluster (as the 4.9.8 name server answers)."""
        return await self._topics(cluster)

    async def topic_clusters(self, topic: str) -> list[str]:
        """The clusters whose brokers serve ``topic`` (GET_ROUTEINFO_BY_TOPIC + cluster info), as
        ``mqadmin topicClusterList``, which looks only at the route's first broker; every broker
        of the route is looked at here.

        Raises:
            TopicNotExistError: no route for the topic.
        """
        route = await self._route(topic)
        info = await self._cluster()
        names = {bd.broker_name for bd in route.broker_datas}
        return sorted(c for c, members in info.cluster_addr_table.items() if names.intersection(members))

    async def topic_list_by_cluster(self) -> list[tuple[str, str, list[str]]]:
        """``topicList -c``: ``(cluster, topic, consumer groups)`` for every topic but retry and
        DLQ topics, sorted by cluster and topic. mqadmin asks each topic's route; here each
        cluster's topics come from one GET_TOPICS_BY_CLUSTER (224) and the groups from
        QUERY_TOPIC_CONSUME_BY_WHO (300) to each broker of the cluster: its master, or its slave
        while the master is down (a broker that fails is skipped)."""
        info = await self._cluster()
        rows: list[tuple[str, str, list[str]]] = []
        for cluster in sorted(info.cluster_addr_table):
            readers = list(self._cluster_readers(info, cluster).values())
            for topic in await self._topics(cluster):
                if topic.startswith(("%RETRY%", "%DLQ%")):
                    continue
                rows.append((cluster, topic, await self._consumed_by(topic, readers)))
        return rows

    async def topic_consumer_groups(self, topic: str) -> list[str]:
        """The consumer groups with offsets on ``topic``, sorted: QUERY_TOPIC_CONSUME_BY_WHO
        (300) to each broker of its route (its master, or its slave while the master is down; a
        broker that fails is skipped), as the dashboard's ``queryTopicConsumeByWho`` — one topic,
        not every topic as :meth:`topic_list_by_cluster`.

        Raises:
            TopicNotExistError: no route for the topic.
        """
        route = await self._route(topic)
        return await self._consumed_by(topic, list(self._route_readers(route).values()))

    async def _consumed_by(self, topic: str, addrs: list[str]) -> list[str]:
        groups: set[str] = set()
        for addr in addrs:
            try:
                r = await self._broker(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO,
                                       TopicRequestHeader(topic=topic).to_ext_fields())
            except REQUEST_FAILED as exc:
                log.debug("consumer groups of %s on %s: %s", topic, addr, exc)
                continue
            groups.update(GroupList.from_json(r.body).group_list)
        return sorted(groups)

    async def topic_route(self, topic: str) -> TopicRouteData:
        """The topic's route (GET_ROUTEINFO_BY_TOPIC 105).

        Raises:
            TopicNotExistError: no route.
        """
        return await self._route(topic)

    async def topic_status(self, topic: str) -> list[QueueStatus]:
        """Per queue min/max offset and last update time, as ``mqadmin topicStatus``.

        Asks each master of the route GET_TOPIC_STATS_INFO (202); a broker that does not
        support it is asked GET_MIN_OFFSET / GET_MAX_OFFSET per readable queue instead (last
        update time 0).

        Raises:
            TopicNotExistError, MQBrokerError, RemotingError.
        """
        route = await self._route(topic)
        masters = self._route_readers(route)
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
