"""Incremental splitter of a TCP byte stream into remoting frames (docs/protocol.md §1.1).

Mirrors Java's ``LengthFieldBasedFrameDecoder(16 MiB, 0, 4, 0, 4)`` plus the header-length check
of ``RemotingCommand.decode``: any violation raises ``FrameError`` and the caller closes the
connection (Java closes it too, without an error reply).
"""

from __future__ import annotations

import struct

from rocketmq_sdk.exceptions import FrameError

__all__ = ["DEFAULT_MAX_FRAME_LENGTH", "MAX_FRAME_LENGTH", "FrameDecoder"]

DEFAULT_MAX_FRAME_LENGTH = 16 * 1024 * 1024
"""Java's ``com.rocketmq.remoting.frameMaxLength`` default, applied to length prefix + frame."""

MAX_FRAME_LENGTH = DEFAULT_MAX_FRAME_LENGTH  # alias

_UINT = struct.Struct(">I")


_HTTP_STARTS = (b"HTTP/", b"GET ", b"POST ", b"PUT ", b"HEAD ", b"DELETE ", b"OPTIONS ", b"PATCH ",
                b"CONNECT ", b"PRI * ")


def foreign_protocol(head: bytes | bytearray | memoryview) -> str:
    """A remark for a stream that starts with ``head`` when it is recognisably another protocol:
    HTTP (a web server or proxy on the port) or TLS (a TLS-only server answering plain TCP, or a
    TLS client on a plain port); else ``""``."""
    head = bytes(head[:8])
    if head.startswith(_HTTP_STARTS):
        kind = "HTTP"
    elif len(head) >= 3 and head[0] in (0x15, 0x16, 0x17) and head[1] == 0x03 and head[2] <= 0x04:
        kind = "TLS: use use_tls=True if the server is a TLS RocketMQ server"
    else:
        return ""
    return f"; this is not a RocketMQ name server/broker (looks like {kind})"


class FrameDecoder:
    """Split a byte stream into frames.

    Args:
        max_frame_length: largest accepted frame including its 4-byte length prefix, in bytes
            (default 16 MiB, as Java).

    ``feed(data)`` returns the complete frames found so far, each WITHOUT its length prefix (the
    form ``RemotingCommand.decode`` takes). After a ``FrameError`` the decoder is unusable.
    """

    __slots__ = ("_buf", "_max")

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self._buf = bytearray()
        self._max = max_frame_length

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Add ``data`` and return every frame completed by it (possibly none).

        Raises:
            FrameError: a length below 4, a frame longer than ``max_frame_length`` (counting the
                length prefix), or a header length larger than ``length - 4``.
        """
        buf: bytes | bytearray | memoryview
        if self._buf:
            self._buf += data
            buf = self._buf
        else:  # nothing pending (the usual case): frames are cut from ``data`` itself, one copy each
            buf = data
        size = len(buf)
        pos = 0
        frames: list[bytes] = []
        while size - pos >= 4:
            (length,) = _UINT.unpack_from(buf, pos)
            if length < 4:
                raise FrameError(f"frame length {length} is below the minimum of 4" + foreign_protocol(buf[pos:]))
            if length + 4 > self._max:
                raise FrameError(f"frame length {length} + 4 exceeds the maximum of {self._max} bytes"
                                 + foreign_protocol(buf[pos:]))
            if size - pos >= 8:
                hlen = _UINT.unpack_from(buf, pos + 4)[0] & 0xFFFFFF
                if hlen > length - 4:
                    raise FrameError(f"header length {hlen} exceeds frame length {length} - 4")
            end = pos + 4 + length
            if end > size:
                break
            frames.append(bytes(buf[pos + 4:end]))
            pos = end
        if buf is data:
            if pos < size:
                self._buf += data[pos:]
        elif pos:
            del self._buf[:pos]
        return frames
