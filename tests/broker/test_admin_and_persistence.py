"""Topic creation, offset queries by queue and time, config files and membership changes."""

from __future__ import annotations

import asyncio
import json
import os
import time

from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.bodies import TopicRouteData
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import CreateTopicRequestHeader, UpdateConsumerOffsetRequestHeader

from tests.broker.conftest import SyncClient
from tests.broker.test_clients_offsets import _heartbeat, _wait
from tests.broker.test_send_pull import _send


def _route(client, cluster, topic):
    return client.invoke(cluster.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


def test_created_topic_is_routable_persisted_and_survives_a_restart(tmp_path):
    store = str(tmp_path / "store")
    client = SyncClient()
    try:
        with start_dev_cluster(store, in_process=True) as c:
            h = CreateTopicRequestHeader(topic="AdmT", default_topic="TBW102", read_queue_nums=3, write_queue_nums=3,
                                         perm=6, topic_filter_type="SINGLE_TAG", topic_sys_flag=0, order=False)
            assert client.invoke(c.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC,
                                 h.to_ext_fields()).code == ResponseCode.SUCCESS
            # registered with the name server at once, not after the 30 s period
            assert _wait(lambda: _route(client, c, "AdmT").code == ResponseCode.SUCCESS, 3)
            route = TopicRouteData.from_json(_route(client, c, "AdmT").body)
            assert [(q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas] == [(3, 3, 6)]
            topics_json = os.path.join(store, "config", "topics.json")
            table = json.load(open(topics_json, encoding="utf-8"))["topicConfigTable"]
            assert table["AdmT"]["readQueueNums"] == 3
        with start_dev_cluster(store, in_process=True) as c:
            assert c.broker.topics.get("AdmT").write_queue_nums == 3
            assert _route(client, c, "AdmT").code == ResponseCode.SUCCESS
    finally:
        client.close()


def test_offset_queries_by_queue_and_time(cluster, client):
    t0 = int(time.time() * 1000)
    for i in range(3):
        assert _send(client, cluster, "OffQ", b"m%d" % i, {}).code == ResponseCode.SUCCESS
    q = {"topic": "OffQ", "queueId": "0"}
    b = cluster.broker_addr
    r = client.invoke(b, RequestCode.GET_MAX_OFFSET, q)
    assert (r.code, r.ext_fields["offset"]) == (ResponseCode.SUCCESS, "3")
    assert client.invoke(b, RequestCode.GET_MIN_OFFSET, q).ext_fields["offset"] == "0"
    earliest = client.invoke(b, RequestCode.GET_EARLIEST_MSG_STORETIME, q)
    assert earliest.code == ResponseCode.SUCCESS
    assert t0 - 1000 <= int(earliest.ext_fields["timestamp"]) <= int(time.time() * 1000) + 1000
    far_past = client.invoke(b, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**q, "timestamp": "0"})
    assert far_past.ext_fields["offset"] == "0"
    # 4.9.8 ConsumeQueue.getOffsetInQueueByTime: past the last store time → the last message
    future = client.invoke(b, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**q, "timestamp": str(t0 + 3_600_000)})
    assert future.ext_fields["offset"] == "2"


def test_consumer_offsets_file_uses_topic_at_group_keys_and_keeps_a_backup(cluster, client):
    b = cluster.broker
    for offset in (1, 2):
        u = UpdateConsumerOffsetRequestHeader(consumer_group="G1", topic="OffF", queue_id=1, commit_offset=offset)
        assert client.invoke(cluster.broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                             u.to_ext_fields()).code == ResponseCode.SUCCESS
        b.offsets.persist(force=True)
    path = b.offsets.path
    # Java writes the file with fastjson: queue ids are bare integer keys ({1:2})
    text = open(path, encoding="utf-8").read()
    assert '"OffF@G1":{1:2}' in text.replace(" ", "").replace("\n", "")
    assert fastjson.loads(text)["offsetTable"]["OffF@G1"] == {1: 2}
    assert fastjson.loads(open(path + ".bak", encoding="utf-8").read())["offsetTable"]["OffF@G1"] == {1: 1}
    assert not os.path.exists(path + ".tmp")
    # a torn main file falls back to the backup
    with open(path, "w", encoding="utf-8") as fh:
        fh.write('{"offsetTable": {"OffF@G1": ')
    b.offsets.load()
    assert b.offsets.query("G1", "OffF", 1) == 1


def test_unregister_client_notifies_the_remaining_members(cluster):
    a, other = SyncClient(), SyncClient()
    try:
        notified = a.notified_groups()
        a.invoke(cluster.broker_addr, RequestCode.HEART_BEAT, body=_heartbeat("c1", "GU", "T"))
        other.invoke(cluster.broker_addr, RequestCode.HEART_BEAT, body=_heartbeat("c2", "GU", "T"))
        assert _wait(lambda: notified.count("GU") >= 1)
        before = notified.count("GU")
        r = other.invoke(cluster.broker_addr, RequestCode.UNREGISTER_CLIENT,
                         {"clientID": "c2", "consumerGroup": "GU"})
        assert r.code == ResponseCode.SUCCESS
        assert _wait(lambda: notified.count("GU") > before), "c1 was not told that c2 left"
        assert cluster.broker.consumers.groups["GU"].client_ids() == ["c1"]
    finally:
        a.close()
        other.close()


def test_a_send_that_auto_creates_its_topic_is_answered_after_the_registration(tmp_path, monkeypatch):
    """Java's createTopicInSendMessageMethod registers the broker before the send is answered, so a
    client that routes the topic right after SEND_OK finds it. A slow name-server round (0.3 s here)
    must delay the first send's answer, not leave the topic unroutable after it."""
    from rocketmq_broker.broker.controller import BrokerController

    real = BrokerController.register_all

    async def slow_register_all(self, oneway):
        await asyncio.sleep(0.3)  # a slow name server round trip (the fake's latency, not a wait)
        await real(self, oneway)

    monkeypatch.setattr(BrokerController, "register_all", slow_register_all)
    client = SyncClient()
    try:
        with start_dev_cluster(str(tmp_path / "store"), in_process=True) as c:
            assert _send(client, c, "AutoT", b"x", {}).code == ResponseCode.SUCCESS
            assert _route(client, c, "AutoT").code == ResponseCode.SUCCESS
            # a send to the now known topic is answered without waiting for a round
            assert _send(client, c, "AutoT", b"y", {}).code == ResponseCode.SUCCESS
    finally:
        client.close()
