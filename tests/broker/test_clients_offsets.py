"""Heartbeats, group membership, consumer offsets and send-back on the reference broker."""

from __future__ import annotations

import time

import pytest
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk.protocol.bodies import (
    ConsumerData,
    HeartbeatData,
    SubscriptionData,
    consumer_list_from_json,
)
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketmq_sdk.protocol.message_codec import decode_messages

from tests.broker.conftest import SyncClient
from tests.broker.test_send_pull import _pull, _send


def _heartbeat(client_id: str, group: str, topic: str) -> bytes:
    cd = ConsumerData(group, subscriptions=[SubscriptionData.build(topic, "*", 1)])
    return HeartbeatData(client_id, [], [cd]).to_json()


def _wait(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return False


def test_heartbeat_registers_group_and_notifies_members_when_a_client_joins(cluster):
    a, b = SyncClient(), SyncClient()
    try:
        notified = a.notified_groups()
        r = a.invoke(cluster.broker_addr, RequestCode.HEART_BEAT, body=_heartbeat("c1", "G", "T"))
        assert r.code == ResponseCode.SUCCESS and r.version == 409
        b.invoke(cluster.broker_addr, RequestCode.HEART_BEAT, body=_heartbeat("c2", "G", "T"))
        assert _wait(lambda: "G" in notified), "first member was not told that c2 joined"
        ids = a.invoke(cluster.broker_addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"})
        assert consumer_list_from_json(ids.body) == ["c1", "c2"]
        # the retry topic of a clustering group exists on the broker after the heartbeat
        assert cluster.broker.topics.get("%RETRY%G") is not None
        b.close()
        b = None
        assert _wait(lambda: consumer_list_from_json(a.invoke(cluster.broker_addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                                {"consumerGroup": "G"}).body) == ["c1"])
    finally:
        a.close()
        if b is not None:
            b.close()


def test_no_consumer_gives_system_error(cluster, client):
    r = client.invoke(cluster.broker_addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "nobody"})
    assert r.code == ResponseCode.SYSTEM_ERROR and "no consumer" in r.remark


def test_consumer_offsets_survive_a_broker_restart(tmp_path):
    store = str(tmp_path / "store")
    client = SyncClient()
    try:
        with start_dev_cluster(store, in_process=True) as c:
            _send(client, c, "OffT", b"x", {})
            q = QueryConsumerOffsetRequestHeader(consumer_group="G", topic="OffT", queue_id=0).to_ext_fields()
            # a new group on a queue whose first message is still in memory starts at 0 (Java)
            first = client.invoke(c.broker_addr, RequestCode.QUERY_CONSUMER_OFFSET, q)
            assert (first.code, first.ext_fields.get("offset")) == (ResponseCode.SUCCESS, "0")
            empty = QueryConsumerOffsetRequestHeader(consumer_group="G", topic="OffT", queue_id=3).to_ext_fields()
            # an empty queue too (4.9.8: java-push-consumer.jsonl seq 61, a new %RETRY% queue → 0)
            r0 = client.invoke(c.broker_addr, RequestCode.QUERY_CONSUMER_OFFSET, empty)
            assert (r0.code, r0.ext_fields.get("offset")) == (ResponseCode.SUCCESS, "0")
            u = UpdateConsumerOffsetRequestHeader(consumer_group="G", topic="OffT", queue_id=0, commit_offset=1)
            client.oneway(c.broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET, u.to_ext_fields())
            assert _wait(lambda: c.broker.offsets.query("G", "OffT", 0) == 1)
        client.close()
        client = SyncClient()
        with start_dev_cluster(store, in_process=True) as c:
            r = client.invoke(c.broker_addr, RequestCode.QUERY_CONSUMER_OFFSET, q)
            assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, "1")
            # the message itself survived too
            assert [m.body for m in decode_messages(_pull(client, c, "OffT", 0, 0).body)] == [b"x"]
    finally:
        client.close()


@pytest.mark.parametrize("mode", ["1m", "dledger"])
def test_send_back_goes_to_retry_with_delay_then_to_dlq_after_max(tmp_path, mode):
    levels = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"
    client = SyncClient()
    with start_dev_cluster(str(tmp_path / "s"), in_process=True, broker_config={"message_delay_level": levels},
                           cluster=mode) as c:
        try:
            r = _send(client, c, "RT", b"retry-me", {"TAGS": "A", "KEYS": "K"})
            offset = int(decode_messages(_pull(client, c, "RT", 0, 0).body)[0].commit_log_offset)
            hb = client.invoke(c.broker_addr, RequestCode.HEART_BEAT, body=_heartbeat("c1", "G", "RT"))
            assert hb.code == 0
            back = ConsumerSendMsgBackRequestHeader(offset=offset, group="G", delay_level=0, origin_msg_id=r.ext_fields["msgId"],
                                                    origin_topic="RT", max_reconsume_times=1)
            t0 = time.monotonic()
            assert client.invoke(c.broker_addr, RequestCode.CONSUMER_SEND_MSG_BACK, back.to_ext_fields()).code == 0
            assert _wait(lambda: _pull(client, c, "%RETRY%G", 0, 0).code == ResponseCode.SUCCESS, 10)
            retried = decode_messages(_pull(client, c, "%RETRY%G", 0, 0).body)[0]
            assert time.monotonic() - t0 >= 0.9, "delay level was not applied"
            assert (retried.body, retried.reconsume_times, retried.properties["RETRY_TOPIC"]) == (b"retry-me", 1, "RT")
            # reconsume_times (1) >= max (1): the next send-back lands in the DLQ
            back.offset = retried.commit_log_offset
            assert client.invoke(c.broker_addr, RequestCode.CONSUMER_SEND_MSG_BACK, back.to_ext_fields()).code == 0
            dlq = decode_messages(_pull(client, c, "%DLQ%G", 0, 0).body)
            assert [m.body for m in dlq] == [b"retry-me"]
        finally:
            client.close()
