"""The pull-result step shared by the push, lite-pull and pull consumers (``pull_result.py``):
Java ``processPullResult`` (exact tag filter, broker name, MIN/MAX_OFFSET) and the wait after a
failed pull (the shared ``RetryPolicy``: ``pull_time_delay_when_exception``, 20 ms after
FLOW_CONTROL)."""

from __future__ import annotations

import asyncio

from rocketmq_sdk.consumer.pull_node import PullFromWhichNode
from rocketmq_sdk.consumer.pull_result import QueuePuller, process_pull_result, pull_header, pull_retry_policy
from rocketmq_sdk.exceptions import MQBrokerError, RemotingTimeoutError
from rocketmq_sdk.protocol.bodies import SubscriptionData
from rocketmq_sdk.protocol.codes import MessageConst as MC
from rocketmq_sdk.protocol.codes import PullSysFlag, ResponseCode
from rocketmq_sdk.protocol.message import MessageExt, MessageQueue, PullResult, PullStatus

MQ = MessageQueue("T", "broker-a", 3)


def _msgs(*tags):
    out = []
    for i, tag in enumerate(tags):
        m = MessageExt(topic="T", queue_id=3, queue_offset=10 + i, body=b"x")
        if tag is not None:
            m.properties[MC.TAGS] = tag
        out.append(m)
    return out


def test_found_messages_are_filtered_by_exact_tag_and_stamped():
    result = PullResult(PullStatus.FOUND, 13, 2, 99, _msgs("A", "B", "C", None))
    got = process_pull_result(result, MQ, SubscriptionData.build("T", "A || C", 0))
    assert [m.tags for m in got] == ["A", "C"]  # a tag-hash collision (B) and an untagged message dropped
    assert result.msg_found_list == got
    assert all(m.broker_name == "broker-a" for m in got)
    assert all((m.properties[MC.MIN_OFFSET], m.properties[MC.MAX_OFFSET]) == ("2", "99") for m in got)


def test_subscribe_all_keeps_every_message_and_other_statuses_give_none():
    result = PullResult(PullStatus.FOUND, 13, 0, 13, _msgs("A", None))
    assert len(process_pull_result(result, MQ, SubscriptionData.build("T", "*", 0))) == 2
    for status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG, PullStatus.OFFSET_ILLEGAL):
        assert process_pull_result(PullResult(status, 13, 0, 13), MQ, SubscriptionData.build("T", "*", 0)) == []


def test_header_carries_the_subscription_only_when_posted():
    sub = SubscriptionData.build("T", "A", 7)
    flag = PullSysFlag.build(True, True, True)
    h = pull_header("g", MQ, sub, 42, 32, sys_flag=flag, suspend_timeout_ms=15000, commit_offset=40)
    assert (h.consumer_group, h.topic, h.queue_id, h.queue_offset, h.max_msg_nums, h.commit_offset) == \
        ("g", "T", 3, 42, 32, 40)
    assert (h.subscription, h.sub_version, h.bname, h.sys_flag) == ("A", 7, "broker-a", flag)
    bare = pull_header("g", MQ, sub, 42, 32, sys_flag=0, suspend_timeout_ms=0, post_subscription=False, sub_version=0)
    assert (bare.subscription, bare.sub_version) == (None, 0)


def test_retry_policy_waits_20_ms_after_flow_control_else_the_configured_delay():
    policy = pull_retry_policy(1500)
    assert policy.retries is None  # pull loops never give up
    assert policy.delay_s(1, MQBrokerError(ResponseCode.FLOW_CONTROL, "busy")) == 0.02
    assert policy.delay_s(5, MQBrokerError(ResponseCode.SYSTEM_ERROR, "x")) == 1.5
    assert policy.delay_s(1, RemotingTimeoutError("127.0.0.1:10911", 30000)) == 1.5


class _Api:
    def __init__(self, answers):
        self.answers = list(answers)
        self.sent_to = []

    async def pull_message(self, addr, header, timeout_ms):
        self.sent_to.append(addr)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


class _Instance:
    def __init__(self, answers):
        self.api = _Api(answers)

    def find_broker_in_subscribe(self, broker_name, broker_id):
        return {0: "master:10911", 1: "slave:10911"}[broker_id], broker_id != 0


def test_queue_puller_counts_failures_and_follows_the_suggested_broker():
    ok = PullResult(PullStatus.NO_NEW_MSG, 10, 0, 10, suggest_which_broker_id=1)
    inst = _Instance([MQBrokerError(ResponseCode.FLOW_CONTROL, "busy"), ok, ok])
    nodes = PullFromWhichNode()
    puller = QueuePuller(inst, nodes, MQ, 1, 1000)  # 1 ms after an error
    header = pull_header("g", MQ, SubscriptionData.build("T", "*", 0), 10, 32,
                         sys_flag=PullSysFlag.build(True, True, True), suspend_timeout_ms=0, commit_offset=5)

    async def run():
        assert await puller.pull(header, lambda: False) is None and puller.failures == 1
        assert await puller.pull(header, lambda: False) is ok and puller.failures == 0
        assert await puller.pull(header, lambda: False) is ok
    asyncio.run(run())
    assert inst.api.sent_to == ["master:10911", "master:10911", "slave:10911"]
    assert not header.sys_flag & PullSysFlag.COMMIT_OFFSET  # no commit bit on a pull sent to a slave


def test_a_pull_failing_after_the_loop_ended_is_not_waited_for():
    inst = _Instance([MQBrokerError(ResponseCode.SYSTEM_ERROR, "x")])
    puller = QueuePuller(inst, PullFromWhichNode(), MQ, 60_000, 1000)  # a wait would hang the test
    header = pull_header("g", MQ, SubscriptionData.build("T", "*", 0), 0, 32, sys_flag=0, suspend_timeout_ms=0)
    assert asyncio.run(asyncio.wait_for(puller.pull(header, lambda: True), 5)) is None
    assert puller.failures == 0
