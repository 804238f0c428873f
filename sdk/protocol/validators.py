"""Name rules for topics and groups, shared by the SDK and the reference broker.

One module holds RocketMQ's rules (Java ``TopicValidator`` and client ``Validators``, 4.9.8):
a topic or group name is 1+ characters of ``^[%|a-zA-Z0-9_-]+$``; a topic is at most 127
characters (``TOPIC_MAX_LENGTH``; the CommitLog stores its length in one signed byte), a group at
most 255 (``Validators.CHARACTER_MAX_LENGTH``). Names built from a group (``%RETRY%<group>``,
``%DLQ%<group>``) are topics and follow the topic rules too.

The producer and consumers check names with :func:`check_name` before anything is sent; the
broker and name server check every name field of every request with :func:`topic_problem` /
:func:`group_problem` before anything is stored, and the store refuses (and its recovery skips)
records whose topic is not a valid name, so no name can become a path outside the store.
"""

from __future__ import annotations

import re

#: ``TopicValidator.VALID_PATTERN_STR``.
VALID_PATTERN_STR = "^[%|a-zA-Z0-9_-]+$"
#: ``TopicValidator.TOPIC_MAX_LENGTH``.
TOPIC_MAX_LENGTH = 127
#: ``Validators.CHARACTER_MAX_LENGTH``: the Java client's limit for group names.
GROUP_MAX_LENGTH = 255
# fullmatch, not ``$``: Python's ``$`` also matches before a trailing newline
_NAME_RE = re.compile(r"[%|a-zA-Z0-9_-]+")


def is_valid_name(name: object, max_length: int = TOPIC_MAX_LENGTH) -> bool:
    """True if ``name`` is a str of 1..``max_length`` characters of ``[%|a-zA-Z0-9_-]``."""
    return (type(name) is str and 0 < len(name) <= max_length
            and _NAME_RE.fullmatch(name) is not None)


def topic_problem(topic: object) -> str | None:
    """Why ``topic`` is not a legal topic name (Java ``TopicValidator.validateTopic`` remark), or
    None when it is."""
    if not isinstance(topic, str) or not topic.strip():
        return "The specified topic is blank."
    if _NAME_RE.fullmatch(topic) is None:
        return f"The specified topic contains illegal characters, allowing only {VALID_PATTERN_STR}"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


def group_problem(group: object) -> str | None:
    """Why ``group`` is not a legal group name (Java ``Validators.checkGroup`` remark), or None."""
    if not isinstance(group, str) or not group.strip():
        return "the specified group is blank"
    if len(group) > GROUP_MAX_LENGTH:
        return f"the specified group is longer than group max length {GROUP_MAX_LENGTH}."
    if _NAME_RE.fullmatch(group) is None:
        return f"the specified group[{group[:200]!r}] contains illegal characters, allowing only {VALID_PATTERN_STR}"
    return None


def check_name(name: str, what: str = "topic", max_length: int = TOPIC_MAX_LENGTH) -> str:
    """Validate a topic/group name; returns it unchanged.

    Raises:
        IllegalArgumentError: empty, longer than ``max_length`` or with characters outside
            ``[%|a-zA-Z0-9_-]``.
    """
    from ..exceptions import IllegalArgumentError

    if not isinstance(name, str) or not name.strip():
        raise IllegalArgumentError(f"the specified {what} is blank")
    if len(name) > max_length:
        raise IllegalArgumentError(f"the specified {what} is longer than {max_length} characters: {name[:200]!r}")
    if _NAME_RE.fullmatch(name) is None:
        raise IllegalArgumentError(
            f"the specified {what} {name[:200]!r} contains illegal characters, allowed: {VALID_PATTERN_STR}")
    return name
