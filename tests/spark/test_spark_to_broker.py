"""DataFrames through a real local Spark into the reference broker, then consumed back.

Both ways in: ``write_dataframe`` (foreachPartition) and the ``rocketmq`` data source. Checks
that each row arrived exactly once with body, tag and keys intact, and that rows sharing a
selector value sit in one queue in partition (send) order.
"""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from rocketmq_sdk.integrations.spark import FieldTemplate, register_data_source, write_dataframe

pytestmark = pytest.mark.spark

embedded = pytest.importorskip("rocketmq_broker.embedded")
sdk = pytest.importorskip("rocketmq_sdk")
if not hasattr(sdk, "PushConsumer"):
    pytest.skip("rocketmq_sdk.PushConsumer is not available yet", allow_module_level=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with embedded.start_dev_cluster(store_dir=str(tmp_path_factory.mktemp("store"))) as c:
        yield c


def consume_all(namesrv: str, topic: str, expected: int, timeout_s: float = 60.0) -> list:
    """Consume ``topic`` with a fresh group until ``expected`` messages arrived (or time out)."""
    got: list = []
    cond = threading.Condition()

    def listener(msgs, context):
        with cond:
            got.extend(msgs)
            cond.notify_all()
        return sdk.ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = sdk.PushConsumer(f"spark_test_{uuid.uuid4().hex[:8]}", namesrv_addr=namesrv)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    consumer.start()
    try:
        deadline = time.monotonic() + timeout_s
        with cond:
            while len(got) < expected and time.monotonic() < deadline:
                cond.wait(timeout=0.2)
            # a short window in which a duplicate would show up
            quiet_until = time.monotonic() + 0.5
            while time.monotonic() < quiet_until:
                cond.wait(timeout=0.1)
            return list(got)
    finally:
        consumer.shutdown()


def _rows_df(spark, n: int, groups: int):
    return (spark.range(n).selectExpr("id", f"cast(id % {groups} AS string) AS k",
                                      "concat('name-', cast(id AS string)) AS name",
                                      "CASE WHEN id % 2 = 0 THEN 'even' ELSE 'odd' END AS parity")
            .repartition(4, "k").sortWithinPartitions("k", "id"))


@pytest.mark.parametrize("batch_size", [1, 16])
def test_write_dataframe_round_trip_keeps_rows_tags_keys_and_per_key_order(spark, cluster, batch_size):
    topic = f"spark_rt_{uuid.uuid4().hex[:6]}"
    result = write_dataframe(_rows_df(spark, 400, 20), cluster.namesrv_addr, topic, tag_col="parity",
                             keys_fn=FieldTemplate("row-{id}"), selector_col="k", batch_size=batch_size)
    assert result.sent == 400 and sum(result.partitions.values()) == 400

    msgs = consume_all(cluster.namesrv_addr, topic, 400)
    bodies = [json.loads(m.body) for m in msgs]
    assert sorted(b["id"] for b in bodies) == list(range(400)), "every row exactly once"
    for m, b in zip(msgs, bodies, strict=True):
        assert b == {"id": b["id"], "k": str(b["id"] % 20), "name": f"name-{b['id']}",
                     "parity": "even" if b["id"] % 2 == 0 else "odd"}
        assert m.tags == b["parity"] and m.keys == [f"row-{b['id']}"] and m.topic == topic
    by_key: dict[str, list] = {}
    for m, b in zip(msgs, bodies, strict=True):
        by_key.setdefault(b["k"], []).append((m.queue_id, m.queue_offset, b["id"]))
    for k, entries in by_key.items():
        assert len({q for q, _, _ in entries}) == 1, f"key {k} spread over several queues"
        ids_in_queue_order = [i for _, _, i in sorted(entries)]
        assert ids_in_queue_order == sorted(ids_in_queue_order), f"key {k} stored out of order"


def test_rocketmq_data_source_writes_every_row(spark, cluster):
    register_data_source(spark)
    topic = f"spark_ds_{uuid.uuid4().hex[:6]}"
    (_rows_df(spark, 200, 5).write.format("rocketmq")
     .option("namesrv", cluster.namesrv_addr).option("topic", topic)
     .option("tagCol", "parity").option("keysTemplate", "row-{id}").option("selectorCol", "k")
     .option("excludeFromBody", "parity").option("batchSize", "8").mode("append").save())

    msgs = consume_all(cluster.namesrv_addr, topic, 200)
    bodies = [json.loads(m.body) for m in msgs]
    assert sorted(b["id"] for b in bodies) == list(range(200))
    assert all(set(b) == {"id", "k", "name"} for b in bodies)
    assert all(m.keys == [f"row-{b['id']}"] for m, b in zip(msgs, bodies, strict=True))



def test_bad_rows_go_to_the_bad_rows_topic_and_the_write_goes_on(spark, cluster):
    register_data_source(spark)
    topic, bad_topic = f"spark_good_{uuid.uuid4().hex[:6]}", f"spark_bad_{uuid.uuid4().hex[:6]}"
    df = spark.range(60).selectExpr(
        "id", "CASE WHEN id % 20 = 7 THEN NULL ELSE concat('b', cast(id AS string)) END AS body",
        "CASE WHEN id = 30 THEN 'x||y' ELSE 'ok' END AS tags").coalesce(1)
    (df.write.format("rocketmq").option("namesrv", cluster.namesrv_addr).option("topic", topic)
     .option("batchSize", "8").option("badRowsTopic", bad_topic).mode("append").save())

    good = consume_all(cluster.namesrv_addr, topic, 56)
    assert sorted(int(m.body[1:]) for m in good) == [i for i in range(60) if i % 20 != 7 and i != 30]
    bad = consume_all(cluster.namesrv_addr, bad_topic, 4)
    by_id = {json.loads(m.body)["id"]: m for m in bad}
    assert sorted(by_id) == [7, 27, 30, 47]
    assert "row 7 of the partition makes no message: the body column 'body' is null" in \
        by_id[7].properties["BAD_ROW_REASON"]
    assert "column 'tags': tag 'x||y' contains '||'" in by_id[30].properties["BAD_ROW_REASON"]
    assert {m.properties["BAD_ROW_TOPIC"] for m in bad} == {topic}
    assert by_id[47].properties["BAD_ROW_INDEX"] == "47"
