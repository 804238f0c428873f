"""The bloom-filter positions RocketMQ stores with each consumer filter (``BloomFilter`` of the
``filter`` module, ``bloomFilterData`` in ``consumerFilter.json``).

This broker does not build consume-queue bit maps (``enableCalcFilterBitMap``), so the positions
are only written to ``consumerFilter.json``: a 4.9.8 broker loading the file discards every filter
whose ``bloomFilterData`` does not fit its bloom filter, and these fit the default one
(``maxErrorRateOfBloomFilter`` 20 %, ``expectConsumerNumUseFilter`` 32: 3 hashes over 112 bits).
"""

from __future__ import annotations

import math
import struct
from typing import Any

__all__ = ["BloomFilter", "murmur3_x64_128"]

_MASK64 = (1 << 64) - 1
_C1, _C2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
_BLOCKS = struct.Struct("<QQ")


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK64


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK64
    return k ^ (k >> 33)


def murmur3_x64_128(data: bytes, seed: int = 0) -> tuple[int, int]:
    """MurmurHash3 x64 128-bit of ``data`` as (h1, h2), unsigned 64-bit each (Guava's
    ``Hashing.murmur3_128(seed)``; its ``asLong()`` is h1 as a signed long)."""
    h1 = h2 = seed & _MASK64
    n = len(data) // 16
    for i in range(n):
        k1, k2 = _BLOCKS.unpack_from(data, i * 16)
        k1 = (_rotl((k1 * _C1) & _MASK64, 31) * _C2) & _MASK64
        h1 = ((_rotl(h1 ^ k1, 27) + h2) * 5 + 0x52DCE729) & _MASK64
        k2 = (_rotl((k2 * _C2) & _MASK64, 33) * _C1) & _MASK64
        h2 = ((_rotl(h2 ^ k2, 31) + h1) * 5 + 0x38495AB5) & _MASK64
    tail = data[n * 16:]
    k1 = int.from_bytes(tail[:8], "little")
    k2 = int.from_bytes(tail[8:], "little")
    if k2:
        h2 ^= (_rotl((k2 * _C2) & _MASK64, 33) * _C1) & _MASK64
    if tail:
        h1 ^= (_rotl((k1 * _C1) & _MASK64, 31) * _C2) & _MASK64
    h1 ^= len(data)
    h2 ^= len(data)
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    return h1, h2


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


class BloomFilter:
    """RocketMQ ``BloomFilter.createByFn(f, n)``.

    Args:
        f: error rate in percent (1-99; RocketMQ's ``maxErrorRateOfBloomFilter``, 20).
        n: how many filters it is sized for (``expectConsumerNumUseFilter``, 32).

    Raises:
        ValueError: ``f`` or ``n`` out of range.
    """

    def __init__(self, f: int = 20, n: int = 32) -> None:
        if not 1 <= f < 100 or n < 1:
            raise ValueError(f"bloom filter needs 1 <= f < 100 and n >= 1, got f={f}, n={n}")
        error_rate = f / 100.0
        self.k = math.ceil(math.log(error_rate) / math.log(0.5))
        m = math.ceil(n * math.log(1 / error_rate, 2) * math.log(math.e, 2))
        self.m = 8 * math.ceil(m / 8.0)

    def bit_positions(self, text: str) -> list[int]:
        """The ``k`` bit positions of ``text`` (Kirsch-Mitzenmacher double hashing, Java int math)."""
        h = murmur3_x64_128(text.encode("utf-8"))[0]
        hash1, hash2 = _int32(h), _int32(h >> 32)
        out = []
        for i in range(1, self.k + 1):
            combined = _int32(hash1 + i * hash2)
            if combined < 0:
                combined = ~combined
            out.append(combined % self.m)
        return out

    def generate(self, text: str) -> dict[str, Any]:
        """``BloomFilterData`` of ``text`` as JSON (``{"bitNum": m, "bitPos": [...]}``)."""
        return {"bitNum": self.m, "bitPos": self.bit_positions(text)}
