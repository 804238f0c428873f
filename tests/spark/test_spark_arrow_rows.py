"""Arrow record batches as the writer's rows (integrations/spark/arrow_rows.py; no Spark session)."""

from __future__ import annotations

import datetime as dt

import pytest
from rocketmq_sdk.integrations.spark import FieldTemplate, RowMessageMapper
from rocketmq_sdk.integrations.spark.arrow_rows import arrow_rows, needs_row_objects
from rocketmq_sdk.integrations.spark.mapping import ColumnValue

pa = pytest.importorskip("pyarrow")


def test_rows_hold_the_values_a_spark_row_holds():
    batch = pa.RecordBatch.from_pydict({
        "i": pa.array([1, None], pa.int32()), "f": pa.array([1.5, 2.0]), "s": pa.array(["a", None]),
        "b": pa.array([b"x", b"y"]), "ok": pa.array([True, False]),
        "m": pa.array([[("k", "v")], []], pa.map_(pa.string(), pa.string())),
        "t": pa.array([1_356_998_400_000_000, None], pa.timestamp("us", tz="America/New_York")),
        "d": pa.array([dt.date(2013, 1, 1), dt.date(2013, 1, 2)]),
        "n": pa.array([{"a": 1}, {"a": 2}], pa.struct([("a", pa.int64())]))})
    rows = list(arrow_rows([batch, batch.slice(0, 1)]))
    assert rows[0] == {"i": 1, "f": 1.5, "s": "a", "b": b"x", "ok": True, "m": {"k": "v"},
                       "t": dt.datetime(2012, 12, 31, 19, 0), "d": dt.date(2013, 1, 1), "n": {"a": 1}}
    assert rows[1] == {"i": None, "f": 2.0, "s": None, "b": b"y", "ok": False, "m": {}, "t": None,
                       "d": dt.date(2013, 1, 2), "n": {"a": 2}}
    assert rows[2] == rows[0] and len(rows) == 3
    assert [type(v) for v in rows[0].values()][:3] == [int, float, str]


def test_user_functions_get_row_objects_and_the_recipe_helpers_dicts():
    assert not needs_row_objects(RowMessageMapper("t", body="b", keys_fn=FieldTemplate("{a}"),
                                                  properties_fn=ColumnValue("p")))
    mapper = RowMessageMapper("t", tag_fn=lambda row: row.carrier)
    assert needs_row_objects(mapper)
    batch = pa.RecordBatch.from_pydict({"carrier": ["UA"]})
    (row,) = arrow_rows([batch], row_objects=True)
    assert mapper.to_message(row).tags == "UA"
