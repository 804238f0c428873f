"""The sink side without Spark: Kafka-style column defaults, delay level, properties, dedup keys."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.types import IntegerType, MapType, StringType, StructField, StructType  # noqa: E402
from rocketmq_sdk.exceptions import IllegalArgumentError  # noqa: E402
from rocketmq_sdk.integrations.spark.sink import writer_args_from_options  # noqa: E402
from rocketmq_sdk.integrations.spark.stream_writer import RowIdKeys  # noqa: E402

SCHEMA = StructType([StructField("body", StringType()), StructField("tags", StringType()),
                     StructField("keys", StringType()), StructField("properties", MapType(StringType(), StringType())),
                     StructField("delay_time_level", IntegerType()), StructField("other", StringType())])
ROW = {"body": "hello", "tags": "TagA", "keys": "k1 k2", "properties": {"a": "1"}, "delay_time_level": 3,
       "other": "x"}


def test_columns_named_like_the_source_are_used_by_name():
    args = writer_args_from_options({"nameServer": "h:1", "topic": "t"}, SCHEMA)
    mapper, spec, timeout_ms, batch = args.mapper, args.spec, args.send_timeout_ms, args.batch_size
    msg = mapper.to_message(ROW)
    assert (msg.body, msg.tags, msg.keys, msg.user_properties, msg.delay_time_level) == (
        b"hello", "TagA", ["k1", "k2"], {"a": "1"}, 3)
    assert spec.namesrv_addr == "h:1" and (timeout_ms, batch, args.max_batch_bytes) == (3000, 1, 1024 * 1024)


def test_options_win_over_column_names_and_namesrv_alias_still_works():
    args = writer_args_from_options({"namesrv": "h:2", "topic": "t", "bodyCol": "other",
                                    "keysTemplate": "id-{other}", "maxBatchBytes": "4096"}, SCHEMA)
    mapper, spec = args.mapper, args.spec
    assert args.max_batch_bytes == 4096
    msg = mapper.to_message(ROW)
    assert (msg.body, msg.keys, spec.namesrv_addr) == (b"x", ["id-x"], "h:2")


def test_missing_name_server_or_unknown_column_fail_early():
    with pytest.raises(IllegalArgumentError, match="nameServer"):
        writer_args_from_options({"topic": "t"}, SCHEMA)
    with pytest.raises(IllegalArgumentError, match="delayCol='nope'"):
        writer_args_from_options({"nameServer": "h:1", "topic": "t", "delayCol": "nope"}, SCHEMA)


def test_row_id_keys_number_rows_in_mapping_order():
    mapper = writer_args_from_options({"nameServer": "h:1", "topic": "t"}, SCHEMA).mapper
    wrapped = RowIdKeys(mapper, "spark-q-7-2")
    keys = [wrapped.to_message(ROW).keys for _ in range(3)]
    assert keys == [["k1", "k2", f"spark-q-7-2-{i}"] for i in range(3)]
    assert wrapped.topic == "t" and not wrapped.uses_selector


def test_rows_sent_through_row_id_keys_carry_their_key_and_name_their_column_when_bad():
    from rocketmq_sdk.integrations.spark import send_rows

    class Producer:
        def __init__(self) -> None:
            self.keys: list[list[str]] = []

        def send(self, msg, *, timeout_ms=3000):
            self.keys.append(msg.keys)

    mapper = writer_args_from_options({"nameServer": "h:1", "topic": "t"}, SCHEMA).mapper
    producer = Producer()
    assert send_rows([ROW, ROW], RowIdKeys(mapper, "spark-q-1-0"), producer) == 2
    assert producer.keys == [["k1", "k2", "spark-q-1-0-0"], ["k1", "k2", "spark-q-1-0-1"]]
    with pytest.raises(IllegalArgumentError, match="row 1 .*column 'body' is null"):
        send_rows([ROW, {**ROW, "body": None}], RowIdKeys(mapper, "p"), producer)
