"""``format("rocketmq")`` as a source and streaming sink, on ``local[2]`` against the reference broker.

One Spark session and one in-process cluster (SQL92 filtering on) for the module. Messages are
produced with the SDK to chosen queues, so every expectation (which offsets, in which order, with
which bodies) is known exactly. The first test runs before anything registers the format: it
proves Spark found ``pyspark_rocketmq`` by itself.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

pytestmark = pytest.mark.spark

embedded = pytest.importorskip("rocketmq_broker.embedded")
sdk = pytest.importorskip("rocketmq_sdk")

from flights_kit.stream import run_available_now  # noqa: E402
from flights_kit.topic import create_topic  # noqa: E402
from rocketmq_sdk.admin.client import AdminClient  # noqa: E402
from rocketmq_sdk.protocol.message import MessageQueue  # noqa: E402

QUEUES = 3
PER_QUEUE = 40
BIG = ("x" * 9000).encode()  # above the producer's 4 KiB compression threshold


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with embedded.start_dev_cluster(store_dir=str(tmp_path_factory.mktemp("store")), in_process=True,
                                    broker_config={"enable_property_filter": True}) as c:
        yield c


@pytest.fixture
def producer(cluster):
    # per test: Spark queries keep a module-wide producer idle long enough for the broker to
    # close its idle connection, which an explicit-queue send (one attempt) then runs into
    with sdk.Producer("spark_source_test", cluster.namesrv_addr) as p:
        yield p


def new_topic(cluster, queues: int = QUEUES) -> str:
    topic = f"src_{uuid.uuid4().hex[:8]}"
    create_topic(cluster.namesrv_addr, cluster.broker_addr, topic, queues)
    return topic


def send(producer, topic: str, per_queue: int, queues: range, tag_of=lambda i: "TagA" if i % 2 else "TagB",
         first: int = 0) -> dict:
    """Send ``per_queue`` messages to each queue; returns {(queue_id, index): SendResult}."""
    broker = producer.fetch_publish_queues(topic)[0].broker_name
    sent = {}
    for q in queues:
        for i in range(first, first + per_queue):
            body = BIG + f"{q}-{i}".encode() if i == 3 else json.dumps({"q": q, "i": i}).encode()
            msg = sdk.Message(topic, body, tags=tag_of(i), keys=[f"k{q}-{i}", f"n{i}"],
                              properties={"n": str(i), "q": str(q)})
            sent[(q, i)] = producer.send(msg, mq=MessageQueue(topic, broker, q))
    return sent


def reader(spark, cluster, topic: str):
    return spark.read.format("rocketmq").option("nameServer", cluster.namesrv_addr).option("topic", topic)


@pytest.fixture(scope="module")
def filled(cluster):
    topic = new_topic(cluster)
    with sdk.Producer("spark_source_fill", cluster.namesrv_addr) as producer:
        return topic, send(producer, topic, PER_QUEUE, range(QUEUES))


def workers_find_pyspark_rocketmq() -> bool:
    """Whether Spark's Python workers can find ``pyspark_rocketmq`` with ``pkgutil.iter_modules``:
    installed in site-packages (a regular install), or in the working directory they inherit
    (an editable install run from the repository root, as ``make test`` does)."""
    import importlib.util
    import os

    spec = importlib.util.find_spec("pyspark_rocketmq")
    origin = os.path.dirname(spec.origin) if spec is not None and spec.origin else ""
    return "site-packages" in origin or os.path.exists(os.path.join(os.getcwd(), "pyspark_rocketmq.py"))


def test_batch_read_without_registration_returns_every_message_with_its_columns(spark, cluster, filled):
    if not workers_find_pyspark_rocketmq():  # e.g. an editable install run from elsewhere (docs/spark.md)
        from rocketmq_sdk.integrations.spark import register_data_source

        register_data_source(spark)
    topic, sent = filled
    df = reader(spark, cluster, topic).load()
    assert df.columns == ["body", "topic", "tags", "keys", "properties", "broker_name", "queue_id", "queue_offset",
                          "msg_id", "born_timestamp", "store_timestamp", "reconsume_times"]
    assert df.rdd.getNumPartitions() == 1, "a small topic's queues packed into one task (minRowsPerPartition)"
    assert reader(spark, cluster, topic).option("minRowsPerPartition", "1").load().rdd.getNumPartitions() == QUEUES
    rows = df.collect()
    assert len(rows) == QUEUES * PER_QUEUE
    by_id = {r.msg_id: r for r in rows}
    for (q, i), result in sent.items():
        r = by_id[result.msg_id]
        assert (r.queue_id, r.queue_offset, r.topic, r.reconsume_times) == (q, result.queue_offset, topic, 0)
        assert r.body == (BIG + f"{q}-{i}".encode() if i == 3 else json.dumps({"q": q, "i": i}).encode())
        assert r.tags == ("TagA" if i % 2 else "TagB") and r.keys == f"k{q}-{i} n{i}"
        assert r.properties == {"n": str(i), "q": str(q)}, "user properties only"
        assert r.born_timestamp.year >= 2024 and r.store_timestamp >= r.born_timestamp
    for q in range(QUEUES):  # per-queue order: the partition holds the queue in offset order
        offsets = [r.queue_offset for r in rows if r.queue_id == q]
        assert offsets == list(range(PER_QUEUE))


def test_offsets_json_tag_and_sql_filters_and_min_partitions(spark, cluster, filled):
    topic, _ = filled
    broker = reader(spark, cluster, topic).load().first().broker_name
    ranged = (reader(spark, cluster, topic)
              .option("startingOffsets", json.dumps({topic: {f"{broker}/0": 5, f"{broker}/1": -1}}))
              .option("endingOffsets", json.dumps({topic: {f"{broker}/0": 9, f"{broker}/2": 2}})).load())
    got = sorted((r.queue_id, r.queue_offset) for r in ranged.select("queue_id", "queue_offset").collect())
    assert got == [(0, o) for o in range(5, 9)] + [(2, 0), (2, 1)]

    tagged = reader(spark, cluster, topic).option("subExpression", "TagA").load()
    assert sorted(r.queue_offset for r in tagged.where("queue_id = 0").collect()) == list(range(1, PER_QUEUE, 2))
    assert {r.tags for r in tagged.collect()} == {"TagA"}

    sql = (reader(spark, cluster, topic).option("expressionType", "SQL92")
           .option("subExpression", "q = '1' AND n IN ('0', '1', '2', '3', '4')"))
    assert sorted(r.queue_offset for r in sql.load().collect()) == [0, 1, 2, 3, 4]
    assert {r.queue_id for r in sql.load().collect()} == {1}

    split = reader(spark, cluster, topic).option("minPartitions", "7").load()
    assert split.rdd.getNumPartitions() >= 6
    assert split.count() == QUEUES * PER_QUEUE
    assert split.select("msg_id").distinct().count() == QUEUES * PER_QUEUE


def test_starting_and_ending_timestamps_select_by_store_time(spark, cluster, producer):
    topic = new_topic(cluster)
    first = send(producer, topic, 5, range(QUEUES))
    boundary = int(time.time() * 1000) + 2
    while time.time() * 1000 <= boundary:  # the next messages are stored after the boundary
        time.sleep(0.001)
    second = send(producer, topic, 5, range(QUEUES), first=5)
    got = {r.msg_id for r in reader(spark, cluster, topic).option("startingTimestamp", str(boundary)).load().collect()}
    assert got == {r.msg_id for r in second.values()}
    before = {r.msg_id for r in reader(spark, cluster, topic).option("endingTimestamp", str(boundary)).load().collect()}
    assert before == {r.msg_id for r in first.values()}


def test_batch_read_moves_no_group_offsets_unless_commit_group(spark, cluster, filled):
    topic, _ = filled
    reader(spark, cluster, topic).load().count()
    group = f"spark_commit_{uuid.uuid4().hex[:6]}"
    reader(spark, cluster, topic).option("commitGroup", group).load().count()
    assert group_offsets(cluster, group, topic) == [(q, PER_QUEUE) for q in range(QUEUES)]
    with AdminClient(cluster.namesrv_addr) as admin:
        try:
            untouched = admin.consumer_progress("spark_rocketmq_reader", topic).queues
        except sdk.MQClientError:  # not even known as a clustering group: no retry topic
            untouched = []
    assert all(q.consumer_offset <= 0 for q in untouched), "the reader group never commits"


def group_offsets(cluster, group: str, topic: str, timeout_s: float = 15.0) -> list[tuple[int, int]]:
    """(queue id, consumer offset) of ``group`` as ``consumerProgress`` shows them, once the
    group's retry topic is routed (the broker registers it with the name server soon after the
    group's first heartbeat)."""
    deadline = time.monotonic() + timeout_s
    with AdminClient(cluster.namesrv_addr) as admin:
        while True:
            try:
                progress = admin.consumer_progress(group, topic)
                return sorted((q.queue_id, q.consumer_offset) for q in progress.queues)
            except sdk.MQClientError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.1)  # polling the name server for the retry topic's route


