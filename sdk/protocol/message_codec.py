"""Binary codecs for messages: the properties string (docs/protocol.md §4.1), the stored/pulled record (docs/protocol.md §4.5) and
the batch body (docs/protocol.md §4.6). Shared by the SDK (decoding pulls, encoding batches) and the broker
(building CommitLog records, decoding batches).
"""

from __future__ import annotations

import socket
import struct
import zlib
from collections.abc import Sequence
from typing import NamedTuple

from .. import _speedups
from ..exceptions import FrameError
from . import deflate
from .codes import MessageConst as MC
from .codes import MessageSysFlag
from .message import Message, MessageExt
from .msgid import offset_msg_id_from_packed

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
MESSAGE_MAGIC_CODE = -626843481  # 0xDAA320A7
BLANK_MAGIC_CODE = -875286124  # 0xCBD43194
MAX_PROPERTIES_LENGTH = 32767

# Field positions inside a stored record (IPv4 born host): the broker patches these in place.
POS_QUEUE_OFFSET = 20
POS_PHYSICAL_OFFSET = 28
POS_SYS_FLAG = 36
POS_BORN_TIMESTAMP = 40
POS_BORN_HOST = 48

_HEAD = struct.Struct(">iiiiiqqiq")  # total, magic, crc, queueId, flag, queueOffset, physOffset, sysFlag, bornTs
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_H = struct.Struct(">h")
_TAIL = struct.Struct(">iqi")  # reconsumeTimes, preparedTxOffset, bodyLen
_BATCH_HEAD = struct.Struct(">iiiii")  # total, magic, crc, flag, bodyLen
# bornHost(4 B + port), storeTimestamp, storeHost(4 B + port), reconsumeTimes, preparedTxOffset, bodyLen;
# each IPv4 host (ip, port) is read as one unsigned 64-bit key: ip << 32 | port
_V4_MID = struct.Struct(">QqQiqi")
# IPv4 hosts seen in records: (ip << 32 | port) -> "a.b.c.d:port" and the 16 hex digits the
# offset message id starts with; bounded (cleared when full), records repeat a few hosts
_HOSTS: dict[int, tuple[str, str]] = {}
_HOSTS_MAX = 4096
_TOPICS: dict[bytes, str] = {}
_TOPICS_MAX = 4096
_V6_BITS = MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6
_U64 = 0xFFFFFFFFFFFFFFFF
_new_ext = object.__new__
_TOPIC_LEN = [bytes((n,)) for n in range(256)]


def encode_properties(properties: dict[str, str], *, trailing_separator: bool = False) -> str:
    """``name\\x01value\\x02...`` in the dict's order; entries whose value is None are skipped.

    Java 4.9.1+ writes no trailing separator (the default); Java 4.9.0 and the C++ client end
    the string with ``\\x02`` (``trailing_separator=True``).
    """
    if _c_encode_properties is not None and type(properties) is dict:
        text = _c_encode_properties(properties, trailing_separator)
        if text is not None:
            return text
    # a list, not a generator: join() builds one from a generator anyway (~0.1 µs less per call)
    text = PROPERTY_SEPARATOR.join([f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in properties.items() if v is not None])
    return text + PROPERTY_SEPARATOR if trailing_separator and text else text


def decode_properties(text: str) -> dict[str, str]:
    """Parse a properties string; tolerates a trailing separator and skips malformed items."""
    props: dict[str, str] = {}
    if not text:
        return props
    for item in text.split(PROPERTY_SEPARATOR):
        k, sep, v = item.partition(NAME_VALUE_SEPARATOR)
        if sep and k and v:
            props[k] = v
    return props


