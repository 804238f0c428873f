"""Names: kombu queue / exchange -> RocketMQ topic and consumer group.

RocketMQ names allow ``[%|a-zA-Z0-9_-]`` and at most 127 characters (topics) or 255 (groups);
kombu names are any text (Celery uses ``celery.pidbox``, ``<uuid>.reply.celery.pidbox``,
``celeryev.<uuid>``). The mapping is one to one:

- ``[A-Za-z0-9_]`` are kept; every other character becomes ``-XX`` per UTF-8 byte (upper-case
  hex): ``celery.pidbox`` -> ``celery-2Epidbox``, ``a-b`` -> ``a-2Db``.
- A name still too long keeps its first characters and ends with ``-H`` and 16 hex digits of its
  SHA-1.
- Suffixes that an escaped name can never end with keep the derived topics apart: a fanout
  exchange's topic ends with ``-F``, a priority step's topic with ``-P<step>``.
- ``namespace`` (RocketMQ 4.x ``withNamespace``) gives ``<namespace>%<name>``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.protocol.codes import is_sys_topic

__all__ = ["Naming", "escape"]

TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255
_KEEP = re.compile(r"[A-Za-z0-9_]")
_PREFIX_RE = re.compile(r"^[A-Za-z0-9_-]*$")
_NAMESPACE_RE = re.compile(r"^[A-Za-z0-9_-]+$")
_TOPIC_CACHE_SIZE = 4096


def escape(name: str) -> str:
    """``name`` with every character outside ``[A-Za-z0-9_]`` as ``-XX`` per UTF-8 byte."""
    out = []
    for ch in name:
        if _KEEP.fullmatch(ch):
            out.append(ch)
        else:
            out.extend(f"-{b:02X}" for b in ch.encode("utf-8"))
    return "".join(out)


def _fit(name: str, max_length: int) -> str:
    if len(name) <= max_length:
        return name
    digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:16]
    return name[: max_length - 18] + "-H" + digest


@dataclass(frozen=True)
class Naming:
    """The name mapping of one transport (from ``broker_transport_options``).

    Args:
        topic_prefix: prepended to every topic (``[A-Za-z0-9_-]*``, default "").
        group_prefix: prepended to every consumer group (default ``"kombu_"``).
        namespace: RocketMQ namespace (``<namespace>%`` before topics and groups), default none.
        queue_topics: explicit ``{queue name: topic}`` (the topic used as is, it must be a legal
            RocketMQ topic); other queues are mapped by the rule above.

    Raises:
        IllegalArgumentError: an illegal prefix, namespace or mapped topic.
    """

    topic_prefix: str = ""
    group_prefix: str = "kombu_"
    namespace: str | None = None
    queue_topics: dict[str, str] = field(default_factory=dict)
    #: queue_topic's answers by (queue, step): asked once per publish
    _topic_cache: dict[tuple[str, int], str] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for what, value in (("topic_prefix", self.topic_prefix), ("group_prefix", self.group_prefix)):
            if not isinstance(value, str) or not _PREFIX_RE.match(value):
                raise IllegalArgumentError(f"{what} must match [A-Za-z0-9_-]*, got {value!r}")
        if self.namespace is not None and not _NAMESPACE_RE.match(self.namespace):
            raise IllegalArgumentError(f"namespace must match [A-Za-z0-9_-]+, got {self.namespace!r}")
        for queue, topic in self.queue_topics.items():
            if not isinstance(topic, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,127}", topic):
                raise IllegalArgumentError(f"queue_topics[{queue!r}] is not a legal topic: {topic!r}")

    def _ns(self, name: str, max_length: int) -> str:
        if self.namespace:
            return f"{self.namespace}%" + _fit(name, max_length - len(self.namespace) - 1)
        return _fit(name, max_length)

    def queue_topic(self, queue: str, step: int = 0) -> str:
        """The topic holding ``queue``'s messages of priority step ``step`` (0: the base topic).

        Raises:
            IllegalArgumentError: the queue maps to a RocketMQ system topic (``TBW102``,
                ``SCHEDULE_TOPIC_XXXX``, ``rmq_sys_*``...: a queue named so without a
                ``topic_prefix``), whose messages the broker uses itself.
        """
        topic = self._topic_cache.get((queue, step))
        if topic is not None:
            return topic
        base = self.queue_topics.get(queue) or self.topic_prefix + escape(queue)
        self._check_not_system(queue, base)
        suffix = f"-P{step}" if step else ""
        topic = self._ns(_fit(base, TOPIC_MAX_LENGTH - len(suffix) - (len(self.namespace) + 1 if self.namespace
                                                                         else 0)) + suffix, TOPIC_MAX_LENGTH)
        if len(self._topic_cache) >= _TOPIC_CACHE_SIZE:
            self._topic_cache.clear()   # many one-off queues (reply queues): start again
        self._topic_cache[(queue, step)] = topic
        return topic

    def _check_not_system(self, name: str, topic: str) -> None:
        if not self.namespace and is_sys_topic(topic):
            raise IllegalArgumentError(
                f"kombu queue {name!r} maps to the RocketMQ system topic {topic!r}: rename the queue, or set "
                f"the topic_prefix or queue_topics transport option")

    def fanout_topic(self, exchange: str) -> str:
        """The topic of fanout exchange ``exchange`` (every bound queue's group reads it)."""
        room = TOPIC_MAX_LENGTH - 2 - (len(self.namespace) + 1 if self.namespace else 0)
        return self._ns(_fit(self.topic_prefix + escape(exchange), room) + "-F", TOPIC_MAX_LENGTH)

    def dlq_topic(self, queue: str) -> str:
        """RocketMQ's dead-letter topic of ``queue``'s group: ``%DLQ%<group>`` (as
        ``MixAll.getDLQTopic``; shortened with ``-H<sha1>`` past 127 characters)."""
        return _fit("%DLQ%" + self.group(queue), TOPIC_MAX_LENGTH)

    def group(self, queue: str) -> str:
        """The consumer group of ``queue`` (all consumers of the queue share it)."""
        return self._ns(self.group_prefix + escape(queue), GROUP_MAX_LENGTH)
