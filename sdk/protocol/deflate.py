"""zlib streams of message bodies: `zlib-ng <https://github.com/pycompression/python-zlib-ng>`_
when it is installed (the ``fast`` extra: ``pip install "rocketmq-python-sdk[fast]"``), else the
standard library's ``zlib``.

Both write and read the same format (RFC 1950, what Java's ``Deflater``/``Inflater`` and the C++
client's zlib use), so either side of a topic may use either; at the same level zlib-ng's output
can differ byte for byte from zlib's (another match finder) and inflates to the same body.
Measured on the 2-core benchmark machine: a 16 KiB JSON body compresses 48 → 38 µs and inflates
10.7 → 4.7 µs (``benchmarks/profiling/LOG.md``, 2026-11-25, zlib-ng).

``ROCKETMQ_ZLIB=zlib`` (read once, at import) keeps the standard library's module even when
zlib-ng is installed.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from typing import cast

__all__ = ["ERRORS", "IMPLEMENTATION", "compress", "decompress"]


def _choose() -> tuple[str, Callable[[bytes, int], bytes], Callable[[bytes], bytes], tuple[type[Exception], ...]]:
    if os.environ.get("ROCKETMQ_ZLIB", "").strip().lower() != "zlib":
        try:
            from zlib_ng import zlib_ng
        except ImportError:
            pass
        else:
            # zlib_ng's stub types ``error`` as an instance; at run time it is the exception class
            ng_error = cast("type[Exception]", zlib_ng.error)
            return "zlib-ng", zlib_ng.compress, zlib_ng.decompress, (ng_error, zlib.error)
    return "zlib", zlib.compress, zlib.decompress, (zlib.error,)


#: "zlib-ng" or "zlib": the module in use.
IMPLEMENTATION: str
#: ``compress(data: bytes, level: int) -> bytes``: a zlib stream of ``data`` (level 0-9, -1 default).
compress: Callable[[bytes, int], bytes]
#: ``decompress(data: bytes) -> bytes``: the inflated zlib stream; raises one of :data:`ERRORS`.
decompress: Callable[[bytes], bytes]
#: the exception types a corrupt stream raises (``except ERRORS``).
ERRORS: tuple[type[Exception], ...]
IMPLEMENTATION, compress, decompress, ERRORS = _choose()
