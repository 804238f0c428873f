"""CommitLog records of a SEND_BATCH_MESSAGE body, built in one step (the batch put fast path),
and the record of one plain single send (:func:`encode_single`, ``MessageStore.put_plain``).

:func:`encode_batch` splits the batch body (docs/protocol.md §4.6), merges each message's properties with the
batch's (``dict.setdefault`` order: the message's own items first, then the batch's missing
ones), validates as :meth:`CommitLog._check` does and builds the docs/protocol.md §4.5 records with the queue
offset, physical offset and store timestamp left 0; :func:`finish_batch` writes those three
in place under the append lock and returns the consume-queue entries and the offset message ids.

Both have a C implementation (``_cbatch_records.c``, beside this file) and the pure-Python twins
below, made from the same codec functions as the record-by-record path (``decode_batch``, ``decode_properties``,
``encode_properties``, ``encode_stored_message``). :func:`encode_batch` returns None for anything
unusual (malformed body, invalid UTF-8, empty batch, a record the store would refuse, more than
:data:`MAX_ITEMS` property items in one message): the caller then takes the InnerMessage path,
which produces the exact refusal.
"""

from __future__ import annotations

import functools
import struct

from rocketmq_sdk._speedups import load
from rocketmq_sdk.exceptions import FrameError
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.message_codec import (
    MAX_PROPERTIES_LENGTH,
    PROPERTY_SEPARATOR,
    decode_batch,
    decode_properties,
    encode_properties,
    encode_stored_message,
)
from rocketmq_sdk.protocol.msgid import offset_msg_id_from_packed

from .inner_message import tags_string_to_tags_code

__all__ = ["MAX_ITEMS", "Extra", "batch_extra", "encode_batch", "encode_batch_py", "encode_single",
           "encode_single_py", "finish_batch", "finish_batch_py", "merge_properties", "place_single",
           "place_single_py"]

MAX_ITEMS = 64
"""More property items (``\\x02``-separated pieces) in one message: the fast path declines."""

_END_FILE_MIN_BLANK_LENGTH = 8
_CQ_ENTRY = struct.Struct(">qiq")
_Q = struct.Struct(">q")

Extra = tuple[tuple[bytes, bytes, str, str], ...]
"""The batch's properties to add: ``(key UTF-8, value UTF-8, key, value)`` per item."""

Encoded = tuple[bytearray, list[int], list[int], list[dict[str, str]]]
"""(records, record sizes, tags codes, merged properties) of one batch."""


@functools.lru_cache(maxsize=256)
def batch_extra(properties: str, cluster: str) -> Extra:
    """The items added to every message of a batch: the request header's properties with
    ``CLUSTER`` set to ``cluster`` (``SendProcessor._send_batch``'s ``batch_props``)."""
    props = decode_properties(properties)
    props[MC.CLUSTER] = cluster
    return tuple((k.encode("utf-8"), v.encode("utf-8"), k, v) for k, v in props.items())


def merge_properties(text: str, extra: Extra) -> dict[str, str]:
    """The properties a batch message is stored with: its own (:func:`decode_properties` of
    ``text``), then the batch's items it lacks (``dict.setdefault`` order)."""
    props = decode_properties(text)
    for _kb, _vb, k, v in extra:
        props.setdefault(k, v)
    return props


def encode_batch_py(body, topic: bytes, extra: Extra, queue_id: int, sys_flag: int, born_timestamp: int,
                    born_host: bytes, store_host: bytes, reconsume_times: int, max_message_size: int,
                    file_size: int) -> Encoded | None:
    """Pure-Python twin of ``_cbatch_records.encode_batch`` (see the module docstring); sizes in bytes."""
    if not 1 <= len(topic) <= 127 or len(born_host) not in (8, 20) or len(store_host) not in (8, 20):
        return None
    try:
        entries = decode_batch(body)
    except FrameError:
        return None
    if not entries:
        return None
    records, sizes, tags, dicts = [], [], [], []
    total = 0
    for flag, msg_body, text in entries:
        if text.count(PROPERTY_SEPARATOR) >= MAX_ITEMS:
            return None
        props = merge_properties(text, extra)
        props_b = encode_properties(props).encode("utf-8")
        body_len = len(msg_body)
        size = 75 + len(born_host) + len(store_host) + body_len + len(topic) + len(props_b)
        total += size
        if (len(props_b) > MAX_PROPERTIES_LENGTH or body_len > max_message_size
                or size > max_message_size + 32 * 1024 or size + _END_FILE_MIN_BLANK_LENGTH > file_size
                or total + _END_FILE_MIN_BLANK_LENGTH > file_size):
            return None
        records.append(encode_stored_message(
            topic=topic, body=msg_body, properties=props_b, queue_id=queue_id, flag=flag, sys_flag=sys_flag,
            born_timestamp=born_timestamp, born_host=born_host, store_host=store_host,
            reconsume_times=reconsume_times))
        sizes.append(size)
        tags.append(tags_string_to_tags_code(props.get(MC.TAGS)))
        dicts.append(props)
    return bytearray(b"".join(records)), sizes, tags, dicts


_INT32 = range(-2**31, 2**31)
_INT64 = range(-2**63, 2**63)


