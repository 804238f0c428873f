"""CONSUME_MESSAGE_DIRECTLY (309): the broker hands one message to the group's listener and
gets ConsumeMessageDirectlyResult back (CR_SUCCESS / CR_LATER / CR_RETURN_NULL /
CR_THROW_EXCEPTION), or SYSTEM_ERROR for an unknown group."""

from __future__ import annotations

import pytest
from rocketmq_sdk import PushConsumer
from rocketmq_sdk.consumer import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from rocketmq_sdk.protocol import MessageExt
from rocketmq_sdk.protocol.bodies import ConsumeMessageDirectlyResult
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import ConsumeMessageDirectlyResultRequestHeader
from rocketmq_sdk.protocol.message_codec import encode_message_ext
from rocketmq_sdk.remoting.command import RemotingCommand

from .helpers import FAST, unique


def _request(group: str, body: bytes) -> RemotingCommand:
    header = ConsumeMessageDirectlyResultRequestHeader(consumer_group=group, client_id="x", msg_id="m",
                                                       broker_name="broker-a")
    return RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, header.to_ext_fields(), body)


@pytest.mark.parametrize(("orderly", "outcome", "expected"), [
    (False, ConsumeConcurrentlyStatus.CONSUME_SUCCESS, "CR_SUCCESS"),
    (False, ConsumeConcurrentlyStatus.RECONSUME_LATER, "CR_LATER"),
    (False, None, "CR_RETURN_NULL"),
    (False, ValueError("boom"), "CR_THROW_EXCEPTION"),
    (True, ConsumeOrderlyStatus.SUCCESS, "CR_SUCCESS"),
    (True, ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, "CR_LATER"),
])
def test_consume_message_directly(cluster, orderly, outcome, expected):
    topic, group = unique("TopicDirect"), unique("cg")
    seen = []

    def listener(msgs, ctx):
        seen.append((msgs[0].body, ctx.message_queue))
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    c = PushConsumer(group, cluster.namesrv_addr, instance_name="direct", **FAST)
    c.subscribe(topic)
    c.register_message_listener(listener, orderly=orderly)
    c.start()
    try:
        msg = MessageExt(topic=topic, body=b"direct", queue_id=2, queue_offset=7, store_host="127.0.0.1:10911",
                         born_host="127.0.0.1:5555")
        inst = c.instance
        resp = inst.run(inst._on_consume_message_directly(None, _request(group, bytes(encode_message_ext(msg)))), 10)
        bad = inst.run(inst._on_consume_message_directly(None, _request("nobody", b"")), 10)
    finally:
        c.shutdown()
    assert resp.code == ResponseCode.SUCCESS
    result = ConsumeMessageDirectlyResult.from_json(resp.body)
    assert result.consume_result.value == expected and result.order is orderly and result.auto_commit
    if expected == "CR_THROW_EXCEPTION":
        assert "boom" in result.remark
    (body, mq), = seen
    assert body == b"direct" and (mq.topic, mq.broker_name, mq.queue_id) == (topic, "broker-a", 2)
    assert bad.code == ResponseCode.SYSTEM_ERROR and "nobody" in bad.remark
