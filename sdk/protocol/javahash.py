"""Java ``String.hashCode()`` for Python strings.

RocketMQ uses it for tag hash codes stored in the consume queue and for
``SelectMessageQueueByHash``; Python's ``hash()`` is salted per process, so it must never be
used where Java and Python clients have to agree.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=4096)
def java_string_hash(s: str) -> int:
    """Return Java's ``s.hashCode()``: ``h = 31*h + c`` over UTF-16 code units, int32 wrap-around.

    >>> java_string_hash("TagA")
    2598919
    """
    h = 0
    if s.isascii():
        for ch in s.encode("ascii"):
            h = (31 * h + ch) & 0xFFFFFFFF
    else:
        data = s.encode("utf-16-be")
        for i in range(0, len(data), 2):
            h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def java_mod(a: int, n: int) -> int:
    """Java's ``a % n`` for ints (the result takes the sign of ``a``)."""
    r = abs(a) % n
    return -r if a < 0 else r


def java_abs_mod(a: int, n: int) -> int:
    """Java's ``Math.abs(a % n)``: the queue index ``SelectMessageQueueByHash`` picks for a key
    whose ``hashCode()`` is ``a`` among ``n`` queues. Always in ``[0, n)``; stable across
    processes and languages, unlike Python's salted ``hash()``.

    >>> java_abs_mod(java_string_hash("order-1"), 4)  # hashCode -1207111310
    2
    """
    return abs(a) % n


def select_queue_index_by_hash(key: str, n: int) -> int:
    """Index among ``n`` queues for a string key, as Java ``SelectMessageQueueByHash`` with a
    ``String`` argument."""
    return java_abs_mod(java_string_hash(key), n)
