"""Issue 14: hostile names never reach the file system or corrupt the store.

The three attacks of the issue, each through CONSUMER_SEND_MSG_BACK (36) of a live broker:
a path-traversing group, a group with a NUL byte (which made the store unloadable) and the same
with ``delayLevel 0`` (which stalled a delay level); then the boundary check of every other
request that names a topic or a group, on the broker and on the name server.
"""

from __future__ import annotations

import asyncio
import os

import pytest
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import ConsumerSendMsgBackRequestHeader, SendMessageRequestHeader
from rocketmq_sdk.protocol.message_codec import decode_messages

from tests.conftest import wait_until

HOSTILE_GROUPS = ["x/../../../../escape", "g\u0000x", "..", "a b", "g\nx", "g" * 256, "%RETRY%" + "g" * 121]


def _broker(cluster):
    return cluster._servers[-1]


def _send(client, cluster, topic: str, body: bytes = b"payload", props: str = "") -> int:
    h = SendMessageRequestHeader(producer_group="pg", topic=topic, default_topic="TBW102",
                                 default_topic_queue_nums=4, queue_id=0, sys_flag=0, born_timestamp=1,
                                 flag=0, properties=props, reconsume_times=0)
    r = client.invoke(cluster.broker_addr, RequestCode.SEND_MESSAGE, h.to_ext_fields(), body)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return int(r.ext_fields["queueOffset"])


def _commit_log_offset(client, cluster, topic: str, group: str = "cg") -> int:
    r = client.invoke(cluster.broker_addr, RequestCode.PULL_MESSAGE,
                      {"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0",
                       "maxMsgNums": "1", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
                       "subscription": "*", "subVersion": "0"})
    assert r.code == ResponseCode.SUCCESS, r.remark
    return decode_messages(r.body)[0].commit_log_offset


def _send_back(client, cluster, group: str, offset: int, delay_level: int):
    h = ConsumerSendMsgBackRequestHeader(offset=offset, group=group, delay_level=delay_level,
                                         origin_msg_id="x", origin_topic="T", max_reconsume_times=16)
    return client.invoke(cluster.broker_addr, RequestCode.CONSUMER_SEND_MSG_BACK, h.to_ext_fields())


def _all_paths(root: str) -> set[str]:
    out = set()
    for d, dirs, files in os.walk(root):
        out.update(os.path.relpath(os.path.join(d, n), root) for n in dirs + files)
    return out


@pytest.mark.parametrize("delay_level", [-1, 0, 3])
def test_send_back_with_a_hostile_group_is_refused_before_anything_is_written(tmp_path, client, delay_level):
    store = tmp_path / "store"
    cluster = start_dev_cluster(str(store), in_process=True)
    try:
        _send(client, cluster, "T")
        offset = _commit_log_offset(client, cluster, "T")
        broker = _broker(cluster)
        end_before = broker.store.get_max_phy_offset()
        for group in HOSTILE_GROUPS:
            r = _send_back(client, cluster, group, offset, delay_level)
            assert r.code == ResponseCode.SYSTEM_ERROR, (group, r.code, r.remark)
            assert "group" in r.remark or "topic" in r.remark, r.remark
        assert broker.store.get_max_phy_offset() == end_before  # nothing reached the commit log
        assert not any(t.startswith(("%RETRY%", "%DLQ%")) for t in broker.topics.table)
    finally:
        cluster.stop()
    # nothing outside the store directory (the attack made tmp_path/escape/0/000...)
    assert sorted(os.listdir(tmp_path)) == ["store"]
    # and the store still loads (the NUL-byte record made it unloadable)
    again = start_dev_cluster(str(store), in_process=True)
    try:
        assert _commit_log_offset(client, again, "T") == offset
    finally:
        again.stop()


def test_legal_send_back_still_goes_to_the_retry_and_dead_letter_topics(cluster, client):
    _send(client, cluster, "T")
    offset = _commit_log_offset(client, cluster, "T")
    assert _send_back(client, cluster, "good_group", offset, 3).code == ResponseCode.SUCCESS
    assert _send_back(client, cluster, "good_group", offset, -1).code == ResponseCode.SUCCESS
    topics = _broker(cluster).topics.table
    assert "%RETRY%good_group" in topics and "%DLQ%good_group" in topics


