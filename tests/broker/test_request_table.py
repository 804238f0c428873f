"""The broker's request table (``rocketmq_broker.broker.request_table``) is the one description of
every request code: each code registered on a running broker has an entry declaring its header,
writes, ACL and slave rule, and the name guard, the ACL check and a slave's refusal do what the
entries say."""

from __future__ import annotations

import asyncio

import pytest
from rocketmq_broker.broker.acl import PlainAccessValidator
from rocketmq_broker.broker.acl_config import ADMIN_CODES
from rocketmq_broker.broker.config import BrokerConfig
from rocketmq_broker.broker.controller import BrokerController
from rocketmq_broker.broker.replication import slave_refusal
from rocketmq_broker.broker.request_table import BROKER_REQUESTS
from rocketmq_broker.broker.requests import (
    ACL_NONE,
    Acl,
    RequestSpec,
    SlaveRule,
    TopicRes,
    handles,
    register_requests,
    table_of,
)
from rocketmq_broker.request_guard import request_name_problem
from rocketmq_sdk.protocol.codes import SEND_CODES, RequestCode, ResponseCode
from rocketmq_sdk.remoting import RemotingCommand

# codes that change stored state yet a 4.9.8 slave serves them (its own copy, or client-side state)
WRITES_SERVED_ON_A_SLAVE = {
    RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE,  # the pull's offset commit
    RequestCode.UPDATE_CONSUMER_OFFSET,  # consumers may commit to a slave
    RequestCode.HEART_BEAT,  # auto-creates the group's settings and retry topic
    RequestCode.UPDATE_BROKER_CONFIG,  # the broker's own settings, not replicated
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, RequestCode.DELETE_ACL_CONFIG,  # each broker's ACL file
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
}


def _broker(tmp_path, **settings) -> BrokerController:
    settings.setdefault("broker_version", "4.9.8")
    return BrokerController(BrokerConfig(store_path_root_dir=str(tmp_path), namesrv_addr="", **settings))


@pytest.mark.parametrize("settings", [{}, {"broker_version": "5.3.3"}, {"broker_role": "SLAVE", "broker_id": 1}],
                         ids=["4.x master", "5.x master", "slave"])
def test_every_code_a_broker_serves_has_a_table_entry(tmp_path, settings):
    broker = _broker(tmp_path, **settings)
    try:
        for server in (broker.server, broker.vip_server):
            missing = sorted(set(server._processors) - set(BROKER_REQUESTS))
            assert missing == [], f"registered without a request table entry: {missing}"
            for code, fn in server._processors.items():
                assert BROKER_REQUESTS[code].method == fn.__name__
    finally:
        broker.store.shutdown()


def test_every_entry_declares_header_writes_acl_and_slave_rule():
    assert len(BROKER_REQUESTS) > 50
    for code, spec in BROKER_REQUESTS.items():
        assert isinstance(spec, RequestSpec) and spec.code == code
        assert spec.header is None or hasattr(spec.header, "from_ext_fields"), spec
        assert isinstance(spec.writes, bool) and isinstance(spec.acl, Acl) and isinstance(spec.on_slave, SlaveRule)
        assert spec.topic_fields and spec.group_fields, spec
    with pytest.raises(TypeError, match="declare on_slave"):
        handles(RequestCode.SEND_MESSAGE, header=None, writes=True, acl=ACL_NONE)


def test_a_code_declared_twice_is_refused():
    class A:
        @handles(99999, header=None, writes=False, acl=ACL_NONE)
        def one(self, ch, cmd): ...

    class B:
        @handles(99999, header=None, writes=False, acl=ACL_NONE)
        def two(self, ch, cmd): ...

    with pytest.raises(ValueError, match="99999"):
        table_of((A, B))


def test_a_slave_refuses_every_send_and_every_entry_refusing_writes():
    refused = {code for code, spec in BROKER_REQUESTS.items() if spec.on_slave.refusal is not None}
    assert set(SEND_CODES) | {RequestCode.END_TRANSACTION, RequestCode.CONSUMER_SEND_MSG_BACK,
                              RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.DELETE_TOPIC_IN_BROKER,
                              RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                              RequestCode.DELETE_SUBSCRIPTIONGROUP} <= refused
    for code, spec in BROKER_REQUESTS.items():
        answer = slave_refusal(None, RemotingCommand.request(code, {}))
        if spec.on_slave.refusal is None:
            assert answer is None, code
        else:
            assert spec.writes, f"{code} is refused on a slave but not declared as writing"
            assert (answer.code, answer.remark) == spec.on_slave.refusal
    # a writing code is refused on a slave, left out there, or a listed exception
    served = {code for code, spec in BROKER_REQUESTS.items()
              if spec.writes and spec.on_slave.refusal is None and not spec.on_slave.absent}
    assert served == {int(c) for c in WRITES_SERVED_ON_A_SLAVE}


