"""Typed request/response headers (the ``extFields`` of a command, docs/protocol.md §3.1-§3.2).

Each header is a small dataclass with snake_case attributes; the wire key is the Java field
name (camelCase, or an explicit ``wire`` name such as ``clientID``). ``to_ext_fields()`` writes
every non-None field as a string (booleans ``"true"``/``"false"``); ``from_ext_fields()`` is
lenient like the Java broker: values may be strings, JSON numbers or booleans (the C++ client
sends numbers), unparsable numbers become None, booleans follow ``Boolean.parseBoolean`` but
``batch``/``unitMode`` also accept ``"1"`` (the C++ client's true).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from .. import _speedups
from .codes import V2_SEND_CODES
from .fieldspec import field_spec, type_name

T = TypeVar("T", bound="Header")


def _to_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _parse_int(v: Any) -> int | None:
    if type(v) is int:
        return v
    try:
        return int(v)
    except (TypeError, ValueError):
        return None  # Java logs the bad number and leaves the field null


def _parse_bool(v: Any) -> bool:
    """Java ``Boolean.parseBoolean``: only a case-insensitive ``true`` is true."""
    if isinstance(v, bool):
        return v
    return isinstance(v, str) and v.lower() == "true"


def _parse_bool_or_one(v: Any) -> bool:
    """``Boolean.parseBoolean`` that also takes ``"1"``/1, which the C++ client sends for
    ``batch`` and ``unitMode``."""
    if isinstance(v, bool):
        return v
    return str(v).strip().lower() in ("true", "1")


def _parse_str(v: Any) -> str:
    return v if isinstance(v, str) else _to_str(v)


#: Fields whose boolean the C++ client writes as ``"0"``/``"1"``.
_ONE_IS_TRUE = frozenset({"batch", "unit_mode"})


def _parser_of(f: dataclasses.Field[Any]) -> Callable[[Any], Any]:
    t = type_name(f)
    if "bool" in t:
        return _parse_bool_or_one if f.name in _ONE_IS_TRUE else _parse_bool
    if "int" in t:
        return _parse_int
    return _parse_str


# the C twin of the compiled readers below (_cheaders.c beside this file: read_header), or None
_cheaders = _speedups.load("rocketmq_sdk.protocol._cheaders")
_c_read_header = _cheaders.read_header if _cheaders is not None else None


def wire(name: str) -> dict:
    """Field metadata giving an explicit wire name."""
    return {"wire": name}


def _compile_reader(cls: type[T], keys: dict[str, str]) -> Callable[[dict[str, Any]], T]:
    """A function ``ext -> cls`` reading field ``attr`` from ``ext[keys[attr]]`` with the field's
    parser (fields without a key, or whose key is absent or None, keep their default); the same
    result as parsing field by field into keyword arguments, built as straight-line code once per
    header class (every request and response decodes a header)."""
    parsers = {attr: p for attr, _key, p in cls._get_spec()}

    def by_keywords(ext: dict[str, Any]) -> T:
        return cls(**{a: parsers[a](v) for a, k in keys.items() if (v := ext.get(k)) is not None})

    fields = dataclasses.fields(cls)
    if not all(f.init and f.default is not dataclasses.MISSING for f in fields):
        return by_keywords  # not only plain optional fields
    if _c_read_header is not None:
        kinds: dict[Callable[[Any], Any], int] = {_parse_str: 0, _parse_int: 1, _parse_bool: 2, _parse_bool_or_one: 3}
        spec = tuple((f.name, keys.get(f.name), kinds[parsers[f.name]], f.default, parsers[f.name]) for f in fields)
        c_read = _c_read_header

        def read_c(ext: dict[str, Any]) -> T:
            header = c_read(cls, ext, spec)  # None when ext is not a dict
            return header if header is not None else by_keywords(ext)

        return read_c
    ns: dict[str, Any] = {"cls": cls, "_parse_str": _parse_str}
    lines = ["def read(ext):", "    g = ext.get"]
    args = []
    for i, f in enumerate(fields):
        ns[f"d{i}"] = f.default
        key = keys.get(f.name)
        if key is None:
            args.append(f"d{i}")
            continue
        ns[f"p{i}"] = parsers[f.name]
        lines.append(f"    v = g({key!r})")
        if parsers[f.name] is _parse_str:
            lines.append(f"    x{i} = d{i} if v is None else (v if type(v) is str else _parse_str(v))")
        else:
            lines.append(f"    x{i} = d{i} if v is None else p{i}(v)")
        args.append(f"x{i}")
    lines.append(f"    return cls({', '.join(args)})")
    exec("\n".join(lines), ns)  # noqa: S102 - generated from the dataclass fields only
    return ns["read"]


class Header:
    """Base of all typed headers: a slots dataclass whose fields are all optional.

    The spec of each subclass (attribute, wire key, parser) is derived once from its dataclass
    fields: ``int`` fields parse decimal strings or JSON numbers (unparsable → None), ``bool``
    fields follow ``Boolean.parseBoolean`` (plus ``"1"`` for ``batch``/``unitMode``), others are
    strings.
    """

    __slots__ = ()
    # every subclass is a dataclass; the caches are set per class on first use
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]
    _spec_cache: ClassVar[tuple[tuple[str, str, Callable[[Any], Any]], ...]]
    _ext_reader: ClassVar[Callable[[dict[str, Any]], Any]]

    @classmethod
    def _get_spec(cls) -> tuple[tuple[str, str, Callable[[Any], Any]], ...]:
        spec = cls.__dict__.get("_spec_cache")
        if spec is None:
            spec = cls._spec_cache = field_spec(cls, "wire", _parser_of)
        return spec

    def to_ext_fields(self) -> dict[str, str]:
        """The header as ``extFields``: Java field names, string values, None fields omitted."""
        out: dict[str, str] = {}
        for attr, key, _parser in self._get_spec():
            v = getattr(self, attr)
            if v is not None:
                out[key] = v if type(v) is str else _to_str(v)
        return out

    @classmethod
    def from_ext_fields(cls: type[T], ext: dict[str, Any] | None) -> T:
        """Read ``extFields`` (values may be str, int or bool); unknown keys are ignored."""
        if not ext:
            return cls()
        reader = cls.__dict__.get("_ext_reader")
        if reader is None:
            reader = cls._ext_reader = _compile_reader(cls, {attr: key for attr, key, _p in cls._get_spec()})
        return reader(ext)


# --- send ----------------------------------------------------------------------------------
@dataclass(slots=True)
class SendMessageRequestHeader(Header):
    producer_group: str | None = None
    topic: str | None = None
    default_topic: str | None = None
    default_topic_queue_nums: int | None = None
    queue_id: int | None = None
    sys_flag: int | None = None
    born_timestamp: int | None = None
    flag: int | None = None
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool | None = None
    batch: bool | None = None
    max_reconsume_times: int | None = None
    bname: str | None = None

    _V2: ClassVar[tuple[tuple[str, str], ...]]  # (letter, field) pairs, from V2Field below
    _v2_reader: ClassVar[Callable[[dict[str, Any]], SendMessageRequestHeader]]

    def to_v2(self) -> dict[str, str]:
        """The single-letter ``SendMessageRequestHeaderV2`` form (codes 310/320)."""
        out = {}
        for key, attr in self._V2:
            v = getattr(self, attr)
            if v is not None:
                out[key] = v if type(v) is str else _to_str(v)
        return out

    @classmethod
    def from_v2(cls, ext: dict[str, Any]) -> SendMessageRequestHeader:
        """Read the single-letter form (values may be str, int or bool)."""
        reader = cls.__dict__.get("_v2_reader")
        if reader is None:
            reader = cls._v2_reader = _compile_reader(cls, {attr: key for key, attr in cls._V2})
        return reader(ext)


class V2Field:
    """The single letter of each :class:`SendMessageRequestHeader` field in Java's
    ``SendMessageRequestHeaderV2`` (the header of :data:`~rocketmq_sdk.protocol.codes.V2_SEND_CODES`),
    in Java's order. The one place that spells them: the producer's send headers and templates,
    :meth:`SendMessageRequestHeader.to_v2` / ``from_v2``, and the broker's name check and ACL
    read them here."""

    PRODUCER_GROUP = "a"
    TOPIC = "b"
    DEFAULT_TOPIC = "c"
    DEFAULT_TOPIC_QUEUE_NUMS = "d"
    QUEUE_ID = "e"
    SYS_FLAG = "f"
    BORN_TIMESTAMP = "g"
    FLAG = "h"
    PROPERTIES = "i"
    RECONSUME_TIMES = "j"
    UNIT_MODE = "k"
    MAX_RECONSUME_TIMES = "l"
    BATCH = "m"
    BNAME = "n"


SendMessageRequestHeader._V2 = tuple((letter, name.lower()) for name, letter in vars(V2Field).items()
                                     if name.isupper())


@dataclass(slots=True)
class SendMessageResponseHeader(Header):
    msg_id: str | None = None
    queue_id: int | None = None
    queue_offset: int | None = None
    transaction_id: str | None = None
    # order as a 4.9.8 broker writes them in a ROCKETMQ-serialized response
    trace_on: str | None = dataclasses.field(default=None, metadata=wire("TRACE_ON"))
    msg_region: str | None = dataclasses.field(default=None, metadata=wire("MSG_REGION"))


# --- pull and offsets ------------------------------------------------------------------------
@dataclass(slots=True)
class PullMessageRequestHeader(Header):
    consumer_group: str | None = None
    topic: str | None = None
    queue_id: int | None = None
    queue_offset: int | None = None
    max_msg_nums: int | None = None
    sys_flag: int | None = None
    commit_offset: int | None = None
    suspend_timeout_millis: int | None = None
    subscription: str | None = None
    sub_version: int | None = None
    expression_type: str | None = None
    bname: str | None = None


@dataclass(slots=True)
class PullMessageResponseHeader(Header):
    suggest_which_broker_id: int | None = None
    next_begin_offset: int | None = None
    min_offset: int | None = None
    max_offset: int | None = None


@dataclass(slots=True)
class QueryConsumerOffsetRequestHeader(Header):
    consumer_group: str | None = None
    topic: str | None = None
    queue_id: int | None = None
    bname: str | None = None


@dataclass(slots=True)
class UpdateConsumerOffsetRequestHeader(Header):
    consumer_group: str | None = None
    topic: str | None = None
    queue_id: int | None = None
    commit_offset: int | None = None
    bname: str | None = None


@dataclass(slots=True)
class OffsetResponseHeader(Header):
    """Response of QUERY_CONSUMER_OFFSET, GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP."""

    offset: int | None = None


@dataclass(slots=True)
class QueueRequestHeader(Header):
    """GET_MAX_OFFSET / GET_MIN_OFFSET / GET_EARLIEST_MSG_STORETIME request."""

    topic: str | None = None
    queue_id: int | None = None
    bname: str | None = None


@dataclass(slots=True)
class SearchOffsetRequestHeader(Header):
    topic: str | None = None
    queue_id: int | None = None
    timestamp: int | None = None
    bname: str | None = None


@dataclass(slots=True)
class EarliestMsgStoretimeResponseHeader(Header):
    timestamp: int | None = None


# --- clients and groups ------------------------------------------------------------------------
@dataclass(slots=True)
class UnregisterClientRequestHeader(Header):
    client_id: str | None = dataclasses.field(default=None, metadata=wire("clientID"))
    producer_group: str | None = None
    consumer_group: str | None = None


@dataclass(slots=True)
class ConsumerGroupRequestHeader(Header):
    """GET_CONSUMER_LIST_BY_GROUP / NOTIFY_CONSUMER_IDS_CHANGED."""

    consumer_group: str | None = None


@dataclass(slots=True)
class ConsumerSendMsgBackRequestHeader(Header):
    offset: int | None = None
    group: str | None = None
    delay_level: int | None = None
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool | None = None
    max_reconsume_times: int | None = None
    bname: str | None = None


# --- topics, routes, name server ---------------------------------------------------------------
@dataclass(slots=True)
class TopicRequestHeader(Header):
    """GET_ROUTEINFO_BY_TOPIC / DELETE_TOPIC_* / GET_TOPIC_STATS_INFO."""

    topic: str | None = None
    accept_standard_json_only: bool | None = None
    cluster_name: str | None = None


@dataclass(slots=True)
class CreateTopicRequestHeader(Header):
    topic: str | None = None
    default_topic: str | None = None
    read_queue_nums: int | None = None
    write_queue_nums: int | None = None
    perm: int | None = None
    topic_filter_type: str | None = None
    topic_sys_flag: int | None = None
    order: bool | None = None


@dataclass(slots=True)
class RegisterBrokerRequestHeader(Header):
    broker_name: str | None = None
    broker_addr: str | None = None
    cluster_name: str | None = None
    ha_server_addr: str | None = None
    broker_id: int | None = None
    compressed: bool | None = None
    body_crc32: int | None = None
    enable_acting_master: bool | None = None  # RocketMQ 5.x


@dataclass(slots=True)
class RegisterBrokerResponseHeader(Header):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(slots=True)
class BrokerIdentityHeader(Header):
    """UNREGISTER_BROKER / QUERY_DATA_VERSION request."""

    broker_name: str | None = None
    broker_addr: str | None = None
    cluster_name: str | None = None
    broker_id: int | None = None


@dataclass(slots=True)
class KVConfigRequestHeader(Header):
    namespace: str | None = None
    key: str | None = None
    value: str | None = None


@dataclass(slots=True)
class ViewMessageRequestHeader(Header):
    offset: int | None = None


@dataclass(slots=True)
class QueryMessageRequestHeader(Header):
    topic: str | None = None
    key: str | None = None
    max_num: int | None = None
    begin_timestamp: int | None = None
    end_timestamp: int | None = None


@dataclass(slots=True)
class EndTransactionRequestHeader(Header):
    producer_group: str | None = None
    tran_state_table_offset: int | None = None
    commit_log_offset: int | None = None
    commit_or_rollback: int | None = None
    from_transaction_check: bool | None = None
    msg_id: str | None = None
    transaction_id: str | None = None
    bname: str | None = None


@dataclass(slots=True)
class CheckTransactionStateRequestHeader(Header):
    tran_state_table_offset: int | None = None
    commit_log_offset: int | None = None
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None


@dataclass(slots=True)
class QueryMessageResponseHeader(Header):
    index_last_update_timestamp: int | None = None
    index_last_update_phyoffset: int | None = None


@dataclass(slots=True)
class KVConfigResponseHeader(Header):
    """GET_KV_CONFIG response."""

    value: str | None = None


@dataclass(slots=True)
class QueryDataVersionResponseHeader(Header):
    changed: bool | None = None


@dataclass(slots=True)
class GetBrokerConfigResponseHeader(Header):
    version: str | None = None


# --- consumers, admin ----------------------------------------------------------------------------
@dataclass(slots=True)
class ResetOffsetRequestHeader(Header):
    """INVOKE_BROKER_TO_RESET_OFFSET (222) and RESET_CONSUMER_CLIENT_OFFSET (220);
    ``timestamp`` -1 means the max offset."""

    topic: str | None = None
    group: str | None = None
    timestamp: int | None = None
    is_force: bool | None = None


@dataclass(slots=True)
class GetConsumerStatusRequestHeader(Header):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) / GET_CONSUMER_STATUS_FROM_CLIENT (221)."""

    topic: str | None = None
    group: str | None = None
    client_addr: str | None = None


