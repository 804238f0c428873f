"""rocketmq-admin vs mqadmin 4.9.8: the requests we send carry the ext fields (and bodies) mqadmin
sent for the same command, and the captured broker answers are parsed and printed right."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from rocketmq_sdk.admin.cli import cli
from rocketmq_sdk.protocol.codes import RequestCode as RC

from .conftest import IGNORED_EXT, captured_request

NS = "127.0.0.1:9876"
BROKER = "127.0.0.1:10911"
UNIQ = "C00002027ACE5FFD2B276DEB1B550001"
OFFSET_ID = "7F00000100002A9F0000000000005B85"
GROUP = "cap_admin_group"
TOPIC = "CapAdminTopic"


def run(*args: str):
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result


def sent_ext(replay, code: int, index: int = 0) -> dict[str, str]:
    reqs = replay.requests(code)
    assert reqs, f"request {code} was not sent"
    return {k: v for k, v in reqs[index].ext_fields.items() if k not in IGNORED_EXT}


def assert_same_as_mqadmin(replay, code: int, **match: str) -> None:
    want = captured_request(code, **match).ext
    got = [{k: v for k, v in c.ext_fields.items() if k not in IGNORED_EXT} for c in replay.requests(code)]
    assert want in got, f"code {code}: sent {got}, mqadmin sent {want}"


def test_update_topic_sends_mqadmins_fields(replay):
    r = run("updateTopic", "-n", NS, "-b", BROKER, "-t", TOPIC, "-r", "4", "-w", "4")
    assert r.exit_code == 0, r.output
    assert_same_as_mqadmin(replay, RC.UPDATE_AND_CREATE_TOPIC, topic=TOPIC)
    assert "create topic to 127.0.0.1:10911 success." in r.output


def test_update_topic_read_only_perm(replay):
    r = run("updateTopic", "-n", NS, "-b", BROKER, "-t", "CapAdminTmpTopic", "-r", "2", "-w", "2", "-p", "4")
    assert r.exit_code == 0, r.output
    assert_same_as_mqadmin(replay, RC.UPDATE_AND_CREATE_TOPIC, topic="CapAdminTmpTopic", perm="4")


def test_topic_list(replay):
    r = run("topicList", "-n", NS, "--json")
    assert r.exit_code == 0, r.output
    topics = json.loads(r.output)
    assert TOPIC in topics and "TBW102" in topics and topics == sorted(topics)
    assert sent_ext(replay, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER) == {}


def test_topic_route_table(replay):
    r = run("topicRoute", "-n", NS, "-t", TOPIC)
    assert r.exit_code == 0, r.output
    assert_same_as_mqadmin(replay, RC.GET_ROUTEINFO_BY_TOPIC, topic=TOPIC)
    lines = r.output.splitlines()
    assert lines[0].split() == ["#Cluster", "#Broker", "Name", "#BID", "#Addr"]
    assert lines[1].split() == ["DefaultCluster", "broker-a", "0", "127.0.0.1:10911"]


def test_topic_status_parses_the_stats_table(replay):
    r = run("topicStatus", "-n", NS, "-t", TOPIC)
    assert r.exit_code == 0, r.output
    assert_same_as_mqadmin(replay, RC.GET_TOPIC_STATS_INFO, topic=TOPIC)
    rows = [ln.split()[:4] for ln in r.output.splitlines()[1:]]
    assert rows == [["broker-a", "0", "0", "2"], ["broker-a", "1", "0", "2"], ["broker-a", "2", "0", "1"],
                    ["broker-a", "3", "0", "1"]]
    j = json.loads(run("topicStatus", "-n", NS, "-t", TOPIC, "--json").output)
    assert j[0] == {"broker_name": "broker-a", "queue_id": 0, "min_offset": 0, "max_offset": 2,
                    "last_update_timestamp": 1795335324514}


def test_cluster_list_with_runtime_info(replay):
    r = run("clusterList", "-n", NS, "--json")
    assert r.exit_code == 0, r.output
    assert sent_ext(replay, RC.GET_BROKER_CLUSTER_INFO) == {}
    assert sent_ext(replay, RC.GET_BROKER_RUNTIME_INFO) == {}
    [b] = json.loads(r.output)
    assert (b["cluster"], b["broker_name"], b["broker_id"], b["addr"], b["role"]) == \
        ("DefaultCluster", "broker-a", 0, BROKER, "MASTER")
    assert b["version"] == "V4_9_8"
    text = run("clusterList", "-n", NS).output.splitlines()
    assert text[0].startswith("#Cluster Name") and "V4_9_8" in text[1] and "MASTER" in text[1]


def test_broker_status_and_config(replay):
    r = run("brokerStatus", "-n", NS, "-b", BROKER, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)[BROKER]["msgPutTotalTodayNow"] == "98"
    r = run("getBrokerConfig", "-n", NS, "-b", BROKER)
    assert r.exit_code == 0, r.output
    assert sent_ext(replay, RC.GET_BROKER_CONFIG) == {}
    assert "============127.0.0.1:10911============" in r.output
    assert any(ln.split() == ["brokerName", "broker-a"] for ln in r.output.splitlines())


def test_kv_config_requests(replay):
    assert run("updateKvConfig", "-n", NS, "-s", "CAP_NAMESPACE", "-k", "capKey", "-v", "capValue").exit_code == 0
    assert_same_as_mqadmin(replay, RC.PUT_KV_CONFIG, key="capKey")
    assert run("deleteKvConfig", "-n", NS, "-s", "CAP_NAMESPACE", "-k", "capKey").exit_code == 0
    assert_same_as_mqadmin(replay, RC.DELETE_KV_CONFIG, key="capKey")
    r = run("getKvConfig", "-n", NS, "-s", "CAP_NAMESPACE", "-k", "k1")
    assert r.exit_code == 0 and r.output.strip() == "v1"
    assert_same_as_mqadmin(replay, RC.GET_KV_CONFIG, key="k1")


def test_consumer_progress(replay):
    r = run("consumerProgress", "-n", NS, "-g", GROUP)
    assert r.exit_code == 0, r.output
    assert_same_as_mqadmin(replay, RC.GET_CONSUME_STATS, consumerGroup=GROUP)
    assert_same_as_mqadmin(replay, RC.GET_ROUTEINFO_BY_TOPIC, topic="%RETRY%" + GROUP)
    lines = r.output.splitlines()
    assert lines[0].split()[:3] == ["#Topic", "#Broker", "Name"]
    assert "Diff Total: 0" in r.output
    j = json.loads(run("consumerProgress", "-n", NS, "-g", GROUP, "--json").output)
    assert j["group"] == GROUP and j["total_lag"] == 0 and abs(j["consume_tps"] - 0.1199976) < 1e-6
    assert {(q["topic"], q["queue_id"]) for q in j["queues"]} >= {(TOPIC, 0), (TOPIC, 3)}


def test_consumer_progress_watch_on_a_pipe_prints_lines(replay):
    r = run("consumerProgress", "-n", NS, "-g", GROUP, "--watch", "--interval", "0", "--count", "3")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert len(lines) == 3 and all(f"group={GROUP}" in ln and "lag=0" in ln for ln in lines)
    assert len(replay.requests(RC.GET_CONSUME_STATS)) == 3


def test_consumer_connection(replay):
    r = run("consumerConnection", "-n", NS, "-g", GROUP)
    assert r.exit_code == 0, r.output
    assert_same_as_mqadmin(replay, RC.GET_CONSUMER_CONNECTION_LIST, consumerGroup=GROUP)
    assert "192.0.2.2@31438#4837626093038" in r.output and "JAVA" in r.output
    j = json.loads(run("consumerConnection", "-n", NS, "-g", GROUP, "--json").output)
    assert j["connections"] == [{"client_id": "192.0.2.2@31438#4837626093038", "client_addr": "127.0.0.1:43164",
                                 "language": "JAVA", "version": 409}]
    assert j["message_model"] == "CLUSTERING" and j["consume_from_where"] == "CONSUME_FROM_FIRST_OFFSET"
    assert {"topic": TOPIC, "expression": "*", "expression_type": "TAG"} in j["subscriptions"]


def test_consumer_status_running_info(replay):
    r = run("consumerStatus", "-n", NS, "-g", GROUP, "--json")
    assert r.exit_code == 0, r.output
    assert_same_as_mqadmin(replay, RC.GET_CONSUMER_RUNNING_INFO, consumerGroup=GROUP)
    info = json.loads(r.output)["192.0.2.2@31438#4837626093038"]
    assert info["mqTable"]


def test_query_msg_by_offset_id(replay):
    r = run("queryMsgById", "-n", NS, "-i", OFFSET_ID)
    assert r.exit_code == 0, r.output
    assert_same_as_mqadmin(replay, RC.VIEW_MESSAGE_BY_ID)
    assert "admin message 1" in r.output and "admin-key-1" in r.output and ["MsgId:", UNIQ] in [ln.split() for ln in r.output.splitlines()]
    m = json.loads(run("queryMsgById", "-n", NS, "-i", OFFSET_ID, "--json").output)[0]
    assert (m["msgId"], m["offsetMsgId"], m["topic"], m["tags"], m["keys"]) == \
        (UNIQ, OFFSET_ID, TOPIC, "TagB", ["admin-key-1"])
    assert m["properties"]["CLUSTER"] == "DefaultCluster"


def test_query_msg_by_unique_key(replay):
    r = run("queryMsgByUniqueKey", "-n", NS, "-i", UNIQ, "-t", TOPIC, "--json")
    assert r.exit_code == 0, r.output
    assert_same_as_mqadmin(replay, RC.QUERY_MESSAGE, _UNIQUE_KEY_QUERY="true")
    assert json.loads(r.output)[0]["offsetMsgId"] == OFFSET_ID


def test_query_msg_by_key(replay):
    r = run("queryMsgByKey", "-n", NS, "-t", TOPIC, "-k", "admin-key-3")
    assert r.exit_code == 0, r.output
    assert_same_as_mqadmin(replay, RC.QUERY_MESSAGE, _UNIQUE_KEY_QUERY="false")


def test_query_msg_by_offset(replay):
    r = run("queryMsgByOffset", "-n", NS, "-t", TOPIC, "-b", "broker-a", "-i", "1", "-o", "0", "--json")
    assert r.exit_code == 0, r.output
    assert_same_as_mqadmin(replay, RC.PULL_MESSAGE, queueId="1", consumerGroup="TOOLS_CONSUMER")
    assert json.loads(r.output)[0]["queueId"] == 1


def test_resend_message_to_consumer(replay):
    r = run("queryMsgById", "-n", NS, "-i", OFFSET_ID, "-g", GROUP, "-d", "192.0.2.2@31438#4837626093038")
    assert r.exit_code == 0, r.output
    assert_same_as_mqadmin(replay, RC.CONSUME_MESSAGE_DIRECTLY)
    assert "CR_SUCCESS" in r.output


@pytest.mark.parametrize(("when", "offsets"), [("0", [0, 0, 0, 0]), ("-1", [2, 2, 1, 1])])
def test_reset_offset_by_time(replay, when, offsets):
    r = run("resetOffsetByTime", "-n", NS, "-g", GROUP, "-t", TOPIC, "-s", when, "--json")
    assert r.exit_code == 0, r.output
    assert_same_as_mqadmin(replay, RC.INVOKE_BROKER_TO_RESET_OFFSET, timestamp=when)
    rows = json.loads(r.output)
    assert [(e["queue_id"], e["offset"]) for e in rows] == list(enumerate(offsets))


def test_update_sub_group_body_is_mqadmins(replay):
    r = run("updateSubGroup", "-n", NS, "-b", BROKER, "-g", "cap_admin_sub_group", "-r", "3")
    assert r.exit_code == 0, r.output
    [req] = replay.requests(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
    assert req.body == captured_request(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP).body


def test_delete_topic(replay):
    r = run("deleteTopic", "-n", NS, "-c", "DefaultCluster", "-t", "CapAdminTmpTopic")
    assert r.exit_code == 0, r.output
    assert_same_as_mqadmin(replay, RC.DELETE_TOPIC_IN_BROKER, topic="CapAdminTmpTopic")
    assert_same_as_mqadmin(replay, RC.DELETE_TOPIC_IN_NAMESRV, topic="CapAdminTmpTopic")


def test_wipe_write_perm(replay):
    r = run("wipeWritePerm", "-n", NS, "-b", "broker-b", "--json")
    assert r.exit_code == 0, r.output
    assert_same_as_mqadmin(replay, RC.WIPE_WRITE_PERM_OF_BROKER)
    assert json.loads(r.output) == {NS: 8}


def test_broker_error_is_exit_1_with_message(replay):
    replay.overrides[RC.GET_TOPIC_STATS_INFO] = {"code": 1, "header": {"remark": "boom"}}
    r = CliRunner().invoke(cli, ["topicStatus", "-n", NS, "-t", TOPIC])
    assert r.exit_code == 1
    assert "ERROR" in r.stderr and "boom" in r.stderr and "ERROR" not in r.stdout


def test_usage_errors_exit_2(monkeypatch):
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    assert CliRunner().invoke(cli, ["topicList"]).exit_code == 2          # no name server
    assert CliRunner().invoke(cli, ["topicStatus", "-n", NS]).exit_code == 2  # missing -t
    assert CliRunner().invoke(cli, ["updateTopic", "-n", NS, "-t", "T"]).exit_code == 2  # no -b/-c
    assert CliRunner().invoke(cli, ["noSuchCommand"]).exit_code == 2


def test_namesrv_addr_env_is_honoured(replay, monkeypatch):
    monkeypatch.setenv("NAMESRV_ADDR", NS)
    r = run("topicList")
    assert r.exit_code == 0 and TOPIC in r.output.split()


def test_topic_status_falls_back_to_queue_offsets(replay):
    """A broker without GET_TOPIC_STATS_INFO: offsets per queue (GET_MIN/MAX_OFFSET as mqadmin
    sends them), the last store time from the last message."""
    replay.overrides[RC.GET_TOPIC_STATS_INFO] = {"code": 3, "header": {"remark": " request type 202 not supported"}}
    j = json.loads(run("topicStatus", "-n", NS, "-t", TOPIC, "--json").output)
    assert [(q["queue_id"], q["min_offset"], q["max_offset"]) for q in j] == [(0, 0, 2), (1, 0, 2), (2, 0, 1),
                                                                               (3, 0, 1)]
    assert all(q["last_update_timestamp"] > 0 for q in j)
    assert_same_as_mqadmin(replay, RC.GET_MIN_OFFSET, queueId="3")
    assert_same_as_mqadmin(replay, RC.GET_MAX_OFFSET, queueId="3")


def test_unsupported_request_is_named_in_the_error(replay):
    replay.overrides[RC.GET_CONSUME_STATS] = {"code": 3, "header": {"remark": " request type 208 not supported"}}
    r = CliRunner().invoke(cli, ["consumerProgress", "-n", NS, "-g", GROUP])
    assert r.exit_code == 1
    assert "GET_CONSUME_STATS (208) is not supported by this server" in r.stderr


def test_consumer_progress_of_every_group(replay):
    r = run("consumerProgress", "-n", NS)
    assert r.exit_code == 0, r.output
    table = [ln.split() for ln in r.output.splitlines()]
    assert table[0] == ["#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff", "Total"]
    assert [GROUP, "1", "V4_9_8", "CONSUME_PASSIVELY", "CLUSTERING", "0.12", "0"] in table  # as mqadmin prints
    j = json.loads(run("consumerProgress", "-n", NS, "--json").output)
    assert {"group": GROUP, "count": 1, "version": 409, "consume_type": "CONSUME_PASSIVELY",
            "message_model": "CLUSTERING", "consume_tps": pytest.approx(0.12, abs=1e-3), "diff_total": 0} in j
    assert CliRunner().invoke(cli, ["consumerProgress", "-n", NS, "--watch"]).exit_code == 2


def test_producer_connection(replay):
    r = run("producerConnection", "-n", NS, "-g", "cap_admin_producer_group", "-t", TOPIC, "--json")
    assert r.exit_code == 0, r.output
    assert_same_as_mqadmin(replay, RC.GET_PRODUCER_CONNECTION_LIST)
    [c] = json.loads(r.output)
    assert c["language"] == "JAVA" and c["version"] == 409 and c["client_id"].startswith("192.0.2.2@")


def test_update_topic_perm_keeps_queue_numbers(replay):
    r = run("updateTopicPerm", "-n", NS, "-t", "CapAdminTmpTopic", "-p", "4", "--json")
    assert r.exit_code == 0, r.output
    assert_same_as_mqadmin(replay, RC.UPDATE_AND_CREATE_TOPIC, topic="CapAdminTmpTopic", perm="4")
    assert json.loads(r.output)["brokers"] == [BROKER]


# -- name server commands and ACL administration --------------------------------------------------

def test_add_write_perm_and_topic_cluster_list(replay):
    r = run("addWritePerm", "-n", NS, "-b", "broker-b")
    assert r.exit_code == 0, r.output
    assert_same_as_mqadmin(replay, RC.ADD_WRITE_PERM_OF_BROKER)
    assert r.output.strip() == f"add write perm of broker[broker-b] in name server[{NS}] OK, 9"
    r = run("topicClusterList", "-n", NS, "-t", TOPIC)
    assert r.exit_code == 0 and r.output.split() == ["DefaultCluster"]


def test_namesrv_config_get_and_update(replay):
    r = run("getNamesrvConfig", "-n", NS, "--json")
    assert r.exit_code == 0, r.output
    c = json.loads(r.output)[NS]
    assert (c["listenPort"], c["rocketmqHome"], c["serverWorkerThreads"]) == ("9876", "rmqhome", "8")
    r = run("updateNamesrvConfig", "-n", NS, "-k", "orderMessageEnable", "-v", "false")
    assert r.exit_code == 0, r.output
    want = captured_request(RC.UPDATE_NAMESRV_CONFIG)
    got = replay.requests(RC.UPDATE_NAMESRV_CONFIG)[0]
    assert (got.body, sent_ext(replay, RC.UPDATE_NAMESRV_CONFIG)) == (want.body, want.ext)
    assert r.output == f"update name server config success![{NS}]\norderMessageEnable : false\n"


def test_kv_list_and_topics_by_cluster_as_the_admin_api_reads_them(replay):
    from rocketmq_sdk.admin import AdminClient

    with AdminClient(NS) as admin:
        assert admin.kv_list("CAP_NAMESPACE") == {"k1": "v1"}
        topics = admin.topics_by_cluster("DefaultCluster")
    assert sent_ext(replay, RC.GET_TOPICS_BY_CLUSTER) == captured_request(RC.GET_TOPICS_BY_CLUSTER).ext
    assert TOPIC in topics and topics == sorted(topics) and len(topics) == 29


def test_acl_admin_commands_send_mqadmins_fields(replay):
    r = CliRunner().invoke(cli, ["updateAclConfig", "-n", NS, "-b", BROKER, "-a", "capTestAccessKey",
                                 "-s", "capTestSecret123"])
    assert_same_as_mqadmin(replay, RC.UPDATE_AND_CREATE_ACL_CONFIG)
    # ACL was off on the captured broker: 209 and the JVM's NullPointerException text
    assert r.exit_code == 1 and "broker response code 209" in r.output and "accessValidator" in r.output
    CliRunner().invoke(cli, ["deleteAccessConfig", "-n", NS, "-b", BROKER, "-a", "capTestAccessKey"])
    assert_same_as_mqadmin(replay, RC.DELETE_ACL_CONFIG)
    CliRunner().invoke(cli, ["updateGlobalWhiteAddr", "-n", NS, "-b", BROKER, "-g", "10.10.*"])
    assert_same_as_mqadmin(replay, RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG)