# every request code naming a topic or group in its header: a hostile value is refused with
# SYSTEM_ERROR before its processor runs (nothing created, nothing stored)
HEADER_CASES = [
    (RequestCode.SEND_MESSAGE, {"producerGroup": "pg", "topic": "../x", "defaultTopic": "TBW102",
                                "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
                                "bornTimestamp": "1", "flag": "0"}),
    (RequestCode.SEND_MESSAGE_V2, {"a": "pg", "b": "T", "c": "TBW/102", "d": "4", "e": "0", "f": "0", "g": "1",
                                   "h": "0"}),
    (RequestCode.SEND_MESSAGE_V2, {"a": "p\u0000g", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0",
                                   "g": "1", "h": "0"}),
    (RequestCode.PULL_MESSAGE, {"consumerGroup": "c/g", "topic": "T", "queueId": "0", "queueOffset": "0",
                                "maxMsgNums": "1", "sysFlag": "0", "commitOffset": "0",
                                "suspendTimeoutMillis": "0", "subVersion": "0"}),
    (RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "cg@x", "topic": "T", "queueId": "0",
                                          "commitOffset": "1"}),
    (RequestCode.QUERY_CONSUMER_OFFSET, {"consumerGroup": "cg", "topic": "T" * 128, "queueId": "0"}),
    (RequestCode.GET_MAX_OFFSET, {"topic": "..", "queueId": "0"}),
    (RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "a/b", "defaultTopic": "TBW102", "readQueueNums": "1",
                                           "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG"}),
    (RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "../../etc"}),
    (RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "../g"}),
    (RequestCode.END_TRANSACTION, {"producerGroup": "p g", "tranStateTableOffset": "0", "commitLogOffset": "0",
                                   "commitOrRollback": "8", "fromTransactionCheck": "false", "msgId": "x"}),
    (RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "g\u0000"}),
    (RequestCode.UNREGISTER_CLIENT, {"clientID": "c", "producerGroup": "p/g"}),
]


@pytest.mark.parametrize("code,ext", HEADER_CASES, ids=[f"{int(c)}-{i}" for i, (c, _) in enumerate(HEADER_CASES)])
def test_every_request_naming_a_hostile_topic_or_group_is_refused(cluster, client, code, ext):
    broker = _broker(cluster)
    topics_before = set(broker.topics.table)
    end_before = broker.store.get_max_phy_offset()
    r = client.invoke(cluster.broker_addr, code, ext, b"x")
    assert r.code == ResponseCode.SYSTEM_ERROR, (r.code, r.remark)
    assert r.remark.startswith(("The specified topic", "the specified group")), r.remark
    assert set(broker.topics.table) == topics_before
    assert broker.store.get_max_phy_offset() == end_before


def _heartbeat(group: str, topic: str) -> bytes:
    return fastjson.dumps({"clientID": "c1", "producerDataSet": [], "consumerDataSet": [{
        "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
        "subscriptionDataSet": [{"topic": topic, "subString": "*", "classFilterMode": False, "tagsSet": [],
                                 "codeSet": [], "subVersion": 1, "expressionType": "TAG"}]}]}).encode()


@pytest.mark.parametrize("code,body", [
    (RequestCode.HEART_BEAT, _heartbeat("x/../../escape", "T")),
    (RequestCode.HEART_BEAT, _heartbeat("cg", "T\u0000")),
    (RequestCode.LOCK_BATCH_MQ, fastjson.dumps({"consumerGroup": "../cg", "clientId": "c1", "mqSet": []}).encode()),
    (RequestCode.UNLOCK_BATCH_MQ, fastjson.dumps({"consumerGroup": "cg", "clientId": "c1", "mqSet": [
        {"topic": "../T", "brokerName": "b", "queueId": 0}]}).encode()),
    (RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, fastjson.dumps({"groupName": "g/../x"}).encode()),
])
def test_bodies_naming_a_hostile_topic_or_group_are_refused(cluster, client, code, body):
    broker = _broker(cluster)
    topics_before = set(broker.topics.table)
    r = client.invoke(cluster.broker_addr, code, {}, body)
    assert r.code == ResponseCode.SYSTEM_ERROR, (r.code, r.remark)
    assert set(broker.topics.table) == topics_before
    assert not any("/" in g or "\0" in g for g in broker.groups.table)


def test_a_legal_heartbeat_still_registers_its_group(cluster, client):
    r = client.invoke(cluster.broker_addr, RequestCode.HEART_BEAT, {}, _heartbeat("cg_ok", "T"))
    assert r.code == ResponseCode.SUCCESS, r.remark


