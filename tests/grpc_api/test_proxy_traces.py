"""Traces of gRPC clients, as Apache RocketMQ's proxy has them: the 5.x ``trace_context``
(an OpenTelemetry / W3C ``traceparent`` of the sender's span) is stored as the message property
``TRACE_CONTEXT`` and handed to every consumer, remoting or gRPC; the proxy writes no 4.x trace
records (``RMQ_SYS_TRACE_TOPIC``) for gRPC clients, nor does Apache's."""

from __future__ import annotations

from rocketmq_sdk import Message, Producer
from rocketmq_sdk.consumer.simple_consumer import SimpleConsumer

from .conftest import unique
from .test_official_client import consume
from .test_sdk_simple_consumer import receive_all

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_trace_context_reaches_remoting_and_grpc_consumers(grpc_cluster):
    cluster, proxy = grpc_cluster
    topic = unique("tr")
    with Producer(unique("pg"), endpoints=proxy.addr, protocol="grpc") as p:
        m = Message(topic, b"traced")
        m.put_property("TRACE_CONTEXT", TRACEPARENT)
        req, _ = p._request([m])
        assert req.messages[0].system_properties.trace_context == TRACEPARENT  # on the wire as 5.x has it
        sent = p.send(m).msg_id
    [stored] = consume(cluster.namesrv_addr, topic, 1)
    assert stored.msg_id == sent and stored.get_property("TRACE_CONTEXT") == TRACEPARENT
    consumer = SimpleConsumer(unique("gtr"), endpoints=proxy.addr, protocol="grpc", await_duration=1)
    consumer.subscribe(topic)
    with consumer:
        got = receive_all(consumer, 1)
        assert got[0].get_property("TRACE_CONTEXT") == TRACEPARENT
        consumer.ack(got[0])
