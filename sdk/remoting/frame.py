"""Incremental splitting of a TCP byte stream into remoting frames (§1.1)."""

from __future__ import annotations

import struct

from ..exceptions import FrameError

MAX_FRAME_LENGTH = 16 * 1024 * 1024
_LEN = struct.Struct(">i")


class FrameDecoder:
    """Feed bytes, get whole frames (without their length prefix).

    Mirrors Netty's ``LengthFieldBasedFrameDecoder(16 MiB, 0, 4, 0, 4)`` used by Java: a frame
    whose ``length + 4`` exceeds ``max_frame_length`` or whose length is below 4 is an error.
    """

    __slots__ = ("_buf", "_max")

    def __init__(self, max_frame_length: int = MAX_FRAME_LENGTH) -> None:
        self._buf = bytearray()
        self._max = max_frame_length

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data``; return the frames now complete.

        Raises:
            FrameError: a length field is out of range (the stream cannot be resynchronised).
        """
        buf = self._buf
        buf += data
        frames: list[bytes] = []
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            length = _LEN.unpack_from(buf, pos)[0]
            if length < 4 or length + 4 > self._max:
                raise FrameError(f"illegal frame length {length} (max {self._max - 4})")
            end = pos + 4 + length
            if end > n:
                break
            frames.append(bytes(buf[pos + 4:end]))
            pos = end
        if pos:
            del buf[:pos]
        return frames
