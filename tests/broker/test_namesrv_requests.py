"""Name server requests beside routing: KV config, topic list, cluster info, body CRC, unknown codes.

Expected answers are the ones the 4.9.8 name server gave in ``admin.jsonl`` (seq 682-692 for KV
config, GET_BROKER_CLUSTER_INFO with fastjson's bare numeric keys, GET_ALL_TOPIC_LIST).
"""

from __future__ import annotations

import json
import zlib

import pytest
from rocketmq_sdk.exceptions import RemotingTimeoutError
from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.remoting import RemotingCommand

NS_KV = {"namespace": "CAP_NAMESPACE", "key": "k1"}


def test_kv_config_put_get_delete_like_4_9_8(cluster, client):
    ns = cluster.namesrv_addr
    assert client.invoke(ns, RequestCode.PUT_KV_CONFIG, {**NS_KV, "value": "v1"}).code == ResponseCode.SUCCESS
    got = client.invoke(ns, RequestCode.GET_KV_CONFIG, NS_KV)
    assert (got.code, got.ext_fields) == (ResponseCode.SUCCESS, {"value": "v1"})
    missing = client.invoke(ns, RequestCode.GET_KV_CONFIG, {"namespace": "CAP_NAMESPACE", "key": "missing"})
    assert (missing.code, missing.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                              "No config item, Namespace: CAP_NAMESPACE Key: missing")
    assert client.invoke(ns, RequestCode.DELETE_KV_CONFIG, NS_KV).code == ResponseCode.SUCCESS
    assert client.invoke(ns, RequestCode.GET_KV_CONFIG, NS_KV).code == ResponseCode.QUERY_NOT_FOUND


def test_cluster_info_and_topic_list(cluster, client):
    ns = cluster.namesrv_addr
    info = client.invoke(ns, RequestCode.GET_BROKER_CLUSTER_INFO)
    assert info.code == ResponseCode.SUCCESS
    # fastjson writes the Long broker ids as bare keys, like 4.9.8: {"brokerAddrs":{0:"..."}}
    assert b'"brokerAddrs":{0:"' + cluster.broker_addr.encode() + b'"}' in info.body
    parsed = fastjson.loads(info.body)
    assert parsed["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}
    topics = client.invoke(ns, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert topics.code == ResponseCode.SUCCESS
    assert "TBW102" in json.loads(topics.body)["topicList"]


def test_register_broker_with_a_wrong_body_crc_is_refused(cluster, client):
    body = json.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": {},
                                                       "dataVersion": {"counter": 1, "timestamp": 1}}}).encode()
    ext = {"brokerName": "broker-x", "brokerAddr": "127.0.0.1:1", "clusterName": "C", "haServerAddr": "",
           "brokerId": "0", "compressed": "false", "bodyCrc32": str((zlib.crc32(body) + 1) & 0x7FFFFFFF)}
    r = client.invoke(cluster.namesrv_addr, RequestCode.REGISTER_BROKER, ext, body)
    assert r.code == ResponseCode.SYSTEM_ERROR
    ext["bodyCrc32"] = str(zlib.crc32(body) & 0x7FFFFFFF)
    assert client.invoke(cluster.namesrv_addr, RequestCode.REGISTER_BROKER, ext, body).code == ResponseCode.SUCCESS


def test_unknown_code_at_the_name_server_gets_no_reply_and_the_connection_stays(cluster, client):
    """Java's name server answers nothing to an unknown code (docs/protocol.md §1.5)."""
    with pytest.raises(RemotingTimeoutError):
        client.invoke(cluster.namesrv_addr, 9999, timeout_ms=300)
    cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
    assert client.invoke(cluster.namesrv_addr, 0, cmd=cmd).code == ResponseCode.SUCCESS
