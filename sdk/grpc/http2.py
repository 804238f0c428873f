"""HTTP/2 framing (RFC 9113) as gRPC's two ends in this project need it (the SDK's own unary
transport, :mod:`.h2_connection`, and the reference broker's gRPC server, ``rocketmq_broker.proxy.h2_*``):
frame types, flags, settings and error codes, one frame's bytes, a frame header's fields, padding,
a header block cut into HEADERS + CONTINUATION frames, header blocks in HPACK's literal form (RFC
7541 §6.2.2: never added to either side's dynamic table, so the encoder keeps no state), gRPC's
5-byte message prefix and its ``grpc-timeout`` header. Decoding the peer's header blocks (dynamic
table, Huffman) is the ``hpack`` library's (each connection holds its decoder).
"""

from __future__ import annotations

import struct

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

# frame types
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
# flags
END_STREAM = 0x1
ACK = 0x1
END_HEADERS = 0x4
PADDED = 0x8
PRIORITY_FLAG = 0x20
# settings
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE = \
    range(1, 7)
# error codes (RST_STREAM, GOAWAY)
NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR, SETTINGS_TIMEOUT, STREAM_CLOSED, FRAME_SIZE_ERROR, \
    REFUSED_STREAM, CANCEL, COMPRESSION_ERROR, CONNECT_ERROR, ENHANCE_YOUR_CALM, INADEQUATE_SECURITY, \
    HTTP_1_1_REQUIRED = range(14)

#: the protocol's defaults and limits
DEFAULT_WINDOW = 65_535
DEFAULT_MAX_FRAME = 16_384
MAX_WINDOW = 2**31 - 1
MAX_FRAME_LIMIT = 2**24 - 1

_U32 = struct.Struct(">I")
#: a frame header as ``(length << 8 | type, flags, stream id with the reserved bit)``
FRAME_HEAD = struct.Struct(">IBI")
_HEAD = FRAME_HEAD


class ProtocolError(Exception):
    """The peer broke HTTP/2 (or gRPC's use of it): the connection cannot be used further.

    Attributes:
        code: the error code a GOAWAY names (RFC 9113 section 7; default ``PROTOCOL_ERROR``).
    """

    def __init__(self, reason: str, code: int = PROTOCOL_ERROR) -> None:
        super().__init__(reason)
        self.code = code


class ReceiveWindow:
    """A connection's receive window (RFC 9113 section 6.9): every DATA frame's payload counts
    against it; once half of it is consumed, a WINDOW_UPDATE on stream 0 gives that back.

    Args:
        size: the window this side grants, in bytes (announced by the caller at the preface).
    """

    __slots__ = ("size", "_left", "_unacked")

    def __init__(self, size: int) -> None:
        self.size = size
        self._left = size
        self._unacked = 0

    def consume(self, n: int) -> bytes:
        """Count ``n`` received bytes: the WINDOW_UPDATE frame to send now, or ``b""``.

        Raises:
            ProtocolError: (``FLOW_CONTROL_ERROR``) the peer sent more than the window allowed.
        """
        self._left -= n
        if self._left < 0:
            raise ProtocolError("the peer overran the connection's receive window", FLOW_CONTROL_ERROR)
        self._unacked += n
        if self._unacked < self.size // 2:
            return b""
        increment, self._unacked = self._unacked, 0
        self._left += increment
        return window_update(0, increment)


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"") -> bytes:
    """One frame: 9-byte header (24-bit length, type, flags, 31-bit stream id) + ``payload``."""
    n = len(payload)
    return bytes((n >> 16 & 0xFF, n >> 8 & 0xFF, n & 0xFF, kind, flags)) + _U32.pack(stream_id & MAX_WINDOW) + payload


def parse_head(data: bytes | bytearray | memoryview, offset: int = 0) -> tuple[int, int, int, int]:
    """``(length, type, flags, stream id)`` of the 9-byte frame header at ``offset``."""
    length_type, flags, sid = _HEAD.unpack_from(data, offset)
    return length_type >> 8, length_type & 0xFF, flags, sid & MAX_WINDOW


def settings(pairs: dict[int, int]) -> bytes:
    """A SETTINGS frame announcing ``pairs`` (id → value)."""
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs.items()))