def test_a_slave_broker_answers_writes_as_its_table_says(tmp_path):
    broker = _broker(tmp_path, broker_role="SLAVE", broker_id=1, broker_version="5.3.3")
    try:
        # ABSENT codes are not registered on a slave
        assert not any(spec.on_slave.absent for code, spec in BROKER_REQUESTS.items()
                       if code in broker.server._processors)
        hooks = broker.server._request_hooks
        for code, spec in BROKER_REQUESTS.items():
            if spec.on_slave.refusal is None:
                continue
            cmd = RemotingCommand.request(code, {})
            answers = [a for a in (h(_FakeChannel(), cmd) for h in hooks) if a is not None]
            assert answers and (answers[0].code, answers[0].remark) == spec.on_slave.refusal, code
    finally:
        broker.store.shutdown()


class _FakeChannel:
    remote_addr = "127.0.0.1:1"


def test_acl_admin_and_resources_follow_the_table(tmp_path):
    admin = {code for code, spec in BROKER_REQUESTS.items() if spec.acl.admin}
    assert admin == set(ADMIN_CODES) | {50, 51, 53}
    cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G", "AccessKey": "k"})
    assert PlainAccessValidator.parse(cmd, "127.0.0.1:1").resources == {"T": 8, "%RETRY%G": 8}
    cmd = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {"topic": "T", "consumerGroup": "G",
                                                                        "AccessKey": "k"})
    assert list(PlainAccessValidator.parse(cmd, "127.0.0.1:1").resources) == ["%RETRY%G", "T"]  # Java's order
    v2 = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "%RETRY%G", "AccessKey": "k"})
    assert PlainAccessValidator.parse(v2, "127.0.0.1:1").resources == {"%RETRY%PG": 8}
    # every declared resource field is read: a request naming it needs the permission
    for code, spec in BROKER_REQUESTS.items():
        for r in spec.acl.resources:
            if isinstance(r, TopicRes):
                res = PlainAccessValidator.parse(RemotingCommand.request(code, {r.field: "X", "AccessKey": "k"}), "h:1")
                assert res.resources.get("X") == r.perm, code


def test_the_name_guard_checks_the_fields_the_table_names():
    bad = "x/../../escape"
    for code, spec in BROKER_REQUESTS.items():
        for name in spec.topic_fields + spec.group_fields:
            cmd = RemotingCommand.request(code, {name: bad})
            assert request_name_problem(cmd, spec) is not None, (code, name)
    # a V2 send names its topic in "b": the long field names are not its topic
    spec = BROKER_REQUESTS[RequestCode.SEND_MESSAGE_V2]
    assert request_name_problem(RemotingCommand.request(310, {"topic": bad}), spec) is None
    assert request_name_problem(RemotingCommand.request(310, {"b": bad}), spec) is not None
    lock = BROKER_REQUESTS[RequestCode.LOCK_BATCH_MQ]
    body = b'{"consumerGroup":"g","clientId":"c","mqSet":[{"topic":"a/b","brokerName":"b","queueId":0}]}'
    assert request_name_problem(RemotingCommand.request(41, {}, body), lock) is not None


def test_register_requests_registers_declared_handlers_only_where_they_apply():
    class P:
        @handles(1, header=None, writes=False, acl=ACL_NONE)
        @handles(2, header=None, writes=True, acl=ACL_NONE, on_slave=SlaveRule.ABSENT)
        def a(self, ch, cmd): ...

        @handles(3, header=None, writes=False, acl=ACL_NONE, v5_only=True)
        def b(self, ch, cmd): ...

    class Server:
        def __init__(self):
            self.codes = {}

        def register_processor(self, code, fn):
            self.codes[code] = fn

    p = P()
    for kwargs, want in (({}, {1, 2}), ({"v5": True}, {1, 2, 3}), ({"slave": True}, {1}),
                         ({"only": frozenset({3})}, set()), ({"only": frozenset({3}), "v5": True}, {3})):
        s = Server()
        register_requests(s, p, **kwargs)
        assert set(s.codes) == want, kwargs
    s = Server()
    register_requests(s, p)
    assert s.codes[1] == p.a and s.codes[2] == p.a


def test_processors_never_import_the_controller():
    """Processors get a BrokerContext: a request handler cannot reach the controller."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "broker-reference" / "broker"
    for path in root.rglob("*.py"):
        if path.name == "controller.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.endswith("controller"):
                pytest.fail(f"{path.relative_to(root)} imports the controller")


def test_a_request_naming_a_bad_topic_is_refused_by_a_running_broker(tmp_path):
    async def run():
        broker = _broker(tmp_path)
        await broker.server.start("127.0.0.1", 0)
        try:
            from rocketmq_sdk.remoting import RemotingClient
            client = RemotingClient()
            try:
                addr = f"127.0.0.1:{broker.server.port}"
                resp = await client.invoke(addr, RemotingCommand.request(
                    RequestCode.GET_TOPIC_STATS_INFO, {"topic": "a/../b"}), 3000)
                assert resp.code == ResponseCode.SYSTEM_ERROR
            finally:
                await client.close()
        finally:
            await broker.server.stop()
            broker.store.shutdown()
    asyncio.run(run())
