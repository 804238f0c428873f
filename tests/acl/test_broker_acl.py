"""ACL on the reference broker (``aclEnable=true``): the 4.9.8 ``PlainAccessValidator`` rules,
driven with the SDK's own producer, push consumer and admin client, plus the mqadmin requests of
``admin.jsonl`` (signed with ``rocketmq2``/``12345678``) replayed into the validator."""

from __future__ import annotations

import base64
import itertools
import json
import os
import time

import pytest
from rocketmq_broker.broker.acl import ACL_EXCEPTION, AclError, PlainAccessValidator
from rocketmq_broker.broker.acl_config import (
    DENY,
    PUB,
    SUB,
    AclConfigError,
    PlainAclConfig,
    check_permission,
    parse_perm,
    remote_address_matcher,
)
from rocketmq_broker.broker.config import BrokerConfig
from rocketmq_sdk import Message, Producer, PushConsumer, SendStatus
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.exceptions import MQBrokerError
from rocketmq_sdk.protocol.acl import AclClientRPCHook
from rocketmq_sdk.protocol.codes import RequestCode, ResponseCode
from rocketmq_sdk.remoting import RemotingCommand

from tests.conftest import Received, load_capture, wait_until

embedded = pytest.importorskip("rocketmq_broker.embedded")

pytestmark = pytest.mark.timeout(60)

USER, USER_SECRET = "AclUser", "user-secret-1"
SUBBER, SUBBER_SECRET = "AclSubscriber", "sub-secret-1"
ADMIN, ADMIN_SECRET = "AclAdmin", "admin-secret-1"

BASE_ACL = f"""
globalWhiteRemoteAddresses:
accounts:
  - accessKey: {USER}
    secretKey: {USER_SECRET}
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms:
      - AclDenied=DENY
      - AclReadOnly=SUB
    groupPerms:
      - acl_denied_group=DENY
  - accessKey: {SUBBER}
    secretKey: {SUBBER_SECRET}
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
  - accessKey: {ADMIN}
    secretKey: {ADMIN_SECRET}
    admin: true
"""

_names = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}{next(_names)}_{int(time.time() * 1000) % 100000}"



