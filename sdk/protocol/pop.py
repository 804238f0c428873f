"""RocketMQ 5.x POP consumption on the wire: headers, the receipt handle (``extraInfo`` /
``POP_CK``), the offset-info strings of a POP answer and the BATCH_ACK_MESSAGE body.

One codec for the SDK's :class:`~rocketmq_sdk.consumer.simple_consumer.SimpleConsumer` and the
reference broker's POP service (``rocketmq_broker.broker.pop``). Grammar from Apache RocketMQ
5.3.3's ``ExtraInfoUtil`` and real 5.3.3 traffic (``../shared/docs/rocketmq5-remoting.md`` §5):

* receipt handle: ``<ckOffset> <popTime> <invisibleTime> <reviveQid> <retryFlag> <brokerName>
  <queueId> <queueOffset>`` (single spaces);
* ``startOffsetInfo``: ``<retryFlag> <queueId> <startOffset>`` entries joined by ``;``;
* ``msgOffsetInfo``: ``<retryFlag> <queueId> <offset>,<offset>,...`` entries joined by ``;``;
* ``orderCountInfo``: ``<retryFlag> <queueId> <count>`` per queue and
  ``<retryFlag> qo<queueId>%<offset> <count>`` per message, joined by ``;``.
"""

from __future__ import annotations

import base64
import dataclasses
from dataclasses import dataclass

from . import fastjson
from .codes import RETRY_GROUP_TOPIC_PREFIX, MessageConst
from .headers import Header

__all__ = [
    "FIRST_POP_TIME", "MAX_POP_MESSAGES", "ORDER_REVIVE_QID", "POP_CK", "AckMessageRequestHeader", "BatchAck",
    "ChangeInvisibleTimeRequestHeader", "ChangeInvisibleTimeResponseHeader", "NotificationRequestHeader",
    "NotificationResponseHeader", "PollingInfoRequestHeader", "PollingInfoResponseHeader", "PopMessageRequestHeader",
    "PopMessageResponseHeader", "ReceiptHandle", "RetryFlag", "attach_handles", "decode_batch_ack_body",
    "encode_batch_ack_body", "format_offset_infos", "format_order_count_info", "parse_offset_infos",
    "parse_order_count_info", "pop_retry_topic",
]

#: ``reviveQid`` of an order (``order=true``) pop: no checkpoint is written for it.
ORDER_REVIVE_QID = 999
#: Most messages one POP_MESSAGE may ask for (more: INVALID_PARAMETER).
MAX_POP_MESSAGES = 32


class RetryFlag:
    """Second field of a handle: which topic the message was popped from."""

    NORMAL = 0
    #: ``%RETRY%<group>_<topic>`` (5.x default)
    RETRY_V1 = 1
    #: ``%RETRY%<group>+<topic>`` (``enableRetryTopicV2``)
    RETRY_V2 = 2


def pop_retry_topic(group: str, topic: str, flag: int = RetryFlag.RETRY_V1) -> str:
    """Name of the POP retry topic of ``group`` for ``topic`` (5.x ``KeyBuilder.buildPopRetryTopic``):
    ``%RETRY%<group>_<topic>`` (V1) or ``%RETRY%<group>+<topic>`` (V2); ``topic`` for flag 0."""
    if flag == RetryFlag.NORMAL:
        return topic
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}{'+' if flag == RetryFlag.RETRY_V2 else '_'}{topic}"


# --- headers ---------------------------------------------------------------------------------
@dataclass(slots=True)
class PopMessageRequestHeader(Header):
    """POP_MESSAGE (200050). ``queue_id`` -1 pops all readable queues; times in ms."""

    consumer_group: str | None = None
    topic: str | None = None
    queue_id: int | None = None
    max_msg_nums: int | None = None
    invisible_time: int | None = None
    poll_time: int | None = None
    born_time: int | None = None
    init_mode: int | None = None
    exp_type: str | None = None
    exp: str | None = None
    order: bool | None = None
    attempt_id: str | None = None
    bname: str | None = None


@dataclass(slots=True)
class PopMessageResponseHeader(Header):
    pop_time: int | None = None
    invisible_time: int | None = None
    revive_qid: int | None = None
    rest_num: int | None = None
    start_offset_info: str | None = None
    msg_offset_info: str | None = None
    order_count_info: str | None = None


@dataclass(slots=True)
class AckMessageRequestHeader(Header):
    """ACK_MESSAGE (200051): ``topic`` is the POP retry topic when the handle's retry flag is 1/2."""

    consumer_group: str | None = None
    topic: str | None = None
    queue_id: int | None = None
    extra_info: str | None = None
    offset: int | None = None
    bname: str | None = None