@dataclass(slots=True)
class GetConsumerRunningInfoRequestHeader(Header):
    consumer_group: str | None = None
    client_id: str | None = None
    jstack_enable: bool | None = None


@dataclass(slots=True)
class ConsumeMessageDirectlyResultRequestHeader(Header):
    consumer_group: str | None = None
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None


@dataclass(slots=True)
class ProducerGroupRequestHeader(Header):
    """GET_PRODUCER_CONNECTION_LIST."""

    producer_group: str | None = None


@dataclass(slots=True)
class DeleteSubscriptionGroupRequestHeader(Header):
    group_name: str | None = None
    remove_offset: bool | None = None


@dataclass(slots=True)
class BrokerNameRequestHeader(Header):
    """WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER."""

    broker_name: str | None = None


@dataclass(slots=True)
class WipeWritePermOfBrokerResponseHeader(Header):
    wipe_topic_count: int | None = None


@dataclass(slots=True)
class AddWritePermOfBrokerResponseHeader(Header):
    add_topic_count: int | None = None


@dataclass(slots=True)
class GetTopicsByClusterRequestHeader(Header):
    cluster: str | None = None


@dataclass(slots=True)
class GetConsumeStatsRequestHeader(Header):
    consumer_group: str | None = None
    topic: str | None = None


