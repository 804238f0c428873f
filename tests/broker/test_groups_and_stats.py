"""Subscription groups (subscriptionGroup.json), broker config get/update, offset reset pushed to
clients, consume stats, runtime info and the consume-directly forward."""

from __future__ import annotations

import json
import os

from rocketmq_broker.broker.tps_meter import ConsumeTpsMeter
from rocketmq_broker.embedded import start_dev_cluster
from rocketmq_sdk.protocol.admin_bodies import (
    ConsumeStats,
    KVTable,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
)
from rocketmq_sdk.protocol.bodies import ResetOffsetBody
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    PullMessageRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketmq_sdk.protocol.message import MessageQueue
from rocketmq_sdk.protocol.msgid import decode_offset_msg_id
from rocketmq_sdk.remoting import RemotingCommand

from tests.broker.conftest import SyncClient
from tests.broker.test_clients_offsets import _heartbeat, _wait
from tests.broker.test_send_pull import _send


def _update_group(client, addr, sg: SubscriptionGroupConfig) -> RemotingCommand:
    return client.invoke(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, sg.to_json())


def _all_groups(client, addr) -> SubscriptionGroupWrapper:
    r = client.invoke(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    assert r.code == ResponseCode.SUCCESS
    return SubscriptionGroupWrapper.from_json(r.body)


def test_subscription_group_is_created_listed_persisted_and_deleted(tmp_path):
    store = str(tmp_path / "store")
    client = SyncClient()
    try:
        with start_dev_cluster(store, in_process=True) as c:
            sg = SubscriptionGroupConfig("GrpA", retry_max_times=3, retry_queue_nums=2, consume_broadcast_enable=False)
            assert _update_group(client, c.broker_addr, sg).code == ResponseCode.SUCCESS
            table = _all_groups(client, c.broker_addr).subscription_group_table
            assert table["GrpA"].retry_max_times == 3 and table["GrpA"].retry_queue_nums == 2
            assert "TOOLS_CONSUMER" in table  # the groups a 4.9.8 broker always knows
            on_disk = json.load(open(os.path.join(store, "config", "subscriptionGroup.json"), encoding="utf-8"))
            assert on_disk["subscriptionGroupTable"]["GrpA"]["retryMaxTimes"] == 3
        with start_dev_cluster(store, in_process=True) as c:
            assert _all_groups(client, c.broker_addr).subscription_group_table["GrpA"].retry_queue_nums == 2
            c.broker.offsets.commit("GrpA", "T", 0, 7)
            r = client.invoke(c.broker_addr, RequestCode.DELETE_SUBSCRIPTIONGROUP,
                              {"groupName": "GrpA", "removeOffset": "true"})
            assert r.code == ResponseCode.SUCCESS
            assert "GrpA" not in _all_groups(client, c.broker_addr).subscription_group_table
            assert c.broker.offsets.query("GrpA", "T", 0) == -1
    finally:
        client.close()


def test_heartbeat_auto_creates_the_group_and_its_retry_queues(cluster, client):
    _update_group(client, cluster.broker_addr, SubscriptionGroupConfig("G3", retry_queue_nums=3))
    assert client.invoke(cluster.broker_addr, RequestCode.HEART_BEAT,
                         body=_heartbeat("c1", "G3", "T")).code == ResponseCode.SUCCESS
    assert cluster.broker.topics.get("%RETRY%G3").write_queue_nums == 3
    client.invoke(cluster.broker_addr, RequestCode.HEART_BEAT, body=_heartbeat("c1", "NewGroup", "T"))
    assert "NewGroup" in _all_groups(client, cluster.broker_addr).subscription_group_table


def _pull(client, cluster, group, topic="GT"):
    h = PullMessageRequestHeader(consumer_group=group, topic=topic, queue_id=0, queue_offset=0, max_msg_nums=32,
                                 sys_flag=0x4, commit_offset=0, suspend_timeout_millis=0, subscription="*",
                                 sub_version=0)
    return client.invoke(cluster.broker_addr, RequestCode.PULL_MESSAGE, h.to_ext_fields())


def test_consume_disabled_group_gets_no_permission_and_unknown_group_without_auto_create(tmp_path, client):
    with start_dev_cluster(str(tmp_path / "s"), in_process=True) as c:
        assert _send(client, c, "GT", b"x", {}).code == ResponseCode.SUCCESS
        assert _pull(client, c, "Open").code == ResponseCode.SUCCESS
        _update_group(client, c.broker_addr, SubscriptionGroupConfig("Closed", consume_enable=False))
        r = _pull(client, c, "Closed")
        assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, "subscription group no permission, Closed")
        # UPDATE_BROKER_CONFIG turns auto-creation off on the running broker
        body = b"autoCreateSubscriptionGroup=false\n"
        assert client.invoke(c.broker_addr, RequestCode.UPDATE_BROKER_CONFIG, {}, body).code == ResponseCode.SUCCESS
        assert _pull(client, c, "Unknown").code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