def test_name_server_refuses_hostile_names(cluster, client):
    r = client.invoke(cluster.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "../T"})
    assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR,
                                  "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$")
    r = client.invoke(cluster.namesrv_addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T\u0000"})
    assert r.code == ResponseCode.SYSTEM_ERROR
    body = fastjson.dumps({"topicConfigSerializeWrapper": {
        "topicConfigTable": {"x/../y": {"topicName": "x/../y", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}},
        "dataVersion": {"timestamp": 1, "counter": 1}}, "filterServerList": []}).encode()
    r = client.invoke(cluster.namesrv_addr, RequestCode.REGISTER_BROKER,
                      {"brokerName": "evil", "brokerAddr": "127.0.0.1:1", "clusterName": "DefaultCluster",
                       "haServerAddr": "127.0.0.1:2", "brokerId": "0", "compressed": "false"}, body)
    assert r.code == ResponseCode.SYSTEM_ERROR, r.remark
    route = client.invoke(cluster.namesrv_addr, RequestCode.GET_BROKER_CLUSTER_INFO)
    assert b"evil" not in route.body


def test_a_flood_of_bad_requests_logs_one_rate_limited_line_each_without_traceback(cluster, client, caplog):
    from rocketmq_sdk.remoting.channel import bad_input_log

    bad_input_log.burst, saved = 5, bad_input_log.burst
    bad_input_log._count = 0
    suppressed_before = bad_input_log.total_suppressed
    try:
        with caplog.at_level("WARNING"):
            for i in range(40):
                client.invoke(cluster.broker_addr, RequestCode.GET_MAX_OFFSET, {"topic": f"../{i}", "queueId": "0"})
                client.invoke(cluster.broker_addr, RequestCode.HEART_BEAT, {}, b"not json")
    finally:
        bad_input_log.burst = saved
    lines = [r for r in caplog.records if r.levelname == "WARNING"]
    assert 1 <= len(lines) <= 6, [r.getMessage() for r in lines]
    assert all(r.exc_info is None for r in lines)
    assert any("refused request code 30" in r.getMessage() and "127.0.0.1" in r.getMessage() for r in lines)
    assert bad_input_log.total_suppressed - suppressed_before >= 70


def test_schedule_skips_an_undeliverable_message_and_delivers_the_next(tmp_path, client):
    """A delayed message whose real topic cannot be written (stored by an older broker) is logged
    and skipped; the next message of its level is delivered (it used to stall the level)."""
    from rocketmq_broker.store.inner_message import InnerMessage
    from rocketmq_sdk.protocol.message_codec import encode_properties

    cluster = start_dev_cluster(str(tmp_path / "store"), in_process=True,
                                broker_config={"message_delay_level": "1s 1s 1s"})
    try:
        broker = _broker(cluster)
        props = {"DELAY": "3", "REAL_TOPIC": "%RETRY%g\u0000x", "REAL_QID": "0"}
        bad = InnerMessage(topic="SCHEDULE_TOPIC_XXXX", queue_id=2, body=b"bad", properties_string=encode_properties(props),
                           flag=0, tags_code=0, sys_flag=0, born_timestamp=1, born_host="127.0.0.1:1",
                           store_host="127.0.0.1:2", reconsume_times=0, properties=props)
        async def put_bad():  # on the broker's loop, as the broker's own puts
            return broker.store.put_message(bad)

        assert asyncio.run_coroutine_threadsafe(put_bad(), cluster._loop).result(5).is_ok()
        _send(client, cluster, "D", b"later", encode_properties({"DELAY": "3"}))
        wait_until(lambda: broker.store.get_max_offset_in_queue("D", 0) == 1, 15, "the good delayed message")
        assert broker.schedule.offsets.get(3) == 2
    finally:
        cluster.stop()


def test_a_request_passing_with_known_names_does_not_let_a_hostile_name_through_later(cluster, client):
    """The guard remembers the name fields of requests that passed: the same request again costs
    a lookup, and a request of the same code naming a hostile topic or group next to names seen
    before is still refused, before anything is stored (in either field, in either order)."""
    broker = _broker(cluster)
    good = {"consumerGroup": "cg", "topic": "T", "queueId": "0", "queueOffset": "0", "maxMsgNums": "1",
            "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0"}
    for _ in range(2):
        assert client.invoke(cluster.broker_addr, RequestCode.PULL_MESSAGE, good).remark != "refused"
    groups_before = set(broker.groups.table)
    for bad in ({"consumerGroup": "../cg"}, {"topic": "T/../x"}, {"consumerGroup": "cg", "topic": "T\u0000"},
                {"group": "x/y"}):
        r = client.invoke(cluster.broker_addr, RequestCode.PULL_MESSAGE, {**good, **bad})
        assert r.code == ResponseCode.SYSTEM_ERROR, (bad, r.code, r.remark)
        assert r.remark.startswith(("The specified topic", "the specified group")), r.remark
    assert set(broker.groups.table) == groups_before
