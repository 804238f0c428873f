"""The slave side of master/slave replication (Java ``HAService.HAClient``; docs/protocol.md
§8.5), on the broker's asyncio loop.

The client connects to the master's HA address, reports its own max CommitLog offset (at once:
a Java slave waits ``haSendHeartbeatInterval`` first, the master does not care), appends every
transfer to the store (which dispatches the records to consume queues and index), reports the
new max after each frame and every ``heartbeat_interval`` ms when idle. A transfer whose offset
is not the slave's own max (unless the store is empty) closes the connection; any error
reconnects at once, a failed connect retries after 5 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from typing import TYPE_CHECKING

from ..aio import cancel_and_wait
from .ha_frames import REPORT, HAProtocolError, TransferReader

if TYPE_CHECKING:
    from .message_store import MessageStore

log = logging.getLogger("rocketmq_broker.ha")

CONNECT_TIMEOUT_S = 5.0
RETRY_S = 5.0  # Java: waitForRunning(5000) after a failed connect or without an address
READ_BUFFER = 4 * 1024 * 1024


class HAClient:
    """Replicates the master's CommitLog into ``store``.

    Args:
        store: the slave's :class:`MessageStore`.
        heartbeat_interval: ms between reports when idle (``haSendHeartbeatInterval``, 5000).
    """

    def __init__(self, store: MessageStore, heartbeat_interval: int = 5000) -> None:
        self.store = store
        self.heartbeat_interval = heartbeat_interval
        self.master_address: str | None = None
        self.connected = False
        self.last_report_offset = -1
        self._changed = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._writer: asyncio.StreamWriter | None = None

    def update_master_address(self, addr: str | None) -> None:
        """Use ``addr`` (``host:port``) at the next connect; an open connection stays (Java)."""
        if addr and addr != self.master_address:
            log.info("update master HA address from %s to %s", self.master_address, addr)
            self.master_address = addr
            self._changed.set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        self._close()

    def _close(self) -> None:
        self.connected = False
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    async def _run(self) -> None:
        while True:
            addr = self.master_address
            if not addr:
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(RETRY_S):
                        await self._changed.wait()
                continue
            host, _, port = addr.rpartition(":")
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    reader, writer = await asyncio.open_connection(host, int(port), limit=READ_BUFFER)
            except (OSError, TimeoutError, ValueError) as exc:
                log.debug("connect to master %s failed: %s", addr, exc)
                await asyncio.sleep(RETRY_S)
                continue
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._writer = writer
            self.connected = True
            log.info("HAClient: connected to master %s", addr)
            try:
                await self._session(reader, writer)
            except (OSError, HAProtocolError, asyncio.IncompleteReadError) as exc:
                log.warning("HAClient: connection to master %s closed: %s", addr, exc)
            finally:
                self._close()

    def _report(self, writer: asyncio.StreamWriter, offset: int) -> None:
        writer.write(REPORT.pack(offset))
        self.last_report_offset = offset

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        store = self.store
        heartbeat_s = self.heartbeat_interval / 1000.0
        frames = TransferReader()
        reported = store.get_max_phy_offset()
        self._report(writer, reported)
        await writer.drain()
        last_write = time.monotonic()
        while True:
            wait = max(0.001, min(1.0, heartbeat_s - (time.monotonic() - last_write)))
            try:  # not asyncio.wait_for: on 3.11 it swallows a cancel (stop()) that comes
                # as the read completes, and the session went on, stop() hanging (gh-86296)
                async with asyncio.timeout(wait):
                    data = await reader.read(READ_BUFFER)
            except TimeoutError:
                data = None
            if data == b"":
                raise OSError("master closed the connection")
            wrote = False
            if data:
                for offset, body in frames.feed(data):
                    slave_max = store.get_max_phy_offset()
                    if slave_max != 0 and slave_max != offset:
                        raise HAProtocolError(f"master pushed offset {offset} not equal the max phy offset "
                                              f"{slave_max} in slave")
                    store.append_to_commit_log(offset, body)  # result ignored, as Java's HAClient
                    now_max = store.get_max_phy_offset()
                    if now_max > reported:
                        reported = now_max
                        self._report(writer, reported)
                        wrote = True
            if time.monotonic() - last_write > heartbeat_s:
                self._report(writer, store.get_max_phy_offset())
                wrote = True
            if wrote:
                await writer.drain()
                last_write = time.monotonic()
