"""Topic kinds of the topic list filter and the charts."""

from __future__ import annotations

from rocketmq_sdk.protocol.codes import is_retry_topic

from . import service

__all__ = ["KINDS", "topic_kind"]

KINDS = ("all", "normal", "retry", "dlq", "system")
_SYSTEM = {"TBW102", "SCHEDULE_TOPIC_XXXX", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC", "BenchmarkTest",
           "TRANS_CHECK_MAX_TIME_TOPIC", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
           "RMQ_SYS_TRACE_TOPIC"}


def topic_kind(topic: str, system_names: set[str]) -> str:
    """``retry``, ``dlq``, ``system`` (built-in topics, cluster and broker names, reply and
    trace topics) or ``normal``."""
    if is_retry_topic(topic):
        return "retry"
    if topic.startswith("%DLQ%"):
        return "dlq"
    if (topic in _SYSTEM or topic in system_names or topic.startswith("rmq_sys_")
            or topic.endswith("_REPLY_TOPIC") or topic == service.console_setting("TRACE_TOPIC")):
        return "system"
    return "normal"
