"""Request, response and language codes, flags and constants of the RocketMQ 4.x protocol.

Values are those of Apache RocketMQ 4.9.8 (``RequestCode``, ``ResponseCode``,
``LanguageCode``, ``MQVersion``, ``PermName``, ``MessageSysFlag``, ``PullSysFlag``,
``MessageConst``, ``MixAll``); see docs/protocol.md §1-§5.
"""

from __future__ import annotations

from enum import IntEnum

#: ``MQVersion.Version.V4_9_8`` ordinal: what a 4.9.8 client, broker and name server send.
CURRENT_VERSION = 409
#: ``MQVersion.Version.V5_3_3`` ordinal: what 5.3.3 clients, brokers and name servers send.
V5_3_3 = 479
#: First 5.x ordinal (``V5_0_0_SNAPSHOT``): a peer at or above it speaks RocketMQ 5.
V5_0_0_SNAPSHOT = 412
#: Versions used in protocol decisions (ordinals of ``MQVersion.Version``).
V3_4_9 = 121
V4_9_4 = 401


#: Other ``MQVersion`` ordinals the protocol refers to (docs/protocol.md §1.6).
V3_0_7_SNAPSHOT = 28
V3_0_11 = 37
V3_1_8 = 63  # what the C++ 1.x client (PyPI ``rocketmq`` 0.4.4) sends
V4_1_0_SNAPSHOT = 232
V4_6_0 = 333
V4_9_0 = 393


def version_ordinal(minor: int, patch: int, *, snapshot: bool = False) -> int:
    """Ordinal of ``MQVersion.Version.V4_<minor>_<patch>`` (e.g. ``(9, 8) -> 409``).

    ``snapshot=True`` gives the ``..._SNAPSHOT`` ordinal, one less.
    """
    return 213 + 2 * (10 * minor + patch) - (1 if snapshot else 0)


def version_desc(ordinal: int) -> str:
    """``"V4_9_8"`` for 409; best effort for 4.x ordinals (``"V4_9_8_SNAPSHOT"`` for 408).

    Ordinals below the 4.0.0 snapshot are returned as ``"ordinal <n>"``.
    """
    base = 212  # V4_0_0_SNAPSHOT
    if ordinal < base:
        return f"ordinal {ordinal}"
    n, rem = divmod(ordinal - base, 2)
    minor, patch = divmod(n, 10)
    return f"V4_{minor}_{patch}" + ("_SNAPSHOT" if rem == 0 else "")


class RequestCode(IntEnum):
    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_BROKER_OFFSET = 13
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    GET_TOPIC_CONFIG_LIST = 22
    GET_TOPIC_NAME_LIST = 23
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    TRIGGER_DELETE_FILES = 27
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    CHECK_CLIENT_CONFIG = 46
    UPDATE_AND_CREATE_ACL_CONFIG = 50
    DELETE_ACL_CONFIG = 51
    GET_BROKER_CLUSTER_ACL_INFO = 52
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    SUSPEND_CONSUMER = 209
    RESUME_CONSUMER = 210
    RESET_CONSUMER_OFFSET_IN_CONSUMER = 211
    RESET_CONSUMER_OFFSET_IN_BROKER = 212
    ADJUST_CONSUMER_THREAD_POOL = 213
    WHO_CONSUME_THE_MESSAGE = 214
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    REGISTER_FILTER_SERVER = 301
    REGISTER_MESSAGE_FILTER_CLASS = 302
    QUERY_CONSUME_TIME_SPAN = 303
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305
    CLEAN_EXPIRED_CONSUMEQUEUE = 306
    GET_CONSUMER_RUNNING_INFO = 307
    QUERY_CORRECTION_OFFSET = 308
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    CLONE_GROUP_OFFSET = 314
    VIEW_BROKER_STATS_DATA = 315
    CLEAN_UNUSED_TOPIC = 316
    GET_BROKER_CONSUME_STATS = 317
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    SEND_BATCH_MESSAGE = 320
    QUERY_CONSUME_QUEUE = 321
    QUERY_DATA_VERSION = 322
    RESUME_CHECK_HALF_MESSAGE = 323
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_ALL_PRODUCER_INFO = 328
    DELETE_EXPIRED_COMMITLOG = 329
    # RocketMQ 5.x (docs/rocketmq5.md; ../shared/docs/rocketmq5-remoting.md §5.2, §2.7)
    GET_TOPIC_CONFIG = 351
    LITE_PULL_MESSAGE = 361
    RECALL_MESSAGE = 370
    QUERY_ASSIGNMENT = 400
    SET_MESSAGE_REQUEST_MODE = 401
    GET_ALL_MESSAGE_REQUEST_MODE = 402
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    PEEK_MESSAGE = 200052
    CHANGE_MESSAGE_INVISIBLETIME = 200053
    NOTIFICATION = 200054
    POLLING_INFO = 200055
    POP_ROLLBACK = 200056
    BATCH_ACK_MESSAGE = 200151


