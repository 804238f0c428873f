"""JSON bodies (docs/protocol.md §3.6) against every captured body of the codes they serve."""

from __future__ import annotations

import base64

import pytest
from rocketmq_sdk.protocol import admin_bodies as A
from rocketmq_sdk.protocol import bodies as B
from rocketmq_sdk.protocol.message import MessageQueue

from tests.conftest import CAPTURE_NAMES, load_capture

#: (request code, is response) -> body class
BODY_CLASSES = {
    (34, False): B.HeartbeatData, (38, True): B.ConsumerListBody, (41, False): B.LockBatchRequestBody,
    (41, True): B.LockBatchResponseBody, (42, False): B.UnlockBatchRequestBody,
    (103, False): B.RegisterBrokerBody, (103, True): A.KVTable, (322, False): B.DataVersion,
    (322, True): B.DataVersion, (21, True): B.TopicConfigSerializeWrapper, (106, True): A.ClusterInfo,
    (206, True): A.TopicList, (224, True): A.TopicList, (305, True): A.TopicList, (219, True): A.KVTable,
    (28, True): A.KVTable, (203, True): A.ConsumerConnection, (204, True): A.ProducerConnection,
    (208, True): A.ConsumeStats, (202, True): A.TopicStatsTable, (222, True): B.ResetOffsetBody,
    (200, False): A.SubscriptionGroupConfig, (201, True): A.SubscriptionGroupWrapper, (300, True): A.GroupList,
    (309, True): B.ConsumeMessageDirectlyResult, (307, True): B.ConsumerRunningInfo,
    (303, True): A.QueryConsumeTimeSpanBody, (221, True): A.GetConsumerStatusBody,
    (223, True): A.GetConsumerStatusBody, (105, True): B.TopicRouteData,
}


def _bodies(name: str):
    for rec in load_capture(name):
        if "body_b64" not in rec:
            continue
        resp = bool(rec["flag"] & 1)
        code = rec.get("request_code") if resp else rec["code"]
        if code == 220:
            cls = B.ResetOffsetBodyForC if rec["client"] == "cpp" else B.ResetOffsetBody
        else:
            cls = BODY_CLASSES.get((code, resp))
        if cls is None or (resp and rec["code"] != 0):
            continue
        yield rec, cls, base64.b64decode(rec["body_b64"])


def _java_wrote(rec: dict) -> bool:
    """Bodies written by Java: requests with language JAVA, and every response of the Java
    broker / name server, and responses of Java clients to broker requests."""
    if rec["flag"] & 1:
        return rec["from"] in ("broker", "namesrv") or rec["header"]["language"] == "JAVA"
    return rec["header"]["language"] == "JAVA"


def _dump(obj, rec) -> bytes:
    if isinstance(obj, B.TopicRouteData):
        standard = "body_json" in rec  # Java clients (version 409) get the standard form
        return obj.to_json(standard=standard)
    return obj.to_json()


def _relays_cpp_subscriptions(name: str, cls: type) -> bool:
    """The broker echoes a C++ client's subscriptions with its ``atoi`` codeSet; we recompute
    the tag hashes on reading, so those bodies differ (only) there."""
    return name.startswith("cpp") and cls is A.ConsumerConnection


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_every_captured_body_parses_and_reemits(name):
    for rec, cls, raw in _bodies(name):
        obj = cls.from_json(raw)
        out = _dump(obj, rec)
        # the broker relays the C++ client's GET_CONSUMER_RUNNING_INFO answer unchanged
        relayed_cpp = cls is B.ConsumerRunningInfo and name.startswith("cpp")
        exact = _java_wrote(rec) and not relayed_cpp and not _relays_cpp_subscriptions(name, cls)
        if exact:
            assert out == raw, (rec["seq"], cls.__name__)
        elif _relays_cpp_subscriptions(name, cls):
            subs = obj.subscription_table.values()
            assert all(s.code_set == [B.java_string_hash(t) for t in s.tags_set] for s in subs)
        # a second round trip is stable whatever the origin
        assert _dump(cls.from_json(out), rec) == out