def pack_host(host: str) -> tuple[bytes, bool]:
    """``"ip:port"`` (or ``"[v6]:port"``) → (ip bytes + int port, is_ipv6).

    Raises:
        ValueError: not an ``ip:port`` string.
    """
    ip, _, port = host.rpartition(":")
    ip = ip.strip("[]")
    try:
        if ":" in ip:
            return socket.inet_pton(socket.AF_INET6, ip) + _I.pack(int(port)), True
        return socket.inet_aton(ip or "127.0.0.1") + _I.pack(int(port or 0)), False
    except (OSError, struct.error, ValueError) as exc:
        raise ValueError(f"not an ip:port host: {host!r}") from exc


def _v4_host(key: int) -> tuple[str, str]:
    """("a.b.c.d:port", offset-msg-id prefix) of the IPv4 host ``ip << 32 | port`` (the 8
    bytes of a record's host field, unsigned), memoised. The port prints as Java's int."""
    host = _HOSTS.get(key)
    if host is None:
        if len(_HOSTS) >= _HOSTS_MAX:
            _HOSTS.clear()
        ip, port = key >> 32, key & 0xFFFFFFFF
        host = _HOSTS[key] = (f"{ip >> 24}.{ip >> 16 & 255}.{ip >> 8 & 255}.{ip & 255}:"
                              f"{port - 0x100000000 if port & 0x80000000 else port}", f"{key:016X}")
    return host


def _topic_str(raw: bytes) -> str:
    topic = _TOPICS.get(raw)
    if topic is None:
        if len(_TOPICS) >= _TOPICS_MAX:
            _TOPICS.clear()
        topic = _TOPICS[raw] = raw.decode("utf-8")
    return topic


def _unpack_host(buf, pos: int, v6: bool) -> tuple[str, int]:
    if v6:
        ip = socket.inet_ntop(socket.AF_INET6, bytes(buf[pos:pos + 16]))
        return f"[{ip}]:{_I.unpack_from(buf, pos + 16)[0]}", pos + 20
    return f"{buf[pos]}.{buf[pos + 1]}.{buf[pos + 2]}.{buf[pos + 3]}:{_I.unpack_from(buf, pos + 4)[0]}", pos + 8


def body_crc(body: bytes) -> int:
    """BODYCRC as RocketMQ stores it: ``crc32(body) & 0x7FFFFFFF``."""
    return zlib.crc32(body) & 0x7FFFFFFF


def encode_stored_message(*, topic: bytes, body: bytes, properties: bytes, queue_id: int, flag: int,
                          sys_flag: int, born_timestamp: int, born_host: bytes, store_host: bytes,
                          store_timestamp: int = 0, queue_offset: int = 0, physical_offset: int = 0,
                          reconsume_times: int = 0, prepared_transaction_offset: int = 0,
                          crc: int | None = None) -> bytearray:
    """Build one CommitLog record (docs/protocol.md §4.5).

    ``born_host``/``store_host`` are packed hosts from :func:`pack_host` (8 or 20 bytes; the
    matching V6 bits must be in ``sys_flag``). ``topic`` must be ≤ 127 bytes and ``properties`` ≤
    32767 bytes (the caller validates). Returns a bytearray so the broker can patch the queue
    offset, physical offset and store timestamp inside its append lock.
    """
    # 48 fixed head + born host + store timestamp + store host + reconsumeTimes(4) +
    # preparedTxOffset(8) + bodyLen(4) + body + topicLen(1) + topic + propsLen(2) + props
    total = (48 + len(born_host) + 8 + len(store_host) + 16 + len(body) + 1 + len(topic)
             + 2 + len(properties))
    # one join of packed pieces: half the cost of slice assignments into a bytearray(total)
    return bytearray(b"".join((
        _HEAD.pack(total, MESSAGE_MAGIC_CODE, body_crc(body) if crc is None else crc, queue_id, flag,
                   queue_offset, physical_offset, sys_flag, born_timestamp),
        born_host, _Q.pack(store_timestamp), store_host,
        _TAIL.pack(reconsume_times, prepared_transaction_offset, len(body)), body,
        _TOPIC_LEN[len(topic)], topic, _H.pack(len(properties)), properties)))