#: requests that store what a producer sends (Java ``SendMessageProcessor``'s codes): a slave
#: refuses them, the broker's name check reads their topic and group.
SEND_CODES = frozenset({RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
                        RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2})
#: the send codes whose header is ``SendMessageRequestHeaderV2``'s single-letter form
#: (:class:`rocketmq_sdk.protocol.headers.V2Field`)
V2_SEND_CODES = frozenset({RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
                           RequestCode.SEND_REPLY_MESSAGE_V2})


def request_name(code: int) -> str:
    """``"request GET_ROUTEINFO_BY_TOPIC (105)"`` for messages; ``"request code N"`` for unknown codes."""
    try:
        return f"request {RequestCode(code).name} ({code})"
    except ValueError:
        return f"request code {code}"


class ResponseCode(IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
    TRANSACTION_SHOULD_COMMIT = 200
    TRANSACTION_SHOULD_ROLLBACK = 201
    TRANSACTION_STATE_UNKNOW = 202
    TRANSACTION_STATE_GROUP_WRONG = 203
    NO_BUYER_ID = 204
    NOT_IN_CURRENT_UNIT = 205
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
    DELETE_ACL_CONFIG_FAILED = 210
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
    FLOW_CONTROL = 215
    # RocketMQ 5.x: 209/210 mean POLLING_FULL / POLLING_TIMEOUT in POP answers (same numbers as the
    # 4.x ACL failures above, which only admin requests return)
    POLLING_FULL = 209
    POLLING_TIMEOUT = 210
    INVALID_PARAMETER = 29
    ILLEGAL_OPERATION = 604


class LanguageCode(IntEnum):
    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12


class SerializeType(IntEnum):
    JSON = 0
    ROCKETMQ = 1


class PermName:
    """Topic / broker permission bits (``PermName``)."""

    PRIORITY = 8
    READ = 4
    WRITE = 2
    INHERIT = 1

    @staticmethod
    def is_readable(perm: int) -> bool:
        return bool(perm & PermName.READ)

    @staticmethod
    def is_writeable(perm: int) -> bool:
        return bool(perm & PermName.WRITE)

    @staticmethod
    def is_inherited(perm: int) -> bool:
        return bool(perm & PermName.INHERIT)

    @staticmethod
    def is_priority(perm: int) -> bool:
        return bool(perm & PermName.PRIORITY)

    @staticmethod
    def to_string(perm: int) -> str:
        """``"RWX"`` style rendering, as Java ``PermName.perm2String`` (6 -> ``"RW-"``)."""
        return ("R" if perm & 4 else "-") + ("W" if perm & 2 else "-") + ("X" if perm & 1 else "-")

    perm2string = to_string


class MessageSysFlag:
    """Bits of a message's ``sysFlag`` (docs/protocol.md §4.3)."""

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_NOT_TYPE = 0x0
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_COMMIT_TYPE = 0x8
    TRANSACTION_ROLLBACK_TYPE = 0xC
    TRANSACTION_MASK = 0xC
    BORNHOST_V6 = 0x10
    STOREHOST_V6 = 0x20
    COMPRESSION_TYPE_MASK = 0x700
    COMPRESSION_ZLIB = 0x300

    NEED_UNWRAP = 0x40
    INNER_BATCH = 0x80
    COMPRESSION_LZ4 = 0x100
    COMPRESSION_ZSTD = 0x200

    @staticmethod
    def transaction_value(sys_flag: int) -> int:
        return sys_flag & MessageSysFlag.TRANSACTION_MASK

    @staticmethod
    def reset_transaction_value(sys_flag: int, tx_type: int) -> int:
        """Replace the transaction bits (2-3) of ``sys_flag`` with ``tx_type``."""
        return (sys_flag & ~MessageSysFlag.TRANSACTION_MASK) | tx_type

    @staticmethod
    def is_compressed(sys_flag: int) -> bool:
        return bool(sys_flag & MessageSysFlag.COMPRESSED)


class PullSysFlag:
    """Bits of a PULL_MESSAGE request's ``sysFlag`` (docs/protocol.md §3.4)."""

    COMMIT_OFFSET = 0x1
    SUSPEND = 0x2
    SUBSCRIPTION = 0x4
    CLASS_FILTER = 0x8
    LITE_PULL = 0x10

    @staticmethod
    def build(commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool = False,
              lite_pull: bool = False) -> int:
        return ((PullSysFlag.COMMIT_OFFSET if commit_offset else 0) | (PullSysFlag.SUSPEND if suspend else 0)
                | (PullSysFlag.SUBSCRIPTION if subscription else 0)
                | (PullSysFlag.CLASS_FILTER if class_filter else 0) | (PullSysFlag.LITE_PULL if lite_pull else 0))

    @staticmethod
    def clear_commit_offset(sys_flag: int) -> int:
        """What the client does when pulling from a slave."""
        return sys_flag & ~PullSysFlag.COMMIT_OFFSET

    @staticmethod
    def has_commit_offset(sys_flag: int) -> bool:
        return bool(sys_flag & PullSysFlag.COMMIT_OFFSET)

    @staticmethod
    def has_suspend(sys_flag: int) -> bool:
        return bool(sys_flag & PullSysFlag.SUSPEND)

    @staticmethod
    def has_subscription(sys_flag: int) -> bool:
        return bool(sys_flag & PullSysFlag.SUBSCRIPTION)

    @staticmethod
    def has_class_filter(sys_flag: int) -> bool:
        return bool(sys_flag & PullSysFlag.CLASS_FILTER)

    @staticmethod
    def has_lite_pull(sys_flag: int) -> bool:
        return bool(sys_flag & PullSysFlag.LITE_PULL)


class TopicSysFlag:
    """Bits of a topic's ``topicSysFlag`` (docs/protocol.md §4.3)."""

    UNIT = 0x1
    UNIT_SUB = 0x2

    @staticmethod
    def build(unit: bool, has_unit_sub: bool) -> int:
        return (TopicSysFlag.UNIT if unit else 0) | (TopicSysFlag.UNIT_SUB if has_unit_sub else 0)

    @staticmethod
    def has_unit(flag: int) -> bool:
        return bool(flag & TopicSysFlag.UNIT)

    @staticmethod
    def has_unit_sub(flag: int) -> bool:
        return bool(flag & TopicSysFlag.UNIT_SUB)


class MessageConst:
    """Property keys of ``MessageConst`` (docs/protocol.md §4.2)."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT_STORE_MSG_OK = "WAIT"
    DELAY_TIME_LEVEL = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QUEUE_ID = "REAL_QID"
    TRANSACTION_PREPARED = "TRAN_MSG"
    PRODUCER_GROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    BUYER_ID = "BUYER_ID"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    TRANSFER_FLAG = "TRANSFER_FLAG"
    CORRECTION_FLAG = "CORRECTION_FLAG"
    MQ2_FLAG = "MQ2_FLAG"
    RECONSUME_TIME = "RECONSUME_TIME"
    MSG_REGION = "MSG_REGION"
    TRACE_SWITCH = "TRACE_ON"
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
    TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    INSTANCE_ID = "INSTANCE_ID"
    CORRELATION_ID = "CORRELATION_ID"
    MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
    MESSAGE_TTL = "TTL"
    REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
    PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
    CLUSTER = "CLUSTER"
    MESSAGE_TYPE = "MSG_TYPE"
    INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
    INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
    # RocketMQ 5.x timer messages and POP (docs/rocketmq5.md)
    TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
    TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    TIMER_DELAY_MS = "TIMER_DELAY_MS"
    TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
    TIMER_OUT_MS = "TIMER_OUT_MS"
    TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
    TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
    POP_CK = "POP_CK"
    FIRST_POP_TIME = "1ST_POP_TIME"
    KEY_SEPARATOR = " "
    #: Literal property names used by client code; NOT reserved.
    TRANSACTION_ID_LITERAL = "__transactionId__"
    START_DELIVER_TIME_LITERAL = "__STARTDELIVERTIME"

    #: Names a user property may not take (``MessageConst.STRING_HASH_SET``). As 4.9.8, the
    #: transaction check properties are not in it: producers set ``CHECK_IMMUNITY_TIME_IN_SECONDS``
    #: as a user property.
    RESERVED = frozenset({
        KEYS, TAGS, WAIT_STORE_MSG_OK, DELAY_TIME_LEVEL, RETRY_TOPIC, REAL_TOPIC, REAL_QUEUE_ID,
        TRANSACTION_PREPARED, PRODUCER_GROUP, MIN_OFFSET, MAX_OFFSET, BUYER_ID, ORIGIN_MESSAGE_ID,
        TRANSFER_FLAG, CORRECTION_FLAG, MQ2_FLAG, RECONSUME_TIME, MSG_REGION, TRACE_SWITCH,
        UNIQ_CLIENT_MESSAGE_ID_KEYIDX, MAX_RECONSUME_TIMES, CONSUME_START_TIMESTAMP,
        INSTANCE_ID, CORRELATION_ID, MESSAGE_REPLY_TO_CLIENT, MESSAGE_TTL, REPLY_MESSAGE_ARRIVE_TIME,
        PUSH_REPLY_TIME, CLUSTER, MESSAGE_TYPE, INNER_MULTI_DISPATCH, INNER_MULTI_QUEUE_OFFSET,
        TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS, TIMER_DEL_UNIQKEY, TIMER_OUT_MS, TIMER_ENQUEUE_MS,
        TIMER_DEQUEUE_MS, POP_CK, FIRST_POP_TIME,
    })
    #: The timer properties a producer sets (5.x precedence: the first one present wins).
    TIMER_PROPERTIES = (TIMER_DELAY_SEC, TIMER_DELAY_MS, TIMER_DELIVER_MS)
    #: Longest timer delay of a default 5.x broker (``timerMaxDelaySec`` 259200 s), ms.
    TIMER_MAX_DELAY_MS = 259_200_000
    #: Java's name for the same set.
    STRING_HASH_SET = RESERVED


# --- MixAll / TopicValidator ---------------------------------------------------------------
DEFAULT_TOPIC = "TBW102"
DEFAULT_CLUSTER = "DefaultCluster"
MASTER_ID = 0
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
#: Topics a client may not send to (``TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET``).
NOT_ALLOWED_SEND_TOPICS = frozenset({
    SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC,
    SELF_TEST_TOPIC, OFFSET_MOVED_EVENT,
})
# the name rules live in .validators (one module shared by the SDK and the broker)
from .validators import GROUP_MAX_LENGTH, TOPIC_MAX_LENGTH, check_name, is_valid_name  # noqa: E402,F401


def retry_topic(group: str) -> str:
    """``%RETRY%<group>``: where a consumer group's failed messages are redelivered from."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """``%DLQ%<group>``: where messages land after ``max_reconsume_times``."""
    return DLQ_GROUP_TOPIC_PREFIX + group


get_retry_topic = retry_topic
get_dlq_topic = dlq_topic


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


#: System topics a 4.9.8 broker creates or uses (``TopicValidator.SYSTEM_TOPIC_SET``).
SYSTEM_TOPICS = frozenset({
    DEFAULT_TOPIC, SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC,
    SELF_TEST_TOPIC, OFFSET_MOVED_EVENT, "BenchmarkTest", "RMQ_SYS_TRACE_TOPIC",
})
SYSTEM_TOPIC_PREFIX = "rmq_sys_"


def is_sys_topic(topic: str) -> bool:
    """True for broker system topics (the set above or the ``rmq_sys_`` prefix)."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_not_allowed_send_topic(topic: str) -> bool:
    """True if clients may not send to ``topic`` (``TopicValidator.isNotAllowedSendTopic``)."""
    return topic in NOT_ALLOWED_SEND_TOPICS
