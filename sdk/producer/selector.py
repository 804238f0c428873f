"""Queue selectors for ordered sends (Java ``MessageQueueSelector`` and its implementations).

``SelectMessageQueueByHash`` reproduces Java's ``Math.abs(arg.hashCode() % mqs.size())`` with
Java's ``hashCode`` of the argument, so Python and Java producers put one key on one queue
(Python's own ``hash()`` is salted per process and must not be used).
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

from ..protocol.javahash import java_string_hash
from ..protocol.message import Message, MessageQueue

__all__ = ["MessageQueueSelector", "SelectMessageQueueByHash", "SelectMessageQueueByRandom",
           "SelectorLike", "java_hash_code"]


class MessageQueueSelector(ABC):
    """Chooses the queue of an ordered send; any callable ``(mqs, msg, arg) -> MessageQueue`` is
    accepted wherever a selector is."""

    @abstractmethod
    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        """Return one of ``mqs`` (the topic's writable queues, in Java's order) for ``msg``."""

    def __call__(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return self.select(mqs, msg, arg)


SelectorLike = MessageQueueSelector | Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]


def _int32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - 0x100000000 if v & 0x80000000 else v


def java_hash_code(arg: Any) -> int:
    """Java ``hashCode()`` of ``arg`` as the matching Java boxed type would compute it.

    ``str`` → ``String.hashCode``; ``bool`` → ``Boolean.hashCode`` (1231/1237); ``int`` in the
    int32 range → ``Integer.hashCode`` (the value), larger → ``Long.hashCode``
    (``(int)(v ^ (v >>> 32))``); anything else → ``String.hashCode`` of ``str(arg)``.
    """
    if isinstance(arg, str):
        return java_string_hash(arg)
    if isinstance(arg, bool):
        return 1231 if arg else 1237
    if isinstance(arg, int):
        if -0x80000000 <= arg <= 0x7FFFFFFF:
            return arg
        v = arg & 0xFFFFFFFFFFFFFFFF
        return _int32(v ^ (v >> 32))
    return java_string_hash(str(arg))


class SelectMessageQueueByHash(MessageQueueSelector):
    """Java ``SelectMessageQueueByHash``: ``mqs[abs(arg.hashCode() % len(mqs))]`` with Java's
    remainder (sign of the dividend) and Java's ``hashCode`` (see :func:`java_hash_code`)."""

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        h = java_hash_code(arg)
        # Java: Math.abs(h % n); h % n keeps h's sign, so its absolute value is |h| mod n
        return mqs[abs(h) % len(mqs)]


class SelectMessageQueueByRandom(MessageQueueSelector):
    """Java ``SelectMessageQueueByRandom``: a random queue (ignores ``arg``)."""

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return mqs[random.randrange(len(mqs))]
