"""Producers: ``Producer`` and the queue selectors of ordered sends."""

from .producer import RETRY_RESPONSE_CODES, Producer
from .selector import (
    MessageQueueSelector,
    SelectMessageQueueByHash,
    SelectMessageQueueByRandom,
    java_hash_code,
)

__all__ = [
    "RETRY_RESPONSE_CODES",
    "MessageQueueSelector",
    "Producer",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByRandom",
    "java_hash_code",
]