def encode_single_py(topic: str, body, properties: dict[str, str], queue_id: int, flag: int, sys_flag: int,
                     born_timestamp: int, born_host: bytes, store_host: bytes, reconsume_times: int,
                     max_message_size: int, file_size: int) -> tuple[bytearray, int, int] | None:
    """Pure-Python twin of ``_cbatch_records.encode_single``: the record of one plain single send
    (``MessageStore.put_plain``) with ``properties`` stored as :func:`encode_properties` writes
    them, queue offset, physical offset and store timestamp left 0 (:func:`finish_batch` fills
    them in); ``(record, size in bytes, tags code)``, or None for anything unusual (a key or value
    that is not a str, text that is not UTF-8 encodable, an int out of its field's range, a
    record ``CommitLog._check`` refuses)."""
    if not isinstance(topic, str) or not isinstance(properties, dict):
        raise TypeError("encode_single(topic: str, body, properties: dict, ...)")
    ints = (queue_id, flag, sys_flag, born_timestamp, reconsume_times, max_message_size, file_size)
    if (not all(isinstance(i, int) for i in ints) or type(topic) is not str
            or queue_id not in _INT32 or flag not in _INT32 or sys_flag not in _INT32
            or born_timestamp not in _INT64 or reconsume_times not in _INT32
            or not 0 <= max_message_size < 2**31 or not 0 <= file_size < 2**63):
        return None
    try:
        topic_b = topic.encode("utf-8")
    except UnicodeEncodeError:
        return None
    if not 1 <= len(topic_b) <= 127:
        return None
    body_len = len(memoryview(body))  # TypeError for what is not a buffer, as the C twin
    born_len, store_len = len(memoryview(born_host)), len(memoryview(store_host))
    if born_len not in (8, 20) or store_len not in (8, 20):
        return None
    if not all(type(k) is str and (v is None or type(v) is str) for k, v in properties.items()):
        return None
    try:
        props_b = encode_properties(properties).encode("utf-8")
    except UnicodeEncodeError:
        return None
    size = 75 + born_len + store_len + body_len + len(topic_b) + len(props_b)
    if (len(props_b) > MAX_PROPERTIES_LENGTH or body_len > max_message_size
            or size > max_message_size + 32 * 1024 or size + _END_FILE_MIN_BLANK_LENGTH > file_size):
        return None
    record = encode_stored_message(
        topic=topic_b, body=bytes(body), properties=props_b, queue_id=queue_id, flag=flag, sys_flag=sys_flag,
        born_timestamp=born_timestamp, born_host=bytes(born_host), store_host=bytes(store_host),
        reconsume_times=reconsume_times)
    return record, size, tags_string_to_tags_code(properties.get(MC.TAGS))


def place_single_py(record, tags_code: int, store_host: bytes, born_host_len: int, physical_offset: int,
                    queue_offset: int, now: int, commit_log_map, commit_log_pos: int, consume_queue_map,
                    consume_queue_pos: int) -> str:
    """Pure-Python twin of ``_cbatch_records.place_single``: ``record`` (from :func:`encode_single`)
    finished as :func:`finish_batch` does, written into ``commit_log_map`` at ``commit_log_pos``
    and its consume-queue entry into ``consume_queue_map`` at ``consume_queue_pos`` (bytes);
    returns the offset message id. ValueError, nothing written, for a record whose size field is
    not its length, a wrong host length or a write beyond either mapping."""
    record = bytearray(record)
    n = len(record)
    if born_host_len not in (8, 20) or len(store_host) > 64:
        raise ValueError("bad host lengths")
    if n < 64 + born_host_len or n > 2**31 - 1 or struct.unpack_from(">i", record)[0] != n:
        raise ValueError("record length is not its size field")
    if not (0 <= commit_log_pos <= len(commit_log_map) - n and 0 <= consume_queue_pos <= len(consume_queue_map) - 20):
        raise ValueError("record or entry beyond its file")
    cq, msg_id, _ = finish_batch_py(record, [tags_code], store_host, born_host_len, physical_offset, queue_offset, now)
    commit_log_map[commit_log_pos:commit_log_pos + n] = record
    consume_queue_map[consume_queue_pos:consume_queue_pos + 20] = cq
    return msg_id


def finish_batch_py(records: bytearray, tags: list[int], store_host: bytes, born_host_len: int,
                    physical_offset: int, queue_offset: int, now: int) -> tuple[bytes, str, list[int]]:
    """Pure-Python twin of ``_cbatch_records.finish_batch``: writes each record's queue offset, physical
    offset and store timestamp (ms) into ``records``; returns (consume-queue entries, offset
    message ids joined by ``,``, physical offsets)."""
    pos = 0
    cq, ids, phys = [], [], []
    for i, tag in enumerate(tags):
        size = struct.unpack_from(">i", records, pos)[0]
        phy = physical_offset + pos
        struct.pack_into(">qq", records, pos + 20, queue_offset + i, phy)
        _Q.pack_into(records, pos + 48 + born_host_len, now)
        cq.append(_CQ_ENTRY.pack(phy, size, tag))
        ids.append(offset_msg_id_from_packed(store_host, phy))
        phys.append(phy)
        pos += size
    if pos != len(records):
        raise ValueError("records longer than their sizes")
    return b"".join(cq), ",".join(ids), phys


_cbatch_records = load("rocketmq_broker.store._cbatch_records")
encode_batch = _cbatch_records.encode_batch if _cbatch_records is not None else encode_batch_py
finish_batch = _cbatch_records.finish_batch if _cbatch_records is not None else finish_batch_py
encode_single = _cbatch_records.encode_single if _cbatch_records is not None else encode_single_py
place_single = _cbatch_records.place_single if _cbatch_records is not None else place_single_py
