"""RocketMQ storage engine (CommitLog, ConsumeQueue, checkpoint, recovery) for the reference
broker; knows nothing of the network. Entry point: :class:`MessageStore`."""

from .config import FlushDiskType, StoreConfig
from .inner_message import InnerMessage, tags_string_to_tags_code
from .message_store import ArrivalListener, MessageStore, StoreError
from .results import (
    AppendMessageResult,
    AppendMessageStatus,
    GetMessageResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
)

__all__ = [
    "AppendMessageResult", "AppendMessageStatus", "ArrivalListener", "FlushDiskType", "GetMessageResult",
    "GetMessageStatus", "InnerMessage", "MessageStore", "PutMessageResult", "PutMessageStatus", "QueryMessageResult", "StoreConfig",
    "StoreError", "tags_string_to_tags_code",
]
