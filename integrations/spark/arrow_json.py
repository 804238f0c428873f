"""Rows of an Arrow batch as JSON objects, column by column: the writer's default body without a
``dict`` per row.

:func:`json_rows` gives, for each row, exactly the bytes :func:`.mapping.row_to_json` (``orjson``)
writes for that row as :mod:`.arrow_rows` reads it: each column's values become JSON texts in one
step per column, then Arrow's ``binary_join_element_wise`` kernel joins them with the
``{"name":`` ... ``}`` punctuation. Per column:

* integers, booleans: Arrow's cast to text (the same digits, ``true``/``false``);
* floats: one ``orjson.dumps`` of the whole column split at the commas (a JSON number never holds
  one; NaN and infinities are ``null`` as in the row's JSON);
* strings without a character JSON escapes (``"``, ``\\``, controls): the value between quotes;
* anything else (other strings, timestamps, dates, decimals, binary, nested): ``orjson.dumps`` of
  each value with the row encoder's options.

Nulls are ``null``. tests/spark/test_spark_batch_bodies.py compares the result with
``row_to_json`` on generated tables.
"""

from __future__ import annotations

from typing import Any

import orjson

from .arrow_rows import _column_values
from .mapping import _json_default

_NEEDS_ESCAPE = r'[\x00-\x1f"\\]'
_OPT = orjson.OPT_NON_STR_KEYS


def _value_texts(col: Any) -> Any:
    """The JSON text of each value of ``col`` (an Arrow string/binary array; nulls as ``null``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = col.type
    n = len(col)
    null = pa.scalar("null")
    if n == 0:
        return pa.array([], pa.string())
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return pc.fill_null(col.cast(pa.string()), null)
    if pa.types.is_floating(t):
        texts = orjson.dumps(col.to_numpy(zero_copy_only=False).tolist() if col.null_count == 0
                             else col.to_pylist())[1:-1].split(b",")
        return pa.array(texts, pa.binary())
    if (pa.types.is_string(t) or pa.types.is_large_string(t)) and \
            not pc.any(pc.match_substring_regex(col, _NEEDS_ESCAPE)).as_py():
        quoted = pc.binary_join_element_wise(pa.scalar('"'), col, pa.scalar('"'), "")
        return pc.fill_null(quoted, null)
    dumps, default = orjson.dumps, _json_default
    return pa.array([dumps(v, default=default, option=_OPT) for v in _column_values(col)], pa.binary())


def json_rows(plain: Any, exclude: tuple[str, ...] = ()) -> Any | None:
    """Each row of ``plain`` (an Arrow record batch, time zones already applied as
    :func:`.arrow_rows._plain_batch` does) as the UTF-8 JSON object ``row_to_json`` writes, as a
    binary array; None when two columns share a name (a row ``dict`` would keep one: the caller
    takes the row-by-row way).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(set(plain.schema.names)) != len(plain.schema.names):
        return None
    names = [n for n in plain.schema.names if n not in exclude]
    if not names:
        return pa.array([b"{}"] * plain.num_rows, pa.binary())
    parts: list[Any] = []
    for i, name in enumerate(names):
        key = orjson.dumps(name).decode()
        parts.append(pa.scalar(("{" if i == 0 else ",") + key + ":"))
        parts.append(_value_texts(plain.column(name)).cast(pa.binary()))
    parts.append(pa.scalar("}"))
    return pc.binary_join_element_wise(*[p.cast(pa.binary()) for p in parts], pa.scalar(b""))
