"""Apache RocketMQ's message trace record format (Java ``TraceDataEncoder``, 4.9.8).

A trace message body is plain UTF-8 text: records one after another, fields separated by
U+0001, every record ended by U+0002. Record layouts (field 0 is the type):

* ``Pub`` (14 fields): timeStamp, regionId, groupName, topic, msgId, tags, keys, storeHost,
  bodyLength, costTime, msgType, offsetMsgId, success.
* ``SubBefore`` (8): timeStamp, regionId, groupName, requestId, msgId, retryTimes, keys.
* ``SubAfter`` (9): requestId, msgId, costTime, success, keys, contextCode, timeStamp, groupName.
* ``EndTransaction`` (13): timeStamp, regionId, groupName, topic, msgId, tags, keys, storeHost,
  msgType, transactionId, transactionState, fromTransactionCheck.

A missing string is written ``null`` as Java's ``String.valueOf`` (and, as Java's decoder,
decoding keeps it as the text ``"null"``). The decoder accepts the
variants Java's and the dashboard's readers accept (``Pub`` with 12, 13 or 15+ fields,
``SubAfter`` with 6, 7 or 9+) and keeps trailing empty fields.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = ["CONTENT_SPLITOR", "FIELD_SPLITOR", "TRACE_TOPIC_DEFAULT", "ConsumeReturnType", "TraceMessageType",
           "TraceRecord", "TraceType", "decode_trace_text", "encode_record", "record_keys"]

CONTENT_SPLITOR = "\u0001"
FIELD_SPLITOR = "\u0002"
TRACE_TOPIC_DEFAULT = "RMQ_SYS_TRACE_TOPIC"


class TraceType(enum.Enum):
    """Java ``TraceType`` (the record kinds a client writes)."""

    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"


class TraceMessageType(enum.IntEnum):
    """Java ``MessageType``; the ordinal is written."""

    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3


class ConsumeReturnType(enum.IntEnum):
    """Java ``ConsumeReturnType``; the ordinal is the ``SubAfter`` contextCode."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass
class TraceRecord:
    """One trace record (Java ``TraceContext`` with its single ``TraceBean``), named as the
    capture's ``decoded`` fields. Times in ms since the epoch, ``cost_time`` in ms, sizes in bytes.
    ``None`` strings are written ``null``; decoded records hold the text ``"null"`` there, as
    Java's decoder does."""

    type: TraceType
    time_stamp: int = 0
    region_id: str | None = None
    group_name: str | None = None
    topic: str | None = None
    msg_id: str | None = None
    tags: str | None = None
    keys: str | None = None
    store_host: str | None = None
    body_length: int = 0
    cost_time: int = 0
    msg_type: int = 0
    offset_msg_id: str | None = None
    success: bool = True
    request_id: str | None = None
    retry_times: int = 0
    context_code: int = 0
    transaction_id: str | None = None
    transaction_state: str | None = None
    from_transaction_check: bool = False
    client_host: str | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The fields the record's layout has, under the Java names (the capture's ``decoded``)."""
        names = _LAYOUT_NAMES[self.type]
        out: dict = {"type": self.type.value}
        for java, attr in names:
            out[java] = getattr(self, attr)
        return out


# (Java name, attribute) per layout, in field order after the type
_LAYOUT_NAMES: dict[TraceType, tuple[tuple[str, str], ...]] = {
    TraceType.Pub: (("timeStamp", "time_stamp"), ("regionId", "region_id"), ("groupName", "group_name"),
                    ("topic", "topic"), ("msgId", "msg_id"), ("tags", "tags"), ("keys", "keys"),
                    ("storeHost", "store_host"), ("bodyLength", "body_length"), ("costTime", "cost_time"),
                    ("msgType", "msg_type"), ("offsetMsgId", "offset_msg_id"), ("success", "success")),
    TraceType.SubBefore: (("timeStamp", "time_stamp"), ("regionId", "region_id"), ("groupName", "group_name"),
                          ("requestId", "request_id"), ("msgId", "msg_id"), ("retryTimes", "retry_times"),
                          ("keys", "keys")),
    TraceType.SubAfter: (("requestId", "request_id"), ("msgId", "msg_id"), ("costTime", "cost_time"),
                         ("success", "success"), ("keys", "keys"), ("contextCode", "context_code"),
                         ("timeStamp", "time_stamp"), ("groupName", "group_name")),
    TraceType.EndTransaction: (("timeStamp", "time_stamp"), ("regionId", "region_id"),
                               ("groupName", "group_name"), ("topic", "topic"), ("msgId", "msg_id"),
                               ("tags", "tags"), ("keys", "keys"), ("storeHost", "store_host"),
                               ("msgType", "msg_type"), ("transactionId", "transaction_id"),
                               ("transactionState", "transaction_state"),
                               ("fromTransactionCheck", "from_transaction_check")),
}
_INT_FIELDS = {"time_stamp", "body_length", "cost_time", "msg_type", "retry_times", "context_code"}
_BOOL_FIELDS = {"success", "from_transaction_check"}


def _text(value: object) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def encode_record(record: TraceRecord) -> str:
    """The record's text in the 4.9.8 layout of its type, terminator included.

    Raises:
        ValueError: a field holds U+0001 or U+0002 (the format cannot carry them).
    """
    parts = [record.type.value] + [_text(getattr(record, attr)) for _, attr in _LAYOUT_NAMES[record.type]]
    for p in parts:
        if CONTENT_SPLITOR in p or FIELD_SPLITOR in p:
            raise ValueError(f"a trace field cannot contain U+0001 or U+0002: {p!r}")
    return CONTENT_SPLITOR.join(parts) + FIELD_SPLITOR


def record_keys(record: TraceRecord) -> list[str]:
    """The lookup keys of a record (Java ``TraceTransferBean.transKey``): its msgId plus its
    business keys split on spaces (``null`` keys add nothing)."""
    keys = [record.msg_id] if record.msg_id else []
    if record.keys and record.keys != "null":
        keys.extend(k for k in record.keys.split(" ") if k)
    return keys


def _parse(attr: str, value: str) -> object:
    if attr in _INT_FIELDS:
        try:
            return int(value)
        except ValueError:
            return 0 if attr != "cost_time" else -1
    if attr in _BOOL_FIELDS:
        return value == "true"
    return value  # as Java's decoder: a missing string stays the text "null"


def _fill(record: TraceRecord, names: tuple[tuple[str, str], ...], values: list[str]) -> TraceRecord:
    for (_, attr), value in zip(names, values, strict=False):
        setattr(record, attr, _parse(attr, value))
    return record


def decode_trace_text(text: str) -> list[TraceRecord]:
    """The records of a trace message body (Java ``decoderFromTraceDataString``; unknown types
    are skipped, trailing empty fields kept).

    ``Pub``: 12 fields (no success), 13 (no offsetMsgId), 14, or 15+ (field 14 = clientHost).
    ``SubAfter``: 6 (no contextCode), 7, or 9+ (with timeStamp and groupName). A record shorter
    than its minimum is skipped.
    """
    out: list[TraceRecord] = []
    for chunk in text.split(FIELD_SPLITOR):
        if not chunk:
            continue
        f = chunk.split(CONTENT_SPLITOR)
        kind = f[0]
        if kind == "Pub" and len(f) >= 12:
            rec = _fill(TraceRecord(TraceType.Pub), _LAYOUT_NAMES[TraceType.Pub][:11], f[1:12])
            if len(f) == 13:  # no offsetMsgId: field 12 is success
                rec.success = f[12] == "true"
            elif len(f) >= 14:
                rec.offset_msg_id = _parse("offset_msg_id", f[12])  # type: ignore[assignment]
                rec.success = f[13] == "true"
            if len(f) >= 15:
                rec.client_host = _parse("client_host", f[14])  # type: ignore[assignment]
            out.append(rec)
        elif kind == "SubBefore" and len(f) >= 8:
            out.append(_fill(TraceRecord(TraceType.SubBefore), _LAYOUT_NAMES[TraceType.SubBefore], f[1:8]))
        elif kind == "SubAfter" and len(f) >= 6:
            rec = TraceRecord(TraceType.SubAfter, time_stamp=0, cost_time=-1)
            out.append(_fill(rec, _LAYOUT_NAMES[TraceType.SubAfter], f[1:9]))
        elif kind == "EndTransaction" and len(f) >= 13:
            out.append(_fill(TraceRecord(TraceType.EndTransaction), _LAYOUT_NAMES[TraceType.EndTransaction],
                             f[1:13]))
    return out
