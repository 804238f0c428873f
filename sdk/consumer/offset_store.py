"""Consumer offset stores (Java ``OffsetStore``): ``RemoteBrokerOffsetStore`` keeps clustering
offsets on the broker (docs/protocol.md §6.5); ``LocalFileOffsetStore`` keeps broadcasting offsets in a local
file (docs/protocol.md §6.7). Where a newly owned queue starts when the group has no offset yet:
:mod:`~rocketmq_sdk.consumer.start_offset`."""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ..exceptions import MQBrokerError, MQError
from ..protocol.bodies import ResetOffsetBody
from ..protocol.message import MessageQueue

if TYPE_CHECKING:
    from ..client.instance import MQClientInstance

__all__ = ["DEFAULT_LOCAL_OFFSET_STORE_DIR", "LocalFileOffsetStore", "OffsetStore", "OffsetTable", "ReadOffsetType",
           "RemoteBrokerOffsetStore"]

log = logging.getLogger("rocketmq_sdk.consumer.offset")

#: codes a 5.x broker answers offset commits it will never store (unknown group / topic)
_GROUP_NOT_EXIST, _TOPIC_NOT_EXIST = 26, 17
_REFUSALS = frozenset({_GROUP_NOT_EXIST, _TOPIC_NOT_EXIST})


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


#: read_offset results (Java): no offset stored for the group (-1), the lookup failed (-2).
NO_OFFSET = -1
LOOKUP_FAILED = -2


class OffsetTable:
    """The in-memory offsets of one group (thread-safe), shared by both stores."""

    def __init__(self) -> None:
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

    def remove_offset(self, mq: MessageQueue) -> None:
        with self._lock:
            self._table.pop(mq, None)

    def snapshot(self) -> dict[MessageQueue, int]:
        with self._lock:
            return dict(self._table)


class RemoteBrokerOffsetStore(OffsetTable):
    """Offsets of one consumer group, cached in memory and persisted to the queues' brokers.

    Memory updates come from consume threads (thread-safe); reads and persists run on the
    client instance's event loop.

    Args:
        instance: the client instance (broker addresses, request helpers).
        group: the consumer group.
    """

    def __init__(self, instance: MQClientInstance, group: str) -> None:
        super().__init__()
        self.instance = instance
        self.group = group
        self._refusals_logged: set[tuple[str, int]] = set()

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
        if addr is None:  # Java RemoteBrokerOffsetStore: the master is away, any address (its slave)
            addr = self.instance.find_broker_any(mq.broker_name)
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
            # a 5.x broker refuses commits of unknown groups/topics, silently for a oneway
            # request: ask for its answer there (4.x and unknown brokers keep Java's oneway)
            if oneway and not self.instance.broker_heartbeats.is_v5(addr):
                await self.instance.api.update_consumer_offset_oneway(addr, self.group, mq, off)
            else:
                await self.instance.api.update_consumer_offset(addr, self.group, mq, off)
        except MQBrokerError as exc:
            if exc.code in _REFUSALS:
                self._log_refusal(mq, off, exc)
            else:
                log.warning("persisting offset %d of %s for %s failed: %s", off, mq, self.group, exc)
        except MQError as exc:
            log.warning("persisting offset %d of %s for %s failed: %s", off, mq, self.group, exc)

    def _log_refusal(self, mq: MessageQueue, off: int, exc: MQBrokerError) -> None:
        """One WARNING per (topic, code): the broker will refuse every later commit alike."""
        key = (mq.topic, exc.code)
        if key in self._refusals_logged:
            log.debug("offset %d of %s for %s refused again: %s", off, mq, self.group, exc)
            return
        self._refusals_logged.add(key)
        what = "consumer group" if exc.code == _GROUP_NOT_EXIST else "topic"
        log.warning("broker %s refused the offset commits of group %s on %s (code %d, %s: the %s does not exist "
                    "on that broker); offsets are not stored until it does: %s", exc.addr, self.group, mq.topic,
                    exc.code, "SUBSCRIPTION_GROUP_NOT_EXIST" if exc.code == _GROUP_NOT_EXIST else "TOPIC_NOT_EXIST",
                    what, exc.remark)

    async def persist_all(self, mqs: set[MessageQueue], *, oneway: bool = True) -> None:
        """Persist the offsets of ``mqs`` (the queues this consumer owns); forget the others."""
        for mq in sorted(mqs):
            await self.persist(mq, oneway=oneway)
        with self._lock:
            for mq in [m for m in self._table if m not in mqs]:
                del self._table[mq]


