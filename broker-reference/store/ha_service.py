"""The master side of master/slave replication (Java ``HAService``, ``HAConnection``,
``GroupTransferService``; docs/protocol.md §8.4, §8.6), on the broker's asyncio loop.

Every broker listens on its HA port; a slave that connects and reports its max CommitLog offset
gets the CommitLog streamed from there (from the start of the master's last file when it
reports 0) in chunks of at most ``transfer_batch_size`` bytes that never cross a file boundary,
with an empty heartbeat frame after ``heartbeat_interval`` ms of silence. Reports update the
highest offset any slave has (``push2slave_max_offset``); under SYNC_MASTER a put waits for it
(:meth:`HAService.wait_for_slave`) up to ``slave_timeout`` ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import socket
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .ha_frames import TRANSFER_HEADER, ReportReader
from .results import PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from .message_store import MessageStore

log = logging.getLogger("rocketmq_broker.ha")


@dataclass
class HASettings:
    """Replication settings (Java ``MessageStoreConfig`` keys; sizes bytes, times ms).

    Attributes:
        heartbeat_interval: ``haSendHeartbeatInterval`` (5000): idle time before a heartbeat
            frame (master) or a report (slave).
        housekeeping_interval: ``haHousekeepingInterval`` (20000): the master closes a
            connection that sent nothing for this long.
        transfer_batch_size: ``haTransferBatchSize`` (32768): largest transfer body.
        slave_fallbehind_max: ``haSlaveFallbehindMax`` (256 MiB): SYNC_MASTER answers
            SLAVE_NOT_AVAILABLE when the slave is further behind.
        slave_timeout: ``slaveTimeout`` (3000): SYNC_MASTER wait before FLUSH_SLAVE_TIMEOUT.
        sync_master: the broker is a SYNC_MASTER (puts wait for the slave).
    """

    heartbeat_interval: int = 5000
    housekeeping_interval: int = 20000
    transfer_batch_size: int = 32768
    slave_fallbehind_max: int = 256 * 1024 * 1024
    slave_timeout: int = 3000
    sync_master: bool = False


class HAConnection:
    """One slave connected to this master: its reader and writer tasks."""

    def __init__(self, service: HAService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.service = service
        self.reader = reader
        self.writer = writer
        peer = writer.get_extra_info("peername")
        self.remote_addr = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.request_offset = -1  # first report: where the transfer starts
        self.ack_offset = -1  # newest report
        self.next_transfer_from = -1
        self.first_report = asyncio.Event()
        self.wake = asyncio.Event()
        self.closed = False
        self._tasks: list[asyncio.Task] = []

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._read_loop()), loop.create_task(self._write_loop())]

    def close(self, why: str) -> None:
        if self.closed:
            return
        self.closed = True
        log.info("HA connection %s closed: %s", self.remote_addr, why)
        for t in self._tasks:
            if t is not asyncio.current_task():
                t.cancel()
        self.writer.close()
        self.service._remove(self)

    async def _read_loop(self) -> None:
        svc = self.service
        reports = ReportReader()
        idle_s = svc.settings.housekeeping_interval / 1000.0
        try:
            while True:
                try:  # not asyncio.wait_for: on 3.11 it may swallow close()'s cancel (gh-86296)
                    async with asyncio.timeout(idle_s):
                        data = await self.reader.read(1024 * 1024)
                except TimeoutError:
                    self.close(f"ha housekeeping, nothing read for {svc.settings.housekeeping_interval} ms")
                    return
                if not data:
                    self.close("slave closed the connection")
                    return
                value = reports.feed(data)
                if value is None:
                    continue
                if self.request_offset < 0:
                    self.request_offset = value
                    log.info("slave[%s] request offset %d", self.remote_addr, value)
                    self.first_report.set()
                elif value > svc.store.get_max_phy_offset():
                    self.close(f"slave[{self.remote_addr}] request offset {value} greater than local commitLog offset")
                    return
                self.ack_offset = value
                svc.notify_transfer_some(value)
        except (OSError, asyncio.IncompleteReadError) as exc:
            self.close(f"read failed: {exc}")

    async def _write_loop(self) -> None:
        svc = self.service
        store = svc.store
        settings = svc.settings
        heartbeat_s = settings.heartbeat_interval / 1000.0
        last_write = time.monotonic()
        try:
            await self.first_report.wait()
            if self.request_offset == 0:
                end = store.get_max_phy_offset()
                start = end - end % store.commit_log.file_size
            else:
                start = self.request_offset
            self.next_transfer_from = start
            log.info("master transfer data from %d to slave[%s], and slave request %d", start, self.remote_addr,
                     self.request_offset)
            while True:
                now = time.monotonic()
                if now - last_write > heartbeat_s:
                    self.writer.write(TRANSFER_HEADER.pack(self.next_transfer_from, 0))
                    await self.writer.drain()
                    last_write = time.monotonic()
                data = store.get_commit_log_data(self.next_transfer_from, settings.transfer_batch_size)
                if data:
                    self.writer.write(TRANSFER_HEADER.pack(self.next_transfer_from, len(data)))
                    self.writer.write(data)
                    self.next_transfer_from += len(data)
                    await self.writer.drain()
                    last_write = time.monotonic()
                    continue
                self.wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.1):
                        await self.wake.wait()
        except (OSError, ConnectionError) as exc:
            self.close(f"write failed: {exc}")


class HAService:
    """The HA listener, its connections and the SYNC_MASTER waiters of one store.

    Args:
        store: the master's :class:`MessageStore`.
        settings: :class:`HASettings`.
    """

    def __init__(self, store: MessageStore, settings: HASettings) -> None:
        self.store = store
        self.settings = settings
        self.connections: list[HAConnection] = []
        #: highest offset any slave has reported (all slaves together; only grows)
        self.push2slave_max_offset = 0
        self.port = 0
        self._server: asyncio.AbstractServer | None = None
        self._waiters: list = []  # heap of [end, seq, future, result, timer]
        self._seq = itertools.count()

    @property
    def connection_count(self) -> int:
        return len(self.connections)

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: a free port); returns the bound port."""
        self._server = await asyncio.start_server(self._accept, host, port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        if self.settings.sync_master:
            self.store.replica_hook = self.wait_for_slave
        log.info("HA service listening on %s:%d", host, self.port)
        return self.port

    async def stop(self) -> None:
        """Close the listener and every connection; pending SYNC waits end as FLUSH_SLAVE_TIMEOUT."""
        if self.store.replica_hook == self.wait_for_slave:
            self.store.replica_hook = None
        if self._server is not None:
            self._server.close()
            self._server = None
        for conn in list(self.connections):
            conn.close("HA service stopped")
        for entry in self._waiters:
            self._finish(entry, PutMessageStatus.FLUSH_SLAVE_TIMEOUT)
        self._waiters = []

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = HAConnection(self, reader, writer)
        self.connections.append(conn)  # counted at accept, as Java's connectionCount
        log.info("HA service accepted slave %s", conn.remote_addr)
        conn.start()

    def _remove(self, conn: HAConnection) -> None:
        with contextlib.suppress(ValueError):
            self.connections.remove(conn)

    def wake_writers(self) -> None:
        """New data: let every connection's writer send it now instead of within 100 ms."""
        for conn in self.connections:
            conn.wake.set()

    # -- SYNC_MASTER ------------------------------------------------------------------------
    def is_slave_ok(self, end: int) -> bool:
        """Java ``HAService.isSlaveOK``: a slave is connected and not too far behind ``end``."""
        return bool(self.connections) and end - self.push2slave_max_offset < self.settings.slave_fallbehind_max

    def notify_transfer_some(self, offset: int) -> None:
        """A slave reported ``offset``: raise ``push2slave_max_offset`` and complete the waits it covers."""
        if offset > self.push2slave_max_offset:
            self.push2slave_max_offset = offset
        waiters = self._waiters
        while waiters and waiters[0][0] <= self.push2slave_max_offset:
            self._finish(heapq.heappop(waiters), None)

    def wait_for_slave(self, end: int, out) -> asyncio.Future[PutMessageResult]:
        """The store's replica hook: a future of the put's result, completed once a slave has
        acknowledged ``end`` (status unchanged), at once with SLAVE_NOT_AVAILABLE when no slave
        is usable, or after ``slave_timeout`` ms with FLUSH_SLAVE_TIMEOUT. ``out`` is the put's
        result or a future of it (SYNC_FLUSH); the replication status, applied last, wins."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[PutMessageResult] = loop.create_future()
        if isinstance(out, asyncio.Future):
            def flushed(f: asyncio.Future) -> None:
                if f.cancelled() or f.exception() is not None:
                    if not fut.done():
                        fut.set_exception(f.exception() or asyncio.CancelledError())
                    return
                self._submit(end, f.result(), fut)

            out.add_done_callback(flushed)
        else:
            self._submit(end, out, fut)
        return fut

    def _submit(self, end: int, result: PutMessageResult, fut: asyncio.Future) -> None:
        if not self.is_slave_ok(end):
            result.put_message_status = PutMessageStatus.SLAVE_NOT_AVAILABLE
            fut.set_result(result)
            return
        if self.push2slave_max_offset >= end:
            fut.set_result(result)
            return
        entry = [end, next(self._seq), fut, result, None]
        entry[4] = asyncio.get_running_loop().call_later(self.settings.slave_timeout / 1000.0, self._expire, entry)
        heapq.heappush(self._waiters, entry)
        self.wake_writers()

    def _expire(self, entry: list) -> None:
        with contextlib.suppress(ValueError):
            self._waiters.remove(entry)
            heapq.heapify(self._waiters)
        log.warning("wait for slave to offset %d timed out after %d ms", entry[0], self.settings.slave_timeout)
        self._finish(entry, PutMessageStatus.FLUSH_SLAVE_TIMEOUT)

    @staticmethod
    def _finish(entry: list, status: PutMessageStatus | None) -> None:
        _end, _seq, fut, result, timer = entry
        if timer is not None:
            timer.cancel()
        if status is not None:
            result.put_message_status = status
        if not fut.done():
            fut.set_result(result)

    # -- monitoring -------------------------------------------------------------------------
    def runtime_info(self) -> dict[str, str]:
        """HA figures for GET_BROKER_RUNTIME_INFO (not in 4.9.8's answer; our extension)."""
        end = self.store.get_max_phy_offset()
        return {"haConnectionCount": str(len(self.connections)),
                "haPush2SlaveMaxOffset": str(self.push2slave_max_offset),
                "haSlaveFallBehindBytes": str(max(end - self.push2slave_max_offset, 0) if self.connections else end)}
