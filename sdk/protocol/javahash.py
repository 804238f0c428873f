"""Java ``String.hashCode()`` for Python strings.

RocketMQ uses it for tag hash codes stored in the consume queue and for
``SelectMessageQueueByHash``; Python's ``hash()`` is salted per process, so it must never be
used where Java and Python clients have to agree.
"""

from __future__ import annotations

from functools import lru_cache
from operator import mul

_POW_N = 256
#: 31**(255) ... 31**0 modulo 2**32: an ASCII string of n <= 256 characters hashes as
#: sum(c_i * 31**(n-1-i)) mod 2**32, one C-level map/sum instead of a Python loop per character.
_POW31_DESC = [pow(31, _POW_N - 1 - i, 1 << 32) for i in range(_POW_N)]


def java_string_hash(s: str) -> int:
    """Return Java's ``s.hashCode()``: ``h = 31*h + c`` over UTF-16 code units, int32 wrap-around.

    Short strings (tags, keys) are memoised; long ones (index keys ``topic#UNIQ_KEY``, unique
    per message) are not, so they never evict the useful entries.

    >>> java_string_hash("TagA")
    2598919
    """
    return _hash_cached(s) if len(s) <= 24 else _hash(s)


def _hash(s: str) -> int:
    h = 0
    if s.isascii():
        data = s.encode("ascii")
        n = len(data)
        if n <= _POW_N:
            h = sum(map(mul, data, _POW31_DESC[_POW_N - n:])) & 0xFFFFFFFF
        else:
            for ch in data:
                h = (31 * h + ch) & 0xFFFFFFFF
    else:
        data = s.encode("utf-16-be")
        for i in range(0, len(data), 2):
            h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


_hash_cached = lru_cache(maxsize=4096)(_hash)


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
