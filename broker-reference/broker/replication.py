"""Broker roles around master/slave replication (docs/protocol.md §8.2, §8.8, §8.9).

* :class:`MetadataProcessor` answers GET_ALL_CONSUMER_OFFSET (43) and GET_ALL_DELAY_OFFSET (45)
  on every broker (what a slave's SlaveSynchronize asks a master for);
* :func:`slave_refusal` is the request hook of a SLAVE: the writes a 4.9.8 slave refuses get
  its answers (SEND → 14 SERVICE_NOT_AVAILABLE, END_TRANSACTION → 11, send-back and
  topic/group changes → 1 SYSTEM_ERROR);
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
from rocketmq_sdk.protocol.codes import SEND_CODES as _SEND_CODES
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.remoting import Channel, RemotingClient, RemotingCommand

if TYPE_CHECKING:
    from .controller import BrokerController

log = logging.getLogger("rocketmq_broker")

#: Java ``DefaultMessageStore`` remark of a put refused by a slave (code 14)
SLAVE_SEND_REMARK = ("service not available now. It may be caused by one of the following reasons: the broker's "
                     "disk is full, messages are put to the slave, message store has been shut down, etc.")
_SLAVE_ADMIN_REMARK = "Can't modify topic or subscription group from slave broker, please execute it from master broker."
_ADMIN_CODES = frozenset((RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.DELETE_TOPIC_IN_BROKER,
                          RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.DELETE_SUBSCRIPTIONGROUP))


def slave_refusal(ch: Channel, cmd: RemotingCommand) -> RemotingCommand | None:
    """Server request hook of a SLAVE: the answer of a 4.9.8 slave to a write, None otherwise."""
    code = cmd.code
    if code in _SEND_CODES:
        return cmd.response(ResponseCode.SERVICE_NOT_AVAILABLE, SLAVE_SEND_REMARK)
    if code == RequestCode.END_TRANSACTION:
        return cmd.response(ResponseCode.SLAVE_NOT_AVAILABLE, "Can't commit or rollback a transaction from a slave")
    if code == RequestCode.CONSUMER_SEND_MSG_BACK:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "SERVICE_NOT_AVAILABLE")
    if code in _ADMIN_CODES:
        return cmd.response(ResponseCode.SYSTEM_ERROR, _SLAVE_ADMIN_REMARK)
    return None


class MetadataProcessor:
    """GET_ALL_CONSUMER_OFFSET (43) and GET_ALL_DELAY_OFFSET (45), as Java's AdminBrokerProcessor."""

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def register(self, server) -> None:
        server.register_processor(RequestCode.GET_ALL_CONSUMER_OFFSET, self.all_consumer_offsets)
        server.register_processor(RequestCode.GET_ALL_DELAY_OFFSET, self.all_delay_offsets)

    def all_consumer_offsets(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        offsets = self.broker.offsets
        snapshot = {k: dict(v) for k, v in list(offsets.table.items())}
        # fastjson's form with bare integer queue ids, as the 4.9.8 master sends it
        return cmd.response(ResponseCode.SUCCESS, body=fastjson.dumps({"offsetTable": snapshot}, standard=False).encode())

    def all_delay_offsets(self, ch: Channel, cmd: RemotingCommand) -> RemotingCommand:
        offsets = dict(self.broker.schedule.offsets)
        return cmd.response(ResponseCode.SUCCESS, body=fastjson.dumps({"offsetTable": offsets}, standard=False).encode())


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

    def __init__(self, broker: BrokerController) -> None:
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
