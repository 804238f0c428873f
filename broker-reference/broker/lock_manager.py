"""Queue locks for orderly consumers (RocketMQ ``RebalanceLockManager``).

LOCK_BATCH_MQ (41) grants each queue to one client id of a group at a time; a lock not renewed
within ``lock_max_live_time`` ms (Java: 60 s, ``rocketmq.broker.rebalance.lockMaxLiveTime``)
expires and may be taken by another client. UNLOCK_BATCH_MQ (42) releases a client's locks.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from rocketmq_sdk.protocol.bodies import LockBatchRequestBody, LockBatchResponseBody
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.message import MessageQueue
from rocketmq_sdk.remoting import Channel, RemotingCommand

from .requests import ACL_NONE, Body, handles

if TYPE_CHECKING:
    from .context import BrokerContext


class RebalanceLockManager:
    def __init__(self, lock_max_live_time_ms: int = 60_000) -> None:
        self.ttl_ms = lock_max_live_time_ms
        self._locks: dict[str, dict[MessageQueue, tuple[str, float]]] = {}
        self._mutex = threading.Lock()

    def try_lock_batch(self, group: str, mqs: list[MessageQueue], client_id: str) -> list[MessageQueue]:
        """Lock what is free, expired or already ours; return the queues this client now holds."""
        now = time.monotonic() * 1000
        granted = []
        with self._mutex:
            table = self._locks.setdefault(group, {})
            for mq in mqs:
                owner = table.get(mq)
                if owner is None or owner[0] == client_id or now - owner[1] > self.ttl_ms:
                    table[mq] = (client_id, now)
                    granted.append(mq)
        return granted

    def unlock_batch(self, group: str, mqs: list[MessageQueue], client_id: str) -> None:
        with self._mutex:
            table = self._locks.get(group, {})
            for mq in mqs:
                owner = table.get(mq)
                if owner is not None and owner[0] == client_id:
                    del table[mq]


class LockProcessor:
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self.locks = RebalanceLockManager()

    @handles(RequestCode.LOCK_BATCH_MQ, header=None, writes=False, acl=ACL_NONE, body=Body.LOCK_BATCH)
    def lock(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        req = LockBatchRequestBody.from_json(cmd.body)
        granted = self.locks.try_lock_batch(req.consumer_group or "", req.mq_set, req.client_id or "")
        return cmd.response(ResponseCode.SUCCESS, body=LockBatchResponseBody(granted).to_json(standard=True))

    @handles(RequestCode.UNLOCK_BATCH_MQ, header=None, writes=False, acl=ACL_NONE, body=Body.LOCK_BATCH)
    def unlock(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        req = LockBatchRequestBody.from_json(cmd.body)
        self.locks.unlock_batch(req.consumer_group or "", req.mq_set, req.client_id or "")
        return cmd.response(ResponseCode.SUCCESS)