@dataclass(slots=True)
class QueryConsumeTimeSpanRequestHeader(Header):
    topic: str | None = None
    group: str | None = None


@dataclass(slots=True)
class ViewBrokerStatsDataRequestHeader(Header):
    stats_name: str | None = None
    stats_key: str | None = None


@dataclass(slots=True)
class GetBrokerConsumeStatsRequestHeader(Header):
    is_order: bool | None = None


@dataclass(slots=True)
class QueryConsumeQueueRequestHeader(Header):
    topic: str | None = None
    queue_id: int | None = None
    index: int | None = None
    count: int | None = None
    consumer_group: str | None = None


@dataclass(slots=True)
class PlainAccessConfigRequestHeader(Header):
    """UPDATE_AND_CREATE_ACL_CONFIG (50) / DELETE_ACL_CONFIG (51, ``accessKey`` only)."""

    access_key: str | None = None
    secret_key: str | None = None
    white_remote_address: str | None = None
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    admin: bool | None = None
    topic_perms: str | None = None
    group_perms: str | None = None


@dataclass(slots=True)
class UpdateGlobalWhiteAddrsConfigRequestHeader(Header):
    global_white_addrs: str | None = None


@dataclass(slots=True)
class ReplyMessageRequestHeader(Header):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326), broker → requesting client."""

    producer_group: str | None = None
    topic: str | None = None
    default_topic: str | None = None
    default_topic_queue_nums: int | None = None
    queue_id: int | None = None
    sys_flag: int | None = None
    born_timestamp: int | None = None
    flag: int | None = None
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool | None = None
    born_host: str | None = None
    store_host: str | None = None
    store_timestamp: int | None = None


# --- Java class names for the shared families ------------------------------------------------------
QueryConsumerOffsetResponseHeader = OffsetResponseHeader
GetMaxOffsetResponseHeader = OffsetResponseHeader
GetMinOffsetResponseHeader = OffsetResponseHeader
SearchOffsetResponseHeader = OffsetResponseHeader
GetMaxOffsetRequestHeader = QueueRequestHeader
GetMinOffsetRequestHeader = QueueRequestHeader
GetEarliestMsgStoretimeRequestHeader = QueueRequestHeader
GetEarliestMsgStoretimeResponseHeader = EarliestMsgStoretimeResponseHeader
GetRouteInfoRequestHeader = TopicRequestHeader
DeleteTopicRequestHeader = TopicRequestHeader
GetTopicStatsInfoRequestHeader = TopicRequestHeader
QueryTopicConsumeByWhoRequestHeader = TopicRequestHeader
GetConsumerListByGroupRequestHeader = ConsumerGroupRequestHeader
NotifyConsumerIdsChangedRequestHeader = ConsumerGroupRequestHeader
GetConsumerConnectionListRequestHeader = ConsumerGroupRequestHeader
UpdateAndCreateTopicRequestHeader = CreateTopicRequestHeader
UnregisterBrokerRequestHeader = BrokerIdentityHeader
QueryDataVersionRequestHeader = BrokerIdentityHeader
PutKVConfigRequestHeader = KVConfigRequestHeader
GetKVConfigRequestHeader = KVConfigRequestHeader
DeleteKVConfigRequestHeader = KVConfigRequestHeader
GetKVListByNamespaceRequestHeader = KVConfigRequestHeader
GetKVConfigResponseHeader = KVConfigResponseHeader
GetProducerConnectionListRequestHeader = ProducerGroupRequestHeader

#: Request code → header class of its ``extFields`` (SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and
#: SEND_REPLY_MESSAGE_V2 use :meth:`SendMessageRequestHeader.from_v2`; see :func:`parse_request_header`).
REQUEST_HEADERS: dict[int, type[Header]] = {
    10: SendMessageRequestHeader, 11: PullMessageRequestHeader, 12: QueryMessageRequestHeader,
    14: QueryConsumerOffsetRequestHeader, 15: UpdateConsumerOffsetRequestHeader,
    17: CreateTopicRequestHeader, 29: SearchOffsetRequestHeader, 30: QueueRequestHeader,
    31: QueueRequestHeader, 32: QueueRequestHeader, 33: ViewMessageRequestHeader,
    35: UnregisterClientRequestHeader, 36: ConsumerSendMsgBackRequestHeader,
    37: EndTransactionRequestHeader, 38: ConsumerGroupRequestHeader, 39: CheckTransactionStateRequestHeader,
    40: ConsumerGroupRequestHeader, 50: PlainAccessConfigRequestHeader, 51: PlainAccessConfigRequestHeader,
    53: UpdateGlobalWhiteAddrsConfigRequestHeader, 100: KVConfigRequestHeader, 101: KVConfigRequestHeader,
    102: KVConfigRequestHeader, 103: RegisterBrokerRequestHeader, 104: BrokerIdentityHeader,
    105: TopicRequestHeader, 202: TopicRequestHeader, 203: ConsumerGroupRequestHeader,
    204: ProducerGroupRequestHeader, 205: BrokerNameRequestHeader, 207: DeleteSubscriptionGroupRequestHeader,
    208: GetConsumeStatsRequestHeader, 215: TopicRequestHeader, 216: TopicRequestHeader,
    219: KVConfigRequestHeader, 220: ResetOffsetRequestHeader, 221: GetConsumerStatusRequestHeader,
    222: ResetOffsetRequestHeader, 223: GetConsumerStatusRequestHeader, 224: GetTopicsByClusterRequestHeader,
    300: TopicRequestHeader, 303: QueryConsumeTimeSpanRequestHeader, 307: GetConsumerRunningInfoRequestHeader,
    309: ConsumeMessageDirectlyResultRequestHeader, 310: SendMessageRequestHeader,
    315: ViewBrokerStatsDataRequestHeader, 317: GetBrokerConsumeStatsRequestHeader,
    320: SendMessageRequestHeader, 321: QueryConsumeQueueRequestHeader, 322: BrokerIdentityHeader,
    325: SendMessageRequestHeader, 326: ReplyMessageRequestHeader, 327: BrokerNameRequestHeader,
}

#: Request code → header class of a SUCCESS response's ``extFields``.
RESPONSE_HEADERS: dict[int, type[Header]] = {
    10: SendMessageResponseHeader, 310: SendMessageResponseHeader, 320: SendMessageResponseHeader,
    325: SendMessageResponseHeader, 11: PullMessageResponseHeader, 12: QueryMessageResponseHeader,
    14: OffsetResponseHeader, 29: OffsetResponseHeader, 30: OffsetResponseHeader, 31: OffsetResponseHeader,
    32: EarliestMsgStoretimeResponseHeader, 26: GetBrokerConfigResponseHeader, 101: KVConfigResponseHeader,
    103: RegisterBrokerResponseHeader, 205: WipeWritePermOfBrokerResponseHeader,
    322: QueryDataVersionResponseHeader, 327: AddWritePermOfBrokerResponseHeader,
}


def parse_request_header(code: int, ext: dict[str, Any] | None) -> Header | None:
    """Typed header of a request with ``code``, or None for codes without one.

    A send on code 310/320/325 is read in the V2 form, unless it carries the long names (the
    C++ client may send code 310 with either form), so the result is always a
    :class:`SendMessageRequestHeader` for sends.
    """
    cls = REQUEST_HEADERS.get(code)
    if cls is None:
        return None
    if code in V2_SEND_CODES and ext and V2Field.TOPIC in ext:
        return SendMessageRequestHeader.from_v2(ext)
    return cls.from_ext_fields(ext)