#: Java ``rocketmq.client.localOffsetStoreDir`` default.
DEFAULT_LOCAL_OFFSET_STORE_DIR = "~/.rocketmq_offsets"


class LocalFileOffsetStore(OffsetTable):
    """Broadcasting offsets in ``<store_dir>/<clientId>/<group>/offsets.json`` (Java
    ``LocalFileOffsetStore``, docs/protocol.md §6.7).

    The file holds Java's form ``{"offsetTable":{{"brokerName":..,"queueId":..,"topic":..}:42}}``
    (a Java consumer with the same client id and group can read it, and we read Java's pretty
    form). It is written every ``persist_consumer_offset_interval`` ms and at shutdown through
    ``offsets.json.tmp`` (flushed, then renamed over the file) after the previous content was
    copied to ``offsets.json.bak``; a missing or unreadable file falls back to the ``.bak``.

    Args:
        store_dir: root directory (``~`` expanded); None means ``~/.rocketmq_offsets``.
        client_id: the client id (``ip@instanceName``; broadcasting keeps ``DEFAULT`` as is, so
            a restarted consumer finds its file).
        group: the consumer group.
    """

    def __init__(self, store_dir: str | os.PathLike[str] | None, client_id: str, group: str) -> None:
        super().__init__()
        self.group = group
        root = Path(os.path.expanduser(str(store_dir or DEFAULT_LOCAL_OFFSET_STORE_DIR)))
        self.path = root / client_id / group / "offsets.json"
        self._file_lock = threading.Lock()

    # -------------------------------------------------------------- file

    def load(self) -> None:
        """Read the file (or its ``.bak`` when the file is missing, empty or corrupt) into
        memory; offsets already in memory win."""
        table = self._read(self.path)
        if table is None:
            table = self._read(self.path.with_name(self.path.name + ".bak"))
        with self._lock:
            for mq, off in (table or {}).items():
                self._table.setdefault(mq, off)

    def _read(self, path: Path) -> dict[MessageQueue, int] | None:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("cannot read offsets file %s: %s", path, exc)
            return None
        if not text.strip():
            return None
        try:
            return ResetOffsetBody.from_json(text).offset_table
        except ValueError as exc:
            log.warning("offsets file %s is corrupt: %s", path, exc)
            return None

    def _write(self, table: dict[MessageQueue, int]) -> None:
        """Java ``MixAll.string2File``: content to ``.tmp``, old file to ``.bak``, rename."""
        data = ResetOffsetBody(dict(sorted(table.items()))).to_json()
        with self._file_lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(self.path.name + ".tmp")
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            try:
                old = self.path.read_bytes()
            except FileNotFoundError:
                old = None
            if old is not None:
                bak = self.path.with_name(self.path.name + ".bak")
                bak.write_bytes(old)
            os.replace(tmp, self.path)

    # -------------------------------------------------------------- OffsetStore

    async def read_offset(self, mq: MessageQueue, kind: ReadOffsetType) -> int:
        """Memory, or the file for READ_FROM_STORE; -1 when there is none."""
        if kind is not ReadOffsetType.READ_FROM_STORE:
            off = self._table.get(mq)
            if off is not None or kind is ReadOffsetType.READ_FROM_MEMORY:
                return NO_OFFSET if off is None else off
        table = self._read(self.path)
        if table is None:
            table = self._read(self.path.with_name(self.path.name + ".bak")) or {}
        off = table.get(mq)
        if off is None:
            return NO_OFFSET
        self.update_offset(mq, off, increase_only=False)
        return off

    async def persist(self, mq: MessageQueue, *, oneway: bool = True) -> None:
        """Nothing: the file is rewritten whole by :meth:`persist_all` (as Java)."""

    async def persist_all(self, mqs: set[MessageQueue], *, oneway: bool = True) -> None:
        """Write the offsets of ``mqs`` (the file keeps no other queue, as Java)."""
        with self._lock:
            table = {mq: off for mq, off in self._table.items() if mq in mqs}
        if not table:
            return
        try:
            await asyncio.to_thread(self._write, table)
        except OSError as exc:
            log.warning("writing offsets file %s failed: %s", self.path, exc)


#: a consumer's offset store: the broker's (CLUSTERING) or the local file's (BROADCASTING).
OffsetStore = RemoteBrokerOffsetStore | LocalFileOffsetStore
