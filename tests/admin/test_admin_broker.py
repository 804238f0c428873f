"""rocketmq-admin against the reference name server and two brokers (broker-a, broker-b in
DefaultCluster): every command, table and ``--json`` output."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from rocketmq_sdk import Producer
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.admin.cli import cli
from rocketmq_sdk.consumer import PushConsumer
from rocketmq_sdk.exceptions import MQBrokerError
from rocketmq_sdk.protocol.message import Message

from tests.conftest import Received, wait_until

embedded = pytest.importorskip("rocketmq_broker.embedded")

TOPIC = "AdminTopic"
GROUP = "admin_cg"
N = 12
FAST = {"suspend_timeout": 1000, "pull_timeout": 4000, "rebalance_interval": 500,
        "persist_consumer_offset_interval": 200, "consume_from_where": "CONSUME_FROM_FIRST_OFFSET",
        "heartbeat_broker_interval": 500}



@pytest.fixture(scope="module")
def env():
    """Two brokers, topic AdminTopic (4 queues on each) holding N keyed messages, consumed
    completely by group admin_cg, whose consumer stays online."""
    with embedded.start_cluster(("broker-a", "broker-b")) as cluster:
        with AdminClient(cluster.namesrv_addr) as admin:
            wait_until(lambda: len(admin.cluster_list(runtime=False)) == 2, what="two brokers registered")
            admin.create_topic(TOPIC, cluster="DefaultCluster", read_queue_nums=4, write_queue_nums=4)
            wait_until(lambda: len(admin.topic_route(TOPIC).queue_datas) == 2, what="route on both brokers")
        received = Received()
        consumed = received.messages
        with Producer("admin_pg", cluster.namesrv_addr) as producer:
            sent = [producer.send(Message(TOPIC, f"body-{i}", tags="TagA", keys=[f"key-{i}"])) for i in range(N)]
        consumer = PushConsumer(GROUP, cluster.namesrv_addr, instance_name="admin", **FAST)
        consumer.subscribe(TOPIC, "TagA || TagB")
        consumer.register_message_listener(received)
        consumer.start()
        admin = AdminClient(cluster.namesrv_addr)
        try:
            wait_until(lambda: len({m.msg_id for m in consumed}) == N, what="all consumed")
            yield {"ns": cluster.namesrv_addr, "addr_a": cluster.addr("broker-a"), "addr_b": cluster.addr("broker-b"),
                   "sent": sent,
                   "consumed": consumed, "consumer": consumer, "admin": admin, "cluster": cluster}
        finally:
            admin.close()
            consumer.shutdown()


def run(env, *args: str):
    r = CliRunner().invoke(cli, [args[0], "-n", env["ns"], *args[1:]], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return r


def rows(output: str) -> list[list[str]]:
    return [ln.split() for ln in output.splitlines()]


def test_cluster_list_shows_both_brokers(env):
    r = run(env, "clusterList")
    table = rows(r.output)
    assert table[0][:3] == ["#Cluster", "Name", "#Broker"]
    assert [ln[:5] for ln in table[1:]] == [["DefaultCluster", "broker-a", "0", env["addr_a"], "MASTER"],
                                             ["DefaultCluster", "broker-b", "0", env["addr_b"], "MASTER"]]
    j = json.loads(run(env, "clusterList", "--json").output)
    assert {(b["broker_name"], b["addr"], b["role"]) for b in j} == {
        ("broker-a", env["addr_a"], "MASTER"), ("broker-b", env["addr_b"], "MASTER")}


def test_topic_list_and_route(env):
    assert TOPIC in run(env, "topicList").output.split()
    assert TOPIC in json.loads(run(env, "topicList", "--json").output)
    r = run(env, "topicRoute", "-t", TOPIC)
    assert ["broker-a", "4", "4", "6", "0"] in rows(r.output)
    assert ["broker-b", "4", "4", "6", "0"] in rows(r.output)
    j = json.loads(run(env, "topicRoute", "-t", TOPIC, "--json").output)
    assert sorted(b["brokerName"] for b in j["brokerDatas"]) == ["broker-a", "broker-b"]


def test_topic_status_counts_every_message(env):
    j = json.loads(run(env, "topicStatus", "-t", TOPIC, "--json").output)
    assert [(q["broker_name"], q["queue_id"]) for q in j] == [(b, i) for b in ("broker-a", "broker-b")
                                                               for i in range(4)]
    assert sum(q["max_offset"] - q["min_offset"] for q in j) == N
    written = [q for q in j if q["max_offset"] > 0]
    assert written and all(q["last_update_timestamp"] > 0 for q in written)
    text = run(env, "topicStatus", "-t", TOPIC).output
    assert rows(text)[0] == ["#Broker", "Name", "#QID", "#Min", "Offset", "#Max", "Offset", "#Last", "Updated"]
    assert len(rows(text)) == 9


def test_consumer_progress_table_json_and_watch(env):
    admin = env["admin"]
    wait_until(lambda: (p := admin.consumer_progress(GROUP, TOPIC)).total_lag == 0 and len(p.queues) == 8,
               what="committed offsets")
    j = json.loads(run(env, "consumerProgress", "-g", GROUP, "--json").output)
    mine = [q for q in j["queues"] if q["topic"] == TOPIC]
    assert len(mine) == 8 and sum(q["broker_offset"] for q in mine) == N
    assert all(q["lag"] == q["broker_offset"] - q["consumer_offset"] == 0 for q in mine)
    assert j["total_lag"] == 0
    text = run(env, "consumerProgress", "-g", GROUP, "-t", TOPIC).output
    assert rows(text)[0][:3] == ["#Topic", "#Broker", "Name"]
    assert "Diff Total: 0" in text
    w = run(env, "consumerProgress", "-g", GROUP, "--watch", "--interval", "0.05", "--count", "2").output
    assert len(w.splitlines()) == 2 and all("lag=0" in ln for ln in w.splitlines())


def test_consumer_connection(env):
    client_id = env["consumer"].instance.client_id
    r = run(env, "consumerConnection", "-g", GROUP)
    assert client_id in r.output and "PYTHON" in r.output
    assert [TOPIC, "TagA", "||", "TagB"] in rows(r.output)
    j = json.loads(run(env, "consumerConnection", "-g", GROUP, "--json").output)
    assert [c["client_id"] for c in j["connections"]] == [client_id]
    assert j["connections"][0]["language"] == "PYTHON"
    assert {"topic": TOPIC, "expression": "TagA || TagB", "expression_type": "TAG"} in j["subscriptions"]
    assert j["message_model"] == "CLUSTERING"


def test_consumer_status_running_info(env):
    client_id = env["consumer"].instance.client_id
    j = json.loads(run(env, "consumerStatus", "-g", GROUP, "--json").output)
    info = j[client_id]
    assert any(k.startswith(TOPIC + "@") for k in info["mqTable"])
    assert {"topic": TOPIC, "expression": "TagA || TagB", "expression_type": "TAG"} in info["subscriptions"]


def test_query_messages_by_ids_key_and_offset(env):
    s = env["sent"][3]
    m = json.loads(run(env, "queryMsgById", "-i", s.offset_msg_id, "--json").output)[0]
    assert (m["msgId"], m["body"], m["keys"], m["tags"]) == (s.msg_id, "body-3", ["key-3"], "TagA")
    text = run(env, "queryMsgById", "-i", s.offset_msg_id).output
    assert ["Body:"] in rows(text) and "body-3" in text and "UNIQ_KEY=" + s.msg_id in text
    u = json.loads(run(env, "queryMsgByUniqueKey", "-i", s.msg_id, "-t", TOPIC, "--json").output)[0]
    assert u["offsetMsgId"] == s.offset_msg_id
    assert json.loads(run(env, "queryMsgById", "-i", s.msg_id, "-t", TOPIC, "--json").output)[0]["body"] == "body-3"
    k = json.loads(run(env, "queryMsgByKey", "-t", TOPIC, "-k", "key-3", "--json").output)
    assert [x["msgId"] for x in k] == [s.msg_id]
    assert s.msg_id in run(env, "queryMsgByKey", "-t", TOPIC, "-k", "key-3").output
    q = s.message_queue
    o = json.loads(run(env, "queryMsgByOffset", "-t", TOPIC, "-b", q.broker_name, "-i", str(q.queue_id),
                       "-o", str(s.queue_offset), "--json").output)[0]
    assert o["msgId"] == s.msg_id and o["queueOffset"] == s.queue_offset


def test_query_msg_by_id_accepts_the_send_result_msg_id_without_a_topic(env):
    """Issue 17: ``queryMsgById -i <SendResult.msg_id>`` (a unique id) without -t finds the
    message, as mqadmin does, instead of failing with "invalid port"."""
    s = env["sent"][5]
    m = json.loads(run(env, "queryMsgById", "-i", s.msg_id, "--json").output)[0]
    assert (m["msgId"], m["offsetMsgId"], m["body"]) == (s.msg_id, s.offset_msg_id, "body-5")


def test_query_key_outside_the_time_range_finds_nothing(env):
    k = json.loads(run(env, "queryMsgByKey", "-t", TOPIC, "-k", "key-3", "-b", "1", "-e", "2", "--json").output)
    assert k == []


def test_unknown_message_id_is_an_error(env):
    r = CliRunner().invoke(cli, ["queryMsgById", "-n", env["ns"], "-i", "not-an-id"])
    assert r.exit_code == 1 and "ERROR" in r.output


def test_reset_offset_by_time_makes_the_consumer_read_again(env):
    before = len(env["consumed"])
    j = json.loads(run(env, "resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "0", "--json").output)
    assert len(j) == 8 and all(e["offset"] == 0 for e in j)
    wait_until(lambda: len(env["consumed"]) >= before + N, what="messages consumed again")


def test_update_sub_group_on_the_cluster(env):
    j = json.loads(run(env, "updateSubGroup", "-c", "DefaultCluster", "-g", "admin_sub", "-r", "3", "--json").output)
    assert sorted(j["brokers"]) == sorted([env["addr_a"], env["addr_b"]])


def test_update_sub_group_marks_a_fifo_group(env):
    """``-o true`` (5.x consumeMessageOrderly) reaches every broker's group table; without ``-o``
    the field stays out (4.9.8's body, see test_admin_capture)."""
    run(env, "updateSubGroup", "-c", "DefaultCluster", "-g", "admin_fifo", "-o", "true", "--json")
    run(env, "updateSubGroup", "-c", "DefaultCluster", "-g", "admin_plain", "--json")
    with AdminClient(env["ns"]) as admin:
        fifo = admin.subscription_group_config("admin_fifo")
        plain = admin.subscription_group_config("admin_plain")
    assert sorted(fifo.brokers) == ["broker-a", "broker-b"]
    assert all(cfg.consume_message_orderly is True for cfg in fifo.brokers.values())
    assert all(cfg.consume_message_orderly is None for cfg in plain.brokers.values())


def test_broker_status_and_config(env):
    j = json.loads(run(env, "brokerStatus", "-b", env["addr_a"], "--json").output)
    assert j[env["addr_a"]]
    c = json.loads(run(env, "getBrokerConfig", "-c", "DefaultCluster", "--json").output)
    assert c[env["addr_a"]]["brokerName"] == "broker-a" and c[env["addr_b"]]["brokerName"] == "broker-b"
    text = run(env, "getBrokerConfig", "-b", env["addr_b"]).output
    assert ["brokerName", "broker-b"] in rows(text)


def test_kv_config_round_trip(env):
    run(env, "updateKvConfig", "-s", "ADMIN_NS", "-k", "k1", "-v", "v1")
    assert run(env, "getKvConfig", "-s", "ADMIN_NS", "-k", "k1").output.strip() == "v1"
    run(env, "deleteKvConfig", "-s", "ADMIN_NS", "-k", "k1")
    r = CliRunner().invoke(cli, ["getKvConfig", "-n", env["ns"], "-s", "ADMIN_NS", "-k", "k1"])
    assert r.exit_code == 1 and "no key" in r.output


def test_resend_message_to_the_consumer(env):
    s = env["sent"][5]
    client_id = env["consumer"].instance.client_id
    r = run(env, "queryMsgById", "-i", s.offset_msg_id, "-g", GROUP, "-d", client_id, "--json")
    assert json.loads(r.output)[client_id]["consumeResult"] == "CR_SUCCESS"


def test_wipe_write_perm_drains_broker_b(env):
    admin = env["admin"]
    topics_b = [t for t in admin.topics_by_cluster("DefaultCluster")
                if any(q.broker_name == "broker-b" for q in admin.topic_route(t).queue_datas)]
    j = json.loads(run(env, "wipeWritePerm", "-b", "broker-b", "--json").output)
    try:
        assert j == {env["ns"]: len(topics_b)}  # every topic broker-b serves, as 4.9.8 counts
        assert {q.broker_name: q.perm for q in admin.topic_route(TOPIC).queue_datas} == {"broker-a": 6, "broker-b": 4}
        # the periodic registration of the unchanged broker keeps the wiped permission (data version)
        env["cluster"].run(env["cluster"].brokers["broker-b"].register_all(oneway=False))
        assert {q.broker_name: q.perm for q in admin.topic_route(TOPIC).queue_datas}["broker-b"] == 4
        with Producer("admin_wipe_pg", env["ns"]) as p:  # producers now only write to broker-a
            assert {p.send(Message(TOPIC, b"x")).message_queue.broker_name for _ in range(6)} == {"broker-a"}
    finally:
        text = run(env, "addWritePerm", "-b", "broker-b").output
    assert text.strip() == f"add write perm of broker[broker-b] in name server[{env['ns']}] OK, {len(topics_b)}"
    assert {q.broker_name: q.perm for q in admin.topic_route(TOPIC).queue_datas}["broker-b"] == 6


def test_topic_lists_by_cluster(env):
    topics = run(env, "topicList", "-c", "--json").output
    by_topic = {r["topic"]: r for r in json.loads(topics)}
    assert by_topic[TOPIC]["cluster"] == "DefaultCluster"
    assert GROUP in by_topic[TOPIC]["consumer_groups"]
    assert not any(t.startswith(("%RETRY%", "%DLQ%")) for t in by_topic)
    assert {"broker-a", "broker-b", "DefaultCluster", "TBW102"} <= set(by_topic)
    table = rows(run(env, "topicList", "-c").output)
    assert table[0] == ["#Cluster", "Name", "#Topic", "#Consumer", "Group"]
    assert ["DefaultCluster", TOPIC, GROUP] in table
    assert run(env, "topicClusterList", "-t", TOPIC).output.split() == ["DefaultCluster"]
    assert env["admin"].topics_by_cluster("NoSuchCluster") == []


def test_namesrv_config_get_and_update(env):
    c = json.loads(run(env, "getNamesrvConfig", "--json").output)[env["ns"]]
    assert c["orderMessageEnable"] == "false" and c["listenPort"] == env["ns"].rsplit(":", 1)[1]
    assert c["configBlackList"] == "configBlackList;configStorePath;kvConfigPath"
    out = run(env, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true").output
    assert out.startswith("update name server config success!")
    assert env["admin"].namesrv_config()[env["ns"]]["orderMessageEnable"] == "true"
    r = CliRunner().invoke(cli, ["updateNamesrvConfig", "-n", env["ns"], "-k", "kvConfigPath", "-v", "/tmp/x"])
    assert r.exit_code == 1 and "Can not update config in black list." in r.output
    env["admin"].update_namesrv_config({"orderMessageEnable": "false"})


def test_update_and_delete_a_topic(env):
    run(env, "updateTopic", "-c", "DefaultCluster", "-t", "AdminTmp", "-r", "2", "-w", "2", "-p", "6")
    assert "AdminTmp" in run(env, "topicList").output.split()
    out = run(env, "deleteTopic", "-c", "DefaultCluster", "-t", "AdminTmp").output
    assert "delete topic [AdminTmp] from cluster [DefaultCluster] success." in out
    assert "AdminTmp" not in run(env, "topicList").output.split()
    r = CliRunner().invoke(cli, ["topicRoute", "-n", env["ns"], "-t", "AdminTmp"])
    assert r.exit_code == 1 and "ERROR" in r.output


def test_producer_connection(env):
    with Producer("admin_live_pg", env["ns"], heartbeat_broker_interval=300) as p:
        p.send(Message(TOPIC, "x", tags="TagC"))

        def online() -> bool:
            try:
                return bool(env["admin"].producer_connection("admin_live_pg", TOPIC))
            except MQBrokerError:
                return False  # "the producer group not exist" until its heartbeat arrives

        wait_until(online, what="producer heartbeat")
        j = json.loads(run(env, "producerConnection", "-g", "admin_live_pg", "-t", TOPIC, "--json").output)
        assert [c["client_id"] for c in j] == [p.instance.client_id]
        assert j[0]["language"] == "PYTHON"


def test_update_topic_perm_on_one_broker(env):
    run(env, "updateTopic", "-c", "DefaultCluster", "-t", "AdminPerm", "-r", "2", "-w", "3")
    j = json.loads(run(env, "updateTopicPerm", "-t", "AdminPerm", "-p", "4", "-b", env["addr_b"], "--json").output)
    assert j["brokers"] == [env["addr_b"]]
    wait_until(lambda: {q.broker_name: (q.perm, q.read_queue_nums, q.write_queue_nums)
                        for q in env["admin"].topic_route("AdminPerm").queue_datas}
               == {"broker-a": (6, 2, 3), "broker-b": (4, 2, 3)}, what="perm 4 on broker-b in the route")


def test_consume_offset_of_one_queue_read_and_updated(env):
    admin, mq = env["admin"], env["sent"][0].message_queue
    admin.update_consume_offset("admin_offline_cg", mq, 2)
    assert admin.consume_offset("admin_offline_cg", mq) == 2
    admin.update_consume_offset("admin_offline_cg", mq, 1)
    assert admin.consume_offset("admin_offline_cg", mq) == 1
    with pytest.raises(ValueError):
        admin.update_consume_offset("admin_offline_cg", mq, -1)
