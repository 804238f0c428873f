"""ACL signing (access_key / secret_key) and namespace prefixing."""

from __future__ import annotations

from rocketmq_sdk import Message, MessageQueue, Producer, SendStatus
from rocketmq_sdk.producer.namespace import unwrap_namespace, wrap_namespace
from rocketmq_sdk.protocol.acl import verify
from rocketmq_sdk.protocol.codes import RequestCode

from tests.interop.fake_cluster import FakeCluster

from .conftest import stored_count, unique


def test_every_request_is_signed_with_the_configured_credentials():
    with FakeCluster() as fake:
        with Producer("pg_acl", fake.addr, access_key="RocketMQ", secret_key="12345678") as p:
            p.send(Message("TopicAcl", b"signed body"))
            p.send_oneway(Message("TopicAcl", b"oneway"))
            p.send_async(Message("TopicAcl", b"async")).result(5)  # the Task-free path signs too
            assert p.wait_for_in_flight(5)
        reqs = fake.requests
        codes = {r.code for r in reqs}
        assert {RequestCode.GET_ROUTEINFO_BY_TOPIC, RequestCode.SEND_MESSAGE_V2} <= codes
        for r in reqs:
            assert r.ext_fields["AccessKey"] == "RocketMQ"
            assert verify(r.ext_fields, r.body, "12345678")
            assert not verify(r.ext_fields, r.body, "wrong-secret")


def test_no_signature_without_credentials():
    with FakeCluster() as fake:
        with Producer("pg_noacl", fake.addr) as p:
            p.send(Message("TopicAcl", b"x"))
        assert all("Signature" not in r.ext_fields for r in fake.requests)


def test_namespace_prefixes_group_and_topic_on_the_broker(cluster):
    topic = unique("TopicNs")
    with Producer(unique("pg"), cluster.namesrv_addr, namespace="InstanceA") as p:
        assert p.group.startswith("InstanceA%")
        result = p.send(Message(topic, b"x"))
        assert result.send_status is SendStatus.SEND_OK
        assert result.message_queue.topic == topic  # shown without the namespace
        p.send(Message(topic, b"y"), mq=MessageQueue(topic, result.message_queue.broker_name, 0))
        p.send_batch([Message(topic, b"z")])
    assert stored_count(cluster.broker, f"InstanceA%{topic}") == 3
    assert stored_count(cluster.broker, topic) == 0


def test_wrap_and_unwrap_rules():
    assert wrap_namespace("ns", "T") == "ns%T"
    assert wrap_namespace("ns", "ns%T") == "ns%T"
    assert wrap_namespace("ns", "%RETRY%g") == "%RETRY%ns%g"
    assert wrap_namespace("ns", "TBW102") == "TBW102"
    assert wrap_namespace(None, "T") == "T"
    assert unwrap_namespace("ns", "%RETRY%ns%g") == "%RETRY%g"
    assert unwrap_namespace("ns", "other%T") == "other%T"
