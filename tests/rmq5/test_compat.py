"""The SDK on RocketMQ 5.x brokers: route fields, heartbeat v2, broker version detection
(golden frames from ../shared/captures/rmq5_*, copied to tests/data/rmq5_frames.jsonl)."""

from __future__ import annotations

import pytest
from rocketmq_sdk import Producer, PushConsumer
from rocketmq_sdk.client.broker_heartbeat import BrokerHeartbeats
from rocketmq_sdk.protocol.bodies import HeartbeatData, TopicRouteData
from rocketmq_sdk.protocol.codes import RequestCode
from rocketmq_sdk.remoting import RemotingCommand

from tests.rmq5.conftest import V4
from tests.rmq5.frames import body_bytes, frame


def test_5x_route_keeps_enable_acting_master_byte_for_byte():
    body = body_bytes(frame("pop", 2))
    route = TopicRouteData.from_json(body)
    assert route.broker_datas[0].enable_acting_master is False
    assert route.to_json() == body


def test_4x_route_has_no_5x_fields():
    route = TopicRouteData.from_json(b'{"brokerDatas":[{"brokerAddrs":{"0":"a:1"},"brokerName":"b","cluster":"c"}],'
                                     b'"filterServerTable":{},"queueDatas":[]}')
    assert route.broker_datas[0].enable_acting_master is None
    assert b"enableActingMaster" not in route.to_json()


def test_static_topic_mapping_is_kept():
    body = (b'{"brokerDatas":[],"filterServerTable":{},"queueDatas":[],'
            b'"topicQueueMappingByBroker":{"broker-a":{"bname":"broker-a","epoch":1,"scope":"x","topic":"T","totalQueues":2}}}')
    route = TopicRouteData.from_json(body)
    assert route.topic_queue_mapping_by_broker["broker-a"]["totalQueues"] == 2
    assert route.to_json() == body


@pytest.mark.parametrize(("name", "seq", "fp", "without"), [("pop", 4, 0, False), ("client_basics", 242, -1765584108, False),
                                                            ("client_basics", 252, -1765584108, True)])
def test_5x_heartbeat_bodies_round_trip(name, seq, fp, without):
    body = body_bytes(frame(name, seq))
    hb = HeartbeatData.from_json(body)
    assert (hb.heartbeat_fingerprint, hb.without_sub) == (fp, without)
    assert hb.to_json() == body


def test_v1_heartbeat_bytes_unchanged():
    assert HeartbeatData("c@1", ["g"]).to_json() == b'{"clientID":"c@1","consumerDataSet":[],"producerDataSet":[{"groupName":"g"}]}'


def _answer(version, **ext):
    return RemotingCommand(0, version=version, ext_fields={k: str(v).lower() for k, v in ext.items()})


def test_heartbeat_v2_state_follows_the_broker_answers():
    hb = HeartbeatData.from_json(body_bytes(frame("client_basics", 242)))
    hb = HeartbeatData(hb.client_id, hb.producer_groups, hb.consumers)
    state = BrokerHeartbeats(use_v2=True)
    body, full = state.body_for("b:1", hb)
    assert full and body.without_sub is False and body.heartbeat_fingerprint not in (None, 0)
    assert body.consumers[0].subscriptions
    state.on_answer("b:1", body, full, _answer(479, IS_SUPPORT_HEART_BEAT_V2=True, IS_SUB_CHANGE=True))
    slim, full = state.body_for("b:1", hb)
    assert not full and slim.without_sub is True and slim.consumers[0].subscriptions == []
    # the broker lost the group (restart): full again
    state.on_answer("b:1", slim, full, _answer(479, IS_SUPPORT_HEART_BEAT_V2=True, IS_SUB_CHANGE=True))
    assert state.body_for("b:1", hb)[1]
    # a 4.x broker never announces v2: always full
    body, full = state.body_for("old:1", hb)
    state.on_answer("old:1", body, full, _answer(409))
    assert state.body_for("old:1", hb)[1]
    assert state.is_v5("b:1") is True and state.is_v5("old:1") is False and state.is_v5("x:1") is None


def test_sdk_detects_broker_version_and_speaks_heartbeat_v2_with_reference_broker(v5_cluster, tmp_path):
    from tests.rmq5.conftest import broker_of

    seen = []
    broker = broker_of(v5_cluster)
    orig = broker.server._processors[RequestCode.HEART_BEAT]

    def spy(ch, cmd):
        seen.append(HeartbeatData.from_json(cmd.body))
        return orig(ch, cmd)

    broker.server.register_processor(RequestCode.HEART_BEAT, spy)
    c = PushConsumer("hb2_group", namesrv_addr=v5_cluster.namesrv_addr, use_heartbeat_v2=True)
    c.subscribe("HbTopic", "*")
    c.register_message_listener(lambda msgs, ctx: None)
    p = Producer("hb2_producer", namesrv_addr=v5_cluster.namesrv_addr)
    p.start()
    try:
        from rocketmq_sdk import Message
        p.send(Message("HbTopic", b"x"))
        c.start()
        inst = c.instance
        inst.run(inst.send_heartbeat_to_all(), 5)
        inst.run(inst.send_heartbeat_to_all(), 5)
        assert inst.broker_heartbeats.is_v5(v5_cluster.broker_addr) is True
        assert inst.broker_heartbeats.version(v5_cluster.broker_addr) == 479
        ours = [h for h in seen if h.consumers]
        assert ours[0].without_sub is False and ours[-1].without_sub is True
        # the broker kept the subscriptions of the short heartbeat
        assert "HbTopic" in broker.consumers.groups["hb2_group"].subscriptions
    finally:
        c.shutdown()
        p.shutdown()


