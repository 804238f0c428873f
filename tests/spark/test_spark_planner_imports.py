"""What Spark's driver-side planner processes import (issue 28): ``create_data_source`` and
``plan_data_source_read`` import the ``rocketmq`` source in fresh Python processes on a session's
first read, so everything the source imports there is paid before the first task. Planning a read
needs the source, its options, the range planner and a ``PullConsumer``: not the writer, the
record decoder, the producer, the other consumers, tracing, admin or gRPC."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

NOT_FOR_PLANNING = (
    "rocketmq_sdk.integrations.spark.writer", "rocketmq_sdk.integrations.spark.sink",
    "rocketmq_sdk.integrations.spark.arrow_send", "rocketmq_sdk.integrations.spark.arrow_records",
    "rocketmq_sdk.integrations.spark._carrow_records", "rocketmq_sdk.integrations.spark.batch_bodies",
    "rocketmq_sdk.integrations.spark.mapping", "orjson",
    "rocketmq_sdk.producer.producer", "rocketmq_sdk.consumer.push_consumer",
    "rocketmq_sdk.consumer.lite_pull_consumer", "rocketmq_sdk.consumer.simple_consumer",
    "rocketmq_sdk.consumer.pop_consume", "rocketmq_sdk.trace.dispatcher", "rocketmq_sdk.admin",
    "rocketmq_sdk.protocol.admin_bodies", "rocketmq_sdk.grpc", "grpc", "google.protobuf",
)

PLANNERS = """
import sys
from pyspark.sql.types import StructType
import pyspark_rocketmq                                     # Spark's lookup of pyspark_* modules
source = pyspark_rocketmq.DefaultSource({"nameServer": "127.0.0.1:1", "topic": "t"})
source.schema()                                             # create_data_source
source.reader(StructType())                                 # plan_data_source_read ...
source.streamReader(StructType())                           # ... and the streaming source runner
from rocketmq_sdk import PullConsumer                       # what partitions() starts
print("\\n".join(sys.modules))
"""


def test_planning_a_read_imports_no_writer_decoder_or_other_client():
    done = subprocess.run([sys.executable, "-c", PLANNERS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = set(done.stdout.split())
    assert "rocketmq_sdk.consumer.pull_consumer" in loaded  # the probe did plan
    assert not loaded & set(NOT_FOR_PLANNING), sorted(loaded & set(NOT_FOR_PLANNING))


def test_the_writer_is_still_there_when_a_write_is_planned():
    from pyspark.sql.types import StringType, StructField, StructType
    from rocketmq_sdk.integrations.spark import RowMessageMapper, write_dataframe  # lazy names resolve
    from rocketmq_sdk.integrations.spark.datasource import RocketMQDataSource

    writer = RocketMQDataSource({"nameServer": "h:1", "topic": "t"}).writer(
        StructType([StructField("body", StringType())]), overwrite=False)
    assert type(writer).__module__ == "rocketmq_sdk.integrations.spark.sink"
    assert writer.mapper.topic == "t" and callable(write_dataframe) and RowMessageMapper