def encode_message_ext(m: MessageExt, *, trailing_separator: bool = False) -> bytearray:
    """Build the docs/protocol.md §4.5 record of a :class:`MessageExt` from its fields (hosts as ``"ip:port"``,
    IPv4 or ``[v6]:port``). The V6 bits of ``sys_flag`` are set from the hosts; BODYCRC is the
    message's ``body_crc`` when non-zero, else computed. The body is written as it is (compress
    it and set the COMPRESSED bit beforehand if wanted).

    Raises:
        ValueError: a host is not ``ip:port``.
    """
    born, born_v6 = pack_host(m.born_host or "0.0.0.0:0")
    store, store_v6 = pack_host(m.store_host or "0.0.0.0:0")
    sys_flag = m.sys_flag & ~(MessageSysFlag.BORNHOST_V6 | MessageSysFlag.STOREHOST_V6)
    sys_flag |= (MessageSysFlag.BORNHOST_V6 if born_v6 else 0) | (MessageSysFlag.STOREHOST_V6 if store_v6 else 0)
    props = encode_properties(m.properties, trailing_separator=trailing_separator).encode("utf-8")
    return encode_stored_message(
        topic=m.topic.encode("utf-8"), body=m.body, properties=props, queue_id=m.queue_id, flag=m.flag,
        sys_flag=sys_flag, born_timestamp=m.born_timestamp, born_host=born, store_host=store,
        store_timestamp=m.store_timestamp, queue_offset=m.queue_offset, physical_offset=m.commit_log_offset,
        reconsume_times=m.reconsume_times, prepared_transaction_offset=m.prepared_transaction_offset,
        crc=m.body_crc or None)


def store_timestamp_pos(sys_flag: int) -> int:
    """Offset of STORETIMESTAMP in a record with this sysFlag."""
    return POS_BORN_HOST + (20 if sys_flag & MessageSysFlag.BORNHOST_V6 else 8)


def decode_message(buf, pos: int = 0, *, decompress: bool = True, read_body: bool = True) -> tuple[MessageExt, int]:
    """Decode the docs/protocol.md §4.5 record starting at ``pos``.

    Args:
        buf: bytes, bytearray or memoryview holding one or more records.
        pos: offset of the record's TOTALSIZE field.
        decompress: inflate the body (zlib) when sysFlag bit 0 is set (default True).
        read_body: False skips copying the body (``body`` stays ``b""``), for index scans.

    Returns:
        (message, offset just after the record). ``offset_msg_id`` is that of the store host
        and PHYSICALOFFSET; ``msg_id`` is the UNIQ_KEY when present.

    Raises:
        FrameError: bad magic code, truncated record, inconsistent lengths, bad UTF-8 or zlib data.
    """
    out: list[MessageExt] = []
    end = _decode_records(buf, pos, pos + 1, out, decompress, read_body)  # a record is ≥ 1 byte: one
    return out[0], end


def decode_messages(body, *, decompress: bool = True) -> list[MessageExt]:
    """Decode a pull/query body: back-to-back records (docs/protocol.md §4.5).

    Raises:
        FrameError: as :func:`decode_message`.
    """
    out: list[MessageExt] = []
    view = body if type(body) is bytes else memoryview(body)  # slices of bytes are the copies we keep
    _decode_records(view, 0, len(body), out, decompress, True)
    return out


def _decode_records(buf, pos: int, end: int, out: list[MessageExt], decompress: bool, read_body: bool) -> int:
    """Append the records starting before ``end`` to ``out``; returns the offset after the last.
    One loop for both callers: a pull body of 32 records costs one call, not 32. With the C
    accelerator, it decodes the plain records and this loop takes each one it leaves (IPv6 hosts,
    malformed data: the error is raised here)."""
    if _c_decode_records is None:
        return _decode_records_py(buf, pos, end, out, decompress, read_body, -1)
    while True:
        pos = _c_decode_records(buf, pos, end, out, decompress, read_body)
        if pos >= end:
            return pos
        pos = _decode_records_py(buf, pos, end, out, decompress, read_body, 1)


