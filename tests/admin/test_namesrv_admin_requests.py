"""The name server's admin requests against 4.9.8's answers: the brokers' captured REGISTER_BROKER
requests (``broker-namesrv.jsonl``) are replayed into a private reference name server, then the
requests mqadmin and DefaultMQAdminExt sent (``admin.jsonl``) get the same answers."""

from __future__ import annotations

import base64
import json

import pytest
from rocketmq_broker.namesrv.server import NameServer, NamesrvConfig
from rocketmq_sdk.protocol import fastjson
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.remoting import RemotingClient, RemotingCommand
from rocketmq_sdk.remoting.loop import EventLoopThread

from tests.conftest import load_capture

from .conftest import ext_of

pytestmark = pytest.mark.timeout(30)


def _frames(name: str) -> dict[int, dict]:
    return {f["seq"]: f for f in load_capture(name)}


def _cmd(frame: dict) -> RemotingCommand:
    h = frame["header"]
    return RemotingCommand.request(h["code"], ext_of(h), base64.b64decode(frame.get("body_b64", "")))


class Namesrv:
    def __init__(self) -> None:
        self.loop = EventLoopThread("namesrv-replay")
        self.ns = NameServer(NamesrvConfig(listen_port=0))
        self.client = RemotingClient()
        self.loop.run(self.ns.start(), 10)

    def invoke(self, cmd: RemotingCommand) -> RemotingCommand:
        return self.loop.run(self.client.invoke(self.ns.addr, cmd, 3000), 10)

    def close(self) -> None:
        self.loop.run(self.client.close(), 10)
        self.loop.run(self.ns.stop(), 10)
        self.loop.stop()


@pytest.fixture
def namesrv():
    n = Namesrv()
    yield n
    n.close()


@pytest.fixture(scope="module")
def captures():
    return _frames("broker-namesrv"), _frames("admin")


def _answer(admin: dict[int, dict], seq: int) -> dict:
    return next(f for f in admin.values() if f["flag"] & 1 and f.get("reply_to") == seq)


def test_wipe_and_add_write_perm_count_like_4_9_8(namesrv, captures):
    brokers, admin = captures
    assert namesrv.invoke(_cmd(brokers[63])).code == ResponseCode.SUCCESS  # broker-b: 8 topics
    wipe = namesrv.invoke(_cmd(admin[739]))
    assert (wipe.code, wipe.remark, wipe.ext_fields, wipe.body) == (0, None, ext_of(_answer(admin, 739)["header"]), b"")
    assert wipe.ext_fields == {"wipeTopicCount": "8"}
    route = fastjson.loads(namesrv.invoke(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                  {"topic": "TBW102"})).body)
    assert [q["perm"] for q in route["queueDatas"]] == [5]  # 7 without WRITE: inherit and read kept
    # an unchanged registration (same data version) keeps the wiped permission
    assert namesrv.invoke(_cmd(brokers[63])).code == ResponseCode.SUCCESS
    route = fastjson.loads(namesrv.invoke(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                  {"topic": "TBW102"})).body)
    assert [q["perm"] for q in route["queueDatas"]] == [5]
    namesrv.invoke(_cmd(brokers[65]))  # broker-b created a 9th topic meanwhile (data version moved)
    add = namesrv.invoke(_cmd(admin[753]))
    assert add.ext_fields == ext_of(_answer(admin, 753)["header"]) == {"addTopicCount": "9"}
    route = fastjson.loads(namesrv.invoke(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                                  {"topic": "TBW102"})).body)
    assert [q["perm"] for q in route["queueDatas"]] == [6]  # READ|WRITE, as Java sets it
    unknown = namesrv.invoke(RemotingCommand.request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "nope"}))
    assert unknown.ext_fields == {"wipeTopicCount": "0"}


def test_topics_by_cluster_and_system_topics(namesrv, captures):
    brokers, admin = captures
    namesrv.invoke(_cmd(brokers[61]))  # broker-a with its 29 topics
    got = namesrv.invoke(_cmd(admin[694]))
    want = _answer(admin, 694)
    assert got.code == ResponseCode.SUCCESS and set(json.loads(got.body)) == set(want["body_json"]) == {"topicList"}
    assert sorted(json.loads(got.body)["topicList"]) == sorted(want["body_json"]["topicList"])
    other = namesrv.invoke(RemotingCommand.request(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "Other"}))
    assert json.loads(other.body) == {"topicList": []}
    system = json.loads(namesrv.invoke(RemotingCommand.request(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)).body)
    assert system == {"brokerAddr": "127.0.0.1:10911", "topicList": ["DefaultCluster", "broker-a"]}
    unit = namesrv.invoke(RemotingCommand.request(RequestCode.GET_UNIT_TOPIC_LIST))
    assert json.loads(unit.body) == {"topicList": []}


def test_kv_list_like_4_9_8(namesrv, captures):
    _, admin = captures
    missing = namesrv.invoke(_cmd(admin[690]))
    assert (missing.code, missing.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: CAP_NAMESPACE")
    namesrv.invoke(RemotingCommand.request(RequestCode.PUT_KV_CONFIG,
                                           {"namespace": "CAP_NAMESPACE", "key": "k1", "value": "v1"}))
    got = namesrv.invoke(_cmd(admin[690]))
    assert (got.code, got.body) == (0, base64.b64decode(_answer(admin, 690)["body_b64"]))


def test_namesrv_config_like_4_9_8(namesrv, captures):
    _, admin = captures
    got = namesrv.invoke(_cmd(admin[172]))
    ours = dict(line.split("=", 1) for line in got.body.decode().splitlines())
    java = dict(line.split("=", 1) for line in _answer(admin, 172)["body_text"].splitlines())
    # every NamesrvConfig key of 4.9.8 and listenPort/bindAddress (not Netty's thread and buffer sizes)
    for key in ("rocketmqHome", "kvConfigPath", "configStorePath", "productEnvName", "clusterTest",
                "orderMessageEnable", "configBlackList", "listenPort", "bindAddress"):
        assert key in ours and key in java, key
    assert {k: ours[k] for k in ("productEnvName", "clusterTest", "orderMessageEnable", "configBlackList",
                                 "bindAddress")} == {k: java[k] for k in ("productEnvName", "clusterTest",
                                                                          "orderMessageEnable", "configBlackList",
                                                                          "bindAddress")}
    assert ours["listenPort"] == str(namesrv.ns.port)
    upd = namesrv.invoke(_cmd(admin[174]))  # orderMessageEnable=false
    want = _answer(admin, 174)
    assert (upd.code, upd.remark, upd.body) == (want["header"]["code"], want["header"].get("remark"), b"")
    on = namesrv.invoke(RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, {},
                                                b"orderMessageEnable=true\nnoSuchKey=1\n"))
    assert on.code == ResponseCode.SUCCESS and namesrv.ns.config.order_message_enable is True
    black = namesrv.invoke(RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, {}, b"configStorePath=/tmp/x\n"))
    assert (black.code, black.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
