"""Pull bodies straight into Arrow columns: the ``rocketmq`` source's rows without per-row objects.

A PULL_MESSAGE body is back-to-back stored records (docs/protocol.md §4.5). :class:`RecordColumns`
appends the records of one or more bodies to growing Arrow buffers (offsets, data, validity and
fixed-width values, little-endian, one ``bytearray`` each) and turns them into one
``pyarrow.RecordBatch`` of :data:`.reader.SOURCE_SCHEMA`'s columns, without a Python object per
row or per value.

The C twin (``_carrow_records.c`` beside this file, ``decode_into``) decodes the common records
(IPv4 hosts, uncompressed bodies, ASCII topic and properties, no repeated property name) and
hands back the offset of any other record; :func:`_append_message` then adds that one from the
SDK's decoder (``message_codec.decode_message``), which also raises ``FrameError`` for malformed
data. Without the C twin (``ROCKETMQ_PURE_PYTHON=1`` or no compiler) every record goes that way:
the pure-Python twin is the reference (tests/spark/test_spark_arrow_records.py compares them).

Column values are the reader's (:mod:`.reader`): ``tags`` / ``keys`` the TAGS / KEYS properties
(null when absent), ``properties`` the user properties (RocketMQ's reserved names left out),
``msg_id`` the UNIQ_KEY property or else the offset message id, timestamps in µs.
"""

from __future__ import annotations

import struct
from typing import Any

from rocketmq_sdk import _speedups
from rocketmq_sdk.exceptions import FrameError
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.message import MessageExt
from rocketmq_sdk.protocol.message_codec import decode_message

# buffer indexes of RecordColumns.bufs (the C twin fills the same list, in this order)
(BODY_OFF, BODY_DATA, TOPIC_OFF, TOPIC_DATA, TAGS_OFF, TAGS_DATA, TAGS_VALID, KEYS_OFF, KEYS_DATA,
 KEYS_VALID, MAP_OFF, MAPK_OFF, MAPK_DATA, MAPV_OFF, MAPV_DATA, QUEUE_ID, QUEUE_OFFSET, MSGID_OFF,
 MSGID_DATA, BORN_US, STORE_US, RECONSUME) = range(22)
BUFFER_COUNT = 22
_OFFSET_BUFFERS = (BODY_OFF, TOPIC_OFF, TAGS_OFF, KEYS_OFF, MAP_OFF, MAPK_OFF, MAPV_OFF, MSGID_OFF)
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_ZERO32 = _I32.pack(0)
_RESERVED = MC.RESERVED
_UNIQ = MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX

MAX_TIMESTAMP_MS = ((1 << 63) - 1) // 1000
"""Timestamps (ms) beyond this do not fit Arrow's µs timestamps: a malformed record."""

MAX_BATCH_DATA_BYTES = 1 << 30
"""A batch is cut before any of its variable-width buffers reaches 1 GiB (Arrow's ``string`` and
``binary`` columns address their data with 32-bit offsets)."""

_carrow_records = _speedups.load("rocketmq_sdk.integrations.spark._carrow_records")
if _carrow_records is not None:
    _carrow_records.configure(sorted(n.encode() for n in _RESERVED))
    _c_decode_into = _carrow_records.decode_into
else:
    _c_decode_into = None


def _add_text(bufs: list[bytearray], off: int, data: int, value: bytes) -> None:
    buf = bufs[data]
    buf += value
    bufs[off] += _I32.pack(len(buf))


def _add_optional(bufs: list[bytearray], off: int, data: int, valid: int, value: str | None) -> None:
    _add_text(bufs, off, data, value.encode() if value else b"")
    bufs[valid].append(1 if value else 0)


def _append_message(bufs: list[bytearray], m: MessageExt, pos: int) -> None:
    """Append one decoded record (at ``pos`` of its body) as a row: the pure-Python twin of one
    C ``decode_into`` row.

    Raises:
        FrameError: a timestamp beyond Arrow's µs range (nothing appended).
    """
    for name, ms in (("born", m.born_timestamp), ("store", m.store_timestamp)):
        if not -MAX_TIMESTAMP_MS <= ms <= MAX_TIMESTAMP_MS:
            raise FrameError(f"malformed message record at {pos}: {name} timestamp {ms} ms is out of range")
    props = m.properties
    _add_text(bufs, BODY_OFF, BODY_DATA, m.body)
    _add_text(bufs, TOPIC_OFF, TOPIC_DATA, m.topic.encode())
    _add_optional(bufs, TAGS_OFF, TAGS_DATA, TAGS_VALID, props.get(MC.TAGS))
    _add_optional(bufs, KEYS_OFF, KEYS_DATA, KEYS_VALID, props.get(MC.KEYS))
    entries = 0
    for k, v in props.items():
        if k not in _RESERVED:
            _add_text(bufs, MAPK_OFF, MAPK_DATA, k.encode())
            _add_text(bufs, MAPV_OFF, MAPV_DATA, v.encode())
            entries += 1
    bufs[MAP_OFF] += _I32.pack(_I32.unpack_from(bufs[MAP_OFF], len(bufs[MAP_OFF]) - 4)[0] + entries)
    bufs[QUEUE_ID] += _I32.pack(m.queue_id)
    bufs[QUEUE_OFFSET] += _I64.pack(m.queue_offset)
    _add_text(bufs, MSGID_OFF, MSGID_DATA, (props.get(_UNIQ) or m.offset_msg_id).encode())
    bufs[BORN_US] += _I64.pack(m.born_timestamp * 1000)
    bufs[STORE_US] += _I64.pack(m.store_timestamp * 1000)
    bufs[RECONSUME] += _I32.pack(m.reconsume_times)


