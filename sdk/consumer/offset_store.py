"""Consumer offset stores (Java ``OffsetStore``): ``RemoteBrokerOffsetStore`` keeps clustering
offsets on the broker (§6.5); a local file store for broadcasting comes later."""

from __future__ import annotations

import enum
import logging
import threading
from typing import TYPE_CHECKING

from ..exceptions import MQBrokerError, MQError
from ..protocol.message import MessageQueue

if TYPE_CHECKING:
    from ..client.instance import MQClientInstance

__all__ = ["ReadOffsetType", "RemoteBrokerOffsetStore"]

log = logging.getLogger("rocketmq_sdk.consumer.offset")


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


#: read_offset results (Java): no offset stored for the group (-1), the lookup failed (-2).
NO_OFFSET = -1
LOOKUP_FAILED = -2


class RemoteBrokerOffsetStore:
    """Offsets of one consumer group, cached in memory and persisted to the queues' brokers.

    Memory updates come from consume threads (thread-safe); reads and persists run on the
    client instance's event loop.

    Args:
        instance: the client instance (broker addresses, request helpers).
        group: the consumer group.
    """

    def __init__(self, instance: MQClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group
        self._lock = threading.Lock()
        self._table: dict[MessageQueue, int] = {}

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool) -> None:
        """Set ``mq``'s offset in memory (with ``increase_only``, never move it backwards)."""
        with self._lock:
            old = self._table.get(mq)
            if old is None or not increase_only or offset > old:
                self._table[mq] = offset

    def read_memory(self, mq: MessageQueue) -> int:
        """The in-memory offset, or -1."""
        return self._table.get(mq, NO_OFFSET)

    async def read_offset(self, mq: MessageQueue, kind: ReadOffsetType) -> int:
        """Java ``readOffset``: -1 when no offset exists, -2 when the broker lookup failed."""
        if kind is not ReadOffsetType.READ_FROM_STORE:
            off = self._table.get(mq)
            if off is not None or kind is ReadOffsetType.READ_FROM_MEMORY:
                return NO_OFFSET if off is None else off
        try:
            off = await self.fetch_from_broker(mq)
        except MQBrokerError as exc:  # e.g. 22 QUERY_NOT_FOUND: the group has no offset yet
            log.debug("no stored offset of %s for %s: %s", mq, self.group, exc)
            return NO_OFFSET
        except MQError as exc:
            log.warning("offset lookup of %s for %s failed: %s", mq, self.group, exc)
            return LOOKUP_FAILED
        self.update_offset(mq, off, increase_only=False)
        return off

    async def fetch_from_broker(self, mq: MessageQueue) -> int:
        """QUERY_CONSUMER_OFFSET to the queue's master.

        Raises:
            MQBrokerError: no offset (22) or broker not found (code -1).
            RemotingError.
        """
        addr = await self._broker_addr(mq)
        return await self.instance.api.query_consumer_offset(addr, self.group, mq)

    async def _broker_addr(self, mq: MessageQueue) -> str:
        addr = await self.instance.find_broker_master_or_refresh(mq.broker_name, mq.topic)
        if addr is None:
            raise MQBrokerError(-1, f"broker {mq.broker_name} not found")
        return addr

    async def persist(self, mq: MessageQueue, *, oneway: bool = True) -> None:
        """Send ``mq``'s in-memory offset to its broker (errors are logged)."""
        off = self._table.get(mq)
        if off is None:
            return
        try:
            addr = await self._broker_addr(mq)
            if oneway:
                await self.instance.api.update_consumer_offset_oneway(addr, self.group, mq, off)
            else:
                await self.instance.api.update_consumer_offset(addr, self.group, mq, off)
        except MQError as exc:
            log.warning("persisting offset %d of %s for %s failed: %s", off, mq, self.group, exc)

    async def persist_all(self, mqs: set[MessageQueue], *, oneway: bool = True) -> None:
        """Persist the offsets of ``mqs`` (the queues this consumer owns); forget the others."""
        for mq in sorted(mqs):
            await self.persist(mq, oneway=oneway)
        with self._lock:
            for mq in [m for m in self._table if m not in mqs]:
                del self._table[mq]

    def remove_offset(self, mq: MessageQueue) -> None:
        with self._lock:
            self._table.pop(mq, None)

    def snapshot(self) -> dict[MessageQueue, int]:
        with self._lock:
            return dict(self._table)