def test_send_back_uses_the_groups_retry_max_times_for_old_clients(cluster, client):
    _update_group(client, cluster.broker_addr, SubscriptionGroupConfig("RG", retry_max_times=0))
    r = _send(client, cluster, "RT", b"boom", {})
    offset_msg_id = r.ext_fields["msgId"]
    phy = decode_offset_msg_id(offset_msg_id)[2]
    h = ConsumerSendMsgBackRequestHeader(offset=phy, group="RG", delay_level=0, origin_msg_id=offset_msg_id,
                                         origin_topic="RT", unit_mode=False, max_reconsume_times=None)
    cmd = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, h.to_ext_fields())
    cmd.version = 0  # before V3_4_9 the group's retryMaxTimes rules, not the header
    assert client.invoke(cluster.broker_addr, 0, cmd=cmd).code == ResponseCode.SUCCESS
    assert _wait(lambda: cluster.broker.store.get_max_offset_in_queue("%DLQ%RG", 0) == 1)
    assert cluster.broker.store.get_max_offset_in_queue("%RETRY%RG", 0) <= 0


def test_broker_config_is_read_and_updated(cluster, client):
    r = client.invoke(cluster.broker_addr, RequestCode.GET_BROKER_CONFIG)
    assert r.code == ResponseCode.SUCCESS
    props = dict(line.split("=", 1) for line in r.body.decode().splitlines() if line)
    assert props["brokerName"] == cluster.broker.config.broker_name
    assert props["brokerClusterName"] == "DefaultCluster"
    version = json.loads(r.ext_fields["version"])
    ok = client.invoke(cluster.broker_addr, RequestCode.UPDATE_BROKER_CONFIG, {}, b"longPollingEnable=false\n")
    assert ok.code == ResponseCode.SUCCESS and cluster.broker.config.long_polling_enable is False
    r2 = client.invoke(cluster.broker_addr, RequestCode.GET_BROKER_CONFIG)
    assert "longPollingEnable=false" in r2.body.decode().splitlines()
    assert json.loads(r2.ext_fields["version"])["counter"] == version["counter"] + 1
    bad = client.invoke(cluster.broker_addr, RequestCode.UPDATE_BROKER_CONFIG, {}, b"listenPort=notanumber\n")
    assert bad.code == ResponseCode.SYSTEM_ERROR


def test_reset_offset_by_time_is_pushed_to_online_clients_and_answered(cluster, client):
    for i in range(5):
        assert _send(client, cluster, "RsT", b"m%d" % i, {}, queue_id=0).code == ResponseCode.SUCCESS
    pushed: list[RemotingCommand] = []

    async def on_reset(ch, cmd):
        pushed.append(cmd)

    member = SyncClient()
    try:
        member.client.register_processor(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, on_reset)
        member.invoke(cluster.broker_addr, RequestCode.HEART_BEAT, body=_heartbeat("c1", "RsG", "RsT"))
        # like Java, every write queue needs a committed offset ("THe consumer group <G> not exist" otherwise)
        partial = client.invoke(cluster.broker_addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                {"topic": "RsT", "group": "RsG", "timestamp": "0", "isForce": "true"})
        assert (partial.code, partial.remark) == (ResponseCode.SYSTEM_ERROR, "THe consumer group <RsG> not exist")
        for qid in range(cluster.broker.topics.get("RsT").write_queue_nums):
            upd = UpdateConsumerOffsetRequestHeader(consumer_group="RsG", topic="RsT", queue_id=qid,
                                                    commit_offset=5 if qid == 0 else 0)
            member.invoke(cluster.broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET, upd.to_ext_fields())
        r = client.invoke(cluster.broker_addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                          {"topic": "RsT", "group": "RsG", "timestamp": "0", "isForce": "true"})
        assert r.code == ResponseCode.SUCCESS
        mq0 = MessageQueue("RsT", cluster.broker.config.broker_name, 0)
        assert ResetOffsetBody.from_json(r.body).offset_table[mq0] == 0
        assert _wait(lambda: len(pushed) == 1)
        assert ResetOffsetBody.from_json(pushed[0].body).offset_table[mq0] == 0
        assert pushed[0].ext_fields["group"] == "RsG"
        offline = client.invoke(cluster.broker_addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                                {"topic": "RsT", "group": "Nobody", "timestamp": "0", "isForce": "true"})
        assert offline.code == ResponseCode.SYSTEM_ERROR
    finally:
        member.close()