@dataclass(slots=True)
class ChangeInvisibleTimeRequestHeader(Header):
    """CHANGE_MESSAGE_INVISIBLETIME (200053): as ACK plus the new ``invisible_time`` (ms from now)."""

    consumer_group: str | None = None
    topic: str | None = None
    queue_id: int | None = None
    extra_info: str | None = None
    offset: int | None = None
    invisible_time: int | None = None
    bname: str | None = None


@dataclass(slots=True)
class ChangeInvisibleTimeResponseHeader(Header):
    pop_time: int | None = None
    invisible_time: int | None = None
    revive_qid: int | None = None


@dataclass(slots=True)
class NotificationRequestHeader(Header):
    """NOTIFICATION (200054): "is there anything to pop?", held up to ``poll_time`` ms."""

    consumer_group: str | None = None
    topic: str | None = None
    queue_id: int | None = None
    poll_time: int | None = None
    born_time: int | None = None
    order: bool | None = None
    attempt_id: str | None = None


@dataclass(slots=True)
class NotificationResponseHeader(Header):
    has_msg: bool | None = None
    polling_full: bool | None = None


@dataclass(slots=True)
class PollingInfoRequestHeader(Header):
    consumer_group: str | None = None
    topic: str | None = None
    queue_id: int | None = None


@dataclass(slots=True)
class PollingInfoResponseHeader(Header):
    polling_num: int | None = None


# --- receipt handle --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """The 5.x receipt handle of a popped message (``extraInfo`` of ACK / CHANGE_INVISIBLETIME,
    the ``POP_CK`` property). ``pop_time`` epoch ms, ``invisible_time`` ms."""

    ck_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry_flag: int
    broker_name: str
    queue_id: int
    queue_offset: int

    @classmethod
    def parse(cls, text: str) -> ReceiptHandle:
        """Read a handle.

        Raises:
            ValueError: not eight space-separated fields with numbers where numbers belong.
        """
        parts = str(text).split(" ")
        if len(parts) != 8:
            raise ValueError(f"receipt handle must have 8 space-separated fields, got {str(text)[:100]!r}")
        try:
            ck, pt, it, rq, rf = (int(p) for p in parts[:5])
            qid, qo = int(parts[6]), int(parts[7])
        except ValueError:
            raise ValueError(f"receipt handle has a non-numeric field: {str(text)[:100]!r}") from None
        if not parts[5]:
            raise ValueError(f"receipt handle has no broker name: {str(text)[:100]!r}")
        return cls(ck, pt, it, rq, rf, parts[5], qid, qo)

    def __str__(self) -> str:
        return (f"{self.ck_offset} {self.pop_time} {self.invisible_time} {self.revive_qid} {self.retry_flag} "
                f"{self.broker_name} {self.queue_id} {self.queue_offset}")

    @property
    def is_order(self) -> bool:
        return self.revive_qid == ORDER_REVIVE_QID

    def topic_for_ack(self, group: str, topic: str) -> str:
        """The ``topic`` an ACK of this handle names: ``topic`` or its POP retry topic."""
        return pop_retry_topic(group, topic, self.retry_flag)

    def replace(self, **changes) -> ReceiptHandle:
        return dataclasses.replace(self, **changes)


# --- offset infos ----------------------------------------------------------------------------
def format_offset_infos(entries: list[tuple[int, int, object]]) -> str:
    """``startOffsetInfo`` (value an int) or ``msgOffsetInfo`` (value a list of ints) from
    ``(retry_flag, queue_id, value)`` entries."""
    out = []
    for flag, qid, value in entries:
        text = ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)
        out.append(f"{flag} {qid} {text}")
    return ";".join(out)


def parse_offset_infos(text: str | None) -> dict[tuple[int, int], list[int]]:
    """``{(retry_flag, queue_id): [offsets]}`` of a ``startOffsetInfo`` / ``msgOffsetInfo``.

    Raises:
        ValueError: an entry is not ``<flag> <queueId> <n>[,<n>...]``.
    """
    out: dict[tuple[int, int], list[int]] = {}
    if not text:
        return out
    for entry in text.split(";"):
        parts = entry.split(" ")
        if len(parts) != 3:
            raise ValueError(f"bad offset info entry {entry[:100]!r}")
        out[(int(parts[0]), int(parts[1]))] = [int(v) for v in parts[2].split(",")]
    return out


def format_order_count_info(flag: int, queue_id: int, counts: dict[int, int], queue_count: int) -> str:
    """``orderCountInfo`` of one queue: one entry per offset delivered before, then the queue's."""
    entries = [f"{flag} qo{queue_id}%{off} {n}" for off, n in sorted(counts.items()) if n > 0]
    entries.append(f"{flag} {queue_id} {queue_count}")
    return ";".join(entries)


