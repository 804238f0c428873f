"""A 5.x broker can check a transaction this producer already committed or rolled back (its op
record is written in batches, ../shared/docs/rocketmq5-remoting.md §0 (a), §7): the producer
answers such checks from its own record of recent decisions, before asking the listener."""

from __future__ import annotations

import pytest
from rocketmq_sdk.producer import LocalTransactionState, TransactionProducer
from rocketmq_sdk.producer.tx_decisions import TransactionDecisions
from rocketmq_sdk.protocol import Message

from .conftest import wait_until
from .test_transaction import END, Listener, TxFake


@pytest.fixture
def fake():
    with TxFake() as f:
        yield f


def _send_then_checks(fake, group: str, listener, checks: int) -> None:
    """Send one transaction, then have the fake broker check it ``checks`` times (each answered
    before the next), as a 5.x broker whose op record is late does."""
    with TransactionProducer(group, fake.addr, listener=listener) as p:
        result = p.send_message_in_transaction(Message("TopicTx", b"payload", keys="k"))
        wait_until(lambda: fake.requests_of(END), what="END_TRANSACTION")
        p.instance.run(p.instance.send_heartbeat_to_all(), 5)
        (stored,) = fake.stored("TopicTx")
        for i in range(checks):
            fake.check(stored, result.msg_id)
            wait_until(lambda i=i: len(fake.requests_of(END)) == i + 2, what=f"check {i + 1} answered")


@pytest.mark.parametrize(("local", "code"), [(LocalTransactionState.COMMIT_MESSAGE, "8"),
                                             (LocalTransactionState.ROLLBACK_MESSAGE, "12")])
def test_check_of_a_decided_transaction_is_answered_from_the_record(fake, local, code):
    # the checker would answer the opposite: it must not be asked
    wrong = (LocalTransactionState.ROLLBACK_MESSAGE if local is LocalTransactionState.COMMIT_MESSAGE
             else LocalTransactionState.COMMIT_MESSAGE)
    listener = Listener(local, wrong)
    _send_then_checks(fake, "tx_decided", listener, 1)
    assert listener.checked == []
    end = fake.requests_of(END)[1].ext_fields
    assert end["commitOrRollback"] == code and end["fromTransactionCheck"] == "true"


def test_a_decision_made_at_a_check_answers_the_next_checks(fake):
    class Flipping(Listener):
        def check_local_transaction(self, msg):
            super().check_local_transaction(msg)
            return [LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.ROLLBACK_MESSAGE][len(self.checked) - 1]

    listener = Flipping(None, LocalTransactionState.COMMIT_MESSAGE)
    _send_then_checks(fake, "tx_unknown", listener, 2)  # the second: the broker's op record is late
    assert len(listener.checked) == 1
    assert [e.ext_fields["commitOrRollback"] for e in fake.requests_of(END)] == ["0", "8", "8"]


def test_record_is_bounded_and_expires():
    now = [1000.0]
    rec = TransactionDecisions(max_entries=2, ttl_s=60, clock=lambda: now[0])
    rec.record("a", LocalTransactionState.COMMIT_MESSAGE)
    rec.record("b", LocalTransactionState.ROLLBACK_MESSAGE)
    rec.record("c", LocalTransactionState.COMMIT_MESSAGE)
    rec.record("d", LocalTransactionState.UNKNOW)  # not a decision: not recorded
    assert rec.get("a") is None and rec.get("b") is LocalTransactionState.ROLLBACK_MESSAGE
    assert rec.get("d") is None
    now[0] += 61
    assert rec.get("c") is None and len(rec) == 0
