"""Held pulls are re-checked periodically, as Java's ``PullRequestHoldService`` does every 5 s:
a held SQL92 pull for which only non-matching messages arrived is answered at the next check
(PULL_RETRY_IMMEDIATELY, NO_MATCHED_MESSAGE, offset moved past them), not at its own suspend
timeout."""

from __future__ import annotations

import threading
import time

import pytest
from rocketmq_sdk import Message, Producer, PullConsumer, PullStatus
from rocketmq_sdk.protocol.codes import PullSysFlag
from rocketmq_sdk.protocol.message import MessageQueue

from tests.consumer.helpers import unique
from tests.filter.test_sql92_pull import _raw_pull

embedded = pytest.importorskip("rocketmq_broker.embedded")

CHECK_MS = 300
SUSPEND_MS = 20_000


@pytest.fixture(scope="module")
def cluster():
    config = {"enable_property_filter": True, "pull_hold_check_interval": CHECK_MS}
    with embedded.start_dev_cluster(in_process=True, broker_config=config) as c:
        yield c


def test_held_sql_pull_is_answered_retry_immediately_within_a_check_period(cluster):
    topic, group = unique("TopicRecheck"), unique("cgrecheck")
    with Producer(unique("pgrecheck"), cluster.namesrv_addr) as producer, \
            PullConsumer(unique("cgwire"), cluster.namesrv_addr) as wire:
        sent = producer.send(Message(topic, b"seed", properties={"a": "1"}))
        mq0 = MessageQueue(topic, sent.message_queue.broker_name, 0)
        start = producer.send(Message(topic, b"seed0", properties={"a": "1"}), mq=mq0).queue_offset + 1
        wire.fetch_subscribe_message_queues("TBW102")
        broker = cluster.broker
        out: dict = {}

        def held_pull() -> None:
            out["result"] = _raw_pull(wire, topic=topic, group=group, subscription="a > 5",
                                      sys_flag=PullSysFlag.build(False, True, True), offset=start,
                                      suspend_ms=SUSPEND_MS, timeout_ms=SUSPEND_MS + 5000)
            out["at"] = time.monotonic()

        t = threading.Thread(target=held_pull, daemon=True)
        t.start()
        deadline = time.monotonic() + 10
        while not broker.pull._held.get((topic, 0)):
            assert time.monotonic() < deadline, "the pull was never held"
            time.sleep(0.02)
        sent_at = time.monotonic()
        producer.send(Message(topic, b"small", properties={"a": "2"}), mq=mq0)  # no match: no wake-up
        t.join(SUSPEND_MS / 1000 / 2)
        assert "result" in out, "the held pull waited for its suspend timeout"
        answered_after = out["at"] - sent_at
        assert answered_after < SUSPEND_MS / 1000 / 3  # a few check periods, far from the timeout
        result = out["result"]
        assert result.pull_status is PullStatus.NO_MATCHED_MSG  # PULL_RETRY_IMMEDIATELY
        assert result.next_begin_offset == start + 1  # moved past the unmatched message
        assert not broker.pull._held.get((topic, 0))