#: what a malformed record raises inside :func:`_decode_records_py` (ValueError/OSError: a
#: truncated IPv6 host in ``inet_ntop``), all reported as FrameError
_RECORD_ERRORS: tuple[type[Exception], ...] = (struct.error, IndexError, UnicodeDecodeError, *deflate.ERRORS,
                                               ValueError, OSError)


def _decode_records_py(buf, pos: int, end: int, out: list[MessageExt], decompress: bool, read_body: bool,
                       limit: int) -> int:
    """The pure-Python twin of the C decoder: at most ``limit`` records (-1: all)."""
    n = len(buf)
    hosts, topics, append = _HOSTS, _TOPICS, out.append
    try:
        while pos < end:
            (total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag,
             born_ts) = _HEAD.unpack_from(buf, pos)
            if magic != MESSAGE_MAGIC_CODE or total <= 0:
                raise FrameError(f"bad message magic code {magic & 0xFFFFFFFF:#x} at {pos}")
            if pos + total > n:
                raise FrameError(f"message record at {pos} declares {total} bytes but only {n - pos} remain")
            m = _new_ext(MessageExt)
            m.store_size = total
            m.body_crc = crc
            m.queue_id = queue_id
            m.flag = flag
            m.queue_offset = queue_offset
            m.commit_log_offset = phys
            m.sys_flag = sys_flag
            m.born_timestamp = born_ts
            m.transaction_id = None
            m.broker_name = ""
            if not sys_flag & _V6_BITS:  # the common IPv4/IPv4 layout in one unpack
                (born, store_ts, store, m.reconsume_times,
                 m.prepared_transaction_offset, body_len) = _V4_MID.unpack_from(buf, pos + 48)
                m.born_host = (hosts.get(born) or _v4_host(born))[0]
                m.store_host, m._oid_prefix = hosts.get(store) or _v4_host(store)
                m._oid = None  # MessageExt.offset_msg_id formats prefix + PHYSICALOFFSET when read
                m._oid_phys = phys
                p = pos + 88
            else:
                p = pos + 48
                m.born_host, p = _unpack_host(buf, p, bool(sys_flag & MessageSysFlag.BORNHOST_V6))
                store_ts = _Q.unpack_from(buf, p)[0]
                store_host_pos = p + 8
                m.store_host, p = _unpack_host(buf, store_host_pos, bool(sys_flag & MessageSysFlag.STOREHOST_V6))
                m.offset_msg_id = offset_msg_id_from_packed(bytes(buf[store_host_pos:p]), phys)
                m.reconsume_times, m.prepared_transaction_offset, body_len = _TAIL.unpack_from(buf, p)
                p += 16
            m.store_timestamp = store_ts
            if body_len < 0:
                raise FrameError(f"negative body length at {pos}")
            if read_body:
                body = buf[p:p + body_len]
                if type(body) is not bytes:
                    body = bytes(body)
                if decompress and sys_flag & MessageSysFlag.COMPRESSED:
                    body = deflate.decompress(body)
                m.body = body
            else:
                m.body = b""
            p += body_len
            topic_len = buf[p]
            if topic_len > 127:
                raise FrameError(f"negative topic length at {pos}")
            p += 1
            raw = bytes(buf[p:p + topic_len])
            m.topic = topics.get(raw) or _topic_str(raw)
            p += topic_len
            props_len = _H.unpack_from(buf, p)[0]
            p += 2
            if props_len > 0:
                m.properties = decode_properties(str(buf[p:p + props_len], "utf-8"))
                p += props_len
            else:
                m.properties = {}
            if p - pos != total:
                raise FrameError(f"message record at {pos} declares {total} bytes but holds {p - pos}")
            append(m)
            pos = p
            limit -= 1
            if not limit:
                break
        return pos
    except _RECORD_ERRORS as exc:
        raise FrameError(f"malformed message record at {pos}: {exc}") from exc


