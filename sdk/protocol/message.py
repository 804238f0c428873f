"""The message model shared by producers, consumers, admin and the broker.

Like the Java client, a message's tags, keys, delay level and unique id live in its
``properties`` map; the attributes below are views over it.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Self

from ..exceptions import IllegalArgumentError
from .codes import MessageConst as MC


def _as_body(value: object) -> bytes:
    """``value`` as the body bytes: bytes-like objects as they are, ``str`` encoded as UTF-8.

    Raises:
        TypeError: any other type (an ``int`` is not turned into that many NUL bytes).
    """
    if type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"Message body must be bytes or str, got {type(value).__name__}")


def _checked_str(value: object, what: str) -> str:
    """``value`` if it is a ``str`` without the property separators \\x01 / \\x02.

    Raises:
        TypeError: not a ``str``.
        IllegalArgumentError: it contains ``\\x01`` or ``\\x02``.
    """
    if not isinstance(value, str):
        raise TypeError(f"Message {what} must be str, got {type(value).__name__}")
    if "\x01" in value or "\x02" in value:
        raise IllegalArgumentError(
            f"Message {what} {value!r} contains a property separator (\\x01 or \\x02), which RocketMQ "
            "cannot store: it would be read back as other (system) properties")
    return value


class Message:
    """A message to send.

    Args:
        topic: destination topic (``^[%|a-zA-Z0-9_-]+$``, at most 127 characters).
        body: payload: ``bytes``, ``bytearray`` or ``memoryview`` (copied to ``bytes``), or a
            ``str`` (encoded as UTF-8). Assigning ``msg.body`` later follows the same rule.
        tags: optional single tag used for broker-side filtering (``TagA``), a ``str``.
        keys: optional business key(s), a string or an iterable of strings; indexed by the broker
            for QUERY_MESSAGE. Stored space-separated in the ``KEYS`` property.
        flag: user flag (int32), stored untouched.
        properties: user properties (str → str). Reserved RocketMQ names are refused.
        delay_time_level: 0 (none) or 1..18, the broker's ``messageDelayLevel`` index.
        deliver_time_ms / delay_ms: RocketMQ 5.x timer messages (see the properties of the
            same names); at most one of them, and not with ``delay_time_level``.
        wait_store_msg_ok: the ``WAIT`` property (default True), as the Java ``Message``.

    Raises:
        TypeError: a body that is not bytes-like or ``str`` (``Message("t", 5)``), or tags,
            keys, property names or values that are not ``str``; the same on assignment.
        IllegalArgumentError: tags, keys, property names or values containing ``\\x01`` or
            ``\\x02`` (the separators of the encoded properties: such a string could forge
            system properties such as ``DELAY``), or a reserved property name.

    Only ``put_user_property`` and the attribute setters check; writing into the
    ``properties`` dict directly bypasses the checks (it is the SDK's internal view).
    """

    __slots__ = ("topic", "_body", "flag", "properties", "transaction_id")

    def __init__(self, topic: str, body: bytes | bytearray | memoryview | str = b"", tags: str | None = None,
                 keys: str | Iterable[str] | None = None, flag: int = 0,
                 properties: dict[str, str] | None = None, delay_time_level: int = 0,
                 wait_store_msg_ok: bool = True, *, deliver_time_ms: int | None = None,
                 delay_ms: int | None = None) -> None:
        self.topic = topic
        self._body = _as_body(body)
        self.flag = flag
        self.properties: dict[str, str] = {}
        self.transaction_id: str | None = None
        if tags:
            self.properties[MC.TAGS] = _checked_str(tags, "tags")
        if keys:
            self.keys = keys
        if delay_time_level:
            self.delay_time_level = delay_time_level
        if deliver_time_ms is not None and delay_ms is not None:
            raise IllegalArgumentError("give deliver_time_ms or delay_ms, not both")
        if deliver_time_ms is not None:
            self.deliver_time_ms = deliver_time_ms
        if delay_ms is not None:
            self.delay_ms = delay_ms
        self.properties[MC.WAIT_STORE_MSG_OK] = "true" if wait_store_msg_ok else "false"
        if properties:
            for k, v in properties.items():
                self.put_user_property(k, v)

    @property
    def body(self) -> bytes:
        """The payload bytes; assign bytes-like or ``str`` (UTF-8), anything else raises TypeError."""
        return self._body

    @body.setter
    def body(self, value: bytes | bytearray | memoryview | str) -> None:
        self._body = _as_body(value)

    # -- views over properties -------------------------------------------------------------
    @property
    def tags(self) -> str | None:
        return self.properties.get(MC.TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        if value:
            self.properties[MC.TAGS] = _checked_str(value, "tags")
        else:
            self.properties.pop(MC.TAGS, None)

    @property
    def keys(self) -> list[str]:
        v = self.properties.get(MC.KEYS)
        return v.split(MC.KEY_SEPARATOR) if v else []

    @keys.setter
    def keys(self, value: str | Iterable[str] | None) -> None:
        if not value:
            self.properties.pop(MC.KEYS, None)
        elif isinstance(value, str):
            self.properties[MC.KEYS] = _checked_str(value, "keys")
        elif isinstance(value, Iterable):
            self.properties[MC.KEYS] = MC.KEY_SEPARATOR.join([_checked_str(k, "key") for k in value])
        else:
            raise TypeError(f"Message keys must be str or an iterable of str, got {type(value).__name__}")

    @property
    def delay_time_level(self) -> int:
        v = self.properties.get(MC.DELAY_TIME_LEVEL)
        return int(v) if v else 0

    @delay_time_level.setter
    def delay_time_level(self, level: int) -> None:
        if level and any(p in self.properties for p in MC.TIMER_PROPERTIES):
            raise IllegalArgumentError("a message has either a delay level or a timer (deliver_time_ms / delay_ms), "
                                       "not both (a broker would drop the timer)")
        if level:
            self.properties[MC.DELAY_TIME_LEVEL] = str(int(level))
        else:
            self.properties.pop(MC.DELAY_TIME_LEVEL, None)

    # -- RocketMQ 5.x timer messages ------------------------------------------------------------
    @property
    def deliver_time_ms(self) -> int | None:
        """Epoch ms at which a 5.x broker delivers the message (``TIMER_DELIVER_MS``), or None.

        Set it (an ``int``, epoch ms) to make the message a timer message: stored now, invisible
        to consumers until then (delivered within about one second after it by a 5.x broker,
        never before). A time already past is delivered at once. Setting it clears
        :attr:`delay_ms`; None clears it. A 4.x broker ignores the property (the message is
        delivered at once); use :attr:`delay_time_level` there.

        Raises:
            TypeError: not an int.
            IllegalArgumentError: not positive, more than 3 days ahead (a default 5.x broker's
                ``timerMaxDelaySec``; the broker answers MESSAGE_ILLEGAL for its own maximum),
                or the message has a delay level.
        """
        v = self.properties.get(MC.TIMER_DELIVER_MS)
        return int(v) if v else None

    @deliver_time_ms.setter
    def deliver_time_ms(self, value: int | None) -> None:
        if value is None:
            self.properties.pop(MC.TIMER_DELIVER_MS, None)
            return
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"deliver_time_ms must be an int (epoch ms), got {type(value).__name__}")
        if value <= 0:
            raise IllegalArgumentError(f"deliver_time_ms must be a positive epoch time in ms, got {value}")
        if value - int(time.time() * 1000) > MC.TIMER_MAX_DELAY_MS:
            raise IllegalArgumentError(f"deliver_time_ms is more than {MC.TIMER_MAX_DELAY_MS // 1000} s ahead, "
                                       f"the max delay of a RocketMQ 5.x broker (timerMaxDelaySec)")
        self._set_timer(MC.TIMER_DELIVER_MS, value)

    @property
    def delay_ms(self) -> int | None:
        """Delay in ms before a 5.x broker delivers the message, counted from when the broker
        stores it (``TIMER_DELAY_MS``; ``TIMER_DELAY_SEC`` when a whole number of seconds, as
        Java's ``setDelayTimeSec``), or None. Same rules as :attr:`deliver_time_ms`, which
        setting it clears.

        Raises:
            TypeError: not an int.
            IllegalArgumentError: negative, more than 3 days, or the message has a delay level.
        """
        v = self.properties.get(MC.TIMER_DELAY_MS)
        if v:
            return int(v)
        v = self.properties.get(MC.TIMER_DELAY_SEC)
        return int(v) * 1000 if v else None

    @delay_ms.setter
    def delay_ms(self, value: int | None) -> None:
        if value is None:
            self.properties.pop(MC.TIMER_DELAY_MS, None)
            self.properties.pop(MC.TIMER_DELAY_SEC, None)
            return
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"delay_ms must be an int (ms), got {type(value).__name__}")
        if not 0 <= value <= MC.TIMER_MAX_DELAY_MS:
            raise IllegalArgumentError(f"delay_ms must be in [0, {MC.TIMER_MAX_DELAY_MS}] ms (3 days, the max delay "
                                       f"of a RocketMQ 5.x broker), got {value}")
        if value % 1000 == 0:
            self._set_timer(MC.TIMER_DELAY_SEC, value // 1000)
        else:
            self._set_timer(MC.TIMER_DELAY_MS, value)

    @property
    def has_timer(self) -> bool:
        """Whether the message is a 5.x timer message (:attr:`deliver_time_ms` or :attr:`delay_ms` set)."""
        props = self.properties
        return any(p in props for p in MC.TIMER_PROPERTIES)

    def _set_timer(self, name: str, value: int) -> None:
        if self.delay_time_level:
            raise IllegalArgumentError("a message has either a delay level or a timer (deliver_time_ms / delay_ms), "
                                       "not both (a broker would drop the timer)")
        for p in MC.TIMER_PROPERTIES:
            self.properties.pop(p, None)
        self.properties[name] = str(value)

    @property
    def wait_store_msg_ok(self) -> bool:
        """The ``WAIT`` property: the broker answers a sync send only after the message is
        stored as the flush/replication mode demands (absent means true, as in Java)."""
        return self.properties.get(MC.WAIT_STORE_MSG_OK, "true") != "false"

    @wait_store_msg_ok.setter
    def wait_store_msg_ok(self, value: bool) -> None:
        self.properties[MC.WAIT_STORE_MSG_OK] = "true" if value else "false"

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    def put_user_property(self, name: str, value: str) -> None:
        """Set a user property.

        Raises:
            TypeError: the name or the value is not a ``str``.
            IllegalArgumentError: the name or value is empty or contains ``\\x01``/``\\x02``,
                or the name is reserved by RocketMQ (``MessageConst``).
        """
        _checked_str(name, "property name")
        _checked_str(value, f"property {name!r} value")
        if not name or value == "":
            raise IllegalArgumentError("user property name and value must be non-empty")
        if name in MC.RESERVED:
            raise IllegalArgumentError(f"the property name {name!r} is reserved by RocketMQ")
        self.properties[name] = value

    def get_property(self, name: str) -> str | None:
        return self.properties.get(name)

    get_user_property = get_property

    def put_property(self, name: str, value: str) -> None:
        """Set any property, system names included (no check; for SDK and broker internals)."""
        self.properties[name] = str(value)

    def clear_property(self, name: str) -> None:
        self.properties.pop(name, None)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return (self.topic, self.body, self.flag, self.properties) == (other.topic, other.body, other.flag,
                                                                       other.properties)

    __hash__ = object.__hash__

    @property
    def user_properties(self) -> dict[str, str]:
        """Properties that are not RocketMQ system properties."""
        return {k: v for k, v in self.properties.items() if k not in MC.RESERVED}

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(topic={self.topic!r}, tags={self.tags!r}, keys={self.keys!r}, "
                f"body={len(self.body)} bytes)")


class MessageExt(Message):
    """A stored message, as pulled from a broker (layout docs/protocol.md §4.5).

    Times are epoch milliseconds; hosts are ``"ip:port"`` strings.
    """

    # ``body`` is a plain slot here (the decoder fills it; no check needed on the hot path)
    __slots__ = ("body", "queue_id", "store_size", "queue_offset", "sys_flag", "born_timestamp", "born_host",
                 "store_timestamp", "store_host", "commit_log_offset", "body_crc", "reconsume_times",
                 "prepared_transaction_offset", "broker_name", "_oid", "_oid_prefix", "_oid_phys")
    # offset_msg_id: set, or None with the decoder's prefix + commit log offset to format on first read
    _oid: str | None
    _oid_prefix: str
    _oid_phys: int

    @property
    def receipt_handle(self) -> str | None:
        """RocketMQ 5.x POP: the receipt handle of a message received by a
        :class:`~rocketmq_sdk.consumer.simple_consumer.SimpleConsumer` (``POP_CK``), else None."""
        return self.properties.get(MC.POP_CK)

    def __init__(self, **fields: object) -> None:
        """All fields default to zero/empty (the decoder fills them); keyword arguments set any
        public attribute listed in ``__slots__``, ``offset_msg_id`` and ``topic``, ``body``,
        ``flag``, ``properties``, ``transaction_id``.

        Raises:
            TypeError: an unknown field name.
        """
        self.topic = ""
        self.body = b""
        self.flag = 0
        self.properties = {}
        self.transaction_id = None
        self.queue_id = 0
        self.store_size = 0
        self.queue_offset = 0
        self.sys_flag = 0
        self.born_timestamp = 0
        self.born_host = ""
        self.store_timestamp = 0
        self.store_host = ""
        self.commit_log_offset = 0
        self.body_crc = 0
        self.reconsume_times = 0
        self.prepared_transaction_offset = 0
        self._oid = ""
        self.broker_name = ""
        for name, value in fields.items():
            if name not in _EXT_FIELDS:
                raise TypeError(f"MessageExt has no field {name!r}")
            if name == "body":
                value = _as_body(value)
            setattr(self, name, value)

    @property
    def offset_msg_id(self) -> str:
        """The broker's message id: store host (IP, port) and commit log offset in hex (32
        digits for IPv4). A decoded IPv4 record formats it on first access (``msg_id`` needs it
        only when there is no ``UNIQ_KEY``); the value is that of the record as decoded."""
        oid = self._oid
        if oid is None:
            oid = self._oid = f"{self._oid_prefix}{self._oid_phys & 0xFFFFFFFFFFFFFFFF:016X}"
        return oid

    @offset_msg_id.setter
    def offset_msg_id(self, value: str) -> None:
        self._oid = value

    @property
    def msg_id(self) -> str:
        """The client message id (``UNIQ_KEY``) when present, else the offset message id."""
        return self.properties.get(MC.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or self.offset_msg_id

    def __repr__(self) -> str:
        return (f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
                f"tags={self.tags!r}, keys={self.keys!r}, msg_id={self.msg_id!r}, body={len(self.body)} bytes)")


_EXT_FIELDS = frozenset(n for n in MessageExt.__slots__ if n[0] != "_") | {
    "topic", "body", "flag", "properties", "transaction_id", "offset_msg_id"}


@dataclass(frozen=True, order=True, slots=True)
class MessageQueue:
    """One queue of a topic on one broker (Java ``MessageQueue``): the unit consumers own,
    pull and commit offsets for, and producers may send to.

    Immutable and hashable (a dict key in offset stores and assignments); equal when all three
    fields are; sorts like Java's ``compareTo`` (topic, then broker name, then queue id), which is
    the order allocation strategies rely on. ``str()`` gives Java's ``toString()``
    (``MessageQueue [topic=T, brokerName=b, queueId=0]``, the key consistent hashing uses);
    :meth:`to_dict` / :meth:`from_dict` the JSON form of RocketMQ bodies (``brokerName``,
    ``queueId``, ``topic``).

    Attributes:
        topic: the topic (a retry topic ``%RETRY%<group>`` included).
        broker_name: the broker name (a master and its slaves share it), not an address.
        queue_id: the queue's index on that broker, 0 ≤ queue_id < the topic's read (consumers)
            or write (producers) queue count there.
    """

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"MessageQueue [topic={self.topic}, brokerName={self.broker_name}, queueId={self.queue_id}]"

    def to_dict(self) -> dict:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}

    @classmethod
    def from_dict(cls, d: dict) -> MessageQueue:
        return cls(d["topic"], d["brokerName"], int(d["queueId"]))


class _ResponseStatus(enum.Enum):
    """A status the Java client reads from some response codes (its ``switch`` over the code)."""

    @classmethod
    def from_response_code(cls, code: int) -> Self | None:
        """The status of a response with ``code``, or None for any other code (the caller raises
        ``MQBrokerError``)."""
        # cls's table holds only cls's members (no cast() call: pulls read their status here)
        return _STATUS_BY_CODE[cls].get(code)  # type: ignore[return-value]


class SendStatus(_ResponseStatus):
    """Java ``SendStatus``: SEND_OK, or stored but FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT /
    SLAVE_NOT_AVAILABLE (SYNC_FLUSH or SYNC_MASTER brokers); :meth:`from_response_code` maps
    0, 10, 12, 11 to them in that order (docs/protocol.md §3.3)."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(slots=True)
class SendResult:
    """Outcome of a send: ``msg_id`` is the client id (UNIQ_KEY, comma-joined for batches);
    ``offset_msg_id`` the broker's (store host + commit log offset). ``recall_handle``: set by
    a 5.x broker for a timer message (``deliver_time_ms`` / ``delay_ms``) that went into its
    timer wheel, the argument of :meth:`Producer.recall_message`; None otherwise (4.x brokers,
    plain and delay-level messages)."""

    send_status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str | None = None
    trace_on: bool = True
    recall_handle: str | None = None


class PullStatus(_ResponseStatus):
    """Outcome of a pull; :meth:`from_response_code` maps as the Java/C++ clients do
    (docs/protocol.md §3.4): 0 FOUND, 19 NO_NEW_MSG, 20 NO_MATCHED_MSG, 21 OFFSET_ILLEGAL."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_STATUS_BY_CODE: dict[type[_ResponseStatus], dict[int, _ResponseStatus]] = {
    SendStatus: {0: SendStatus.SEND_OK, 10: SendStatus.FLUSH_DISK_TIMEOUT, 12: SendStatus.FLUSH_SLAVE_TIMEOUT,
                 11: SendStatus.SLAVE_NOT_AVAILABLE},
    PullStatus: {0: PullStatus.FOUND, 19: PullStatus.NO_NEW_MSG, 20: PullStatus.NO_MATCHED_MSG,
                 21: PullStatus.OFFSET_ILLEGAL},
}


@dataclass(slots=True)
class PullResult:
    pull_status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    msg_found_list: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = 0
