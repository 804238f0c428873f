"""The pure (no I/O) protocol layer shared by the SDK and the reference broker: codes and flags,
typed headers, JSON bodies, the fastjson-lenient JSON reader, the message model, the binary
message/batch codecs and message ids. See docs/architecture.md for the contract.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # imported when first used (PEP 562, rocketmq_sdk._lazy)
    from .admin_bodies import (
        ClusterInfo,
        Connection,
        ConsumerConnection,
        ConsumeStats,
        GroupList,
        KVTable,
        OffsetWrapper,
        ProducerConnection,
        SubscriptionGroupConfig,
        SubscriptionGroupWrapper,
        TopicList,
        TopicOffset,
        TopicStatsTable,
    )
    from .bodies import (
        BrokerData,
        ConsumeFromWhere,
        ConsumeMessageDirectlyResult,
        ConsumerData,
        ConsumerListBody,
        ConsumerRunningInfo,
        ConsumeType,
        DataVersion,
        HeartbeatData,
        LockBatchRequestBody,
        LockBatchResponseBody,
        MessageModel,
        ProducerData,
        QueueData,
        RegisterBrokerBody,
        ResetOffsetBody,
        ResetOffsetBodyForC,
        SubscriptionData,
        TopicConfig,
        TopicConfigSerializeWrapper,
        TopicRouteData,
        UnlockBatchRequestBody,
    )
    from .codes import (
        CURRENT_VERSION,
        DEFAULT_TOPIC,
        MASTER_ID,
        LanguageCode,
        MessageConst,
        MessageSysFlag,
        PermName,
        PullSysFlag,
        RequestCode,
        ResponseCode,
        SerializeType,
        TopicSysFlag,
        get_dlq_topic,
        get_retry_topic,
        is_sys_topic,
        is_valid_name,
    )
    from .fastjson import ObjectKey
    from .javahash import java_abs_mod, java_string_hash
    from .message import (
        Message,
        MessageExt,
        MessageQueue,
        PullResult,
        PullStatus,
        SendResult,
        SendStatus,
    )
    from .message_codec import (
        decode_batch,
        decode_message,
        decode_messages,
        decode_properties,
        encode_batch,
        encode_properties,
        encode_stored_message,
    )
    from .msgid import (
        UniqIdGenerator,
        create_offset_msg_id,
        create_uniq_id,
        decode_offset_msg_id,
        get_nearly_time_from_id,
    )

__all__ = [
    "CURRENT_VERSION", "DEFAULT_TOPIC", "MASTER_ID", "BrokerData", "ClusterInfo", "Connection", "ConsumeFromWhere",
    "ConsumeMessageDirectlyResult", "ConsumeStats", "ConsumeType", "ConsumerConnection", "ConsumerData",
    "ConsumerListBody", "ConsumerRunningInfo", "DataVersion", "GroupList", "HeartbeatData", "KVTable", "LanguageCode",
    "LockBatchRequestBody", "LockBatchResponseBody", "Message", "MessageConst", "MessageExt", "MessageModel",
    "MessageQueue", "MessageSysFlag", "ObjectKey", "OffsetWrapper", "PermName", "ProducerConnection", "ProducerData",
    "PullResult", "PullStatus", "PullSysFlag", "QueueData", "RegisterBrokerBody", "RequestCode", "ResetOffsetBody",
    "ResetOffsetBodyForC", "ResponseCode", "SendResult", "SendStatus", "SerializeType", "SubscriptionData",
    "SubscriptionGroupConfig", "SubscriptionGroupWrapper", "TopicConfig", "TopicConfigSerializeWrapper", "TopicList",
    "TopicOffset", "TopicRouteData", "TopicStatsTable", "TopicSysFlag", "UniqIdGenerator", "UnlockBatchRequestBody",
    "create_offset_msg_id", "create_uniq_id", "decode_batch", "decode_message", "decode_messages",
    "decode_offset_msg_id", "decode_properties", "encode_batch", "encode_properties", "encode_stored_message",
    "get_dlq_topic", "get_nearly_time_from_id", "get_retry_topic", "is_sys_topic", "is_valid_name",
    "java_abs_mod", "java_string_hash",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__)
