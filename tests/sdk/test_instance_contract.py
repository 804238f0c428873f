"""The client instance reaches producers and consumers only through ``ProducerInner`` /
``ConsumerInner`` and its ``register_*`` / ``unregister_*`` methods: broker requests for a consumer
that does not report, run listeners or reset offsets (pull and lite-pull consumers) are refused
or ignored by that consumer's own answer, and a plain producer ignores transaction checks."""

from __future__ import annotations

import logging

import pytest
from rocketmq_sdk import LitePullConsumer, Producer, PullConsumer
from rocketmq_sdk.client.instance import MQClientInstance
from rocketmq_sdk.config import ClientConfig
from rocketmq_sdk.exceptions import ClientStateError
from rocketmq_sdk.protocol.bodies import ResetOffsetBody
from rocketmq_sdk.protocol.codes import MessageConst, RequestCode, ResponseCode
from rocketmq_sdk.protocol.headers import (
    CheckTransactionStateRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    ResetOffsetRequestHeader,
)
from rocketmq_sdk.protocol.message import MessageExt, MessageQueue
from rocketmq_sdk.protocol.message_codec import encode_message_ext
from rocketmq_sdk.remoting.command import RemotingCommand


@pytest.fixture
def inst():
    instance = MQClientInstance(ClientConfig(namesrv_addr="127.0.0.1:1"), "127.0.0.1@contract")
    yield instance
    instance.loop_thread.stop(5)


@pytest.fixture(params=[PullConsumer, LitePullConsumer])
def quiet_consumer(request, inst):
    consumer = request.param("g_quiet", "127.0.0.1:1")
    inst.register_consumer(consumer)
    return consumer


def _msg(**props) -> MessageExt:
    msg = MessageExt(topic="T", body=b"x", queue_id=0, queue_offset=0, broker_name="broker-a",
                     store_host="127.0.0.1:10911", born_host="127.0.0.1:1")
    msg.properties.update(props)
    return msg


def test_running_info_and_direct_consume_of_a_consumer_that_does_not_report_are_refused(inst, quiet_consumer):
    info = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "g_quiet"})
    resp = inst.run(inst._on_get_running_info(None, info), 10)
    assert resp.code == ResponseCode.SYSTEM_ERROR and "g_quiet" in resp.remark
    header = ConsumeMessageDirectlyResultRequestHeader(consumer_group="g_quiet", client_id="x", msg_id="m",
                                                       broker_name="broker-a")
    direct = RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, header.to_ext_fields(),
                                     bytes(encode_message_ext(_msg())))
    resp = inst.run(inst._on_consume_message_directly(None, direct), 10)
    assert resp.code == ResponseCode.SYSTEM_ERROR and "not exist in this consumer" in resp.remark


def test_an_offset_reset_for_a_pull_consumer_is_logged_and_ignored(inst, quiet_consumer, caplog):
    mq = MessageQueue("T", "broker-a", 0)
    header = ResetOffsetRequestHeader(topic="T", group="g_quiet", timestamp=0, is_force=True)
    cmd = RemotingCommand.request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, header.to_ext_fields(),
                                  ResetOffsetBody({mq: 0}).to_json(), oneway=True)
    with caplog.at_level(logging.WARNING, "rocketmq_sdk"):
        assert inst.run(inst._on_reset_offset(None, cmd), 10) is None
    assert "ignores the broker's offset reset of T" in caplog.text
    with pytest.raises(ClientStateError):
        _ = quiet_consumer.offset_store  # nothing was touched: the consumer never started


def test_a_plain_producer_ignores_transaction_checks(inst, caplog):
    class Channel:
        remote_addr = "127.0.0.1:10911"

    inst.register_producer(Producer("pg_plain", "127.0.0.1:1"))
    header = CheckTransactionStateRequestHeader(tran_state_table_offset=0, commit_log_offset=0, msg_id="M1",
                                                transaction_id="T1")
    body = bytes(encode_message_ext(_msg(**{MessageConst.PRODUCER_GROUP: "pg_plain"})))
    cmd = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, header.to_ext_fields(), body, oneway=True)
    with caplog.at_level(logging.WARNING, "rocketmq_sdk"):
        assert inst.run(inst._on_check_transaction_state(Channel(), cmd), 10) is None
    assert "producer pg_plain has no transaction listener" in caplog.text


def test_unregister_forgets_a_group_and_allows_registering_it_again(inst):
    consumer = PullConsumer("g_again", "127.0.0.1:1")
    inst.register_consumer(consumer)
    with pytest.raises(ClientStateError, match="already registered"):
        inst.register_consumer(PullConsumer("g_again", "127.0.0.1:1"))
    inst.unregister_consumer("g_again")
    inst.unregister_consumer("g_again")  # no error when there is none
    assert not inst.in_use
    inst.register_consumer(consumer)
    producer = Producer("pg_again", "127.0.0.1:1")
    inst.register_producer(producer)
    inst.unregister_producer("pg_again")
    assert list(inst.producers) == [] and list(inst.consumers) == ["g_again"]
