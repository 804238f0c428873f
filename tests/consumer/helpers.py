"""Shared helpers of the consumer tests: deadline polling, unique names, fast settings, a
listener that records deliveries."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

from rocketmq_sdk import ConsumeConcurrentlyStatus

from tests.conftest import wait_until  # noqa: F401 - shared with the consumer tests

#: short intervals so rebalances, persists and long polls settle within a second or two
FAST = {"suspend_timeout": 1000, "pull_timeout": 4000, "rebalance_interval": 500,
        "persist_consumer_offset_interval": 300, "consume_from_where": "CONSUME_FROM_FIRST_OFFSET"}
_names = itertools.count()



def unique(prefix: str) -> str:
    return f"{prefix}_{next(_names)}_{int(time.time() * 1000) % 100000}"


class Collector:
    """Thread-safe record of what a listener saw: (consumer name, msg) in delivery order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[str, object]] = []

    def listener(self, name: str, result: Callable[[object], ConsumeConcurrentlyStatus] | None = None):
        def fn(msgs, ctx):
            with self.lock:
                self.seen.extend((name, m) for m in msgs)
            if result is not None:
                for m in msgs:
                    status = result(m)
                    if status is not ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
                        return status
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        return fn

    def bodies(self) -> list[bytes]:
        with self.lock:
            return [m.body for _, m in self.seen]

    def count(self) -> int:
        with self.lock:
            return len(self.seen)


def owned(consumer, topic: str) -> set:
    return {mq for mq, pq in consumer.process_queues().items() if mq.topic == topic and not pq.dropped}


def pull_queue(consumer, broker_name: str, topic: str, queue_id: int = 0, group: str = "probe") -> list:
    """Every message of one queue, pulled straight from the broker through ``consumer``'s
    client instance (works for topics the name server does not list yet, e.g. a new DLQ);
    [] while the topic does not exist."""
    from rocketmq_sdk.protocol.codes import PullSysFlag
    from rocketmq_sdk.protocol.headers import PullMessageRequestHeader
    from rocketmq_sdk.protocol.message import PullStatus

    inst = consumer.instance
    addr = inst.find_broker_master(broker_name)
    header = PullMessageRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=0,
                                      max_msg_nums=32, sys_flag=PullSysFlag.build(False, False, True), commit_offset=0,
                                      suspend_timeout_millis=0, subscription="*", sub_version=0,
                                      expression_type="TAG")
    from rocketmq_sdk.exceptions import MQBrokerError

    try:
        result = inst.run(inst.api.pull_message(addr, header, 3000), 5)
    except MQBrokerError as exc:
        if exc.code == 17:  # TOPIC_NOT_EXIST: nothing there yet
            return []
        raise
    return list(result.msg_found_list) if result.pull_status is PullStatus.FOUND else []