@pytest.mark.parametrize(("code", "cls"), [(3, "RequestCodeNotSupportedError"), (13, "MessageIllegalError"),
                                           (26, "SubscriptionGroupNotExistError"), (29, "InvalidParameterError"),
                                           (604, "IllegalOperationError"), (1, "MQBrokerError")])
def test_5x_response_codes_map_to_exceptions(code, cls):
    import rocketmq_sdk
    from rocketmq_sdk.exceptions import broker_error
    err = broker_error(code, "remark", "b:1")
    assert type(err) is getattr(rocketmq_sdk, cls) and err.code == code and isinstance(err, rocketmq_sdk.MQBrokerError)


def test_reference_broker_answers_as_5x_only_when_configured(v5_cluster, tmp_path):
    from rocketmq_broker.embedded import start_dev_cluster
    from rocketmq_sdk.protocol.codes import CURRENT_VERSION, V5_3_3

    from tests.broker.conftest import SyncClient
    hb = HeartbeatData("c@1", ["g"]).to_json()
    client = SyncClient()
    try:
        resp = client.invoke(v5_cluster.broker_addr, RequestCode.HEART_BEAT, body=hb)
        assert resp.version == V5_3_3 and resp.ext_fields["IS_SUPPORT_HEART_BEAT_V2"] == "true"
        route = TopicRouteData.from_json(client.invoke(v5_cluster.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                       {"topic": "TBW102"}).body)
        assert route.broker_datas[0].enable_acting_master is False
        with start_dev_cluster(str(tmp_path / "s4"), in_process=True, broker_config=V4) as c4:
            resp = client.invoke(c4.broker_addr, RequestCode.HEART_BEAT, body=hb)
            assert resp.version == CURRENT_VERSION and "IS_SUPPORT_HEART_BEAT_V2" not in resp.ext_fields
            body = client.invoke(c4.namesrv_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}).body
            assert b"enableActingMaster" not in body
    finally:
        client.close()


def test_get_topic_config_answers_like_5_3_3(v5_cluster):
    from tests.broker.conftest import SyncClient
    from tests.rmq5.conftest import broker_of
    broker_of(v5_cluster).topics.create_system("%RETRY%cap_pop_push_group", 1)
    req, want = frame("admin", 45), frame("admin", 46)
    client = SyncClient()
    try:
        resp = client.invoke(v5_cluster.broker_addr, RequestCode.GET_TOPIC_CONFIG, req["header"]["extFields"])
        assert resp.code == 0 and resp.body == body_bytes(want)
        resp = client.invoke(v5_cluster.broker_addr, RequestCode.GET_TOPIC_CONFIG, {"topic": "NoSuchTopicHere"})
        assert resp.code == 17
    finally:
        client.close()


def test_lite_pull_message_is_answered_like_pull(v5_cluster, v5_producer):
    from rocketmq_sdk import Message
    from rocketmq_sdk.protocol.message_codec import decode_messages

    from tests.broker.conftest import SyncClient
    r = v5_producer.send(Message("LiteTopic", b"lite"))
    ext = {"consumerGroup": "lite_g", "topic": "LiteTopic", "queueId": str(r.message_queue.queue_id),
           "queueOffset": "0", "maxMsgNums": "32", "sysFlag": "22", "commitOffset": "0",
           "suspendTimeoutMillis": "20000", "subscription": "*", "subVersion": "0", "expressionType": "TAG"}
    client = SyncClient()
    try:
        resp = client.invoke(v5_cluster.broker_addr, RequestCode.LITE_PULL_MESSAGE, ext)
        assert resp.code == 0 and [m.body for m in decode_messages(resp.body)] == [b"lite"]
    finally:
        client.close()


def test_topic_route_json_shows_5x_fields(v5_cluster, v5_producer):
    import json

    from click.testing import CliRunner
    from rocketmq_sdk import Message
    from rocketmq_sdk.admin.cli import cli
    v5_producer.send(Message("RouteTopic", b"x"))
    out = CliRunner().invoke(cli, ["topicRoute", "-n", v5_cluster.namesrv_addr, "-t", "RouteTopic", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["brokerDatas"][0]["enableActingMaster"] is False
