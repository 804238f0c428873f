"""Namespace prefixing of groups and topics (Java ``NamespaceUtil``): ``<ns>%<name>``, with
``%RETRY%`` / ``%DLQ%`` kept in front and system topics left alone."""

from __future__ import annotations

from ..protocol.codes import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SYSTEM_TOPIC_PREFIX,
    SYSTEM_TOPICS,
)
from ..protocol.message import MessageQueue, SendResult

__all__ = ["unwrap_namespace", "unwrap_result", "wrap_namespace"]

_SEPARATOR = "%"


def _split_prefix(resource: str) -> tuple[str, str]:
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if resource.startswith(prefix):
            return prefix, resource[len(prefix):]
    return "", resource


def wrap_namespace(namespace: str | None, resource: str) -> str:
    """``"ns%Topic"`` (``"%RETRY%ns%group"`` for retry topics); unchanged without a namespace,
    for system topics and when already prefixed."""
    if not namespace or not resource or resource in SYSTEM_TOPICS or resource.startswith(SYSTEM_TOPIC_PREFIX):
        return resource
    prefix, name = _split_prefix(resource)
    if name.startswith(namespace + _SEPARATOR):
        return resource
    return f"{prefix}{namespace}{_SEPARATOR}{name}"


def unwrap_namespace(namespace: str | None, resource: str) -> str:
    """The inverse of :func:`wrap_namespace` (unchanged if not prefixed with ``namespace``)."""
    if not namespace or not resource:
        return resource
    prefix, name = _split_prefix(resource)
    if name.startswith(namespace + _SEPARATOR):
        return prefix + name[len(namespace) + 1:]
    return resource


def unwrap_result(namespace: str | None, result: SendResult) -> SendResult:
    """``result`` with its queue's topic unwrapped (the caller sees its own topic name)."""
    if namespace:
        q = result.message_queue
        result.message_queue = MessageQueue(unwrap_namespace(namespace, q.topic), q.broker_name, q.queue_id)
    return result