def parse_settings(payload: bytes) -> dict[int, int]:
    """The id → value pairs of a SETTINGS payload.

    Raises:
        ProtocolError: a length not a multiple of 6 (FRAME_SIZE_ERROR).
    """
    if len(payload) % 6:
        raise ProtocolError(f"SETTINGS payload of {len(payload)} bytes (not a multiple of 6)")
    return {k: v for k, v in struct.iter_unpack(">HI", payload)}


def window_update(stream_id: int, increment: int) -> bytes:
    """A WINDOW_UPDATE of ``increment`` bytes (1 ... 2**31-1) for ``stream_id`` (0: the connection)."""
    return frame(WINDOW_UPDATE, 0, stream_id, _U32.pack(increment))


def rst_stream(stream_id: int, code: int) -> bytes:
    """A RST_STREAM ending ``stream_id`` with error ``code``."""
    return frame(RST_STREAM, 0, stream_id, _U32.pack(code))


def goaway(last_stream_id: int, code: int, debug: bytes = b"") -> bytes:
    """A GOAWAY: streams above ``last_stream_id`` were not processed."""
    return frame(GOAWAY, 0, 0, _U32.pack(last_stream_id) + _U32.pack(code) + debug)


def u32(payload: bytes, offset: int = 0) -> int:
    """The big-endian 31-bit value at ``offset`` (the reserved bit cleared)."""
    value: int = _U32.unpack_from(payload, offset)[0]
    return value & MAX_WINDOW


def unpad(flags: int, payload: bytes) -> bytes:
    """The payload of a DATA or HEADERS frame without its padding (flag PADDED).

    Raises:
        ProtocolError: padding as long as the frame or longer.
    """
    if not flags & PADDED:
        return payload
    if not payload or payload[0] >= len(payload):
        raise ProtocolError("padding longer than the frame")
    return payload[1:len(payload) - payload[0]]


def header_frames(stream_id: int, block: bytes, max_frame: int, flags: int = 0) -> bytes:
    """Header ``block`` as one HEADERS frame (``flags`` | END_HEADERS), or HEADERS + CONTINUATION
    frames of at most ``max_frame`` bytes each (the peer's SETTINGS_MAX_FRAME_SIZE)."""
    if len(block) <= max_frame:
        return frame(HEADERS, flags | END_HEADERS, stream_id, block)
    parts = [block[i:i + max_frame] for i in range(0, len(block), max_frame)]
    out = [frame(HEADERS, flags, stream_id, parts[0])]
    out += [frame(CONTINUATION, 0, stream_id, p) for p in parts[1:-1]]
    out.append(frame(CONTINUATION, END_HEADERS, stream_id, parts[-1]))
    return b"".join(out)


class HeaderBlocks:
    """A connection's header blocks put back together from a HEADERS frame (padding and priority
    removed) and the CONTINUATION frames up to END_HEADERS.

    Args:
        limit: the longest block accepted, bytes.
    """

    __slots__ = ("limit", "pending")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        #: (stream id, the HEADERS frame's flags, the block so far) while CONTINUATION frames are due
        self.pending: tuple[int, int, bytearray] | None = None

    def headers(self, flags: int, stream_id: int, payload: bytes) -> tuple[int, int, bytes] | None:
        """A HEADERS frame: ``(stream id, flags, block)`` when the block is complete, else None.

        Raises:
            ProtocolError: bad padding, or a block over ``limit``.
        """
        payload = unpad(flags, payload)
        if flags & PRIORITY_FLAG:
            payload = payload[5:]
        if len(payload) > self.limit:
            raise ProtocolError(f"header block over {self.limit} bytes")
        if flags & END_HEADERS:
            return stream_id, flags, payload
        self.pending = (stream_id, flags, bytearray(payload))
        return None

    def continuation(self, flags: int, stream_id: int, payload: bytes) -> tuple[int, int, bytes] | None:
        """A CONTINUATION frame: as :meth:`headers`.

        Raises:
            ProtocolError: no block open on ``stream_id``, or the block over ``limit``.
        """
        pending = self.pending
        if pending is None or pending[0] != stream_id:
            raise ProtocolError("CONTINUATION without its HEADERS")
        pending[2].extend(payload)
        if len(pending[2]) > self.limit:
            raise ProtocolError(f"header block over {self.limit} bytes")
        if not flags & END_HEADERS:
            return None
        self.pending = None
        return pending[0], pending[1], bytes(pending[2])


def grpc_message(message: bytes) -> bytes:
    """One gRPC length-prefixed message: flag 0 (not compressed), 4-byte length, ``message``."""
    return b"\0" + _U32.pack(len(message)) + message