def test_every_body_class_met_a_captured_body():
    met = {cls for name in CAPTURE_NAMES for _rec, cls, _raw in _bodies(name)}
    assert met >= set(BODY_CLASSES.values()) | {B.ResetOffsetBodyForC}


def test_cpp_heartbeat_with_ordinals_and_string_sub_version():
    recs = [r for r in load_capture("cpp-client-push-consumer")
            if r["code"] == 34 and not r["flag"] & 1 and r["body_json"].get("consumerDataSet")]
    hb = B.HeartbeatData.from_json(base64.b64decode(recs[0]["body_b64"]))
    cd = hb.consumers[0]
    assert cd.consume_type is B.ConsumeType.CONSUME_PASSIVELY
    assert cd.message_model is B.MessageModel.CLUSTERING
    assert cd.consume_from_where is B.ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    sub = next(s for s in cd.subscriptions if s.topic == "CapCppTopic")
    assert sub.tags_set == ["TagA", "TagB"] and sub.code_set == [2598919, 2598920]  # recomputed, not atoi
    assert sub.sub_version == 1795335208777
    retry = next(s for s in cd.subscriptions if s.topic.startswith("%RETRY%"))
    assert retry.tags_set == [] and retry.code_set == [] and retry.sub_string == "*"
    assert hb.producer_groups == ["cap_cpp_feeder_group_push"]
    java_form = hb.to_json()
    assert b'"consumeType":"CONSUME_PASSIVELY"' in java_form and b'"subVersion":1795335208777' in java_form


def test_java_heartbeat_roundtrip_is_byte_identical():
    recs = [r for r in load_capture("java-push-consumer") if r["code"] == 34 and not r["flag"] & 1]
    raw = base64.b64decode(recs[0]["body_b64"])
    assert B.HeartbeatData.from_json(raw).to_json() == raw


def test_subscription_build_parses_tag_expressions():
    sd = B.SubscriptionData.build("T", " TagA || TagB ||TagA|| ", 7)
    assert sd.tags_set == ["TagA", "TagB"] and sd.code_set == [2598919, 2598920] and sd.sub_version == 7
    assert sd.matches_tag("TagA") and not sd.matches_tag("TagC") and not sd.matches_tag(None)
    all_ = B.SubscriptionData.build("T", "*", 1)
    assert all_.sub_string == "*" and all_.tags_set == [] and all_.matches_tag(None)
    assert B.SubscriptionData.build("T", None, 1).sub_string == "*"


