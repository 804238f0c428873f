"""``commitGroup`` of the streaming source against the reference broker, without a Spark session.

Spark runs a Python streaming source in a process of its own and ends it with SIGTERM when the
query stops (``PythonStreamingSourceRunner.stop`` destroys the process): the reader's ``stop()``
and ``atexit`` never run there. A commit must therefore be on the broker when ``commit()`` /
``latestOffset()`` return, not in an offset store waiting for its next persist.
"""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
import time
import uuid

import pytest

pytest.importorskip("pyspark")
embedded = pytest.importorskip("rocketmq_broker.embedded")
sdk = pytest.importorskip("rocketmq_sdk")

from flights_kit.topic import create_topic  # noqa: E402
from rocketmq_sdk.admin.client import AdminClient  # noqa: E402
from rocketmq_sdk.integrations.spark.read_options import ReadOptions, offsets_to_json  # noqa: E402
from rocketmq_sdk.integrations.spark.stream_reader import RocketMQStreamReader  # noqa: E402
from rocketmq_sdk.protocol.message import MessageQueue  # noqa: E402

PER_QUEUE = 10

# a streaming source's process as Spark runs it: commit, answer Spark, then be killed
CHILD = """
import json, sys
from rocketmq_sdk.integrations.spark.read_options import ReadOptions
from rocketmq_sdk.integrations.spark.stream_reader import RocketMQStreamReader
ns, topic, group, end = sys.argv[1:]
reader = RocketMQStreamReader(ReadOptions.parse({"nameServer": ns, "topic": topic, "commitGroup": group},
                                                streaming=True), None)
reader.commit(json.loads(end))
print("committed", flush=True)
sys.stdin.read()  # until Spark's SIGTERM
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with embedded.start_dev_cluster(store_dir=str(tmp_path_factory.mktemp("store")), in_process=True) as c:
        yield c


@pytest.fixture
def topic(cluster):
    name = f"commit_{uuid.uuid4().hex[:8]}"
    create_topic(cluster.namesrv_addr, cluster.broker_addr, name, 2)
    with sdk.Producer("spark_commit_test", cluster.namesrv_addr) as producer:
        broker = producer.fetch_publish_queues(name)[0].broker_name
        for q in range(2):
            for i in range(PER_QUEUE):
                producer.send(sdk.Message(name, f"{q}-{i}".encode()), mq=MessageQueue(name, broker, q))
    return name, broker


def stream_reader(cluster, topic: str, group: str) -> RocketMQStreamReader:
    options = ReadOptions.parse({"nameServer": cluster.namesrv_addr, "topic": topic, "commitGroup": group},
                                streaming=True)
    return RocketMQStreamReader(options, None)


def broker_offsets(cluster, group: str, queues: list[MessageQueue]) -> list[int]:
    """The group's offsets as the broker stores them now (QUERY_CONSUMER_OFFSET; -1: none)."""
    with AdminClient(cluster.namesrv_addr) as admin:
        return [admin.consume_offset(group, mq) for mq in queues]


def test_commit_is_on_the_broker_when_spark_kills_the_source_process(cluster, topic):
    name, broker = topic
    group = f"spark_killed_{uuid.uuid4().hex[:6]}"
    queues = [MessageQueue(name, broker, q) for q in range(2)]
    end = json.dumps(offsets_to_json({queues[0]: 7, queues[1]: 9}))
    child = subprocess.Popen([sys.executable, "-c", CHILD, cluster.namesrv_addr, name, group, end],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([child.stdout], [], [], 60)
        assert ready and child.stdout.readline().strip() == "committed", "the child did not commit within 60 s"
        child.send_signal(signal.SIGTERM)  # as Spark stops a streaming source's Python process
        assert child.wait(timeout=30) == -signal.SIGTERM, "killed by the signal: no stop(), no atexit"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
    assert broker_offsets(cluster, group, queues) == [7, 9], "the commit was acknowledged before it returned"


def test_two_readers_of_one_commit_group_in_one_process_both_commit(cluster, topic):
    # Spark may plan several queries (or runs of one query) in one Python process; each
    # commit of each reader reaches the broker, none is stopped in between
    name, broker = topic
    group = f"spark_shared_{uuid.uuid4().hex[:6]}"
    queues = [MessageQueue(name, broker, q) for q in range(2)]
    first, second = stream_reader(cluster, name, group), stream_reader(cluster, name, group)
    try:
        first.latestOffset(offsets_to_json({queues[0]: 3, queues[1]: 4}), None)  # Spark: batch up to here done
        assert broker_offsets(cluster, group, queues) == [3, 4]
        second.commit(offsets_to_json({queues[0]: 5, queues[1]: 6}))
        assert broker_offsets(cluster, group, queues) == [5, 6]
        first.commit(offsets_to_json({queues[0]: PER_QUEUE, queues[1]: 8}))
        assert broker_offsets(cluster, group, queues) == [PER_QUEUE, 8]
        # announced to the brokers as a consumer of the topic: consumerProgress finds the group
        deadline = time.monotonic() + 30
        with AdminClient(cluster.namesrv_addr) as admin:
            while True:
                try:
                    progress = admin.consumer_progress(group, name)
                    break
                except sdk.MQClientError:  # the retry topic's route is not registered yet
                    if time.monotonic() > deadline:
                        raise
                time.sleep(0.1)  # polling the name server for the group's retry topic
        assert sorted((q.queue_id, q.consumer_offset, q.broker_offset) for q in progress.queues) == \
            [(0, PER_QUEUE, PER_QUEUE), (1, 8, PER_QUEUE)]
    finally:
        first.stop()
        second.stop()


def test_a_failed_commit_is_logged_and_made_again_at_the_next_trigger(cluster, topic, caplog):
    name, broker = topic
    group = f"spark_retry_{uuid.uuid4().hex[:6]}"
    queues = [MessageQueue(name, broker, q) for q in range(2)]
    reader = stream_reader(cluster, name, group)
    reader.options = ReadOptions.parse({"nameServer": "127.0.0.1:1", "topic": name, "commitGroup": group},
                                       streaming=True)  # no name server there: the commit fails
    try:
        with caplog.at_level("WARNING", logger="rocketmq_sdk.integrations.spark"):
            reader.commit(offsets_to_json({queues[0]: 2, queues[1]: 2}))  # does not fail the query
        assert any(f"commit to consumer group {group} failed" in r.getMessage() for r in caplog.records)
        reader.options = ReadOptions.parse({"nameServer": cluster.namesrv_addr, "topic": name,
                                            "commitGroup": group}, streaming=True)
        reader.commit(offsets_to_json({queues[0]: 2, queues[1]: 2}))  # the same end, Spark's next trigger
        assert broker_offsets(cluster, group, queues) == [2, 2]
    finally:
        reader.stop()
