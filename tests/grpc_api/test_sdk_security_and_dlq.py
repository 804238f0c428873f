"""TLS and the 5.x request signature of the SDK's gRPC clients; the proxy's
ForwardMessageToDeadLetterQueue and QueryAssignment."""

from __future__ import annotations

import hashlib
import hmac
import time

import pytest
from rocketmq_broker.proxy import GrpcProxy
from rocketmq_sdk import LitePullConsumer, Message, Producer
from rocketmq_sdk.consumer.simple_consumer import SimpleConsumer
from rocketmq_sdk.exceptions import RemotingError
from rocketmq_sdk.grpc import v2
from rocketmq_sdk.grpc.connection import GrpcConnection

from .conftest import unique

trustme = pytest.importorskip("trustme")


def test_tls_proxy_and_client(grpc_cluster):
    cluster, _ = grpc_cluster
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    key_pem = cert.private_key_pem.bytes()
    chain_pem = b"".join(blob.bytes() for blob in cert.cert_chain_pems)
    proxy = GrpcProxy(cluster.namesrv_addr, tls=(key_pem, chain_pem))
    proxy.start()
    try:
        with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc", use_tls=True,
                      tls_root_certificates=ca.cert_pem.bytes()) as p:
            assert p.send(Message(unique("tls"), b"secret")).queue_offset >= 0
        with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc", send_msg_timeout=1500,
                      retry_times_when_send_failed=0) as plain:  # plaintext to a TLS port
            with pytest.raises(RemotingError):
                plain.send(Message(unique("tls"), b"x"))
    finally:
        proxy.stop()


def test_requests_carry_the_5x_signature():
    conn = GrpcConnection("127.0.0.1:1", "client-1", namespace="ns", access_key="AK", secret_key="SK")
    try:
        md = dict(conn.metadata())
    finally:
        conn.close()
    date = md["x-mq-date-time"]
    assert len(date) == 16 and date[8] == "T" and date.endswith("Z")  # yyyyMMddTHHmmssZ
    expected = hmac.new(b"SK", date.encode(), hashlib.sha1).hexdigest()
    assert md["authorization"] == f"MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=x-mq-date-time, Signature={expected}"
    assert md["x-mq-client-id"] == "client-1" and md["x-mq-namespace"] == "ns"
    assert md["x-mq-language"] == "PYTHON" and md["x-mq-protocol"] == "GRPC_V2"


def test_forward_to_dead_letter_queue_and_query_assignment(grpc_cluster):
    cluster, proxy = grpc_cluster
    topic, group = unique("dl"), unique("gdl")
    with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc") as p:
        sent = p.send(Message(topic, b"poison", tags="T")).msg_id
    consumer = SimpleConsumer(group, endpoints=proxy.addr, protocol="grpc", await_duration=1)
    consumer.subscribe(topic)
    with consumer:
        got: list = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            got = consumer.receive(1, 10)
        assert got and got[0].msg_id == sent
        conn = consumer._connection()
        req = v2.ForwardMessageToDeadLetterQueueRequest(group=v2.Resource(name=group), topic=v2.Resource(name=topic),
                                                        receipt_handle=got[0].receipt_handle, message_id=sent,
                                                        delivery_attempt=1, max_delivery_attempts=1)
        assert conn.call("ForwardMessageToDeadLetterQueue", req, 5).status.code == v2.OK
        assert consumer.receive(1, 1) == []  # acked by the forward: not delivered again
        qa = conn.call("QueryAssignment", v2.QueryAssignmentRequest(topic=v2.Resource(name=topic),
                                                                     group=v2.Resource(name=group)), 5)
        assert qa.status.code == v2.OK
        assert [(a.message_queue.broker.name, a.message_queue.id) for a in qa.assignments] == [("broker-a", -1)]
    dlq = LitePullConsumer(unique("cg"), cluster.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    dlq.subscribe(f"%DLQ%{group}", "*")
    dlq.start()
    try:
        dead: list = []
        deadline = time.monotonic() + 20
        while not dead and time.monotonic() < deadline:
            dead = dlq.poll(500)
    finally:
        dlq.shutdown()
    assert [m.body for m in dead] == [b"poison"] and dead[0].msg_id == sent