def test_consume_stats_report_lag_and_tps_and_runtime_info_counts(cluster, client):
    for i in range(4):
        _send(client, cluster, "StT", b"m%d" % i, {}, queue_id=0)
    client.invoke(cluster.broker_addr, RequestCode.HEART_BEAT, body=_heartbeat("c1", "StG", "StT"))
    upd = UpdateConsumerOffsetRequestHeader(consumer_group="StG", topic="StT", queue_id=0, commit_offset=1)
    client.invoke(cluster.broker_addr, RequestCode.UPDATE_CONSUMER_OFFSET, upd.to_ext_fields())
    h = PullMessageRequestHeader(consumer_group="StG", topic="StT", queue_id=0, queue_offset=1, max_msg_nums=32,
                                 sys_flag=0x4, commit_offset=0, suspend_timeout_millis=0, subscription="*",
                                 sub_version=0)
    assert client.invoke(cluster.broker_addr, RequestCode.PULL_MESSAGE, h.to_ext_fields()).code == ResponseCode.SUCCESS
    r = client.invoke(cluster.broker_addr, RequestCode.GET_CONSUME_STATS, {"consumerGroup": "StG", "topic": "StT"})
    stats = ConsumeStats.from_json(r.body)
    w = stats.offset_table[MessageQueue("StT", cluster.broker.config.broker_name, 0)]
    assert (w.broker_offset, w.consumer_offset) == (4, 1)
    assert stats.consume_tps == 3 / 60
    rt = KVTable.from_json(client.invoke(cluster.broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO).body).table
    assert rt["msgPutTotalTodayNow"] == "4" and rt["msgGetTotalTodayNow"] == "3"


def test_consume_tps_meter_keeps_a_sliding_window():
    m = ConsumeTpsMeter(window_s=10)
    m.add("g", 20, now=100)
    m.add("g", 10, now=105)
    assert m.tps("g", now=106) == 3.0
    assert m.tps("g", now=111) == 1.0  # the first second fell out of the window
    assert m.tps("other", now=111) == 0.0


def test_consume_message_directly_is_forwarded_with_the_stored_message(cluster, client):
    sent = _send(client, cluster, "CdT", b"direct-body", {})
    got: list[RemotingCommand] = []

    async def on_direct(ch, cmd):
        got.append(cmd)
        return cmd.response(ResponseCode.SUCCESS, body=b'{"consumeResult":"CR_SUCCESS"}')

    member = SyncClient()
    try:
        member.client.register_processor(RequestCode.CONSUME_MESSAGE_DIRECTLY, on_direct)
        member.invoke(cluster.broker_addr, RequestCode.HEART_BEAT, body=_heartbeat("cd-1", "CdG", "CdT"))
        ext = {"consumerGroup": "CdG", "clientId": "cd-1", "msgId": sent.ext_fields["msgId"]}
        r = client.invoke(cluster.broker_addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, ext)
        assert (r.code, r.body) == (ResponseCode.SUCCESS, b'{"consumeResult":"CR_SUCCESS"}')
        assert b"direct-body" in got[0].body and got[0].ext_fields["brokerName"] == cluster.broker.config.broker_name
        gone = client.invoke(cluster.broker_addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, {**ext, "clientId": "nope"})
        assert (gone.code, gone.remark) == (ResponseCode.SYSTEM_ERROR, "The Consumer <CdG> <nope> not online")
    finally:
        member.close()
