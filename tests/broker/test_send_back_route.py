"""Retry and DLQ topics created by CONSUMER_SEND_MSG_BACK are registered with the name server at
once (Java ``createTopicInSendMessageBackMethod`` → ``registerBrokerAll``), not at the next
periodic registration: a new ``%DLQ%<group>`` is routable right away."""

from __future__ import annotations

import time

import pytest
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk import Message, Producer, PullConsumer, PullStatus
from rocketmq_sdk.exceptions import MQBrokerError
from rocketmq_sdk.protocol.codes import ResponseCode


@pytest.fixture
def slow_register_cluster(tmp_path):
    # periodic registration far away: only an immediate registration can publish the new topics
    c = start_dev_cluster(str(tmp_path / "store"), in_process=True,
                          broker_config={"register_name_server_period": 600_000})
    yield c
    c.stop()


def _route_or_none(inst, topic: str):
    try:
        return inst.run(inst.api.get_topic_route(topic, 2000), 5)
    except MQBrokerError as exc:
        assert exc.code == ResponseCode.TOPIC_NOT_EXIST
        return None


def _wait_route(inst, topic: str, timeout_s: float = 5.0):
    deadline = time.monotonic() + timeout_s
    while True:
        route = _route_or_none(inst, topic)
        if route is not None:
            return route
        if time.monotonic() > deadline:
            raise AssertionError(f"no route for {topic} after {timeout_s} s")
        time.sleep(0.05)


def test_send_back_topics_are_routable_at_once(slow_register_cluster):
    c = slow_register_cluster
    topic = "TopicSendBackRoute"
    with Producer("pg_sendback", c.namesrv_addr) as p:
        sent = p.send(Message(topic, b"payload"))
    with PullConsumer("cg_probe", c.namesrv_addr) as consumer:
        inst = consumer.instance
        mq = sent.message_queue
        result = consumer.pull(mq, "*", sent.queue_offset, 1)
        assert result.pull_status is PullStatus.FOUND
        m = result.msg_found_list[0]
        addr = c.broker_addr
        assert _route_or_none(inst, "%DLQ%cg_dead") is None
        assert _route_or_none(inst, "%RETRY%cg_again") is None
        # delay level -1: straight to the DLQ; 0: the retry topic
        inst.run(inst.api.consumer_send_message_back(
            addr, group="cg_dead", commit_log_offset=m.commit_log_offset, delay_level=-1,
            origin_msg_id=m.msg_id, origin_topic=topic, max_reconsume_times=16), 5)
        inst.run(inst.api.consumer_send_message_back(
            addr, group="cg_again", commit_log_offset=m.commit_log_offset, delay_level=0,
            origin_msg_id=m.msg_id, origin_topic=topic, max_reconsume_times=16), 5)
        dlq = _wait_route(inst, "%DLQ%cg_dead")
        retry = _wait_route(inst, "%RETRY%cg_again")
    assert [q.broker_name for q in dlq.queue_datas] == ["broker-a"]
    assert [q.broker_name for q in retry.queue_datas] == ["broker-a"]
