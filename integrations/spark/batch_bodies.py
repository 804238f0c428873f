"""SEND_BATCH_MESSAGE bodies straight from Arrow columns: the writer's rows without a ``Message`` each.

:func:`encode_rows` appends one batch entry per row (docs/protocol.md §4.6: TOTALSIZE, MAGIC 0,
BODYCRC 0, FLAG 0, body, properties) to the output buffer of the row's group (its target queue),
with the properties a :class:`rocketmq_sdk.Message` built by :class:`.mapping.RowMessageMapper`
and checked by the producer would carry, in the same order: ``TAGS``, ``KEYS``, ``WAIT`` (true),
the user properties, ``UNIQ_KEY``. The bytes are those of the SDK's ``encode_batch`` for those
messages (tests/spark/test_spark_batch_bodies.py compares them).

Inputs (one Arrow record batch of ``n`` rows; ``stop`` ≤ ``n``):

* a *text column* (body, tags, keys) is either ``(valid, offsets, data)``, an Arrow string or
  binary array's buffers as seen from its first row (``valid``: one byte per row, 0 = null, or
  None when there is no null; ``offsets``: ``n + 1`` little-endian int32, absolute into
  ``data``), or a ``list`` of ``bytes`` / ``str`` / None; tags and keys may be None (no column);
* ``props``: None, or a ``map<string,string>`` column as ``(valid, offsets, keys, values)``,
  ``offsets`` absolute into its key and value text columns (a null value is left out);
* ``key_suffix``: None, or ``(prefix, row_base)``: one more key ``<prefix>-<row_base + row>``;
* ``ids``: the rows' ``UNIQ_KEY`` ids; ``groups``: None (one group) or one int32 per row;
* ``outs[g]`` / ``index[g]``: ``bytearray``s; per entry ``index[g]`` gets two little-endian
  int64, the end of the entry in ``outs[g]`` and its row.

A row that makes no valid message is not appended: ``(row, code)`` goes to ``bad`` (the codes
below). The C twin (``_cbatch_bodies.c`` beside this file) handles the common rows and hands back
any other one (a list item of another type, a map with a repeated or over 64 names) to the
pure-Python twin here, which is the reference (``ROCKETMQ_PURE_PYTHON=1`` uses it alone).
"""

from __future__ import annotations

import struct
from typing import Any

from rocketmq_sdk import _speedups
from rocketmq_sdk.protocol.codes import MessageConst as MC

# why a row makes no message (the first found, in the order RowMessageMapper.to_message checks)
TAG_BAR, BODY_NULL, TAG_SEPARATOR, KEYS_SEPARATOR, PROPERTY_SEPARATOR, PROPERTY_EMPTY, PROPERTY_RESERVED, \
    BODY_EMPTY, BODY_TOO_LARGE, PROPERTIES_TOO_LONG = range(1, 11)
CODE_NAMES = {TAG_BAR: "a tag with '||'", BODY_NULL: "a null body", TAG_SEPARATOR: "a tag with \\x01 or \\x02",
              KEYS_SEPARATOR: "keys with \\x01 or \\x02", PROPERTY_SEPARATOR: "a property with \\x01 or \\x02",
              PROPERTY_EMPTY: "an empty property name or value", PROPERTY_RESERVED: "a reserved property name",
              BODY_EMPTY: "an empty body", BODY_TOO_LARGE: "a body over max_message_size",
              PROPERTIES_TOO_LONG: "properties over 32767 bytes"}
"""What each code means (the writer names the row and column from the mapper's own check)."""

_HEAD = struct.Struct(">iiiii")
_H = struct.Struct(">h")
_Q2 = struct.Struct("<qq")
_I32 = struct.Struct("<i")
_RESERVED = MC.RESERVED
_SEPARATORS = (b"\x01", b"\x02")

_cbatch_bodies = _speedups.load("rocketmq_sdk.integrations.spark._cbatch_bodies")
if _cbatch_bodies is not None:
    _cbatch_bodies.configure(sorted(n.encode() for n in _RESERVED))
    _c_encode_rows = _cbatch_bodies.encode_rows
else:
    _c_encode_rows = None


def _text(col: Any, i: int) -> bytes | None:
    """Row ``i`` of a text column (None: null)."""
    if type(col) is list:
        v = col[i]
        return v.encode("utf-8") if type(v) is str else v
    valid, offsets, data = col
    if valid is not None and not valid[i]:
        return None
    lo, hi = _I32.unpack_from(offsets, 4 * i)[0], _I32.unpack_from(offsets, 4 * i + 4)[0]
    if lo < 0 or hi < lo or hi > len(data):
        raise ValueError(f"offsets {lo}..{hi} of row {i} are outside the data ({len(data)} bytes)")
    return bytes(data[lo:hi])


