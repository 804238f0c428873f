"""A topic deleted while the source reads it: the read fails with a clear error, or with
``failOnDataLoss=false`` skips the rest of the range (as Spark's Kafka source). The executor-side
range reader is called directly (no Spark session)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
embedded = pytest.importorskip("rocketmq_broker.embedded")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

from flights_kit.topic import create_topic  # noqa: E402
from pyspark.sql import types as T  # noqa: E402
from rocketmq_sdk import Message, Producer  # noqa: E402
from rocketmq_sdk.admin.client import AdminClient  # noqa: E402
from rocketmq_sdk.exceptions import MQClientError  # noqa: E402
from rocketmq_sdk.integrations.spark.consumers import get_pull_consumer  # noqa: E402
from rocketmq_sdk.integrations.spark.offsets import QueueRange  # noqa: E402
from rocketmq_sdk.integrations.spark.read_options import ReadOptions  # noqa: E402
from rocketmq_sdk.integrations.spark.reader import read_range  # noqa: E402

SCHEMA = T.StructType([
    T.StructField("body", T.BinaryType()), T.StructField("topic", T.StringType()),
    T.StructField("tags", T.StringType()), T.StructField("keys", T.StringType()),
    T.StructField("properties", T.MapType(T.StringType(), T.StringType())),
    T.StructField("broker_name", T.StringType()), T.StructField("queue_id", T.IntegerType()),
    T.StructField("queue_offset", T.LongType()), T.StructField("msg_id", T.StringType()),
    T.StructField("born_timestamp", T.TimestampType()), T.StructField("store_timestamp", T.TimestampType()),
    T.StructField("reconsume_times", T.IntegerType())])


@pytest.mark.parametrize("fail_on_data_loss", [True, False])
def test_a_topic_deleted_mid_read_fails_clearly_or_is_skipped(tmp_path, fail_on_data_loss):
    with embedded.start_dev_cluster(store_dir=str(tmp_path), in_process=True) as cluster:
        topic = f"gone_{fail_on_data_loss}"
        create_topic(cluster.namesrv_addr, cluster.broker_addr, topic, 1)
        with Producer("deleted_topic_test", cluster.namesrv_addr) as producer:
            for i in range(100):
                producer.send(Message(topic, f"m{i}".encode()))
        opts = ReadOptions.parse({"nameServer": cluster.namesrv_addr, "topic": topic, "pullBatchSize": "10",
                                  "pullsInFlight": "1", "failOnDataLoss": str(fail_on_data_loss).lower()},
                                 streaming=False)
        part = QueueRange(opts, topic, "broker-a", 0, 0, 100)
        consumer = get_pull_consumer(cluster.namesrv_addr, opts.group)  # the task's, with the topic's route
        assert consumer.pull_raw(part.queue, "*", 0, 1)[0].next_begin_offset == 1
        batches = read_range(part, SCHEMA)
        rows = 0
        with AdminClient(cluster.namesrv_addr) as admin:
            admin.delete_topic(topic, cluster="DefaultCluster")
        if fail_on_data_loss:
            with pytest.raises(MQClientError, match=rf"topic {topic} no longer exists.*offsets 0\.\.99"):
                for batch in batches:
                    rows += batch.num_rows
        else:
            rows = sum(b.num_rows for b in batches)
        assert rows == 0