def write_acl(path: str, text: str) -> None:
    """Replace the file atomically (a new inode, so the change is seen whatever the mtime clock)."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("acl") / "plain_acl.yml")
    write_acl(path, BASE_ACL)
    with embedded.start_dev_cluster(in_process=True, broker_config={"acl_enable": True,
                                                                    "acl_config_file": path}) as c:
        c.acl_path = path
        yield c


@pytest.fixture
def cluster(acl_cluster):
    """The ACL cluster with the base ACL file back in place for each test."""
    write_acl(acl_cluster.acl_path, BASE_ACL)
    yield acl_cluster
    write_acl(acl_cluster.acl_path, BASE_ACL)


def stored(cluster, topic: str) -> int:
    store = cluster.broker.store
    return sum(store.get_max_offset_in_queue(topic, q) for q in range(8))


def producer(cluster, ak: str | None = None, sk: str | None = None, **kw) -> Producer:
    creds = {"access_key": ak, "secret_key": sk} if ak else {}
    return Producer(unique("acl_pg"), cluster.namesrv_addr, retry_times_when_send_failed=0, **creds, **kw)


def assert_refused(exc_info, text: str) -> None:
    exc = exc_info.value
    assert exc.code == ResponseCode.NO_PERMISSION, exc  # 4.9.8 answers SYSTEM_ERROR: see aclDeniedResponseCode
    assert f"{ACL_EXCEPTION}: {text}" in str(exc)


# -- end to end with the SDK ----------------------------------------------------------------------

def test_signed_producer_and_push_consumer_work(cluster):
    topic, group = unique("AclTopic"), unique("acl_cg")
    with producer(cluster, USER, USER_SECRET) as p:
        for i in range(4):
            assert p.send(Message(topic, f"m{i}".encode())).send_status is SendStatus.SEND_OK
    got = Received()
    c = PushConsumer(group, cluster.namesrv_addr, access_key=USER, secret_key=USER_SECRET,
                     consume_from_where="CONSUME_FROM_FIRST_OFFSET", rebalance_interval=500,
                     persist_consumer_offset_interval=300, suspend_timeout=1000)
    c.subscribe(topic)
    c.register_message_listener(got)
    c.start()
    try:
        wait_until(lambda: len(got.messages) >= 4, what="4 messages consumed")
        # UPDATE_CONSUMER_OFFSET passed the check too: the broker holds the committed offsets
        offsets = cluster.broker.offsets
        wait_until(lambda: sum(max(offsets.query(group, topic, q), 0) for q in range(8)) == 4,
                   what="offsets committed on the broker")
    finally:
        c.shutdown()
    assert sorted(got.bodies()) == [b"m0", b"m1", b"m2", b"m3"]


def test_unsigned_send_is_refused_and_nothing_is_stored(cluster):
    topic = unique("AclTopic")
    with producer(cluster) as p, pytest.raises(MQBrokerError) as ei:
        p.send(Message(topic, b"unsigned"))
    assert_refused(ei, "No accessKey is configured")
    assert stored(cluster, topic) == 0
    assert cluster.broker.topics.get(topic) is None  # not even auto-created


def test_unsigned_oneway_send_is_dropped(cluster):
    topic = unique("AclTopic")
    with producer(cluster) as p:
        p.send_oneway(Message(topic, b"oneway"))
    with producer(cluster, USER, USER_SECRET) as p:  # a later signed send on the same topic lands
        p.send(Message(topic, b"signed"))
    assert stored(cluster, topic) == 1


def test_wrong_secret_and_unknown_account_are_refused(cluster):
    topic = unique("AclTopic")
    with producer(cluster, USER, "not-the-secret") as p, pytest.raises(MQBrokerError) as ei:
        p.send(Message(topic, b"x"))
    assert_refused(ei, f"Check signature failed for accessKey={USER}")
    with producer(cluster, "NobodyKnowsMe", "whatever-1") as p, pytest.raises(MQBrokerError) as ei:
        p.send(Message(topic, b"x"))
    assert_refused(ei, "No acl config for NobodyKnowsMe")
    assert stored(cluster, topic) == 0


def test_denied_topic_and_sub_only_permissions(cluster):
    with producer(cluster, USER, USER_SECRET) as p:
        with pytest.raises(MQBrokerError) as ei:
            p.send(Message("AclDenied", b"x"))
        assert_refused(ei, "No default permission for topic:AclDenied")
        with pytest.raises(MQBrokerError) as ei:
            p.send(Message("AclReadOnly", b"x"))
        assert_refused(ei, "No default permission for topic:AclReadOnly")
    topic = unique("AclTopic")
    with producer(cluster, SUBBER, SUBBER_SECRET) as p, pytest.raises(MQBrokerError) as ei:
        p.send(Message(topic, b"x"))
    assert_refused(ei, f"No default permission for topic:{topic}")
    assert stored(cluster, "AclDenied") == stored(cluster, "AclReadOnly") == stored(cluster, topic) == 0


def test_denied_group_cannot_pull_and_retry_topics_map_to_groups(cluster):
    acl = cluster.broker.acl
    pull = RemotingCommand.request(RequestCode.PULL_MESSAGE, {"topic": "AnyTopic", "consumerGroup": "acl_denied_group",
                                                              "queueId": "0"})
    AclClientRPCHook(USER, USER_SECRET).before_request("", pull)
    with pytest.raises(AclError, match="No default permission for group:acl_denied_group"):
        acl.check(pull, "127.0.0.1:5000")
    # a send to %RETRY%<group> needs SUB on the group, not PUB on a topic
    retry = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "acl_denied_group", "b": "%RETRY%acl_denied_group"})
    AclClientRPCHook(USER, USER_SECRET).before_request("", retry)
    with pytest.raises(AclError, match="group:acl_denied_group"):
        acl.check(retry, "127.0.0.1:5000")
    ok = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "other_group", "b": "%RETRY%other_group"})
    AclClientRPCHook(SUBBER, SUBBER_SECRET).before_request("", ok)
    acl.check(ok, "127.0.0.1:5000")  # SUB on the group is enough although SUBBER may not publish


def test_admin_only_request_needs_an_admin_account(cluster):
    topic = unique("AclAdminTopic")
    with AdminClient(cluster.namesrv_addr, access_key=USER, secret_key=USER_SECRET) as admin:
        with pytest.raises(MQBrokerError) as ei:
            admin.create_topic(topic, broker_addr=cluster.broker_addr)
        assert_refused(ei, f"Need admin permission for request code=17, but accessKey={USER} is not")
    assert cluster.broker.topics.get(topic) is None
    with AdminClient(cluster.namesrv_addr, access_key=ADMIN, secret_key=ADMIN_SECRET) as admin:
        admin.create_topic(topic, broker_addr=cluster.broker_addr)
    assert cluster.broker.topics.get(topic) is not None


def test_white_listed_addresses_skip_the_checks(cluster):
    topic = unique("AclTopic")
    write_acl(cluster.acl_path, BASE_ACL.replace("globalWhiteRemoteAddresses:",
                                                 "globalWhiteRemoteAddresses:\n  - 127.0.0.*"))
    with producer(cluster) as p:
        assert p.send(Message(topic, b"unsigned, white")).send_status is SendStatus.SEND_OK
    # an account's own whiteRemoteAddress: no signature needed (a wrong secret passes), no perm check
    write_acl(cluster.acl_path, BASE_ACL.replace("    whiteRemoteAddress:\n", "    whiteRemoteAddress: 127.0.0.1\n"))
    with producer(cluster, USER, "not-the-secret") as p:
        p.send(Message("AclDenied", b"white account"))
    with producer(cluster) as p, pytest.raises(MQBrokerError):  # but an access key is still needed
        p.send(Message(topic, b"x"))
    assert stored(cluster, topic) == 1


def test_acl_file_changes_are_picked_up(cluster):
    topic = unique("AclTopic")
    acl = cluster.broker.acl
    with producer(cluster, SUBBER, SUBBER_SECRET) as p:
        with pytest.raises(MQBrokerError):
            p.send(Message(topic, b"x"))
        reloads = acl.reloads
        write_acl(cluster.acl_path, BASE_ACL.replace("defaultTopicPerm: SUB", "defaultTopicPerm: PUB|SUB"))
        assert p.send(Message(topic, b"now allowed")).send_status is SendStatus.SEND_OK
        assert acl.reloads == reloads + 1
        # a broken file is logged and the accounts in force stay
        write_acl(cluster.acl_path, "accounts: [ {accessKey: short, secretKey: x} ]\n")
        assert p.send(Message(topic, b"still allowed")).send_status is SendStatus.SEND_OK
        write_acl(cluster.acl_path, BASE_ACL)
        with pytest.raises(MQBrokerError):
            p.send(Message(topic, b"x"))
    assert stored(cluster, topic) == 2


def test_denied_code_can_be_the_4_9_8_system_error(tmp_path):
    path = str(tmp_path / "plain_acl.yml")
    write_acl(path, BASE_ACL)
    conf = {"acl_enable": True, "acl_config_file": path, "acl_denied_response_code": 1}
    with embedded.start_dev_cluster(str(tmp_path / "store"), in_process=True, broker_config=conf) as c:
        with producer(c) as p, pytest.raises(MQBrokerError) as info:
            p.send(Message(unique("AclT"), b"unsigned"))
        assert info.value.code == ResponseCode.SYSTEM_ERROR
        assert f"{ACL_EXCEPTION}: No accessKey is configured" in str(info.value)
    assert BrokerConfig.from_properties({"aclDeniedResponseCode": "1"}).acl_denied_response_code == 1


def test_acl_settings_of_broker_conf(tmp_path):
    assert BrokerConfig().acl_enable is False
    assert BrokerConfig.from_properties({"aclEnable": "true", "aclConfigFile": "/x/acl.yml"}).acl_file_path == "/x/acl.yml"
    assert BrokerConfig(store_path_root_dir=str(tmp_path)).acl_file_path in (
        os.path.join(os.environ.get("ROCKETMQ_HOME", ""), "conf", "plain_acl.yml"),
        str(tmp_path / "conf" / "plain_acl.yml"))


# -- the validator on golden data -----------------------------------------------------------------

def _cmd(frame: dict) -> RemotingCommand:
    h = frame["header"]
    ext = {k: v if isinstance(v, str) else str(v) for k, v in (h.get("extFields") or {}).items()}
    return RemotingCommand(h["code"], ext_fields=ext, body=base64.b64decode(frame.get("body_b64", "")))


def test_mqadmin_requests_of_the_capture_pass_as_4_9_8_checks_them(tmp_path):
    frames = [f for f in load_capture("admin") if f["client"] == "mqadmin" and f["to"] == "broker"
              and f["flag"] & 1 == 0]
    assert len(frames) > 50
    path = tmp_path / "plain_acl.yml"
    # tools.yml of 4.9.8 signs as rocketmq2/12345678; the stock plain_acl.yml makes it admin
    path.write_text("accounts:\n  - accessKey: rocketmq2\n    secretKey: 12345678\n    admin: true\n")
    validator = PlainAccessValidator(str(path))
    refused = []
    for f in frames:
        try:
            validator.check(_cmd(f), "127.0.0.1:50000")
        except AclError as exc:
            refused.append((f["header"]["code"], str(exc)))
    # only QUERY_MESSAGE by unique key: mqadmin signs _UNIQUE_KEY_QUERY, 4.9.8 does not (apache/rocketmq#5310)
    assert refused and all(code == RequestCode.QUERY_MESSAGE and "Check signature failed" in text
                           for code, text in refused)
    lenient = PlainAccessValidator(str(path), lenient_unique_key_query=True)
    for f in frames:
        lenient.check(_cmd(f), "127.0.0.1:50000")
    # a non-admin rocketmq2 is refused the admin-only codes mqadmin sent (updateTopic, updateSubGroup...)
    path.write_text("accounts:\n  - accessKey: rocketmq2\n    secretKey: 12345678\n    defaultTopicPerm: PUB|SUB\n"
                    "    defaultGroupPerm: PUB|SUB\n")
    validator.reload_if_changed()
    admin_codes = {f["header"]["code"] for f in frames} & {17, 25, 200, 207, 215}
    assert len(admin_codes) >= 3
    for f in frames:
        if f["header"]["code"] in admin_codes:
            with pytest.raises(AclError, match="Need admin permission"):
                validator.check(_cmd(f), "127.0.0.1:50000")


# -- config parsing -------------------------------------------------------------------------------

def test_permissions_parse_and_check_like_java():
    assert [parse_perm(t) for t in ("PUB", "SUB", "PUB|SUB", "SUB|PUB", "DENY", None, "pub")] == \
        [PUB, SUB, PUB | SUB, PUB | SUB, DENY, DENY, DENY]
    assert check_permission(PUB, PUB | SUB) and not check_permission(PUB, SUB)
    assert not check_permission(SUB, DENY | SUB)


def test_remote_address_patterns():
    cases = {
        "": ([], ["127.0.0.1"]),
        "*": (["10.1.2.3", "::1"], []),
        "192.168.0.{1,2}": (["192.168.0.1", "192.168.0.2"], ["192.168.0.3"]),
        "10.0.0.1,10.0.0.9": (["10.0.0.9"], ["10.0.0.2"]),
        "192.168.1.*": (["192.168.1.200"], ["192.168.2.1"]),
        "192.168.*": (["192.168.9.9"], ["192.169.0.1"]),
        "192.168.1.1-5": (["192.168.1.5"], ["192.168.1.6"]),
        "10.10-20.*": (["10.15.3.3"], ["10.21.0.0"]),
        "127.0.0.1": (["127.0.0.1"], ["127.0.0.2"]),
        "::1": (["0:0:0:0:0:0:0:1"], ["::2"]),
        "fe80:0:0:0:0:0:0:*": (["fe80::abcd"], ["fe81::1"]),
    }
    for spec, (yes, no) in cases.items():
        m = remote_address_matcher(spec)
        assert all(m(a) for a in yes), spec
        assert not any(m(a) for a in no), spec
    for bad in ("not-an-ip", "192.168.1.5-1", "1.2.3.{x}", "fe80::*"):
        with pytest.raises(AclConfigError):
            remote_address_matcher(bad)


def test_plain_acl_yml_of_the_distribution_parses():
    text = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
    groupPerms: [groupA=DENY, groupB=PUB|SUB, groupC=SUB]
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""
    import yaml

    cfg = PlainAclConfig.from_dict(yaml.safe_load(text))
    a = cfg.accounts["RocketMQ"]
    assert a.secret_key == "12345678" and not a.admin  # YAML's number back to text
    assert a.resource_perms == {"topicA": DENY, "topicB": PUB | SUB, "topicC": SUB, "%RETRY%groupA": DENY,
                                "%RETRY%groupB": PUB | SUB, "%RETRY%groupC": SUB}
    assert (a.default_topic_perm, a.default_group_perm) == (DENY, SUB)
    assert cfg.accounts["rocketmq2"].admin and cfg.accounts["rocketmq2"].matches_white_address("192.168.1.7")
    assert cfg.is_globally_white("10.10.103.4") and not cfg.is_globally_white("10.10.104.4")
    with pytest.raises(AclConfigError, match="longer than 6"):
        PlainAclConfig.from_dict({"accounts": [{"accessKey": "short", "secretKey": "12345678"}]})
    with pytest.raises(AclConfigError, match="Parse resource permission failed"):
        PlainAclConfig.from_dict({"accounts": [{"accessKey": "longenough", "secretKey": "12345678",
                                                "topicPerms": ["topicA"]}]})


def test_admin_cli_signs_with_access_key_options(cluster):
    from click.testing import CliRunner
    from rocketmq_sdk.admin.cli import cli

    topic = unique("AclCliTopic")
    args = ["updateTopic", "-n", cluster.namesrv_addr, "-b", cluster.broker_addr, "-t", topic]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 1 and "No accessKey is configured" in r.output
    r = CliRunner().invoke(cli, args, env={"ROCKETMQ_ACCESS_KEY": ADMIN, "ROCKETMQ_SECRET_KEY": ADMIN_SECRET})
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, [*args, "--access-key", USER, "--secret-key", USER_SECRET])
    assert r.exit_code == 1 and "Need admin permission for request code=17" in r.output
    assert cluster.broker.topics.get(topic) is not None


@pytest.mark.parametrize("code", [9999, 54])  # 54: GET_BROKER_CLUSTER_ACL_CONFIG, removed in 4.9.8
def test_unknown_codes_pass_the_acl_check_then_are_not_supported(cluster, code):
    """4.9.8's broker has a default processor (``AdminBrokerProcessor``), so a code nobody serves
    is ACL-checked like any other request, then answered REQUEST_CODE_NOT_SUPPORTED."""
    from rocketmq_sdk.remoting import RemotingClient
    from rocketmq_sdk.remoting.loop import EventLoopThread

    loop = EventLoopThread("acl-raw")
    client = RemotingClient()
    try:
        signed = RemotingCommand.request(code, {})
        AclClientRPCHook(USER, USER_SECRET).before_request(cluster.broker_addr, signed)
        unknown = loop.run(client.invoke(cluster.broker_addr, signed, 3000), 5)
        assert (unknown.code, unknown.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                  f" request type {code} not supported")
        unsigned = loop.run(client.invoke(cluster.broker_addr, RemotingCommand.request(code, {}), 3000), 5)
        assert (unsigned.code, unsigned.remark) == (ResponseCode.NO_PERMISSION,
                                                    f"{ACL_EXCEPTION}: No accessKey is configured")
        refused = loop.run(client.invoke(cluster.broker_addr,
                                         RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG, {}), 3000), 5)
        assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION,
                                                  f"{ACL_EXCEPTION}: No accessKey is configured")
    finally:
        loop.run(client.close(), 5)
        loop.stop()


# -- ACL administration (codes 50-53) ---------------------------------------------------------------

def test_acl_accounts_and_white_list_managed_with_the_admin_commands(cluster):
    import yaml
    from click.testing import CliRunner
    from rocketmq_sdk.admin.cli import cli

    topic = unique("AclManaged")
    signed = {"ROCKETMQ_ACCESS_KEY": ADMIN, "ROCKETMQ_SECRET_KEY": ADMIN_SECRET}
    base = ["-n", cluster.namesrv_addr, "-b", cluster.broker_addr]

    def cmd(*args: str, env=signed):
        return CliRunner().invoke(cli, [args[0], *base, *args[1:]], env=env)

    r = cmd("updateAclConfig", "-a", "ManagedUser", "-s", "managed-secret", "-i", "DENY", "-u", "SUB",
            "-t", f"{topic}=PUB")
    assert r.exit_code == 0 and f"create or update plain access config to {cluster.broker_addr} success." in r.output
    with producer(cluster, "ManagedUser", "managed-secret") as p:  # effective at once
        p.send(Message(topic, b"managed"))
        with pytest.raises(MQBrokerError):
            p.send(Message(unique("AclOther"), b"x"))  # defaultTopicPerm DENY
    data = yaml.safe_load(open(cluster.acl_path, encoding="utf-8"))
    account = next(a for a in data["accounts"] if a["accessKey"] == "ManagedUser")
    assert account["topicPerms"] == [f"{topic}=PUB"] and account["admin"] is False
    assert data["dataVersion"][0]["counter"] == 1
    # an update keeps what it does not send
    assert cmd("updateAclConfig", "-a", "ManagedUser", "-s", "managed-secret", "-i", "PUB").exit_code == 0
    data = yaml.safe_load(open(cluster.acl_path, encoding="utf-8"))
    account = next(a for a in data["accounts"] if a["accessKey"] == "ManagedUser")
    assert (account["defaultTopicPerm"], account["defaultGroupPerm"], data["dataVersion"][0]["counter"]) == ("PUB", "SUB", 2)
    v = json.loads(cmd("clusterAclConfigVersion", "--json").output)[cluster.broker_addr]
    assert json.loads(v["version"])["counter"] == 2 and v["brokerName"] == "broker-a"
    # bad input: Java's messages and codes
    r = cmd("updateAclConfig", "-a", "ManagedUser", "-s", "short")
    assert r.exit_code == 1 and "broker response code 209" in r.output and "length should longer than 6" in r.output
    r = cmd("updateAclConfig", "-a", "ManagedUser", "-s", "managed-secret", "-t", "topicA=ALL")
    assert r.exit_code == 1 and "Parse resource permission error for topicA=ALL" in r.output
    # not an admin: refused (4.9.8 would let any signed account do it)
    r = cmd("deleteAccessConfig", "-a", "ManagedUser", env={"ROCKETMQ_ACCESS_KEY": USER,
                                                             "ROCKETMQ_SECRET_KEY": USER_SECRET})
    assert r.exit_code == 1 and "Need admin permission for request code=51" in r.output
    r = cmd("deleteAccessConfig", "-a", "ManagedUser")
    assert r.exit_code == 0 and "account's accesskey is:ManagedUser" in r.output
    with producer(cluster, "ManagedUser", "managed-secret") as p, pytest.raises(MQBrokerError) as ei:
        p.send(Message(topic, b"gone"))
    assert_refused(ei, "No acl config for ManagedUser")
    r = cmd("deleteAccessConfig", "-a", "ManagedUser")
    assert r.exit_code == 1 and "The accesskey[ManagedUser] corresponding to accessConfig has been deleted failed." in r.output
    # global white list: unsigned clients from 127.0.0.1 pass afterwards
    assert cmd("updateGlobalWhiteAddr", "-g", "10.10.103.*,127.0.0.1").exit_code == 0
    assert yaml.safe_load(open(cluster.acl_path, encoding="utf-8"))["globalWhiteRemoteAddresses"] == \
        ["10.10.103.*", "127.0.0.1"]
    with producer(cluster) as p:
        p.send(Message(topic, b"white"))
    assert stored(cluster, topic) == 2


def test_acl_admin_requests_without_acl_answer_like_4_9_8():
    from rocketmq_sdk.exceptions import RemotingTimeoutError

    frames = {f["seq"]: f for f in load_capture("admin")}
    with embedded.start_dev_cluster(in_process=True) as plain, \
            AdminClient(plain.namesrv_addr, timeout_ms=500) as admin:
        for req, resp, call in (
                (658, 659, lambda: admin.update_acl_config("capTestAccessKey", "capTestSecret123",
                                                           broker_addr=plain.broker_addr)),
                (670, 672, lambda: admin.delete_acl_config("capTestAccessKey", broker_addr=plain.broker_addr)),
                (675, 677, lambda: admin.update_global_white_addrs(["10.10.*"], broker_addr=plain.broker_addr))):
            with pytest.raises(MQBrokerError) as ei:
                call()
            want = frames[resp]["header"]
            assert (ei.value.code, str(ei.value).split(": ", 1)[1]) == (want["code"], want["remark"]), req
        with pytest.raises(RemotingTimeoutError):
            admin.acl_config_version(broker_addr=plain.broker_addr)