def _has_separator(value: bytes) -> bool:
    return b"\x01" in value or b"\x02" in value


def encode_row_py(body: Any, tags: Any, keys: Any, props: Any, key_suffix: tuple[str, int] | None, max_body: int,
                  ids: list[str], i: int, groups: Any, outs: list[bytearray], index: list[bytearray],
                  bad: list[tuple[int, int]]) -> None:
    """Append row ``i`` (the pure-Python twin of one C row; see the module docstring)."""
    tag = _text(tags, i) if tags is not None else None
    if tag and b"||" in tag:
        bad.append((i, TAG_BAR))
        return
    value = _text(body, i)
    if value is None:
        bad.append((i, BODY_NULL))
        return
    if tag and _has_separator(tag):
        bad.append((i, TAG_SEPARATOR))
        return
    key = _text(keys, i) if keys is not None else None
    if key and _has_separator(key):
        bad.append((i, KEYS_SEPARATOR))
        return
    if key_suffix is not None:
        suffix = f"{key_suffix[0]}-{key_suffix[1] + i}".encode()
        key = key + b" " + suffix if key else suffix
    user: dict[bytes, bytes] = {}
    if props is not None:
        valid, offsets, names, values = props
        if valid is None or valid[i]:
            lo, hi = _I32.unpack_from(offsets, 4 * i)[0], _I32.unpack_from(offsets, 4 * i + 4)[0]
            for j in range(lo, hi):
                v = _text(values, j)
                if v is None:
                    continue
                k = _text(names, j) or b""
                user[k] = v
    for k, v in user.items():
        if _has_separator(k) or _has_separator(v):
            bad.append((i, PROPERTY_SEPARATOR))
            return
        if not k or not v:
            bad.append((i, PROPERTY_EMPTY))
            return
        if k.decode("utf-8", "replace") in _RESERVED:
            bad.append((i, PROPERTY_RESERVED))
            return
    if not value:
        bad.append((i, BODY_EMPTY))
        return
    if len(value) > max_body:
        bad.append((i, BODY_TOO_LARGE))
        return
    parts = []
    if tag:
        parts.append(b"TAGS\x01" + tag)
    if key:
        parts.append(b"KEYS\x01" + key)
    parts.append(b"WAIT\x01true")
    parts.extend(k + b"\x01" + v for k, v in user.items())
    parts.append(b"UNIQ_KEY\x01" + ids[i].encode())
    text = b"\x02".join(parts)
    if len(text) > 32767:
        bad.append((i, PROPERTIES_TOO_LONG))
        return
    g = _I32.unpack_from(groups, 4 * i)[0] if groups is not None else 0
    out = outs[g]
    out += _HEAD.pack(20 + len(value) + 2 + len(text), 0, 0, 0, len(value))
    out += value
    out += _H.pack(len(text))
    out += text
    index[g] += _Q2.pack(len(out), i)


def encode_rows_py(body: Any, tags: Any, keys: Any, props: Any, key_suffix: tuple[str, int] | None, max_body: int,
                   ids: list[str], start: int, stop: int, groups: Any, outs: list[bytearray],
                   index: list[bytearray], bad: list[tuple[int, int]]) -> int:
    """Rows ``start..stop-1`` (the pure-Python twin of ``_cbatch_bodies.encode_rows``); returns ``stop``."""
    for i in range(start, stop):
        encode_row_py(body, tags, keys, props, key_suffix, max_body, ids, i, groups, outs, index, bad)
    return stop


def encode_rows(body: Any, tags: Any, keys: Any, props: Any, key_suffix: tuple[str, int] | None, max_body: int,
                ids: list[str], n: int, groups: Any, outs: list[bytearray], index: list[bytearray],
                bad: list[tuple[int, int]]) -> None:
    """Append rows ``0..n-1``: with the C twin where it can, else row by row in Python.

    Raises:
        ValueError: a column, id list or group index inconsistent with ``n`` or ``outs``.
    """
    i = 0
    while i < n:
        if _c_encode_rows is not None:
            i = _c_encode_rows(body, tags, keys, props, key_suffix, max_body, ids, i, n, groups, outs, index, bad)
            if i >= n:
                break
        encode_row_py(body, tags, keys, props, key_suffix, max_body, ids, i, groups, outs, index, bad)
        i += 1
