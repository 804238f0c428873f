"""The two frames of RocketMQ 4.9's master/slave replication channel (docs/protocol.md §8.3).

Both directions are plain byte streams of fixed-layout big-endian frames, no handshake:

* slave → master, the **offset report**: 8 bytes, the slave's max CommitLog offset;
* master → slave, the **transfer**: ``long offset`` + ``int size`` + ``size`` raw CommitLog
  bytes; ``size`` 0 is a heartbeat whose offset is the master's next transfer position.
"""

from __future__ import annotations

import struct

REPORT = struct.Struct(">q")
"""Slave → master: the slave's max physical offset (Java ``HAClient.reportSlaveMaxOffset``)."""

TRANSFER_HEADER = struct.Struct(">qi")
"""Master → slave header: physical offset of the first body byte, body size."""


class HAProtocolError(Exception):
    """A frame that breaks the protocol (negative size, unexpected offset); the connection is
    closed and re-established, as Java's HA threads do."""


def encode_report(offset: int) -> bytes:
    """The 8-byte report of a slave whose CommitLog ends at ``offset`` (bytes)."""
    return REPORT.pack(offset)


def encode_transfer(offset: int, body: bytes = b"") -> bytes:
    """A transfer frame of ``body`` (CommitLog bytes starting at ``offset``); empty body: heartbeat."""
    return TRANSFER_HEADER.pack(offset, len(body)) + body


class TransferReader:
    """Cuts the master's byte stream into ``(offset, body)`` transfers; partial frames wait in
    the buffer for the rest (Java ``HAClient.dispatchReadRequest``)."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """Add received bytes; returns the transfers they complete, in order.

        Raises:
            HAProtocolError: a header with a negative body size.
        """
        buf = self._buf
        buf += data
        out = []
        pos = 0
        header = TRANSFER_HEADER.size
        while len(buf) - pos >= header:
            offset, size = TRANSFER_HEADER.unpack_from(buf, pos)
            if size < 0:
                raise HAProtocolError(f"transfer frame with negative size {size} at offset {offset}")
            if len(buf) - pos - header < size:
                break
            out.append((offset, bytes(buf[pos + header:pos + header + size])))
            pos += header + size
        if pos:
            del buf[:pos]
        return out

    @property
    def pending(self) -> int:
        """Bytes buffered that do not yet make a whole frame."""
        return len(self._buf)


class ReportReader:
    """The master's side of the report stream: only the **last** complete 8-byte value of what
    has arrived counts, earlier ones are skipped (Java ``ReadSocketService.processReadEvent``)."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> int | None:
        """Add received bytes; returns the newest complete report, or None if none completed."""
        buf = self._buf
        buf += data
        whole = len(buf) - len(buf) % REPORT.size
        if not whole:
            return None
        value = REPORT.unpack_from(buf, whole - REPORT.size)[0]
        del buf[:whole]
        return value
