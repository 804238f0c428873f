"""A 5.x broker refuses UPDATE_CONSUMER_OFFSET for an unknown group (26) or topic (17)
(../shared/docs/rocketmq5-remoting.md §8.1, captured at rmq5_client_basics:1016-1019). Clients
send it oneway, so nobody notices: the SDK commits with request-reply to 5.x brokers and logs a
refusal once."""

from __future__ import annotations

import logging

from rocketmq_sdk import Message, PullConsumer
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.message import MessageQueue

from tests.broker.conftest import SyncClient
from tests.rmq5.conftest import broker_of
from tests.rmq5.frames import frame


def test_reference_5x_broker_refuses_commits_like_5_3_3(v5_cluster, v5_producer):
    v5_producer.send(Message("OffTopic", b"x"))
    client = SyncClient()
    try:
        for req_seq, resp_seq in ((1016, 1017), (1018, 1019)):
            req, want = frame("client_basics", req_seq), frame("client_basics", resp_seq)
            ext = dict(req["header"]["extFields"])
            if req_seq == 1018:  # an existing group, a missing topic
                broker_of(v5_cluster).groups.find(ext["consumerGroup"])
            resp = client.invoke(v5_cluster.broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET, ext)
            assert (resp.code, resp.remark) == (want["code"], want["header"]["remark"])
    finally:
        client.close()


def test_refused_commit_is_logged_once(v5_cluster, v5_producer, caplog):
    v5_producer.send(Message("OffTopic", b"x"))
    consumer = PullConsumer("off_group", namesrv_addr=v5_cluster.namesrv_addr)
    consumer.start()
    try:
        mq = sorted(consumer.fetch_subscribe_message_queues("OffTopic"))[0]
        inst = consumer.instance
        inst.run(inst.send_heartbeat_to_all(), 5)
        broker_of(v5_cluster).groups.table.pop("off_group")  # an admin deleted the group
        caplog.set_level(logging.WARNING, logger="rocketmq_sdk")
        for off in (1, 2, 3):
            consumer.update_consume_offset(mq, off)
            inst.run(consumer.offset_store.persist(mq), 5)
        refusals = [r for r in caplog.records if "refused" in r.getMessage()]
        assert len(refusals) == 1
        assert "off_group" in refusals[0].getMessage() and str(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST.value) in \
            refusals[0].getMessage()
        assert broker_of(v5_cluster).offsets.query("off_group", "OffTopic", mq.queue_id) == -1
    finally:
        consumer.shutdown()


def test_commit_to_5x_broker_is_acknowledged(v5_cluster, v5_producer):
    v5_producer.send(Message("OffTopic", b"x"))
    consumer = PullConsumer("off_ok_group", namesrv_addr=v5_cluster.namesrv_addr)
    consumer.start()
    try:
        mq: MessageQueue = sorted(consumer.fetch_subscribe_message_queues("OffTopic"))[0]
        inst = consumer.instance
        inst.run(inst.send_heartbeat_to_all(), 5)
        consumer.update_consume_offset(mq, 1)
        inst.run(consumer.offset_store.persist(mq), 5)
        # request-reply: the broker has it when persist returns
        assert broker_of(v5_cluster).offsets.query("off_ok_group", "OffTopic", mq.queue_id) == 1
    finally:
        consumer.shutdown()