def decode_into_py(bufs: list[bytearray], body: Any, pos: int, end: int, lo: int, hi: int) -> int:
    """Append the records of ``body[pos:end]`` whose queue offset is in ``[lo, hi)`` to ``bufs``;
    returns ``end``. The pure-Python twin of the C ``decode_into``.

    Raises:
        FrameError: a malformed record (the rows before it stay appended).
    """
    while pos < end:
        m, after = decode_message(body, pos)
        if lo <= m.queue_offset < hi:
            _append_message(bufs, m, pos)
        pos = after
    return pos


class RecordColumns:
    """Arrow buffers of the source's columns, filled from pull bodies (see the module docstring)."""

    __slots__ = ("bufs",)

    def __init__(self) -> None:
        self.bufs: list[bytearray] = [bytearray() for _ in range(BUFFER_COUNT)]
        for i in _OFFSET_BUFFERS:
            self.bufs[i] += _ZERO32

    def __len__(self) -> int:
        return len(self.bufs[RECONSUME]) // 4

    @property
    def data_bytes(self) -> int:
        """The size of the largest variable-width data buffer, bytes."""
        b = self.bufs
        return max(len(b[BODY_DATA]), len(b[MAPK_DATA]), len(b[MAPV_DATA]), len(b[KEYS_DATA]))

    def add_records(self, body: Any, lo: int = 0, hi: int = (1 << 63) - 1) -> int:
        """Append the records of a pull ``body`` (bytes-like) whose queue offset is in ``[lo, hi)``.

        Returns:
            The number of rows appended.

        Raises:
            FrameError: a malformed record (the rows of the records before it stay appended).
        """
        before, bufs, end = len(self), self.bufs, len(body)
        pos = 0
        if _c_decode_into is None:
            decode_into_py(bufs, body, pos, end, lo, hi)
        else:
            while pos < end:
                pos = _c_decode_into(bufs, body, pos, end, lo, hi)
                if pos < end:  # a record the C twin leaves to the SDK's decoder
                    pos = decode_into_py(bufs, body, pos, pos + 1, lo, hi)
        return len(self) - before

    def to_batch(self, pa_schema: Any, broker_name: str) -> Any:
        """The rows as one ``pyarrow.RecordBatch`` of ``pa_schema`` (the source's 12 columns, in
        :data:`.reader.SOURCE_SCHEMA` order); ``broker_name`` fills that column."""
        import pyarrow as pa

        b, n = self.bufs, len(self)
        fields = list(pa_schema)

        def buf(i: int) -> Any:
            return pa.py_buffer(b[i])

        def validity(i: int) -> Any:
            mask = pa.Array.from_buffers(pa.uint8(), n, [None, buf(i)]).cast(pa.bool_())
            return mask.buffers()[1]

        def text(t: Any, off: int, data: int, valid: int | None = None, count: int = n) -> Any:
            return pa.Array.from_buffers(t, count, [validity(valid) if valid is not None else None, buf(off),
                                                    buf(data)])

        def fixed(t: Any, i: int) -> Any:
            return pa.Array.from_buffers(t, n, [None, buf(i)])

        entries = len(b[MAPK_OFF]) // 4 - 1
        map_type = fields[4].type
        properties = pa.MapArray.from_arrays(
            pa.Array.from_buffers(pa.int32(), n + 1, [None, buf(MAP_OFF)]),
            text(map_type.key_type, MAPK_OFF, MAPK_DATA, count=entries),
            text(map_type.item_type, MAPV_OFF, MAPV_DATA, count=entries), type=map_type)
        arrays = [
            text(fields[0].type, BODY_OFF, BODY_DATA),
            text(fields[1].type, TOPIC_OFF, TOPIC_DATA),
            text(fields[2].type, TAGS_OFF, TAGS_DATA, TAGS_VALID),
            text(fields[3].type, KEYS_OFF, KEYS_DATA, KEYS_VALID),
            properties,
            pa.array([broker_name] * n, fields[5].type),
            fixed(fields[6].type, QUEUE_ID),
            fixed(fields[7].type, QUEUE_OFFSET),
            text(fields[8].type, MSGID_OFF, MSGID_DATA),
            fixed(fields[9].type, BORN_US),
            fixed(fields[10].type, STORE_US),
            fixed(fields[11].type, RECONSUME),
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=pa_schema)
