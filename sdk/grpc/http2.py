"""HTTP/2 framing (RFC 9113) as the SDK's own gRPC unary transport needs it: frame types, flags,
settings and error codes, one frame's bytes, a frame header's fields, and request header blocks
in HPACK's literal form (RFC 7541 §6.2.2: never added to either side's dynamic table, so the
encoder keeps no state). Decoding a server's header blocks (dynamic table, Huffman) is the
``hpack`` library's (:mod:`.unary` holds the decoder per connection).
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
    """The peer broke HTTP/2 (or gRPC's use of it): the connection cannot be used further."""


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


#: static table indexes (RFC 7541 Appendix A) used by requests
METHOD_POST = b"\x83"
SCHEME_HTTP = b"\x86"
SCHEME_HTTPS = b"\x87"
AUTHORITY, PATH, CONTENT_TYPE, USER_AGENT = 1, 4, 31, 58
