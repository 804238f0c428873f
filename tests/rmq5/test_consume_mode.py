"""Group consume mode (POP / PULL, share-queue number): the admin API and CLI against the 5.x
reference broker, with 5.3.3's SET_MESSAGE_REQUEST_MODE body, and QUERY_ASSIGNMENT answers
equal to the captured ones (a Java push consumer with client rebalance off)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from rocketmq_sdk import IllegalArgumentError, Message
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.admin.cli import cli
from rocketmq_sdk.protocol.codes import RequestCode

from tests.broker.conftest import SyncClient
from tests.rmq5.conftest import broker_of
from tests.rmq5.frames import body_bytes, frame


def test_set_consume_mode_sends_5x_body_and_is_stored(v5_cluster, v5_producer):
    v5_producer.send(Message("CapPopTopic", b"x"))
    seen = []
    broker = broker_of(v5_cluster)
    orig = broker.server._processors[RequestCode.SET_MESSAGE_REQUEST_MODE]
    broker.server.register_processor(RequestCode.SET_MESSAGE_REQUEST_MODE,
                                     lambda ch, cmd: seen.append(cmd.body) or orig(ch, cmd))
    with AdminClient(v5_cluster.namesrv_addr) as admin:
        assert admin.set_consume_mode("cap_pop_push_group", "CapPopTopic", "POP", 0,
                                      broker_addr=v5_cluster.broker_addr) == [v5_cluster.broker_addr]
        assert seen == [body_bytes(frame("pop", 111))]
        modes = admin.consume_modes(v5_cluster.broker_addr)
        assert modes["CapPopTopic"]["cap_pop_push_group"]["mode"] == "POP"
        with pytest.raises(IllegalArgumentError):
            admin.set_consume_mode("g", "CapPopTopic", "PUSH", broker_addr=v5_cluster.broker_addr)
        with pytest.raises(IllegalArgumentError):
            admin.set_consume_mode("g", "CapPopTopic", "POP", -1, broker_addr=v5_cluster.broker_addr)
    out = CliRunner().invoke(cli, ["setConsumeMode", "-n", v5_cluster.namesrv_addr, "-g", "g2", "-t", "CapPopTopic",
                                   "-m", "PULL", "-b", v5_cluster.broker_addr, "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["mode"] == "PULL"


def test_query_assignment_answers_like_5_3_3(v5_cluster, v5_producer):
    v5_producer.send(Message("CapPopTopic", b"x"))
    client = SyncClient()
    try:
        addr = v5_cluster.broker_addr
        assert client.invoke(addr, RequestCode.SET_MESSAGE_REQUEST_MODE,
                             body=body_bytes(frame("pop", 111))).code == 0
        broker_of(v5_cluster).topics.create_system("%RETRY%cap_pop_push_group", 1)
        for req, resp in ((128, 129), (134, 135)):
            answer = client.invoke(addr, RequestCode.QUERY_ASSIGNMENT, body=body_bytes(frame("pop", req)))
            assert answer.code == 0
            assert json.loads(answer.body) == frame("pop", resp)["body_json"]
    finally:
        client.close()
