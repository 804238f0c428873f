"""Part 7: the testing helpers (capture mode, pytest fixtures, embedded broker context)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test.utils import override_settings
from rocketmq_sdk import SendStatus
from rocketmq_sdk.integrations.django import capture, rocketmq_template
from rocketmq_sdk.integrations.django.testing import embedded_broker

from django_integration.conftest import read_topic, unique


def test_outbox_fixture_records_every_mode_without_a_broker(rocketmq_outbox):
    t = rocketmq_template()
    r = t.send("orders:created", {"id": 1}, keys="order-1")
    assert r.send_status is SendStatus.SEND_OK and r.msg_id
    t.send_async("orders", "a").result(1)
    t.send_oneway("orders", b"o")
    t.send_orderly("orders", "x", hash_key="cust-1")
    t.send_batch("orders", [1, 2])
    t.send("orders", "later", delay_level=3)
    assert [c.mode for c in rocketmq_outbox] == ["sync", "async", "oneway", "orderly", "batch", "batch", "sync"]
    first = rocketmq_outbox[0]
    assert (first.topic, first.tags, first.keys, first.json(), first.msg_id) == (
        "orders", "created", ["order-1"], {"id": 1}, r.msg_id)
    assert rocketmq_outbox[3].hash_key == "cust-1" and rocketmq_outbox[-1].delay_level == 3
    with pytest.raises(RuntimeError, match="no reply"):
        t.send_and_receive("orders", "ping")


@pytest.mark.django_db(transaction=True)
def test_capture_records_transactions_after_the_local_transaction(rocketmq_outbox):
    from django_integration.testapp.models import Order

    result = rocketmq_template().send_in_transaction(
        "payments", {"order": "C1"}, lambda msg, arg: Order.objects.create(number="C1"))
    assert result.local_transaction_state.name == "COMMIT_MESSAGE"
    assert Order.objects.filter(number="C1").exists()
    # the order's post_save publisher fired on commit, then the transactional message was recorded
    assert [(c.mode, c.topic) for c in rocketmq_outbox] == [("sync", "dj_orders"), ("transaction", "payments")]


@pytest.mark.django_db(transaction=True)
def test_capture_leaves_out_a_local_transaction_answering_rollback(rocketmq_outbox):
    from rocketmq_sdk import LocalTransactionState

    from django_integration.testapp.models import Order

    def local(msg, arg):
        Order.objects.create(number="C2")
        return LocalTransactionState.ROLLBACK_MESSAGE

    result = rocketmq_template().send_in_transaction("payments", {"order": "C2"}, local)
    assert result.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE
    assert not Order.objects.filter(number="C2").exists()
    assert rocketmq_outbox == []


def test_capture_setting_fills_the_module_outbox():
    capture.outbox.clear()
    with override_settings(ROCKETMQ={**settings.ROCKETMQ, "CAPTURE": True}):
        rocketmq_template().send("audit", "hello")
    assert [c.body for c in capture.outbox] == [b"hello"]
    capture.outbox.clear()


def test_embedded_broker_context_points_settings_at_a_fresh_cluster():
    before = settings.ROCKETMQ["NAME_SERVER"]
    topic = unique("dj_embedded")
    with embedded_broker() as cluster:
        assert settings.ROCKETMQ["NAME_SERVER"] == cluster.namesrv_addr != before
        rocketmq_template().send(topic, "via the context")
        assert [m.body for m in read_topic(cluster, topic, 1)] == [b"via the context"]
    assert settings.ROCKETMQ["NAME_SERVER"] == before


def test_rocketmq_fixture_points_settings_at_the_session_cluster(rocketmq, rocketmq_cluster):
    assert settings.ROCKETMQ["NAME_SERVER"] == rocketmq_cluster.namesrv_addr == rocketmq.namesrv_addr