# the C twin of this module (_cmessage_codec.c beside this file), or None
decode_properties_py = decode_properties  # the twin of _cmessage_codec.decode_properties
_cmessage_codec = _speedups.load("rocketmq_sdk.protocol._cmessage_codec")
if _cmessage_codec is not None:
    _cmessage_codec.configure_records(MessageExt, _HOSTS, _v4_host, _TOPICS, _topic_str, deflate.decompress)
    _c_decode_records = _cmessage_codec.decode_records
    _c_encode_batch = _cmessage_codec.encode_batch
    _c_encode_properties = _cmessage_codec.encode_properties
    decode_properties = _cmessage_codec.decode_properties  # noqa: F811 - the C twin, same results
else:
    _c_decode_records = _c_encode_batch = _c_encode_properties = None


def encode_batch(messages: Sequence[Message], *, trailing_separator: bool = False) -> bytes:
    """Encode messages as a batch body (docs/protocol.md §4.6): per message TOTALSIZE, MAGIC 0, BODYCRC 0, FLAG,
    body and its own properties string (``trailing_separator`` as in :func:`encode_properties`;
    the C++ client writes it, Java does not). The caller checks the batch rules (same topic, no
    delay, no retry topic) and gives each message its UNIQ_KEY beforehand.

    Raises:
        struct.error: a flag beyond a Java int, properties over 32767 bytes.
        UnicodeEncodeError: a property that is not valid Unicode (lone surrogates).
    """
    if _c_encode_batch is not None:
        body = _c_encode_batch(messages, trailing_separator)
        if body is not None:
            return body
    parts: list[bytes] = []
    append, head, short = parts.append, _BATCH_HEAD.pack, _H.pack
    for msg in messages:
        props = encode_properties(msg.properties, trailing_separator=trailing_separator).encode("utf-8")
        body = msg.body
        append(head(20 + len(body) + 2 + len(props), 0, 0, msg.flag, len(body)))
        append(body)
        append(short(len(props)))
        append(props)
    return b"".join(parts)


class BatchEntry(NamedTuple):
    """One message of a batch body: user flag, body bytes, properties string (docs/protocol.md §4.1, raw)."""

    flag: int
    body: bytes
    properties: str


def decode_batch(body) -> list[BatchEntry]:
    """Split a batch body into :class:`BatchEntry` (flag, body, properties string) triples.

    Raises:
        FrameError: the body is truncated or a length is inconsistent.
    """
    out = []
    pos, end = 0, len(body)
    try:
        while pos < end:
            total, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(body, pos)
            p = pos + 20
            b = bytes(body[p:p + body_len])
            p += body_len
            props_len = _H.unpack_from(body, p)[0]
            p += 2
            props = bytes(body[p:p + props_len]).decode("utf-8")
            p += props_len
            if p - pos != total or p > end or body_len < 0 or props_len < 0:
                raise FrameError(f"batch entry at {pos} declares {total} bytes but holds {p - pos}")
            out.append(BatchEntry(flag, b, props))
            pos = p
    except (struct.error, UnicodeDecodeError) as exc:
        raise FrameError(f"malformed batch body at {pos}: {exc}") from exc
    return out


def decode_batch_messages(body, topic: str) -> list[Message]:
    """Decode a batch body into :class:`Message` objects of ``topic`` (properties parsed).

    Raises:
        FrameError: the body is malformed.
    """
    out = []
    for entry in decode_batch(body):
        m = Message(topic, entry.body, flag=entry.flag)
        m.properties = decode_properties(entry.properties)
        out.append(m)
    return out


def tags_of(properties: dict[str, str]) -> str | None:
    return properties.get(MC.TAGS)
