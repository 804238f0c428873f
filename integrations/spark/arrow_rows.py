"""Arrow record batches as the writer's rows: what ``mapInArrow`` and Spark's Arrow writers
(``DataSourceArrowWriter``, ``DataSourceStreamArrowWriter``) hand a Python task.

Spark sends a partition to Python as Arrow batches (columnar, no pickled ``Row`` per row); each
batch becomes plain ``dict`` rows in one C-level conversion (``RecordBatch.to_pylist``), which
:class:`.mapping.RowMessageMapper` reads like ``Row`` objects. Values are those a ``Row``
holds: map columns as ``dict``, timestamps as naive local date-times (the wall time in Spark's
session time zone), dates, decimals, nested structs as ``dict``. A mapper with functions of its
own (``body``, ``tag_fn``, ``keys_fn``...; not :class:`.mapping.FieldTemplate` or
:class:`.mapping.ColumnValue`) gets ``pyspark.sql.Row`` objects, as with ``foreachPartition``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from .mapping import ColumnValue, FieldTemplate, RowMessageMapper


def needs_row_objects(mapper: RowMessageMapper) -> bool:
    """True when a part of ``mapper`` is a user function (it may read ``row.column`` attributes)."""
    parts = (mapper.body if callable(mapper.body) else None, mapper.tag_fn, mapper.keys_fn, mapper.properties_fn,
             mapper.selector_fn)
    return any(p is not None and not isinstance(p, FieldTemplate | ColumnValue) for p in parts)


def _plain_batch(batch: Any) -> Any:
    """``batch`` with timezone-aware timestamp columns as naive wall times in their time zone."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = list(batch.columns)
    changed = False
    for i, col in enumerate(columns):
        if pa.types.is_timestamp(col.type) and col.type.tz is not None:
            columns[i] = pc.local_timestamp(col)
            changed = True
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names) if changed else batch


def _column_values(col: Any) -> list[Any]:
    """The Python values of one Arrow column (numbers and strings without nulls through numpy,
    in C; anything else value by value, maps as ``dict``)."""
    import pyarrow as pa

    t = col.type
    if col.null_count == 0:
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
            return col.to_numpy(zero_copy_only=False).tolist()
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return col.to_numpy(zero_copy_only=False).tolist()
    return col.to_pylist(maps_as_pydicts="lossy")


def arrow_rows(batches: Iterable[Any], *, row_objects: bool = False) -> Iterator[Any]:
    """The rows of Arrow ``batches``, in order: ``dict`` per row (``pyspark.sql.Row`` with
    ``row_objects``)."""
    row_type = None
    if row_objects:
        from pyspark.sql import Row

        row_type = Row
    for batch in batches:
        plain = _plain_batch(batch)
        names = plain.schema.names
        rows = [dict(zip(names, values, strict=True))
                for values in zip(*(_column_values(c) for c in plain.columns), strict=True)]
        if row_type is None:
            yield from rows
        else:
            for row in rows:
                yield row_type(**row)