def to_parquet(df_stream, sink_dir, checkpoint) -> list:
    """Run ``df_stream`` into a parquet directory with Trigger.AvailableNow; the runs' queries
    (a run whose Python worker did not start in time is resumed from the checkpoint)."""
    return run_available_now(lambda: (df_stream.writeStream.format("parquet").option("path", str(sink_dir))
                                      .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
                                      .start()), timeout_s=300)


@pytest.mark.timeout(900)  # two streaming queries, several micro-batches; slow on a loaded 2-core machine
def test_stream_restart_from_checkpoint_delivers_each_message_once(spark, cluster, producer, tmp_path):
    topic = new_topic(cluster, 2)
    group = f"spark_stream_{uuid.uuid4().hex[:6]}"
    sent = send(producer, topic, 30, range(2))

    def stream():
        return (spark.readStream.format("rocketmq").option("nameServer", cluster.namesrv_addr)
                .option("topic", topic).option("startingOffsets", "earliest")
                .option("maxMessagesPerTrigger", "40").option("commitGroup", group).load()
                .selectExpr("msg_id", "queue_id", "queue_offset", "cast(body AS string) AS body"))

    first = to_parquet(stream(), tmp_path / "out", tmp_path / "chk")
    sizes = [p["numInputRows"] for q in first for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 60 and max(sizes) <= 40 and len(sizes) >= 2, f"admission control: {sizes}"
    # Spark reports a batch done when it plans the next trigger; an AvailableNow run plans once
    # more after its last batch, and the source's commit is on the broker before it answers, so
    # the group is where the run ended (although Spark SIGTERMs the source's process at the stop)
    assert group_offsets(cluster, group, topic) == [(0, 30), (1, 30)], "commitGroup after the first run"

    # while stopped: more messages, and the topic grows a third queue
    create_topic(cluster.namesrv_addr, cluster.broker_addr, topic, 3)
    with sdk.Producer("spark_source_more", cluster.namesrv_addr) as fresh:
        sent.update(send(fresh, topic, 10, range(3), first=30))
    to_parquet(stream(), tmp_path / "out", tmp_path / "chk")

    out = spark.read.parquet(str(tmp_path / "out"))
    ids = [r.msg_id for r in out.select("msg_id").collect()]
    assert len(ids) == len(sent) == 90 and set(ids) == {r.msg_id for r in sent.values()}, "each message once"
    assert out.where("queue_id = 2").count() == 10, "the new queue was picked up from its start"
    assert group_offsets(cluster, group, topic) == [(0, 40), (1, 40), (2, 10)], "commitGroup after the restart"


@pytest.mark.timeout(600)
def test_streaming_write_then_read_round_trip(spark, cluster, filled, tmp_path):
    source, sent = filled
    target = new_topic(cluster, 2)
    stream = (spark.readStream.format("rocketmq").option("nameServer", cluster.namesrv_addr)
              .option("topic", source).option("startingOffsets", "earliest").load())
    runs = run_available_now(lambda: (
        stream.select("body", "tags", "keys", "properties").writeStream.format("rocketmq")
        .option("nameServer", cluster.namesrv_addr).option("topic", target).option("batchSize", "8")
        .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start()), timeout_s=300)
    query = runs[-1]
    copied = reader(spark, cluster, target).load().collect()
    original = {r.msg_id: r for r in reader(spark, cluster, source).load().collect()}
    assert len(copied) == len(original) == len(sent)
    query_id = str(query.id)
    row_ids = set()
    for r in copied:
        keys = r.keys.split(" ")
        assert len(keys) == 3 and keys[2].startswith(f"spark-{query_id}-"), keys
        row_ids.add(keys[2])
    assert len(row_ids) == len(copied), "the dedup key is unique per row"
    as_tuple = sorted((bytes(r.body), r.tags, " ".join(r.keys.split(" ")[:2]), tuple(sorted(r.properties.items())))
                      for r in copied)
    assert as_tuple == sorted((bytes(r.body), r.tags, r.keys, tuple(sorted(r.properties.items())))
                              for r in original.values())


def test_register_data_source_is_harmless_when_spark_found_it(spark, cluster, filled):
    from rocketmq_sdk.integrations.spark import register_data_source

    register_data_source(spark)
    register_data_source(spark)
    topic, _ = filled
    assert reader(spark, cluster, topic).option("namesrv", cluster.namesrv_addr).load().count() == QUEUES * PER_QUEUE
