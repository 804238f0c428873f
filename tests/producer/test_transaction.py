"""TransactionProducer on the wire, against a fake broker (the reference broker does not serve
END_TRANSACTION / CHECK_TRANSACTION_STATE yet): half message flags, END_TRANSACTION oneway with
Java's fields, and broker checks answered from the bounded check pool."""

from __future__ import annotations

import threading

import pytest
from rocketmq_sdk.exceptions import IllegalArgumentError
from rocketmq_sdk.producer import LocalTransactionState, TransactionProducer
from rocketmq_sdk.protocol import Message, SendStatus
from rocketmq_sdk.protocol.codes import RequestCode
from rocketmq_sdk.protocol.msgid import decode_offset_msg_id
from rocketmq_sdk.remoting.command import RemotingCommand

from tests.interop.fake_cluster import FakeCluster

from .conftest import wait_until

END = RequestCode.END_TRANSACTION


class TxFake(FakeCluster):
    """Records END_TRANSACTION and the producer's channel (from its heartbeat)."""

    def __init__(self) -> None:
        super().__init__()
        self.channel = None
        self.server.register_processor(END, self._recording(self._end))

    async def _end(self, _channel, cmd):
        return None  # oneway: no answer

    async def _heartbeat(self, channel, cmd):
        self.channel = channel
        return await super()._heartbeat(channel, cmd)

    def check(self, stored, transaction_id: str) -> None:
        """Send CHECK_TRANSACTION_STATE (oneway) for a stored half message."""
        cmd = RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, {
            "tranStateTableOffset": str(stored.queue_offset), "commitLogOffset": str(stored.commit_log_offset),
            "msgId": transaction_id, "transactionId": transaction_id, "offsetMsgId": ""}, stored.record, oneway=True)
        self.loop.run(self.channel.invoke_oneway(cmd), 5)


class Listener:
    def __init__(self, local: LocalTransactionState | Exception | None, check: LocalTransactionState) -> None:
        self.local, self.check = local, check
        self.executed: list[tuple[Message, object]] = []
        self.checked: list = []
        self.check_threads: list[str] = []

    def execute_local_transaction(self, msg, arg):
        self.executed.append((msg, arg))
        if isinstance(self.local, Exception):
            raise self.local
        return self.local

    def check_local_transaction(self, msg):
        self.checked.append(msg)
        self.check_threads.append(threading.current_thread().name)
        return self.check


@pytest.fixture
def fake():
    with TxFake() as f:
        yield f


@pytest.mark.parametrize(("local", "expected", "code"), [
    (LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.COMMIT_MESSAGE, "8"),
    (LocalTransactionState.ROLLBACK_MESSAGE, LocalTransactionState.ROLLBACK_MESSAGE, "12"),
    (None, LocalTransactionState.UNKNOW, "0"),
    (RuntimeError("db down"), LocalTransactionState.UNKNOW, "0"),
])
def test_half_message_then_end_transaction(fake, local, expected, code):
    listener = Listener(local, LocalTransactionState.COMMIT_MESSAGE)
    with TransactionProducer("tx_group", fake.addr, listener=listener) as p:
        msg = Message("TopicTx", b"order-1", tags="T", keys="k1")
        msg.delay_time_level = 3
        result = p.send_message_in_transaction(msg, arg={"order": 1})
        wait_until(lambda: fake.requests_of(END), what="END_TRANSACTION")
    assert result.send_status is SendStatus.SEND_OK and result.local_transaction_state is expected
    (half,) = fake.requests_of(RequestCode.SEND_MESSAGE_V2)
    props = dict(item.split("\x01") for item in half.ext_fields["i"].split("\x02"))
    assert props["TRAN_MSG"] == "true" and props["PGROUP"] == "tx_group" and "DELAY" not in props
    assert int(half.ext_fields["f"]) & 0x4  # TRANSACTION_PREPARED_TYPE
    assert listener.executed[0][1] == {"order": 1} and listener.executed[0][0].transaction_id == result.msg_id
    (end,) = fake.requests_of(END)
    assert end.ext_fields["commitOrRollback"] == code
    assert end.ext_fields["producerGroup"] == "tx_group"
    assert end.ext_fields["fromTransactionCheck"] == "false"
    assert end.ext_fields["msgId"] == result.msg_id
    assert end.ext_fields["tranStateTableOffset"] == str(result.queue_offset)
    assert end.ext_fields["commitLogOffset"] == str(decode_offset_msg_id(result.offset_msg_id)[2])


def test_broker_check_is_answered_on_the_check_pool(fake):
    listener = Listener(None, LocalTransactionState.COMMIT_MESSAGE)
    with TransactionProducer("tx_check", fake.addr, listener=listener) as p:
        result = p.send_message_in_transaction(Message("TopicTx", b"payload", keys="k2"))
        wait_until(lambda: fake.requests_of(END), what="first END_TRANSACTION")
        p.instance.run(p.instance.send_heartbeat_to_all(), 5)
        (stored,) = fake.stored("TopicTx")
        fake.check(stored, result.msg_id)
        wait_until(lambda: len(fake.requests_of(END)) == 2, what="END_TRANSACTION of the check")
    (msg,) = listener.checked
    assert msg.body == b"payload" and msg.keys == ["k2"] and msg.transaction_id == result.msg_id
    assert listener.check_threads[0].startswith("rocketmq-tx-check-tx_check")
    end = fake.requests_of(END)[1].ext_fields
    assert end["fromTransactionCheck"] == "true" and end["commitOrRollback"] == "8"
    assert end["transactionId"] == result.msg_id and end["msgId"] == result.msg_id
    assert end["commitLogOffset"] == str(stored.commit_log_offset)
    assert end["tranStateTableOffset"] == str(stored.queue_offset)


def test_a_listener_is_required():
    with pytest.raises(IllegalArgumentError, match="TransactionListener"):
        TransactionProducer("tx", "127.0.0.1:1", listener=object())
