"""write_dataframe through a real local Spark, with a producer that records to files (no broker).

Checks the Spark plumbing: every row sent once, partition order kept per selector value, one
producer per Python worker process reused across partitions, counts and progress reported.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import pytest
from rocketmq_sdk.integrations.spark import (
    FieldTemplate,
    WriteProgress,
    register_data_source,
    write_dataframe,
)

pytestmark = pytest.mark.spark


class FileProducer:
    """Stands in for rocketmq_sdk.Producer in the workers: one JSON line per event."""

    def __init__(self, spec) -> None:
        self.out = Path(dict(spec.config)["out_dir"]) / f"{os.getpid()}-{uuid.uuid4().hex}.jsonl"
        self.fh = None

    def _event(self, **fields) -> None:
        self.fh.write(json.dumps(fields) + "\n")
        self.fh.flush()

    def start(self) -> None:
        self.fh = self.out.open("a")
        self._event(event="start", pid=os.getpid())

    def send(self, msg, selector=None, arg=None, *, timeout_ms=3000):
        self._event(event="send", body=json.loads(msg.body), tags=msg.tags, keys=msg.keys, arg=arg,
                    selector=type(selector).__name__)

    def shutdown(self) -> None:
        self.fh.close()


class ByValueSelector:
    """A stand-in MessageQueueSelector (only its type name is recorded)."""

    def select(self, mqs, msg, arg):
        return mqs[0]


@pytest.fixture(scope="module", autouse=True)
def _ship_this_module_by_value():
    # The workers cannot import this test module; make cloudpickle send FileProducer's code.
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def test_every_row_sent_once_in_partition_order_by_one_producer_per_worker(spark, tmp_path):
    df = (spark.range(300).selectExpr("id", "cast(id % 7 as string) AS k", "id * 2 AS v")
          .repartition(6, "k").sortWithinPartitions("k", "id"))
    seen: list[WriteProgress] = []
    result = write_dataframe(df, "fake:9876", "t", tag_col="k", keys_fn=FieldTemplate("id-{id}"),
                             selector_col="k", selector=ByValueSelector(), producer_factory=FileProducer,
                             producer_config={"out_dir": str(tmp_path)}, progress=seen.append,
                             progress_interval_s=0.1)

    assert result.sent == 300
    assert sorted(result.partitions) == list(range(6)) and sum(result.partitions.values()) == 300
    assert seen and seen[-1].sent == 300 and seen[-1].partitions_done == 6 and seen[-1].partitions_total == 6

    files = sorted(tmp_path.glob("*.jsonl"))
    events = {f: [json.loads(line) for line in f.read_text().splitlines()] for f in files}
    pids = [f.name.split("-")[0] for f in files]
    assert len(pids) == len(set(pids)) <= 2, "one producer per worker process (local[2])"
    assert all(ev[0]["event"] == "start" and sum(e["event"] == "start" for e in ev) == 1 for ev in events.values())

    sends = [e for ev in events.values() for e in ev if e["event"] == "send"]
    assert sorted(e["body"]["id"] for e in sends) == list(range(300))
    for e in sends:
        assert e["body"] == {"id": e["body"]["id"], "k": str(e["body"]["id"] % 7), "v": 2 * e["body"]["id"]}
        assert e["tags"] == e["arg"] == e["body"]["k"] and e["keys"] == [f"id-{e['body']['id']}"]
        assert e["selector"] == "ByValueSelector"
    for ev in events.values():  # within a worker, each selector value's rows went out in id order
        by_key: dict[str, list[int]] = {}
        for e in ev[1:]:
            by_key.setdefault(e["arg"], []).append(e["body"]["id"])
        assert all(ids == sorted(ids) for ids in by_key.values())


def test_empty_dataframe_sends_nothing(spark, tmp_path):
    result = write_dataframe(spark.range(0), "fake:9876", "t", producer_factory=FileProducer,
                             producer_config={"out_dir": str(tmp_path)})
    assert result.sent == 0 and result.throughput == 0.0


def test_data_source_refuses_missing_options_and_unknown_columns(spark):
    register_data_source(spark)
    with pytest.raises(Exception, match="namesrv"):
        spark.range(1).write.format("rocketmq").option("topic", "t").mode("append").save()
    with pytest.raises(Exception, match="tagCol='nope' names no column"):
        (spark.range(1).write.format("rocketmq").option("namesrv", "x:1").option("topic", "t")
         .option("tagCol", "nope").mode("append").save())


def test_demo_flights_load_in_the_send_jobs_layout_without_a_second_shuffle(spark, tmp_path):
    """The flights demo sends the cached flights as loaded: each partition must hold whole tail
    numbers in tail_seq order, and the send's plan must not shuffle again."""
    from flights_kit.data import extract_flights_csv, load_flights

    df = load_flights(spark, extract_flights_csv(tmp_path), rows=3000, partitions=3)
    ordered = df.sortWithinPartitions("tailnum", "tail_seq")
    assert ordered.rdd.getNumPartitions() == 3
    plan = ordered._jdf.queryExecution().executedPlan().toString()
    above_cache = plan.split("InMemoryTableScan", 1)[0]
    assert "Exchange" not in above_cache, plan
    parts = (df.select("tailnum", "tail_seq").rdd
             .mapPartitionsWithIndex(lambda i, rows: [(i, r.tailnum or "", r.tail_seq) for r in rows]).collect())
    assert len(parts) == 3000
    owner: dict[str, int] = {}
    last: dict[str, int] = {}
    for part, tail, seq in parts:  # collect() keeps each partition's row order
        assert owner.setdefault(tail, part) == part, f"tail {tail!r} in partitions {owner[tail]} and {part}"
        assert seq == last.get(tail, 0) + 1, f"tail {tail!r}: tail_seq {seq} after {last.get(tail, 0)}"
        last[tail] = seq
    assert len({p for p, _, _ in parts}) == 3
