"""Broker roles around master/slave replication (docs/protocol.md §8.2, §8.8, §8.9).

* :func:`slave_refusal` is the request hook of a SLAVE: the writes a 4.9.8 slave refuses get
  its answers, as the request table declares them (``on_slave``: SEND → 14 SERVICE_NOT_AVAILABLE,
  END_TRANSACTION → 11, send-back and topic/group changes → 1 SYSTEM_ERROR);
* :class:`SlaveSynchronize` copies the master's topic config, consumer offsets, delay offsets
  and subscription groups to a SLAVE, 3 s after start and then every 10 s.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from rocketmq_broker.aio import cancel_and_wait
from rocketmq_broker.broker.config_file import write_atomically
from rocketmq_sdk.exceptions import MQError
from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.admin_bodies import SubscriptionGroupWrapper
from rocketmq_sdk.protocol.bodies import TopicConfigSerializeWrapper
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.remoting import Channel, RemotingClient, RemotingCommand

from .request_table import BROKER_REQUESTS
from .requests import SLAVE_SEND_REMARK

__all__ = ["SLAVE_REFUSALS", "SLAVE_SEND_REMARK", "SlaveSynchronize", "slave_refusal"]

if TYPE_CHECKING:
    from .context import BrokerContext

log = logging.getLogger("rocketmq_broker")

#: code -> (response code, remark) of every request a slave refuses (``on_slave`` of the table)
SLAVE_REFUSALS: dict[int, tuple[int, str]] = {code: spec.on_slave.refusal for code, spec in BROKER_REQUESTS.items()
                                              if spec.on_slave.refusal is not None}


def slave_refusal(ch: Channel, cmd: RemotingCommand) -> RemotingCommand | None:
    """Server request hook of a SLAVE (and of a DLedger follower): the answer of a 4.9.8 slave
    to a write its request table entry refuses (``on_slave``), None otherwise."""
    refusal = SLAVE_REFUSALS.get(cmd.code)
    if refusal is None:
        return None
    return cmd.response(refusal[0], refusal[1])


class SlaveSynchronize:
    """A SLAVE's periodic copy of its master's metadata (Java ``SlaveSynchronize.syncAll``).

    Each round asks, in order, GET_ALL_TOPIC_CONFIG (replace when the data version differs),
    GET_ALL_CONSUMER_OFFSET (merged over the slave's own table), GET_ALL_DELAY_OFFSET (written to
    ``delayOffset.json``) and GET_ALL_SUBSCRIPTIONGROUP_CONFIG (replace when the version
    differs), each with a 3000 ms timeout; errors are logged and the next round retries. All
    four go to the master's main port (a Java slave asks the topic config on the VIP port,
    ``listenPort - 2``, which this broker does not serve).

    ``master_addr`` is set from every REGISTER_BROKER answer (None stops the copies).
    """

    TIMEOUT_MS = 3000

    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker
        self.master_addr: str | None = None
        self.client = RemotingClient()
        self.rounds = 0
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        await self.client.close()

    async def _loop(self) -> None:
        await asyncio.sleep(3.0)
        while True:
            await self.sync_all()
            await asyncio.sleep(self.broker.config.slave_sync_interval / 1000.0)

    async def _get(self, code: int) -> bytes | None:
        addr = self.master_addr
        if not addr or addr == self.broker.config.broker_addr:
            return None
        try:
            resp = await self.client.invoke(addr, RemotingCommand.request(code), self.TIMEOUT_MS)
        except MQError as exc:
            log.warning("SlaveSynchronize: request %d to master %s failed: %s", code, addr, exc)
            return None
        if resp.code != ResponseCode.SUCCESS:
            log.warning("SlaveSynchronize: master %s answered %d %s to request %d", addr, resp.code, resp.remark, code)
            return None
        return resp.body or b""

    def _adopt(self, manager, table: dict, version, what: str) -> None:
        """Replace a topic or group manager's whole table when the master's data version differs."""
        if version == manager.data_version:
            return
        with manager._lock:
            manager.table = dict(table)
            manager.data_version = version
        manager.persist()
        log.info("update slave %s from master, %s", what, self.master_addr)

    async def sync_all(self) -> None:
        """One round of the four copies (errors logged)."""
        b = self.broker
        try:
            body = await self._get(RequestCode.GET_ALL_TOPIC_CONFIG)
            if body:
                wrapper = TopicConfigSerializeWrapper.from_dict(fastjson.loads(body))
                self._adopt(b.topics, wrapper.topic_config_table, wrapper.data_version, "topic config")
            body = await self._get(RequestCode.GET_ALL_CONSUMER_OFFSET)
            if body:
                table = (fastjson.loads(body) or {}).get("offsetTable") or {}
                with b.offsets._lock:
                    for key, queues in table.items():
                        b.offsets.table[key] = {int(q): int(o) for q, o in queues.items()}
                    b.offsets._dirty = True
                b.offsets.persist()
            body = await self._get(RequestCode.GET_ALL_DELAY_OFFSET)
            if body:
                table = (fastjson.loads(body) or {}).get("offsetTable") or {}
                b.schedule.offsets = {int(k): int(v) for k, v in table.items()}
                write_atomically(b.schedule.path, body.decode("utf-8"))
            body = await self._get(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            if body:
                wrapper = SubscriptionGroupWrapper.from_dict(fastjson.loads(body))
                self._adopt(b.groups, wrapper.subscription_group_table, wrapper.data_version, "subscription group")
            self.rounds += 1
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("SlaveSynchronize: unreadable answer from master %s: %s", self.master_addr, exc)