def test_route_data_both_forms():
    rd = B.TopicRouteData([B.QueueData("broker-a", 4, 4, 6, 0)],
                          [B.BrokerData("broker-a", "DefaultCluster", {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"})])
    std = rd.to_json(standard=True)
    fj = rd.to_json(standard=False)
    assert b'"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"}' in std
    assert b'"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"}' in fj
    for text in (std, fj):
        back = B.TopicRouteData.from_json(text)
        assert back.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}
        assert back.broker_datas[0].master_addr() == "127.0.0.1:10911"
        assert back.queue_datas == rd.queue_datas
    old = B.QueueData.from_dict({"brokerName": "b", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6,
                                 "topicSynFlag": 3})
    assert old.topic_sys_flag == 3


def test_reset_offset_bodies_for_java_and_cpp():
    mq = MessageQueue("T", "broker-a", 2)
    java = B.ResetOffsetBody({mq: 42})
    assert java.to_json() == b'{"offsetTable":{{"brokerName":"broker-a","queueId":2,"topic":"T"}:42}}'
    cpp = B.ResetOffsetBodyForC.from_offsets({mq: 42})
    assert cpp.to_json() == b'{"offsetTable":[{"brokerName":"broker-a","offset":42,"queueId":2,"topic":"T"}]}'
    assert B.ResetOffsetBodyForC.from_json(cpp.to_json()).offsets() == {mq: 42}
    # a quoted object key (standard form) is read too
    assert B.ResetOffsetBody.from_json(java.to_json(standard=True)).offset_table == {mq: 42}


def test_consume_stats_object_keys_and_diff():
    cs = A.ConsumeStats(0.5, {MessageQueue("T", "b", 0): A.OffsetWrapper(10, 7, 1)})
    text = cs.to_json()
    assert text == (b'{"consumeTps":0.5,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:'
                    b'{"brokerOffset":10,"consumerOffset":7,"lastTimestamp":1}}}')
    assert A.ConsumeStats.from_json(text) == cs and cs.diff_total() == 3


def test_subscription_group_defaults_match_java():
    assert A.SubscriptionGroupConfig("G").to_json() == (
        b'{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,'
        b'"groupName":"G","notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,'
        b'"whichBrokerWhenConsumeSlowly":1}')


def test_lenient_reading_of_strings_and_unknown_keys():
    c = A.Connection.from_json(b'{"clientAddr":"a","clientId":"c","language":"CPP","version":"63","x":1}')
    assert c.version == 63 and c.language == "CPP"
    with pytest.raises(ValueError):
        A.ConsumerConnection.from_json(b'{"consumeType":"NOPE"}')
    assert A.ConsumerConnection.from_json(b'{"consumeType":0}').consume_type is B.ConsumeType.CONSUME_ACTIVELY


def test_consumer_list_and_lock_bodies():
    assert B.ConsumerListBody(["a", "b"]).to_json() == b'{"consumerIdList":["a","b"]}'
    assert B.consumer_list_from_json(b'{"consumerIdList":["a"]}') == ["a"]
    mq = MessageQueue("T", "b", 1)
    req = B.LockBatchRequestBody("cid", "G", [mq])
    assert req.to_json() == B.mq_set_to_json("cid", "G", [mq])
    assert B.LockBatchResponseBody.from_json(b'{"lockOKMQSet":[{"brokerName":"b","queueId":1,"topic":"T"}]}'
                                             ).lock_ok_mq_set == [mq]
    assert B.ProducerData("PG").to_dict() == {"groupName": "PG"}


def test_register_broker_body_compressed_form_roundtrips():
    recs = [r for r in load_capture("broker-namesrv") if r["code"] == 103 and not r["flag"] & 1]
    body = B.RegisterBrokerBody.decode(base64.b64decode(recs[0]["body_b64"]), compressed=False)
    assert "TBW102" in body.topic_config_wrapper.topic_config_table
    packed = body.encode(compress=True)
    back = B.RegisterBrokerBody.decode(packed, compressed=True)
    assert back.topic_config_wrapper.data_version == body.topic_config_wrapper.data_version
    assert back.filter_server_list == body.filter_server_list
    for name, tc in body.topic_config_wrapper.topic_config_table.items():
        got = back.topic_config_wrapper.topic_config_table[name]
        assert (got.read_queue_nums, got.write_queue_nums, got.perm, got.topic_filter_type) == (
            tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_filter_type)
    assert body.encode() == base64.b64decode(recs[0]["body_b64"])
    with pytest.raises(ValueError):
        B.RegisterBrokerBody.decode(b"not zlib", compressed=True)
    assert B.TopicConfig.decode_compact("T 4 4 6 SINGLE_TAG").encode_compact() == "T 4 4 6 SINGLE_TAG"


def test_enum_ordinals_match_java():
    assert [e.ordinal for e in B.ConsumeFromWhere] == [0, 1, 2, 3, 4, 5]
    assert B.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET.ordinal == 4
    assert B.MessageModel.parse(1) is B.MessageModel.CLUSTERING and B.MessageModel.parse("BROADCASTING").ordinal == 0
    assert B.ConsumeType.parse("1") is B.ConsumeType.CONSUME_PASSIVELY