#: seconds per unit of a ``grpc-timeout`` value (gRPC over HTTP/2: H M S m u n)
_TIMEOUT_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}


def parse_grpc_timeout(value: str) -> float:
    """Seconds of a ``grpc-timeout`` header (``"2500m"``: 2.5): 1 to 8 ASCII digits and a unit.

    Raises:
        ValueError: not of that form.
    """
    unit = _TIMEOUT_UNITS.get(value[-1:])
    digits = value[:-1]
    if unit is None or not 1 <= len(digits) <= 8 or not digits.isascii() or not digits.isdigit():
        raise ValueError(f"grpc-timeout {value[:20]!r} is not 1-8 digits and a unit of H M S m u n")
    return int(digits) * unit


def hpack_int(value: int, prefix_bits: int, first: int) -> bytes:
    """HPACK's integer (RFC 7541 §5.1): ``value`` in a ``prefix_bits``-bit prefix of the byte
    ``first`` (its high bits carry the representation's pattern), continued in 7-bit groups."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes((first | value,))
    out = bytearray((first | limit,))
    value -= limit
    while value >= 128:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def literal(name: str | int, value: str) -> bytes:
    """One header as a *literal without indexing* (RFC 7541 §6.2.2), no Huffman coding: ``name``
    is a static table index (int) or the lower-case name itself."""
    v = value.encode()
    if isinstance(name, int):
        head = hpack_int(name, 4, 0x00)
    else:
        n = name.encode()
        head = b"\x00" + hpack_int(len(n), 7, 0) + n
    return head + hpack_int(len(v), 7, 0) + v


_STATIC: list[tuple[str, str]] = []


def _int_at(block: bytes, pos: int, prefix_bits: int) -> tuple[int, int]:
    """HPACK's integer at ``pos`` (``prefix_bits`` of the first byte): ``(value, next position)``.

    Raises:
        IndexError: the block ends inside it.
    """
    limit = (1 << prefix_bits) - 1
    value = block[pos] & limit
    pos += 1
    if value < limit:
        return value, pos
    shift = 0
    while True:
        b = block[pos]
        pos += 1
        value += (b & 0x7F) << shift
        if not b & 0x80 or shift > 28:
            return value, pos
        shift += 7


def decode_literals(block: bytes) -> list[tuple[str, str]] | None:
    """The headers of a block made only of static-table indexed fields and literals without
    indexing or never indexed, none Huffman-coded (what :func:`literal` writes, so this SDK's
    requests): a fast path that leaves every dynamic table as it was. None for any other block
    (dynamic table entries, Huffman strings, table size updates, anything malformed): decode it
    with ``hpack``, which raises for what is malformed."""
    static = _STATIC
    if not static:
        from hpack.table import HeaderTable

        static.extend((k.decode(), v.decode()) for k, v in HeaderTable.STATIC_TABLE)
    out = []
    pos, end = 0, len(block)
    try:
        while pos < end:
            first = block[pos]
            if first & 0x80:
                index, pos = (first & 0x7F, pos + 1) if first != 0xFF else _int_at(block, pos, 7)
                if not 1 <= index <= len(static):
                    return None
                out.append(static[index - 1])
                continue
            if first & 0xE0:  # not a literal without indexing (0000) or never indexed (0001)
                return None
            index, pos = (first & 0x0F, pos + 1) if first & 0x0F != 0x0F else _int_at(block, pos, 4)
            if index:
                if index > len(static):
                    return None
                name = static[index - 1][0]
            else:
                size = block[pos]  # (the Huffman bit set: 128 and more)
                size, pos = (size, pos + 1) if size < 0x7F else (-1, pos) if size & 0x80 else _int_at(block, pos, 7)
                if size < 0 or pos + size > end:
                    return None
                name = block[pos:pos + size].decode()
                pos += size
            size = block[pos]
            size, pos = (size, pos + 1) if size < 0x7F else (-1, pos) if size & 0x80 else _int_at(block, pos, 7)
            if size < 0 or pos + size > end:
                return None
            out.append((name, block[pos:pos + size].decode()))
            pos += size
    except (IndexError, UnicodeDecodeError):
        return None
    return out


#: static table indexes (RFC 7541 Appendix A) used by requests
METHOD_POST = b"\x83"
SCHEME_HTTP = b"\x86"
SCHEME_HTTPS = b"\x87"
AUTHORITY, PATH, CONTENT_TYPE, USER_AGENT = 1, 4, 31, 58
