"""Consumer and producer groups: progress (lag), connections, running info, subscription groups, offset resets."""

from __future__ import annotations

from typing import Any

from ..exceptions import IllegalArgumentError, MQBrokerError, MQClientError, MQError
from ..protocol import fastjson
from ..protocol.admin_bodies import ConsumeStats, ProducerConnection, SubscriptionGroupConfig
from ..protocol.bodies import ConsumerRunningInfo, ResetOffsetBody
from ..protocol.codes import RequestCode, ResponseCode
from ..protocol.headers import (
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsRequestHeader,
    ResetOffsetRequestHeader,
)
from ..protocol.message import MessageQueue
from .core import REQUEST_FAILED, RETRY_GROUP_TOPIC_PREFIX, AdminCore, log
from .models import (
    ClientConnection,
    ConsumerProgress,
    GroupConnections,
    GroupSummary,
    QueueProgress,
    ResetOffsetEntry,
)

__all__ = ["GroupAdmin"]


class GroupAdmin(AdminCore):
    """Consumer and producer groups: progress (lag), connections, running info, subscription groups, offset resets."""

    async def consumer_progress(self, group: str, topic: str | None = None) -> ConsumerProgress:
        """Per queue broker offset, consumer offset and lag (GET_CONSUME_STATS 208 to every
        master of the group's retry-topic route), as ``mqadmin consumerProgress -g``.

        Args:
            group: consumer group.
            topic: only this topic (the header's ``topic``), default all the group's topics.

        Raises:
            MQClientError: unknown group. MQBrokerError, RemotingError.
        """
        masters = await self._group_readers(group)
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

    async def consumer_groups(self) -> list[GroupSummary]:
        """Every consumer group with a retry topic on the name server, with its online client
        count, TPS and total lag, as ``mqadmin consumerProgress`` without ``-g``. Groups whose
        brokers do not answer are listed with zero TPS and lag.
        """
        groups = [t[len(RETRY_GROUP_TOPIC_PREFIX):] for t in await self._topics()
                  if t.startswith(RETRY_GROUP_TOPIC_PREFIX)]
        out = []
        for group in groups:
            tps, diff = 0.0, 0
            try:
                for addr in (await self._group_readers(group)).values():
                    r = await self._broker(addr, RequestCode.GET_CONSUME_STATS,
                                           GetConsumeStatsRequestHeader(consumer_group=group).to_ext_fields())
                    stats = ConsumeStats.from_json(r.body)
                    tps += stats.consume_tps
                    diff += stats.diff_total()
            except MQError as exc:
                log.debug("consume stats of %s: %s", group, exc)
            try:
                conns = await self._connections(group)
            except MQError:
                out.append(GroupSummary(group, 0, None, None, None, tps, diff))
                continue
            version = max((c.version for c in conns.connections), default=None)
            out.append(GroupSummary(group, len(conns.connections), version, conns.consume_type,
                                    conns.message_model, tps, diff))
        return out

    async def consumer_connection(self, group: str) -> GroupConnections:
        """The group's online clients (GET_CONSUMER_CONNECTION_LIST 203), as ``consumerConnection``.

        Raises:
            MQClientError: unknown group. MQBrokerError: code 206 CONSUMER_NOT_ONLINE when no
            client is connected. RemotingError.
        """
        return await self._connections(group)

    async def producer_connection(self, group: str, topic: str) -> list[ClientConnection]:
        """The online producers of ``group`` (GET_PRODUCER_CONNECTION_LIST 204 to the masters of
        ``topic``'s route; the first that answers), as ``mqadmin producerConnection``.

        Raises:
            TopicNotExistError. MQBrokerError: e.g. 1 when no producer of the group is online.
        """
        route = await self._route(topic)
        last: Exception | None = None
        for addr in self._route_masters(route).values():
            try:
                resp = await self._broker(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                                          {"producerGroup": group})
            except REQUEST_FAILED as exc:
                last = exc
                continue
            pc = ProducerConnection.from_json(resp.body)
            return sorted((ClientConnection(c.client_id, c.client_addr, str(c.language), int(c.version))
                           for c in pc.connection_set), key=lambda c: c.client_id)
        if last is not None:
            raise last
        raise MQClientError(f"topic {topic} has no master broker")

    async def consumer_running_info(self, group: str, client_id: str | None = None,
                              jstack: bool = False) -> dict[str, ConsumerRunningInfo]:
        """Ask the group's clients for their running info (GET_CONSUMER_RUNNING_INFO 307,
        forwarded by the broker), as ``consumerStatus``.

        Args:
            client_id: only this client (default: every connected client).
            jstack: ask Java clients for a thread dump too.

        Returns:
            client id → running info.
        """
        conns = await self._connections(group)
        masters = await self._group_readers(group)
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

    async def update_subscription_group(self, group: str, *, cluster: str | None = None, broker_addr: str | None = None,
                                  consume_enable: bool = True, consume_from_min_enable: bool = False,
                                  consume_broadcast_enable: bool = False, retry_queue_nums: int = 1,
                                  retry_max_times: int = 16, broker_id: int = 0,
                                  which_broker_when_consume_slowly: int = 1,
                                  notify_consumer_ids_changed_enable: bool = True,
                                  consume_message_orderly: bool | None = None) -> list[str]:
        """Create or update a subscription group (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200) on a
        broker or every master of a cluster, as ``mqadmin updateSubGroup`` (same defaults).
        ``consume_message_orderly`` (5.x ``-o``): a FIFO group for 5.x proxies (their push
        consumers get its messages in message-group order); None leaves the field out (4.x).

        Returns:
            the broker addresses updated.
        """
        body = SubscriptionGroupConfig(
            group_name=group, broker_id=broker_id, consume_broadcast_enable=consume_broadcast_enable,
            consume_enable=consume_enable, consume_from_min_enable=consume_from_min_enable,
            notify_consumer_ids_changed_enable=notify_consumer_ids_changed_enable,
            retry_max_times=retry_max_times, retry_queue_nums=retry_queue_nums,
            which_broker_when_consume_slowly=which_broker_when_consume_slowly,
            consume_message_orderly=consume_message_orderly).to_json()

        addrs = await self._master_addrs(cluster, broker_addr)
        for addr in addrs:
            await self._broker(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
        return addrs

    async def set_consume_mode(self, group: str, topic: str, mode: str = "POP", pop_share_queue_num: int = 0, *,
                               cluster: str | None = None, broker_addr: str | None = None) -> list[str]:
        """Set how ``group`` consumes ``topic`` on a broker or every master of a cluster
        (SET_MESSAGE_REQUEST_MODE 401, RocketMQ 5.x), as ``mqadmin setConsumeMode``: ``"POP"``
        (5.x Java push consumers with client rebalance off pop every queue; with
        ``pop_share_queue_num`` N > 0 each client pops its own queues and those of the next N
        clients) or ``"PULL"`` (queues allocated among the clients).

        Returns:
            the broker addresses updated.

        Raises:
            IllegalArgumentError: unknown mode, negative share number, bad names (nothing sent).
            RequestCodeNotSupportedError: a 4.x broker. MQBrokerError, RemotingError.
        """
        from ..protocol.codes import GROUP_MAX_LENGTH, TOPIC_MAX_LENGTH, check_name
        check_name(group, "consumer group", GROUP_MAX_LENGTH)
        check_name(topic, "topic", TOPIC_MAX_LENGTH)
        if mode not in ("POP", "PULL"):
            raise IllegalArgumentError(f"mode must be POP or PULL, got {mode!r}")
        if isinstance(pop_share_queue_num, bool) or not isinstance(pop_share_queue_num, int) or pop_share_queue_num < 0:
            raise IllegalArgumentError(f"pop_share_queue_num must be an int >= 0, got {pop_share_queue_num!r}")
        body = fastjson.dumps({"consumerGroup": group, "mode": mode, "popShareQueueNum": pop_share_queue_num,
                               "topic": topic}).encode("utf-8")
        addrs = await self._master_addrs(cluster, broker_addr)
        for addr in addrs:
            await self._broker(addr, RequestCode.SET_MESSAGE_REQUEST_MODE, body=body)
        return addrs

    async def consume_modes(self, broker_addr: str) -> dict[str, dict[str, dict[str, Any]]]:
        """The consume modes a 5.x broker stores: ``{topic: {group: {"mode", "popShareQueueNum", ...}}}``
        (GET_ALL_MESSAGE_REQUEST_MODE 402).

        Raises:
            RequestCodeNotSupportedError: a 4.x broker. MQBrokerError, RemotingError.
        """
        resp = await self._broker(broker_addr, RequestCode.GET_ALL_MESSAGE_REQUEST_MODE)
        d = fastjson.loads(resp.body.decode("utf-8")) if resp.body else {}
        table = d.get("messageRequestModeMap") if isinstance(d, dict) else None
        return table if isinstance(table, dict) else {}

    async def delete_subscription_group(self, group: str, *, cluster: str | None = None,
                                        broker_addr: str | None = None) -> list[str]:
        """Delete a subscription group's config (DELETE_SUBSCRIPTIONGROUP 207, ``groupName``) on
        a broker or every master of a cluster, as ``mqadmin deleteSubGroup``.

        Returns:
            the broker addresses asked.
        """
        addrs = await self._master_addrs(cluster, broker_addr)
        for addr in addrs:
            await self._broker(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": group})
        return addrs

    async def consume_offset(self, group: str, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq`` (QUERY_CONSUMER_OFFSET 14 to the queue's
        master); -1 when the broker has none (code 22). As Java's broker, a broker answers 0 for
        a group without an offset while the queue's first message is still in memory.

        Raises:
            TopicNotExistError, MQClientError (no master), MQBrokerError, RemotingError.
        """
        addr = await self._queue_addr(mq.topic, mq.broker_name, read=True)
        try:
            return await self._api.query_consumer_offset(addr, group, mq, self.timeout_ms)
        except MQBrokerError as exc:
            if exc.code == ResponseCode.QUERY_NOT_FOUND:
                return -1
            raise

    async def update_consume_offset(self, group: str, mq: MessageQueue, offset: int) -> None:
        """Store ``offset`` as the group's committed offset of ``mq`` (UPDATE_CONSUMER_OFFSET 15
        to the queue's master), as Java ``MQAdminExt.updateConsumeOffset``. Online consumers of
        the group replace it with their own at their next persist.

        Raises:
            IllegalArgumentError: negative offset. TopicNotExistError, MQClientError,
            MQBrokerError, RemotingError.
        """
        if offset < 0:
            raise IllegalArgumentError(f"offset must be >= 0, got {offset}")
        await self._api.update_consumer_offset(await self._queue_addr(mq.topic, mq.broker_name, read=False), group, mq, offset,
                                               self.timeout_ms)

    async def reset_offset_by_time(self, group: str, topic: str, timestamp_ms: int, *,
                             force: bool = True) -> list[ResetOffsetEntry]:
        """Move the group's offsets on ``topic`` to the first message stored at or after
        ``timestamp_ms`` (INVOKE_BROKER_TO_RESET_OFFSET 222 to every master of the topic; the
        broker tells the online clients), as ``mqadmin resetOffsetByTime``. A broker that
        answers 206 CONSUMER_NOT_ONLINE (the group's consumers are stopped) has the group's
        offsets written directly instead, as mqadmin then does (``resetOffsetByTimestampOld``:
        GET_CONSUME_STATS 208, SEARCH_OFFSET_BY_TIMESTAMP 29 or GET_MAX_OFFSET 30 per queue,
        UPDATE_CONSUMER_OFFSET 15); consumers started afterwards begin there.

        Args:
            timestamp_ms: epoch ms; 0 means the earliest offset, -1 the latest (as mqadmin's
                ``-s 0`` / ``-s -1`` handling on 4.9.8 brokers).
            force: reset even to a larger offset than the current one.

        Returns:
            the new offset of each queue (``direct`` set where it was written directly).

        Raises:
            TopicNotExistError. MQClientError: a broker of the topic has no master (down).
            MQBrokerError: e.g. the group never committed an offset on a broker. RemotingError.
        """
        ext = ResetOffsetRequestHeader(topic=topic, group=group, timestamp=timestamp_ms,
                                       is_force=force).to_ext_fields()

        route = await self._route(topic)
        masters = self._route_masters(route)
        missing = sorted(set(self._route_readers(route)) - set(masters))
        if missing:
            raise MQClientError(f"cannot reset offsets of {group} on {topic}: the master of "
                                f"{', '.join(missing)} is down (offsets are written on masters only)")
        out = []
        for addr in masters.values():
            try:
                resp = await self._broker(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext)
            except MQBrokerError as exc:
                if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                    raise
                log.info("group %s is offline on %s: writing its offsets of %s directly", group, addr, topic)
                out.extend(await self._reset_offline(addr, group, topic, timestamp_ms, force))
                continue
            if resp.body:
                for mq, off in ResetOffsetBody.from_json(resp.body).offset_table.items():
                    out.append(ResetOffsetEntry(mq.topic, mq.broker_name, mq.queue_id, off))
        out.sort(key=lambda e: (e.broker_name, e.queue_id))
        return out

    async def _reset_offline(self, addr: str, group: str, topic: str, timestamp_ms: int,
                             force: bool) -> list[ResetOffsetEntry]:
        """Java ``resetOffsetByTimestampOld`` on one master: each queue the group has an offset
        for moves to the offset stored at ``timestamp_ms`` (-1: the max offset), only backwards
        unless ``force``."""
        resp = await self._broker(addr, RequestCode.GET_CONSUME_STATS,
                                  GetConsumeStatsRequestHeader(consumer_group=group, topic=topic).to_ext_fields())
        out = []
        for mq, wrapper in sorted(ConsumeStats.from_json(resp.body).offset_table.items(),
                                  key=lambda kv: kv[0].queue_id):
            if mq.topic != topic:
                continue
            if timestamp_ms == -1:
                target = await self._api.get_max_offset(addr, mq, self.timeout_ms)
            else:
                target = await self._api.search_offset(addr, mq, timestamp_ms, self.timeout_ms)
            if force or target <= wrapper.consumer_offset:
                await self._api.update_consumer_offset(addr, group, mq, target, self.timeout_ms)
            else:
                target = wrapper.consumer_offset
            out.append(ResetOffsetEntry(mq.topic, mq.broker_name, mq.queue_id, target, direct=True))
        return out