def parse_order_count_info(text: str | None) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int, int], int]]:
    """``({(flag, queue): count}, {(flag, queue, offset): count})`` of an ``orderCountInfo``."""
    per_queue: dict[tuple[int, int], int] = {}
    per_msg: dict[tuple[int, int, int], int] = {}
    if not text:
        return per_queue, per_msg
    for entry in text.split(";"):
        parts = entry.split(" ")
        if len(parts) != 3:
            raise ValueError(f"bad order count entry {entry[:100]!r}")
        flag, key, count = int(parts[0]), parts[1], int(parts[2])
        if key.startswith("qo"):
            qid, _, off = key[2:].partition("%")
            per_msg[(flag, int(qid), int(off))] = count
        else:
            per_queue[(flag, int(key))] = count
    return per_queue, per_msg


# --- batch ack -------------------------------------------------------------------------------
@dataclass(slots=True)
class BatchAck:
    """One entry of a BATCH_ACK_MESSAGE body: the acked offsets of one checkpoint."""

    consumer_group: str
    topic: str
    retry_flag: int
    queue_id: int
    start_offset: int
    revive_qid: int
    pop_time: int
    invisible_time: int
    offsets: list[int]

    def to_json(self) -> dict:
        bits = 0
        for off in self.offsets:
            d = off - self.start_offset
            if d < 0:
                raise ValueError(f"offset {off} is before the checkpoint start {self.start_offset}")
            bits |= 1 << d
        raw = bits.to_bytes((bits.bit_length() + 7) // 8, "little") if bits else b""
        return {"b": base64.b64encode(raw).decode("ascii"), "c": self.consumer_group, "it": self.invisible_time,
                "pt": self.pop_time, "q": self.queue_id, "r": str(self.retry_flag), "rq": self.revive_qid,
                "so": self.start_offset, "t": self.topic}

    @classmethod
    def from_json(cls, d: dict) -> BatchAck:
        raw = base64.b64decode(str(d.get("b") or ""), validate=True)
        bits = int.from_bytes(raw, "little")
        so = int(d["so"])
        offsets = [so + i for i in range(bits.bit_length()) if bits >> i & 1]
        return cls(str(d["c"]), str(d["t"]), int(d.get("r") or 0), int(d["q"]), so, int(d.get("rq") or 0),
                   int(d["pt"]), int(d.get("it") or 0), offsets)


def encode_batch_ack_body(acks: list[BatchAck], broker_name: str) -> bytes:
    return fastjson.dumps({"acks": [a.to_json() for a in acks], "brokerName": broker_name}).encode("utf-8")


def decode_batch_ack_body(body: bytes) -> list[BatchAck]:
    """Entries of a BATCH_ACK_MESSAGE body.

    Raises:
        ValueError: not the JSON of 5.x ``BatchAckMessageRequestBody``.
    """
    d = fastjson.loads(body.decode("utf-8"))
    if not isinstance(d, dict) or not isinstance(d.get("acks"), list):
        raise ValueError("batch ack body must be a JSON object with an 'acks' list")
    try:
        return [BatchAck.from_json(a) for a in d["acks"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"bad batch ack entry: {exc}") from None


# --- a POP answer on the client side ---------------------------------------------------------
#: message properties of 5.x ``MessageConst``
POP_CK = MessageConst.POP_CK
FIRST_POP_TIME = MessageConst.FIRST_POP_TIME


def attach_handles(messages: list, ext: dict[str, str], broker_name: str) -> list:
    """Give every message of a POP_MESSAGE answer its receipt handle, as the 5.x Java client does
    (``MQClientAPIImpl.processPopResponse``): a message the broker already marked (``POP_CK``,
    messages from the retry topic) keeps it; the others get ``<startOffset of its queue>
    <popTime> <invisibleTime> <reviveQid> 0 <brokerName> <queueId> <queueOffset>``. Also sets
    ``1ST_POP_TIME`` when absent and, for order pops, ``reconsume_times`` from ``orderCountInfo``.
    Returns ``messages`` (changed in place).

    Raises:
        ValueError: the answer's header does not follow 5.x's grammar.
    """
    starts = parse_offset_infos(ext.get("startOffsetInfo"))
    pop_time, invisible, revive = int(ext["popTime"]), int(ext["invisibleTime"]), int(ext["reviveQid"])
    _per_queue, per_msg = parse_order_count_info(ext.get("orderCountInfo"))
    for m in messages:
        props = m.properties
        if POP_CK not in props:
            start = starts.get((RetryFlag.NORMAL, m.queue_id))
            if not start:
                raise ValueError(f"POP answer has no startOffsetInfo for queue {m.queue_id}")
            props[POP_CK] = str(ReceiptHandle(start[0], pop_time, invisible, revive, RetryFlag.NORMAL, broker_name,
                                              m.queue_id, m.queue_offset))
        props.setdefault(FIRST_POP_TIME, str(pop_time))
        count = per_msg.get((RetryFlag.NORMAL, m.queue_id, m.queue_offset))
        if count is not None:
            m.reconsume_times = count
    return messages
