"""Broker-side queue locks of orderly clustering consumers (Java ``RebalanceImpl.lock`` /
``lockAll`` / ``unlockAll``, docs/protocol.md §6.1).

LOCK_BATCH_MQ (41) asks a broker master for the lock of several queues of one group; the answer
lists those granted (a queue locked by another live client of the group is refused). The broker
lets a lock expire after 60 s without renewal, the client considers its own lock stale after
30 s, and renews every 20 s. UNLOCK_BATCH_MQ (42) releases them (at drop and shutdown).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..exceptions import MQBrokerError, MQError
from ..protocol.bodies import LockBatchRequestBody, LockBatchResponseBody
from ..protocol.codes import RequestCode, ResponseCode
from ..protocol.message import MessageQueue
from ..remoting.command import RemotingCommand

if TYPE_CHECKING:
    from ..client.instance import MQClientInstance
    from .process_queue import ProcessQueue

__all__ = ["QueueLocker"]

log = logging.getLogger("rocketmq_sdk.consumer.lock")


class QueueLocker:
    """Lock requests of one consumer group.

    Args:
        instance: the client instance (broker addresses, remoting).
        group: the consumer group.
    """

    def __init__(self, instance: MQClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group

    def _body(self, mqs: Iterable[MessageQueue]) -> bytes:
        return LockBatchRequestBody(self.instance.client_id, self.group, sorted(mqs)).to_json(standard=True)

    async def _master(self, mq: MessageQueue) -> str:
        addr = await self.instance.find_broker_master_or_refresh(mq.broker_name, mq.topic)
        if addr is None:
            raise MQBrokerError(-1, f"broker {mq.broker_name} not found")
        return addr

    async def lock_batch(self, mqs: Iterable[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ to each queue's broker master; returns the queues granted (failures of
        one broker are logged and grant nothing)."""
        by_broker: dict[str, list[MessageQueue]] = defaultdict(list)
        for mq in mqs:
            by_broker[mq.broker_name].append(mq)
        granted: set[MessageQueue] = set()
        api = self.instance.api
        for broker, group_mqs in sorted(by_broker.items()):
            try:
                addr = await self._master(group_mqs[0])
                cmd = RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, None, self._body(group_mqs))
                resp = await self.instance.remoting.invoke(addr, cmd, api.timeout_ms)
                if resp.code != ResponseCode.SUCCESS:
                    raise MQBrokerError(resp.code, resp.remark, addr)
                granted.update(LockBatchResponseBody.from_json(resp.body).lock_ok_mq_set if resp.body else [])
            except MQError as exc:
                log.warning("group %s: locking %d queues on %s failed: %s", self.group, len(group_mqs), broker, exc)
        return granted

    async def unlock_batch(self, mqs: Iterable[MessageQueue], *, oneway: bool = False) -> None:
        """UNLOCK_BATCH_MQ to each queue's broker master (errors are logged)."""
        by_broker: dict[str, list[MessageQueue]] = defaultdict(list)
        for mq in mqs:
            by_broker[mq.broker_name].append(mq)
        remoting, timeout = self.instance.remoting, self.instance.api.timeout_ms
        for broker, group_mqs in sorted(by_broker.items()):
            try:
                addr = await self._master(group_mqs[0])
                body = self._body(group_mqs)
                if oneway:
                    await remoting.invoke_oneway(
                        addr, RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, None, body, oneway=True))
                else:
                    resp = await remoting.invoke(addr, RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, None, body),
                                                 timeout)
                    if resp.code != ResponseCode.SUCCESS:
                        raise MQBrokerError(resp.code, resp.remark, addr)
            except MQError as exc:
                log.warning("group %s: unlocking %d queues on %s failed: %s", self.group, len(group_mqs), broker, exc)

    async def lock_all(self, process_queues: dict[MessageQueue, ProcessQueue]) -> None:
        """Renew the locks of every owned queue: granted ones are marked locked now, refused
        ones unlocked (their listener stops until a later renewal succeeds)."""
        mqs = [mq for mq, pq in process_queues.items() if not pq.dropped]
        if not mqs:
            return
        granted = await self.lock_batch(mqs)
        now = time.monotonic()
        for mq in mqs:
            pq = process_queues.get(mq)
            if pq is None:
                continue
            if mq in granted:
                if not pq.locked:
                    log.info("group %s locked %s", self.group, mq)
                pq.locked = True
                pq.last_lock_timestamp = now
            elif pq.locked:
                log.warning("group %s lost the lock of %s", self.group, mq)
                pq.locked = False
